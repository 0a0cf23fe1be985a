package derive

import (
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/quantile"
	"github.com/fos-study/vllm-normalizer/window"
)

// Window keys: each counter input of mapping's table is kept under its
// index plus one, and the gauges derivations average over a window after
// them (0 is no input).
func counterKey(c mapping.Counter) window.Key { return window.Key(c) + 1 }

// windowGauge is a gauge that derivations read over a window.
type windowGauge uint8

const (
	gaugePrefixHitRate windowGauge = iota // V0's hit-rate gauge
	gaugeRunning
	gaugeWaiting
	numWindowGauges
)

// windowGaugeRoles are the roles of the window gauges.
var windowGaugeRoles = [numWindowGauges]mapping.Role{
	gaugePrefixHitRate: mapping.RolePrefixCacheHitRateGauge,
	gaugeRunning:       mapping.RoleRequestsRunning,
	gaugeWaiting:       mapping.RoleRequestsWaiting,
}

func gaugeKey(g windowGauge) window.Key { return window.Key(mapping.NumCounters) + 1 + window.Key(g) }

// keyCounter is the counter input a window key stands for, if it is one.
func keyCounter(k window.Key) (mapping.Counter, bool) {
	if k == 0 || k > window.Key(mapping.NumCounters) {
		return 0, false
	}
	return mapping.Counter(k - 1), true
}

// splitBy names, for a counter input whose rate a derived gauge keeps per
// value of one of its labels, that label.
var splitBy = [mapping.NumCounters]string{
	mapping.CounterRequestsFinished:     finishedReasonLabel,
	mapping.CounterPromptTokensBySource: sourceLabel,
	mapping.CounterAdmissionRejections:  reasonLabel,
}

// Deriver computes the derived gauges over the canonical page (roles under
// their canonical names, see mapping.Profile.Canonical). Immutable.
type Deriver struct {
	roles *mapping.Roles
	// specs are the derived gauges, their texts expanded for roles.
	specs  []Spec
	inputs *window.Inputs
	help   map[string]string
	// slos are the attainment targets, ready to use (see WithSLOs).
	slos []sloTarget
	// quantileLabel and targetLabel name the quantile and SLO target
	// labels (see WithLegacyLabels).
	quantileLabel, targetLabel string
	labels                     *labelCache
	// perModel says whether some spec is computed per model only, and
	// perModelCounter and perModelGauge which inputs such specs read: the
	// grouping without engine accumulates only those.
	perModel        bool
	perModelCounter [mapping.NumCounters]bool
	perModelGauge   [numWindowGauges]bool
	// perModelOnly are the counter inputs no other spec reads.
	perModelOnly [mapping.NumCounters]bool
	// families are the specs' names, sorted, and family each spec's
	// position in them: a derivation's samples go to a slice per family,
	// without a map probe and store per sample (emitWith), which with the
	// map's growth took 9.5 µs of a one-engine scrape at 100 ms
	// (BenchmarkScrapeCycle's profile).
	families []string
	family   []int
	// queuedReqsCap is the server's cap on waiting + running
	// (--upstream.max-num-queued-reqs), 0 when not known.
	queuedReqsCap float64
	// byName is Capacities' index of the page by family name, emptied
	// and kept for the next scrape rather than made anew (3 KB a scrape
	// on the demo's page).
	byName map[string]*exposition.Family
}

// New returns the Deriver for the roles' canonical names, without SLO
// targets.
func New(roles *mapping.Roles) *Deriver {
	return newDeriver(roles, specs)
}

