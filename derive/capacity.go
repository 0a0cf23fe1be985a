package derive

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// groupKey is the (model_name, engine) of a gauge of the current scrape.
type groupKey struct{ model, engine string }

// inFlight sums running and waiting per (model_name, engine), or per
// model_name without byEngine. A group that lacks one of the two gauges
// (or a model with such an engine) is left out: half the sum would read as
// less load than there is.
func inFlight(running, waiting *exposition.Family, byEngine bool) map[groupKey]float64 {
	if running == nil || waiting == nil {
		return nil
	}
	type part struct {
		sum           float64
		run, wai, nan bool
	}
	perEngine := map[groupKey]*part{}
	for _, f := range []*exposition.Family{running, waiting} {
		for _, s := range f.Samples {
			k := groupKey{s.Labels.Get(mapping.LabelModel), s.Labels.Get(mapping.LabelEngine)}
			p := perEngine[k]
			if p == nil {
				p = &part{}
				perEngine[k] = p
			}
			if math.IsNaN(s.Value) {
				// A sum without it would read as less load: withdrawn.
				p.nan = true
				continue
			}
			p.sum += s.Value
			if f == running {
				p.run = true
			} else {
				p.wai = true
			}
		}
	}
	return collapse(perEngine, byEngine, func(_ groupKey, p *part) (float64, bool) { return p.sum, p.run && p.wai && !p.nan })
}

// kvFreeTokens computes the KV-cache tokens free per (model_name, engine),
// or summed per model_name without byEngine: the engine's own free figure
// (kv_cache_free) where its server prints one, else (1 - usage) × its
// kv_cache_capacity, usage being the highest value over API-server
// processes (idle ones report 0; NaN ones are left out, as PromQL's max
// leaves them out). A capacity without model_name (vLLM's cache config
// has none) is the engine's for every model. Whole tokens, rounded down.
func kvFreeTokens(usage, capacity, free *exposition.Family, byEngine bool) map[groupKey]float64 {
	caps, frees := perEngineValues(capacity), perEngineValues(free)
	type part struct {
		usage float64
		has   bool // a usage that is not NaN
		ok    bool // no usage outside 0..1
	}
	perEngine := map[groupKey]*part{}
	get := func(k groupKey) *part {
		p := perEngine[k]
		if p == nil {
			p = &part{ok: true}
			perEngine[k] = p
		}
		return p
	}
	if usage != nil {
		for _, s := range usage.Samples {
			p := get(groupKey{s.Labels.Get(mapping.LabelModel), s.Labels.Get(mapping.LabelEngine)})
			switch {
			case math.IsNaN(s.Value):
			case s.Value < 0 || s.Value > 1:
				p.ok = false
			case !p.has || s.Value > p.usage:
				p.usage, p.has = s.Value, true
			}
		}
	}
	for k := range frees {
		if k.model != "" {
			get(k)
		}
	}
	return collapse(perEngine, byEngine, func(k groupKey, p *part) (float64, bool) {
		if v, ok := lookupEngine(frees, k); ok {
			return wholeTokens(v), true
		}
		c, ok := lookupEngine(caps, k)
		return wholeTokens((1 - p.usage) * c), ok && p.ok && p.has
	})
}

// perEngineValues reads a gauge of one value per (model_name, engine).
func perEngineValues(f *exposition.Family) map[groupKey]float64 {
	if f == nil {
		return nil
	}
	out := make(map[groupKey]float64, len(f.Samples))
	for _, s := range f.Samples {
		out[groupKey{s.Labels.Get(mapping.LabelModel), s.Labels.Get(mapping.LabelEngine)}] = s.Value
	}
	return out
}

// lookupEngine finds k's value, or that of its engine without a model.
func lookupEngine(vals map[groupKey]float64, k groupKey) (float64, bool) {
	if v, ok := vals[k]; ok {
		return v, true
	}
	v, ok := vals[groupKey{engine: k.engine}]
	return v, ok
}

// wholeTokens rounds a token count down, but not a product that float
// arithmetic left a hair below a whole number.
func wholeTokens(v float64) float64 {
	if r := math.Round(v); math.Abs(v-r) <= 1e-9*math.Max(1, math.Abs(v)) {
		return r
	}
	return math.Floor(v)
}

