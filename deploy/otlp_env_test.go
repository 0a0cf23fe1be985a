package deploy

import (
	"os"
	"testing"

	"go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/otlp"
)

// TestComponentSetsOTLPPodEnv: the Component's sidecar sets every variable
// the OTLP push reads as a resource attribute (otlp.PodEnv), from the
// downward API field or to the value the push documents, so that the
// chart's injected container, a copy of it, does too.
func TestComponentSetsOTLPPodEnv(t *testing.T) {
	raw, err := os.ReadFile("components/sidecar/sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var patch []struct {
		Op    string `yaml:"op"`
		Value struct {
			Env []struct {
				Name      string `yaml:"name"`
				Value     string `yaml:"value"`
				ValueFrom struct {
					FieldRef struct {
						FieldPath string `yaml:"fieldPath"`
					} `yaml:"fieldRef"`
				} `yaml:"valueFrom"`
			} `yaml:"env"`
		} `yaml:"value"`
	}
	if err := yaml.Unmarshal(raw, &patch); err != nil {
		t.Fatal(err)
	}
	if len(patch) != 1 || patch[0].Op != "add" {
		t.Fatalf("components/sidecar/sidecar.yaml: %d operations, want one add", len(patch))
	}
	type source struct{ fieldPath, value string }
	set := map[string]source{}
	for _, e := range patch[0].Value.Env {
		set[e.Name] = source{e.ValueFrom.FieldRef.FieldPath, e.Value}
	}
	for _, want := range otlp.PodEnv {
		got, ok := set[want.Env]
		if !ok {
			t.Errorf("the Component's sidecar does not set %s (%s)", want.Env, want.Attribute)
			continue
		}
		if got != (source{want.FieldPath, want.Value}) {
			t.Errorf("the Component sets %s from fieldPath %q / value %q, want %q / %q", want.Env, got.fieldPath, got.value, want.FieldPath, want.Value)
		}
	}
}
