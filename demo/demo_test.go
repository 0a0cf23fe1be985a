package demo

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// clock is a fake clock safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 7, 14, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newUpstream(t testing.TB, c *clock, seed int64, engines int) *Upstream {
	t.Helper()
	u, err := New(Options{Now: c.Now, Seed: seed, Engines: engines})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// page is a parsed page: its families, and every sample by series.
type page struct {
	fams   []exposition.Family
	byName map[string]*exposition.Family
	series map[string]float64 // labels.String() -> value
}

func parse(t testing.TB, body []byte) page {
	t.Helper()
	fams, stats, err := exposition.Parse(body, exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		t.Fatalf("exposition.Parse: %v", err)
	}
	if stats.DuplicateSeries != 0 || stats.InvalidNames != 0 {
		t.Fatalf("parse stats: %+v", stats)
	}
	p := page{fams: fams, byName: map[string]*exposition.Family{}, series: map[string]float64{}}
	for i := range fams {
		p.byName[fams[i].Name] = &fams[i]
		for _, s := range fams[i].Samples {
			p.series[s.Labels.String()] = s.Value
		}
	}
	return p
}

// get returns the value of the series name{engine="0", kv...}; it fails
// the test when there is not exactly one.
func (p page) get(t testing.TB, name string, kv ...string) float64 {
	t.Helper()
	return p.getEngine(t, "0", name, kv...)
}

func (p page) getEngine(t testing.TB, engine, name string, kv ...string) float64 {
	t.Helper()
	found, v := 0, 0.0
	for i := range p.fams {
	samples:
		for _, s := range p.fams[i].Samples {
			if s.Name() != name || s.Labels.Get("engine") != engine {
				continue
			}
			for k := 0; k+1 < len(kv); k += 2 {
				if s.Labels.Get(kv[k]) != kv[k+1] {
					continue samples
				}
			}
			found++
			v = s.Value
		}
	}
	if found != 1 {
		t.Fatalf("%d series %s{engine=%q %v}, want 1", found, name, engine, kv)
	}
	return v
}

// Families the simulation feeds: counters that must grow, histograms whose
// _sum must grow, within 30 s of simulated load.
var (
	fedCounters = []string{
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total",
		"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
		"vllm:external_prefix_cache_queries_total", "vllm:prompt_tokens_cached_total",
	}
	fedHistograms = []string{
		"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
		"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
		"vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
		"vllm:request_inference_time_seconds", "vllm:request_prompt_tokens",
		"vllm:request_generation_tokens", "vllm:request_time_per_output_token_seconds",
		"vllm:iteration_tokens_total", "vllm:request_max_num_generation_tokens",
		"vllm:request_params_n", "vllm:request_params_max_tokens",
		"vllm:request_prefill_kv_computed_tokens",
	}
)

func TestDumpIsTheFixture(t *testing.T) {
	want, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Skipf("fixture not available: %v", err)
	}
	d := Dump()
	if !bytes.Equal(d, want) {
		t.Fatal("embedded dump differs from testdata fixture 13")
	}
	d[0] = 'X'
	if Dump()[0] == 'X' {
		t.Fatal("Dump returns the embedded bytes themselves, not a copy")
	}
}

