package diagnosis

import (
	"math"
	"slices"

	"github.com/fos-study/vllm-normalizer/quantile"
)

// Signal names: the values of the signal label, a public contract.
const (
	SignalTTFTP90              = "ttft_p90"
	SignalITLP90               = "itl_p90"
	SignalGenerationTokensPerS = "generation_tokens_per_second"
	SignalWaiting              = "waiting"
	SignalRunning              = "running"
	SignalKVCacheUsage         = "kv_cache_usage"
	SignalPreemptionsPerSecond = "preemptions_per_second"
	SignalPromptTokensMean     = "prompt_tokens_mean"
	SignalGenerationTokensMean = "generation_tokens_mean"
	SignalPrefixCacheHitRatio  = "prefix_cache_hit_ratio"
	SignalTTFTMean             = "ttft_mean"
	SignalITLMean              = "itl_mean"
	numSignals                 = 12
	// testedSignals is what each test's level is divided by (Bonferroni):
	// the ten signals of the triage. The two exact means are a second
	// reading of the latency symptoms the quantiles test, each at the
	// quantile's level (docs/diagnosis.md, "The tests").
	testedSignals = 10
	// numDispersed are the statistics whose dispersion factor and
	// sub-windows' range a baseline keeps: the signals, and after them the
	// share of attempts refused at admission (dRefused), a topology
	// signal whose refusals come in the pod's bursts (a queue at its cap),
	// and the requests started per second (dStarted), the arrivals the
	// pod's bursts brought that its baseline served without a queue, and
	// the ranks' spread (dRank, rankSpread), whose sticky sessions keep one
	// rank queueing for minutes as the pod's normal
	numDispersed   = numSignals + 3
	dRefused       = numSignals
	dStarted       = numSignals + 1
	dRank          = numSignals + 2
	signalQuantile = 0.9
	nanosPerSecond = 1e9
)

// Indexes of the signals, in the order the steps read them.
const (
	sTTFT = iota
	sITL
	sGenTPS
	sWaiting
	sRunning
	sKV
	sPreempt
	sPromptMean
	sGenMean
	sHitRatio
	// the exact means of the latency histograms (sum / count): a rise
	// inside one of vLLM's wide buckets, which the quantiles cannot read
	sTTFTMean
	sITLMean
)

// signalInfo describes each signal for the outputs.
var signalInfo = [numSignals]struct {
	name, unit, what string
}{
	sTTFT:       {SignalTTFTP90, "s", "time to first token, 90th percentile"},
	sITL:        {SignalITLP90, "s", "inter-token latency, 90th percentile"},
	sGenTPS:     {SignalGenerationTokensPerS, "tokens/s", "generated tokens per second"},
	sWaiting:    {SignalWaiting, "requests", "requests waiting, mean"},
	sRunning:    {SignalRunning, "requests", "requests running, mean"},
	sKV:         {SignalKVCacheUsage, "ratio", "KV-cache usage, mean"},
	sPreempt:    {SignalPreemptionsPerSecond, "1/s", "preemptions per second"},
	sPromptMean: {SignalPromptTokensMean, "tokens", "prompt tokens per finished request"},
	sGenMean:    {SignalGenerationTokensMean, "tokens", "generated tokens per finished request"},
	sHitRatio:   {SignalPrefixCacheHitRatio, "ratio", "prefix-cache hit ratio, in tokens"},
	sTTFTMean:   {SignalTTFTMean, "s", "time to first token, exact mean (sum / count)"},
	sITLMean:    {SignalITLMean, "s", "inter-token latency, exact mean (sum / count)"},
}

