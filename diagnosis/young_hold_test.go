package diagnosis

import "testing"

// TestYoungIncidentHeldOverItsWindows: a named incident younger than
// HoldWindows recent windows whose symptom's test fails in the recent window
// is held while its windows since the reference ended still show the symptom
// at the undivided level (long), the recent window still shows the latency
// past the minimum change by its p90 at the buckets' conservative end and by
// its exact mean (shown), a cause it named still holds its own evidence, and
// the reference is current. It ends when any of these is gone. On the bursty
// simulator (seed 4) the queue drained between a client's batches at the
// latest scrape: TTFT 4.5x the reference at p = 0.012 (the pod's bursts
// widen the test by a φ of 40-87) ended a 12 s incident the next burst
// re-opened, unnamed for its 3 evaluations: queueing 7.3 -> 6.4 %,
// rank_imbalance 10.8 -> 8.5 %, overload 5.1 -> 3.7 % wrong or missing.
// Fails on main e14a458: the young incident ends at the first such
// evaluation.
func TestYoungIncidentHeldOverItsWindows(t *testing.T) {
	const w, b = 10, 300
	for _, c := range []struct {
		name                       string
		age                        int64
		shown, long, queue, recent bool
		held                       bool
	}{
		{name: "young, shown over its windows", age: 12, shown: true, long: true, queue: true, recent: true, held: true},
		{name: "the recent window back within the minimum change", age: 12, long: true, queue: true, recent: true},
		{name: "its windows no longer significant", age: 12, shown: true, queue: true, recent: true},
		{name: "no named cause holds", age: 12, shown: true, long: true, recent: true},
		{name: "a stale reference", age: 12, shown: true, long: true, queue: true},
		{name: "as old as the hold's windows", age: HoldWindows * w, shown: true, long: true, queue: true, recent: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			quiet, lenient, long := flatEvaluation(), flatEvaluation(), flatEvaluation()
			lenient.shown[yTTFT] = c.shown
			long.symptoms[yTTFT] = c.long
			if c.queue {
				// waiting up with a queue time that moves the TTFT p90 (queueing's rule)
				lenient.queueShare = 0.25 / 4
				lenient.change[sWaiting], lenient.inflowQueueUp, lenient.queueTimeUp, lenient.inflowQueueShare = ChangeUp, true, true, 1
				lenient.p[sWaiting] = 0.002 // not enough for the quiet hold of an older incident (α / 10)
			}
			quiet.alpha = 0.001
			var ref stats
			start := int64(1000)
			in := incidentState{uncausedSince: -1}
			in.open, in.named, in.start, in.chainStart, in.base = true, true, start, start, &ref
			in.baseEnd = start - w
			if !c.recent {
				in.baseEnd = start - w - 2*b
			}
			in.sym[yTTFT], in.cause[kQueueing] = hysteresis{on: true}, hysteresis{on: true}
			in.step(start+c.age, w, b, &quiet, &quiet, &lenient, &long, &ref, &ref, 0, in.baseEnd, 1<<60)
			if held := in.open && in.sym[yTTFT].on; held != c.held {
				t.Errorf("TTFT not significant in the recent window, %s: held %v (open %v), want %v", c.name, held, in.open, c.held)
			}
		})
	}
}

// TestReopenedIncidentNamedAtOnce: an incident that opens, on the strict
// evidence of a symptom the last named incident had, within HoldWindows
// recent windows of its end is that incident back: with a cause it had
// named on that cause's naming evidence it is named at once, as a relapse
// is, not HoldEvaluations later; a symptom it did not have, a cause
// without its naming evidence, or a re-opening after the hold's windows
// waits as a new incident does (a cause whose probation the ended incident
// left on resumes by its own rule: TestYoungBatchResumedOnStrictEvidence).
// On the bursty simulator, the 3 evaluations of each re-opened incident:
// seed 4 queueing 6.4 -> 5.6 %, rank_imbalance 8.5 -> 7.1 %, overload 3.7
// -> 2.7 % wrong or missing. Fails on main e14a458: the re-opened incident
// waits HoldEvaluations unnamed.
func TestReopenedIncidentNamedAtOnce(t *testing.T) {
	const w, b = 10, 300
	for _, c := range []struct {
		name       string
		after      int64
		itl, queue bool
		named      bool
	}{
		{name: "ttft_up 12 s after, queueing's evidence", after: 12, queue: true, named: true},
		{name: "ttft_up 12 s after, no queue", after: 12},
		{name: "itl_up 12 s after, queueing's evidence", after: 12, itl: true, queue: true},
		{name: "ttft_up after the hold's windows", after: HoldWindows*w + 1, queue: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := flatEvaluation()
			if c.itl {
				up.change[sITL], up.symptoms[yITL] = ChangeUp, true
			} else {
				up.change[sTTFT], up.symptoms[yTTFT] = ChangeUp, true
			}
			if c.queue {
				up.queueShare = 0.25
				up.change[sWaiting], up.inflowQueueUp, up.queueTimeUp, up.inflowQueueShare = ChangeUp, true, true, 1
			}
			var ref stats
			end := int64(1000)
			in := incidentState{uncausedSince: -1, ended: true, endedAt: end}
			in.endedSym[yTTFT], in.endedCauses[kQueueing] = true, true
			in.step(end+c.after, w, b, &up, &up, &up, nil, &ref, &ref, 0, end-w, 1<<60)
			if named := in.open && in.named && in.cause[kQueueing].on; named != c.named {
				t.Errorf("%s: named with queueing at its first evaluation %v (open %v, named %v), want %v", c.name, named, in.open, in.named, c.named)
			}
		})
	}
}
