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
