package diagnosis

import "math"

// Symptom names: the values of the symptom label, a public contract.
const (
	SymptomTTFTUp         = "ttft_up"
	SymptomITLUp          = "itl_up"
	SymptomThroughputDown = "throughput_down"
)

const (
	yTTFT = iota
	yITL
	yThroughput
	numSymptoms
)

var symptomNames = [numSymptoms]string{SymptomTTFTUp, SymptomITLUp, SymptomThroughputDown}

// Change is how a signal moved from the baseline to the recent window.
type Change string

// The changes a signal can show.
const (
	ChangeUp      Change = "up"      // recent >= baseline * (1 + min change), or up from 0, and significant
	ChangeDown    Change = "down"    // recent <= baseline * (1 - min change), and significant
	ChangeFlat    Change = "flat"    // neither
	ChangeUnknown Change = "unknown" // a window lacks the signal
)

// evaluation is the outcome of the tests and rules for one model.
type evaluation struct {
	enough bool // enough requests in both windows to claim anything
	change [numSignals]Change
	ratio  [numSignals]float64 // recent/baseline; +Inf up from 0; NaN undefined
	p      [numSignals]float64 // p-value of the change the ratio points to; NaN without
	// ratioLow and ratioHigh bound a quantile's ratio by what the buckets
	// allow (quantileRatioRange); NaN for the others.
	ratioLow, ratioHigh [numSignals]float64
	// beyond is true where the ratio alone is past the minimum change,
	// significant or not (the incident's end waits for it to come back).
	beyond [numSignals]bool
	// outside is true where the recent window also lies beyond every one
	// of the baseline's sub-windows (beyondRange), for the signals beyond
	// the minimum change and significant.
	outside  [numSignals]bool
	symptoms [numSymptoms]bool
	// halfway: the symptom's latency (its p90 or exact mean) is still at
	// least half way, in log, to the minimum change: not back.
	halfway [numSymptoms]bool
	// shown: the symptom's latency is past the minimum change, significant
	// or not, by its p90 at the buckets' conservative end (ratioLow: issue
	// 30's rule for when a quantile's change counts) and by its exact mean
	// both (one alone misreads: the p90 inside a wide bucket, the mean on a
	// burst's tail of long waits); the generated tokens' rate down by it.
	shown [numSymptoms]bool
	// excessPreemptions is the recent preemptions above what the
	// baseline rate predicts, per request started.
	excessPreemptions float64
	// The queue's growth split by what accounts for it, set by
	// splitQueue (explain.go): memoryQueue is the extra requests waiting
	// that memory accounts for, inflowQueue the rest; queueTime is the
	// mean time in the queue in each window (Little's law).
	memoryQueue, inflowQueue   float64
	queueTime, baseQueueTime   float64
	inflowQueueUp, queueTimeUp bool
	// inflowQueueShare is the inflow's part of the queue time's rise over
	// the baseline's TTFT p90; queueShare the least it must reach, read as
	// a p90 (queueP90Share).
	inflowQueueShare, queueShare float64
	// memoryQueueShare is memory's part of it while the batch shrank with
	// preemptions up (a KV cache that admits fewer), 0 otherwise;
	// memoryQueueShown the same with the signals past the minimum change,
	// significant or not (beyondOnly).
	memoryQueueShare, memoryQueueShown float64
	// memoryShown is the extra requests waiting that memory accounts for
	// as the recent window shows it (the requests, not their time); -1
	// when it does not show.
	memoryShown float64
	// memoryFullShown is the same while the KV cache is full (cacheFull):
	// the queue but what the window's arrivals above the baseline's rate
	// added, at least the preemptions above it and the batch held back.
	memoryFullShown float64
	// tokensPerStartUp: generated tokens per request started rose past the
	// minimum change. No cause reads it (it swings with every burst of
	// starts), but a batch that grew while it did may be longer outputs the
	// finished requests do not show yet: batch growth waits.
	tokensPerStartUp bool
	// batchBeyondWork: the requests running rose by the minimum change
	// beyond what the work per request accounts for (workGrowth).
	batchBeyondWork bool
	// arrivalsUp: the requests started per second rose by the minimum
	// change in the recent window, and over the windows a named cause is
	// held by significantly at e's level and beyond the pod's bursts
	// (startsRose; set by Diagnoser.diagnose, false elsewhere): one window
	// cannot tell a rate that grew from the pod's bursts.
	arrivalsUp      bool
	preemptionShare float64 // the share they must reach
	alpha           float64 // the level each signal was tested at
	holdAlpha       float64 // the undivided level, that a named cause is held at
	// abortsUp: the share of finished requests that ended aborted rose
	// by the minimum change, significantly (Fisher's exact test on aborts
	// among finished requests, each window holding enough of them);
	// abortsBeyond: by the minimum change alone.
	abortsUp, abortsBeyond bool
	// traffic: a traffic cause's own signal moved at the strict level by
	// enough to explain a latency symptom (ledBy); it opens an incident,
	// freezing the reference, before the symptom shows.
	traffic bool
	// preemptsFit (on the evaluation over the windows a named cause is
	// held by): the recent window's preemptions are not significantly
	// fewer, at the undivided level, than the older windows' rate allows.
	// A rare event's count in one window says little: no preemption in
	// 10 s after 10 in the 20 s before is chance (p = 0.017).
	preemptsFit bool
	// cacheShrank: each running request holds more of the KV cache than
	// its tokens account for by the minimum change (kvPerRequest), with
	// the usage's rise or the batch's fall significant at e's level and
	// beyond every sub-window: the cache admits fewer requests of the same
	// length, as a cut does, not as longer prompts filling it do (the
	// self-exciting cut: the batch 0.03x, the usage within the pod's own).
	cacheShrank bool
	// batchHeldBack: e shows the batch held back by a smaller
	// cache while requests wait: the requests running down against the
	// baseline (at e's level), requests waiting, not fewer by the minimum
	// change, and each running request holding (1 + m)² times the cache's
	// share it did, beyond what its tokens account for (kvPerRequest; a cache
	// cut reports its usage against its new size). A KV cache cut to a few
	// contexts' room admits a handful while 300 wait, its usage gauge no
	// fuller than before (the self-exciting simulator at 90 %: 3-10 running
	// against 293, usage 0.5-0.8 against 0.85, windows without a
	// preemption); prompts 2.2x halve the batch a full cache holds, which is
	// no memory limit (self-exciting seed 12 at 90 %, long_prompts: without
	// the tokens, preemptions held 4 minutes on a window of 4). Like
	// cacheFull it names nothing; it holds preemptions once named. Without a
	// KV, running or prompt-length gauge it is false.
	batchHeldBack bool
	// queued: queueing shown at the strict level, its queue time alone
	// (1 + m)² times the baseline's TTFT p90 (ledBy): it leads TTFT as a
	// traffic cause leads its symptom, and in the probation after an
	// overload, the overload resumed. queueHolds: the same, its queue time
	// (1 + m)² times the baseline's mean TTFT (queueMeanFactor): it holds
	// a young incident that named queueing (keepsQueued).
	queued, queueHolds bool
	// stall: too few requests finished in the recent window to test a
	// latency, their rate down significantly against the baseline's while
	// requests wait, not fewer by the minimum change (Diagnoser.stalled):
	// no quiet pod. Only the throughput is judged then (evaluate).
	stall bool
	// preempted: the preemptions rose at the strict level, beyond every
	// sub-window, by (1 + m)² and by the share of the requests started
	// they must reach to be a cause: a load cause's own strong change
	// opens an incident before a symptom shows, as a traffic cause does
	// (ledBy), so that the first seconds of a KV cache cut, when the
	// preemptions are the most, never join the reference.
	preempted bool
}

