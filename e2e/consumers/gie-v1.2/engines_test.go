package giev12

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/backend"
	backendmetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/backend/metrics"

	"github.com/fos-study/vllm-normalizer/e2e/consumers/harness"
)

// sglangFlags reads the metric flags GIE 1.2.1's model-server guide
// (site-src/implementations/model-servers.md) gives for SGLang.
func sglangFlags(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api-inference-extension").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "site-src", "implementations", "model-servers.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	doc = doc[strings.Index(doc, "## SGLang"):]
	flags := map[string]string{}
	for _, m := range regexp.MustCompile(`name=([\w-]+)\s*\n\s*value="([^"]*)"`).FindAllStringSubmatch(doc, -1) {
		flags[m[1]] = m[2]
	}
	if len(flags) == 0 {
		t.Fatal("no SGLang flags found in GIE 1.2.1's model-servers.md")
	}
	return flags
}

// TestReadersTableIsGIEs: the product's gie-v1.2 table holds exactly the
// names GIE 1.2.1's SGLang recipe sets.
func TestReadersTableIsGIEs(t *testing.T) {
	flags := sglangFlags(t)
	b, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "routing", "readers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Consumers []struct {
			Consumer string `yaml:"consumer"`
			Engines  map[string]struct {
				Waiting string `yaml:"waiting"`
				Running string `yaml:"running"`
				KVUsage string `yaml:"kv_usage"`
			} `yaml:"engines"`
		} `yaml:"consumers"`
	}
	if err := yaml.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	for _, c := range table.Consumers {
		if c.Consumer != "gie-v1.2" {
			continue
		}
		e := c.Engines["sglang"]
		for _, w := range [][2]string{{flags["total-queued-requests-metric"], e.Waiting}, {flags["kv-cache-usage-percentage-metric"], e.KVUsage}} {
			if w[0] != w[1] {
				t.Errorf("GIE 1.2.1's SGLang recipe reads %q, the table says %q", w[0], w[1])
			}
		}
		if e.Running != "" {
			t.Errorf("the table says GIE 1.2 reads %q for running; 1.2.1 reads no running count", e.Running)
		}
		return
	}
	t.Fatal("the table has no gie-v1.2 consumer")
}

// fetchSGLang runs GIE 1.2.1's metrics client with its SGLang recipe.
func fetchSGLang(t *testing.T, host, path string) (*harness.RouterRead, error) {
	t.Helper()
	flags := sglangFlags(t)
	_, _, _, cache := defaults(t)
	mapping, err := backendmetrics.NewMetricMapping(flags["total-queued-requests-metric"], flags["kv-cache-usage-percentage-metric"], flags["lora-info-metric"], cache)
	if err != nil {
		t.Fatal(err)
	}
	client := &backendmetrics.PodMetricsClientImpl{MetricMapping: mapping, ModelServerMetricsPath: path, ModelServerMetricsScheme: "http", Client: http.DefaultClient}
	pod := &backend.Pod{NamespacedName: types.NamespacedName{Namespace: "llm", Name: "sglang-0"}, PodName: "sglang-0", MetricsHost: host}
	m, err := client.FetchMetrics(context.Background(), pod, backendmetrics.NewMetricsState())
	if m == nil {
		return nil, err
	}
	return &harness.RouterRead{Waiting: float64(m.WaitingQueueSize), KV: m.KVCacheUsagePercent}, err
}

// TestSGLangRecipeNeverWorseThanRaw: GIE 1.2.1 configured for SGLang as
// its guide says reads the sidecar's router-facing pages at least as right
// as raw, and the collapsed truth on a two-rank page.
func TestSGLangRecipeNeverWorseThanRaw(t *testing.T) {
	sglang := harness.Native{Running: "sglang:num_running_reqs", Waiting: "sglang:num_queue_reqs", KV: "sglang:token_usage", EngineLabel: "dp_rank"}
	for _, p := range []struct {
		name     string
		body     []byte
		twoRanks bool
	}{
		{"sglang 04", harness.Fixture(t, "04"), false},
		{"sglang dynamo worker 26", harness.Fixture(t, "26"), false},
		{"sglang 04, two data-parallel ranks", harness.TwoRanks(harness.Fixture(t, "04"), 0.5, "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage"), true},
	} {
		t.Run(p.name, func(t *testing.T) {
			truth, err := harness.ComputeNativeTruth(p.body, sglang)
			if err != nil {
				t.Fatal(err)
			}
			up := harness.NewUpstream(t, p.body)
			side := harness.StartSidecar(t, up)
			raw, rawErr := fetchSGLang(t, up.Host, "/metrics")
			if raw == nil {
				t.Fatalf("raw: the EPP gets nothing from the page: %v", rawErr)
			}
			t.Logf("truth %+v\nraw %+v (%v)", truth, *raw, rawErr)
			for _, target := range []struct{ host, path string }{{side.Host, "/metrics/routing"}, {side.RoutingHost, "/metrics"}} {
				got, err := fetchSGLang(t, target.host, target.path)
				if got == nil {
					t.Errorf("%s%s: the EPP gets nothing: %v", target.host, target.path, err)
					continue
				}
				harness.CheckRouter(t, target.host+target.path, []string{harness.FieldWaiting, harness.FieldKV}, truth, *raw, *got, true)
			}
			if p.twoRanks && harness.Equal(raw.Waiting, truth.Waiting) {
				t.Errorf("raw already reads the summed queue %v; this page does not test data parallelism", raw.Waiting)
			}
		})
	}
}
