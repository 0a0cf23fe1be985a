package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/scripts/manymodels"
)

// TestModelCapAllOrNothing: beyond --history.max-models, the models left
// out have none of their derived gauges and no diagnosis, the admitted
// ones all of theirs, history_limited is 1; an admitted model keeps its
// place while new ones come, and one gone from the page for forgetAfter
// scrapes gives its place up.
func TestModelCapAllOrNothing(t *testing.T) {
	var from, n atomic.Int64
	from.Store(0)
	n.Store(6)
	var step atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(manymodels.Page(int(from.Load()), int(n.Load()), int(step.Add(1))))
	}))
	defer up.Close()
	d, err := diagnosis.New(diagnosis.Options{Window: diagnosis.DefaultWindow, Baseline: diagnosis.DefaultBaseline, MinChange: diagnosis.DefaultMinChange, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	c := newTestCollector(t, up.URL, clock, func(cfg *Config) { cfg.MaxModels, cfg.Diagnosis = 4, d })
	scrape := func(k int) {
		for range k {
			clock.Advance(time.Second)
			c.ScrapeOnce(context.Background())
		}
	}
	// models served: derived gauges by model on the full page, the
	// history_limited and model gauges.
	read := func() (derived map[string]int, limited, kept, leftOut float64) {
		derived = map[string]int{}
		pagetest.EachSeries(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes(), "text/plain", func(l labels.Labels, v float64) {
			name := l.Get("__name__")
			switch {
			case strings.HasPrefix(name, "vllm_derived_"):
				derived[l.Get("model_name")]++
			case name == HistoryLimitedName:
				limited = v
			case name == "vllm_normalizer_history_models":
				kept = v
			case name == "vllm_normalizer_history_models_left_out":
				leftOut = v
			}
		})
		return
	}
	model := func(i int) string { return fmt.Sprintf("org/m-%05d", i) }
	scrape(5)
	derived, limited, kept, leftOut := read()
	for i := range 6 {
		if got := derived[model(i)]; (i < 4) != (got > 0) {
			t.Errorf("%s has %d derived gauges; want all of them for the first 4 models, none beyond", model(i), got)
		}
	}
	if derived[model(0)] != derived[model(3)] {
		t.Errorf("admitted models serve %d and %d derived gauges; want the same set", derived[model(0)], derived[model(3)])
	}
	if limited != 1 || kept != 4 || leftOut != 2 {
		t.Errorf("history_limited %v, models kept %v, left out %v; want 1, 4, 2", limited, kept, leftOut)
	}
	var diagnosed []string
	for _, m := range d.Report().Models {
		diagnosed = append(diagnosed, m.Model)
	}
	if fmt.Sprint(diagnosed) != fmt.Sprint([]string{model(0), model(1), model(2), model(3)}) {
		t.Errorf("the diagnosis holds %v, want the 4 admitted models", diagnosed)
	}
	// The JSON and the page say which models have no diagnosis and why,
	// where a missing model used to look like one gone from the page.
	var api struct {
		LeftOut *struct {
			Count  int      `json:"count"`
			Models []string `json:"models"`
			Reason string   `json:"reason"`
		} `json:"models_left_out"`
	}
	if err := json.Unmarshal(get(t, d.APIHandler(), "/api/v1/diagnosis", nil).Body.Bytes(), &api); err != nil {
		t.Fatal(err)
	}
	if lo := api.LeftOut; lo == nil || lo.Count != 2 || fmt.Sprint(lo.Models) != fmt.Sprint([]string{model(4), model(5)}) ||
		!strings.Contains(lo.Reason, "at most 4 models (--history.max-models)") {
		t.Errorf("models_left_out = %+v; want models 4 and 5, and the bound of 4 models that left them out", lo)
	}
	if body := get(t, d.PageHandler(), "/diagnosis", nil).Body.String(); !strings.Contains(body, `id="models-left-out">2 models on the page have no diagnosis`) ||
		!strings.Contains(body, model(5)) {
		t.Errorf("the page does not say models 4 and 5 have no diagnosis")
	}
	// New models in front do not take the admitted ones' places.
	from.Store(-2) // models -2 and -1 sort first
	n.Store(8)
	scrape(2)
	if derived, _, _, _ = read(); derived[fmt.Sprintf("org/m-%05d", -2)] > 0 || derived[model(0)] == 0 {
		t.Errorf("a new model took an admitted one's place: %v", derived)
	}
	// Models 0 and 1 leave the page; after forgetAfter scrapes their places
	// go to the first models waiting.
	from.Store(2)
	n.Store(4)
	scrape(forgetAfter + 2)
	derived, limited, kept, leftOut = read()
	for i := 2; i < 6; i++ {
		if derived[model(i)] == 0 {
			t.Errorf("%s has no derived gauges once models 0 and 1 gave their places up", model(i))
		}
	}
	if limited != 0 || kept != 4 || leftOut != 0 {
		t.Errorf("history_limited %v, models kept %v, left out %v; want 0, 4, 0", limited, kept, leftOut)
	}
	for _, m := range d.Report().Models {
		if m.Model == model(0) || m.Model == model(1) {
			t.Errorf("the diagnosis still holds %s, which gave its place up", m.Model)
		}
	}
	if lo := d.Report().ModelsLeftOut; lo != nil {
		t.Errorf("models_left_out = %+v with every model on the page admitted; want none", lo)
	}
}

// TestDefaultModelBoundAdmitsEveryAdmittedPage: at the default limits,
// the model bound (--history.max-models) keeps every model the series
// bound (--history.max-series) keeps, on the pages that name the most
// models within the other defaults: 9,000 models of five series, and
// 50,000 of one gauge and no history series (the sample limit). Before
// each model's state took its room in the series bound, the series bound
// alone kept 4,096 and 50,000 of them (a diagnosis each, over the
// container's budget) and the model bound 1,024: the defaults disagreed
// on what a page admits.
func TestDefaultModelBoundAdmitsEveryAdmittedPage(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): scrapes pages of 3 MB")
	}
	for _, p := range []struct {
		name   string
		models int
		page   func(from, n, v int) []byte
	}{{"five series", 9000, manymodels.Page}, {"one gauge", 50000, manymodels.Gauge}} {
		t.Run(p.name, func(t *testing.T) {
			// The pages are made before the scrapes, whose timeout they
			// would otherwise share: under -race on a busy machine making
			// one of 50,000 models took most of a second.
			var pages [4][]byte
			for i := range pages {
				pages[i] = p.page(0, p.models, i+1)
			}
			var step atomic.Int64
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write(pages[(step.Add(1)-1)%int64(len(pages))])
			}))
			defer up.Close()
			kept := func(maxModels int) (kept, leftOut float64) {
				clock := newFakeClock()
				c := newTestCollector(t, up.URL, clock, func(cfg *Config) {
					cfg.MaxBodyBytes, cfg.MaxSeries, cfg.MaxModels = DefaultMaxBodyBytes, DefaultMaxSeries, maxModels
					// A 3 MB page parsed under -race on a busy machine
					// outlasted the 1 s timeout: the scrape failed and
					// kept no model.
					cfg.Interval, cfg.Timeout = 20*time.Second, 20*time.Second
				})
				for range 2 {
					clock.Advance(time.Second)
					c.ScrapeOnce(context.Background())
				}
				pagetest.EachSeries(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes(), "text/plain", func(l labels.Labels, v float64) {
					switch l.Get("__name__") {
					case "vllm_normalizer_history_models":
						kept = v
					case "vllm_normalizer_history_models_left_out":
						leftOut = v
					case "vllm_up":
						if v != 1 {
							t.Errorf("the scrape of %d models failed", p.models)
						}
					}
				})
				return kept, leftOut
			}
			bySeries, _ := kept(0)
			atDefaults, leftOut := kept(DefaultMaxModels)
			t.Logf("%d models: the series bound alone keeps %v, the defaults %v", p.models, bySeries, atDefaults)
			if atDefaults != bySeries || atDefaults+leftOut != float64(p.models) {
				t.Errorf("the defaults keep %v models (%v left out), the series bound alone %v: want the same, %d in all", atDefaults, leftOut, bySeries, p.models)
			}
			if atDefaults > DefaultMaxModels || atDefaults == 0 {
				t.Errorf("the defaults keep %v models, want 1 to %d", atDefaults, DefaultMaxModels)
			}
		})
	}
}

