package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/otlp"
	"github.com/fos-study/vllm-normalizer/serve"
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

// The routing view, the compatibility page and the GenAI view are built by
// their first reader after each scrape, from what every scrape keeps: a
// sidecar nobody reads for tens of scrapes then serves the bytes of one
// read after every scrape, and the many readers of one snapshot, reading
// while the next scrape runs, all get the same bytes (the -race run checks
// that nothing they share is written).
func TestReaderViewsOnDemand(t *testing.T) {
	clock := newFakeClock()
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 3, Engines: 4})
	if err != nil {
		t.Fatal(err)
	}
	collector := func() (*Collector, *memTransport) {
		tr := &memTransport{}
		return newTestCollector(t, "http://127.0.0.1:8000/metrics", clock, func(cfg *Config) {
			cfg.Client = &http.Client{Transport: tr}
			cfg.Role = "decode" // labelled on every routing series, on the pages readers build
		}), tr
	}
	read, readTr := collector()
	unread, unreadTr := collector()
	n := 0
	scrape := func() {
		clock.Advance(time.Second)
		p := up.Page()
		if n++; n%7 == 3 {
			// Engine 2 misses a scrape: the sums carry its last totals,
			// which only a sum advanced every scrape knows.
			p = regexp.MustCompile(`(?m)^.*engine="2".*\n`).ReplaceAll(p, nil)
		}
		readTr.page, unreadTr.page = p, p
		read.ScrapeOnce(context.Background())
		unread.ScrapeOnce(context.Background())
	}
	views := func(s *snapshot) map[string]*serve.Page {
		return map[string]*serve.Page{"routing": s.routing, "compat": s.compat, "genai": s.genai}
	}
	body := func(p *serve.Page, gz bool) []byte {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		serve.Write(rec, req, p)
		return rec.Body.Bytes()
	}
	scrape()
	const readers = 6
	for i := range 40 {
		s := read.snap.Load()
		got := map[string][][]byte{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for name, p := range views(s) {
			for r := range readers {
				wg.Go(func() {
					b := body(p, r%2 == 1)
					mu.Lock()
					got[name] = append(got[name], b)
					mu.Unlock()
				})
			}
		}
		scrape() // while they read the last snapshot
		wg.Wait()
		for name, bodies := range got {
			var plain []byte
			for _, b := range bodies {
				if len(b) == 0 {
					t.Fatalf("scrape %d: %s read empty", i, name)
				}
				if b[0] != 0x1f && plain == nil {
					plain = b
				} else if b[0] != 0x1f && !bytes.Equal(b, plain) {
					t.Fatalf("scrape %d: two readers of one snapshot's %s got different bytes:\n%s\n--\n%s", i, name, plain, b)
				}
			}
		}
		if i%10 != 9 {
			continue
		}
		// Unread for ten scrapes, then read: what a view read every
		// scrape serves.
		want, have := views(read.snap.Load()), views(unread.snap.Load())
		for name := range want {
			w, h := body(want[name], false), body(have[name], false)
			if !bytes.Equal(w, h) {
				t.Fatalf("scrape %d: %s first read after ten unread scrapes differs from one read every scrape:\n%s\nwant\n%s", i, name, h, w)
			}
			checkValidPage(t, h)
			if name != "genai" && !bytes.Contains(h, []byte(`role="decode"`)) {
				t.Fatalf("scrape %d: %s has no role label:\n%s", i, name, h)
			}
		}
	}
}