// rules are the settings the tests need.
type rules struct {
	minChange, minRequests float64
	alpha                  float64 // per signal, after the Bonferroni division
	clearAlpha             float64 // for "still changed": the undivided level
	preemptionShare        float64 // MinPreemptionShare to name, a quarter of it to hold
	// queueShare: queueing names only when the rise of the time in the
	// queue (the inflow's part, read as a p90: queueP90Share) reaches the
	// minimum change of the baseline's TTFT p90 (a quarter of it to hold):
	// a queue of a few milliseconds explains no latency change (a batch
	// near its limit on Poisson traffic: 2 ms against a p90 of 124 ms).
	queueShare float64
	// outsideBursts: a change counts only when the recent window lies
	// beyond every sub-window of the baseline too (beyondRange), to name;
	// holding does not ask it.
	outsideBursts bool
}

// MinPreemptionShare is the smallest share of the recent window's requests
// that preemptions above the baseline rate must reach to be a cause: a few
// preemptions cannot explain a latency rise of thousands of requests.
const MinPreemptionShare = 0.02

// evaluate tests every signal, recent against base, and applies the
// symptom rules.
func (ru *rules) evaluate(recent, base *stats) evaluation {
	var e evaluation
	for i := range numSignals {
		e.change[i], e.ratio[i] = compare(recent.v[i], base.v[i], ru.minChange)
		e.p[i], e.ratioLow[i], e.ratioHigh[i] = math.NaN(), math.NaN(), math.NaN()
		if w, ok := quantileHist(i); ok {
			// A quantile interpolated inside a wide bucket may read far from
			// its truth (1.87x where it was 1.17x): the report shows the
			// range the buckets allow beside the reading.
			e.ratioLow[i], e.ratioHigh[i] = quantileRatioRange(recent.bounds[w], recent.h[w], base.bounds[w], base.h[w], signalQuantile)
		}
		e.beyond[i] = e.change[i] == ChangeUp || e.change[i] == ChangeDown
		if e.beyond[i] {
			dir := 1
			if e.change[i] == ChangeDown {
				dir = -1
			}
			e.p[i] = testSignal(i, recent, base, dir)
			if e.p[i] <= ru.alpha {
				e.outside[i] = beyondRange(i, recent, base, dir)
			}
			if !(e.p[i] <= ru.alpha) || ru.outsideBursts && !e.outside[i] {
				e.change[i] = ChangeFlat
			}
			// The inter-token p90 is up only where the buckets show the
			// minimum change at their conservative end (ratioLow: the recent
			// p90's bucket's lower bound over the baseline's upper one), as
			// issue 30 asks; it still counts as beyond it (an incident's end
			// waits for it), and itl_mean reads a rise inside a bucket. A
			// step's time is narrow: a full batch's steps a few percent
			// slower crowd just past a bound while the interpolation spreads
			// them over the bucket (the bursty steady pod at 90 %, seed 5:
			// 1.26-1.33x read across 50 ms at a true 1.06-1.15x; at 95 %,
			// seed 2: 1.25x inside the 50-75 ms bucket at a true 1.08x).
			// TTFT spreads over the queue's times and keeps the interpolated
			// reading: even a milder rule on it (a rise into a higher bucket
			// read at that bucket's lower bound) cost the bursty queueing
			// scenario 3.1 -> 14.4 % wrong or missing (seed 1).
			// So is the TTFT p90 where the pod's queue is pinned at its cap in
			// both windows (each refused at least pinnedShare of its attempts
			// at admission): a queue at its cap pins the time to first token
			// to a narrow spike (the cap over the throughput), and a few
			// percent more of it crowd past a bound (the bursty simulator at
			// 90 %, seed 10: 1.49x read across 5 s, buckets 1.00-3.00x, at a
			// true 1.04-1.24x); a stray refusal is no such queue.
			pinned := i == sTTFT && queuePinned(recent, base)
			if (i == sITL || pinned) && e.change[i] == ChangeUp && !(e.ratioLow[i] >= 1+ru.minChange) {
				e.change[i] = ChangeFlat
			}
		}
	}
	e.enough = recent.requests >= ru.minRequests && base.requests >= ru.minRequests
	half := math.Sqrt(1 + ru.minChange)
	e.halfway[yTTFT] = e.ratio[sTTFT] >= half || e.ratio[sTTFTMean] >= half
	e.halfway[yITL] = e.ratio[sITL] >= half || e.ratio[sITLMean] >= half
	e.halfway[yThroughput] = e.ratio[sGenTPS] <= 1/half
	e.shown[yTTFT] = e.ratioLow[sTTFT] >= 1+ru.minChange && e.ratio[sTTFTMean] >= 1+ru.minChange
	e.shown[yITL] = e.ratioLow[sITL] >= 1+ru.minChange && e.ratio[sITLMean] >= 1+ru.minChange
	e.shown[yThroughput] = e.beyond[sGenTPS] && e.ratio[sGenTPS] < 1
	if r, b := ratio(recent.c[cGenerationTokens], recent.started), ratio(base.c[cGenerationTokens], base.started); r > 0 && b > 0 {
		e.tokensPerStartUp = r >= b*(1+ru.minChange)
	}
	e.batchBeyondWork = e.ratio[sRunning] >= (1+ru.minChange)*workGrowth(&e, recent, base)
	perRequest := kvPerRequest(&e, recent, base)
	e.cacheShrank = (e.change[sKV] == ChangeUp && e.outside[sKV] || e.change[sRunning] == ChangeDown && e.outside[sRunning]) &&
		perRequest >= 1+ru.minChange
	e.batchHeldBack = e.change[sRunning] == ChangeDown && e.ratio[sWaiting] > 0 && !(e.beyond[sWaiting] && e.ratio[sWaiting] < 1) &&
		perRequest >= (1+ru.minChange)*(1+ru.minChange)
	e.preemptionShare, e.queueShare, e.alpha, e.holdAlpha = ru.preemptionShare, ru.queueShare, ru.alpha, ru.clearAlpha
	if n := firstPositive(recent.started, recent.requests); n > 0 && recent.seconds > 0 && base.seconds > 0 {
		excess := recent.c[cPreemptions] - base.c[cPreemptions]*recent.seconds/base.seconds
		e.excessPreemptions = excess / n
	}
	e.abortsUp, e.abortsBeyond = ru.abortsRose(recent, base)
	e.preempted = e.change[sPreempt] == ChangeUp && e.ratio[sPreempt] >= (1+ru.minChange)*(1+ru.minChange) && e.excessPreemptions >= ru.preemptionShare
	// Less output with fewer requests running is less traffic, not a
	// slower server, unless more requests wait (at e's level, beyond the
	// bursts where it asks that): then the server admits fewer than it is
	// asked to (a KV cache cut: 0.1x the requests running, 0 -> 300
	// waiting). Refusals at the queue's cap are admission's to name: read
	// here too, a rank's turn at the cap (the self-exciting
	// rank_imbalance at 90 %, seed 10) opened incidents that cleared it.
	// Held (the undivided level, no range check), the queue's cap refusing
	// more stands for the queue that cannot grow: at 90 % a cut's queue
	// stood at 321 against 187 (p = 0.04) while it refused all, and
	// throughput_down ended and re-opened every few seconds.
	unserved := e.change[sWaiting] == ChangeUp
	if !ru.outsideBursts {
		pr, refusedUp, _ := refusedTest(ru, recent, base)
		unserved = unserved || refusedUp && pr <= ru.alpha
	}
	throughputDown := e.change[sGenTPS] == ChangeDown && (e.change[sRunning] != ChangeDown && !(e.ratio[sRunning] <= 1-ru.minChange) || unserved)
	if !e.enough {
		// A stall (the finished requests' rate down significantly while
		// requests wait, not fewer by the minimum change: the demand
		// stands) is judged on its throughput alone, the one symptom
		// that needs no finished request to test: a latency from a
		// handful of first tokens says nothing (a cut read TTFT 125x at
		// p = 1); at 90 % the queue stood at its cap before the cut.
		e.stall = base.requests >= ru.minRequests && recent.v[sWaiting] > 0 && !(e.ratio[sWaiting] < 1/(1+ru.minChange)) &&
			poissonRates(recent.requests, recent.seconds, base.requests, base.seconds, -1) <= ru.alpha
		e.symptoms[yThroughput] = e.stall && e.change[sGenTPS] == ChangeDown
		return e
	}
	// Step 1: which side of the request got slower. Less output with
	// fewer requests running is less traffic, not a slower server.
	// A latency rose when its p90 or its exact mean did, each on its own
	// evidence: inside one of vLLM's wide buckets the quantile cannot read
	// a rise that the histogram's sum shows exactly (issue 30).
	e.symptoms[yTTFT] = e.change[sTTFT] == ChangeUp || e.change[sTTFTMean] == ChangeUp
	e.symptoms[yITL] = e.change[sITL] == ChangeUp || e.change[sITLMean] == ChangeUp
	e.symptoms[yThroughput] = throughputDown
	return e
}

