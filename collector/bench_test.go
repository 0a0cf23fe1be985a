package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/serve"
	"github.com/fos-study/vllm-normalizer/window"
)

// Benchmarks of the whole hot path, measured against the floor: walking
// the same bytes with Prometheus's textparse alone. docs/performance.md
// explains how to run them and records today's figures.
//
// Pages:
//   - v1-fixture13: the real V1 dump testdata/fixtures/13-* (~59 KB), static;
//   - v0-fixture02: the real V0 dump testdata/fixtures/02-* (~13 KB), static;
//   - v1-demo1: the demo upstream (the same V1 dump, values moving), one
//     engine (~58 KB), a new page per simulated interval: the page most
//     users have;
//   - v1-16engines: the same spread over 16 data-parallel engines
//     (~620 KB).

// benchPage is one upstream page source: next returns the page at the
// clock's time.
type benchPage struct {
	name string
	next func() []byte
}

func benchPages(tb testing.TB, clock *fakeClock) []benchPage {
	tb.Helper()
	static := func(path string) func() []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		return func() []byte { return b }
	}
	one, err := demo.New(demo.Options{Now: clock.Now, Seed: 1, Engines: 1})
	if err != nil {
		tb.Fatal(err)
	}
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 1, Engines: 16})
	if err != nil {
		tb.Fatal(err)
	}
	// The demo upstream of scripts/sidebyside.sh: a new page each second,
	// so that a sidecar scraping every 100 ms reads each page ten times.
	refreshed, err := demo.New(demo.Options{Now: clock.Now, Seed: 1, Engines: 1})
	if err != nil {
		tb.Fatal(err)
	}
	var (
		page []byte
		made time.Time
	)
	everySecond := func() []byte {
		if now := clock.Now(); page == nil || now.Sub(made) >= time.Second {
			page, made = refreshed.Page(), now
		}
		return page
	}
	large := up.Page()
	if len(large) < 500<<10 || len(large) > 800<<10 {
		tb.Fatalf("the 16-engine page is %d bytes, want ~620 KB (16 times the ~40 KB per-engine part of the dump)", len(large))
	}
	return []benchPage{
		{"v1-fixture13", static("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")},
		{"v0-fixture02", static("../testdata/fixtures/02-vllm-0.4.3to0.5.0-datadog-vllm-fixture.prom")},
		{"v1-demo1", one.Page},
		{"v1-demo1-refresh1s", everySecond},
		{"v1-16engines", up.Page},
	}
}

// memTransport answers every request with the page it holds, as an
// upstream on loopback would, without a socket.
type memTransport struct{ page []byte }

func (m *memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode:    http.StatusOK,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {exposition.ContentTypeText}},
		Body:          io.NopCloser(bytes.NewReader(m.page)),
		ContentLength: int64(len(m.page)),
		Request:       r,
	}, nil
}

// benchCollector is a collector as cmd/vllm-normalizer builds it (Go and
// process collectors and the diagnosis included, default windows 1m and 5m, the given scrape
// interval) reading from an in-memory transport, on a fake clock.
func benchCollector(tb testing.TB, clock *fakeClock, tr http.RoundTripper, interval time.Duration, mods ...func(*Config)) *Collector {
	reg := prometheus.NewRegistry()
	exp := prometheus.NewRegistry()
	exp.MustRegister(collectors.NewGoCollector())
	exp.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "vllm_normalizer"}))
	// The diagnosis with the flags' defaults, as the binary runs it.
	diag, err := diagnosis.New(diagnosis.Options{Window: diagnosis.DefaultWindow, Baseline: diagnosis.DefaultBaseline, MinChange: diagnosis.DefaultMinChange, Interval: interval})
	if err != nil {
		tb.Fatal(err)
	}
	return newTestCollector(tb, "http://127.0.0.1:8000/metrics", clock, func(c *Config) {
		c.Diagnosis = diag
		c.Interval = interval
		c.Timeout = interval / 2
		c.Registry = reg
		c.Gatherer = prometheus.Gatherers{reg, exp}
		c.Client = &http.Client{Transport: tr}
		// The binary's default limits, so that their checks are timed.
		c.LabelLimits = exposition.LabelLimits{Labels: 64, NameLength: 128, ValueLength: 4096}
		c.MaxSeries = 5000
		for _, m := range mods {
			m(c)
		}
	})
}

// warmUp scrapes once per simulated second until the 5m window is full.
func warmUp(c *Collector, clock *fakeClock, tr *memTransport, next func() []byte) {
	for range 305 {
		clock.Advance(time.Second)
		tr.page = next()
		c.ScrapeOnce(context.Background())
	}
}

