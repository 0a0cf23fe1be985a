// Package giev15 runs the endpoint picker's own metrics code from
// sigs.k8s.io/gateway-api-inference-extension v1.5.0 (GIE 1.5: its default
// data layer, the metrics-data-source plugin that fetches and parses a
// page and the core-metrics-extractor with its built-in vLLM engine
// config) against raw vLLM pages and against the sidecar scraping them.
package giev15

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	extractormetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/extractor/metrics"
	sourcemetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/source/metrics"

	"github.com/fos-study/vllm-normalizer/e2e/consumers/harness"
)

// What GIE 1.5's vLLM engine config reads (factories.go, defaultEngineConfigs).
var fields = []string{harness.FieldWaiting, harness.FieldRunning, harness.FieldKV, harness.FieldCache, harness.FieldLoRA}

// poll runs one EPP poll of host+path: the data source's Poll (HTTP GET and
// expfmt parse), then the extractor, as the EPP's data-layer runtime does.
// A failed Poll means the EPP got nothing from the page.
func poll(t *testing.T, host, path string) (harness.RouterRead, error, error) {
	t.Helper()
	return pollLabelled(t, host, path, nil)
}

// pollLabelled is poll of an endpoint with these pod labels (an engine
// label makes the extractor use that engine's built-in config).
func pollLabelled(t *testing.T, host, path string, labels map[string]string) (harness.RouterRead, error, error) {
	t.Helper()
	return pollWith(t, host, path, labels, nil)
}

// pollWith is pollLabelled with the core-metrics-extractor's parameters
// (engineConfigs); nil gives its defaults.
func pollWith(t *testing.T, host, path string, labels map[string]string, extractorParams json.RawMessage) (harness.RouterRead, error, error) {
	t.Helper()
	params, _ := json.Marshal(map[string]string{"path": path}) // the plugin's documented "path" parameter
	src, err := sourcemetrics.MetricsDataSourceFactory(sourcemetrics.MetricsDataSourceType, params, nil)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := extractormetrics.CoreMetricsExtractorFactory(extractormetrics.MetricsExtractorType, extractorParams, nil)
	if err != nil {
		t.Fatal(err)
	}
	ep := fwkdl.NewEndpoint(&fwkdl.EndpointMetadata{
		NamespacedName: types.NamespacedName{Namespace: "llm", Name: "vllm-0"},
		PodName:        "vllm-0",
		MetricsHost:    host,
		Labels:         labels,
	}, nil)
	ctx := context.Background()
	data, pollErr := src.(fwkdl.PollingDataSource).Poll(ctx, ep)
	if pollErr != nil {
		return harness.RouterRead{}, pollErr, nil
	}
	extractErr := ext.(fwkdl.Extractor).Extract(ctx, data, ep)
	m := ep.GetMetrics()
	return harness.RouterRead{
		Waiting:      float64(m.WaitingQueueSize),
		Running:      float64(m.RunningRequestsSize),
		KV:           m.KVCacheUsagePercent,
		BlockSize:    m.CacheBlockSize,
		NumGPUBlocks: m.CacheNumBlocks,
		LoRARunning:  slices.Sorted(maps.Keys(m.ActiveModels)),
		LoRAWaiting:  slices.Sorted(maps.Keys(m.WaitingModels)),
		MaxLoRA:      m.MaxActiveModels,
	}, nil, extractErr
}

func TestNeverWorseThanRaw(t *testing.T) {
	harness.EachPage(t, func(t *testing.T, p harness.Page, truth harness.Truth, up *harness.Upstream, side *harness.Sidecar) {
		raw, rawPollErr, rawErr := poll(t, up.Host, "/metrics")
		t.Logf("truth %+v", truth)
		t.Logf("raw:  %+v (poll error %v, extract errors %v)", raw, rawPollErr, rawErr)
		for _, path := range []string{"/metrics", "/metrics/routing"} {
			got, pollErr, extractErr := poll(t, side.Host, path)
			if pollErr != nil {
				t.Errorf("sidecar %s: the EPP cannot poll it: %v", path, pollErr)
				continue
			}
			t.Logf("%s: %+v (extract errors %v)", path, got, extractErr)
			exact := p.DataParallel && path == "/metrics/routing" // one engine: nothing to collapse
			harness.CheckRouter(t, fmt.Sprintf("sidecar %s", path), fields, truth, raw, got, exact)
		}
		// The routing listener: --model-server-metrics-port at it, the
		// path left at /metrics (the other recipe, port 9400 with
		// --model-server-metrics-path=/metrics/routing: TestFlagRecipe).
		if got, pollErr, extractErr := poll(t, side.RoutingHost, "/metrics"); pollErr != nil {
			t.Errorf("routing listener: the EPP cannot poll it: %v", pollErr)
		} else {
			t.Logf("routing listener /metrics: %+v (extract errors %v)", got, extractErr)
			harness.CheckRouter(t, "sidecar routing listener /metrics", fields, truth, raw, got, p.DataParallel)
		}
		if p.DataParallel {
			// The point of the routing view: raw gives one engine.
			if harness.Equal(raw.Running, truth.Running) {
				t.Errorf("raw page already gives the summed running count %v; this page does not test data parallelism", raw.Running)
			}
		}
	})
}