func TestPageKeepsTheDumpsShape(t *testing.T) {
	c := newClock()
	u := newUpstream(t, c, 1, 0)
	body := u.Page()

	tp := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := tp.TextToMetricFamilies(bytes.NewReader(body)); err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	got := parse(t, body)
	orig := parse(t, Dump())
	if len(got.fams) != len(orig.fams) {
		t.Fatalf("%d families, dump has %d", len(got.fams), len(orig.fams))
	}
	for i, of := range orig.fams {
		gf := got.fams[i]
		if gf.Name != of.Name || gf.Type != of.Type || gf.Help != of.Help {
			t.Errorf("family %d: got %s %s %q, dump has %s %s %q", i, gf.Name, gf.Type, gf.Help, of.Name, of.Type, of.Help)
			continue
		}
		if len(gf.Samples) != len(of.Samples) {
			t.Errorf("%s: %d samples, dump has %d", of.Name, len(gf.Samples), len(of.Samples))
			continue
		}
		for j := range of.Samples {
			if !labels.Equal(gf.Samples[j].Labels, of.Samples[j].Labels) {
				t.Errorf("%s sample %d: %s, dump has %s", of.Name, j, gf.Samples[j].Labels, of.Samples[j].Labels)
			}
		}
	}
	// Families the model does not touch keep the dump's values.
	for _, name := range []string{
		"python_gc_objects_collected_total", "python_info", "process_start_time_seconds",
		"vllm:engine_sleep_state", "vllm:cache_config_info", "vllm:mm_cache_queries_total",
		"vllm:prompt_tokens_created", "vllm:time_to_first_token_seconds_created",
		"vllm:nixl_num_failed_transfers_total",
	} {
		of, gf := orig.byName[name], got.byName[name]
		if of == nil || gf == nil {
			t.Errorf("%s missing", name)
			continue
		}
		for j := range of.Samples {
			if gf.Samples[j].Value != of.Samples[j].Value {
				t.Errorf("%s changed: %v -> %v", gf.Samples[j].Labels, of.Samples[j].Value, gf.Samples[j].Value)
			}
		}
	}
}

// checkHistograms checks that every histogram series of p has monotone
// cumulative buckets ending in +Inf equal to _count.
func checkHistograms(t *testing.T, p page) {
	t.Helper()
	for _, f := range p.fams {
		if f.Type != model.MetricTypeHistogram {
			continue
		}
		type series struct {
			les    []float64
			counts []float64
			count  float64
			has    bool
		}
		all := map[string]*series{}
		key := func(s exposition.Sample) *series {
			k := labels.NewBuilder(s.Labels).Del(model.MetricNameLabel, model.BucketLabel).Labels().String()
			if all[k] == nil {
				all[k] = &series{}
			}
			return all[k]
		}
		for _, s := range f.Samples {
			switch strings.TrimPrefix(s.Name(), f.Name) {
			case "_bucket":
				le, err := strconv.ParseFloat(s.Labels.Get(model.BucketLabel), 64)
				if err != nil {
					t.Fatal(err)
				}
				sr := key(s)
				sr.les = append(sr.les, le)
				sr.counts = append(sr.counts, s.Value)
			case "_count":
				sr := key(s)
				sr.count, sr.has = s.Value, true
			}
		}
		for k, sr := range all {
			if !sr.has || len(sr.les) == 0 {
				t.Errorf("%s%s: no _count or buckets", f.Name, k)
				continue
			}
			for i := 1; i < len(sr.les); i++ {
				if sr.les[i] <= sr.les[i-1] || sr.counts[i] < sr.counts[i-1] {
					t.Errorf("%s%s: bucket %g=%g after %g=%g", f.Name, k, sr.les[i], sr.counts[i], sr.les[i-1], sr.counts[i-1])
				}
			}
			last := len(sr.les) - 1
			if !math.IsInf(sr.les[last], 1) || sr.counts[last] != sr.count {
				t.Errorf("%s%s: last bucket le=%g %g, _count %g", f.Name, k, sr.les[last], sr.counts[last], sr.count)
			}
		}
	}
}

// checkNoDecrease fails on any counter, histogram or summary series of
// after that is below its value in before.
func checkNoDecrease(t *testing.T, before, after page) {
	t.Helper()
	for _, f := range after.fams {
		if f.Type != model.MetricTypeCounter && f.Type != model.MetricTypeHistogram && f.Type != model.MetricTypeSummary {
			continue
		}
		for _, s := range f.Samples {
			k := s.Labels.String()
			if old, ok := before.series[k]; ok && s.Value < old {
				t.Errorf("%s went down: %v -> %v", k, old, s.Value)
			}
		}
	}
}

func checkGauges(t *testing.T, p page, engine string) {
	t.Helper()
	kv := p.getEngine(t, engine, "vllm:kv_cache_usage_perc")
	if kv < 0 || kv > 1 {
		t.Errorf("engine %s: kv_cache_usage_perc %v outside 0..1", engine, kv)
	}
	for _, g := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting"} {
		v := p.getEngine(t, engine, g)
		if v < 0 || v != math.Trunc(v) {
			t.Errorf("engine %s: %s = %v", engine, g, v)
		}
	}
	if r := p.getEngine(t, engine, "vllm:num_requests_running"); r > maxRunning {
		t.Errorf("engine %s: %v running, batch is %d", engine, r, maxRunning)
	}
}

