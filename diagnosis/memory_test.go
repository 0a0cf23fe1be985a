package diagnosis

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// busyModel is a vLLM model with every input the diagnosis reads and
// vLLM's buckets (the simulator's), its requests random every scrape: the
// most a model's points can hold.
type busyModel struct {
	rng *rand.Rand
	o   Observation
}

func newBusyModel(name string, seed uint64) *busyModel {
	m := &busyModel{rng: rand.New(rand.NewPCG(seed, 1))}
	m.o = Observation{Model: name, Server: "vllm", Aborted: 0, KVTransferFailures: math.NaN(), Rejections: math.NaN()}
	for _, h := range []struct {
		h      *Histogram
		bounds []float64
	}{{&m.o.TTFT, simTTFTBounds}, {&m.o.ITL, simITLBounds}, {&m.o.PromptLen, simLenBounds}, {&m.o.GenLen, simLenBounds}} {
		*h.h = Histogram{Bounds: h.bounds, Counts: make([]float64, len(h.bounds))}
	}
	return m
}

// defaultDiagnoser is a Diagnoser at the default windows, scraped every 2 s.
func defaultDiagnoser(tb testing.TB) *Diagnoser {
	tb.Helper()
	d, err := New(Options{Window: DefaultWindow, Baseline: DefaultBaseline, MinChange: DefaultMinChange, Interval: 2 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// observeBusy has d observe n busy models, org/m-00000 on, for scrapes
// scrapes 2 s apart from t0.
func observeBusy(d *Diagnoser, n, scrapes int) {
	ms := make([]*busyModel, n)
	for i := range ms {
		ms[i] = newBusyModel(fmt.Sprintf("org/m-%05d", i), uint64(i))
	}
	for s := range scrapes {
		obs := make([]Observation, n)
		for i := range ms {
			obs[i] = ms[i].next()
		}
		d.Observe(t0.Add(time.Duration(s)*2*time.Second), obs)
	}
}

// next is the model's observation after another scrape interval.
func (m *busyModel) next() Observation {
	o, r := &m.o, m.rng
	requests := float64(r.IntN(20))
	prompt, output := float64(100+r.IntN(2000)), float64(10+r.IntN(500))
	o.Running, o.Waiting, o.KVUsage = float64(r.IntN(64)), float64(r.IntN(8)), r.Float64()
	o.Finished += requests
	o.Aborted += float64(r.IntN(2))
	o.Preemptions += float64(r.IntN(2))
	o.PromptLenSum += requests * prompt
	o.PromptLenCount += requests
	o.GenLenSum += requests * output
	o.GenLenCount += requests
	o.PromptTokens += requests * prompt
	o.GenerationTokens += requests * output
	o.PrefixQueries += requests * prompt
	o.PrefixHits += math.Floor(requests * prompt * r.Float64())
	for range int(requests) {
		observeInto(&o.TTFT, r.ExpFloat64()*0.2, 1)
		observeInto(&o.ITL, r.ExpFloat64()*0.03, output)
		observeInto(&o.PromptLen, prompt, 1)
		observeInto(&o.GenLen, output, 1)
	}
	out := *o
	for _, h := range []*Histogram{&out.TTFT, &out.ITL, &out.PromptLen, &out.GenLen} {
		h.Counts = append([]float64(nil), h.Counts...)
	}
	return out
}

// BenchmarkModelHistoryMemory measures what the diagnosis keeps per model
// once 32 minutes of scrapes every 2 s at the default windows have filled
// its rings: the heap retained, after a forced GC, less the same without
// the Diagnoser, per model. busy models have every input and histogram of
// vLLM and random traffic every scrape; idle ones print the same values
// every scrape; charts: with the view the page and the API serve drawn (a
// reader of either): the charts of MaxChartedModels of the models. Run it once:
// go test -run '^$' -bench ModelHistoryMemory -benchtime 1x ./diagnosis
func BenchmarkModelHistoryMemory(b *testing.B) {
	const models = 100
	for _, busy := range []bool{true, false} {
		for _, charts := range []bool{false, true} {
			b.Run(fmt.Sprintf("busy=%v/charts=%v", busy, charts), func(b *testing.B) {
				for range b.N {
					d, _ := fullRings(b, models, busy)
					if charts {
						d.View(nil)
					}
					var held, released runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&held)
					runtime.KeepAlive(d)
					d = nil
					runtime.GC()
					runtime.ReadMemStats(&released)
					b.ReportMetric((float64(held.HeapAlloc)-float64(released.HeapAlloc))/models, "retained-B/model")
				}
			})
		}
	}
}

// BenchmarkObserveFullRings measures one Observe of 100 busy models once
// 32 minutes of scrapes every 2 s have filled their rings: what reading
// the encoded points costs the diagnosis every scrape.
func BenchmarkObserveFullRings(b *testing.B) {
	d, observe := fullRings(b, 100, true)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		at, obs := observe()
		b.StartTimer()
		d.Observe(at, obs)
	}
}

// fullRings returns a Diagnoser at the default windows that has observed
// n models every 2 s for 32 minutes (busy: new traffic every scrape, else
// the same values), and observe, which returns the next scrape's time and
// observations.
func fullRings(b *testing.B, n int, busy bool) (*Diagnoser, func() (time.Time, []Observation)) {
	d := defaultDiagnoser(b)
	ms := make([]*busyModel, n)
	obs := make([]Observation, n)
	for i := range ms {
		ms[i] = newBusyModel(fmt.Sprintf("org/m-%05d", i), uint64(i))
		obs[i] = ms[i].next()
	}
	s := 0
	observe := func() (time.Time, []Observation) {
		if busy {
			for i := range ms {
				obs[i] = ms[i].next()
			}
		}
		s++
		return t0.Add(time.Duration(s) * 2 * time.Second), obs
	}
	for range 32 * 30 {
		d.Observe(observe())
	}
	return d, observe
}

// TestManyModelsChartsBounded: with more models than MaxChartedModels, the
// API and the page list every model's verdicts but draw the charts of
// MaxChartedModels of them, say how many were left out, and ?model=
// answers any one with its charts; the report kept between scrapes holds
// no chart. Before, every model's charts were drawn, served and kept: 170
// KB of indented JSON a model once full, 170 MB a request for a thousand.
func TestManyModelsChartsBounded(t *testing.T) {
	const models = MaxChartedModels + 5
	d := defaultDiagnoser(t)
	observeBusy(d, models, 60)
	api := func(query string) (rep Report, size int) {
		rec := httptest.NewRecorder()
		d.APIHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/diagnosis"+query, nil))
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return rep, rec.Body.Len()
	}
	charted := func(mr *ModelReport) bool {
		for _, st := range mr.Steps {
			for _, s := range st.Signals {
				if len(s.Chart) > 0 {
					return true
				}
			}
		}
		return false
	}
	rep, size := api("")
	drawn := 0
	for i := range rep.Models {
		if charted(&rep.Models[i]) {
			drawn++
		}
	}
	if len(rep.Models) != models || drawn != MaxChartedModels || rep.ChartsLeftOut != models-MaxChartedModels {
		t.Errorf("the API lists %d models, %d with charts, %d left out; want %d, %d, %d", len(rep.Models), drawn, rep.ChartsLeftOut, models, MaxChartedModels, models-MaxChartedModels)
	}
	t.Logf("%d models: %d bytes", models, size)
	last := fmt.Sprintf("org/m-%05d", models-1)
	one, _ := api("?model=" + url.QueryEscape(last))
	if len(one.Models) != 1 || one.Models[0].Model != last || !charted(&one.Models[0]) || one.ChartsLeftOut != 0 {
		t.Errorf("?model=%s answers %d models (charted: %v), %d left out; want that one with its charts", last, len(one.Models), len(one.Models) > 0 && charted(&one.Models[0]), one.ChartsLeftOut)
	}
	for i := range d.report.Models {
		if charted(&d.report.Models[i]) {
			t.Fatalf("the report kept between scrapes holds %s's charts", d.report.Models[i].Model)
		}
	}
	rec := httptest.NewRecorder()
	d.PageHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/diagnosis", nil))
	page := rec.Body.String()
	if got := strings.Count(page, `<section class="model"`); got != models {
		t.Errorf("the page has %d models, want %d", got, models)
	}
	if got := strings.Count(page, `href="?model=`); got != models-MaxChartedModels {
		t.Errorf("the page links %d models to their charts, want %d", got, models-MaxChartedModels)
	}
	steps := 0
	for i := range rep.Models {
		if charted(&rep.Models[i]) {
			steps += len(rep.Models[i].Steps)
		}
	}
	if got := strings.Count(page, `<div class="step"`); got != steps {
		t.Errorf("the page draws %d steps, want %d: those of the %d charted models only", got, steps, MaxChartedModels)
	}
	if !strings.Contains(page, `id="charts-left-out"`) {
		t.Error("the page does not say that charts were left out")
	}
	// html/template writes the escapes in lower case
	if want := fmt.Sprintf(`href="?model=%s"`, strings.ToLower(url.QueryEscape(last))); !strings.Contains(page, want) {
		t.Errorf("the page has no %s", want)
	}
}

// TestAPIWritesModelsOneAtATime: the API's answer, written a model at a
// time, is byte for byte the report encoded whole (indented), with no
// model, one, and several with their charts and without.
func TestAPIWritesModelsOneAtATime(t *testing.T) {
	d := defaultDiagnoser(t)
	check := func(what string) {
		t.Helper()
		rec := httptest.NewRecorder()
		d.APIHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/diagnosis", nil))
		want, err := json.MarshalIndent(d.View(nil), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); got != string(want)+"\n" {
			t.Errorf("%s: the answer is not the report encoded whole:\n%.600s\nwant\n%.600s", what, got, want)
		}
	}
	check("no scrape yet")
	for _, n := range []int{1, MaxChartedModels + 2} {
		observeBusy(d, n, 40)
		check(fmt.Sprintf("%d models", n))
	}
}

// BenchmarkAPIManyModels measures one answer of the API for 1,000 models
// (charts for MaxChartedModels of them) written a model at a time, beside
// the report encoded whole as it was before: the bytes allocated a request.
func BenchmarkAPIManyModels(b *testing.B) {
	const n = 1000
	d := defaultDiagnoser(b)
	observeBusy(d, n, 40)
	d.View(nil)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/diagnosis", nil)
	b.Run("streamed", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			d.APIHandler().ServeHTTP(discard{}, req)
		}
	})
	b.Run("encoded whole", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			body, _ := json.MarshalIndent(d.View(nil), "", "  ")
			_, _ = discard{}.Write(append(body, '\n'))
		}
	})
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}
