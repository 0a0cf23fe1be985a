package collector

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/routing"
	"github.com/fos-study/vllm-normalizer/window"
)

// The one place that turns the canonical page into the diagnosis'
// Observations: one per model_name, engines and processes collapsed. It
// reads the families that play the roles the diagnosis needs, by their
// canonical names (mapping.Roles), whatever the server.
//
// Counters are corrected for resets per upstream series, before summing:
// a restart of one engine must not look like a drop of the model's total.
// Each model keeps running totals that only grow, by what each of its
// series counted since the last scrape (window.Increases); a series seen
// for the first time adds nothing, so that an engine appearing with a long
// history is no sudden burst.

// diagnosisCounters are the counter inputs the diagnosis reads, taken
// from the one table of them (mapping.Counter), each with the Observation
// field it fills. The buckets fill the histograms.
var diagnosisCounters = []struct {
	c   mapping.Counter
	set func(o *diagnosis.Observation, v float64)
}{
	{mapping.CounterPreemptions, func(o *diagnosis.Observation, v float64) { o.Preemptions = v }},
	{mapping.CounterPrefixCacheQueries, func(o *diagnosis.Observation, v float64) { o.PrefixQueries = v }},
	{mapping.CounterPrefixCacheHits, func(o *diagnosis.Observation, v float64) { o.PrefixHits = v }},
	{mapping.CounterPromptTokens, func(o *diagnosis.Observation, v float64) { o.PromptTokens = v }},
	{mapping.CounterGenerationTokens, func(o *diagnosis.Observation, v float64) { o.GenerationTokens = v }},
	{mapping.CounterRequestPromptTokensSum, func(o *diagnosis.Observation, v float64) { o.PromptLenSum = v }},
	{mapping.CounterRequestPromptTokensCount, func(o *diagnosis.Observation, v float64) { o.PromptLenCount = v }},
	{mapping.CounterRequestGenerationTokensSum, func(o *diagnosis.Observation, v float64) { o.GenLenSum = v }},
	{mapping.CounterRequestGenerationTokensCount, func(o *diagnosis.Observation, v float64) { o.GenLenCount = v }},
	{mapping.CounterRequestsFinished, func(o *diagnosis.Observation, v float64) { o.Finished = v }},
	{mapping.CounterKVTransferFailures, func(o *diagnosis.Observation, v float64) { o.KVTransferFailures = v }},
	{mapping.CounterAdmissionRejections, func(o *diagnosis.Observation, v float64) { o.Rejections = v }},
}

// diagnosisSums are the latency histograms' sums, with the Observation
// field each fills: over the buckets' count, the exact mean latency. Only
// the diagnosis reads them, so they are not in the table of counter inputs
// (every windowed reader of a role would keep them); their keys follow it.
var diagnosisSums = [...]struct {
	role mapping.Role
	set  func(o *diagnosis.Observation, v float64)
}{
	{mapping.RoleTTFT, func(o *diagnosis.Observation, v float64) { o.TTFTSum = v }},
	{mapping.RoleInterTokenLatency, func(o *diagnosis.Observation, v float64) { o.ITLSum = v }},
}

// sumKey is the window key of diagnosisSums[i].
func sumKey(i int) window.Key { return window.Key(mapping.NumCounters) + window.Key(i) }

// diagnosisBuckets are the histogram inputs, with the Observation field
// each fills.
var diagnosisBuckets = []struct {
	c     mapping.Counter
	input string // the diagnosis' name of it, for Observation.Withheld
	get   func(o *diagnosis.Observation) *diagnosis.Histogram
}{
	{mapping.CounterTTFTBuckets, diagnosis.InputTTFT, func(o *diagnosis.Observation) *diagnosis.Histogram { return &o.TTFT }},
	{mapping.CounterInterTokenLatencyBuckets, diagnosis.InputITL, func(o *diagnosis.Observation) *diagnosis.Histogram { return &o.ITL }},
	{mapping.CounterKVTransferTimeBuckets, diagnosis.InputKVTransferTime, func(o *diagnosis.Observation) *diagnosis.Histogram { return &o.KVTransferTime }},
}