func TestThirtySecondsOfLoad(t *testing.T) {
	c := newClock()
	u := newUpstream(t, c, 7, 1)
	before := parse(t, u.Page())
	c.Advance(30 * time.Second)
	after := parse(t, u.Page())

	checkHistograms(t, before)
	checkHistograms(t, after)
	checkNoDecrease(t, before, after)
	checkGauges(t, after, "0")

	for _, name := range fedCounters {
		if b, a := before.get(t, name), after.get(t, name); a <= b {
			t.Errorf("%s did not grow: %v -> %v", name, b, a)
		}
	}
	okReasons := after.get(t, "vllm:request_success_total", "finished_reason", "stop") +
		after.get(t, "vllm:request_success_total", "finished_reason", "length") -
		before.get(t, "vllm:request_success_total", "finished_reason", "stop") -
		before.get(t, "vllm:request_success_total", "finished_reason", "length")
	if okReasons < 30 {
		t.Errorf("%v requests finished in 30 s, want at least 30 (2..8 per second)", okReasons)
	}
	for _, h := range fedHistograms {
		if b, a := before.get(t, h+"_sum"), after.get(t, h+"_sum"); a <= b {
			t.Errorf("%s_sum did not grow: %v -> %v", h, b, a)
		}
	}

	delta := func(name string) float64 { return after.get(t, name) - before.get(t, name) }
	// TTFT = queue + prefill, request by request.
	ttft := delta("vllm:time_to_first_token_seconds_sum")
	qp := delta("vllm:request_queue_time_seconds_sum") + delta("vllm:request_prefill_time_seconds_sum")
	if math.Abs(ttft-qp) > 1e-6*ttft {
		t.Errorf("TTFT sum grew by %v, queue + prefill by %v", ttft, qp)
	}
	if n, m := delta("vllm:time_to_first_token_seconds_count"), delta("vllm:request_queue_time_seconds_count"); n != m {
		t.Errorf("TTFT count grew by %v, queue count by %v", n, m)
	}
	// e2e = queue + inference = queue + prefill + decode, for finished requests.
	e2e := delta("vllm:e2e_request_latency_seconds_sum")
	if inf := delta("vllm:request_inference_time_seconds_sum"); inf >= e2e || inf <= 0 {
		t.Errorf("inference time sum grew by %v, e2e by %v", inf, e2e)
	}
	// Every prompt token is either a local hit, computed or pulled over NIXL;
	// the hit ratio is a plausible 30-60%%.
	q := delta("vllm:prefix_cache_queries_total")
	if p := delta("vllm:prompt_tokens_total"); p != q {
		t.Errorf("prompt tokens grew by %v, prefix cache queries by %v", p, q)
	}
	if r := delta("vllm:prefix_cache_hits_total") / q; r < 0.25 || r > 0.65 {
		t.Errorf("prefix cache hit ratio %v", r)
	}
	src := 0.0
	for _, s := range []string{"local_compute", "local_cache_hit", "external_kv_transfer"} {
		src += after.get(t, "vllm:prompt_tokens_by_source_total", "source", s) - before.get(t, "vllm:prompt_tokens_by_source_total", "source", s)
	}
	if want := q + delta("vllm:prompt_tokens_recomputed_total"); src != want {
		t.Errorf("prompt tokens by source grew by %v, want %v", src, want)
	}
	// Generated tokens: one per decode step per running request.
	if g, itl := delta("vllm:generation_tokens_total"), delta("vllm:inter_token_latency_seconds_count"); itl >= g || itl < 0.8*g {
		t.Errorf("generation tokens grew by %v, inter-token latencies by %v", g, itl)
	}
	// Mean TTFT and ITL in plausible ranges.
	if m := ttft / delta("vllm:time_to_first_token_seconds_count"); m <= 0 || m > 60 {
		t.Errorf("mean TTFT %v s", m)
	}
	if m := delta("vllm:inter_token_latency_seconds_sum") / delta("vllm:inter_token_latency_seconds_count"); m < 0.005 || m > 0.2 {
		t.Errorf("mean ITL %v s", m)
	}
}