// newDeriver returns the Deriver of a table of specs.
func newDeriver(roles *mapping.Roles, table []Spec) *Deriver {
	d := &Deriver{roles: roles, specs: expandSpecs(table, roles), help: map[string]string{}, labels: &labelCache{},
		quantileLabel: QuantileLabel, targetLabel: SLOTargetLabel}
	var others [mapping.NumCounters]bool
	for _, s := range d.specs {
		d.help[s.Name] = s.Help
		if !s.PerModel {
			for _, r := range s.Inputs {
				for c := range mapping.NumCounters {
					others[c] = others[c] || c.Role() == r
				}
			}
			continue
		}
		d.perModel = true
		for _, r := range s.Inputs {
			for c := range mapping.NumCounters {
				d.perModelCounter[c] = d.perModelCounter[c] || c.Role() == r
			}
			for g, gr := range windowGaugeRoles {
				d.perModelGauge[g] = d.perModelGauge[g] || gr == r
			}
		}
	}
	for c := range mapping.NumCounters {
		d.perModelOnly[c] = d.perModelCounter[c] && !others[c]
	}
	d.inputs = d.buildInputs(nil)
	for _, s := range d.specs {
		d.families = append(d.families, s.Name)
	}
	slices.Sort(d.families)
	d.families = slices.Compact(d.families)
	for _, s := range d.specs {
		fi, _ := slices.BinarySearch(d.families, s.Name)
		d.family = append(d.family, fi)
	}
	return d
}

// buildInputs lists the samples the specs read over a window: the counter
// inputs and window gauges of their input roles. The SLO attainment reads
// a histogram only for a latency with targets, so the TPOT histogram,
// which nothing else reads, is kept only with a TPOT target.
func (d *Deriver) buildInputs(slos []sloTarget) *window.Inputs {
	var counters [mapping.NumCounters]bool
	var gauges [numWindowGauges]bool
	for _, s := range d.specs {
		if s.window == nil || s.AnyInput {
			continue
		}
		for _, r := range s.Inputs {
			for c := range mapping.NumCounters {
				if c.Role() == r {
					counters[c] = true
				}
			}
			for g, gr := range windowGaugeRoles {
				if gr == r {
					gauges[g] = true
				}
			}
		}
	}
	for _, st := range slos {
		counters[st.src] = true
	}
	by := make(map[string]window.Input, int(mapping.NumCounters)+int(numWindowGauges))
	for c := range mapping.NumCounters {
		name := d.roles.Sample(c.Role(), c.Part())
		if !counters[c] || name == "" {
			continue
		}
		def, _ := d.roles.Def(c.Role())
		kind := window.Counter
		switch {
		case c.Part() == mapping.PartBucket:
			kind = window.Bucket
		case def.Type == mapping.RoleTypeGauge:
			kind = window.Gauge
		}
		by[name] = window.Input{Key: counterKey(c), Kind: kind}
	}
	for g := range numWindowGauges {
		name := d.roles.Sample(windowGaugeRoles[g], mapping.PartValue)
		if !gauges[g] || name == "" {
			continue
		}
		by[name] = window.Input{Key: gaugeKey(g), Kind: window.Gauge}
	}
	return window.NewInputs(by)
}

// Inputs returns the upstream samples the derivations read: what a
// window.History must keep for Groupings.
func (d *Deriver) Inputs() *window.Inputs { return d.inputs }

// group is one set of grouping label values.
type group struct {
	lbls []labels.Label // the grouping labels the series have, non-empty
	key  string         // the grouping labels' values, for the label cache
	acc  groupAcc
	// splitBuf is the split rates' first storage: finished_reason has a
	// handful of values, so a group needs no allocation for them.
	splitBuf [8]labelRate
}

// groupAcc accumulates one window's contributions of a group's series.
type groupAcc struct {
	// inc and rate are summed over the series of a counter input that
	// have at least 2 points in the window; has says whether there was
	// one.
	inc  [mapping.NumCounters]float64
	rate [mapping.NumCounters]float64
	has  [mapping.NumCounters]bool
	// inWindow says whether a series of the input had any point in the
	// window.
	inWindow [mapping.NumCounters]bool
	// buckets are the bucket increases of histogram inputs; nil until a
	// group has a bucket series: most groups of a page of many models have
	// none, and a group's accumulator is kept from one scrape to the next.
	buckets *histBuckets
	// withoutInf marks the histogram inputs of which the group holds a
	// child without +Inf (window.Series.WithoutInf): left out, and the
	// group's buckets of that input with it, as a sum without that
	// child's total would be read as the whole group's.
	withoutInf counterSet
	// split are the rates of split counters per label value, in the
	// order first seen.
	split  []labelRate
	gauges [numWindowGauges]gaugeAcc
}

