package diagnosis

import (
	"cmp"
	"math"
	"slices"
)

// Causes are named on their own evidence and listed by the share of the
// symptom each explains. A cause record's factor is how many times its own
// change alone would make the time a request spends on the symptom's side
// (queue time against the baseline's TTFT, prompt work, recomputed tokens
// against the batch's, the batch, the outputs); its share is log(factor) /
// log(the symptom's ratio), between 0 and 1: a cause that alone accounts for
// the whole rise explains all of it (capped at 1 in the report; beyond,
// the uncapped value still orders). Shares of several causes may add up
// past 1 (their effects compound and overlap): they order, they do not
// split.

// shareInput is what a record's factor reads: the recent window and the
// reference, their evaluation, and the incident's symptoms.
type shareInput struct {
	recent, base *stats
	e            *evaluation
	sym          [numSymptoms]bool
}

// queueRise is the rise of the mean time in the queue, in seconds (Little's
// law: waiting / requests started per second); 0 when it did not rise or
// is unknown.
func (x *shareInput) queueRise() float64 {
	d := x.e.queueTime - x.e.baseQueueTime
	if !(d > 0) {
		return 0
	}
	return d
}

// queueSplit is the part of the queue's growth that memory (memory true)
// or the inflow accounts for, between 0 and 1.
func (x *shareInput) queueSplit(memory bool) float64 {
	grown := x.e.memoryQueue + x.e.inflowQueue
	if !(grown > 0) {
		return 0
	}
	part := x.e.inflowQueue
	if memory {
		part = x.e.memoryQueue
	}
	return math.Min(math.Max(part/grown, 0), 1)
}

// queueMeanFactor is how many times the baseline's mean TTFT the inflow's
// part of the queue time's rise alone would make it (evaluation.queueHolds):
// Little's law gives the mean wait, read against the exact mean (sum /
// count) as like against like; against the p90 where the mean is unknown.
// Against the p90 a mean wait reads short (bursty seed 7 at 50 %: 0.07 s
// against a p90 of 0.18 s and a mean of 0.074 s, the true queue p90
// 0.21-0.39 s); naming keeps that stricter reading (queueing's factor).
func (x *shareInput) queueMeanFactor() float64 {
	ref := x.base.v[sTTFTMean]
	if !(ref > 0) {
		ref = x.base.v[sTTFT]
	}
	return 1 + x.queueRise()*x.queueSplit(false)/ref
}

// recomputed is the share of the batch's work that the preemptions above
// the baseline rate redo: each recomputes its prompt and, on average, half
// its output, against the prompt tokens computed (less the prefix-cache
// hits) and the tokens generated in the recent window.
func (x *shareInput) recomputed() float64 {
	r := x.recent
	excess := r.c[cPreemptions] - x.base.c[cPreemptions]*r.seconds/x.base.seconds
	redo := excess * (orZero(r.v[sPromptMean]) + orZero(r.v[sGenMean])/2)
	batch := orZero(r.c[cPromptTokens])*(1-orZero(r.v[sHitRatio])) + orZero(r.c[cGenerationTokens])
	if !(redo > 0 && batch > 0) {
		return 0
	}
	return redo / batch
}

