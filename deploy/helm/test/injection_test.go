package helmtest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The image both ways set: the chart through image.*, the Component
// through the overlay's images: entry.
const (
	testImageName = "registry.example.com/vllm-normalizer"
	testImageTag  = "v0.1.0"
	podNamespace  = "llm"
	// notInjectedPrefix names the testdata pods that no default target
	// selects (a router's, say).
	notInjectedPrefix = "not-injected-"
)

// componentContainer is the container the Component's JSON patch adds.
func componentContainer(t *testing.T) corev1.Container {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(componentDir, "sidecar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ops []struct {
		Op    string           `json:"op"`
		Path  string           `json:"path"`
		Value corev1.Container `json:"value"`
	}
	if err := yaml.UnmarshalStrict(data, &ops); err != nil {
		t.Fatalf("%s/sidecar.yaml: %v", componentDir, err)
	}
	for _, op := range ops {
		if op.Op == "add" && strings.HasSuffix(op.Path, "/containers/-") {
			return op.Value
		}
	}
	t.Fatalf("%s/sidecar.yaml adds no container", componentDir)
	return corev1.Container{}
}

// readDeployment reads a testdata Deployment strictly.
func readDeployment(t *testing.T, path string) *appsv1.Deployment {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &d
}

// throughComponent builds the Deployment, labelled for it, through the real
// kustomize Component (its files as they are in deploy/components/sidecar)
// with kustomize's own library, and returns the resulting pod spec.
func throughComponent(t *testing.T, d *appsv1.Deployment) corev1.PodSpec {
	t.Helper()
	d = d.DeepCopy()
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	d.Labels["vllm-normalizer/sidecar"] = "true"
	deployment, err := yaml.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	kustomization, err := yaml.Marshal(kusttypes.Kustomization{
		TypeMeta:   kusttypes.TypeMeta{APIVersion: kusttypes.KustomizationVersion, Kind: kusttypes.KustomizationKind},
		Resources:  []string{"deployment.yaml"},
		Components: []string{"../component"},
		Images:     []kusttypes.Image{{Name: "ghcr.io/fos-study/vllm-normalizer", NewName: testImageName, NewTag: testImageTag}},
	})
	if err != nil {
		t.Fatal(err)
	}
	fs := filesys.MakeFsInMemory()
	files := map[string][]byte{"/overlay/kustomization.yaml": kustomization, "/overlay/deployment.yaml": deployment}
	entries, err := os.ReadDir(componentDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(componentDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files["/component/"+e.Name()] = data
	}
	for name, data := range files {
		if err := fs.WriteFile(name, data); err != nil {
			t.Fatal(err)
		}
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/overlay")
	if err != nil {
		t.Fatalf("kustomize build with the Component: %v", err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var built appsv1.Deployment
	if err := yaml.UnmarshalStrict(out, &built); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return built.Spec.Template.Spec
}

// clientWithOpenAPI serves Kubernetes' own OpenAPI v3 documents (client-go's
// embedded copies) where the fake clientset's discovery has none; the
// admission plugin reads the Pod schema from there.
type clientWithOpenAPI struct{ *fake.Clientset }

func (c clientWithOpenAPI) Discovery() discovery.DiscoveryInterfaces {
	return discoveryWithOpenAPI{c.Clientset.Discovery()}
}

type discoveryWithOpenAPI struct{ discovery.DiscoveryInterfaces }

func (discoveryWithOpenAPI) OpenAPIV3() openapi.Client { return openapitest.NewEmbeddedFileClient() }

type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

// mutatingAdmission is Kubernetes' MutatingAdmissionPolicy admission plugin
// (k8s.io/apiserver), wired as the API server wires it, over a fake
// clientset holding the given policies and bindings and the pods' namespace.
func mutatingAdmission(t *testing.T, objs ...runtime.Object) *mutating.Plugin {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNamespace, Labels: map[string]string{"kubernetes.io/metadata.name": podNamespace}}}
	client := clientWithOpenAPI{fake.NewClientset(append([]runtime.Object{ns}, objs...)...)}
	var _ kubernetes.Interface = client
	factory := informers.NewSharedInformerFactory(client, 0)
	p, err := mutating.NewPlugin(nil)
	if err != nil {
		t.Fatal(err)
	}
	p.InspectFeatureGates(utilfeature.DefaultFeatureGate)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	p.SetExternalKubeClientSet(client)
	p.SetExternalKubeInformerFactory(factory)
	p.SetRESTMapper(mapper)
	p.SetDynamicClient(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()))
	p.SetDrainedNotification(stop)
	p.SetUnconditionalAuthorizer(allowAll{})
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return p
}

// admit runs a new pod through the plugin as the API server does on CREATE,
// and returns the pod as admitted.
func admit(t *testing.T, p *mutating.Plugin, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod = pod.DeepCopy()
	attrs := admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), pod.Namespace, pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false,
		&user.DefaultInfo{Name: "system:serviceaccount:kube-system:replicaset-controller"})
	if err := p.Admit(context.Background(), attrs, admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme)); err != nil {
		t.Fatalf("admission of a pod labelled %v: %v", pod.Labels, err)
	}
	return pod
}

// podOf is the pod a controller creates from a Deployment's template.
func podOf(d *appsv1.Deployment) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: d.Name + "-", Namespace: podNamespace, Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations},
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
	}
}

