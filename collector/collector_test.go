package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/closedport"
	"github.com/fos-study/vllm-normalizer/internal/mappingtest"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
	"github.com/fos-study/vllm-normalizer/internal/setting"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/scrape"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// fakeClock is a settable clock shared by the collector and test upstreams.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)} }
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testMapper(t testing.TB, opts mapping.Options) *mapping.Mapper {
	return mappingtest.Mapper(t, opts)
}

// newTestCollector builds a collector on a fake clock without Go/process
// metrics, so that its whole output is deterministic.
func newTestCollector(t testing.TB, uri string, clock *fakeClock, mod func(*Config)) *Collector {
	t.Helper()
	cfg := Config{
		ScrapeURI:    uri,
		Interval:     time.Second,
		Timeout:      time.Second, // the most the interval allows: a loaded machine must not turn a golden scrape into a timeout
		MaxBodyBytes: 32 << 20,
		SampleLimit:  50000,
		Windows:      []time.Duration{time.Minute, 5 * time.Minute},
		Mapper:       testMapper(t, mapping.Options{}),
		Now:          clock.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func get(t testing.TB, h http.Handler, path string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// samplesOf parses a text page with Prometheus's parser into
// "series -> value", failing the test on any parse error.
func samplesOf(t testing.TB, body []byte) map[string]float64 {
	t.Helper()
	return pagetest.Samples(t, body, "text/plain")
}

// checkValidPage asserts what every consumer needs: the page parses with
// the expfmt parser routers use (which also rejects a second HELP or TYPE
// for one family) and each family's samples are contiguous.
func checkValidPage(t testing.TB, body []byte) {
	t.Helper()
	tp := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := tp.TextToMetricFamilies(bytes.NewReader(body)); err != nil {
		t.Fatalf("expfmt rejects the page: %v", err)
	}
	fams, _, err := exposition.Parse(body, "text/plain", exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range fams {
		if seen[f.Name] {
			t.Errorf("family %s appears twice", f.Name)
		}
		seen[f.Name] = true
	}
	samplesOf(t, body)
}

func serveFile(t testing.TB, path string) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ct := fixtureContentType(path)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

// fixtureContentType is what an upstream serves a fixture as: .om files are
// OpenMetrics pages (vLLM's Rust frontend answers that whatever the Accept
// header asks), everything else text format 0.0.4.
func fixtureContentType(path string) string {
	if strings.HasSuffix(path, ".om") {
		return "application/openmetrics-text; version=1.0.0; charset=utf-8"
	}
	return "text/plain; version=0.0.4; charset=utf-8"
}

// TestGoldenFixtures scrapes every real dump from an HTTP upstream and
// checks the whole output against testdata/golden/<fixture>.metrics
// (rewrite with -update), plus the properties that hold for any page: every
// upstream sample re-appears with identical labels and value, and also
// under its current name when vLLM renamed it; _created series are left
// out; the page is valid for consumers.
func TestGoldenFixtures(t *testing.T) {
	files, _ := filepath.Glob("../testdata/fixtures/*.prom")
	om, _ := filepath.Glob("../testdata/fixtures/*.om")
	files = append(files, om...)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		if strings.Contains(name, "nan-ind") {
			continue // a parse failure, covered by TestFailureModes
		}
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			up := serveFile(t, file)
			// One scrape, judged on its page alone: a timeout of 10 s, as
			// the 1 s one failed a fixture once under -race at load 5.
			c := newTestCollector(t, up.URL+"/metrics", clock, func(cfg *Config) {
				cfg.Interval, cfg.Timeout = 10*time.Second, 10*time.Second
			})
			c.ScrapeOnce(context.Background())
			body := get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()
			checkValidPage(t, body)
			out := samplesOf(t, body)
			if out[`{__name__="vllm_up"}`] != 1 {
				t.Fatalf("vllm_up is not 1:\n%s", body)
			}

			in, _ := os.ReadFile(file)
			inFams, _, err := exposition.Parse(in, fixtureContentType(file), exposition.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// From the catalogue file, not from the mapper under test.
			replacement := catalogueRenames(t)
			upstreamHas := map[string]bool{}
			for _, f := range inFams {
				upstreamHas[f.Name] = true
			}
			for _, f := range inFams {
				created := strings.HasSuffix(f.Name, "_created")
				repl, renamed := replacement[f.Name]
				for _, s := range f.Samples {
					key := s.Labels.String()
					v, ok := out[key]
					if created {
						if ok {
							t.Errorf("%s: _created series should be left out", key)
						}
						continue
					}
					// A page never loses a name the upstream printed.
					if !ok {
						t.Errorf("%s: missing from the output", key)
					} else if v != s.Value && !(math.IsNaN(v) && math.IsNaN(s.Value)) {
						t.Errorf("%s: value %v, upstream %v", key, v, s.Value)
					}
					if !renamed || upstreamHas[repl] || strings.Contains(repl, ",") {
						// No rename, or both names on one page (vLLM
						// 0.9.2-0.11: each is served as printed), or a
						// split rename (checked in mapping).
						continue
					}
					suffix, _ := exposition.SampleSuffix(f.Name, f.Type, s.Name())
					b := labels.NewBuilder(s.Labels)
					b.Set(model.MetricNameLabel, repl+suffix)
					if cv, ok := out[b.Labels().String()]; !ok || (cv != s.Value && !(math.IsNaN(cv) && math.IsNaN(s.Value))) {
						t.Errorf("%s: renamed family %s, but %s is missing or has another value", key, f.Name, b.Labels())
					}
				}
			}
			compareGolden(t, filepath.Join("..", "testdata", "golden", name+".metrics"), body)
		})
	}
}

// goVersion is the one toolchain-dependent value in the output.
var goVersion = regexp.MustCompile(`goversion="[^"]*"`)

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	got = goVersion.ReplaceAll(got, []byte(`goversion="(any)"`))
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./collector -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update if the change is intended)\n%s", path, lineDiff(string(want), string(got)))
	}
}

func hasUpstreamSeries(out map[string]float64) bool {
	for k := range out {
		if strings.Contains(k, `"vllm:`) || strings.Contains(k, `"vllm_derived_`) || strings.Contains(k, "vllm_normalizer_metric_status") {
			return true
		}
	}
	return false
}