// TestLongRun watches 20 simulated minutes page by page: nothing decreases,
// histograms stay valid, and load visibly rises and falls.
func TestLongRun(t *testing.T) {
	c := newClock()
	u := newUpstream(t, c, 3, 1)
	prev := parse(t, u.Page())
	minRun, maxRun, maxWait, maxKV := math.Inf(1), 0.0, 0.0, 0.0
	for range 240 {
		c.Advance(5 * time.Second)
		p := parse(t, u.Page())
		checkNoDecrease(t, prev, p)
		checkGauges(t, p, "0")
		r := p.get(t, "vllm:num_requests_running")
		minRun, maxRun = min(minRun, r), max(maxRun, r)
		maxWait = max(maxWait, p.get(t, "vllm:num_requests_waiting"))
		maxKV = max(maxKV, p.get(t, "vllm:kv_cache_usage_perc"))
		prev = p
		if t.Failed() {
			return
		}
	}
	checkHistograms(t, prev)
	if maxRun-minRun < 10 || maxWait == 0 || maxKV < 0.5 {
		t.Errorf("load is not wavy: running %v..%v, waiting up to %v, KV up to %v", minRun, maxRun, maxWait, maxKV)
	}
	orig := parse(t, Dump())
	if prev.get(t, "vllm:num_preemptions_total") <= orig.get(t, "vllm:num_preemptions_total") {
		t.Error("no preemption in 20 minutes of peaks")
	}
}

// A page after a long pause computes at most maxCatchUp of simulated
// time (judged by the simulated clock, not by the wall clock, which a busy
// machine stretches).
func TestLongPauseIsCheap(t *testing.T) {
	c := newClock()
	u := newUpstream(t, c, 1, 2)
	u.Page()
	before := u.simT
	c.Advance(72 * time.Hour)
	p := parse(t, u.Page())
	if got := u.simT - before; got != maxCatchUp.Seconds() {
		t.Errorf("a 72 h pause advanced the simulation by %v s, want %v s", got, maxCatchUp.Seconds())
	}
	checkHistograms(t, p)
}

func TestEngines(t *testing.T) {
	c := newClock()
	u := newUpstream(t, c, 1, 4)
	c.Advance(60 * time.Second)
	body := u.Page()
	tp := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := tp.TextToMetricFamilies(bytes.NewReader(body)); err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	p := parse(t, body)
	checkHistograms(t, p)
	orig := parse(t, Dump())
	gens := map[float64]bool{}
	for e := range 4 {
		eng := strconv.Itoa(e)
		checkGauges(t, p, eng)
		g := p.getEngine(t, eng, "vllm:generation_tokens_total")
		if g <= orig.get(t, "vllm:generation_tokens_total") {
			t.Errorf("engine %s generated nothing", eng)
		}
		gens[g] = true
		p.getEngine(t, eng, "vllm:cache_config_info")
		p.getEngine(t, eng, "vllm:engine_sleep_state", "sleep_state", "awake")
	}
	if len(gens) != 4 {
		t.Errorf("engines do not have distinct loads: %v", gens)
	}
	// Every engine series of the dump exists for every engine; the rest once.
	for _, of := range orig.fams {
		engineSamples, other := 0, 0
		for _, s := range of.Samples {
			if s.Labels.Get("engine") != "" {
				engineSamples++
			} else {
				other++
			}
		}
		if got, want := len(p.byName[of.Name].Samples), 4*engineSamples+other; got != want {
			t.Errorf("%s: %d samples, want %d", of.Name, got, want)
		}
	}
	if _, ok := p.series[`{__name__="vllm:num_requests_running", engine="4", model_name="TinyLlama"}`]; ok {
		t.Error("engine 4 exists with Engines=4")
	}
}

