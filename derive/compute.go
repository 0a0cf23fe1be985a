package derive

import (
	"math"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/quantile"
)

// windowCalc is what a windowed Spec's computation sees: one group's
// accumulated inputs over one window, and where its values go.
type windowCalc struct {
	d      *Deriver
	b      *labels.ScratchBuilder
	out    [][]exposition.Sample // by family (Deriver.families)
	outBy  string                // the group-by labels of out's grouping, joined
	window string
	g      *group
	a      *groupAcc
	name   string // the spec's family
	family int    // its position in out
	// scratch is bucket storage that quantile estimates may reorder.
	scratch []quantile.Bucket
}

// rate is the input's rate summed over the group, if some series had 2
// points in the window.
func (c *windowCalc) rate(cn mapping.Counter) (float64, bool) {
	return c.a.rate[cn], c.a.has[cn]
}

// ratio returns sum(increase(num)) / sum(increase(den)) when both have
// contributions and the denominator is not 0.
func (c *windowCalc) ratio(num, den mapping.Counter) (float64, bool) {
	a := c.a
	if !a.has[num] || !a.has[den] || a.inc[den] == 0 {
		return 0, false
	}
	return a.inc[num] / a.inc[den], true
}

// inWindow says whether some series of the input had a point in the window.
func (c *windowCalc) inWindow(cn mapping.Counter) bool { return c.a.inWindow[cn] }

// buckets returns a copy of the group's bucket increases of a histogram
// input (nil without any), which the caller may reorder.
func (c *windowCalc) buckets(cn mapping.Counter) []quantile.Bucket {
	bs := c.a.bucketsOf(cn)
	if len(bs) == 0 {
		return nil
	}
	c.scratch = append(c.scratch[:0], bs...)
	return c.scratch
}

// split returns the group's rates of a split counter (see splitBy) by
// label value.
func (c *windowCalc) split() []labelRate { return c.a.split }

// gauge returns the group's accumulation of a window gauge.
func (c *windowCalc) gauge(g windowGauge) *gaugeAcc { return &c.a.gauges[g] }

// emit adds v as the spec's sample for the group and window.
func (c *windowCalc) emit(v float64) { c.emitWith(nil, "", v) }

// emitWith adds v with extra labels; extraKey names them (their values)
// for the label cache.
func (c *windowCalc) emitWith(extra []labels.Label, extraKey string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	g, b, name := c.g, c.b, c.name
	ls := c.d.labels.get(labelKey{name: name, group: g.key, window: c.window, extra: extraKey}, func() labels.Labels {
		b.Reset()
		b.Add(model.MetricNameLabel, name)
		for _, l := range g.lbls {
			b.Add(l.Name, l.Value)
		}
		for _, l := range extra {
			if l.Value != "" {
				b.Add(l.Name, l.Value)
			}
		}
		b.Add(WindowLabel, c.window)
		b.Sort()
		return b.Labels()
	})
	smps := c.out[c.family]
	if smps == nil {
		var n int
		if o := c.d.labels.orders[familyOfGrouping{c.outBy, name}]; o != nil {
			n = len(o.emitted)
		}
		smps = make([]exposition.Sample, 0, n)
	}
	c.out[c.family] = append(smps, exposition.Sample{Labels: ls, Value: v})
}

// Windowed computations, for the specs' table.

// rateOf is the input's rate.
func rateOf(cn mapping.Counter) func(*windowCalc) {
	return func(c *windowCalc) {
		if v, ok := c.rate(cn); ok {
			c.emit(v)
		}
	}
}

// ratioOf is increase(num) / increase(den).
func ratioOf(num, den mapping.Counter) func(*windowCalc) {
	return func(c *windowCalc) {
		if v, ok := c.ratio(num, den); ok {
			c.emit(v)
		}
	}
}

// shareOf is increase(part) / (increase(part) + increase(rest)): the share
// of some events (failed transfers, refused requests) among them and the
// others, which a counter of their own counts.
func shareOf(part, rest mapping.Counter) func(*windowCalc) {
	return func(c *windowCalc) {
		a := c.a
		if !a.has[part] || !a.has[rest] || a.inc[part]+a.inc[rest] == 0 {
			return
		}
		c.emit(a.inc[part] / (a.inc[part] + a.inc[rest]))
	}
}