// BenchmarkModelMemory measures what the sidecar keeps per model between
// scrapes (history, idle times, diagnosis input and diagnosis) on the
// constructed pages of many models (five series a model, steady or all
// moving unevenly; one gauge), once 32 minutes of scrapes every 2 s have
// filled the diagnosis' rings, with
// the view the page and the API serve drawn: the heap retained after a
// forced GC, less what the same collector retains with no model, per
// model (retained-B/model, at 300 models), and what each model beyond 100
// adds (marginal-B/model: the same at 300 models less at 100, over 200),
// which leaves out what does not grow with the models (the charts of
// MaxChartedModels of them, buffers). The room a model takes in the series
// bound (modelSeries) is the marginal cost in history series. Run it once:
// go test -run '^$' -bench ModelMemory -benchtime 1x ./collector
func BenchmarkModelMemory(b *testing.B) {
	scrapes := 32 * 30
	if testing.Short() {
		scrapes = 30
	}
	for _, p := range []struct {
		name string
		page func(from, n, v int) []byte
	}{{"five series", manymodels.Page}, {"five series busy", manymodels.Busy}, {"one gauge", manymodels.Gauge}} {
		b.Run(p.name, func(b *testing.B) {
			for range b.N {
				few, many := modelMemory(b, p.page, 100, scrapes), modelMemory(b, p.page, 300, scrapes)
				b.ReportMetric(many/300, "retained-B/model")
				b.ReportMetric((many-few)/200, "marginal-B/model")
			}
		})
	}
}

