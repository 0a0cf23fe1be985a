package giev15

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	extractormetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/extractor/metrics"
	sourcemetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/source/metrics"

	"github.com/fos-study/vllm-normalizer/e2e/consumers/harness"
)

// routingPage returns the sidecar's /metrics/routing for page, read once
// from the binary (the benchmark then serves those bytes: it measures the
// EPP, not the sidecar).
func routingPage(b *testing.B, page []byte) []byte {
	up := harness.NewUpstream(b, page)
	side := harness.StartSidecar(b, up)
	time.Sleep(2 * harness.Interval) // a second scrape: rates in the window
	return side.Get(b, "/metrics/routing")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEPPPoll measures GIE 1.5's own metrics client (its
// metrics-data-source plugin's Poll: HTTP GET and expfmt parse; then the
// core-metrics-extractor) polling N endpoints at once, as its data layer
// does, for a raw page and for the sidecar's /metrics/routing of the same
// server: fixture 13 (one engine) and the demo with 4 data-parallel
// engines. One op is one poll of every endpoint; cpu-ns/poll is the whole
// process's CPU (the loopback server's copy of the bytes included) per
// endpoint poll, allocs/poll and B/poll the allocations per endpoint poll.
func BenchmarkEPPPoll(b *testing.B) {
	pages := []struct {
		name string
		body []byte
	}{{"v1-13", harness.Fixture(b, "13")}, {"dp4", harness.DemoPage(b, 4)}}
	for _, p := range pages {
		for _, view := range []struct {
			name string
			body []byte
		}{{"raw", p.body}, {"routing", routingPage(b, p.body)}} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
				_, _ = w.Write(view.body)
			}))
			host := srv.Listener.Addr().String()
			for _, n := range []int{1, 16, 100} {
				b.Run(fmt.Sprintf("page=%s/view=%s/endpoints=%d", p.name, view.name, n), func(b *testing.B) {
					params, _ := json.Marshal(map[string]string{"path": "/metrics"})
					src, err := sourcemetrics.MetricsDataSourceFactory(sourcemetrics.MetricsDataSourceType, params, nil)
					if err != nil {
						b.Fatal(err)
					}
					ext, err := extractormetrics.CoreMetricsExtractorFactory(extractormetrics.MetricsExtractorType, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					eps := make([]fwkdl.Endpoint, n)
					for i := range eps {
						eps[i] = fwkdl.NewEndpoint(&fwkdl.EndpointMetadata{
							NamespacedName: types.NamespacedName{Namespace: "llm", Name: fmt.Sprintf("vllm-%d", i)},
							PodName:        fmt.Sprintf("vllm-%d", i), MetricsHost: host,
						}, nil)
					}
					ctx := context.Background()
					pollAll := func() {
						var wg sync.WaitGroup
						for _, ep := range eps {
							wg.Go(func() {
								data, err := src.(fwkdl.PollingDataSource).Poll(ctx, ep)
								if err != nil {
									b.Error(err)
									return
								}
								_ = ext.(fwkdl.Extractor).Extract(ctx, data, ep)
							})
						}
						wg.Wait()
					}
					pollAll() // connections open, as in a running EPP
					var m0, m1 runtime.MemStats
					runtime.ReadMemStats(&m0)
					c0 := cpuTime()
					b.ResetTimer()
					for b.Loop() {
						pollAll()
					}
					b.StopTimer()
					c1 := cpuTime()
					runtime.ReadMemStats(&m1)
					polls := float64(b.N * n)
					b.ReportMetric(float64((c1-c0).Nanoseconds())/polls, "cpu-ns/poll")
					b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/polls, "allocs/poll")
					b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/polls, "B/poll")
					b.ReportMetric(float64(len(view.body)), "page-bytes")
				})
			}
			srv.Close()
		}
	}
}
