package diagnosis

import "math"

// Symptom and cause names: the values of the symptom and cause labels, a
// public contract.
const (
	SymptomTTFTUp         = "ttft_up"
	SymptomITLUp          = "itl_up"
	SymptomThroughputDown = "throughput_down"

	CauseQueueing          = "queueing"
	CauseLongPrompts       = "long_prompts"
	CausePrefixCacheMisses = "prefix_cache_misses"
	CauseBatchGrowth       = "batch_growth"
	CausePreemptions       = "preemptions"
	CauseLongOutputs       = "long_outputs"
	CauseUnexplained       = "unexplained"
)

const (
	yTTFT = iota
	yITL
	yThroughput
	numSymptoms
)

const (
	kQueueing = iota
	kLongPrompts
	kPrefixMisses
	kBatchGrowth
	kPreemptions
	kLongOutputs
	kUnexplained
	numCauses
)

var symptomNames = [numSymptoms]string{SymptomTTFTUp, SymptomITLUp, SymptomThroughputDown}

var causeNames = [numCauses]string{
	CauseQueueing, CauseLongPrompts, CausePrefixCacheMisses, CauseBatchGrowth,
	CausePreemptions, CauseLongOutputs, CauseUnexplained,
}

// Change is how a signal moved from the baseline to the recent window.
type Change string

const (
	ChangeUp      Change = "up"      // recent >= baseline * (1 + min change), or up from 0
	ChangeDown    Change = "down"    // recent <= baseline * (1 - min change)
	ChangeFlat    Change = "flat"    // neither
	ChangeUnknown Change = "unknown" // a window lacks the signal
)

// evaluation is the outcome of the rules for one model.
type evaluation struct {
	enough   bool // enough requests in both windows to claim anything
	change   [numSignals]Change
	ratio    [numSignals]float64 // recent/baseline; +Inf up from 0; NaN undefined
	symptoms [numSymptoms]bool
	causes   [numCauses]bool
}

// evaluate applies the rules to the recent and baseline values. Nothing is
// claimed unless both windows saw at least minRequests finished requests.
func evaluate(recent, baseline spanValues, minChange, minRequests float64) evaluation {
	var e evaluation
	for i := range numSignals {
		e.change[i], e.ratio[i] = compare(recent.v[i], baseline.v[i], minChange)
	}
	e.enough = recent.requests >= minRequests && baseline.requests >= minRequests
	if !e.enough {
		return e
	}
	up := func(s int) bool { return e.change[s] == ChangeUp }
	down := func(s int) bool { return e.change[s] == ChangeDown }

	// Step 1: which side of the request got slower. Less output with
	// fewer requests running is less traffic, not a slower server.
	e.symptoms[yTTFT] = up(sTTFT)
	e.symptoms[yITL] = up(sITL)
	e.symptoms[yThroughput] = down(sGenTPS) && !down(sRunning)

	// Prefill and decode problems have no causes in common, so each side's
	// causes are looked for only when that side got slower. When only
	// throughput fell, the split says nothing and both sides are looked at.
	split := e.symptoms[yTTFT] || e.symptoms[yITL]
	prefill := e.symptoms[yTTFT] || (!split && e.symptoms[yThroughput])
	decode := e.symptoms[yITL] || (!split && e.symptoms[yThroughput])

	// Step 3 first, since step 2 depends on it: a preemption recomputes a
	// whole prefill (prefill work) and stalls a running request (decode),
	// so it explains either side.
	e.causes[kPreemptions] = (prefill || decode) && up(sPreempt)
	// Step 2. Preempted requests go back to the waiting queue, so a queue
	// that grew with preemptions is memory, not inflow.
	e.causes[kQueueing] = prefill && up(sWaiting) && !e.causes[kPreemptions]
	// More requests in the batch make every step slower, prefill steps
	// included, so a grown batch explains either side; but a batch that
	// grew while requests queued reached its limit (queueing), and one that
	// grew with the prompts or the outputs holds each request longer (long
	// prompts, long outputs): more requests at once is then the effect.
	e.causes[kBatchGrowth] = (prefill || decode) && up(sRunning) && !up(sWaiting) && !up(sPromptMean) && !up(sGenMean)
	// Step 4: the traffic changed.
	e.causes[kLongPrompts] = prefill && up(sPromptMean)
	e.causes[kPrefixMisses] = prefill && down(sHitRatio)
	// Longer outputs keep each request in the batch longer, so the batch
	// grows and every step slows, prefill steps included: either side.
	e.causes[kLongOutputs] = (prefill || decode) && up(sGenMean)
	// Step 5: a symptom none of the above explains.
	any := false
	for _, c := range e.causes[:kUnexplained] {
		any = any || c
	}
	e.causes[kUnexplained] = (e.symptoms[yTTFT] || e.symptoms[yITL] || e.symptoms[yThroughput]) && !any
	return e
}

// compare classifies recent against baseline. A baseline of 0 has no
// ratio: any rise from it is up (ratio +Inf), staying at 0 is flat.
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