// derivedQuantiles are the quantiles the latency gauges are computed at,
// with their label values.
var derivedQuantiles = [...]struct {
	q     float64
	label string
}{{0.5, "0.5"}, {0.9, "0.9"}, {0.99, "0.99"}}

// derivedQs are derivedQuantiles' quantiles, for quantile.Estimates.
var derivedQs = func() (qs [len(derivedQuantiles)]float64) {
	for i, dq := range derivedQuantiles {
		qs[i] = dq.q
	}
	return qs
}()

// quantilesOf estimates derivedQuantiles from a histogram input's bucket
// increases.
func quantilesOf(cn mapping.Counter) func(*windowCalc) {
	return func(c *windowCalc) {
		bs := c.a.bucketsOf(cn)
		if len(bs) == 0 {
			return
		}
		var est [len(derivedQs)]float64
		quantile.Estimates(derivedQs[:], c.buckets(cn), est[:])
		for i, dq := range derivedQuantiles {
			c.emitWith([]labels.Label{{Name: c.d.quantileLabel, Value: dq.label}}, dq.label, est[i])
		}
	}
}

// ratesBy is a split counter's rate per value of its label.
func ratesBy(cn mapping.Counter) func(*windowCalc) {
	label := splitBy[cn]
	return func(c *windowCalc) {
		for _, r := range c.split() {
			if r.counter == cn {
				c.emitWith([]labels.Label{{Name: label, Value: r.value}}, r.value, r.rate)
			}
		}
	}
}

// currentCalc is what a Spec of the current scrape sees: the canonical
// page by family, the idle tracker that observed it, and the grouping.
type currentCalc struct {
	d        *Deriver
	byName   map[string]*exposition.Family
	idle     *IdleTracker
	now      time.Time
	byEngine bool
}

// family is the page's family playing role r, or nil.
func (c *currentCalc) family(r mapping.Role) *exposition.Family {
	return c.byName[c.d.roles.Family(r)]
}

// prefixHitRatio is the counter ratio where prefix cache counters exist in
// the window, otherwise the mean of the V0 gauge's non-negative values.
func prefixHitRatio(c *windowCalc) {
	if c.inWindow(mapping.CounterPrefixCacheQueries) || c.inWindow(mapping.CounterPrefixCacheHits) {
		ratioOf(mapping.CounterPrefixCacheHits, mapping.CounterPrefixCacheQueries)(c)
		return
	}
	if g := c.gauge(gaugePrefixHitRate); g.points2 && g.nonNegN > 0 {
		c.emit(g.nonNegSum / float64(g.nonNegN))
	}
}

// ttftQueueRatio is queue mean / (queue mean + prefill mean).
func ttftQueueRatio(c *windowCalc) {
	qm, qok := c.ratio(mapping.CounterQueueTimeSum, mapping.CounterQueueTimeCount)
	pm, pok := c.ratio(mapping.CounterPrefillTimeSum, mapping.CounterPrefillTimeCount)
	if qok && pok && qm+pm != 0 {
		c.emit(qm / (qm + pm))
	}
}

// sloAttainment is the share of requests within each SLO target.
func sloAttainment(c *windowCalc) {
	for _, st := range c.d.slos {
		if bs := c.buckets(st.src); len(bs) > 0 {
			c.emitWith(st.lbls, st.key, quantile.FractionAtMost(st.seconds, bs))
		}
	}
}

// tokensPerSecondPerRequest is the generation rate over the mean number of
// running requests.
func tokensPerSecondPerRequest(c *windowCalc) {
	rate, ok := c.rate(mapping.CounterGenerationTokens)
	if g := c.gauge(gaugeRunning); ok && g.meanHas && g.meanSum > 0 {
		c.emit(rate / g.meanSum)
	}
}

// Computations of the current scrape, for the specs' table.

func requestsInFlight(c *currentCalc) map[groupKey]float64 {
	return inFlight(c.family(mapping.RoleRequestsRunning), c.family(mapping.RoleRequestsWaiting), c.byEngine)
}

func kvCacheFreeTokens(c *currentCalc) map[groupKey]float64 {
	return kvFreeTokens(c.family(mapping.RoleKVCacheUsage), c.family(mapping.RoleKVCacheCapacity), c.family(mapping.RoleKVCacheFree), c.byEngine)
}

func idleSeconds(c *currentCalc) map[groupKey]float64 { return c.idle.idleSeconds(c.now, c.byEngine) }