// ledBy shows a latency symptom at the undivided level (lenient) where a
// traffic cause that explains it moved at the strict level, beyond every
// sub-window of the baseline, by a factor of at least (1 + m)² (twice the
// minimum change, in log): the cause's own evidence, strong, is the
// Bonferroni division's search done, and one hypothesis is left (issue
// 30: on the bursty simulator the prefix-cache hit ratio fell from 45 % to
// 0 at p < 0.0001 while the TTFT test, widened by the pod's bursts, read
// p = 0.002-0.01, and the rolling baseline took the shift in unnamed). It
// sets traffic (such a cause moved, whatever the symptoms) and queued;
// such a queue leads TTFT the same way (seed 4: requests waited at p <
// 0.0001 while TTFT read p = 0.04-0.13 at a true 2.2-2.4x).
func (e *evaluation) ledBy(lenient *evaluation, recent, base *stats, minChange float64) {
	if !e.enough || !e.anyChanged() {
		return // no cause holds: most evaluations, at no cost
	}
	var both [numSymptoms]bool
	both[yTTFT], both[yITL] = true, true
	e.traffic = e.trafficExplains(lenient, recent, base, both, minChange)
	var ttft [numSymptoms]bool
	ttft[yTTFT] = true
	var none causeSet
	if causesFor(e, lenient, ttft, &none)[kQueueing] {
		x := shareInput{recent: recent, base: base, e: e, sym: ttft}
		e.queued = causes[kQueueing].factor(&x) >= (1+minChange)*(1+minChange)
		e.queueHolds = x.queueMeanFactor() >= (1+minChange)*(1+minChange)
		if e.queued && lenient.symptoms[yTTFT] {
			e.symptoms[yTTFT] = true
		}
	}
	if !e.traffic {
		return
	}
	for _, y := range [...]int{yTTFT, yITL} {
		var sym [numSymptoms]bool
		sym[y] = true
		if !e.symptoms[y] && lenient.symptoms[y] && e.trafficExplains(lenient, recent, base, sym, minChange) {
			e.symptoms[y] = true
		}
	}
}