// historySeriesBytes is what a history series costs at the defaults
// (docs/operating.md, "Memory": 16 MB live for 5000 series over a full
// window), the unit of the room a model takes in the series bound.
const historySeriesBytes = 3300

// TestModelStateFitsItsRoom: once the diagnosis' rings are full, what each
// model adds to the heap (the benchmark's marginal cost, between 100 and
// 200 models) is within what the series bound charges it: its history
// series and modelSeries, 3.3 KB each, on the constructed pages of many
// models, and on the page of five series a model with every series moving
// unevenly, which costs the most (its points are what their predictions
// miss). A model costing more than its room would let the defaults admit
// more memory than the container's budget was measured with.
func TestModelStateFitsItsRoom(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("32 minutes of scrapes of 100 and of 200 models, three pages (about a minute)")
	}
	for _, p := range []struct {
		name   string
		page   func(from, n, v int) []byte
		series int // history series a model
	}{{"five series", manymodels.Page, 4}, {"five series busy", manymodels.Busy, 4}, {"one gauge", manymodels.Gauge, 0}} {
		t.Run(p.name, func(t *testing.T) {
			few, many := modelMemory(t, p.page, 100, 32*30), modelMemory(t, p.page, 200, 32*30)
			perModel, room := (many-few)/100, float64((p.series+modelSeries)*historySeriesBytes)
			t.Logf("a model adds %.0f bytes, its room is %.0f", perModel, room)
			if perModel > room {
				t.Errorf("a model adds %.0f bytes to the heap, more than the %.0f its %d history series and modelSeries (%d) of %d bytes charge it: raise modelSeries", perModel, room, p.series, modelSeries, historySeriesBytes)
			}
		})
	}
}

