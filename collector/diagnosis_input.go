package collector

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"

	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
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

// Diagnosis inputs, by the role and part that carries them.
const (
	dcPreemptions = iota
	dcPrefixQueries
	dcPrefixHits
	dcPromptTokens
	dcGenerationTokens
	dcPromptLenSum
	dcPromptLenCount
	dcGenLenSum
	dcGenLenCount
	dcFinished
	dcTTFTBucket
	dcITLBucket
	dcPromptLenBucket
	dcGenLenBucket
	numDiagnosisInputs
)

var diagnosisRoles = [numDiagnosisInputs]struct {
	role mapping.Role
	part mapping.Part
}{
	dcPreemptions:      {mapping.RolePreemptions, mapping.PartValue},
	dcPrefixQueries:    {mapping.RolePrefixCacheQueries, mapping.PartValue},
	dcPrefixHits:       {mapping.RolePrefixCacheHits, mapping.PartValue},
	dcPromptTokens:     {mapping.RolePromptTokens, mapping.PartValue},
	dcGenerationTokens: {mapping.RoleGenerationTokens, mapping.PartValue},
	dcPromptLenSum:     {mapping.RoleRequestPromptTokens, mapping.PartSum},
	dcPromptLenCount:   {mapping.RoleRequestPromptTokens, mapping.PartCount},
	dcGenLenSum:        {mapping.RoleRequestGenerationTokens, mapping.PartSum},
	dcGenLenCount:      {mapping.RoleRequestGenerationTokens, mapping.PartCount},
	dcFinished:         {mapping.RoleRequestsFinished, mapping.PartValue},
	dcTTFTBucket:       {mapping.RoleTTFT, mapping.PartBucket},
	dcITLBucket:        {mapping.RoleInterTokenLatency, mapping.PartBucket},
	dcPromptLenBucket:  {mapping.RoleRequestPromptTokens, mapping.PartBucket},
	dcGenLenBucket:     {mapping.RoleRequestGenerationTokens, mapping.PartBucket},
}

// numBucketInputs is how many inputs are histogram buckets, the last ones.
const numBucketInputs = numDiagnosisInputs - dcTTFTBucket