func TestRestart(t *testing.T) {
	c := newClock()
	u := newUpstream(t, c, 5, 2)
	c.Advance(20 * time.Second)
	before := parse(t, u.Page())
	c.Advance(time.Second)
	u.Restart()
	restartAt := float64(c.Now().Unix())
	reset := parse(t, u.Page())
	checkHistograms(t, reset)
	for _, e := range []string{"0", "1"} {
		for _, name := range append([]string{"vllm:prompt_tokens_total", "vllm:generation_tokens_total"}, "vllm:time_to_first_token_seconds_count") {
			if b, a := before.getEngine(t, e, name), reset.getEngine(t, e, name); a >= b || a != 0 {
				t.Errorf("engine %s %s after restart: %v (before %v)", e, name, a, b)
			}
		}
		if v := reset.getEngine(t, e, "vllm:prompt_tokens_created"); v != restartAt {
			t.Errorf("engine %s prompt_tokens_created = %v, want %v", e, v, restartAt)
		}
		if r := reset.getEngine(t, e, "vllm:num_requests_running"); r != 0 {
			t.Errorf("engine %s: %v running right after restart", e, r)
		}
	}
	if v := reset.getEngine(t, "", "process_start_time_seconds"); v != restartAt {
		t.Errorf("process_start_time_seconds = %v, want %v", v, restartAt)
	}
	if v := reset.getEngine(t, "", "python_gc_collections_total", "generation", "0"); v != 0 {
		t.Errorf("python counter survived the restart: %v", v)
	}
	c.Advance(30 * time.Second)
	after := parse(t, u.Page())
	checkNoDecrease(t, reset, after)
	checkHistograms(t, after)
	if after.get(t, "vllm:prompt_tokens_total") == 0 {
		t.Error("no load after restart")
	}
}

func TestDeterministic(t *testing.T) {
	run := func(seed int64) []string {
		c := newClock()
		u := newUpstream(t, c, seed, 3)
		var pages []string
		for _, d := range []time.Duration{0, time.Second, 7 * time.Second, 90 * time.Second, 250 * time.Millisecond} {
			c.Advance(d)
			pages = append(pages, string(u.Page()))
		}
		return pages
	}
	a, b, other := run(42), run(42), run(43)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("page %d differs between two runs with the same seed", i)
		}
	}
	if a[len(a)-1] == other[len(other)-1] {
		t.Fatal("seeds 42 and 43 give the same page")
	}
}