// trafficExplains says whether a traffic cause (step 4) of the symptoms sym
// moved strictly (e) by a factor of at least (1 + minChange)².
func (e *evaluation) trafficExplains(lenient *evaluation, recent, base *stats, sym [numSymptoms]bool, minChange float64) bool {
	var none causeSet
	c := causesFor(e, lenient, sym, &none)
	for k := range causes {
		if c[k] && causes[k].Step == trafficStep && causes[k].factor != nil {
			x := shareInput{recent: recent, base: base, e: e, sym: sym}
			if causes[k].factor(&x) >= (1+minChange)*(1+minChange) {
				return true
			}
		}
	}
	return false
}

// anyChanged says whether a signal moved at e's level.
func (e *evaluation) anyChanged() bool {
	for _, c := range e.change {
		if c == ChangeUp || c == ChangeDown {
			return true
		}
	}
	return false
}

// abortsRose tests the share of finished requests that ended aborted,
// recent against base: beyond when it rose by the minimum change, up when
// that rise is significant too. Both windows need the minimum of finished
// requests: a handful of aborts is no trend.
func (ru *rules) abortsRose(recent, base *stats) (up, beyond bool) {
	k1, n1, k0, n0 := recent.c[cAborted], recent.requests, base.c[cAborted], base.requests
	if !(k1 >= 0 && k0 >= 0 && n1 >= ru.minRequests && n0 >= ru.minRequests) {
		return false, false
	}
	ch, _ := compare(k1/n1, k0/n0, ru.minChange)
	if ch != ChangeUp {
		return false, false
	}
	return fisher(k1, n1, k0, n0, +1) <= ru.alpha, true
}