// stats are the signals between two points of a track, and what their
// tests need: the counts, the bucket increases, the gauges' spread.
type stats struct {
	v        [numSignals]float64 // NaN where undefined
	requests float64             // finished requests; NaN when unknown
	started  float64             // requests started (TTFT observations); NaN when unknown
	seconds  float64
	c        [numCounters]float64 // increases; NaN when unknown
	// h are the histograms' bucket increases (cumulative over bounds),
	// nil when unknown; bounds are the track's at the time.
	h      [numHists][]float64
	bounds [numHists][]float64
	// the gauges' mean, variance and number of observations
	gMean, gVar, gN [numGauges]float64
	// phi is each signal's dispersion factor, for a baseline (dispersion.go):
	// its tests are widened by it; 0 (a recent window's) counts as 1.
	// phiWindows is how many sub-windows it was measured on.
	phi        [numDispersed]float64
	phiWindows int
	// rankSentPhi is the ranks' spread of the requests each was sent
	// (rankSpread), beside phi[dRank] of their loads; 0 counts as 1.
	rankSentPhi float64
	// phiSplit: phi was measured on sub-windows shorter than the recent
	// window (a baseline shorter than MinDispersionWindows of them)
	phiSplit bool
	// subLo and subHi are the least and greatest of each signal's
	// statistic over those sub-windows (beyondRange); NaN when unknown.
	subLo, subHi [numDispersed]float64
	// The refused share over the sub-windows merged refusalSpans[j] at a
	// time (sustainedRefusals): its dispersion factor and greatest value,
	// known when longWindows[j] >= MinDispersionWindows.
	longPhi, longHi [len(refusalSpans)]float64
	longWindows     [len(refusalSpans)]int
}

// nanStats is a stats with nothing known.
func nanStats() stats {
	var s stats
	for i := range s.v {
		s.v[i] = math.NaN()
	}
	for i := range s.c {
		s.c[i] = math.NaN()
	}
	s.requests, s.started = math.NaN(), math.NaN()
	return s
}

// clone returns a copy sharing nothing that the track reuses.
func (s *stats) clone() stats {
	out := *s
	for i := range s.h {
		out.h[i] = slices.Clone(s.h[i])
	}
	return out
}

// cloned is clone in memory of its own.
// refusals are the requests s's window refused at admission and its
// attempts (refused or started): the share every refusal test reads.
func (s *stats) refusals() (refused, attempts float64) {
	return s.c[cRejections], s.c[cRejections] + s.started
}

func (s *stats) cloned() *stats {
	out := s.clone()
	return &out
}

// between computes the signals from point a to the later point b.
func between(tr *track, a, b *point) stats {
	sv := nanStats()
	sv.seconds = float64(b.t-a.t) / nanosPerSecond
	for i := range sv.c {
		sv.c[i] = inc(a, b, i)
	}
	sv.requests = sv.c[cFinished]
	if sv.seconds <= 0 {
		return sv
	}
	for w := range numHists {
		bounds := tr.bounds[w]
		ha, hb := a.h[w], b.h[w]
		if ha == nil || hb == nil || len(ha) != len(bounds) || len(hb) != len(bounds) {
			continue
		}
		d := make([]float64, len(bounds))
		ok := true
		for i := range bounds {
			d[i] = hb[i] - ha[i]
			ok = ok && d[i] >= 0
		}
		if ok {
			sv.h[w], sv.bounds[w] = d, bounds
		}
	}
	sv.v[sTTFT] = histQuantile(sv.bounds[hTTFT], sv.h[hTTFT], signalQuantile)
	sv.v[sITL] = histQuantile(sv.bounds[hITL], sv.h[hITL], signalQuantile)
	// the exact mean latencies: the sums over the observations counted
	sv.v[sTTFTMean] = ratio(sv.c[cTTFTSum], total(sv.h[hTTFT]))
	sv.v[sITLMean] = ratio(sv.c[cITLSum], total(sv.h[hITL]))
	sv.v[sGenTPS] = sv.c[cGenerationTokens] / sv.seconds
	sv.v[sPreempt] = sv.c[cPreemptions] / sv.seconds
	if h := sv.h[hTTFT]; h != nil {
		sv.started = h[len(h)-1]
	}
	// Lengths per finished request, from the per-request length
	// histograms' sum and count (observed as each request ends): the token
	// counters grow as tokens are processed and requests start in bursts,
	// so tokens per request started swing with every burst of starts
	// (12x where the outputs were 0.75x, issue 30). Without the prompt
	// histogram, prompt tokens per request started (a prompt is processed
	// as its first token comes, when its TTFT is observed); without the
	// generation one, the output length is unknown.
	sv.v[sPromptMean] = ratio(sv.c[cPromptLenSum], sv.c[cPromptLenCount])
	if math.IsNaN(sv.c[cPromptLenCount]) && sv.started > 0 {
		sv.v[sPromptMean] = ratio(sv.c[cPromptTokens], sv.started)
	}
	sv.v[sGenMean] = ratio(sv.c[cGenLenSum], sv.c[cGenLenCount])
	sv.v[sHitRatio] = ratio(sv.c[cPrefixHits], sv.c[cPrefixQueries])
	for i, s := range [numGauges]int{gRunning: sRunning, gWaiting: sWaiting, gKVUsage: sKV} {
		n := b.gn[i] - a.gn[i]
		sv.gN[i] = n
		m := ratio(b.gsum[i]-a.gsum[i], n)
		sv.gMean[i], sv.v[s] = m, m
		if n > 1 {
			sv.gVar[i] = math.Max(((b.gsq[i]-a.gsq[i])-n*m*m)/(n-1), 0)
		}
	}
	return sv
}