// TestFailureModes: each way a scrape can fail gives vllm_up 0, no upstream
// series (not even the ones a previous good scrape served), and one count
// under its reason.
func TestFailureModes(t *testing.T) {
	good, _ := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	nanInd, _ := os.ReadFile("../testdata/fixtures/07-llamacpp-b4xxx-windows-nan-ind-sakura-proxy-fallback.prom")
	const omFixture = "../testdata/fixtures/30-vllm-v1-rust-frontend-openmetrics-constructed-from-13.om"
	om, _ := os.ReadFile(omFixture)
	if !bytes.HasSuffix(om, []byte("\n# EOF\n")) {
		t.Fatalf("%s does not end with # EOF", omFixture)
	}
	omNoEOF := om[:len(om)-len("# EOF\n")]
	// A cut at a line end: what a text page would read as whole.
	atLineEnd := good[:bytes.LastIndexByte(good[:len(good)/2], '\n')+1]
	serveOM := func(body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", fixtureContentType(omFixture))
			_, _ = w.Write(body)
		}
	}
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	chunk := bytes.Repeat([]byte("a 1\n"), 1<<16)
	for range 200 { // 50 MiB of text, a few hundred KiB compressed
		_, _ = zw.Write(chunk)
	}
	_ = zw.Close()

	cases := []struct {
		name    string
		reason  string
		handler http.HandlerFunc
		uri     string
		mod     func(*Config)
	}{
		{name: "refused", reason: scrape.ReasonRefused, uri: closedPortURI(t)},
		{name: "404", reason: scrape.ReasonHTTPStatus, handler: func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }},
		{name: "500", reason: scrape.ReasonHTTPStatus, handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }},
		{name: "timeout", reason: scrape.ReasonTimeout, handler: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}},
		{name: "trickle", reason: scrape.ReasonTimeout, handler: func(w http.ResponseWriter, r *http.Request) {
			for i := range 100 {
				if _, err := w.Write(good[i : i+1]); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}},
		{name: "garbled", reason: scrape.ReasonParse, handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("vllm:x{a=b 1\n")) }},
		{name: "binary", reason: scrape.ReasonParse, handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte{0x1f, 0x8b, 0, 0, 0xff, 0xfe}) }},
		{name: "msvc nan", reason: scrape.ReasonParse, handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(nanInd) }},
		{name: "empty", reason: scrape.ReasonEmpty, handler: func(w http.ResponseWriter, r *http.Request) {}},
		{name: "comments only", reason: scrape.ReasonEmpty, handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("# just a comment\n")) }},
		{name: "too large", reason: scrape.ReasonBodyTooLarge, handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(good) },
			mod: func(c *Config) { c.MaxBodyBytes = 1024 }},
		{name: "gzip bomb", reason: scrape.ReasonBodyTooLarge, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(bomb.Bytes())
		}, mod: func(c *Config) { c.MaxBodyBytes = 1 << 20 }},
		{name: "sample limit", reason: scrape.ReasonSampleLimit, handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(good) },
			mod: func(c *Config) { c.SampleLimit = 10 }},
		{name: "label limit", reason: scrape.ReasonLabelLimit, handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(good) },
			mod: func(c *Config) { c.LabelLimits.Labels = 10 }}, // cache_config_info has 25
		{name: "label name length limit", reason: scrape.ReasonLabelNameLengthLimit, handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(good) },
			mod: func(c *Config) { c.LabelLimits.NameLength = 12 }},
		{name: "label value length limit", reason: scrape.ReasonLabelValueLengthLimit, handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(good) },
			mod: func(c *Config) { c.LabelLimits.ValueLength = 20 }},
		{name: "short of content-length", reason: scrape.ReasonTruncated, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(good)))
			_, _ = w.Write(good[:len(good)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // ends the connection without the rest
		}},
		{name: "short of content-length at a line end", reason: scrape.ReasonTruncated, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(good)))
			_, _ = w.Write(atLineEnd)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		// OpenMetrics ends every page with # EOF: a page without it was cut, at a line end or not.
		{name: "openmetrics without # EOF", reason: scrape.ReasonTruncated, handler: serveOM(omNoEOF)},
		{name: "openmetrics cut mid-line", reason: scrape.ReasonTruncated, handler: serveOM(om[:len(om)/2])},
		{name: "openmetrics cut inside # EOF", reason: scrape.ReasonTruncated, handler: serveOM(om[:len(om)-3])},
		{name: "openmetrics data after # EOF", reason: scrape.ReasonParse, handler: serveOM(append(slices.Clip(om), "vllm:x 1\n"...))},
		{name: "conflicting types", reason: scrape.ReasonParse, handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("# TYPE vllm:a gauge\nvllm:a 1\n# TYPE vllm:a counter\n"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fail := tc.handler
			okNow := true
			var mu sync.Mutex
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				ok := okNow
				mu.Unlock()
				if ok || fail == nil {
					_, _ = w.Write(good)
					return
				}
				fail(w, r)
			}))
			defer up.Close()
			uri := up.URL + "/metrics"
			clock := newFakeClock()
			c := newTestCollector(t, uri, clock, tc.mod)
			if tc.uri == "" && tc.mod == nil {
				// First a good scrape, so the test proves its series are withdrawn.
				c.ScrapeOnce(context.Background())
				if !hasUpstreamSeries(samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())) {
					t.Fatal("the good scrape served no upstream series")
				}
			}
			if tc.uri != "" {
				c = newTestCollector(t, tc.uri, clock, tc.mod)
			}
			mu.Lock()
			okNow = false
			mu.Unlock()
			clock.Advance(time.Second)
			c.ScrapeOnce(context.Background())

			body := get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()
			checkValidPage(t, body)
			out := samplesOf(t, body)
			if v, ok := out[`{__name__="vllm_up"}`]; !ok || v != 0 {
				t.Errorf("vllm_up = %v (present %v), want 0", v, ok)
			}
			if hasUpstreamSeries(out) {
				t.Errorf("upstream series are still served after a failed scrape:\n%s", body)
			}
			for _, r := range scrape.FailureReasons {
				want := 0.0
				if r == tc.reason {
					want = 1
				}
				if got := out[`{__name__="vllm_normalizer_scrape_failures_total", reason="`+r+`"}`]; got != want {
					t.Errorf("failures{reason=%q} = %v, want %v", r, got, want)
				}
			}
			if rec := get(t, c.RoutingHandler(), "/metrics/routing", nil); tc.uri != "" && (rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "(reason "+tc.reason+")")) {
				t.Errorf("routing view answered %d %q before any successful scrape, want 503 naming the reason %s", rec.Code, rec.Body.String(), tc.reason)
			}
		})
	}
}

