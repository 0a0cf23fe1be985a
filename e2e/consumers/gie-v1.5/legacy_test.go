package giev15

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	backendmetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/backend/metrics"
	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"

	"github.com/fos-study/vllm-normalizer/e2e/consumers/harness"
)

// optionDefaults reads the EPP's default metric names from GIE 1.5.0's own
// source (pkg/epp/server/options.go): importing that package would pull in
// the whole EPP server.
func optionDefaults(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api-inference-extension").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "pkg", "epp", "server", "options.go"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, name := range []string{"TotalQueuedRequestsMetric", "TotalRunningRequestsMetric", "KVCacheUsagePercentageMetric", "LoRAInfoMetric", "CacheInfoMetric"} {
		m := regexp.MustCompile(`\b` + name + `:\s*"([^"]+)"`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("default of %s not found in GIE's options.go", name)
		}
		got[name] = string(m[1])
	}
	return got
}

// fetchLegacy runs GIE 1.5's legacy metrics client (the enableLegacyMetrics
// feature gate) with its default names.
func fetchLegacy(t *testing.T, host, path string) (*harness.RouterRead, error) {
	t.Helper()
	d := optionDefaults(t)
	client, err := backendmetrics.NewPodMetricsClientImpl(logr.Discard(), backendmetrics.Config{
		ModelServerMetricsScheme:     "http",
		ModelServerMetricsPath:       path,
		TotalQueuedRequestsMetric:    d["TotalQueuedRequestsMetric"],
		TotalRunningRequestsMetric:   d["TotalRunningRequestsMetric"],
		KVCacheUsagePercentageMetric: d["KVCacheUsagePercentageMetric"],
		LoRAInfoMetric:               d["LoRAInfoMetric"],
		CacheInfoMetric:              d["CacheInfoMetric"],
	})
	if err != nil {
		t.Fatal(err)
	}
	meta := &fwkdl.EndpointMetadata{NamespacedName: types.NamespacedName{Namespace: "llm", Name: "vllm-0"}, PodName: "vllm-0", MetricsHost: host}
	m, err := client.FetchMetrics(context.Background(), meta, fwkdl.NewMetrics())
	if m == nil {
		return nil, err
	}
	return &harness.RouterRead{
		Waiting:      float64(m.WaitingQueueSize),
		Running:      float64(m.RunningRequestsSize),
		KV:           m.KVCacheUsagePercent,
		BlockSize:    m.CacheBlockSize,
		NumGPUBlocks: m.CacheNumBlocks,
		LoRARunning:  slices.Sorted(maps.Keys(m.ActiveModels)),
		LoRAWaiting:  slices.Sorted(maps.Keys(m.WaitingModels)),
		MaxLoRA:      m.MaxActiveModels,
	}, err
}

func TestLegacyMetricsClientNeverWorseThanRaw(t *testing.T) {
	harness.EachPage(t, func(t *testing.T, p harness.Page, truth harness.Truth, up *harness.Upstream, side *harness.Sidecar) {
		raw, rawErr := fetchLegacy(t, up.Host, "/metrics")
		if raw == nil {
			t.Logf("raw: the EPP gets nothing from the page: %v", rawErr)
			raw = &harness.RouterRead{}
		}
		for _, path := range []string{"/metrics", "/metrics/routing"} {
			got, err := fetchLegacy(t, side.Host, path)
			if got == nil {
				t.Errorf("sidecar %s: the EPP gets nothing from it: %v", path, err)
				continue
			}
			exact := p.DataParallel && path == "/metrics/routing"
			harness.CheckRouter(t, fmt.Sprintf("sidecar %s", path), fields, truth, *raw, *got, exact)
		}
	})
}