// cpuTime is the CPU time the whole process has used so far, every
// thread included (the GC's background workers run on the other cores).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScrapeCycle runs one whole production scrape cycle with a full
// history, the clock advancing one scrape interval per cycle: everything
// the process does for a scrape except the socket. That is
// Collector.ScrapeOnce (fetch from memory, parse, DropCreated, Normalize,
// History.Observe, every window's derivations for both groupings,
// Present, status families, the sidecar's own metrics, the diagnosis, the
// routing view and its text) and what readers make the process do on top: a router
// reading the routing view with gzip after every scrape, and a reader of
// /metrics with gzip, which makes the page's text, its gzip and the Go and
// process collectors (at most once per second of the clock) happen for
// the snapshot it reads. read=every reads /metrics after every scrape (the
// worst case); read=15s once per 15 s of the clock, as Prometheus does.
// Two more cases, on every page and interval: read=prometheus, where
// nobody but Prometheus (every 15 s, /metrics) reads anything, and
// read=all, where /metrics, the routing view, the compatibility page and
// the GenAI view are all read with gzip after every scrape; and
// read=views, what scripts/sidebyside.sh -v does: the three views after
// every scrape, /metrics every 15 s. read=metrics-gzip and read=metrics-text
// are one scrape and one read of /metrics after it, with and without gzip,
// nothing else read: what a reader of the served page adds to a scrape
// (against read=none, where nothing is read).
//
// Besides ns/op (wall time of the cycle) it reports cpu-ns/op: the whole
// process's CPU time per cycle, the GC's workers on the other core
// included. Rendering the next moving page is counted in neither.
func BenchmarkScrapeCycle(b *testing.B) {
	for _, p := range benchPages(b, newFakeClock()) {
		for _, interval := range []time.Duration{time.Second, 100 * time.Millisecond} {
			for _, r := range []benchReaders{
				{name: "every", routing: true}, {name: "15s", metricsEvery: 15 * time.Second, routing: true},
				{name: "prometheus", metricsEvery: 15 * time.Second}, {name: "all", routing: true, all: true},
				{name: "views", metricsEvery: 15 * time.Second, routing: true, all: true},
				{name: "none", metricsEvery: -1}, {name: "metrics-gzip"}, {name: "metrics-text", text: true},
			} {
				b.Run(p.name+"/interval="+window.Format(interval)+"/read="+r.name, func(b *testing.B) {
					benchScrapeCycle(b, p.name, interval, r)
				})
			}
		}
	}
}

// benchReaders is who reads what in a BenchmarkScrapeCycle case.
type benchReaders struct {
	name string
	// metricsEvery is how often /metrics is read, on the clock (0: after
	// every scrape; below 0: never).
	metricsEvery time.Duration
	// routing: a router reads the routing view after every scrape; all:
	// the compatibility page and the GenAI view are read too.
	routing, all bool
	// text: /metrics is read without gzip.
	text bool
}

func benchScrapeCycle(b *testing.B, page string, interval time.Duration, readers benchReaders) {
	clock := newFakeClock()
	var next func() []byte
	for _, q := range benchPages(b, clock) {
		if q.name == page {
			next = q.next
		}
	}
	tr := &memTransport{}
	c := benchCollector(b, clock, tr, interval)
	warmUp(c, clock, tr, next)
	if c.metrics == nil || c.lastReason != "" {
		b.Fatalf("warm-up scrapes failed: %s", c.lastReason)
	}
	b.SetBytes(int64(len(tr.page)))
	b.ReportAllocs()
	ctx := context.Background()
	var rendering time.Duration
	lastRead := clock.Now()
	cpu0 := cpuTime(b)
	for b.Loop() {
		b.StopTimer()
		r0 := cpuTime(b)
		clock.Advance(interval)
		tr.page = next()
		rendering += cpuTime(b) - r0
		b.StartTimer()
		c.ScrapeOnce(ctx)
		s := c.snap.Load()
		if readers.routing {
			s.routing.Gzipped()
		}
		if readers.all {
			s.compat.Gzipped()
			s.genai.Gzipped()
		}
		if now := clock.Now(); readers.metricsEvery >= 0 && now.Sub(lastRead) >= readers.metricsEvery {
			if readers.text {
				s.page.Text()
			} else {
				s.page.Gzipped() // encodes the text as it compresses
			}
			lastRead = now
		}
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0-rendering)/float64(b.N), "cpu-ns/op")
	// What the history holds: with window.BenchmarkHistoryMemory's bytes
	// per series, the history's share of the heap.
	b.ReportMetric(float64(c.history.StoredSeries()), "kept-series")
	if c.lastReason != "" {
		b.Fatalf("scrapes failed: %s", c.lastReason)
	}
}