// TestShutdownIsNotAFailure: a scrape cut short because the sidecar is
// shutting down (its context ends) is neither counted nor logged as a
// failure of vLLM, and the last good page stays published.
func TestShutdownIsNotAFailure(t *testing.T) {
	good, _ := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	var slow atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			<-r.Context().Done()
			return
		}
		_, _ = w.Write(good)
	}))
	defer up.Close()
	clock := newFakeClock()
	c := newTestCollector(t, up.URL, clock, nil)
	c.ScrapeOnce(context.Background())
	slow.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	clock.Advance(time.Second)
	c.ScrapeOnce(ctx)
	out := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	for _, r := range scrape.FailureReasons {
		if got := out[`{__name__="vllm_normalizer_scrape_failures_total", reason="`+r+`"}`]; got != 0 {
			t.Errorf("failures{reason=%q} = %v after a scrape cut by shutdown, want 0", r, got)
		}
	}
	if v := out[`{__name__="vllm_up"}`]; v != 1 {
		t.Errorf("vllm_up = %v after a scrape cut by shutdown, want the last result 1", v)
	}
}

// TestTimeoutLogNamesTheLimit: a scrape that times out is logged with the
// limit it broke, so the operator need not work out 90 % of the interval.
func TestTimeoutLogNamesTheLimit(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer up.Close()
	var logs bytes.Buffer
	c := newTestCollector(t, up.URL, newFakeClock(), func(cfg *Config) {
		cfg.Timeout = 50 * time.Millisecond
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	c.ScrapeOnce(context.Background())
	if !strings.Contains(logs.String(), "reason=timeout") || !strings.Contains(logs.String(), "timeout=50ms") {
		t.Fatalf("log of a timed-out scrape does not name the limit (timeout=50ms):\n%s", logs.String())
	}
}

func closedPortURI(t *testing.T) string {
	return "http://" + closedport.Addr(t) + "/metrics"
}

// TestRoutingViewStaleness: the routing view answers 200 while vLLM data
// is fresh and 503 once the last success is older than three intervals.
func TestRoutingViewStaleness(t *testing.T) {
	up := serveFile(t, "../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	clock := newFakeClock()
	c := newTestCollector(t, up.URL, clock, nil)
	c.ScrapeOnce(context.Background())
	if rec := get(t, c.RoutingHandler(), "/metrics/routing", nil); rec.Code != 200 {
		t.Fatalf("fresh routing view answered %d", rec.Code)
	}
	clock.Advance(3 * time.Second)
	if rec := get(t, c.RoutingHandler(), "/metrics/routing", nil); rec.Code != 200 {
		t.Fatalf("routing view 3 intervals old answered %d, want 200", rec.Code)
	}
	clock.Advance(time.Millisecond)
	if rec := get(t, c.RoutingHandler(), "/metrics/routing", nil); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("routing view older than 3 intervals answered %d, want 503", rec.Code)
	}
}

// failingUpstream serves fixture 13, or HTTP 500 while down is set.
func failingUpstream(t *testing.T) (*httptest.Server, *atomic.Bool) {
	t.Helper()
	body, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	down := &atomic.Bool{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "engine dead", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(up.Close)
	return up, down
}

// TestRoutingViewFailedScrape: one failed scrape turns the routing view to
// 503 at once (naming the reason), however young the last success; the
// full page keeps serving (vllm_up 0), and the next good scrape brings the
// view back.
func TestRoutingViewFailedScrape(t *testing.T) {
	up, down := failingUpstream(t)
	clock := newFakeClock()
	c := newTestCollector(t, up.URL, clock, nil)
	c.ScrapeOnce(context.Background())
	if rec := get(t, c.RoutingHandler(), "/metrics/routing", nil); rec.Code != 200 {
		t.Fatalf("fresh routing view answered %d", rec.Code)
	}
	down.Store(true)
	clock.Advance(time.Millisecond)
	c.ScrapeOnce(context.Background())
	rec := get(t, c.RoutingHandler(), "/metrics/routing", nil)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "last scrape of vLLM failed (reason http_status)") {
		t.Fatalf("routing view after one failed scrape, 1 ms after the last success: %d %q, want 503 naming the reason", rec.Code, rec.Body.String())
	}
	if rec := get(t, c.MetricsHandler(), "/metrics", nil); rec.Code != 200 || samplesOf(t, rec.Body.Bytes())[`{__name__="vllm_up"}`] != 0 {
		t.Fatalf("full page after a failed scrape: %d, want 200 with vllm_up 0", rec.Code)
	}
	down.Store(false)
	clock.Advance(time.Second)
	c.ScrapeOnce(context.Background())
	if rec := get(t, c.RoutingHandler(), "/metrics/routing", nil); rec.Code != 200 {
		t.Fatalf("routing view after the upstream recovered answered %d", rec.Code)
	}
	// Down for longer than three intervals: the body still names the reason, not only the age.
	down.Store(true)
	for range 5 {
		clock.Advance(time.Second)
		c.ScrapeOnce(context.Background())
	}
	rec = get(t, c.RoutingHandler(), "/metrics/routing", nil)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "5s old (more than three scrape intervals)") || !strings.Contains(rec.Body.String(), "(reason http_status)") {
		t.Fatalf("routing view after 5 s of failed scrapes: %d %q, want 503 naming the age and the reason", rec.Code, rec.Body.String())
	}
}

func TestContentNegotiation(t *testing.T) {
	up := serveFile(t, "../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	c := newTestCollector(t, up.URL, newFakeClock(), nil)
	c.ScrapeOnce(context.Background())
	plain := get(t, c.MetricsHandler(), "/metrics", nil)
	if ct := plain.Header().Get("Content-Type"); ct != exposition.ContentTypeText {
		t.Errorf("default content type %q", ct)
	}
	gz := get(t, c.MetricsHandler(), "/metrics", map[string]string{"Accept-Encoding": "gzip"})
	if gz.Header().Get("Content-Encoding") != "gzip" {
		t.Fatal("gzip was asked for and not given")
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	unz, _ := io.ReadAll(zr)
	if !bytes.Equal(unz, plain.Body.Bytes()) {
		t.Error("the gzip page differs from the plain page")
	}
	if get(t, c.MetricsHandler(), "/metrics", map[string]string{"Accept-Encoding": "gzip;q=0"}).Header().Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 refuses gzip")
	}
	om := get(t, c.MetricsHandler(), "/metrics", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0"})
	if ct := om.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("OpenMetrics asked for, got %q", ct)
	}
	n := 0
	pagetest.EachSeries(t, om.Body.Bytes(), om.Header().Get("Content-Type"), func(labels.Labels, float64) { n++ })
	if want := len(samplesOf(t, plain.Body.Bytes())); n != want {
		t.Errorf("OpenMetrics page has %d samples, text page %d", n, want)
	}
}

// TestNewRejectsBadSettings: errors name the flag and the fix.
func TestNewRejectsBadSettings(t *testing.T) {
	base := func() Config {
		return Config{ScrapeURI: "http://127.0.0.1:8000/metrics", Interval: time.Second, MaxBodyBytes: 1 << 20,
			Windows: []time.Duration{time.Minute}, Mapper: testMapper(t, mapping.Options{}), Registry: prometheus.NewRegistry()}
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"scheme", func(c *Config) { c.ScrapeURI = "ftp://x/metrics" }, "scheme must be http or https"},
		{"no host", func(c *Config) { c.ScrapeURI = "http:///metrics" }, "has no host"},
		{"short window", func(c *Config) { c.Windows = []time.Duration{time.Second} }, "collector.Config.Windows=1s is shorter than two scrape intervals (2s)"},
		{"interval", func(c *Config) { c.Interval = 0 }, "collector.Config.Interval=0s is not positive"},
		{"body", func(c *Config) { c.MaxBodyBytes = 0 }, "collector.Config.MaxBodyBytes=0 is not positive"},
		{"password not echoed", func(c *Config) { c.ScrapeURI = "ftp://user:s3cret@host/metrics" }, "user:xxxxx@host"},
		{"password not echoed by a parse error", func(c *Config) { c.ScrapeURI = "http://user:s3cret@host:port/metrics" }, "collector.Config.ScrapeURI is not a URL"},
		{"timeout longer than interval", func(c *Config) { c.Timeout = 2 * time.Second }, "collector.Config.Timeout=2s is longer than the scrape interval (1s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.mod(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			var se *setting.Error
			if !errors.As(err, &se) || !strings.HasPrefix(se.Setting, "collector.Config.") {
				t.Errorf("error %v is no *setting.Error naming a Config field, which cmd/ could not map to a flag", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

// TestReload: a failing load keeps the mapper in use and is counted; a
// good one takes effect from the next scrape.
func TestReload(t *testing.T) {
	up := serveFile(t, "../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	clock := newFakeClock()
	c := newTestCollector(t, up.URL, clock, nil)
	scrape := func() map[string]float64 {
		clock.Advance(time.Second)
		c.ScrapeOnce(context.Background())
		return samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	}
	kv := `{__name__="vllm:kv_cache_usage_perc", engine="0", model_name="TinyLlama"}`
	if _, ok := scrape()[kv]; !ok {
		t.Fatal("kv_cache_usage_perc missing before any reload")
	}
	if err := c.Reload(func() (*mapping.Mapper, error) { return nil, errors.New("bad file") }); err == nil {
		t.Fatal("a failing load must return its error")
	}
	out := scrape()
	if _, ok := out[kv]; !ok {
		t.Error("a failed reload changed the mapping in use")
	}
	if out[`{__name__="vllm_normalizer_config_last_reload_successful"}`] != 0 || out[`{__name__="vllm_normalizer_config_reloads_total", outcome="failure"}`] != 1 {
		t.Error("the failed reload is not reported")
	}
	cfg, err := mapping.LoadConfig([]byte("metric_relabel_configs:\n- source_labels: [__name__]\n  regex: vllm:kv_cache_usage_perc\n  action: drop\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(func() (*mapping.Mapper, error) { return testMapper(t, mapping.Options{Config: cfg}), nil }); err != nil {
		t.Fatal(err)
	}
	out = scrape()
	if _, ok := out[kv]; ok {
		t.Error("the reloaded relabel rule did not drop kv_cache_usage_perc")
	}
	if out[`{__name__="vllm_normalizer_config_last_reload_successful"}`] != 1 || out[`{__name__="vllm_normalizer_config_reloads_total", outcome="success"}`] != 1 {
		t.Error("the successful reload is not reported")
	}
}

// TestRedirects: a redirect on the same host is followed (vLLM versions that
// mount /metrics/ redirect /metrics there); one to another host is refused
// and counted as the answer it is, a redirect the sidecar does not follow
// (http_status, fixed by the scrape URI), not as a network fault, so the
// upstream stays the one the flag names.
func TestRedirects(t *testing.T) {
	page, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	rs := pagetest.ServeRedirects(t, page, http.StatusTemporaryRedirect)
	up := rs.Up

	c := newTestCollector(t, up.URL+"/metrics", newFakeClock(), nil)
	c.ScrapeOnce(context.Background())
	if got := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())[`{__name__="vllm_up"}`]; got != 1 {
		t.Errorf("same-host redirect: vllm_up = %v, want 1", got)
	}

	c = newTestCollector(t, up.URL+"/elsewhere", newFakeClock(), nil)
	c.ScrapeOnce(context.Background())
	out := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	if out[`{__name__="vllm_up"}`] != 0 || rs.OtherHit() {
		t.Errorf("cross-host redirect followed: vllm_up = %v, other host contacted = %v", out[`{__name__="vllm_up"}`], rs.OtherHit())
	}
	if out[`{__name__="vllm_normalizer_scrape_failures_total", reason="http_status"}`] != 1 || out[`{__name__="vllm_normalizer_scrape_failures_total", reason="network"}`] != 0 {
		t.Errorf("cross-host redirect not counted under http_status alone: http_status %v, network %v",
			out[`{__name__="vllm_normalizer_scrape_failures_total", reason="http_status"}`], out[`{__name__="vllm_normalizer_scrape_failures_total", reason="network"}`])
	}
}

// TestRelabelAppliesToThePageOnly: metric_relabel_configs shape the full
// page; the routing view and the derived gauges are computed from the
// normalised upstream before relabelling, as docs/flags.md says, so a rule
// that drops a family from the page cannot blind a router.
func TestRelabelAppliesToThePageOnly(t *testing.T) {
	up := serveFile(t, "../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	cfg, err := mapping.LoadConfig([]byte("metric_relabel_configs:\n- source_labels: [__name__]\n  regex: 'vllm:(num_requests_running|prompt_tokens_total)'\n  action: drop\n"))
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	c := newTestCollector(t, up.URL, clock, func(c *Config) { c.Mapper = testMapper(t, mapping.Options{Config: cfg}) })
	for range 3 {
		c.ScrapeOnce(context.Background())
		clock.Advance(time.Second)
	}
	page := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	routing := samplesOf(t, get(t, c.RoutingHandler(), "/metrics/routing", nil).Body.Bytes())
	if _, ok := page[`{__name__="vllm:num_requests_running", engine="0", model_name="TinyLlama"}`]; ok {
		t.Error("the relabel drop rule did not remove num_requests_running from the page")
	}
	if _, ok := routing[`{__name__="vllm:num_requests_running", model_name="TinyLlama", role="both"}`]; !ok {
		t.Error("the routing view lost num_requests_running to a page relabel rule")
	}
	if _, ok := page[`{__name__="vllm_derived_prompt_tokens_per_second", engine="0", model_name="TinyLlama", role="both", window="1m"}`]; !ok {
		t.Error("a derived gauge lost its source to a page relabel rule")
	}
}

// vLLM's Rust frontend answers OpenMetrics only: a Go expfmt text parser (the
// routers') reads its counters' _total samples as untyped. Behind the
// sidecar the same counters come as typed text-format counters with the
// values the frontend printed, and the upstream is reported as rust.
func TestRustFrontendCountersTyped(t *testing.T) {
	files, _ := filepath.Glob("../testdata/fixtures/*rust-frontend*.om")
	if len(files) != 1 {
		t.Fatalf("rust-frontend fixture: %v", files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	rawFams, _, err := exposition.Parse(raw, fixtureContentType(files[0]), exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{} // counter sample -> value, from the OpenMetrics page
	for _, f := range rawFams {
		if f.Type == model.MetricTypeCounter {
			for _, s := range f.Samples {
				want[s.Labels.String()] = s.Value
			}
		}
	}
	if len(want) < 5 {
		t.Fatalf("only %d counter samples on the fixture", len(want))
	}

	clock := newFakeClock()
	c := newTestCollector(t, serveFile(t, files[0]).URL+"/metrics", clock, nil)
	c.ScrapeOnce(context.Background())
	body := get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for name, mf := range mfs {
		if mf.GetType() != dto.MetricType_COUNTER {
			continue
		}
		for _, m := range mf.GetMetric() {
			lb := labels.NewScratchBuilder(len(m.GetLabel()) + 1)
			lb.Add(model.MetricNameLabel, name)
			for _, l := range m.GetLabel() {
				lb.Add(l.GetName(), l.GetValue())
			}
			lb.Sort()
			got[lb.Labels().String()] = m.GetCounter().GetValue()
		}
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: expfmt reads counter %v (present %v), the frontend printed %v", k, g, ok, v)
		}
	}
	if !bytes.Contains(body, []byte(`frontend="rust"`)) {
		t.Error(`vllm_normalizer_upstream_info does not say frontend="rust"`)
	}
}

// TestCutBodyLeavesHistoryAlone: a page cut mid-number (short of its
// Content-Length) between two good ones is a failed scrape that leaves the
// history as it was: the rate over the good pages is the true one, not the
// spike a cut counter read as a reset would give.
func TestCutBodyLeavesHistoryAlone(t *testing.T) {
	page := func(v string) string {
		return "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} " + v + "\n"
	}
	var (
		mu   sync.Mutex
		next = page("1000")
		cut  bool
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		body, c := next, cut
		mu.Unlock()
		if c {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = io.WriteString(w, body[:len(body)-4]) // "...} 10" of "...} 1020"
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, body)
	}))
	defer up.Close()
	clock := newFakeClock()
	c := newTestCollector(t, up.URL+"/metrics", clock, nil)
	c.ScrapeOnce(context.Background())
	mu.Lock()
	next, cut = page("1020"), true
	mu.Unlock()
	clock.Advance(time.Second)
	c.ScrapeOnce(context.Background())
	mu.Lock()
	next, cut = page("1040"), false
	mu.Unlock()
	clock.Advance(time.Second)
	c.ScrapeOnce(context.Background())

	out := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	if got := out[`{__name__="vllm_normalizer_scrape_failures_total", reason="truncated"}`]; got != 1 {
		t.Errorf("failures{reason=\"truncated\"} = %v, want 1", got)
	}
	// Truth: 1000 -> 1040 over the 2 s between the good scrapes.
	const want = 40.0 / 2
	k := `{__name__="vllm_derived_prompt_tokens_per_second", engine="0", model_name="m", role="both", window="1m"}`
	if got, ok := out[k]; !ok || got != want {
		t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
	}
}

// TestPointsStampedWhenSent: with upstream latency alternating 50 ms and
// 800 ms, a counter growing at exactly 10/s reads 10/s, because each
// scrape's points carry the moment the request was sent (as Prometheus
// stamps them), not the moment the page had been read.
func TestPointsStampedWhenSent(t *testing.T) {
	clock := newFakeClock()
	t0 := clock.Now()
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The value is read when the request arrives; the answer then
		// takes its latency.
		v := 10 * clock.Now().Sub(t0).Seconds()
		lat := 50 * time.Millisecond
		if n.Add(1)%2 == 0 {
			lat = 800 * time.Millisecond
		}
		clock.Advance(lat)
		w.Header().Set("X-Latency", lat.String())
		_, _ = io.WriteString(w, "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} "+strconv.FormatFloat(v, 'f', -1, 64)+"\n")
	}))
	defer up.Close()
	c := newTestCollector(t, up.URL+"/metrics", clock, func(cfg *Config) { cfg.Timeout = time.Second })
	start := clock.Now()
	for i := range 30 {
		// Scrape i starts at t0 + i s, whatever the last one's latency.
		clock.Advance(start.Add(time.Duration(i) * time.Second).Sub(clock.Now()))
		c.ScrapeOnce(context.Background())
	}
	out := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	k := `{__name__="vllm_derived_prompt_tokens_per_second", engine="0", model_name="m", role="both", window="1m"}`
	if got, ok := out[k]; !ok || math.Abs(got-10) > 1e-9 {
		t.Errorf("%s = %v (present %v), want 10", k, got, ok)
	}
}

// slotsUpstream serves, at each second t of the fake clock, a counter of
// engine 0 at 5t and, until gone, one of engine 1 at 2t.
func slotsUpstream(t *testing.T, clock *fakeClock, t0 time.Time, gone float64) string {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sec := clock.Now().Sub(t0).Seconds()
		page := "# TYPE vllm:prompt_tokens_total counter\n" +
			"vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} " + strconv.FormatFloat(5*sec, 'f', -1, 64) + "\n"
		if sec <= gone {
			page += "vllm:prompt_tokens_total{engine=\"1\",model_name=\"m\"} " + strconv.FormatFloat(2*sec, 'f', -1, 64) + "\n"
		}
		_, _ = io.WriteString(w, page)
	}))
	t.Cleanup(up.Close)
	return up.URL + "/metrics"
}

// TestSlotMergeMovesNoValue: --derive.window=1m and 1h (12 s slots for the
// 1h window), scrapes every second. Engine 1, served until 300 s, grows at
// 2/s: its rate reads 2 whenever it is present, in both windows, and never
// decays as it disappears (no value moved to a time it was not observed).
func TestSlotMergeMovesNoValue(t *testing.T) {
	clock := newFakeClock()
	t0 := clock.Now()
	c := newTestCollector(t, slotsUpstream(t, clock, t0, 300), clock, func(cfg *Config) { cfg.Windows = []time.Duration{time.Minute, time.Hour} })
	for sec := 0; sec <= 330; sec++ {
		clock.Advance(t0.Add(time.Duration(sec) * time.Second).Sub(clock.Now()))
		c.ScrapeOnce(context.Background())
		out := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
		for _, w := range []string{"1m", "1h"} {
			for engine, want := range map[string]float64{"0": 5, "1": 2} {
				k := `{__name__="vllm_derived_prompt_tokens_per_second", engine="` + engine + `", model_name="m", role="both", window="` + w + `"}`
				got, ok := out[k]
				if ok && got != want {
					t.Fatalf("at %d s %s = %v, want %v", sec, k, got, want)
				}
				if !ok && sec >= 12 && (engine == "0" || sec <= 300) {
					t.Fatalf("at %d s %s is absent", sec, k)
				}
			}
		}
	}
}

// TestEachWindowItsOwnResolution: with a 1h window beside the 1m one, the
// 1m rate of a counter growing as t² (scraped every second) is still read
// at the last scrape and the one 59 s before, as Prometheus reads rate[1m]
// over 1 s scrapes: (v(t) - v(t-59)) / 59.
func TestEachWindowItsOwnResolution(t *testing.T) {
	clock := newFakeClock()
	t0 := clock.Now()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sec := clock.Now().Sub(t0).Seconds()
		_, _ = io.WriteString(w, "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} "+strconv.FormatFloat(sec*sec, 'f', -1, 64)+"\n")
	}))
	defer up.Close()
	c := newTestCollector(t, up.URL+"/metrics", clock, func(cfg *Config) { cfg.Windows = []time.Duration{time.Minute, time.Hour} })
	const k = `{__name__="vllm_derived_prompt_tokens_per_second", engine="0", model_name="m", role="both", window="1m"}`
	for sec := 0; sec <= 150; sec++ {
		clock.Advance(t0.Add(time.Duration(sec) * time.Second).Sub(clock.Now()))
		c.ScrapeOnce(context.Background())
		if sec < 60 {
			continue
		}
		s := float64(sec)
		want := (s*s - (s-59)*(s-59)) / 59
		out := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
		if got, ok := out[k]; !ok || math.Abs(got-want) > 1e-9*want {
			t.Fatalf("at %d s the 1m rate is %v (present %v), want %v", sec, got, ok, want)
		}
	}
}