// /metrics?name[]=... serves only the named families, as client_golang's
// promhttp does (the name on the TYPE line, exact; an empty name matches
// nothing; no name[] is the whole page): each distinct selection encoded
// once per scrape and kept for the scrape's other readers, in any order,
// up to maxSelections, beyond which pages are served but not kept.
func TestMetricsNameSelection(t *testing.T) {
	clock := newFakeClock()
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 3, Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	tr := &memTransport{}
	c := newTestCollector(t, "http://127.0.0.1:8000/metrics", clock, func(cfg *Config) { cfg.Client = &http.Client{Transport: tr} })
	scrape := func() {
		clock.Advance(time.Second)
		tr.page = up.Page()
		c.ScrapeOnce(context.Background())
	}
	query := func(names ...string) string {
		v := url.Values{}
		for _, n := range names {
			v.Add("name[]", n)
		}
		return "/metrics?" + v.Encode()
	}
	fleet := fleetNames
	for range 70 { // the 1m window's derived gauges are there
		scrape()
	}
	for round := range 2 {
		full := get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()
		wantFams := map[string]bool{}
		for _, n := range fleet {
			wantFams[n] = true
		}
		want := map[string]float64{}
		for k, v := range samplesOf(t, full) {
			for n := range wantFams {
				if strings.HasPrefix(k, `{__name__="`+n+`"`) || strings.HasPrefix(k, `{__name__="`+n+`_`) {
					want[k] = v
				}
			}
		}
		body := get(t, c.MetricsHandler(), query(append(slices.Clone(fleet), "no_such_family")...), nil).Body.Bytes()
		checkValidPage(t, body)
		got := samplesOf(t, body)
		if len(got) < len(fleet) || !maps.Equal(got, want) {
			t.Fatalf("round %d: name[] page holds %d series, want the %d of the full page's named families:\n%s", round, len(got), len(want), body)
		}
		fams, _, err := exposition.Parse(body, exposition.ContentTypeText, exposition.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if !wantFams[f.Name] {
				t.Errorf("round %d: family %s served, not asked for", round, f.Name)
			}
			delete(wantFams, f.Name)
		}
		if len(wantFams) > 0 {
			t.Errorf("round %d: families asked for and not served: %v", round, wantFams)
		}
		// The same selection in another order, a name twice: the page
		// already encoded.
		reordered := append(slices.Clone(fleet), "no_such_family", fleet[0])
		slices.Reverse(reordered)
		if again := get(t, c.MetricsHandler(), query(reordered...), nil).Body.Bytes(); !bytes.Equal(again, body) {
			t.Errorf("round %d: the same names in another order served other bytes", round)
		}
		if n := len(c.snap.Load().selected.pages); n != 1 {
			t.Errorf("round %d: %d selections kept for one distinct selection", round, n)
		}
		scrape() // the next round reads the next scrape's values
	}
	if body := get(t, c.MetricsHandler(), query(""), nil); body.Code != http.StatusOK || body.Body.Len() != 0 {
		t.Errorf("name[]= (empty): %d %q, want 200 and no family", body.Code, body.Body.String())
	}
	// Many distinct selections: each right, the kept ones bounded.
	for i := range 3 * maxSelections {
		name := fleet[i%len(fleet)]
		body := get(t, c.MetricsHandler(), query(name, fmt.Sprintf("hostile_%d", i)), nil).Body.Bytes()
		fams, _, err := exposition.Parse(body, exposition.ContentTypeText, exposition.ParseOptions{})
		if err != nil || len(fams) != 1 || fams[0].Name != name {
			t.Fatalf("selection %d: %v %d families, want only %s", i, err, len(fams), name)
		}
	}
	if n := len(c.snap.Load().selected.pages); n > maxSelections {
		t.Errorf("%d selections kept, want at most %d", n, maxSelections)
	}
}

