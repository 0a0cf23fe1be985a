package deploy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// llmdRoles are the values of llm-d's llm-d.ai/role pod label (llm-d's
// router defines decode, prefill, encode and their joins, and keeps both
// as a deprecated spelling), and "" for a pod without the label.
var llmdRoles = []string{"decode", "prefill", "encode", "prefill-decode", "encode-prefill", "encode-prefill-decode", "both", ""}

// TestSidecarComponentReadyWithEveryRole renders the Component over a
// Deployment per llm-d role value, gives the sidecar its arguments as the
// kubelet would (the downward API's llm-d.ai/role label expanded into
// $(VAR)), runs the binary with them against a vLLM page and probes its
// readiness as the Component's readinessProbe does: a correctly labelled
// pod must stay in rotation, whatever its role.
func TestSidecarComponentReadyWithEveryRole(t *testing.T) {
	dir, rel := overlayDir(t, "components/sidecar")
	var resources []string
	for i, role := range llmdRoles {
		label := ""
		if role != "" {
			label = fmt.Sprintf(", llm-d.ai/role: %q", role)
		}
		name := fmt.Sprintf("pod-%d", i)
		resources = append(resources, name+".yaml")
		body := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels: {app: %[1]s, vllm-normalizer/sidecar: "true"}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s%[2]s}}
    spec:
      containers:
        - {name: vllm, image: vllm/vllm-openai:v0.11.0}
`, name, label)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kust := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s]\n", strings.Join(resources, ", "), rel)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	docs := kustomize(t, dir)
	if len(docs) != len(llmdRoles) {
		t.Fatalf("%d documents rendered, want %d", len(docs), len(llmdRoles))
	}

	page, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(page)
	}))
	defer upstream.Close()

	for _, d := range docs {
		tmpl := get(d, "spec", "template")
		podLabels, _ := get(tmpl, "metadata", "labels").(map[string]any)
		role, _ := podLabels["llm-d.ai/role"].(string)
		c := findContainer(t, get(tmpl, "spec"), "vllm-normalizer")
		args := kubeletArgs(t, c, podLabels)
		addr := testbin.FreeAddr(t)
		var run []string
		for _, a := range args {
			flag, _, _ := strings.Cut(a, "=")
			switch flag {
			case "--web.listen-address": // testbin's own, on a free port
			case "--web.routing-listen-address", "--proxy.listen-address":
				run = append(run, flag+"="+testbin.FreeAddr(t))
			case "--vllm.scrape-uri":
				run = append(run, flag+"="+upstream.URL+"/metrics")
			default:
				run = append(run, a)
			}
		}
		t.Run(fmt.Sprintf("role=%q", role), func(t *testing.T) {
			p := testbin.StartAt(t, addr, "http", run...)
			path, _ := get(c, "readinessProbe", "httpGet", "path").(string)
			resp, err := http.Get(p.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("readiness %s: %d, want 200\n%s", path, resp.StatusCode, p.Logs())
			}
			want := role
			if want == "" {
				want = "both"
			}
			// The role labels the upstream info once the first scrape is in.
			info := regexp.MustCompile(`vllm_normalizer_upstream_info\{[^}]*role="` + regexp.QuoteMeta(want) + `"`)
			deadline := time.Now().Add(30 * time.Second)
			for !info.MatchString(getBody(t, p.URL+"/metrics")) {
				if time.Now().After(deadline) {
					t.Fatalf("no vllm_normalizer_upstream_info with role=%q within 30 s\n%s", want, p.Logs())
				}
				time.Sleep(100 * time.Millisecond)
			}
			if p.Exited() {
				t.Fatalf("the sidecar exited\n%s", p.Logs())
			}
		})
	}
}

// podFields are the downward API's pod fields other than labels the
// Component reads (for the OTLP push's resource), as the kubelet might fill
// them.
var podFields = map[string]string{
	"metadata.name":      "vllm-7d4b9c-x2k8q",
	"metadata.namespace": "default",
	"metadata.uid":       "0f2c7a5e-3b1d-4c6e-9a8f-1d2e3f4a5b6c",
	"spec.nodeName":      "gpu-node-1",
}

// kubeletArgs returns a container's arguments with each $(VAR) of its env
// expanded as the kubelet does, the downward API's fieldRef to a pod label
// read from labels ("" when the pod lacks it), to another pod field from
// podFields.
func kubeletArgs(t *testing.T, c map[string]any, labels map[string]any) []string {
	t.Helper()
	env := map[string]string{}
	envs, _ := c["env"].([]any)
	for _, e := range envs {
		name, _ := get(e, "name").(string)
		if v, ok := get(e, "value").(string); ok {
			env[name] = v
			continue
		}
		path, _ := get(e, "valueFrom", "fieldRef", "fieldPath").(string)
		if v, ok := podFields[path]; ok {
			env[name] = v
			continue
		}
		key, ok := strings.CutPrefix(path, "metadata.labels['")
		if !ok || !strings.HasSuffix(key, "']") {
			t.Fatalf("env %s: fieldRef %q is not a pod label; the test knows only those", name, path)
		}
		v, _ := labels[strings.TrimSuffix(key, "']")].(string)
		env[name] = v
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var out []string
	raw, _ := c["args"].([]any)
	for _, a := range raw {
		out = append(out, ref.ReplaceAllStringFunc(fmt.Sprint(a), func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		}))
	}
	return out
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