// counterSet is a set of counter inputs, a bit each: 8 bytes in every
// group's accumulator, which is kept from one scrape to the next.
type counterSet uint64

// A set of counter inputs must fit counterSet's bits.
var _ [64 - mapping.NumCounters]struct{}

func (s *counterSet) add(cn mapping.Counter)     { *s |= 1 << cn }
func (s counterSet) has(cn mapping.Counter) bool { return s&(1<<cn) != 0 }

// histBuckets are a group's bucket increases, by histogram input.
type histBuckets [mapping.NumCounters][]quantile.Bucket

// bucketsOf returns the bucket increases of histogram input cn.
func (a *groupAcc) bucketsOf(cn mapping.Counter) []quantile.Bucket {
	if a.buckets == nil || a.withoutInf.has(cn) {
		return nil
	}
	return a.buckets[cn]
}

// gaugeAcc accumulates a window gauge's series over one window.
type gaugeAcc struct {
	// meanSum is the sum over series of their mean over the window's
	// points; meanHas whether some series had a point.
	meanSum float64
	meanHas bool
	// nonNegSum and nonNegN are the sum and number of non-negative values;
	// points2 whether some series had 2 or more points.
	nonNegSum float64
	nonNegN   int
	points2   bool
	// lastSum is the sum over series of their last value in the window.
	lastSum float64
}

// labelRate is the rate and increase of a split counter's series with one
// label value.
type labelRate struct {
	counter   mapping.Counter
	value     string
	rate, inc float64
}

// Derive returns the derived gauge families, sorted by name, computed over
// each window ending at now. Series are grouped by the groupBy labels the
// source series carry (a label absent upstream, such as engine on V0, is
// absent from the result) and get a window label; quantile gauges also get
// quantile, requests_per_second keeps finished_reason. A value that cannot
// be computed is left out, and a family without any value is left out.
// groupBy entries that would clash with the derived labels (__name__, le,
// window, quantile, finished_reason) are ignored.
func (d *Deriver) Derive(h *window.History, now time.Time, groupBy []string) []exposition.Family {
	return d.Groupings(h, now, groupBy)[0]
}

// grouping is one way of grouping the series for Groupings.
type grouping struct {
	groups []*group
	// blocked marks the groups holding a sample the history could not
	// window: their derivations would silently miss it, so they are left
	// out.
	blocked []bool
	groupOf []int                 // series index -> group
	out     [][]exposition.Sample // by family (Deriver.families)
	outBy   string                // its group-by labels joined, for the label cache's sample counts
	// perModel says which specs it computes: those marked PerModel
	// (true) or the others; a grouping by engine has a companion
	// grouping without engine for the PerModel specs, whose samples go
	// to the same out.
	perModel, all bool
}

// Groupings returns, for each of groupBys, what Derive would return
// for it, reading each series' window once for all of them. Every grouping
// sums the same per-series increases and rates in the same series order,
// so each result is exactly Derive's.
func (d *Deriver) Groupings(h *window.History, now time.Time, groupBys ...[]string) [][]exposition.Family {
	res := make([][]exposition.Family, len(groupBys))
	h.Read(now, func(r *window.Reader) { d.derive(r, groupBys, res) })
	return res
}

