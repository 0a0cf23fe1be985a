// Package giev12 runs the endpoint picker's own metrics client from
// sigs.k8s.io/gateway-api-inference-extension v1.2.1 (GIE 1.2, whose
// default metrics path is the backend metrics client: HTTP GET, expfmt
// parse, then the queue, KV-usage, LoRA and cache-info specs, with the
// KV-usage default still vllm:gpu_cache_usage_perc) against raw vLLM pages
// and against the sidecar scraping them.
package giev12

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/backend"
	backendmetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/backend/metrics"

	"github.com/fos-study/vllm-normalizer/e2e/consumers/harness"
)

// What GIE 1.2's backend metrics client reads: no running count.
var fields = []string{harness.FieldWaiting, harness.FieldKV, harness.FieldCache, harness.FieldLoRA}

// defaults reads the EPP's default metric names from GIE 1.2.1's own source
// (pkg/epp/server/runserver.go): importing that package would pull in the
// whole EPP server.
func defaults(t *testing.T) (queued, kv, lora, cacheInfo string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api-inference-extension").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "pkg", "epp", "server", "runserver.go"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) string {
		m := regexp.MustCompile(name + `\s*=\s*"([^"]+)"`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s not found in GIE's runserver.go", name)
		}
		return string(m[1])
	}
	return get("DefaultTotalQueuedRequestsMetric"), get("DefaultKvCacheUsagePercentageMetric"),
		get("DefaultLoraInfoMetric"), get("DefaultCacheInfoMetric")
}

func TestDefaultsAreTheLegacyKVName(t *testing.T) {
	if _, kv, _, _ := defaults(t); kv != "vllm:gpu_cache_usage_perc" {
		t.Fatalf("GIE 1.2.1's default KV-usage metric is %q; this test module is about the legacy default", kv)
	}
}

// fetch runs one EPP metrics fetch of host+path with the default mapping.
// A nil state means the EPP got nothing from the page.
func fetch(t *testing.T, host, path string) (*harness.RouterRead, error) {
	t.Helper()
	q, kv, lora, cache := defaults(t)
	mapping, err := backendmetrics.NewMetricMapping(q, kv, lora, cache)
	if err != nil {
		t.Fatal(err)
	}
	client := &backendmetrics.PodMetricsClientImpl{
		MetricMapping:            mapping,
		ModelServerMetricsPath:   path,
		ModelServerMetricsScheme: "http",
		Client:                   http.DefaultClient,
	}
	pod := &backend.Pod{NamespacedName: types.NamespacedName{Namespace: "llm", Name: "vllm-0"}, PodName: "vllm-0", MetricsHost: host}
	m, err := client.FetchMetrics(context.Background(), pod, backendmetrics.NewMetricsState())
	if m == nil {
		return nil, err
	}
	return &harness.RouterRead{
		Waiting:      float64(m.WaitingQueueSize),
		KV:           m.KVCacheUsagePercent,
		BlockSize:    m.CacheBlockSize,
		NumGPUBlocks: m.CacheNumGPUBlocks,
		LoRARunning:  slices.Sorted(maps.Keys(m.ActiveModels)),
		LoRAWaiting:  slices.Sorted(maps.Keys(m.WaitingModels)),
		MaxLoRA:      m.MaxActiveModels,
	}, err
}

func TestNeverWorseThanRaw(t *testing.T) {
	harness.EachPage(t, func(t *testing.T, p harness.Page, truth harness.Truth, up *harness.Upstream, side *harness.Sidecar) {
		raw, rawErr := fetch(t, up.Host, "/metrics")
		if raw == nil {
			t.Logf("raw: the EPP gets nothing from the page: %v", rawErr)
			raw = &harness.RouterRead{}
		}
		t.Logf("truth %+v", truth)
		t.Logf("raw:  %+v (errors %v)", *raw, rawErr)
		for _, path := range []string{"/metrics", "/metrics/routing"} {
			got, err := fetch(t, side.Host, path)
			if got == nil {
				t.Errorf("sidecar %s: the EPP gets nothing from it: %v", path, err)
				continue
			}
			t.Logf("%s: %+v (errors %v)", path, *got, err)
			exact := p.DataParallel && path == "/metrics/routing" // one engine: nothing to collapse
			harness.CheckRouter(t, fmt.Sprintf("sidecar %s", path), fields, truth, *raw, *got, exact)
			// GIE 1.2 reads KV usage only as vllm:gpu_cache_usage_perc:
			// the routing view must serve it wherever KV usage is known.
			if path == "/metrics/routing" && truth.HasKV && !harness.Equal(got.KV, truth.KV) {
				t.Errorf("routing view: KV usage read %v, want %v", got.KV, truth.KV)
			}
		}
	})
}