func TestServeHTTP(t *testing.T) {
	c := newClock()
	u := newUpstream(t, c, 1, 1)
	srv := httptest.NewServer(u)
	defer srv.Close()

	get := func(method, enc string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept-Encoding", enc) // set, so the transport does not decompress
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}

	resp, body := get(http.MethodGet, "identity")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != exposition.ContentTypeText || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("plain GET: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"))
	}
	parse(t, body)

	c.Advance(time.Second)
	resp, body = get(http.MethodGet, "br;q=1.0, gzip;q=0.5")
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip GET: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	checkHistograms(t, parse(t, plain))

	if resp, _ := get(http.MethodGet, "gzip;q=0"); resp.Header.Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 was answered with gzip")
	}
	if resp, body := get(http.MethodHead, "identity"); resp.StatusCode != 200 || len(body) != 0 {
		t.Errorf("HEAD: %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ := get(http.MethodPost, "identity"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for in, want := range map[string]bool{
		"":                  false,
		"gzip":              true,
		"GZIP":              true,
		"deflate, gzip":     true,
		"gzip;q=0":          false,
		"gzip; q=0.0, br":   false,
		"*":                 true,
		"x-gzip":            true,
		"identity;q=1, *;q": true,
		"br":                false,
	} {
		if got := acceptsGzip([]string{in}); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestConcurrentScrapes(t *testing.T) {
	c := newClock()
	u := newUpstream(t, c, 9, 2)
	srv := httptest.NewServer(u)
	defer srv.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				c.Advance(200 * time.Millisecond)
				if g%2 == 0 {
					u.Page()
					continue
				}
				resp, err := http.Get(srv.URL)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if g == 1 && i == 5 {
					u.Restart()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkHistograms(t, parse(t, u.Page()))
}

func BenchmarkPage(b *testing.B) {
	for _, engines := range []int{1, 8} {
		b.Run("engines="+strconv.Itoa(engines), func(b *testing.B) {
			c := newClock()
			u := newUpstream(b, c, 1, engines)
			b.ReportAllocs()
			for b.Loop() {
				c.Advance(time.Second) // a scrape per simulated second
				u.Page()
			}
		})
	}
}

// The admission scenario: a pod with --max-num-queued-reqs at about its
// steady batch, 6 an engine. Before the shift the cap refuses part of the
// bursts (under 30 % of the attempts); after it the inflow is 2.5 times
// higher, waiting + running never pass the cap (nothing waits), and most
// of the surplus is refused, each refusal counted once in
// vllm:admission_rejections_total (per model, no engine) and once as an
// HTTP 5xx of the API server.
func TestAdmissionScenario(t *testing.T) {
	for _, engines := range []int{1, 4} {
		t.Run(strconv.Itoa(engines), func(t *testing.T) {
			c := newClock()
			const shift, step = 90 * time.Second, 2 * time.Second
			u, err := New(Options{Now: c.Now, Seed: 3, Engines: engines, Scenario: ScenarioAdmission, ShiftAfter: shift})
			if err != nil {
				t.Fatal(err)
			}
			rejected := func(p page) float64 {
				t.Helper()
				return p.getEngine(t, "", "vllm:admission_rejections_total", "model_name", "TinyLlama", "reason", "max_num_queued_reqs")
			}
			http5xx := func(p page) float64 {
				t.Helper()
				return p.getEngine(t, "", "http_requests_total", "handler", "/v1/chat/completions", "status", "5xx")
			}
			started := func(p page) float64 {
				t.Helper()
				n := 0.0
				for e := range engines {
					n += p.getEngine(t, strconv.Itoa(e), "vllm:time_to_first_token_seconds_count")
				}
				return n
			}
			tp := expfmt.NewTextParser(model.LegacyValidation)
			if _, err := tp.TextToMetricFamilies(bytes.NewReader(u.Page())); err != nil {
				t.Fatalf("expfmt: %v", err)
			}
			first := parse(t, u.Page())
			maxInFlight, maxWaiting := 0.0, 0.0
			var atShift page
			for s := time.Duration(0); s < shift+2*time.Minute; s += step {
				c.Advance(step)
				p := parse(t, u.Page())
				inFlight, waiting := 0.0, 0.0
				for e := range engines {
					eng := strconv.Itoa(e)
					waiting += p.getEngine(t, eng, "vllm:num_requests_waiting")
					inFlight += p.getEngine(t, eng, "vllm:num_requests_running") + p.getEngine(t, eng, "vllm:num_requests_waiting")
				}
				if s >= shift+time.Minute { // the cap holds once what came in before it has drained
					maxInFlight, maxWaiting = max(maxInFlight, inFlight), max(maxWaiting, waiting)
				}
				if s == shift-2*step { // the clock stands a step before the shift
					atShift = p
					if r, ok := rejected(p), started(p)-started(first); r != 0 || ok == 0 {
						t.Errorf("%v refused against %v started before the shift, want none refused of some started", r, ok)
					}
				}
			}
			last := parse(t, u.Page())
			refused, ok := rejected(last)-rejected(atShift), started(last)-started(atShift)
			if refused <= 0 {
				t.Fatal("no request refused after the inflow rose past the cap")
			}
			if got, want := http5xx(last), rejected(last); got != want {
				t.Errorf("%v HTTP 5xx answers, %v refusals: each refusal is one 503", got, want)
			}
			// The cap holds: waiting + running never pass 6 an engine, and
			// with the cap below the batch limit nothing waits. Before the
			// shift there is no cap (and nothing is refused).
			if limit := 6 * float64(engines); maxInFlight > limit || maxWaiting != 0 {
				t.Errorf("waiting + running reached %v (waiting %v), want at most the cap %v and fewer than %d waiting", maxInFlight, maxWaiting, limit, engines)
			}
			// 2.5 times the inflow of a pod that served it with room to
			// spare: a good part of it is refused.
			if share := refused / (refused + ok); share < 0.4 || share > 0.9 {
				t.Errorf("%v refused against %v started after the shift: share %.2f, want a good part of the surplus", refused, ok, share)
			}
			t.Logf("%d engines: %v refused, %v started after the shift", engines, refused, ok)
		})
	}
}
