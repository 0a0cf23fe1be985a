package collector

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// countingCollector is a process-level collector (like the Go and process
// collectors) that counts how often it is collected and reports that count.
type countingCollector struct {
	desc  *prometheus.Desc
	calls atomic.Int64
}

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c *countingCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.calls.Add(1)
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n))
}

// The sidecar's runtime metrics are gathered when /metrics is read, at most
// once a second of the collector's clock, never for a snapshot nobody
// reads; what is read is fresh to within that second.
func TestRuntimeFamiliesFollowReaders(t *testing.T) {
	up := serveFile(t, "../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	clock := newFakeClock()
	runtime := &countingCollector{desc: prometheus.NewDesc("test_runtime_collections_total", "Collections.", nil, nil)}
	reg := prometheus.NewRegistry()
	exp := prometheus.NewRegistry()
	exp.MustRegister(runtime)
	c := newTestCollector(t, up.URL+"/metrics", clock, func(cfg *Config) {
		cfg.Registry = reg
		cfg.Gatherer = prometheus.Gatherers{reg, exp}
	})
	ctx := context.Background()
	for range 10 {
		clock.Advance(time.Second)
		c.ScrapeOnce(ctx)
	}
	if n := runtime.calls.Load(); n != 0 {
		t.Fatalf("10 scrapes nobody read collected the runtime metrics %d times, want 0", n)
	}

	read := func() float64 {
		t.Helper()
		rec := get(t, c.MetricsHandler(), "/metrics", nil)
		checkValidPage(t, rec.Body.Bytes())
		s := samplesOf(t, rec.Body.Bytes())
		if s[`{__name__="vllm_up"}`] != 1 {
			t.Fatalf("vllm_up = %v, want 1 (%s)", s[`{__name__="vllm_up"}`], c.lastReason)
		}
		v, ok := s[`{__name__="test_runtime_collections_total"}`]
		if !ok {
			t.Fatal("the page lacks the Gatherer's runtime family")
		}
		return v
	}
	if v := read(); v != 1 {
		t.Fatalf("first read: collection %v, want 1", v)
	}
	if v := read(); v != 1 || runtime.calls.Load() != 1 {
		t.Fatalf("a second read of the same snapshot collected again (page says %v, %d collections)", v, runtime.calls.Load())
	}
	// A new snapshot within the same second reuses the gathered families.
	clock.Advance(500 * time.Millisecond)
	c.ScrapeOnce(ctx)
	if v := read(); v != 1 || runtime.calls.Load() != 1 {
		t.Fatalf("a snapshot read 0.5 s after the last collection collected again (page says %v, %d collections)", v, runtime.calls.Load())
	}
	// One second later they are gathered anew, for the snapshot being read.
	clock.Advance(600 * time.Millisecond)
	c.ScrapeOnce(ctx)
	if v := read(); v != 2 {
		t.Fatalf("a snapshot read 1.1 s after the last collection serves collection %v, want 2", v)
	}
	// The routing view never includes them and never triggers them.
	clock.Advance(2 * time.Second)
	c.ScrapeOnce(ctx)
	if rec := get(t, c.RoutingHandler(), "/metrics/routing", nil); samplesOf(t, rec.Body.Bytes())[`{__name__="vllm_up"}`] != 1 {
		t.Fatalf("routing view: %s", rec.Body.String())
	}
	if n := runtime.calls.Load(); n != 2 {
		t.Fatalf("reading the routing view collected the runtime metrics (%d collections, want 2)", n)
	}
}
