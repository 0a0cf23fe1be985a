package diagnosis

import "testing"

// TestResumedQueueHeldAsTheIncidentItResumed: an overload named queueing
// for 40 s (over HoldWindows recent windows) ends once its queue drained,
// the calm on queueing's probation; the TTFT rises again at the undivided
// level with the queue back and the incident resumes, queueing carried.
// Its TTFT comes back while requests still wait: the resumed incident is
// as old as the one it resumed, so the queue's evidence holds it (as it
// held the first, and as the batch's holds a resumed batch:
// TestResumedBatchHeldAsTheIncidentItResumed); once the queue drains it
// ends, however young, with the calm on queueing's probation again. Fails
// on the code before: the resumed incident counted its age from its
// resumption, ended at the TTFT's first return with requests waiting, and
// left no probation, so the overload's next rise waited to be named anew.
func TestResumedQueueHeldAsTheIncidentItResumed(t *testing.T) {
	strict, lenient := flatEvaluation(), flatEvaluation()
	strict.queueShare, lenient.queueShare = 0.25, 0.25/4
	lenient.change[sTTFT], lenient.symptoms[yTTFT] = ChangeUp, true
	lenient.change[sWaiting], lenient.inflowQueueUp, lenient.queueTimeUp, lenient.inflowQueueShare = ChangeUp, true, true, 1
	queue := flatEvaluation()
	queue.queueShare = lenient.queueShare
	queue.change[sWaiting], queue.inflowQueueUp, queue.queueTimeUp, queue.inflowQueueShare = ChangeUp, true, true, 1
	quiet := flatEvaluation()
	var ref stats
	const w, b = 10, 50
	// an overload named queueing from 0 to 40 whose queue then drained
	in := incidentState{uncausedSince: -1}
	in.open, in.named, in.start, in.base = true, true, 0, &ref
	in.sym[yTTFT], in.cause[kQueueing] = hysteresis{on: true}, hysteresis{on: true}
	k := int64(40)
	for ; in.open; k++ {
		in.step(k, w, b, &quiet, &quiet, &quiet, nil, nil, &ref, 0, 0, 1<<60)
	}
	if !in.probationOf(kQueueing).on {
		t.Fatal("the overload ended 40 s old with no queueing probation")
	}
	// the TTFT up at the undivided level with the queue back: resumed
	start := k
	for ; k < start+HoldEvaluations; k++ {
		in.step(k, w, b, &strict, &strict, &lenient, nil, nil, &ref, 0, 0, 1<<60)
	}
	if !in.open || !in.named || !in.cause[kQueueing].on {
		t.Fatalf("after %d evaluations of ttft_up with the queue on queueing's probation: open %v, named %v, queueing %v; want resumed",
			HoldEvaluations, in.open, in.named, in.cause[kQueueing].on)
	}
	// the TTFT back, the requests still waiting: held by the queue
	for ; k < start+2*HoldEvaluations; k++ {
		in.step(k, w, b, &quiet, &quiet, &queue, nil, nil, &ref, 0, 0, 1<<60)
		if !in.open || !in.quiet || !in.cause[kQueueing].on {
			t.Fatalf("%d s after the resumption (under HoldWindows recent windows), the TTFT back with requests waiting: open %v, held %v, queueing %v; want held by the queue as the incident it resumed",
				k-start, in.open, in.quiet, in.cause[kQueueing].on)
		}
	}
	// the queue drained: it ends, on queueing's probation again
	for ; in.open && k < start+HoldWindows*w; k++ {
		in.step(k, w, b, &quiet, &quiet, &quiet, nil, nil, &ref, 0, 0, 1<<60)
	}
	if in.open || !in.probationOf(kQueueing).on {
		t.Errorf("the resumed overload, its queue drained %d s after the resumption: open %v, queueing's probation %v; want ended on probation", k-start, in.open, in.probationOf(kQueueing).on)
	}
}