// BenchmarkScrapeCycleAged is one engine's demo page scraped every
// second, /metrics read every 15 s with gzip, after age of history: at
// 10s the diagnosis is not ready for the first 350 cycles, at 40m its
// baseline is full. Nothing else in the process (no other page is made),
// so that the GC runs at the binary's heap, where a growing history would
// show. Compare -benchtime 290x at 10s with the same at 40m
// (docs/performance.md, "What grows with the baseline").
func BenchmarkScrapeCycleAged(b *testing.B) {
	for _, age := range []time.Duration{10 * time.Second, 40 * time.Minute} {
		b.Run("age="+window.Format(age), func(b *testing.B) {
			clock := newFakeClock()
			one, err := demo.New(demo.Options{Now: clock.Now, Seed: 1, Engines: 1})
			if err != nil {
				b.Fatal(err)
			}
			tr := &memTransport{}
			c := benchCollector(b, clock, tr, time.Second)
			ctx := context.Background()
			n := 0
			// scrape returns the CPU the demo took to make the page
			scrape := func() time.Duration {
				r0 := cpuTime(b)
				clock.Advance(time.Second)
				tr.page = one.Page()
				rendering := cpuTime(b) - r0
				c.ScrapeOnce(ctx)
				if n++; n%15 == 0 {
					c.snap.Load().page.Gzipped()
				}
				return rendering
			}
			for range int(age / time.Second) {
				scrape()
			}
			b.ReportAllocs()
			var rendering time.Duration
			cpu0 := cpuTime(b)
			for b.Loop() {
				rendering += scrape()
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0-rendering)/float64(b.N), "cpu-ns/op")
			if c.lastReason != "" {
				b.Fatalf("scrapes failed: %s", c.lastReason)
			}
		})
	}
}

// BenchmarkCreatedTimestamps is what --output.created-timestamps costs a
// scrape of the 16-engine page read by a Prometheus with created-timestamp
// ingestion (OpenMetrics): the full page and the compatibility page after
// every scrape, with and without the flag.
func BenchmarkCreatedTimestamps(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("created=%v", on), func(b *testing.B) {
			clock := newFakeClock()
			var next func() []byte
			for _, q := range benchPages(b, clock) {
				if q.name == "v1-16engines" {
					next = q.next
				}
			}
			tr := &memTransport{}
			c := benchCollector(b, clock, tr, time.Second, func(cfg *Config) { cfg.CreatedTimestamps = on })
			warmUp(c, clock, tr, next)
			if c.lastReason != "" {
				b.Fatalf("warm-up scrapes failed: %s", c.lastReason)
			}
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				clock.Advance(time.Second)
				tr.page = next()
				b.StartTimer()
				c.ScrapeOnce(ctx)
				s := c.snap.Load()
				s.page.OpenMetrics()
				s.compat.OpenMetrics()
			}
		})
	}
}

// BenchmarkFloor is the unavoidable cost of reading a page: Prometheus's
// textparse walking the same bytes, Next and Series for every entry and
// Labels for every series (a faithful re-exposer must know each series'
// labels). The no-labels variant skips Labels.
func BenchmarkFloor(b *testing.B) {
	for _, p := range benchPages(b, newFakeClock()) {
		page := p.next()
		for _, withLabels := range []bool{true, false} {
			name := p.name
			if !withLabels {
				name += "/no-labels"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(page)))
				b.ReportAllocs()
				st := labels.NewSymbolTable()
				var l labels.Labels
				for b.Loop() {
					floorWalk(b, page, st, &l, withLabels)
				}
			})
		}
	}
}

func floorWalk(b *testing.B, page []byte, st *labels.SymbolTable, l *labels.Labels, withLabels bool) {
	tp, err := textparse.New(page, exposition.ContentTypeText, st, textparse.ParserOptions{})
	if tp == nil {
		b.Fatal(err)
	}
	for {
		e, err := tp.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
		if e == textparse.EntrySeries {
			tp.Series()
			if withLabels {
				tp.Labels(l)
			}
		}
	}
}