// startsRatio is the requests started per second, recent over base; NaN
// unknown.
func startsRatio(recent, base *stats) float64 {
	return ratio(ratio(recent.started, recent.seconds), ratio(base.started, base.seconds))
}

// startsRose says whether the requests started per second rose from base
// to recent by the minimum change, significantly at ru's level (the counts
// divided by the baseline's dispersion of the starts: a client's batch of
// dozens, the rate's levels; φ 52 on the bursty simulator, where one
// recent window at 1.7 times the starts reads p = 0.03), and beyond every
// sub-window of the baseline, to hold too: the bursty pod's rate holds a
// level for 20 s, and 30 s at 1.5-1.7 times a frozen reference read at its
// low level read p = 0.003 at φ 33.
func (ru *rules) startsRose(recent, base *stats) bool {
	if !(startsRatio(recent, base) >= 1+ru.minChange) {
		return false
	}
	phi := base.phi[dStarted]
	if !(phi > 1) {
		phi = 1
	}
	if poissonRates(recent.started/phi, recent.seconds, base.started/phi, base.seconds, +1) > ru.alpha {
		return false
	}
	return beyondRange(dStarted, recent, base, +1)
}

// cacheFull says whether e shows memory limiting admission without a
// preemption: the KV cache's usage up against the baseline (its own test,
// at e's level, widened by the pod's dispersion), requests waiting up, and
// the batch no larger than the baseline's: not grown past the minimum
// change, within which it is flat like any signal (seed 17's cut: 1.00-1.03
// times at 0.95 of the cache, read as larger, dropped the hold and gave the
// queue to the inflow). It names nothing (a full cache
// without preemptions is healthy); it holds preemptions once named
// (incidentState.step), a rare event's count in a window saying little.
// Without a KV or running gauge (ChangeUnknown) it is false.
func (e *evaluation) cacheFull() bool {
	return e.change[sKV] == ChangeUp && e.change[sWaiting] == ChangeUp && e.change[sRunning] != ChangeUp && e.change[sRunning] != ChangeUnknown
}