// inc is a counter's increase from a to b; NaN when either lacks it. The
// caller corrects resets, so a decrease is not expected; it is treated as
// unknown rather than as a negative rate.
func inc(a, b *point, c int) float64 {
	d := b.c[c] - a.c[c]
	if d < 0 {
		return math.NaN()
	}
	return d
}

// ratio is num/den, NaN when den is not positive or either is unknown.
func ratio(num, den float64) float64 {
	if !(den > 0) || math.IsNaN(num) {
		return math.NaN()
	}
	return num / den
}

// histQuantile is the q-quantile of bucket increases, NaN without any.
func histQuantile(bounds, h []float64, q float64) float64 {
	if h == nil || len(h) != len(bounds) {
		return math.NaN()
	}
	bs := make([]quantile.Bucket, len(bounds))
	for i, le := range bounds {
		bs[i] = quantile.Bucket{UpperBound: le, Count: h[i]}
	}
	return quantile.Estimate(q, bs)
}

// countAbove is how many of the observations in bucket increases h lie
// above x, interpolating linearly inside the bucket that holds x, as
// histogram_quantile does (the first bucket starts at 0). Above the last
// finite bound everything counts as above.
func countAbove(bounds, h []float64, x float64) float64 {
	n := len(h)
	if n == 0 || len(bounds) != n {
		return math.NaN()
	}
	i := stopBucket(bounds, x)
	below, in := 0.0, 0.0
	if i > 0 {
		below = h[i-1]
	}
	if i < n {
		in = h[i]
	}
	return aboveIn(bounds, i, below, in, h[n-1], x)
}

// stopBucket is the bucket countAbove interpolates x in: the first whose
// bound is above x, or +Inf; len(bounds) when none is.
func stopBucket(bounds []float64, x float64) int {
	for i, le := range bounds {
		if math.IsInf(le, 1) || x < le {
			return i
		}
	}
	return len(bounds)
}

// aboveIn is countAbove from the three cumulative counts it reads: below
// bucket i (stopBucket's for x), in it, and in all, so that a reader can
// keep those three instead of the buckets.
func aboveIn(bounds []float64, i int, below, in, all, x float64) float64 {
	if i >= len(bounds) || math.IsInf(bounds[i], 1) {
		return all - below
	}
	lower, frac := 0.0, 0.0
	if i > 0 {
		lower = bounds[i-1]
	}
	if x > lower {
		frac = (x - lower) / (bounds[i] - lower)
	}
	return all - (below + frac*(in-below))
}

