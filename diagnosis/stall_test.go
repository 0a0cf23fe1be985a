package diagnosis

import (
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// TestStallIsNoReference: a KV cache cut so deep that the pod all but stops
// finishing requests (0.1 a second, too little traffic to judge, while 300
// wait and 5 preemptions a second fall) and then serves a few (1 a second,
// TTFT 5 s, 300 waiting, a preemption a second) is judged against the time
// before the cut: the stall is no incident-free time, whether the pod
// queued little before it or already held 250 waiting (the self-exciting
// simulator at 90 %: 276 before the cut, 306 in it). Fails on the code
// before: the stall's 150 s joined the 10-minute reference (1.25
// preemptions a second) and preemptions were named in 0 of 285 judged
// evaluations of the served cut (the self-exciting simulator's KV cut at
// 65 %, seed 1: the first 70 s of the cut joined the reference,
// preemptions read 0.3x and were never named, 98.9 % wrong or missing).
func TestStallIsNoReference(t *testing.T) {
	for _, before := range []float64{1, 250} {
		base := healthy
		base.waiting = before
		f := fed(t, testOpts, phase{700, base})
		stall := base
		stall.requests, stall.ttft, stall.running, stall.waiting, stall.kv, stall.preemptions = 0.1, 5, 1, 300, 0.95, 5
		lowTraffic := 0
		f.feed(150, stall, func([]exposition.Family) {
			// judged on its throughput or not, a stall
			if f.d.Report().Models[0].Readiness.Stall {
				lowTraffic++
			}
		})
		if lowTraffic < 80 {
			t.Fatalf("%v waiting before: the stall read as one in %d of 150 evaluations, want at least 80 (the window holds the stall from 57 s on): the test does not test a stall", before, lowTraffic)
		}
		served := stall
		served.requests, served.running, served.preemptions = 1, 2, 1
		named, judged := 0, 0
		f.feed(300, served, func(fams []exposition.Family) {
			if f.d.Report().Models[0].Readiness.State != ReadyOK {
				return
			}
			judged++
			if values(fams, FamilyCause, "cause")[CausePreemptions] == 1 {
				named++
			}
		})
		if judged < 200 || named < judged*9/10 {
			t.Errorf("%v waiting before: preemptions named in %d of %d judged evaluations of the served cut (1 a second against none before it), want at least 90 %%", before, named, judged)
		}
	}
	// A quiet pod (too little traffic, its queue empty) keeps its time:
	// the same 150 s at 0.1 requests a second with nothing waiting still
	// joins the reference as before.
	q := fed(t, testOpts, phase{700, healthy})
	quiet := healthy
	quiet.requests, quiet.waiting = 0.1, 0
	q.feed(150, quiet, nil)
	if q.d.tracks["m"].stalled {
		t.Errorf("a quiet pod (0.1 requests a second, nothing waiting) was read as a stall")
	}
}