// Every engine of the real V1 page put to sleep (its own sleep-state series
// switched): the routing view answers 503 saying why, /metrics says so in
// vllm_normalizer_upstream_asleep, and waking one engine brings the view
// back.
func TestRoutingViewRefusesWhenAsleep(t *testing.T) {
	raw, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	awake := string(raw)
	asleep := strings.NewReplacer(
		`sleep_state="awake"} 1.0`, `sleep_state="awake"} 0.0`,
		`sleep_state="weights_offloaded"} 0.0`, `sleep_state="weights_offloaded"} 1.0`).Replace(awake)
	if asleep == awake {
		t.Fatal("the fixture's sleep-state lines were not found")
	}
	var page atomic.Value
	page.Store(asleep)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, page.Load().(string))
	}))
	t.Cleanup(up.Close)
	clock := newFakeClock()
	c := newTestCollector(t, up.URL+"/metrics", clock, nil)
	c.ScrapeOnce(context.Background())

	rec := get(t, c.RoutingHandler(), "/metrics/routing", nil)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "weights_offloaded") {
		t.Fatalf("all engines asleep: routing view %d %q, want 503 naming the state", rec.Code, rec.Body.String())
	}
	if got := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())[`{__name__="vllm_normalizer_upstream_asleep"}`]; got != 1 {
		t.Errorf("vllm_normalizer_upstream_asleep = %v, want 1", got)
	}

	page.Store(awake)
	clock.Advance(time.Second)
	c.ScrapeOnce(context.Background())
	if rec := get(t, c.RoutingHandler(), "/metrics/routing", nil); rec.Code != http.StatusOK {
		t.Fatalf("engine awake again: routing view %d %q, want 200", rec.Code, rec.Body.String())
	}
	if got := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())[`{__name__="vllm_normalizer_upstream_asleep"}`]; got != 0 {
		t.Errorf("vllm_normalizer_upstream_asleep = %v awake, want 0", got)
	}
}