// TestFleetScrapeConfigNames: fleetNames, the name[] list of the fleet
// scrape config in docs/diagnosis.md, is every sidecar family the vllm-fleet
// recording group reads, and the docs list it.
func TestFleetScrapeConfigNames(t *testing.T) {
	rules, err := os.ReadFile("../deploy/prometheus/recording.yml")
	if err != nil {
		t.Fatal(err)
	}
	_, group, ok := strings.Cut(string(rules), "- name: vllm-fleet\n")
	if !ok {
		t.Fatal("no vllm-fleet group in deploy/prometheus/recording.yml")
	}
	if i := strings.Index(group, "\n  - name: "); i >= 0 {
		group = group[:i]
	}
	recorded := map[string]bool{}
	for _, m := range regexp.MustCompile(`record: (\S+)`).FindAllStringSubmatch(group, -1) {
		recorded[m[1]] = true
	}
	var read []string
	for _, n := range regexp.MustCompile(`vllm[_:][A-Za-z0-9_:]*`).FindAllString(group, -1) {
		if !recorded[n] && !slices.Contains(read, n) {
			read = append(read, n)
		}
	}
	slices.Sort(read)
	if !slices.Equal(read, fleetNames) {
		t.Errorf("the vllm-fleet group reads %v, the fleet scrape config asks for %v", read, fleetNames)
	}
	docs, err := os.ReadFile("../docs/diagnosis.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fleetNames {
		if !strings.Contains(string(docs), "        - "+n+"\n") {
			t.Errorf("docs/diagnosis.md's fleet scrape config does not ask for %s", n)
		}
	}
}

// TestFamiliesAreThePages: what Families hands a pusher is what each page
// serves, byte for byte once encoded; the routing view has none whenever
// its page answers 503 (before the first scrape, after a failed one), and
// the time moves with every publish.
func TestFamiliesAreThePages(t *testing.T) {
	up, down := failingUpstream(t)
	clock := newFakeClock()
	c := newTestCollector(t, up.URL, clock, nil)
	if _, ok := c.Families(ViewRouting); ok {
		t.Error("the routing view has families before the first scrape, when its page answers 503")
	}
	first, _ := c.Families(ViewFull)
	before := first.At

	clock.Advance(time.Second)
	c.ScrapeOnce(context.Background())
	pages := map[View]http.Handler{ViewFull: c.MetricsHandler(), ViewRouting: c.RoutingHandler(), ViewGenAI: c.GenAIHandler()}
	var at time.Time
	for view, h := range pages {
		pub, ok := c.Families(view)
		if !ok || len(pub.Families) == 0 {
			t.Fatalf("%s: no families after a good scrape", view)
		}
		at = pub.At
		rec := get(t, h, "/", nil)
		if got := exposition.AppendText(nil, pub.Families); !bytes.Equal(got, rec.Body.Bytes()) {
			t.Errorf("%s: the families encode to %d bytes, the page serves %d others", view, len(got), rec.Body.Len())
		}
	}
	if !at.After(before) || !at.Equal(clock.Now()) {
		t.Errorf("published at %s after %s (clock %s); want the time of the publish", at, before, clock.Now())
	}

	down.Store(true)
	clock.Advance(time.Second)
	c.ScrapeOnce(context.Background())
	if _, ok := c.Families(ViewRouting); ok {
		t.Error("the routing view has families after a failed scrape, when its page answers 503")
	}
	pub, ok := c.Families(ViewFull)
	if !ok || !pub.At.After(at) {
		t.Errorf("the full page after a failed scrape: ok %v at %s, want a new publish after %s", ok, pub.At, at)
	}
	for _, f := range pub.Families {
		if strings.HasPrefix(f.Name, "vllm:") {
			t.Errorf("%s is on the full page after a failed scrape: withdrawn series must not be pushed either", f.Name)
		}
	}
}

