package collector

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

// statusSeries returns the page's vllm_normalizer_metric_status and
// vllm_normalizer_upstream_info series.
func statusSeries(t *testing.T, c *Collector) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, v := range samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()) {
		if strings.Contains(k, `"vllm_normalizer_metric_status"`) || strings.Contains(k, `"vllm_normalizer_upstream_info"`) {
			out[k] = v
		}
	}
	return out
}

// The status families reused from one scrape to the next follow an
// upstream that changes: after each scrape they are those a fresh sidecar
// gives for the same page.
func TestStatusFamiliesFollowTheUpstream(t *testing.T) {
	var body atomic.Pointer[[]byte]
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(*body.Load())
	}))
	t.Cleanup(up.Close)
	clock := newFakeClock()
	c := newTestCollector(t, up.URL, clock, nil)
	for _, name := range []string{"13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom", "13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom",
		"02-vllm-0.4.3to0.5.0-datadog-vllm-fixture.prom", "03-vllm-composite-0.5.0+v1families-datadog-vllm-fixture.prom",
		"13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", name))
		if err != nil {
			t.Fatal(err)
		}
		body.Store(&b)
		clock.Advance(time.Second)
		c.ScrapeOnce(context.Background())
		fresh := newTestCollector(t, up.URL, clock, nil)
		fresh.ScrapeOnce(context.Background())
		got, want := statusSeries(t, c), statusSeries(t, fresh)
		if len(want) < 10 {
			t.Fatalf("%s: a fresh sidecar serves only %d status series", name, len(want))
		}
		if !maps.Equal(got, want) {
			t.Fatalf("after %s the status series differ from a fresh sidecar's:\n got %v\nwant %v", name, got, want)
		}
	}
}