// NaN on one SGLang tensor-parallel rank (every rank reporting, as with
// --enable-metrics-for-all-schedulers) is left out where the ranks are
// combined, as PromQL's max leaves it out: the model runs 3 (max(3, NaN) in
// PromQL is 3), its in-flight gauge stays, and the NaN is counted. With
// every rank NaN there is no series, never a NaN.
func TestNaNRankLeftOut(t *testing.T) {
	raw, err := os.ReadFile("../testdata/fixtures/26-dynamo-worker+sglang-2026-01-complete-dynamo-docs-metrics-examples-sglang.prom")
	if err != nil {
		t.Fatal(err)
	}
	const rank0 = `engine_type="unified",model_name="Qwen/Qwen3-0.6B",moe_ep_rank="0",pp_rank="0",tp_rank="0"`
	const rank1 = `engine_type="unified",model_name="Qwen/Qwen3-0.6B",moe_ep_rank="0",pp_rank="0",tp_rank="1"`
	page := func(r0, r1 string) string {
		s := strings.Replace(string(raw), "sglang:num_running_reqs{"+rank0+"} 0.0\n",
			"sglang:num_running_reqs{"+rank0+"} "+r0+"\nsglang:num_running_reqs{"+rank1+"} "+r1+"\n", 1)
		return strings.Replace(s, "sglang:num_queue_reqs{"+rank0+"} 0.0\n",
			"sglang:num_queue_reqs{"+rank0+"} 0.0\nsglang:num_queue_reqs{"+rank1+"} 0.0\n", 1)
	}
	var body atomic.Value
	body.Store(page("3.0", "NaN"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, body.Load().(string))
	}))
	t.Cleanup(srv.Close)
	c := newTestCollector(t, srv.URL+"/metrics", newFakeClock(), nil)
	c.ScrapeOnce(context.Background())
	routing := get(t, c.CompatHandler(), "/metrics", nil).Body.Bytes()
	full := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	got := samplesOf(t, routing)
	key := func(name string) string {
		return labels.FromStrings(model.MetricNameLabel, name, "model_name", "Qwen/Qwen3-0.6B", "role", "both").String()
	}
	if v, ok := got[key("vllm:num_requests_running")]; !ok || v != 3 {
		t.Errorf("routing view running %v (present %v), want 3\n%s", v, ok, routing)
	}
	if v, ok := got[key("vllm_derived_requests_in_flight")]; !ok || v != 3 {
		t.Errorf("in flight %v (present %v), want 3", v, ok)
	}
	if v := full[labels.FromStrings(model.MetricNameLabel, "vllm_normalizer_collapse_nan_samples_total").String()]; v != 1 {
		t.Errorf("vllm_normalizer_collapse_nan_samples_total %v, want 1", v)
	}

	body.Store(page("NaN", "NaN"))
	c.ScrapeOnce(context.Background())
	routing = get(t, c.RoutingHandler(), "/metrics", nil).Body.Bytes()
	got = samplesOf(t, routing)
	if v, ok := got[key("vllm:num_requests_running")]; ok {
		t.Errorf("every rank NaN: running served as %v, want no series", v)
	}
	if _, ok := got[key("vllm_derived_requests_in_flight")]; ok {
		t.Error("every rank NaN: in flight served, want no series")
	}
	for k, v := range got {
		if math.IsNaN(v) {
			t.Errorf("routing view serves NaN: %s", k)
		}
	}
}