// modelMemory returns the heap a collector and its diagnosis retain after
// scrapes of page with models models every 2 s, with the view drawn.
func modelMemory(b testing.TB, page func(from, n, v int) []byte, models, scrapes int) float64 {
	var step atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(page(0, models, int(step.Add(1))))
	}))
	d, err := diagnosis.New(diagnosis.Options{Window: diagnosis.DefaultWindow, Baseline: diagnosis.DefaultBaseline, MinChange: diagnosis.DefaultMinChange, Interval: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	clock := newFakeClock()
	c := newTestCollector(b, up.URL, clock, func(cfg *Config) { cfg.Diagnosis, cfg.Interval = d, 2*time.Second })
	for range scrapes {
		clock.Advance(2 * time.Second)
		c.ScrapeOnce(context.Background())
	}
	up.Close()
	if got := len(d.View(nil).Models); got != models { // the view a reader of the page or the API draws
		b.Fatalf("the diagnosis holds %d models, want %d", got, models)
	}
	var held, released runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&held)
	runtime.KeepAlive(c)
	runtime.KeepAlive(d)
	runtime.GC()
	runtime.ReadMemStats(&released)
	return float64(held.HeapAlloc) - float64(released.HeapAlloc)
}

// TestDensePageKeepsWholeModels: a page of more models' series than
// --history.max-series keeps whole models, the first in name order, with
// all their derived gauges, and leaves the others out whole; before, the
// history dropped the last families of every model and no model kept its
// derived gauges (a dense 280-model page lost all of them at the default
// cap).
func TestDensePageKeepsWholeModels(t *testing.T) {
	const models = 10
	var step atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(manymodels.Page(0, models, int(step.Add(1))))
	}))
	defer up.Close()
	run := func(maxSeries int) (derived map[string]int, series, limited float64) {
		clock := newFakeClock()
		c := newTestCollector(t, up.URL, clock, func(cfg *Config) { cfg.MaxSeries = maxSeries })
		for range 5 {
			clock.Advance(time.Second)
			c.ScrapeOnce(context.Background())
		}
		derived = map[string]int{}
		pagetest.EachSeries(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes(), "text/plain", func(l labels.Labels, v float64) {
			switch name := l.Get("__name__"); {
			case strings.HasPrefix(name, "vllm_derived_"):
				derived[l.Get("model_name")]++
			case name == "vllm_normalizer_history_series":
				series = v
			case name == HistoryLimitedName:
				limited = v
			}
		})
		return
	}
	all, series, _ := run(0)
	perModel := int(series) / models
	if perModel == 0 || int(series)%models != 0 {
		t.Fatalf("%v history series for %d models", series, models)
	}
	// Room for three models (their series and their state) and a bit.
	derived, _, limited := run(3*(perModel+modelSeries) + 1)
	for i := range models {
		m := fmt.Sprintf("org/m-%05d", i)
		want := 0
		if i < 3 {
			want = all[m]
		}
		if derived[m] != want {
			t.Errorf("%s serves %d derived gauges, want %d (all for the first 3 models, none beyond)", m, derived[m], want)
		}
	}
	if limited != 1 {
		t.Errorf("history_limited %v, want 1", limited)
	}
}

// BenchmarkModelAdmission measures the model bound's share of a scrape:
// admitting the models of the 16-engine demo page's canonical page (compare
// BenchmarkScrapeCycle/v1-16engines).
func BenchmarkModelAdmission(b *testing.B) {
	clock := newFakeClock()
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 1, Engines: 16})
	if err != nil {
		b.Fatal(err)
	}
	mapper := testMapper(b, mapping.Options{})
	fams, _, err := exposition.Parse(up.Page(), exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	norm, _ := mapper.Normalize(exposition.DropCreated(fams))
	canon := mapper.Profiles().All()[0].Canonical(norm, mapper.Catalogue().Roles())
	samples := 0
	for _, f := range canon {
		samples += len(f.Samples)
	}
	// page=same: the series of the last page, as nearly every scrape;
	// page=new: each page counted anew.
	for _, same := range []bool{true, false} {
		b.Run(fmt.Sprintf("page=%s", map[bool]string{true: "same", false: "new"}[same]), func(b *testing.B) {
			m := modelCap{max: DefaultMaxModels, maxSeries: DefaultMaxSeries, inputs: derive.New(mapper.Catalogue().Roles()).Inputs()}
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				if !same {
					m.series = m.series[:0]
				}
				m.admit(canon)
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(samples), "samples")
		})
	}
}