// memoryHeld says whether e, over the windows a named cause is held by,
// still shows the memory limit preemptions were named for, at e's level
// and beyond every sub-window of the baseline (the pod's own bursts): the
// preemptions themselves, or a cache that shrank (cacheShrank). A full
// cache alone is no such evidence: longer prompts fill it too (the
// self-exciting long_prompts shift: prompts 2.2x took the cache 0.60 ->
// 0.96 with 0-1 preemptions a window, and a full cache held preemptions
// for 8 minutes after one window of 3).
func (e *evaluation) memoryHeld() bool {
	return e.change[sPreempt] == ChangeUp && e.outside[sPreempt] || e.cacheShrank
}

// kvPerRequest is the share of the KV cache each running request holds,
// recent over base, against the tokens it holds (its prompt and half its
// output, the finished requests' means): above 1 the cache holds fewer
// requests than their length accounts for. NaN where a gauge or the
// prompt length is unknown.
func kvPerRequest(e *evaluation, recent, base *stats) float64 {
	// the output counts only where both windows know it
	r, b := recent.v[sPromptMean], base.v[sPromptMean]
	if recent.v[sGenMean] > 0 && base.v[sGenMean] > 0 {
		r, b = r+recent.v[sGenMean]/2, b+base.v[sGenMean]/2
	}
	work := ratio(r, b)
	if !(work > 0) || !(e.ratio[sRunning] > 0) || math.IsInf(e.ratio[sKV], 0) {
		return math.NaN()
	}
	return e.ratio[sKV] / e.ratio[sRunning] / work
}

// naming is e (the lenient evaluation) as a cause of a named symptom is
// named on: each signal at the undivided level and beyond the baseline's
// bursts; preemptions at the strict evaluation's share and aborts at its
// level (their share has no sub-windows' range). Its caller splits the queue
// again (splitQueue) at that queueShare: memory's part names at m, not m/4.
func (e *evaluation) naming(strict *evaluation) evaluation {
	out := *e
	out.preemptionShare, out.queueShare, out.abortsUp = strict.preemptionShare, strict.queueShare, strict.abortsUp
	for i := range numSignals {
		if (out.change[i] == ChangeUp || out.change[i] == ChangeDown) && !e.outside[i] {
			out.change[i] = ChangeFlat
		}
	}
	return out
}

// beyondOnly is e with every signal whose ratio is past the minimum change
// read as changed that way, significant or not.
func (e *evaluation) beyondOnly() evaluation {
	out := *e
	out.abortsUp, out.memoryQueueShare = e.abortsBeyond, e.memoryQueueShown
	for i := range numSignals {
		switch {
		case !e.beyond[i]:
			out.change[i] = ChangeFlat
		case e.ratio[i] > 1:
			out.change[i] = ChangeUp
		default:
			out.change[i] = ChangeDown
		}
	}
	return out
}

func firstPositive(vs ...float64) float64 {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return math.NaN()
}

