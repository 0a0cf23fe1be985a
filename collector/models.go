package collector

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/window"
)

// modelSeries is the room a model's own state (its diagnosis, idle times,
// totals, its derived gauges' labels) takes in the series bound beside its
// series, so that the series bound holds the models' state too: without it
// 9,000 models of five series kept 4,096 diagnoses. It is what a model adds
// beyond its history series, in history series of 3.3 KB, once the
// diagnosis' rings are full, rounded up with room to spare
// (BenchmarkModelMemory, TestModelStateFitsItsRoom; 2-core AMD EPYC, load
// 1 to 6): 38.0 to 39.7 KB a model of five series, four of them history
// series, 41.4 to 43.3 KB when every one of them moves every scrape (13.1
// series, so 9.1 beside its own: 10 leaves 6 % to spare); 16.4 to 16.8 KB
// one of one gauge, 5.1. It was 9 while the busy model cost 40.6 KB (the
// diagnosis' refusal checks, incident lulls and probations have added 3 KB
// since), 16 while a model of five series cost 47 to 51.
const modelSeries = 10

// ModelSeries is modelSeries, for the flag's help and docs.
const ModelSeries = modelSeries

// DefaultMaxModels is the default bound on the model_name values whose
// state the sidecar keeps across scrapes (--history.max-models): windows,
// idle times, the diagnosis. It is the most models the default series
// bound admits (a model of no history series still takes modelSeries), so
// it admits every page the other defaults admit; the container budget is
// measured at the worst of them (e2e's TestManyModelsFitTheContainer).
const DefaultMaxModels = DefaultMaxSeries / modelSeries

// MaxModelsFor is MaxModels' default for a series bound, DefaultMaxModels
// at DefaultMaxSeries: the most models it admits, each taking modelSeries,
// and no bound (0) for none (cmd's --history.max-models left unset follows
// --history.max-series with it). Validate rejects a bound of modelSeries or
// less, which would admit no model.
func MaxModelsFor(maxSeries int) int {
	return maxSeries / modelSeries
}

// modelCap decides which models the sidecar keeps state for: at most max
// model_name values (series without one, the server's, are always kept),
// those it admitted before first, then the page's in name order while
// there is room, in models and in the history's series (maxSeries, each
// model taking modelSeries beside its own series): a
// page with more series than the history keeps then loses whole models,
// the last in name order, instead of the last families of every model,
// which left no model with its derived gauges. A model off the page for forgetAfter
// scrapes gives its place up. A model without a place has none of its
// derived gauges and no diagnosis (all or nothing per model), and
// vllm_normalizer_history_limited says so.
type modelCap struct {
	max       int // 0: no bound
	maxSeries int // the history's bound; 0: none
	inputs    *window.Inputs
	scrape    uint64
	// admitted: model -> the scrape it was last on the page.
	admitted map[string]uint64
	// The last page's series (their label sets, in order) and the models
	// of their runs: a page of the same series holds the same models, and
	// when all of them are admitted, admit has nothing to count. One
	// string comparison a series (the parse shares their storage from one
	// page to the next) instead of reading the model and the sample's
	// name of each: BenchmarkModelAdmission on 16 engines, 127 µs a page
	// counted, 12.5 µs a page of the last one's series.
	series []labels.Labels
	models []string
}