func orZero(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// symptomRatio is the largest ratio of the incident's symptoms (for
// throughput, baseline over recent), at least 1 + a small margin so that a
// held symptom whose ratio fell back does not divide by nothing.
func (x *shareInput) symptomRatio() float64 {
	rho := 1.05
	if x.sym[yTTFT] {
		rho = math.Max(rho, math.Max(orZero(x.e.ratio[sTTFT]), orZero(x.e.ratio[sTTFTMean])))
	}
	if x.sym[yITL] {
		rho = math.Max(rho, math.Max(orZero(x.e.ratio[sITL]), orZero(x.e.ratio[sITLMean])))
	}
	if x.sym[yThroughput] && x.e.ratio[sGenTPS] > 0 {
		rho = math.Max(rho, 1/x.e.ratio[sGenTPS])
	}
	return rho
}

// explains is each named symptom-bound cause's share of the symptom,
// uncapped, NaN for the records without a factor (effects, the residual,
// topology).
func explains(recent, base *stats, e *evaluation, sym [numSymptoms]bool, named *causeSet) [maxCauses]float64 {
	var out [maxCauses]float64
	if named[kPreemptions] && e.memoryShown >= 0 {
		// Named, memory is a cause: its part of the queue is read as the
		// recent window shows it (a smaller batch, preemptions past the
		// minimum change), as its hold reads it, not on the strict tests
		// that decide a symptom (seed 6's cut: 292 waiting, the batch
		// 0.52 times, 0.2 preemptions a second at p = 0.07 gave the
		// inflow, unchanged, 80 % of the queue and queueing the lead).
		shown := *e
		shown.memoryQueue = max(e.memoryQueue, e.memoryShown)
		shown.inflowQueue = e.memoryQueue + e.inflowQueue - shown.memoryQueue
		e = &shown
	}
	x := shareInput{recent: recent, base: base, e: e, sym: sym}
	rho := math.Log(x.symptomRatio())
	for k := range out {
		out[k] = math.NaN()
		if k >= len(causes) || !named[k] || causes[k].factor == nil {
			continue
		}
		f := causes[k].factor(&x)
		if !(f > 1) {
			out[k] = 0
			continue
		}
		// Uncapped: two causes that could each explain the whole rise
		// are ordered by how far; the report caps the share at 1.
		out[k] = math.Log(f) / rho
	}
	return out
}

// byExplains orders records: those with a share by it, largest first, then
// the others in the records' order.
func byExplains(ks []int, share *[maxCauses]float64) {
	if len(ks) < 2 {
		return
	}
	slices.SortStableFunc(ks, func(a, b int) int {
		sa, sb := share[a], share[b]
		switch {
		case math.IsNaN(sa) && math.IsNaN(sb):
			return cmp.Compare(a, b)
		case math.IsNaN(sa):
			return 1
		case math.IsNaN(sb):
			return -1
		}
		if c := cmp.Compare(sb, sa); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}

// queueP90Share is the rise of the time in the queue that the inflow
// accounts for, read as a 90th percentile, over the baseline's TTFT p90:
// Little's law gives the mean wait, and an exponential wait's p90 is
// ln 10 (2.3) times its mean, so that it compares with the p90 it adds to.
func (e *evaluation) queueP90Share() float64 { return math.Ln10 * e.inflowQueueShare }

// memoryP90Share is the same for the part of the rise that a batch memory
// shrank accounts for (splitQueue); 0 while the batch did not shrink.
func (e *evaluation) memoryP90Share() float64 { return math.Ln10 * e.memoryQueueShare }

// splitQueue divides the growth of the waiting requests, recent against
// base, between the inflow and memory, and sets the queue times. growth is
// how fast the queue grew over the recent window (requests per second), so
// that the arrivals are the requests started plus it (the baseline's are
// taken as its starts: a baseline's queue does not grow for long).
//
// Memory accounts for the preemptions above the baseline rate (a preempted
// request waits again until memory frees; waiting no longer than the
// window, they account for at most that many at a time) and, while
// preemptions rose, the requests the running batch lost (a KV cache too
// small admits fewer, and preempts). While memory shows (the batch shrank
// significantly, or preemptions rose significantly beside a smaller batch
// or enough of them to redo work), it also accounts for the part of the
// growth that fewer requests served explains against more arriving: a KV
// cache cut serves fewer and the queue builds at the same inflow. The
// rest is the inflow's: issue 30's overload, 751 waiting against 11
// preemptions, is queueing. memoryQueueShare (naming preemptions on the
// queue memory holds) and memoryShown (as the recent window shows it) are
// set alongside.
func (e *evaluation) splitQueue(recent, base *stats, growth, minChange float64) {
	served := ratio(firstPositive(recent.started, recent.requests), recent.seconds)
	baseServed := ratio(firstPositive(base.started, base.requests), base.seconds)
	e.queueTime = ratio(recent.gMean[gWaiting], served)
	e.baseQueueTime = ratio(base.gMean[gWaiting], baseServed)
	ch, _ := compare(e.queueTime, e.baseQueueTime, minChange)
	e.queueTimeUp = ch == ChangeUp

	grown := recent.gMean[gWaiting] - base.gMean[gWaiting]
	excess := max(orZero(recent.c[cPreemptions]-base.c[cPreemptions]*recent.seconds/base.seconds), 0)
	heldBack := 0.0 // the batch memory held back, in requests waiting
	preemptsBeyond := e.beyond[sPreempt] && e.ratio[sPreempt] > 1
	if preemptsBeyond {
		// a KV cache too small admits fewer, and preempts: the batch it
		// lost waits; a batch smaller without preemptions is less inflow
		// at a rank (issue 30: a starved rank's queue read as memory)
		heldBack = max(orZero(base.gMean[gRunning]-recent.gMean[gRunning]), 0)
	}
	// Fewer served against more arriving. Preemptions enough to redo
	// work (the share that names them, in every evaluation alike) slow
	// the service too: the whole loss is memory's. Fewer of them, its part
	// is at most what the batch it shrank served (a cache that admits
	// fewer serves fewer in proportion, at the same time a request); the
	// rest is slower service, or a rank at its batch limit while another
	// starves (the Poisson rank_imbalance: the batch 1.00 times, served
	// 0.86, 0.13 preemptions a second, was read as memory's).
	redo := e.excessPreemptions >= MinPreemptionShare
	// The arrivals are the requests started plus the queue's growth, less
	// the preempted requests that went back to wait: those are memory's,
	// not new inflow (at most one a preemption; fewer once re-admitted).
	arrivals := served + orZero(growth) - orZero(ratio(max(recent.c[cPreemptions], 0), recent.seconds))
	servedLess := 0.0
	loss := max(orZero(baseServed-served), 0)
	if rise := max(orZero(arrivals-baseServed), 0); loss+rise > 0 {
		held := loss
		if !redo {
			held = min(loss, baseServed*max(1-orZero(e.ratio[sRunning]), 0))
		}
		servedLess = grown * held / (loss + rise)
	}
	// Preemptions that rose significantly beside a smaller batch are a KV
	// cache that admits fewer, however few of them there are: the share
	// of requests preempted is the work they redo, not the batch the
	// cache holds back (seed 4's cut: 0.3 preemptions a second among 40
	// requests, 0.8 times the batch, 250 waiting). The share counts here
	// as naming reads it, never the evaluation's own: holding queueing,
	// at a quarter of it, handed memory the queue that naming gave the
	// inflow, and queueing cleared one evaluation in four.
	admitsFewer := e.ratio[sRunning] < 1 || redo
	shrunk := e.change[sRunning] == ChangeDown || e.change[sPreempt] == ChangeUp && admitsFewer
	// The batch counts as held back only where the preemptions beside it
	// are more than chance at the undivided level: one preemption in a
	// window where the baseline's rate gives 0.4 (p = 0.33) is past the
	// minimum change, and handed a starved rank's queue to memory (bursty
	// rank_imbalance, seed 5: 19.5 of 20 waiting, queueing cleared).
	memory := excess
	if e.p[sPreempt] <= e.holdAlpha {
		memory += heldBack
	}
	if shrunk {
		memory = max(memory, servedLess)
	}
	e.memoryQueue, e.inflowQueue = memory, grown-memory
	// as the recent window shows it, significant or not (beyondOnly,
	// and the shares of a named memory cause): the batch shrank past the
	// minimum change, or preemptions rose past it as above
	shown := e.beyond[sRunning] && !(e.ratio[sRunning] > 1) || preemptsBeyond && admitsFewer
	e.memoryShown = -1
	if shown {
		e.memoryShown = max(excess+heldBack, servedLess)
	}
	// While the cache is full (cacheFull) the queue waits for memory,
	// whether a preemption fell in this window or not: all of it but what
	// the window's arrivals above the baseline's bursts added (at the rate
	// of the busiest of its sub-windows the pod served without this
	// queue). Seed 7's KV cut: 225 waiting, served 47.3 a second against
	// 46.8, the batch 0.75 times: the inflow's rise adds 5 of them; seed
	// 17's: a burst at 42 a second, against a mean of 35 that the
	// baseline's sub-windows reached 57 over, was credited 70 of 88.
	arrived := max(orZero(arrivals-base.burstServed()), 0) * recent.seconds
	e.memoryFullShown = max(excess+max(orZero(base.gMean[gRunning]-recent.gMean[gRunning]), 0), servedLess, grown-arrived)
	e.inflowQueueShare, e.memoryQueueShare, e.memoryQueueShown = 0, 0, 0
	if rise := e.queueTime - e.baseQueueTime; rise > 0 && grown > 0 && base.v[sTTFT] > 0 {
		part := func(q float64) float64 { return rise * math.Min(math.Max(q/grown, 0), 1) / base.v[sTTFT] }
		e.inflowQueueShare = part(e.inflowQueue)
		// What names preemptions beside their share: the batch held back,
		// not the preempted requests' own second wait, and only as a part
		// of the queue as large as the one its time must reach (the
		// minimum change to name, a quarter to hold): in a queue of
		// seconds any sliver is material against the TTFT p90 (the
		// Poisson rank_imbalance: 0.6 % of 145 waiting, at a rank that
		// starved, named preemptions).
		if held := max(heldBack, servedLess); held >= e.queueShare*grown {
			if shrunk {
				e.memoryQueueShare = part(held)
			}
			if shown {
				e.memoryQueueShown = part(held)
			}
		}
	}
	ch, _ = compare(base.gMean[gWaiting]+e.inflowQueue, base.gMean[gWaiting], minChange)
	e.inflowQueueUp = ch == ChangeUp
}

// burstServed is the most requests a second that base's sub-windows
// started (dStarted), the bursts it served; its mean rate when their range
// is unknown.
func (base *stats) burstServed() float64 {
	mean := ratio(firstPositive(base.started, base.requests), base.seconds)
	if hi := base.subHi[dStarted]; base.phiWindows >= MinDispersionWindows && hi > mean {
		return hi
	}
	return mean
}

// queueGrowth is how fast the waiting requests grew from a to b (requests
// per second), each end read as the gauge's mean over the ring's slot that
// ends there (a ring keeps cumulative sums, not the gauge itself), a's
// over the slot after it when a is the ring's oldest point (the fine ring
// is pruned to the recent window, whose start is that point); NaN without
// two slots.
func queueGrowth(r *ring, a, b *point) float64 {
	if a == nil || b == nil || b.t <= a.t {
		return math.NaN()
	}
	n := len(r.pts)
	ia, ib := slices.Index(r.pts, a.t), slices.Index(r.pts, b.t)
	if ia < 0 || ib < 0 {
		return math.NaN() // not the ring's points
	}
	at := a
	if ia == 0 {
		ia, at = 1, nil
	}
	if ib <= ia {
		return math.NaN()
	}
	// the cumulative sums at each slot's ends, oldest first: a and b are
	// decoded, the ring keeps the point before its newest decoded, and a
	// walk decodes the window's first points, no further
	w := walker{r: r, at: -1}
	sums := func(i int) (sum, cnt float64) {
		p := &r.prev
		switch {
		case i == ib:
			p = b
		case i == ia && at != nil:
			p = at
		case i != n-2:
			p = w.to(i)
		}
		return p.gsum[gWaiting], p.gn[gWaiting]
	}
	s0, n0 := sums(ia - 1)
	s1, n1 := sums(ia)
	s2, n2 := sums(ib - 1)
	s3, n3 := sums(ib)
	from, to := ratio(s1-s0, n1-n0), ratio(s3-s2, n3-n2)
	return (to - from) / (float64(r.pts[ib]-r.pts[ia]) / nanosPerSecond)
}
