package helmtest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Paths from this package's directory.
const (
	chartDir     = "../vllm-normalizer"
	ruleSources  = "../../prometheus/*.yml"
	dashSources  = "../../../dashboards/*.json"
	componentDir = "../../components/sidecar"
)

// helm returns the helm binary: on PATH or in $(go env GOPATH)/bin, where
// deploy/ci-deps.sh installs it. Without it the test skips, and fails
// under CI=true, where ci-deps.sh has run.
func helm(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	const msg = "helm not found on PATH or in $(go env GOPATH)/bin: install it with deploy/ci-deps.sh"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// helmTemplate renders the chart as release "vllm-nz" in namespace
// "monitoring" and returns the output, or fails with helm's message.
func helmTemplate(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := runHelmTemplate(t, args...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func runHelmTemplate(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helm(t), append([]string{"template", "vllm-nz", chartDir, "--namespace", "monitoring"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stderr.Bytes(), err
	}
	return stdout.Bytes(), nil
}

// scheme knows every kind the chart may render: Kubernetes' built-in types
// and the Prometheus Operator's.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// decodeStrict decodes every document of a rendered chart into its Go
// API type; a field the type does not have, a duplicate field or an
// unknown kind fails the test.
func decodeStrict(t *testing.T, rendered []byte) []runtime.Object {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(rendered)))
	var objs []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if tm.Kind == "" {
			continue // a document of comments only
		}
		gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
		obj, err := scheme.New(gvk)
		if err != nil {
			t.Fatalf("rendered %s is no known API type: %v", gvk, err)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", gvk, err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

func kinds(objs []runtime.Object) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[reflect.TypeOf(o).Elem().Name()]++
	}
	return n
}

func ofType[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if x, ok := o.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// sourceRuleGroups decodes deploy/prometheus/*.yml strictly into the
// Prometheus Operator's rule group type, in file order.
func sourceRuleGroups(t *testing.T) []monitoringv1.RuleGroup {
	t.Helper()
	files, err := filepath.Glob(ruleSources)
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no rule files (%v)", ruleSources, err)
	}
	var groups []monitoringv1.RuleGroup
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var spec monitoringv1.PrometheusRuleSpec
		if err := yaml.UnmarshalStrict(data, &spec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		groups = append(groups, spec.Groups...)
	}
	return groups
}

func groupNames(groups []monitoringv1.RuleGroup) []string {
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	return names
}

func checkCommonLabels(t *testing.T, objs []runtime.Object, extra map[string]string) {
	t.Helper()
	want := map[string]string{
		"app.kubernetes.io/instance":   "vllm-nz",
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/part-of":    "vllm-normalizer",
	}
	for k, v := range extra {
		want[k] = v
	}
	for _, o := range objs {
		m := o.(metav1.Object)
		for k, v := range want {
			if got := m.GetLabels()[k]; got != v {
				t.Errorf("%T %s: label %s=%q, want %q", o, m.GetName(), k, got, v)
			}
		}
		if !strings.HasPrefix(m.GetLabels()["helm.sh/chart"], "vllm-normalizer-") {
			t.Errorf("%T %s: no helm.sh/chart label: %v", o, m.GetName(), m.GetLabels())
		}
		if len(m.GetName()) > 63 {
			t.Errorf("%T %s: name longer than 63 characters", o, m.GetName())
		}
	}
}

// checkDashboards: one ConfigMap per dashboards/*.json, carrying the file
// as it is and the Grafana sidecar's label.
func checkDashboards(t *testing.T, objs []runtime.Object, namespace string) {
	t.Helper()
	files, _ := filepath.Glob(dashSources)
	cms := ofType[*corev1.ConfigMap](objs)
	if len(cms) != len(files) {
		t.Fatalf("%d dashboard ConfigMaps, want one for each of %v", len(cms), files)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		i := slices.IndexFunc(cms, func(cm *corev1.ConfigMap) bool { _, ok := cm.Data[name]; return ok })
		if i < 0 {
			t.Errorf("no ConfigMap carries %s", name)
			continue
		}
		cm := cms[i]
		if got := cm.Data[name]; got != strings.TrimRight(string(src), "\n") {
			t.Errorf("ConfigMap %s: %s differs from %s", cm.Name, name, f)
		}
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("ConfigMap %s: labels %v, want grafana_dashboard: \"1\"", cm.Name, cm.Labels)
		}
		if cm.Namespace != namespace {
			t.Errorf("ConfigMap %s: namespace %q, want %q", cm.Name, cm.Namespace, namespace)
		}
	}
}

// componentPortNames are the port names of the Component's sidecar container.
func componentPortNames(t *testing.T) []string {
	t.Helper()
	c := componentContainer(t)
	var names []string
	for _, p := range c.Ports {
		names = append(names, p.Name)
	}
	return names
}

func TestRenderDefaultValues(t *testing.T) {
	objs := decodeStrict(t, helmTemplate(t))
	dashboards, _ := filepath.Glob(dashSources)
	want := map[string]int{"PodMonitor": 1, "PrometheusRule": 1, "ConfigMap": len(dashboards)}
	if got := kinds(objs); !reflect.DeepEqual(got, want) {
		t.Fatalf("default values render %v, want %v (injection and NetworkPolicy are off by default)", got, want)
	}
	checkCommonLabels(t, objs, nil)

	pm := ofType[*monitoringv1.PodMonitor](objs)[0]
	if pm.Namespace != "monitoring" || !pm.Spec.NamespaceSelector.Any {
		t.Errorf("PodMonitor: namespace %q, namespaceSelector %+v; want the release namespace and any", pm.Namespace, pm.Spec.NamespaceSelector)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("PodMonitor endpoints: %+v", pm.Spec.PodMetricsEndpoints)
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Port == nil || !slices.Contains(componentPortNames(t), *ep.Port) || *ep.Port != "normalizer" {
		t.Errorf("PodMonitor scrapes port %v; want the Component's full-page port normalizer (ports %v)", ep.Port, componentPortNames(t))
	}
	if ep.Path != "/metrics" || ep.Interval != "15s" {
		t.Errorf("PodMonitor endpoint %+v: want /metrics every 15s", ep)
	}

	pr := ofType[*monitoringv1.PrometheusRule](objs)[0]
	if want := sourceRuleGroups(t); !reflect.DeepEqual(pr.Spec.Groups, want) {
		t.Errorf("PrometheusRule groups %v differ from %s (groups %v)", groupNames(pr.Spec.Groups), ruleSources, groupNames(want))
	}
	checkDashboards(t, objs, "monitoring")
}

func TestRenderFullValues(t *testing.T) {
	objs := decodeStrict(t, helmTemplate(t, "-f", "testdata/values-full.yaml"))
	dashboards, _ := filepath.Glob(dashSources)
	// Targets: llm-d and aibrix from the file, production-stack and
	// opt-in from the defaults; kserve switched off.
	want := map[string]int{
		"PodMonitor": 1, "PrometheusRule": 1, "ConfigMap": len(dashboards), "NetworkPolicy": 1,
		"MutatingAdmissionPolicy": 4, "MutatingAdmissionPolicyBinding": 4,
	}
	if got := kinds(objs); !reflect.DeepEqual(got, want) {
		t.Fatalf("full values render %v, want %v", got, want)
	}
	checkCommonLabels(t, objs, map[string]string{"team": "platform", "app.kubernetes.io/name": "nz"})

	pm := ofType[*monitoringv1.PodMonitor](objs)[0]
	if pm.Namespace != "observability" || pm.Labels["release"] != "kube-prometheus-stack" ||
		!reflect.DeepEqual(pm.Spec.NamespaceSelector.MatchNames, []string{"llm", "llm-staging"}) ||
		len(pm.Spec.PodMetricsEndpoints[0].RelabelConfigs) != 1 || len(pm.Spec.PodMetricsEndpoints[0].MetricRelabelConfigs) != 1 {
		t.Errorf("PodMonitor does not carry the full values: %+v", pm)
	}

	pr := ofType[*monitoringv1.PrometheusRule](objs)[0]
	var wantGroups []string
	for _, g := range sourceRuleGroups(t) {
		if g.Name != "vllm-derived-5m" {
			wantGroups = append(wantGroups, g.Name)
		}
	}
	if got := groupNames(pr.Spec.Groups); !slices.Equal(got, wantGroups) {
		t.Errorf("PrometheusRule groups %v, want %v (vllm-derived-5m excluded)", got, wantGroups)
	}
	checkDashboards(t, objs, "grafana")

	np := ofType[*networkingv1.NetworkPolicy](objs)[0]
	if len(np.Spec.Ingress) != 2 {
		t.Fatalf("NetworkPolicy ingress %+v: want Prometheus's rule and the routers'", np.Spec.Ingress)
	}
	var ports []string
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			ports = append(ports, p.Port.String())
		}
	}
	sort.Strings(ports)
	wantPorts := componentPortNames(t)
	sort.Strings(wantPorts)
	if !slices.Equal(ports, wantPorts) {
		t.Errorf("NetworkPolicy opens ports %v, want the Component's %v", ports, wantPorts)
	}

	policies := ofType[*admissionv1.MutatingAdmissionPolicy](objs)
	bindings := ofType[*admissionv1.MutatingAdmissionPolicyBinding](objs)
	var names []string
	for i, p := range policies {
		names = append(names, p.Name)
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Fail {
			t.Errorf("policy %s: failurePolicy %v, want Fail", p.Name, p.Spec.FailurePolicy)
		}
		if bindings[i].Spec.PolicyName != p.Name {
			t.Errorf("binding %s binds %q, want %q", bindings[i].Name, bindings[i].Spec.PolicyName, p.Name)
		}
		if bindings[i].Spec.MatchResources == nil || bindings[i].Spec.MatchResources.NamespaceSelector == nil {
			t.Errorf("binding %s has no namespaceSelector", bindings[i].Name)
		}
	}
	if want := []string{"vllm-nz-aibrix", "vllm-nz-llm-d", "vllm-nz-opt-in", "vllm-nz-production-stack"}; !slices.Equal(names, want) {
		t.Errorf("policies %v, want %v", names, want)
	}
}