// admit reads the models of canon and returns canon with only the
// samples of admitted models (canon itself when none is left out), the
// models left out, and the models that gave their place up (for whatever
// keeps state per model to forget them).
func (m *modelCap) admit(canon []exposition.Family) (kept []exposition.Family, limited map[string]bool, gone []string) {
	m.scrape++
	if m.admitted == nil {
		m.admitted = map[string]uint64{}
	}
	if m.samePage(canon) {
		for _, model := range m.models {
			if model != "" {
				m.admitted[model] = m.scrape
			}
		}
		return canon, nil, m.forget(nil)
	}
	m.series, m.models = m.series[:0], m.models[:0]
	// Samples of one model mostly come in runs (a histogram child, a
	// family of one model): each run is looked up once.
	var fresh map[string]int // models on the page not admitted before -> their history series
	total := 0               // of the series kept: the admitted models' and the server's own
	cur, curSeries, inRun := "", 0, false
	flush := func() {
		if !inRun {
			return
		}
		m.models = append(m.models, cur)
		if _, admitted := m.admitted[cur]; admitted || cur == "" {
			// The server's own series (cache configuration) are always kept.
			if cur != "" {
				m.admitted[cur] = m.scrape
			}
			total += curSeries
			return
		}
		if fresh == nil {
			fresh = map[string]int{}
		}
		fresh[cur] += curSeries
	}
	for fi := range canon {
		input := m.inputs != nil && m.inputs.Family(canon[fi].Name)
		lastName, windowed := "", false // a family's samples have a few names, in runs too
		for si := range canon[fi].Samples {
			s := &canon[fi].Samples[si]
			m.series = append(m.series, s.Labels)
			if model := s.Labels.Get(mapping.LabelModel); !inRun || model != cur {
				flush()
				cur, curSeries, inRun = model, 0, true
			}
			if !input {
				continue
			}
			if name := s.Name(); name != lastName {
				lastName = name
				_, windowed = m.inputs.Sample(name)
			}
			if windowed {
				curSeries++
			}
		}
	}
	flush()
	gone = m.forget(gone)
	total += modelSeries * len(m.admitted) // their state, on the page or not
	for _, model := range slices.Sorted(maps.Keys(fresh)) {
		if m.max > 0 && len(m.admitted) >= m.max || m.maxSeries > 0 && total+fresh[model]+modelSeries > m.maxSeries {
			if limited == nil {
				limited = map[string]bool{}
			}
			limited[model] = true
			continue
		}
		m.admitted[model] = m.scrape
		total += fresh[model] + modelSeries
	}
	if len(fresh) > 0 {
		m.series = m.series[:0] // the next page counts its models again
	}
	if len(limited) == 0 {
		return canon, nil, gone
	}
	kept = make([]exposition.Family, 0, len(canon))
	for _, f := range canon {
		g := f
		g.Samples = make([]exposition.Sample, 0, len(f.Samples))
		for _, s := range f.Samples {
			if !limited[s.Labels.Get(mapping.LabelModel)] {
				g.Samples = append(g.Samples, s)
			}
		}
		if len(g.Samples) > 0 {
			kept = append(kept, g)
		}
	}
	return kept, limited, gone
}

// samePage says whether canon holds the series of the last page admit
// counted, in the same order, every model of theirs still admitted: then
// nothing is fresh and nothing is left out.
func (m *modelCap) samePage(canon []exposition.Family) bool {
	if len(m.series) == 0 {
		return false
	}
	k := 0
	for fi := range canon {
		for si := range canon[fi].Samples {
			if k == len(m.series) || !labels.Equal(canon[fi].Samples[si].Labels, m.series[k]) {
				return false
			}
			k++
		}
	}
	if k != len(m.series) {
		return false
	}
	for _, model := range m.models {
		if _, ok := m.admitted[model]; !ok && model != "" {
			return false
		}
	}
	return true
}

// forget drops the models off the page for more than forgetAfter scrapes,
// appending them to gone.
func (m *modelCap) forget(gone []string) []string {
	for model, last := range m.admitted {
		if m.scrape-last > forgetAfter {
			delete(m.admitted, model)
			gone = append(gone, model)
		}
	}
	return gone
}

// Len is the number of models admitted.
func (m *modelCap) Len() int { return len(m.admitted) }

// leftOutReason is why the diagnosis has no verdict for a model modelCap
// left out: the bounds that can bite (0 is none) and the flags that set them.
func (c *Collector) leftOutReason() string {
	var bounds []string
	if c.cfg.MaxModels > 0 {
		bounds = append(bounds, fmt.Sprintf("at most %d models (--history.max-models)", c.cfg.MaxModels))
	}
	if c.cfg.MaxSeries > 0 {
		bounds = append(bounds, fmt.Sprintf("%d history series, %d a model beside its own (--history.max-series)", c.cfg.MaxSeries, modelSeries))
	}
	return "the sidecar keeps state for " + strings.Join(bounds, " and ") + "; raise the bound or give the other models a sidecar of their own"
}