// One stray vllm: series on an SGLang page used to make the server
// "unknown", and the routing view lost running, waiting and KV usage. The
// page stays SGLang's by the weight of its evidence, and upstream_info's
// evidence says what was odd.
func TestStraySeriesKeepsTheServer(t *testing.T) {
	raw, err := os.ReadFile("../testdata/fixtures/26-dynamo-worker+sglang-2026-01-complete-dynamo-docs-metrics-examples-sglang.prom")
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw) + "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 7\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, page)
	}))
	t.Cleanup(srv.Close)
	c := newTestCollector(t, srv.URL+"/metrics", newFakeClock(), nil)
	c.ScrapeOnce(context.Background())
	got := samplesOf(t, get(t, c.RoutingHandler(), "/metrics", nil).Body.Bytes())
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
		k := labels.FromStrings(model.MetricNameLabel, name, "model_name", "Qwen/Qwen3-0.6B", "role", "both").String()
		if v, ok := got[k]; !ok || v != 0 {
			t.Errorf("routing view %s = %v (present %v), want SGLang's 0", name, v, ok)
		}
	}
	full := get(t, c.MetricsHandler(), "/metrics", nil).Body.String()
	const want = `vllm_normalizer_upstream_info{evidence="most families are sglang's; also 1 vllm: family (vllm:num_requests_running)",role="both",server="sglang"} 1`
	if !strings.Contains(full, want) {
		i := strings.Index(full, "vllm_normalizer_upstream_info{")
		t.Errorf("upstream_info is not\n%s\nbut\n%s", want, full[i:i+strings.IndexByte(full[i:], '\n')])
	}
}

