// Package derive computes the derived gauges (windowed rates, ratios, means
// and quantiles) from a window.History, grouped by the labels a page needs:
// model_name and engine on the full page, model_name on the routing view.
package derive

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/quantile"
	"github.com/fos-study/vllm-normalizer/window"
)

// source says which upstream sample a history series is.
type source = window.Key

const (
	srcNone source = iota
	srcPreemptions
	srcPrefixHits
	srcPrefixQueries
	srcExtPrefixHits
	srcExtPrefixQueries
	srcPromptTokens
	srcGenerationTokens
	srcRequestSuccess
	srcQueueSum
	srcQueueCount
	srcPrefillSum
	srcPrefillCount
	srcDecodeSum
	srcDecodeCount
	srcPromptLenSum
	srcPromptLenCount
	srcGenLenSum
	srcGenLenCount
	srcTTFTBucket
	srcITLBucket
	srcE2EBucket
	srcV0PrefixHitRate // gauge, stored as observed
	srcRunning         // gauge, stored as observed
	srcTPOTBucket      // kept only with a TPOT SLO target (WithSLOs)
	numSources
)

// sourceRoles says which role, and which part of its family, each source
// reads.
var sourceRoles = [numSources]struct {
	role mapping.Role
	part mapping.Part
}{
	srcPreemptions:      {mapping.RolePreemptions, mapping.PartValue},
	srcPrefixHits:       {mapping.RolePrefixCacheHits, mapping.PartValue},
	srcPrefixQueries:    {mapping.RolePrefixCacheQueries, mapping.PartValue},
	srcExtPrefixHits:    {mapping.RoleExternalPrefixCacheHits, mapping.PartValue},
	srcExtPrefixQueries: {mapping.RoleExternalPrefixCacheQueries, mapping.PartValue},
	srcPromptTokens:     {mapping.RolePromptTokens, mapping.PartValue},
	srcGenerationTokens: {mapping.RoleGenerationTokens, mapping.PartValue},
	srcRequestSuccess:   {mapping.RoleRequestsFinished, mapping.PartValue},
	srcQueueSum:         {mapping.RoleQueueTime, mapping.PartSum},
	srcQueueCount:       {mapping.RoleQueueTime, mapping.PartCount},
	srcPrefillSum:       {mapping.RolePrefillTime, mapping.PartSum},
	srcPrefillCount:     {mapping.RolePrefillTime, mapping.PartCount},
	srcDecodeSum:        {mapping.RoleDecodeTime, mapping.PartSum},
	srcDecodeCount:      {mapping.RoleDecodeTime, mapping.PartCount},
	srcPromptLenSum:     {mapping.RoleRequestPromptTokens, mapping.PartSum},
	srcPromptLenCount:   {mapping.RoleRequestPromptTokens, mapping.PartCount},
	srcGenLenSum:        {mapping.RoleRequestGenerationTokens, mapping.PartSum},
	srcGenLenCount:      {mapping.RoleRequestGenerationTokens, mapping.PartCount},
	srcTTFTBucket:       {mapping.RoleTTFT, mapping.PartBucket},
	srcITLBucket:        {mapping.RoleInterTokenLatency, mapping.PartBucket},
	srcE2EBucket:        {mapping.RoleE2ELatency, mapping.PartBucket},
	srcV0PrefixHitRate:  {mapping.RolePrefixCacheHitRateGauge, mapping.PartValue},
	srcRunning:          {mapping.RoleRequestsRunning, mapping.PartValue},
	srcTPOTBucket:       {mapping.RoleTimePerOutputToken, mapping.PartBucket},
}

// Deriver computes the derived gauges over the canonical page (roles under
// their canonical names, see mapping.Profile.Canonical). Immutable.
type Deriver struct {
	roles  *mapping.Roles
	inputs *window.Inputs
	help   map[string]string
	// slos are the attainment targets, ready to use (see WithSLOs).
	slos   []sloTarget
	labels *labelCache
}

// New returns the Deriver for the roles' canonical names, without SLO
// targets.
func New(roles *mapping.Roles) *Deriver {
	d := &Deriver{roles: roles, inputs: buildInputs(roles, false), help: map[string]string{}, labels: &labelCache{}}
	for _, s := range Specs(roles) {
		d.help[s.Name] = s.Help
	}
	return d
}

