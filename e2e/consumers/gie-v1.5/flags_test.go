package giev15

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	extractormetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/extractor/metrics"
	sourcemetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/source/metrics"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/server"

	"github.com/fos-study/vllm-normalizer/e2e/consumers/harness"
)

// TestFlagRecipe: the GIE 1.3-1.5 recipe --model-server-metrics-port=9400
// --model-server-metrics-path=/metrics/routing, parsed by GIE 1.5.0's own
// flags (server.Options.AddFlags on the command line, as its runner does)
// and read back by its default data source (MetricsDataSourceFactory
// without parameters, which takes the path from the flag when it is set),
// polls /metrics/routing on the sidecar's port: the collapsed view of a
// two-engine page, not the full page's engine 0.
func TestFlagRecipe(t *testing.T) {
	page := harness.DemoPage(t, 2)
	truth, err := harness.ComputeTruth(page)
	if err != nil {
		t.Fatal(err)
	}
	up := harness.NewUpstream(t, page)
	side := harness.StartSidecar(t, up)
	_, port, err := net.SplitHostPort(side.Host)
	if err != nil {
		t.Fatal(err)
	}
	opts := commandLineOptions()
	if err := pflag.CommandLine.Parse([]string{"--model-server-metrics-port=" + port, "--model-server-metrics-path=/metrics/routing"}); err != nil {
		t.Fatal(err)
	}
	src, err := sourcemetrics.MetricsDataSourceFactory(sourcemetrics.MetricsDataSourceType, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := extractormetrics.CoreMetricsExtractorFactory(extractormetrics.MetricsExtractorType, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The datastore gives each endpoint the flag's port (setupDatastore).
	ep := fwkdl.NewEndpoint(&fwkdl.EndpointMetadata{
		NamespacedName: types.NamespacedName{Namespace: "llm", Name: "vllm-0"},
		PodName:        "vllm-0",
		MetricsHost:    net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.ModelServerMetricsPort)),
	}, nil)
	ctx := context.Background()
	data, err := src.(fwkdl.PollingDataSource).Poll(ctx, ep)
	if err != nil {
		t.Fatalf("GIE 1.5 polls with the recipe's flags: %v", err)
	}
	_ = ext.(fwkdl.Extractor).Extract(ctx, data, ep)
	m := ep.GetMetrics()
	got := harness.RouterRead{Waiting: float64(m.WaitingQueueSize), Running: float64(m.RunningRequestsSize), KV: m.KVCacheUsagePercent}
	raw, _, _ := poll(t, up.Host, "/metrics")
	harness.CheckRouter(t, "recipe --model-server-metrics-port/--model-server-metrics-path", []string{harness.FieldWaiting, harness.FieldRunning, harness.FieldKV}, truth, raw, got, true)
	if harness.Equal(raw.Running, truth.Running) {
		t.Errorf("raw already reads the summed running count %v; the page does not tell the routing view from the full page", raw.Running)
	}
}

// commandLineOptions registers GIE's flags on the command line once per
// process, as its runner does (a second registration would panic under
// -count=2).
var commandLineOptions = sync.OnceValue(func() *server.Options {
	opts := server.NewOptions()
	opts.AddFlags(pflag.CommandLine)
	return opts
})