// TestFastRestartDatesPushedSeries: a restart the upstream's page
// announces (the demo's _created and process start times) while its
// counters came back higher than before moves the pushed start time of
// the upstream's series, to just after the previous push, and of no series
// of the sidecar's own (fails while only counts that go down moved it).
func TestFastRestartDatesPushedSeries(t *testing.T) {
	c, clock, up, scrape, last := sumsDemo(t, 30)
	conv := otlp.NewConverter()
	// The start of every cumulative point by metric name and attributes.
	push := func() (map[string]time.Time, time.Time) {
		pub, ok := c.Families(ViewFull)
		if !ok {
			t.Fatal("no full page")
		}
		out := map[string]time.Time{}
		for _, m := range conv.Convert(otlp.Page{Families: pub.Families, At: pub.At, RestartedAt: pub.RestartedAt}) {
			key := func(attrs []*commonpb.KeyValue) string {
				k := m.Name
				for _, kv := range attrs {
					k += "," + kv.Key + "=" + kv.Value.GetStringValue()
				}
				return k
			}
			switch d := m.Data.(type) {
			case *metricpb.Metric_Sum:
				for _, p := range d.Sum.DataPoints {
					out[key(p.Attributes)] = time.Unix(0, int64(p.StartTimeUnixNano))
				}
			case *metricpb.Metric_Histogram:
				for _, p := range d.Histogram.DataPoints {
					out[key(p.Attributes)] = time.Unix(0, int64(p.StartTimeUnixNano))
				}
			}
		}
		return out, pub.At
	}
	before, pushedAt := push()

	scrape(fastRestart(t, clock, up, last, "vllm:prefix_cache_hits_total", "vllm:e2e_request_latency_seconds_count"))
	after, _ := push()

	moved := 0
	for k, s := range after {
		was, ok := before[k]
		if !ok {
			continue
		}
		own := strings.HasPrefix(k, "vllm_normalizer_") || strings.HasPrefix(k, "vllm_up")
		switch {
		case own && !s.Equal(was):
			t.Errorf("%s, the sidecar's own, moved its start from %s to %s at the upstream's restart", k, was, s)
		case strings.HasPrefix(k, "vllm:prefix_cache_hits") || strings.HasPrefix(k, "vllm:e2e_request_latency_seconds"):
			if want := pushedAt.Add(time.Millisecond); !s.Equal(want) {
				t.Errorf("%s: start %s after the announced restart, want %s (just after the previous push)", k, s, want)
			}
			moved++
		}
	}
	if moved == 0 {
		t.Fatalf("no pushed series of the prefix-cache hits or the e2e latency histogram in both pushes: %d series", len(after))
	}
}

// A page is encoded once a scrape and kept for that scrape's readers, and
// never served after the next scrape: each read, with gzip or without,
// serves the upstream's latest values, and the gzip body is the text body
// compressed.
func TestCachedPageFollowsTheNextScrape(t *testing.T) {
	clock := newFakeClock()
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 1, Engines: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr := &memTransport{}
	c := benchCollector(t, clock, tr, time.Second)
	ctx := context.Background()
	gz := map[string]string{"Accept-Encoding": "gzip"}
	var lastText []byte
	for scrape := range 4 {
		clock.Advance(time.Second)
		tr.page = up.Page()
		c.ScrapeOnce(ctx)
		if c.lastReason != "" {
			t.Fatalf("scrape %d failed: %s", scrape, c.lastReason)
		}
		// Odd scrapes are read with gzip first (the text encoded on its way
		// to the compressor), even ones as text first.
		var text, zipped []byte
		if scrape%2 == 1 {
			zipped = get(t, c.MetricsHandler(), "/metrics", gz).Body.Bytes()
			text = get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()
		} else {
			text = get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()
			zipped = get(t, c.MetricsHandler(), "/metrics", gz).Body.Bytes()
		}
		if again := get(t, c.MetricsHandler(), "/metrics", gz).Body.Bytes(); !bytes.Equal(again, zipped) {
			t.Errorf("scrape %d: a second gzip read of one scrape served other bytes", scrape)
		}
		if unzipped := gunzipBytes(t, zipped); !bytes.Equal(unzipped, text) {
			t.Errorf("scrape %d: the gzip body is not the text body (%d against %d bytes)", scrape, len(unzipped), len(text))
		}
		served, upstream := samplesOf(t, text), samplesOf(t, tr.page)
		same := 0
		for k, v := range upstream {
			if got, ok := served[k]; ok {
				same++
				if got != v && !(v != v && got != got) {
					t.Errorf("scrape %d: %s served %v, the upstream's latest page says %v", scrape, k, got, v)
				}
			}
		}
		if same < 50 {
			t.Fatalf("scrape %d: only %d upstream series found on /metrics", scrape, same)
		}
		if lastText != nil && bytes.Equal(lastText, text) {
			t.Errorf("scrape %d served the last scrape's page", scrape)
		}
		lastText = text
	}
}

func gunzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
