package helmtest

import (
	"os"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

const deployDoc = "../../../docs/deploy.md"

// TestDocsSidecarEqualsComponent: the container docs/deploy.md gives for
// clusters without MutatingAdmissionPolicy is the Component's, but for the
// image's tag, which the reader pins.
func TestDocsSidecarEqualsComponent(t *testing.T) {
	data, err := os.ReadFile(deployDoc)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(# The vllm-normalizer sidecar container.*?)```").FindAllStringSubmatch(string(data), -1)
	if len(blocks) != 1 {
		t.Fatalf("%s: %d yaml blocks starting with \"# The vllm-normalizer sidecar container\", want 1", deployDoc, len(blocks))
	}
	var containers []corev1.Container
	if err := yaml.UnmarshalStrict([]byte(blocks[0][1]), &containers); err != nil {
		t.Fatalf("%s: the sidecar block: %v", deployDoc, err)
	}
	if len(containers) != 1 {
		t.Fatalf("%s: the sidecar block holds %d containers, want 1", deployDoc, len(containers))
	}
	got, want := containers[0], componentContainer(t)
	if !strings.HasPrefix(got.Image, want.Image+":") {
		t.Errorf("%s: image %q, want the Component's %q with a tag", deployDoc, got.Image, want.Image)
	}
	got.Image, want.Image = "", ""
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s: the sidecar block differs from %s/sidecar.yaml:\ndocs:\n%s\nComponent:\n%s", deployDoc, componentDir, asJSON(got), asJSON(want))
	}
}