// testSignal is the p-value of signal i having moved in direction dir, with
// the test that fits the data behind it (docs/diagnosis.md, "The tests"),
// widened by the baseline's dispersion factor φ for that signal: the counts
// behind a Poisson or Fisher test are divided by φ, the standard errors of
// the Welch and proportion tests multiplied by √φ (their n divided by φ).
func testSignal(i int, r, b *stats, dir int) float64 {
	phi := max(1, b.phi[i])
	switch i {
	case sTTFT, sITL:
		w := hTTFT
		if i == sITL {
			w = hITL
		}
		q := b.v[i]
		n1, n0 := total(r.h[w]), total(b.h[w])
		k1, k0 := countAbove(r.bounds[w], r.h[w], q), countAbove(b.bounds[w], b.h[w], q)
		if i == sITL {
			// Inter-token latencies come many per request and a slow step
			// slows every request in it: count requests, not tokens.
			f1, f0 := perRequest(n1, r.started), perRequest(n0, b.started)
			n1, k1, n0, k0 = n1*f1, k1*f1, n0*f0, k0*f0
		}
		return fisher(k1/phi, n1/phi, k0/phi, n0/phi, dir)
	case sGenTPS:
		// Tokens come in bursts of a request's length: a compound Poisson
		// count, whose variance is the count times E[L²]/E[L].
		disp := dispersion(b) * phi
		return poissonRates(r.c[cGenerationTokens]/disp, r.seconds, b.c[cGenerationTokens]/disp, b.seconds, dir)
	case sPreempt:
		return poissonRates(r.c[cPreemptions]/phi, r.seconds, b.c[cPreemptions]/phi, b.seconds, dir)
	case sRunning, sWaiting, sKV:
		g := gaugeOf(i)
		floor := gaugeFloor(g)
		// Under no change the recent window is one more sub-window of the
		// baseline: its mean varies as φ times the baseline's per-scrape
		// variance over n. Its own variance times φ counted a queue that
		// ramps within the window twice (the bursty simulator: waiting at
		// 124x the baseline's read p = 0.03).
		return welch(r.gMean[g], b.gVar[g]+floor, r.gN[g]/phi, b.gMean[g], b.gVar[g]+floor, b.gN[g]/phi, dir)
	case sPromptMean, sGenMean:
		w := hPromptLen
		if i == sGenMean {
			w = hGenLen
		}
		// n is the finished requests the mean is of (the requests started
		// for a prompt mean without its histogram).
		c := cPromptLenCount
		if i == sGenMean {
			c = cGenLenCount
		}
		v1, n1 := lengthVar(r, w, r.v[i]), firstPositive(r.c[c], r.started)
		v0, n0 := lengthVar(b, w, b.v[i]), firstPositive(b.c[c], b.started)
		return welch(r.v[i], v1, n1/phi, b.v[i], v0, n0/phi, dir)
	case sTTFTMean, sITLMean:
		// n is the observations the mean is of; each one's variance the
		// largest the window's buckets and exact sum allow (histVarBound).
		w, c := hTTFT, cTTFTSum
		if i == sITLMean {
			w, c = hITL, cITLSum
		}
		v1, v0 := histVarBound(r.bounds[w], r.h[w], r.c[c]), histVarBound(b.bounds[w], b.h[w], b.c[c])
		return welch(r.v[i], v1, total(r.h[w])/phi, b.v[i], v0, total(b.h[w])/phi, dir)
	case sHitRatio:
		// A request's tokens hit or miss together: per request, the hit
		// share varies at most as a proportion does.
		p1, p0 := r.v[i], b.v[i]
		n1, n0 := firstPositive(r.started, r.requests)/phi, firstPositive(b.started, b.requests)/phi
		if !(n1 > 0 && n0 > 0) {
			return 1
		}
		return zTail(p1-p0, math.Sqrt(p1*(1-p1)/n1+p0*(1-p0)/n0+0.25/(n1*n1)), dir)
	}
	return 1
}

// quantileHist is the histogram behind a quantile signal; ok is false for
// the others.
func quantileHist(i int) (int, bool) {
	switch i {
	case sTTFT:
		return hTTFT, true
	case sITL:
		return hITL, true
	}
	return 0, false
}

// gaugeOf is the gauge behind signal i.
func gaugeOf(i int) int {
	switch i {
	case sRunning:
		return gRunning
	case sWaiting:
		return gWaiting
	}
	return gKVUsage
}