// With data-parallel SGLang ranks, NaN on one tensor-parallel rank is left
// out of its engine's maximum, but an engine whose every rank is NaN is
// unknown: the model's sum over engines is withdrawn rather than served
// without it (less load than there is) or as NaN.
func TestNaNDataParallelRank(t *testing.T) {
	page := func(dp1 string) string {
		return "# TYPE sglang:num_running_reqs gauge\n" +
			`sglang:num_running_reqs{dp_rank="0",model_name="m",tp_rank="0"} 3` + "\n" +
			`sglang:num_running_reqs{dp_rank="0",model_name="m",tp_rank="1"} NaN` + "\n" +
			`sglang:num_running_reqs{dp_rank="1",model_name="m",tp_rank="0"} ` + dp1 + "\n" +
			"# TYPE sglang:num_queue_reqs gauge\n" +
			`sglang:num_queue_reqs{dp_rank="0",model_name="m",tp_rank="0"} 1` + "\n" +
			`sglang:num_queue_reqs{dp_rank="1",model_name="m",tp_rank="0"} 0` + "\n"
	}
	var body atomic.Value
	body.Store(page("2"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, body.Load().(string))
	}))
	t.Cleanup(srv.Close)
	c := newTestCollector(t, srv.URL+"/metrics", newFakeClock(), nil)
	key := func(name string) string {
		return labels.FromStrings(model.MetricNameLabel, name, "model_name", "m", "role", "both").String()
	}
	c.ScrapeOnce(context.Background())
	got := samplesOf(t, get(t, c.CompatHandler(), "/metrics", nil).Body.Bytes())
	if v := got[key("vllm:num_requests_running")]; v != 5 {
		t.Errorf("running %v, want 3 (dp 0, its NaN rank left out) + 2 (dp 1) = 5", v)
	}
	if v := got[key("vllm_derived_requests_in_flight")]; v != 6 {
		t.Errorf("in flight %v, want 6", v)
	}

	body.Store(page("NaN"))
	c.ScrapeOnce(context.Background())
	got = samplesOf(t, get(t, c.CompatHandler(), "/metrics", nil).Body.Bytes())
	for _, name := range []string{"vllm:num_requests_running", "vllm_derived_requests_in_flight"} {
		if v, ok := got[key(name)]; ok {
			t.Errorf("dp rank 1 all NaN: %s served as %v, want no series", name, v)
		}
	}
	for k, v := range got {
		if math.IsNaN(v) {
			t.Errorf("the routing view serves NaN: %s", k)
		}
	}
}