// diagnosisInputNames names each diagnosis input by the canonical family
// that carries it, for the page's "this server does not print ...".
func diagnosisInputNames(roles *mapping.Roles) map[string]string {
	out := map[string]string{}
	for key, rs := range map[string][]mapping.Role{
		diagnosis.InputFinished:         {mapping.RoleRequestsFinished},
		diagnosis.InputTTFT:             {mapping.RoleTTFT},
		diagnosis.InputITL:              {mapping.RoleInterTokenLatency},
		diagnosis.InputPreemptions:      {mapping.RolePreemptions},
		diagnosis.InputPrefixCache:      {mapping.RolePrefixCacheQueries, mapping.RolePrefixCacheHits},
		diagnosis.InputPromptTokens:     {mapping.RolePromptTokens},
		diagnosis.InputGenerationTokens: {mapping.RoleGenerationTokens},
		diagnosis.InputRunning:          {mapping.RoleRequestsRunning},
		diagnosis.InputWaiting:          {mapping.RoleRequestsWaiting},
		diagnosis.InputKVUsage:          {mapping.RoleKVCacheUsage},
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

// Gauges read from the routing view, which already collapses them the way
// routers see them (running and waiting summed, KV usage by its rule).
var diagnosisGauges = [...]mapping.Role{mapping.RoleRequestsRunning, mapping.RoleRequestsWaiting, mapping.RoleKVCacheUsage}

// diagnosisNames are the canonical sample names of the inputs, keyed by
// input; window.Inputs works out every family name they may come in.
func diagnosisNames(roles *mapping.Roles) *window.Inputs {
	by := map[string]window.Input{}
	for kind, r := range diagnosisRoles {
		if roles.Family(r.role) == "" {
			continue
		}
		by[roles.Sample(r.role, r.part)] = window.Input{Key: window.Key(kind)}
	}
	return window.NewInputs(by)
}

// diagnosisInput keeps the reset-correction state between scrapes. Scrapes
// are serialised, so it needs no lock.
type diagnosisInput struct {
	names  *window.Inputs
	series *window.Increases
	models map[string]*modelTotals
}

// modelTotals are a model's reset-corrected running totals.
type modelTotals struct {
	c [dcTTFTBucket]float64
	h [numBucketInputs]map[float64]float64 // per bucket bound
}

// forgetAfter is how many scrapes a vanished series' state is kept, so
// that a series missing from one page is not taken for a new one.
const forgetAfter = 64

// observations returns one Observation per model on the canonical page.
// view is the routing view of the same page; style is the name style it
// was written in.
func (in *diagnosisInput) observations(canon, view []exposition.Family, roles *mapping.Roles, style func(string) string, server string) []diagnosis.Observation {
	if in.series == nil {
		in.series, in.models = window.NewIncreases(forgetAfter), map[string]*modelTotals{}
		in.names = diagnosisNames(roles)
	}
	in.series.Next()
	type present struct {
		c [dcTTFTBucket]bool
		h [numBucketInputs][]float64 // bounds seen this round
	}
	seen := map[string]*present{}
	get := func(m string) *present {
		p := seen[m]
		if p == nil {
			p = &present{}
			seen[m] = p
		}
		return p
	}
	for fi := range canon {
		f := &canon[fi]
		if !in.names.Family(f.Name) {
			continue
		}
		for si := range f.Samples {
			s := &f.Samples[si]
			input, ok := in.names.Sample(s.Name())
			kind := int(input.Key)
			v := s.Value
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			le := 0.0
			if kind >= dcTTFTBucket {
				b, err := strconv.ParseFloat(s.Labels.Get(model.BucketLabel), 64)
				if err != nil || math.IsNaN(b) {
					continue
				}
				le = b
			}
			d, _ := in.series.Observe(s.Labels, v)
			m := s.Labels.Get(mapping.LabelModel)
			tot := in.models[m]
			if tot == nil {
				tot = &modelTotals{}
				for i := range tot.h {
					tot.h[i] = map[float64]float64{}
				}
				in.models[m] = tot
			}
			p := get(m)
			switch {
			case kind >= dcTTFTBucket:
				tot.h[kind-dcTTFTBucket][le] += d
				p.h[kind-dcTTFTBucket] = appendBound(p.h[kind-dcTTFTBucket], le)
			default:
				tot.c[kind] += d
				p.c[kind] = true
			}
		}
	}
	gauges := map[string]*[3]float64{}
	for gi, role := range diagnosisGauges {
		styled := style(roles.Family(role))
		for fi := range view {
			if view[fi].Name != styled {
				continue
			}
			for _, s := range view[fi].Samples {
				m := s.Labels.Get(mapping.LabelModel)
				g := gauges[m]
				if g == nil {
					g = &[3]float64{math.NaN(), math.NaN(), math.NaN()}
					gauges[m] = g
				}
				g[gi] = s.Value
				get(m)
			}
		}
	}

	out := make([]diagnosis.Observation, 0, len(seen))
	for m, p := range seen {
		o := diagnosis.Observation{Model: m, Server: server, Running: math.NaN(), Waiting: math.NaN(), KVUsage: math.NaN()}
		if g := gauges[m]; g != nil {
			o.Running, o.Waiting, o.KVUsage = g[0], g[1], g[2]
		}
		tot := in.models[m]
		val := func(k int) float64 {
			if tot == nil || !p.c[k] {
				return math.NaN()
			}
			return tot.c[k]
		}
		o.Preemptions, o.PrefixQueries, o.PrefixHits = val(dcPreemptions), val(dcPrefixQueries), val(dcPrefixHits)
		o.PromptTokens, o.GenerationTokens = val(dcPromptTokens), val(dcGenerationTokens)
		o.PromptLenSum, o.PromptLenCount = val(dcPromptLenSum), val(dcPromptLenCount)
		o.GenLenSum, o.GenLenCount = val(dcGenLenSum), val(dcGenLenCount)
		o.Finished = val(dcFinished)
		if tot != nil {
			o.TTFT = histogramOf(p.h[dcTTFTBucket-dcTTFTBucket], tot.h[dcTTFTBucket-dcTTFTBucket])
			o.ITL = histogramOf(p.h[dcITLBucket-dcTTFTBucket], tot.h[dcITLBucket-dcTTFTBucket])
			o.PromptLen = histogramOf(p.h[dcPromptLenBucket-dcTTFTBucket], tot.h[dcPromptLenBucket-dcTTFTBucket])
			o.GenLen = histogramOf(p.h[dcGenLenBucket-dcTTFTBucket], tot.h[dcGenLenBucket-dcTTFTBucket])
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b diagnosis.Observation) int { return strings.Compare(a.Model, b.Model) })
	return out
}

func appendBound(bounds []float64, le float64) []float64 {
	if !slices.Contains(bounds, le) {
		bounds = append(bounds, le)
	}
	return bounds
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