func (d *Deriver) derive(r *window.Reader, groupBys [][]string, res [][]exposition.Family) {
	series := r.Series()

	// The PerModel specs need a grouping of their own only where the page
	// has what only they read (vLLM's admission rejections) or a cap is
	// known: other pages pay nothing for them.
	perModel := d.perModel && d.queuedReqsCap > 0
	for _, s := range series {
		if cn, ok := keyCounter(s.Key()); ok && d.perModelOnly[cn] {
			perModel = d.perModel
			break
		}
	}
	bys := make([][]string, 0, len(groupBys)+1)
	gs := make([]grouping, 0, len(groupBys)+1)
	for _, groupBy := range groupBys {
		by := make([]string, 0, len(groupBy))
		for _, g := range groupBy {
			switch g {
			case model.MetricNameLabel, model.BucketLabel, WindowLabel, QuantileLabel, SLOTargetLabel, LegacyQuantileLabel, finishedReasonLabel, SLOLabel:
				continue
			}
			if !slices.Contains(by, g) {
				by = append(by, g)
			}
		}
		out, outBy := make([][]exposition.Sample, len(d.families)), strings.Join(by, "\xff")
		if !perModel || !slices.Contains(by, mapping.LabelEngine) {
			bys = append(bys, by)
			gs = append(gs, grouping{out: out, outBy: outBy, all: true})
			continue
		}
		// The PerModel specs are computed over the model's engines
		// together, into the same page.
		bys = append(bys, by, slices.DeleteFunc(slices.Clone(by), func(l string) bool { return l == mapping.LabelEngine }))
		gs = append(gs, grouping{out: out, outBy: outBy}, grouping{out: out, outBy: outBy, perModel: true})
	}
	d.labels.begin()
	defer d.labels.end()
	var (
		key      []byte
		fromLbls []labels.Label
	)
	for k, by := range bys {
		// Assign every series to its group, as the last derivation did
		// when the history holds the same series.
		g := &gs[k]
		planKey := strings.Join(by, "\xff")
		if g.perModel {
			planKey += "\xfeper-model"
		}
		plan := d.labels.plans[planKey]
		switch {
		case plan != nil && plan.used == d.labels.round:
			// The same grouping twice in one call: each needs groups of
			// its own to accumulate into.
			plan = &groupingPlan{index: map[string]int{}}
		case plan == nil || !slices.Equal(plan.series, series):
			plan = &groupingPlan{series: slices.Clone(series), index: map[string]int{}}
			d.labels.plans[planKey] = plan
		}
		plan.used = d.labels.round
		index := plan.index
		groupKey := func(l labels.Labels) {
			key, fromLbls = key[:0], fromLbls[:0]
			for _, name := range by {
				v := l.Get(name)
				// Names too: the key also tells apart, in the label
				// cache, groupings over other labels. 0xfe and 0xff
				// never occur in UTF-8.
				key = append(key, name...)
				key = append(key, 0xfe)
				key = append(key, v...)
				key = append(key, 0xff)
				if v != "" {
					fromLbls = append(fromLbls, labels.Label{Name: name, Value: v})
				}
			}
		}
		if plan.groupOf == nil {
			plan.groupOf = make([]int, len(series))
			for i, s := range series {
				groupKey(s.Labels())
				gi, ok := index[string(key)]
				if !ok {
					gi = len(plan.groups)
					ks := string(key)
					index[ks] = gi
					plan.groups = append(plan.groups, &group{lbls: slices.Clone(fromLbls), key: ks})
				}
				plan.groupOf[i] = gi
			}
		}
		g.groupOf, g.groups = plan.groupOf, plan.groups
		g.blocked = make([]bool, len(g.groups))
		lsets, all := r.Unwindowed()
		for gi := range g.blocked {
			g.blocked[gi] = all
		}
		for _, l := range lsets {
			groupKey(l)
			if gi, ok := index[string(key)]; ok {
				g.blocked[gi] = true
			}
		}
	}

	var b labels.ScratchBuilder
	c := windowCalc{d: d, b: &b}
	for _, w := range r.Windows() {
		rg, ok := r.Range(w)
		if !ok {
			continue // fewer than 2 points: nothing is defined
		}
		c.window = window.Format(w)
		for k := range gs {
			for _, g := range gs[k].groups {
				buckets, split := g.acc.buckets, g.acc.split // keep the slices' storage for this window
				if split == nil {
					split = g.splitBuf[:0]
				}
				g.acc = groupAcc{split: split[:0], buckets: buckets}
				if buckets != nil {
					for k := range buckets {
						buckets[k] = buckets[k][:0]
					}
				}
			}
		}
		for i, s := range series {
			if s.Kind() == window.Gauge {
				for k := range gs {
					if gs[k].perModel && !d.perModelGauge[s.Key()-gaugeKey(0)] {
						continue // only the PerModel specs read it
					}
					gi := gs[k].groupOf[i]
					accumulateGauge(r, s, &gs[k].groups[gi].acc, rg)
				}
				continue
			}
			cn, isCounter := keyCounter(s.Key())
			if !isCounter {
				continue
			}
			inc, secs, inWindow, ok := r.Increase(s, rg)
			if !inWindow {
				continue
			}
			for k := range gs {
				if gs[k].perModel && !d.perModelCounter[cn] {
					continue
				}
				gi := gs[k].groupOf[i]
				a := &gs[k].groups[gi].acc
				a.inWindow[cn] = true
				switch {
				case s.Kind() == window.Bucket && s.WithoutInf():
					// One point is enough: the child is in the sum.
					a.withoutInf.add(cn)
				case ok:
					a.add(s, cn, inc, secs)
				}
			}
		}
		for k := range gs {
			c.out, c.outBy = gs[k].out, gs[k].outBy
			for gi, g := range gs[k].groups {
				if gs[k].blocked[gi] {
					continue
				}
				c.g, c.a = g, &g.acc
				for si := range d.specs {
					if !gs[k].all && d.specs[si].PerModel != gs[k].perModel {
						continue
					}
					if compute := d.specs[si].window; compute != nil {
						c.name, c.family = d.specs[si].Name, d.family[si]
						compute(&c)
					}
				}
			}
		}
	}

	k := 0
	for i := range gs {
		if gs[i].perModel {
			continue // its samples are in its grouping by engine's out
		}
		out := gs[i].out
		n := 0
		for _, smps := range out {
			if len(smps) > 0 {
				n++
			}
		}
		fams := make([]exposition.Family, 0, n)
		for fi, name := range d.families {
			smps := out[fi]
			if len(smps) == 0 {
				continue // a family without any value is left out
			}
			d.labels.sortSamples(familyOfGrouping{gs[i].outBy, name}, smps)
			fams = append(fams, exposition.Family{
				Name:    name,
				Type:    model.MetricTypeGauge,
				Help:    d.help[name],
				Samples: smps,
			})
		}
		res[k] = fams
		k++
	}
}