// gaugeFloor is the variance a gauge's scrapes carry at least: request
// counts are integers, so a window of identical scrapes still carries
// their rounding.
func gaugeFloor(g int) float64 {
	if g == gKVUsage {
		return 1e-4
	}
	return 1.0 / 12
}

func total(h []float64) float64 {
	if len(h) == 0 {
		return math.NaN()
	}
	return h[len(h)-1]
}

// perRequest is the factor that turns a count of observations into one of
// requests; 1 when requests are unknown or more.
func perRequest(obs, requests float64) float64 {
	if !(requests > 0) || !(obs > requests) {
		return 1
	}
	return requests / obs
}

// dispersion is E[L²]/E[L] of the generation lengths, from the window's
// length histogram, or twice the mean (a coefficient of variation of 1)
// without it; at least 1.
func dispersion(s *stats) float64 {
	m := s.v[sGenMean]
	v := lengthVar(s, hGenLen, m)
	if !(m > 0) {
		return 1
	}
	return math.Max((v+m*m)/m, 1)
}

// lengthVar is the per-request variance of a length, from its histogram,
// else mean² (a coefficient of variation of 1, as for exponential lengths).
func lengthVar(s *stats, w int, mean float64) float64 {
	if _, v, ok := histMoments(s.bounds[w], s.h[w]); ok && v > 0 {
		return v
	}
	return mean * mean
}

// compare classifies recent against baseline by the ratio alone. A
// baseline of 0 has no ratio: any rise from it is up (ratio +Inf), staying
// at 0 is flat.
func compare(recent, baseline, minChange float64) (Change, float64) {
	if math.IsNaN(recent) || math.IsNaN(baseline) {
		return ChangeUnknown, math.NaN()
	}
	if baseline == 0 {
		if recent > 0 {
			return ChangeUp, math.Inf(1)
		}
		return ChangeFlat, math.NaN()
	}
	r := recent / baseline
	switch {
	case r >= 1+minChange:
		return ChangeUp, r
	case r <= 1-minChange:
		return ChangeDown, r
	}
	return ChangeFlat, r
}

// workGrowth is at most how many times longer a request stays in the
// batch for its own work, recent against base: the tokens it generates,
// the time per step (itself slower in a larger batch), and, for its
// prefill, the prompt and the prefix cache's misses, each only where it
// grew and each counted whole. By Little's law the requests running are
// the arrivals times their stay, so a batch that grew beyond it had more
// arrivals.
func workGrowth(e *evaluation, recent, base *stats) float64 {
	misses := (1 - recent.v[sHitRatio]) / (1 - base.v[sHitRatio])
	return grown(e.ratio[sGenMean]) * grown(e.ratio[sPromptMean]) * grown(misses) * grown(e.ratio[sITLMean])
}

// grown is a ratio where it is above 1 (+Inf, up from 0, included: it
// accounts for any batch), else 1 (NaN: unknown, it accounts for nothing).
func grown(r float64) float64 {
	if r > 1 {
		return r
	}
	return 1
}

// holds says whether a named symptom y still holds on e's evidence: the
// symptom's own, except a TTFT p90 read inside the reference's own bucket
// (the buckets allow no rise: ratioLow below 1), which holds it only with
// the exact mean: the interpolation there is no evidence that it lasts.
func (e *evaluation) holds(y int) bool {
	if y != yTTFT || !e.symptoms[y] || e.change[sTTFTMean] == ChangeUp {
		return e.symptoms[y]
	}
	return !(e.ratioLow[sTTFT] < 1)
}

// pinnedShare is the share of a window's attempts refused at admission
// from which its queue counts as pinned at the cap: in a queue of 150 with
// Poisson arrivals (M/M/1/C) the admitted requests' p90 sits within the top
// tenth of the cap from 0.6 % refused, at 0.4 % still 16 % below it
// (docs/diagnosis.md, "Quantile ratios and their buckets").
const pinnedShare = 0.01

// queuePinned says whether the TTFT p90s of recent and base are both the
// queue cap's wait: each window refused at least pinnedShare of its
// attempts (one refusal now and then is no queue at its cap).
func queuePinned(recent, base *stats) bool { return refusesPinned(recent) && refusesPinned(base) }

func refusesPinned(s *stats) bool {
	k, n := s.refusals()
	return k > 0 && k >= pinnedShare*n
}
