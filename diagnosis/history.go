package diagnosis

import (
	"math"
	"slices"
)

// Every value a point keeps is cumulative (counters as observed, gauges as
// running sums and counts of their observations), so the value of any
// signal between two points is a difference of the two, whichever ring they
// come from. That is what makes downsampling lossless for window aggregates:
// a slot only needs its newest observation.

// Indexes of the cumulative counters of a point.
const (
	cPreemptions = iota
	cPrefixQueries
	cPrefixHits
	cPromptTokens
	cGenerationTokens
	cPromptLenSum
	cPromptLenCount
	cGenLenSum
	cGenLenCount
	cFinished
	cKVFailures
	cRejections
	cAborted
	cTTFTSum
	cITLSum
	numCounters
)

// Indexes of the gauges whose observations are summed.
const (
	gRunning = iota
	gWaiting
	gKVUsage
	numGauges
)

// point is the cumulative state of one model at one observation.
type point struct {
	t int64 // nanoseconds since the Diagnoser's first observation
	// gsum and gn are the running sum and number of each gauge's
	// observations since the model was first seen.
	gsum, gsq, gn [numGauges]float64
	c             [numCounters]float64 // NaN when the upstream lacks the counter
	// h are the histograms' cumulative bucket counts aligned with the
	// track's bounds; nil when the histogram was absent.
	h [numHists][]float64
}

// gap is a stretch without observations: from the last one before it to
// the first one after it.
type gap struct{ from, to int64 }

// unobserved is how much of (start, end] the track's gaps cover.
func (tr *track) unobserved(start, end int64) int64 {
	var n int64
	for _, g := range tr.gaps {
		n += max(0, min(g.to, end)-max(g.from, start))
	}
	return n
}

func slotOf(t, res int64) int64 {
	if t >= 0 {
		return t / res
	}
	return (t - res + 1) / res
}

// track is the history of one model: a fine ring covering the recent window
// and a coarse one covering the baseline before it.
type track struct {
	gsum, gsq, gn [numGauges]float64
	bounds        [numHists][]float64
	fine          ring
	coarse        ring
	chart         ring      // the charts' span, when longer than the baseline's
	memo          *walkMemo // the baseline's sub-windows' ends, nil if none kept (dispersion.go)
	lastT         int64
	firstT        int64
	since         int64 // the first observation after the latest gap
	gaps          []gap // over the windows' span, oldest first
	server        string
	missing       []string // inputs the latest observation lacked
	inc           incidentState
	free          incidentFree // the incident-free time (baseline.go)
	findings      findingTime  // the topology findings' own reference time (baseline.go)
	stalled       bool         // the incident-free time closed at a stall (Diagnoser.stall)
	withheld      uint8        // the latest observation's Withheld, a bit by histogram (histInputs)
	topo          topoState
}

// observe folds o, taken at t, into the track.
func (tr *track) observe(t int64, o *Observation) {
	gauges := [numGauges]float64{o.Running, o.Waiting, o.KVUsage}
	for i, v := range gauges {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			tr.gsum[i] += v
			tr.gsq[i] += v * v
			tr.gn[i]++
		}
	}
	p := point{t: t, gsum: tr.gsum, gsq: tr.gsq, gn: tr.gn}
	p.c = [numCounters]float64{
		o.Preemptions, o.PrefixQueries, o.PrefixHits, o.PromptTokens, o.GenerationTokens,
		o.PromptLenSum, o.PromptLenCount, o.GenLenSum, o.GenLenCount, o.Finished, o.KVTransferFailures,
		o.Rejections, o.Aborted, o.TTFTSum, o.ITLSum,
	}
	for i, v := range p.c {
		if math.IsInf(v, 0) {
			p.c[i] = math.NaN()
		}
	}
	for i, h := range [numHists]Histogram{hTTFT: o.TTFT, hITL: o.ITL, hPromptLen: o.PromptLen, hGenLen: o.GenLen, hKVTransfer: o.KVTransferTime} {
		p.h[i] = tr.histogram(i, h)
	}
	tr.fine.add(&p)
	tr.coarse.add(&p)
	if tr.chart.res > 0 {
		tr.chart.add(&p)
	}
	tr.lastT = t
	tr.server = o.Server
	tr.missing = missingInputs(o)
	tr.withheld = 0
	for i, k := range histInputs {
		if k != "" && slices.Contains(o.Withheld, k) {
			tr.withheld |= 1 << i
		}
	}
	tr.topo.observe(t, o, tr.fine.res, tr.coarse.res)
}

// Which histogram of a point.
const (
	hTTFT = iota
	hITL
	hPromptLen
	hGenLen
	hKVTransfer
	numHists
)

// histInputs are the inputs (Input* keys) the histograms come from, where
// one can be withheld (Observation.Withheld).
var histInputs = [numHists]string{hTTFT: InputTTFT, hITL: InputITL, hKVTransfer: InputKVTransferTime}

// isWithheld reports whether the latest observation withheld input k.
func (tr *track) isWithheld(k string) bool {
	i := slices.Index(histInputs[:], k)
	return k != "" && i >= 0 && tr.withheld&(1<<i) != 0
}

// histogram returns h's counts when h is usable. When the bounds change
// (another vLLM version behind the port), that histogram's history starts
// over: older counts can no longer be subtracted from the new ones.
func (tr *track) histogram(which int, h Histogram) []float64 {
	if !validHistogram(h) {
		return nil
	}
	if b := &tr.bounds[which]; !slices.Equal(*b, h.Bounds) {
		*b = slices.Clone(h.Bounds)
		for _, r := range []*ring{&tr.fine, &tr.coarse, &tr.chart} {
			r.dropHistogram(which)
		}
		tr.memo = nil // its ends read the histogram at the old bounds
	}
	return h.Counts
}

func validHistogram(h Histogram) bool {
	n := len(h.Bounds)
	if n < 2 || len(h.Counts) != n || !math.IsInf(h.Bounds[n-1], 1) {
		return false
	}
	for i := 1; i < n; i++ {
		if !(h.Bounds[i] > h.Bounds[i-1]) {
			return false
		}
	}
	for _, c := range h.Counts {
		if math.IsNaN(c) || math.IsInf(c, 0) {
			return false
		}
	}
	return true
}