// BenchmarkServe reads /metrics and /metrics/routing over real loopback
// HTTP with keep-alive from parallel clients, against a plain net/http
// handler writing the same /metrics bytes from memory. Clients do not ask
// for gzip (the -gzip variants do, and the plain handler then writes the
// same gzip bytes). req/s is requests per wall-clock second.
func BenchmarkServe(b *testing.B) {
	clock := newFakeClock()
	var large benchPage
	for _, p := range benchPages(b, clock) {
		if p.name == "v1-16engines" {
			large = p
		}
	}
	tr := &memTransport{}
	c := benchCollector(b, clock, tr, time.Second)
	warmUp(c, clock, tr, large.next)
	snap := c.snap.Load()
	page := snap.page.Text()
	// The gzip page is compressed on first demand: ask for it, so that the
	// reference serves the same compressed bytes the sidecar does.
	pageGz, _ := snap.page.Gzipped()

	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(page) })
	plainGz := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(pageGz)
	})
	for _, tc := range []struct {
		name string
		h    http.Handler
		gzip bool
	}{
		{"metrics", c.MetricsHandler(), false},
		{"routing", c.RoutingHandler(), false},
		{"plain-net-http", plain, false},
		{"metrics-gzip", c.MetricsHandler(), true},
		{"plain-net-http-gzip", plainGz, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{
				MaxIdleConnsPerHost: 4 * runtime.GOMAXPROCS(0),
				DisableCompression:  true,
			}}
			defer client.CloseIdleConnections()
			probe, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			if tc.gzip {
				probe.Header.Set("Accept-Encoding", "gzip")
			}
			resp, err := client.Do(probe)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body) // bytes on the wire per request
			resp.Body.Close()
			b.SetBytes(n)
			b.ReportAllocs()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 64<<10)
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				if tc.gzip {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				for pb.Next() {
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.CopyBuffer(io.Discard, resp.Body, buf)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}

// fleetNames are the families the fleet rules read (deploy/prometheus/
// recording.yml, group vllm-fleet): what a central Prometheus recording
// only them asks for with name[] (docs/diagnosis.md).
var fleetNames = []string{"vllm:kv_cache_usage_perc", "vllm_derived_inter_token_latency_seconds", "vllm_derived_preemptions_per_second",
	"vllm_derived_requests_per_second", "vllm_derived_ttft_queue_ratio", "vllm_derived_ttft_seconds", "vllm_normalizer_upstream_info"}

// BenchmarkMetricsSelection is what one read of /metrics with gzip makes
// the process do for a scrape's snapshot, the first reader of it: the
// whole page (select=all), or only the fleet rules' families
// (select=fleet, /metrics?name[]=...), cut from the page, encoded and
// compressed. The Go and process collectors are gathered as the binary
// gathers them (at most once a second of the clock, which does not move).
func BenchmarkMetricsSelection(b *testing.B) {
	for _, p := range benchPages(b, newFakeClock()) {
		if p.name != "v1-demo1" && p.name != "v1-16engines" {
			continue
		}
		clock := newFakeClock()
		var next func() []byte
		for _, q := range benchPages(b, clock) {
			if q.name == p.name {
				next = q.next
			}
		}
		tr := &memTransport{}
		c := benchCollector(b, clock, tr, time.Second)
		warmUp(c, clock, tr, next)
		full := c.snap.Load().full()
		for _, sel := range []string{"all", "fleet"} {
			b.Run(p.name+"/select="+sel, func(b *testing.B) {
				b.ReportAllocs()
				var n int
				for b.Loop() {
					var page *serve.Page
					if sel == "all" {
						page = c.pageEnc.Prepare(full, c.withRuntimeFamilies)
					} else {
						page = c.selection(&snapshot{parts: [][]exposition.Family{full}}, fleetNames)
					}
					gz, _ := page.Gzipped()
					n = len(gz)
				}
				b.ReportMetric(float64(n), "gzip-bytes")
			})
		}
	}
}

// BenchmarkGatherRuntime is what the first read of /metrics after the
// Gatherer's families are a second old costs to gather them (Prometheus
// reading every 15 s gathers at every read): the binary's Go and process
// collectors together and each alone, converted to families.
func BenchmarkGatherRuntime(b *testing.B) {
	for _, tc := range []struct {
		name string
		cs   []prometheus.Collector
	}{
		{"go+process", []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "vllm_normalizer"})}},
		{"go", []prometheus.Collector{collectors.NewGoCollector()}},
		{"process", []prometheus.Collector{collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "vllm_normalizer"})}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(tc.cs...)
			c := &Collector{}
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				if fams := c.gather(reg); len(fams) == 0 {
					b.Fatal("nothing gathered")
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