// accumulateGauge adds gauge series s's values in rg to a group's
// accumulator.
func accumulateGauge(r *window.Reader, s *window.Series, a *groupAcc, rg window.Range) {
	k := s.Key() - gaugeKey(0)
	if k >= window.Key(numWindowGauges) {
		return
	}
	ga := &a.gauges[k]
	sum, last, n := 0.0, 0.0, 0
	r.Values(s, rg, func(v float64) {
		sum += v
		last = v
		n++
		if v >= 0 {
			ga.nonNegSum += v
			ga.nonNegN++
		}
	})
	if n > 0 {
		ga.meanSum += sum / float64(n)
		ga.meanHas = true
		ga.lastSum += last
	}
	if n >= 2 {
		ga.points2 = true
	}
}

// add adds counter input cn's series s's increase inc over secs seconds to
// its group's accumulator. A split counter's series add to its label
// value's share and to its total.
func (a *groupAcc) add(s *window.Series, cn mapping.Counter, inc, secs float64) {
	if s.Kind() == window.Bucket {
		if a.buckets == nil {
			a.buckets = new(histBuckets)
		}
		a.buckets[cn] = append(a.buckets[cn], quantile.Bucket{UpperBound: s.UpperBound(), Count: inc})
		return
	}
	a.inc[cn] += inc
	a.rate[cn] += inc / secs
	a.has[cn] = true
	if splitBy[cn] == "" {
		return
	}
	v := s.Labels().Get(splitBy[cn])
	for i := range a.split {
		if a.split[i].counter == cn && a.split[i].value == v {
			a.split[i].rate += inc / secs
			a.split[i].inc += inc
			return
		}
	}
	a.split = append(a.split, labelRate{counter: cn, value: v, rate: inc / secs, inc: inc})
}