// TestRenderV1beta1 renders the injection for Kubernetes 1.34-1.35 and
// decodes it into the v1beta1 types.
func TestRenderV1beta1(t *testing.T) {
	objs := decodeStrict(t, helmTemplate(t, "--set", "injection.enabled=true", "--set", "injection.apiVersion=v1beta1"))
	if n := len(ofType[*admissionv1beta1.MutatingAdmissionPolicy](objs)); n != 4 {
		t.Errorf("%d v1beta1 MutatingAdmissionPolicies, want 4 (one per default target)", n)
	}
	if n := len(ofType[*admissionv1beta1.MutatingAdmissionPolicyBinding](objs)); n != 4 {
		t.Errorf("%d v1beta1 MutatingAdmissionPolicyBindings, want 4", n)
	}
}

// TestSchemaRejectsBadValues: values.schema.json names the bad value
// before anything renders.
func TestSchemaRejectsBadValues(t *testing.T) {
	for _, bad := range []struct{ set, want string }{
		{"injection.failurePolicy=Sometimes", "failurePolicy"},
		{"podMonitor.intervl=15s", "intervl"},
		{"injection.apiVersion=v1alpha1", "apiVersion"},
		{"injection.targets.llm-d.scrapeURI=127.0.0.1:8000", "scrapeURI"},
		{"podMonitor.interval=15 seconds", "interval"},
	} {
		out, err := runHelmTemplate(t, "--set", bad.set)
		if err == nil {
			t.Errorf("--set %s rendered; want a schema error", bad.set)
			continue
		}
		if !strings.Contains(string(out), bad.want) {
			t.Errorf("--set %s: error does not name %s:\n%s", bad.set, bad.want, out)
		}
	}
}

func TestHelmLint(t *testing.T) {
	for _, args := range [][]string{nil, {"-f", "testdata/values-full.yaml"}} {
		cmd := exec.Command(helm(t), append([]string{"lint", "--strict", chartDir}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s", args, err, out)
		}
	}
}