func containerNames(spec corev1.PodSpec) []string {
	var names []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

func asJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// chartPolicies renders the chart with injection on (default targets) and
// the test image, and returns its v1 policies and bindings.
func chartPolicies(t *testing.T, args ...string) []runtime.Object {
	t.Helper()
	args = append([]string{"--set", "injection.enabled=true", "--set", "injection.apiVersion=v1", "--set", "injection.failurePolicy=Fail",
		"--set", "image.registry=", "--set", "image.repository=" + testImageName, "--set", "image.tag=" + testImageTag}, args...)
	var out []runtime.Object
	for _, o := range decodeStrict(t, helmTemplate(t, args...)) {
		switch o.(type) {
		case *admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding:
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		t.Fatal("the chart rendered no MutatingAdmissionPolicy")
	}
	return out
}

// TestInjectionEqualsComponent: the pods that llm-d's, KServe's and
// production-stack's controllers create from their own templates
// (testdata/pods), admitted through the chart's policies by Kubernetes'
// admission plugin, come out exactly as the kustomize Component makes them:
// the same pod spec, sidecar included, nothing else touched.
func TestInjectionEqualsComponent(t *testing.T) {
	plugin := mutatingAdmission(t, chartPolicies(t)...)
	files, _ := filepath.Glob("testdata/pods/*.yaml")
	injected := 0
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), notInjectedPrefix) {
			continue // a pod no target selects: TestInjectionLeavesOthersAlone
		}
		d := readDeployment(t, f)
		t.Run(filepath.Base(f), func(t *testing.T) {
			pod := podOf(d)
			got := admit(t, plugin, pod)
			want := throughComponent(t, d)
			if !apiequality.Semantic.DeepEqual(got.Spec, want) {
				t.Fatalf("admitted pod spec differs from the Component's\nadmitted containers %v, Component's %v\nadmitted:\n%s\nComponent:\n%s",
					containerNames(got.Spec), containerNames(want), asJSON(got.Spec), asJSON(want))
			}
			if n := len(got.Spec.Containers) - len(pod.Spec.Containers); n != 1 {
				t.Fatalf("%d containers added, want the one sidecar", n)
			}
			if !apiequality.Semantic.DeepEqual(got.Spec.Containers[:len(pod.Spec.Containers)], pod.Spec.Containers) {
				t.Errorf("the pod's own containers changed")
			}
			if !strings.Contains(asJSON(got.Spec.Containers[len(got.Spec.Containers)-1]), "llm-d.ai/role") {
				t.Errorf("the sidecar does not take its role from the pod's llm-d.ai/role label")
			}
			// Once only: the admitted pod, admitted again, stays as it is.
			if again := admit(t, plugin, got); !apiequality.Semantic.DeepEqual(again.Spec, got.Spec) {
				t.Errorf("a second admission changed the pod: containers %v", containerNames(again.Spec))
			}
			injected++
		})
	}
	if injected < 3 {
		t.Errorf("%d pods injected; want llm-d's, KServe's and production-stack's at least (%v)", injected, files)
	}
}

// TestInjectionLeavesOthersAlone: pods that no target selects, that opt
// out, or that are LeaderWorkerSet workers get nothing.
func TestInjectionLeavesOthersAlone(t *testing.T) {
	plugin := mutatingAdmission(t, chartPolicies(t)...)
	decode := podOf(readDeployment(t, "testdata/pods/llm-d-decode.yaml"))

	optedOut := decode.DeepCopy()
	optedOut.Labels = map[string]string{"vllm-normalizer/inject": "false"}
	for k, v := range decode.Labels {
		optedOut.Labels[k] = v
	}
	worker := decode.DeepCopy()
	worker.Labels = map[string]string{"leaderworkerset.sigs.k8s.io/worker-index": "1"}
	for k, v := range decode.Labels {
		worker.Labels[k] = v
	}
	cases := map[string]*corev1.Pod{"opted out": optedOut, "LeaderWorkerSet worker 1": worker}
	files, _ := filepath.Glob("testdata/pods/*.yaml")
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), notInjectedPrefix) {
			cases[filepath.Base(f)] = podOf(readDeployment(t, f))
		}
	}
	if len(cases) < 3 {
		t.Fatalf("no testdata/pods/%s*.yaml: a pod that no target selects", notInjectedPrefix)
	}
	for name, pod := range cases {
		if got := admit(t, plugin, pod); !apiequality.Semantic.DeepEqual(got.Spec, pod.Spec) {
			t.Errorf("%s: admission changed the pod: containers %v", name, containerNames(got.Spec))
		}
	}

	// The leader of a LeaderWorkerSet group (worker-index 0) is injected.
	leader := decode.DeepCopy()
	leader.Labels["leaderworkerset.sigs.k8s.io/worker-index"] = "0"
	if got := admit(t, plugin, leader); !slices.Contains(containerNames(got.Spec), "vllm-normalizer") {
		t.Errorf("LeaderWorkerSet leader not injected: containers %v", containerNames(got.Spec))
	}
}

// TestInjectionScrapeURI: a target's scrapeURI replaces the Component's
// scrape URI, and extraArgs follow the Component's arguments.
func TestInjectionScrapeURI(t *testing.T) {
	plugin := mutatingAdmission(t, chartPolicies(t,
		"--set", "injection.targets.llm-d.scrapeURI=http://127.0.0.1:8200/metrics",
		"--set", "injection.extraArgs={--vllm.scrape-interval=100ms}")...)
	got := admit(t, plugin, podOf(readDeployment(t, "testdata/pods/llm-d-decode.yaml")))
	sidecar := got.Spec.Containers[len(got.Spec.Containers)-1]
	want := slices.Clone(componentContainer(t).Args)
	for i, a := range want {
		if strings.HasPrefix(a, "--vllm.scrape-uri=") {
			want[i] = "--vllm.scrape-uri=http://127.0.0.1:8200/metrics"
		}
	}
	want = append(want, "--vllm.scrape-interval=100ms")
	if !slices.Equal(sidecar.Args, want) {
		t.Errorf("sidecar args %q, want %q", sidecar.Args, want)
	}
}
