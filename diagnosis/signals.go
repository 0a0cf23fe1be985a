package diagnosis

import (
	"math"

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
	numSignals                 = 10
	signalQuantile             = 0.9
	nanosPerSecond             = 1e9
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
	sPromptMean: {SignalPromptTokensMean, "tokens", "prompt tokens per request started"},
	sGenMean:    {SignalGenerationTokensMean, "tokens", "generated tokens per request started"},
	sHitRatio:   {SignalPrefixCacheHitRatio, "ratio", "prefix-cache hit ratio, in tokens"},
}

// spanValues are the signals between two points of a track.
type spanValues struct {
	v        [numSignals]float64 // NaN where undefined
	requests float64             // finished requests; NaN when unknown
	seconds  float64
}

// between computes the signals from point a to the later point b.
func between(tr *track, a, b *point, scratch []quantile.Bucket) (spanValues, []quantile.Bucket) {
	var sv spanValues
	for i := range sv.v {
		sv.v[i] = math.NaN()
	}
	sv.seconds = float64(b.t-a.t) / nanosPerSecond
	sv.requests = inc(a, b, cFinished)
	if sv.seconds <= 0 {
		return sv, scratch
	}
	sv.v[sTTFT], scratch = histQuantile(tr.ttftBounds, a.ttft, b.ttft, scratch)
	sv.v[sITL], scratch = histQuantile(tr.itlBounds, a.itl, b.itl, scratch)
	sv.v[sGenTPS] = inc(a, b, cGenerationTokens) / sv.seconds
	sv.v[sPreempt] = inc(a, b, cPreemptions) / sv.seconds
	// Lengths per request started (per first token), not per request
	// finished: a request's prompt is processed when its first token
	// comes, as its TTFT is observed, and its output starts growing the
	// batch at once, while the per-request length histograms are only
	// observed when the request ends, a request's duration later. Without
	// a TTFT histogram, the finished requests' lengths are used.
	started := math.NaN()
	if n := len(tr.ttftBounds); n > 0 && a.ttft != nil && b.ttft != nil {
		started = b.ttft[n-1] - a.ttft[n-1]
	}
	if started > 0 {
		sv.v[sPromptMean] = ratio(inc(a, b, cPromptTokens), started)
		sv.v[sGenMean] = ratio(inc(a, b, cGenerationTokens), started)
	} else {
		sv.v[sPromptMean] = ratio(inc(a, b, cPromptLenSum), inc(a, b, cPromptLenCount))
		sv.v[sGenMean] = ratio(inc(a, b, cGenLenSum), inc(a, b, cGenLenCount))
	}
	sv.v[sHitRatio] = ratio(inc(a, b, cPrefixHits), inc(a, b, cPrefixQueries))
	for i, s := range [numGauges]int{gRunning: sRunning, gWaiting: sWaiting, gKVUsage: sKV} {
		sv.v[s] = ratio(b.gsum[i]-a.gsum[i], b.gn[i]-a.gn[i])
	}
	return sv, scratch
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

// histQuantile is the 90th percentile of the observations between two
// cumulative bucket snapshots, NaN without any.
func histQuantile(bounds, a, b []float64, scratch []quantile.Bucket) (float64, []quantile.Bucket) {
	if a == nil || b == nil || len(a) != len(bounds) || len(b) != len(bounds) {
		return math.NaN(), scratch
	}
	scratch = scratch[:0]
	for i, le := range bounds {
		d := b[i] - a[i]
		if d < 0 {
			return math.NaN(), scratch
		}
		scratch = append(scratch, quantile.Bucket{UpperBound: le, Count: d})
	}
	return quantile.Estimate(signalQuantile, scratch), scratch
}