// collapse turns per-(model, engine) parts into values, per engine or
// summed per model; a part that is not ok leaves out its group (and its
// model when collapsing).
func collapse[T any](perEngine map[groupKey]T, byEngine bool, value func(groupKey, T) (float64, bool)) map[groupKey]float64 {
	keys := make([]groupKey, 0, len(perEngine))
	for k := range perEngine {
		keys = append(keys, k)
	}
	// A fixed order, so sums do not change in their last bits.
	slices.SortFunc(keys, func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.model, b.model), mapping.CompareEngines(a.engine, b.engine))
	})
	out := map[groupKey]float64{}
	bad := map[string]bool{}
	for _, k := range keys {
		v, ok := value(k, perEngine[k])
		if byEngine {
			if ok {
				out[k] = v
			}
			continue
		}
		m := groupKey{model: k.model}
		if !ok {
			bad[k.model] = true
			continue
		}
		out[m] += v
	}
	for m := range bad {
		delete(out, groupKey{model: m})
	}
	return out
}

// nowSamples writes values keyed by (model_name, engine) as samples of
// family name, sorted, labels absent where empty. Their label sets come
// from the label cache (held by the caller), as the windowed gauges' do.
func nowSamples(cache *labelCache, name string, vals map[groupKey]float64) []exposition.Sample {
	keys := make([]groupKey, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.model, b.model), mapping.CompareEngines(a.engine, b.engine))
	})
	out := make([]exposition.Sample, 0, len(keys))
	var b labels.ScratchBuilder
	for _, k := range keys {
		v := vals[k]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		// The group key of a windowed gauge names its labels too, which
		// tells these (no window) apart.
		ls := cache.get(labelKey{name: name, group: k.model + "\xff" + k.engine, extra: nowLabelsKey}, func() labels.Labels {
			b.Reset()
			b.Add(model.MetricNameLabel, name)
			if k.engine != "" {
				b.Add(mapping.LabelEngine, k.engine)
			}
			if k.model != "" {
				b.Add(mapping.LabelModel, k.model)
			}
			b.Sort()
			return b.Labels()
		})
		out = append(out, exposition.Sample{Labels: ls, Value: v})
	}
	return out
}

// Capacity returns the gauges of the current scrape for autoscalers (in
// flight, free KV tokens, idle seconds) from its canonical page and the
// idle tracker that observed it, per model_name and engine with byEngine,
// else per model_name. Families are sorted by name.
func (d *Deriver) Capacity(canon []exposition.Family, idle *IdleTracker, now time.Time, byEngine bool) []exposition.Family {
	byName := make(map[string]*exposition.Family, len(canon))
	for i := range canon {
		byName[canon[i].Name] = &canon[i]
	}
	return d.capacity(byName, idle, now, byEngine)
}

// Capacities is Capacity per model_name and engine, and per model_name,
// indexing the page once for both.
// Like the label cache, it is not safe for concurrent use.
func (d *Deriver) Capacities(canon []exposition.Family, idle *IdleTracker, now time.Time) (byEngine, byModel []exposition.Family) {
	if d.byName == nil {
		d.byName = make(map[string]*exposition.Family, len(canon))
	}
	for i := range canon {
		d.byName[canon[i].Name] = &canon[i]
	}
	byEngine, byModel = d.capacity(d.byName, idle, now, true), d.capacity(d.byName, idle, now, false)
	clear(d.byName) // holds no page until the next scrape
	return byEngine, byModel
}

func (d *Deriver) capacity(byName map[string]*exposition.Family, idle *IdleTracker, now time.Time, byEngine bool) []exposition.Family {
	c := currentCalc{d: d, byName: byName, idle: idle, now: now, byEngine: byEngine}
	d.labels.begin()
	defer d.labels.end()
	var out []exposition.Family
	for _, s := range d.specs {
		if s.current == nil {
			continue
		}
		if smps := nowSamples(d.labels, s.Name, s.current(&c)); len(smps) > 0 {
			out = append(out, exposition.Family{Name: s.Name, Type: model.MetricTypeGauge, Help: s.Help, Samples: smps})
		}
	}
	slices.SortFunc(out, func(a, b exposition.Family) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// nowLabelsKey marks the label cache's keys of the current scrape's
// gauges.
const nowLabelsKey = "\xfenow"