// histMoments are the mean and variance of the observations in bucket
// increases h, each taken at its bucket's midpoint (the last finite bound
// for the +Inf bucket); ok is false without observations.
func histMoments(bounds, h []float64) (mean, variance float64, ok bool) {
	n := len(h)
	if n == 0 || len(bounds) != n || !(h[n-1] > 0) {
		return 0, 0, false
	}
	lower, prev, s, s2 := 0.0, 0.0, 0.0, 0.0
	for i, le := range bounds {
		mid := (lower + le) / 2
		if math.IsInf(le, 1) {
			mid = lower
		}
		c := h[i] - prev
		s += c * mid
		s2 += c * mid * mid
		lower, prev = le, h[i]
	}
	mean = s / h[n-1]
	return mean, math.Max(s2/h[n-1]-mean*mean, 0), true
}

// histVarBound is the largest variance per observation that bucket
// increases h and their exact sum allow: every observation at its bucket's
// lower bound, then the rest of the sum given to the highest buckets first
// (each observation moved up to its bucket's upper bound adds most to the
// squares there; past the last finite bound, to one observation). Never
// below the truth, so a test reading it is conservative; NaN without
// observations.
func histVarBound(bounds, h []float64, sum float64) float64 {
	n := len(h)
	if n == 0 || len(bounds) != n || !(h[n-1] > 0) || math.IsNaN(sum) {
		return math.NaN()
	}
	s0, q := 0.0, 0.0
	lower, prev := 0.0, 0.0
	for i, le := range bounds {
		c := h[i] - prev
		s0 += c * lower
		q += c * lower * lower
		lower, prev = le, h[i]
	}
	rest := math.Max(sum-s0, 0)
	for i := n - 1; i >= 0 && rest > 0; i-- {
		c := h[i]
		lo := 0.0
		if i > 0 {
			c -= h[i-1]
			lo = bounds[i-1]
		}
		if !(c > 0) {
			continue
		}
		if math.IsInf(bounds[i], 1) {
			q += (lo+rest)*(lo+rest) - lo*lo
			rest = 0
			break
		}
		t := math.Min(rest, c*(bounds[i]-lo))
		q += t * (bounds[i] + lo)
		rest -= t
	}
	if rest > 1e-9*sum {
		return math.NaN() // a sum the buckets cannot hold: no bound
	}
	mean := sum / h[n-1]
	return math.Max(q/h[n-1]-mean*mean, 0)
}

// quantileBucket is the bucket (lower, upper] that holds the q-quantile of
// bucket increases h, as histQuantile finds it: the quantile is somewhere
// in it, wherever the interpolation puts it. The first bucket starts at 0;
// a quantile past the last finite bound has no upper bound (+Inf).
func quantileBucket(bounds, h []float64, q float64) (lower, upper float64, ok bool) {
	n := len(h)
	if n < 2 || len(bounds) != n || !(h[n-1] > 0) {
		return 0, 0, false
	}
	rank := q * h[n-1]
	for i := range n - 1 {
		if h[i] >= rank {
			if i > 0 {
				lower = bounds[i-1]
			}
			return lower, bounds[i], true
		}
	}
	return bounds[n-2], math.Inf(1), true
}

// quantileRatioRange is the lowest and the highest recent/baseline ratio
// of a quantile that the buckets allow: each quantile lies anywhere in its
// bucket (lower, upper], so from the recent lower bound over the baseline
// upper one to the recent upper over the baseline lower (0 and +Inf where
// a bound is 0 or +Inf). NaN, NaN when either window has no observations.
func quantileRatioRange(rb, rh, bb, bh []float64, q float64) (low, high float64) {
	rl, ru, ok1 := quantileBucket(rb, rh, q)
	bl, bu, ok0 := quantileBucket(bb, bh, q)
	if !ok1 || !ok0 {
		return math.NaN(), math.NaN()
	}
	low, high = 0, math.Inf(1)
	if rl > 0 && !math.IsInf(bu, 1) {
		low = rl / bu
	}
	if bl > 0 && !math.IsInf(ru, 1) {
		high = ru / bl
	}
	return low, high
}