// TestShadowingFamilyServed: a header of its own for a histogram's count
// (found by FuzzPipeline) made the routers' expfmt parser reject every
// page. The count is served in its histogram, as without the header; a
// gauge that the underscore style names as that count is a collision.
func TestShadowingFamilyServed(t *testing.T) {
	raw, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	const count = `vllm:time_to_first_token_seconds_count{engine="0",model_name="TinyLlama"}`
	if !strings.Contains(string(raw), count+" ") {
		t.Fatal("the fixture no longer has the series this test shadows")
	}
	shadowed := strings.Replace(string(raw), count, "# HELP vllm:time_to_first_token_seconds_count Requests.\n# TYPE vllm:time_to_first_token_seconds_count untyped\n"+count, 1)
	styled := string(raw) + "# TYPE vllm_time_to_first_token_seconds_count gauge\n" +
		`vllm_time_to_first_token_seconds_count{engine="0",model_name="TinyLlama"} 5` + "\n"
	underscore := func(c *Config) { c.Mapper = testMapper(t, mapping.Options{NameStyle: mapping.NameStyleUnderscore}) }
	for _, tc := range []struct {
		name, page string
		mod        func(*Config)
		collisions int
	}{
		{"own header", shadowed, nil, 0},
		{"own header, underscore style", shadowed, underscore, 0},
		{"gauge named so by the style", styled, underscore, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serve := func(page string) *Collector {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "text/plain; version=0.0.4")
					_, _ = io.WriteString(w, page)
				}))
				t.Cleanup(srv.Close)
				c := newTestCollector(t, srv.URL+"/metrics", newFakeClock(), tc.mod)
				c.ScrapeOnce(context.Background())
				return c
			}
			c, plain := serve(tc.page), serve(string(raw))
			for _, h := range []http.Handler{c.MetricsHandler(), c.RoutingHandler(), c.CompatHandler()} {
				checkValidPage(t, get(t, h, "/metrics", nil).Body.Bytes())
			}
			full := get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()
			got, want := samplesOf(t, full), samplesOf(t, get(t, plain.MetricsHandler(), "/metrics", nil).Body.Bytes())
			for k, v := range want {
				if !strings.Contains(k, "time_to_first_token_seconds") {
					continue
				}
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %v (present %v), want %v as served for the page without the clash", k, g, ok, v)
				}
			}
			line := fmt.Sprintf(`vllm_normalizer_dropped_series_total{reason="collision"} %d`, tc.collisions)
			if !bytes.Contains(full, []byte(line+"\n")) {
				t.Errorf("the page lacks %s", line)
			}
		})
	}
}

// A page whose only engine prints its TTFT histogram without +Inf: the
// compatibility page serves no sum of it (no total count, as the derived
// quantiles read it), the other histograms still summed, and the scrape
// counts why.
func TestCompatWithoutInfUnsummed(t *testing.T) {
	srv := serveWithoutInf(t, "vllm:time_to_first_token_seconds")
	c := newTestCollector(t, srv.URL+"/metrics", newFakeClock(), nil)
	c.ScrapeOnce(context.Background())
	compat := samplesOf(t, get(t, c.CompatHandler(), "/metrics", nil).Body.Bytes())
	sum := func(name string) (n int) {
		for k := range compat {
			if strings.HasPrefix(k, "{__name__=\""+name+"_") && !strings.Contains(k, "engine=") {
				n++
			}
		}
		return n
	}
	if n := sum("vllm:time_to_first_token_seconds"); n != 0 {
		t.Errorf("%d samples of the TTFT histogram summed without +Inf", n)
	}
	if n := sum("vllm:inter_token_latency_seconds"); n == 0 {
		t.Errorf("the ITL histogram, printed whole, is not summed")
	}
	full := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	if v := full[labels.FromStrings(model.MetricNameLabel, "vllm_normalizer_unsummed_histograms_total", "reason", "no_inf").String()]; v != 1 {
		t.Errorf("vllm_normalizer_unsummed_histograms_total{reason=\"no_inf\"} %v, want 1", v)
	}
}