// diagnosisInputNames names each diagnosis input by the canonical family
// that carries it, for the page's "this server does not print ...".
func diagnosisInputNames(roles *mapping.Roles) map[string]string {
	out := map[string]string{}
	for key, rs := range map[string][]mapping.Role{
		diagnosis.InputFinished:           {mapping.RoleRequestsFinished},
		diagnosis.InputTTFT:               {mapping.RoleTTFT},
		diagnosis.InputITL:                {mapping.RoleInterTokenLatency},
		diagnosis.InputPreemptions:        {mapping.RolePreemptions},
		diagnosis.InputPrefixCache:        {mapping.RolePrefixCacheQueries, mapping.RolePrefixCacheHits},
		diagnosis.InputPromptTokens:       {mapping.RolePromptTokens},
		diagnosis.InputGenerationTokens:   {mapping.RoleGenerationTokens},
		diagnosis.InputRunning:            {mapping.RoleRequestsRunning},
		diagnosis.InputWaiting:            {mapping.RoleRequestsWaiting},
		diagnosis.InputKVUsage:            {mapping.RoleKVCacheUsage},
		diagnosis.InputKVTransferTime:     {mapping.RoleKVTransferTime},
		diagnosis.InputKVTransferFailures: {mapping.RoleKVTransferFailures},
		diagnosis.InputRejections:         {mapping.RoleAdmissionRejections},
	} {
		var names []string
		for _, r := range rs {
			if n := roles.Family(r); n != "" {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			out[key] = strings.Join(names, " and ")
		}
	}
	return out
}

// diagnosisNames are the canonical sample names of the inputs, keyed by
// their mapping.Counter; window.Inputs works out every family name they
// may come in.
func diagnosisNames(roles *mapping.Roles) *window.Inputs {
	by := map[string]window.Input{}
	add := func(c mapping.Counter) {
		if roles.Family(c.Role()) != "" {
			by[roles.Sample(c.Role(), c.Part())] = window.Input{Key: window.Key(c)}
		}
	}
	for _, d := range diagnosisCounters {
		add(d.c)
	}
	for _, d := range diagnosisBuckets {
		add(d.c)
	}
	for i, d := range diagnosisSums {
		if name := roles.Sample(d.role, mapping.PartSum); roles.Family(d.role) != "" && name != "" {
			by[name] = window.Input{Key: sumKey(i)}
		}
	}
	return window.NewInputs(by)
}

// diagnosisInput keeps the reset-correction state between scrapes. Scrapes
// are serialised, so it needs no lock.
type diagnosisInput struct {
	names  *window.Inputs
	series *window.Increases
	models map[string]*modelTotals
	// pending are this scrape's bucket samples, observed once the page
	// shows every child of their histogram with +Inf.
	pending []pendingBucket
}

// pendingBucket is one bucket sample, not yet observed.
type pendingBucket struct {
	p    *present
	tot  *modelTotals
	c    mapping.Counter
	le   float64
	lbls labels.Labels
	v    float64
}

// present is what one scrape printed of a model's diagnosis inputs.
type present struct {
	c    [mapping.NumCounters]bool
	sums [len(diagnosisSums)]bool
	h    map[mapping.Counter][]float64 // bounds seen this round
	// hn counts the samples at each bound of h: a bound printed by more
	// children than +Inf means a child without +Inf (noInf).
	hn    [mapping.NumCounters][]int
	noInf [mapping.NumCounters]bool
	// reasons: the finished requests came with a finished reason,
	// so those without the abort one are known not aborted.
	reasons bool
	// engines printing the finished counter this round
	engines map[string]bool
}

// modelTotals are a model's reset-corrected running totals, by counter
// input (buckets per bound).
type modelTotals struct {
	c    [mapping.NumCounters]float64
	sums [len(diagnosisSums)]float64
	h    map[mapping.Counter]map[float64]float64
	// aborted is the finished requests with the abort reason, a part
	// of c[mapping.CounterRequestsFinished].
	aborted float64
	// engineFinished is c[mapping.CounterRequestsFinished] by engine
	// label value, for the rank finding's requests each rank was sent.
	engineFinished map[string]float64
}

// forgetAfter is how many scrapes a vanished series' state is kept, so
// that a series missing from one page is not taken for a new one.
const forgetAfter = 64

// forget drops the totals kept for model (the series' state goes by
// itself after forgetAfter scrapes).
func (in *diagnosisInput) forget(model string) { delete(in.models, model) }

// observations returns one Observation per model on the canonical page.
// gauges are the routing view's collapsed running, waiting and KV usage
// per model, as values; server is the kind of server that printed the page,
// role the pod's role as the diagnosis reads it (mapping.PodRole.DiagnosisRole).
func (in *diagnosisInput) observations(canon []exposition.Family, gauges map[string]routing.ModelGauges, roles *mapping.Roles, server, role string) []diagnosis.Observation {
	if in.series == nil {
		in.series, in.models = window.NewIncreases(forgetAfter), map[string]*modelTotals{}
		in.names = diagnosisNames(roles)
	}
	in.series.Next()
	seen := map[string]*present{}
	get := func(m string) *present {
		p := seen[m]
		if p == nil {
			p = &present{h: map[mapping.Counter][]float64{}}
			seen[m] = p
		}
		return p
	}
	in.pending = in.pending[:0]
	// The last sample's name, model and histogram, looked up again only
	// when they change: a family's samples share a few names and, on one
	// engine, one model (a third of this function's CPU was these map
	// lookups, BenchmarkDiagnosisInput's profile).
	var (
		lastName, lastModel string
		lastInput           window.Input
		lastOK, haveName    bool
		lastTot             *modelTotals
		lastP               *present
	)
	forModel := func(m string) (*modelTotals, *present) {
		if lastTot == nil || m != lastModel {
			lastModel, lastTot, lastP = m, in.totals(m), get(m)
		}
		return lastTot, lastP
	}
	for fi := range canon {
		f := &canon[fi]
		if !in.names.Family(f.Name) {
			continue
		}
		for si := range f.Samples {
			s := &f.Samples[si]
			if name := s.Name(); !haveName || name != lastName {
				lastName, haveName = name, true
				lastInput, lastOK = in.names.Sample(name)
			}
			input, ok := lastInput, lastOK
			v := s.Value
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			if input.Key >= sumKey(0) {
				d, _ := in.series.Observe(s.Labels, v)
				i := int(input.Key - sumKey(0))
				tot, p := forModel(s.Labels.Get(mapping.LabelModel))
				p.sums[i] = true
				tot.sums[i] += d
				continue
			}
			c := mapping.Counter(input.Key)
			le := 0.0
			if c.Part() == mapping.PartBucket {
				b, err := strconv.ParseFloat(s.Labels.Get(model.BucketLabel), 64)
				if err != nil || math.IsNaN(b) {
					continue
				}
				le = b
			}
			tot, p := forModel(s.Labels.Get(mapping.LabelModel))
			if c.Part() == mapping.PartBucket {
				p.countBound(c, le)
				in.pending = append(in.pending, pendingBucket{p, tot, c, le, s.Labels, v})
				continue
			}
			d, _ := in.series.Observe(s.Labels, v)
			tot.c[c] += d
			p.c[c] = true
			if c == mapping.CounterRequestsFinished {
				if e := s.Labels.Get(mapping.LabelEngine); e != "" {
					if tot.engineFinished == nil {
						tot.engineFinished = map[string]float64{}
					}
					if p.engines == nil {
						p.engines = map[string]bool{}
					}
					tot.engineFinished[e] += d
					p.engines[e] = true
				}
				if reason := s.Labels.Get(mapping.LabelFinishedReason); reason != "" {
					p.reasons = true
					if reason == mapping.FinishedReasonAbort {
						tot.aborted += d
					}
				}
			}
		}
	}
	for m := range gauges {
		get(m)
	}
	// A histogram with a child printed without +Inf has no total count:
	// its model's buckets are not given, as a sum by bound would be
	// divided by the other children's total, and not observed, so that
	// each bucket's next increase spans the same scrapes as +Inf's.
	for _, p := range seen {
		for c, bounds := range p.h {
			inf := 0
			if i := slices.IndexFunc(bounds, func(le float64) bool { return math.IsInf(le, 1) }); i >= 0 {
				inf = p.hn[c][i]
			}
			p.noInf[c] = slices.Max(p.hn[c]) > inf
		}
	}
	for _, b := range in.pending {
		if b.p.noInf[b.c] {
			continue
		}
		d, _ := in.series.Observe(b.lbls, b.v)
		if b.tot.h[b.c] == nil {
			b.tot.h[b.c] = map[float64]float64{}
		}
		b.tot.h[b.c][b.le] += d
	}
	clear(in.pending) // the page's labels go with its scrape

	ranks := engineLoads(canon, roles)
	out := make([]diagnosis.Observation, 0, len(seen))
	for m, p := range seen {
		o := diagnosis.Observation{Model: m, Server: server, Running: math.NaN(), Waiting: math.NaN(), KVUsage: math.NaN(),
			Role: role, Engines: ranks[m]}
		if g, ok := gauges[m]; ok {
			o.Running, o.Waiting, o.KVUsage = g.Running, g.Waiting, g.KVUsage
		}
		tot := in.models[m]
		for _, dc := range diagnosisCounters {
			v := math.NaN()
			if tot != nil && p.c[dc.c] {
				v = tot.c[dc.c]
			}
			dc.set(&o, v)
		}
		for i, ds := range diagnosisSums {
			v := math.NaN()
			if tot != nil && p.sums[i] {
				v = tot.sums[i]
			}
			ds.set(&o, v)
		}
		o.Aborted = math.NaN()
		if tot != nil && p.reasons {
			o.Aborted = tot.aborted
		}
		if tot != nil && len(p.engines) > 0 && len(o.Engines) > 0 {
			for i := range o.Engines {
				if e := &o.Engines[i]; p.engines[e.Engine] {
					e.Finished, e.Counted = tot.engineFinished[e.Engine], true
				}
			}
		}
		for _, db := range diagnosisBuckets {
			switch {
			case p.noInf[db.c]:
				o.Withheld = append(o.Withheld, db.input)
			case tot != nil:
				*db.get(&o) = histogramOf(p.h[db.c], tot.h[db.c])
			}
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b diagnosis.Observation) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// totals are model's running totals, made on first use.
func (in *diagnosisInput) totals(model string) *modelTotals {
	tot := in.models[model]
	if tot == nil {
		tot = &modelTotals{h: map[mapping.Counter]map[float64]float64{}}
		in.models[model] = tot
	}
	return tot
}

// engineLoads are each model's data-parallel engines (engine label values)
// with their requests running and waiting, summed over the processes that
// print them; an engine lacking either gauge is left out.
func engineLoads(canon []exposition.Family, roles *mapping.Roles) map[string][]diagnosis.EngineLoad {
	running, waiting := roles.Family(mapping.RoleRequestsRunning), roles.Family(mapping.RoleRequestsWaiting)
	type key struct{ model, engine string }
	type rw struct {
		r, w       float64
		hasR, hasW bool
	}
	by := map[key]*rw{}
	var order []key
	for fi := range canon {
		f := &canon[fi]
		isR, isW := f.Name == running && running != "", f.Name == waiting && waiting != ""
		if !isR && !isW {
			continue
		}
		for _, s := range f.Samples {
			e := s.Labels.Get(mapping.LabelEngine)
			if e == "" || s.Name() != f.Name || math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				continue
			}
			k := key{s.Labels.Get(mapping.LabelModel), e}
			v := by[k]
			if v == nil {
				v = &rw{}
				by[k] = v
				order = append(order, k)
			}
			if isR {
				v.r, v.hasR = v.r+s.Value, true
			} else {
				v.w, v.hasW = v.w+s.Value, true
			}
		}
	}
	out := map[string][]diagnosis.EngineLoad{}
	for _, k := range order {
		if v := by[k]; v.hasR && v.hasW {
			out[k.model] = append(out[k.model], diagnosis.EngineLoad{Engine: k.engine, Running: v.r, Waiting: v.w})
		}
	}
	return out
}

// countBound counts one sample at bound le of histogram c, keeping p.h[c]
// sorted without duplicates and p.hn[c] beside it: the buckets come in
// order, so le nearly always goes at the end, found by a binary search
// rather than a scan of every bound (BenchmarkDiagnosisInput's profile).
func (p *present) countBound(c mapping.Counter, le float64) {
	if p.h[c] == nil {
		// Sized for vLLM's latency layouts at once, not regrown.
		p.h[c], p.hn[c] = make([]float64, 0, 32), make([]int, 0, 32)
	}
	i, found := slices.BinarySearch(p.h[c], le)
	if !found {
		p.h[c] = slices.Insert(p.h[c], i, le)
		p.hn[c] = slices.Insert(p.hn[c], i, 0)
	}
	p.hn[c][i]++
}

func histogramOf(bounds []float64, totals map[float64]float64) diagnosis.Histogram {
	if len(bounds) == 0 {
		return diagnosis.Histogram{}
	}
	slices.Sort(bounds)
	h := diagnosis.Histogram{Bounds: bounds, Counts: make([]float64, len(bounds))}
	for i, le := range bounds {
		h.Counts[i] = totals[le]
	}
	return h
}