// buildInputs lists the samples the sources read; the TPOT histogram only
// with tpot, as nothing but its SLO attainment reads it.
func buildInputs(roles *mapping.Roles, tpot bool) *window.Inputs {
	by := make(map[string]window.Input, numSources)
	for src := srcNone + 1; src < numSources; src++ {
		if src == srcTPOTBucket && !tpot {
			continue
		}
		sr := sourceRoles[src]
		def, _ := roles.Def(sr.role)
		kind := window.Counter
		switch {
		case sr.part == mapping.PartBucket:
			kind = window.Bucket
		case def.Type == mapping.RoleTypeGauge:
			kind = window.Gauge
		}
		by[roles.Sample(sr.role, sr.part)] = window.Input{Key: src, Kind: kind}
	}
	return window.NewInputs(by)
}

// Inputs returns the upstream samples the derivations read: what a
// window.History must keep for Groupings.
func (d *Deriver) Inputs() *window.Inputs { return d.inputs }

// derivedQuantiles are the quantiles the latency gauges are computed at,
// with their label values.
var derivedQuantiles = []struct {
	q     float64
	label string
}{{0.5, "0.5"}, {0.9, "0.9"}, {0.99, "0.99"}}

// histSources are the histograms whose buckets derivations read; a
// window's bucket increases are kept in this order.
var histSources = [...]source{srcTTFTBucket, srcITLBucket, srcE2EBucket, srcTPOTBucket}

// histIndex is src's position in histSources, or -1.
func histIndex(src source) int {
	for i, h := range histSources {
		if h == src {
			return i
		}
	}
	return -1
}

// histograms whose bucket increases give quantiles.
var quantileFamilies = [...]struct {
	src  source
	name string
}{
	{srcTTFTBucket, DerivedTTFTSeconds},
	{srcITLBucket, DerivedInterTokenLatencySeconds},
	{srcE2EBucket, DerivedE2ELatencySeconds},
}

// rateFamilies are plain rates of one counter.
var rateFamilies = []struct {
	src  source
	name string
}{
	{srcPreemptions, DerivedPreemptionsPerSecond},
	{srcPromptTokens, DerivedPromptTokensPerSecond},
	{srcGenerationTokens, DerivedGenerationTokensPerSecond},
}

// ratioFamilies are increase(num)/increase(den).
var ratioFamilies = []struct {
	num, den source
	name     string
}{
	{srcExtPrefixHits, srcExtPrefixQueries, DerivedExternalPrefixCacheHitRatio},
	{srcQueueSum, srcQueueCount, DerivedQueueTimeMeanSeconds},
	{srcPrefillSum, srcPrefillCount, DerivedPrefillTimeMeanSeconds},
	{srcDecodeSum, srcDecodeCount, DerivedDecodeTimeMeanSeconds},
	{srcPromptLenSum, srcPromptLenCount, DerivedPromptTokensMean},
	{srcGenLenSum, srcGenLenCount, DerivedGenerationTokensMean},
}

// group is one set of grouping label values.
type group struct {
	lbls []labels.Label // the grouping labels the series have, non-empty
	key  string         // the grouping labels' values, for the label cache
	acc  groupAcc
}

// groupAcc accumulates one window's contributions of a group's series.
type groupAcc struct {
	// inc and rate are summed over the series of a source that have at
	// least 2 points in the window; has says whether there was one.
	inc  [numSources]float64
	rate [numSources]float64
	has  [numSources]bool
	// inWindow says whether a series of the source had any point in the
	// window.
	inWindow [numSources]bool
	buckets  [len(histSources)][]quantile.Bucket
	// requests_running: the sum over series of their mean over the
	// window's points, and whether some series had a point.
	runMean float64
	runHas  bool
	// V0 hit-rate gauge: sum and number of non-negative values, and
	// whether some series had 2 or more points.
	gaugeSum    float64
	gaugeN      int
	gaugePoints bool
}