// TestModelCapSamePageMatchesCounting: over random pages of a few models
// (pages repeated with the same label sets, repeated with equal ones built
// anew, models coming, going and coming back past forgetAfter, a cap of
// four models and of series), a modelCap that takes a page of the last
// one's series as holding the same models answers, scrape after scrape,
// what one that counts every page answers.
func TestModelCapSamePageMatchesCounting(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	models := []string{"a", "b", "c", "d", "e"}
	page := func() []exposition.Family {
		var fams []exposition.Family
		on := map[string]bool{}
		for _, mo := range models {
			on[mo] = rng.IntN(2) == 0
		}
		for _, name := range []string{"vllm:num_requests_running", "vllm:prompt_tokens_total", "vllm:cache_config_info"} {
			f := exposition.Family{Name: name, Type: model.MetricTypeGauge}
			for _, mo := range models {
				if !on[mo] {
					continue
				}
				for e := range 1 + rng.IntN(2) {
					f.Samples = append(f.Samples, exposition.Sample{Labels: labels.FromStrings("__name__", name, "engine", strconv.Itoa(e), "model_name", mo)})
				}
			}
			if name == "vllm:cache_config_info" {
				f.Samples = append(f.Samples, exposition.Sample{Labels: labels.FromStrings("__name__", name, "block_size", "16")})
			}
			fams = append(fams, f)
		}
		return fams
	}
	inputs := derive.New(testMapper(t, mapping.Options{}).Catalogue().Roles()).Inputs()
	kept := modelCap{max: 4, maxSeries: 120, inputs: inputs}
	counting := modelCap{max: 4, maxSeries: 120, inputs: inputs}
	last, fast := page(), 0
	for step := range 600 {
		cur := last
		switch r := rng.IntN(10); {
		case r < 6: // the same page, as the parse hands it on
		case r < 8: // equal label sets, built anew
			cur = nil
			for _, f := range last {
				g := f
				g.Samples = nil
				for _, s := range f.Samples {
					g.Samples = append(g.Samples, exposition.Sample{Labels: labels.FromMap(s.Labels.Map())})
				}
				cur = append(cur, g)
			}
		case step > 200 && step < 300: // every model off the page for longer than forgetAfter
			cur = []exposition.Family{{Name: "vllm:num_requests_running", Type: model.MetricTypeGauge}}
		default:
			cur = page()
		}
		last = cur
		if kept.samePage(cur) {
			fast++
		}
		counting.series = counting.series[:0]
		k1, l1, g1 := kept.admit(cur)
		k2, l2, g2 := counting.admit(cur)
		slices.Sort(g1)
		slices.Sort(g2)
		if !reflect.DeepEqual(k1, k2) || !maps.Equal(l1, l2) || !slices.Equal(g1, g2) || !maps.Equal(kept.admitted, counting.admitted) {
			t.Fatalf("step %d: kept %d families, left out %v, gone %v, admitted %v; counting every page: %d, %v, %v, %v",
				step, len(k1), l1, g1, kept.admitted, len(k2), l2, g2, counting.admitted)
		}
	}
	if fast < 100 {
		t.Fatalf("%d of 600 pages were taken as the last one's: the test would not test it", fast)
	}
}

// TestBoundsForTheirLimits: the bounds' defaults are what MaxSeriesFor and
// MaxModelsFor give at the default limits (cmd derives the bounds left
// unset from the limits given with them), and no series bound is no model
// bound.
func TestBoundsForTheirLimits(t *testing.T) {
	if got := MaxSeriesFor(DefaultMaxBodyBytes); got != DefaultMaxSeries {
		t.Errorf("MaxSeriesFor(%d) = %d, DefaultMaxSeries %d", DefaultMaxBodyBytes, got, DefaultMaxSeries)
	}
	if got := MaxModelsFor(DefaultMaxSeries); got != DefaultMaxModels {
		t.Errorf("MaxModelsFor(%d) = %d, DefaultMaxModels %d", DefaultMaxSeries, got, DefaultMaxModels)
	}
	if got := MaxModelsFor(0); got != 0 {
		t.Errorf("MaxModelsFor(0) = %d, want 0 (no bound)", got)
	}
}