// reasonKey identifies a requests_per_second series: group and reason.
type reasonKey struct {
	group  int
	reason string
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
	groupOf []int // series index -> group
	reasons map[reasonKey]float64
	out     map[string][]exposition.Sample
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

	gs := make([]grouping, len(groupBys))
	var (
		key      []byte
		fromLbls []labels.Label
	)
	for k, groupBy := range groupBys {
		by := make([]string, 0, len(groupBy))
		for _, g := range groupBy {
			switch g {
			case model.MetricNameLabel, model.BucketLabel, WindowLabel, QuantileLabel, finishedReasonLabel, SLOLabel:
				continue
			}
			if !slices.Contains(by, g) {
				by = append(by, g)
			}
		}
		// Assign every series to its group.
		g := &gs[k]
		g.groupOf = make([]int, len(series))
		g.out = map[string][]exposition.Sample{}
		index := map[string]int{}
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
		for i, s := range series {
			groupKey(s.Labels())
			gi, ok := index[string(key)]
			if !ok {
				gi = len(g.groups)
				ks := string(key)
				index[ks] = gi
				g.groups = append(g.groups, &group{lbls: slices.Clone(fromLbls), key: ks})
			}
			g.groupOf[i] = gi
		}
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

	d.labels.begin()
	defer d.labels.end()
	var b labels.ScratchBuilder
	// extraKey names the extra labels (their values, or the SLO's key)
	// for the label cache.
	emit := func(out map[string][]exposition.Sample, name string, g *group, window string, extra []labels.Label, extraKey string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		ls := d.labels.get(labelKey{name: name, group: g.key, window: window, extra: extraKey}, func() labels.Labels {
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
			b.Add(WindowLabel, window)
			b.Sort()
			return b.Labels()
		})
		out[name] = append(out[name], exposition.Sample{Labels: ls, Value: v})
	}

	var scratch []quantile.Bucket
	for _, w := range r.Windows() {
		rg, ok := r.Range(w)
		if !ok {
			continue // fewer than 2 points: nothing is defined
		}
		wl := window.Format(w)
		for k := range gs {
			for _, g := range gs[k].groups {
				buckets := g.acc.buckets // keep the slices' storage for this window
				g.acc = groupAcc{}
				for k := range buckets {
					g.acc.buckets[k] = buckets[k][:0]
				}
			}
			gs[k].reasons = map[reasonKey]float64{}
		}
		for i, s := range series {
			if s.Kind() == window.Gauge {
				for k := range gs {
					gi := gs[k].groupOf[i]
					accumulateGauge(r, s, &gs[k].groups[gi].acc, rg)
				}
				continue
			}
			inc, secs, inWindow, ok := r.Increase(s, rg)
			if !inWindow {
				continue
			}
			for k := range gs {
				gi := gs[k].groupOf[i]
				a := &gs[k].groups[gi].acc
				a.inWindow[s.Key()] = true
				if ok {
					a.add(s, inc, secs, gi, gs[k].reasons)
				}
			}
		}
		for k := range gs {
			out := gs[k].out
			for gi, g := range gs[k].groups {
				if gs[k].blocked[gi] {
					continue
				}
				a := &g.acc
				for _, rf := range rateFamilies {
					if a.has[rf.src] {
						emit(out, rf.name, g, wl, nil, "", a.rate[rf.src])
					}
				}
				for _, rf := range ratioFamilies {
					if v, ok := a.ratio(rf.num, rf.den); ok {
						emit(out, rf.name, g, wl, nil, "", v)
					}
				}
				if v, ok := a.prefixHitRatio(); ok {
					emit(out, DerivedPrefixCacheHitRatio, g, wl, nil, "", v)
				}
				qm, qok := a.ratio(srcQueueSum, srcQueueCount)
				pm, pok := a.ratio(srcPrefillSum, srcPrefillCount)
				if qok && pok && qm+pm != 0 {
					emit(out, DerivedTTFTQueueRatio, g, wl, nil, "", qm/(qm+pm))
				}
				for _, qf := range quantileFamilies {
					bs := a.buckets[histIndex(qf.src)]
					if len(bs) == 0 {
						continue
					}
					scratch = append(scratch[:0], bs...)
					for _, dq := range derivedQuantiles {
						copy(scratch, bs)
						emit(out, qf.name, g, wl, []labels.Label{{Name: QuantileLabel, Value: dq.label}}, dq.label, quantile.Estimate(dq.q, scratch))
					}
				}
				for _, st := range d.slos {
					bs := a.buckets[histIndex(st.src)]
					if len(bs) == 0 {
						continue
					}
					scratch = append(scratch[:0], bs...)
					emit(out, DerivedSLOAttainmentRatio, g, wl, st.lbls, st.key, quantile.FractionAtMost(st.seconds, scratch))
				}
				if a.has[srcGenerationTokens] && a.runHas && a.runMean > 0 {
					emit(out, DerivedGenerationTokensPerSecondPerRequest, g, wl, nil, "", a.rate[srcGenerationTokens]/a.runMean)
				}
			}
			for rk, v := range gs[k].reasons {
				if gs[k].blocked[rk.group] {
					continue
				}
				emit(out, DerivedRequestsPerSecond, gs[k].groups[rk.group], wl, []labels.Label{{Name: finishedReasonLabel, Value: rk.reason}}, rk.reason, v)
			}
		}
	}

	for k := range gs {
		out := gs[k].out
		names := make([]string, 0, len(out))
		for name := range out {
			names = append(names, name)
		}
		sort.Strings(names)
		fams := make([]exposition.Family, 0, len(names))
		for _, name := range names {
			smps := out[name]
			slices.SortFunc(smps, func(a, b exposition.Sample) int { return labels.Compare(a.Labels, b.Labels) })
			fams = append(fams, exposition.Family{
				Name:    name,
				Type:    model.MetricTypeGauge,
				Help:    d.help[name],
				Samples: smps,
			})
		}
		res[k] = fams
	}
}

// accumulateGauge adds gauge series s's values in rg to a group's
// accumulator.
func accumulateGauge(r *window.Reader, s *window.Series, a *groupAcc, rg window.Range) {
	if s.Key() == srcRunning {
		sum, n := 0.0, 0
		r.Values(s, rg, func(v float64) {
			sum += v
			n++
		})
		if n > 0 {
			a.runMean += sum / float64(n)
			a.runHas = true
		}
		return
	}
	points := 0
	r.Values(s, rg, func(v float64) {
		points++
		if v >= 0 {
			a.gaugeSum += v
			a.gaugeN++
		}
	})
	if points > 0 {
		a.inWindow[s.Key()] = true
	}
	if points >= 2 {
		a.gaugePoints = true
	}
}

// add adds counter series s's increase inc over secs seconds to its
// group's accumulator (group gi).
func (a *groupAcc) add(s *window.Series, inc, secs float64, gi int, reasons map[reasonKey]float64) {
	src := s.Key()
	switch {
	case s.Kind() == window.Bucket:
		if k := histIndex(src); k >= 0 {
			a.buckets[k] = append(a.buckets[k], quantile.Bucket{UpperBound: s.UpperBound(), Count: inc})
		}
	case src == srcRequestSuccess:
		reasons[reasonKey{gi, s.Labels().Get(finishedReasonLabel)}] += inc / secs
	default:
		a.inc[src] += inc
		a.rate[src] += inc / secs
		a.has[src] = true
	}
}

// ratio returns sum(increase(num)) / sum(increase(den)) when both have
// contributions and the denominator is not 0.
func (a *groupAcc) ratio(num, den source) (float64, bool) {
	if !a.has[num] || !a.has[den] || a.inc[den] == 0 {
		return 0, false
	}
	return a.inc[num] / a.inc[den], true
}

// prefixHitRatio is the counter ratio where prefix cache counters exist in
// the window, otherwise the mean of the V0 gauge's non-negative values.
func (a *groupAcc) prefixHitRatio() (float64, bool) {
	if a.inWindow[srcPrefixQueries] || a.inWindow[srcPrefixHits] {
		return a.ratio(srcPrefixHits, srcPrefixQueries)
	}
	if !a.gaugePoints || a.gaugeN == 0 {
		return 0, false
	}
	return a.gaugeSum / float64(a.gaugeN), true
}
