package diagnosis

import "testing"

// TestSimulatorRefusesAtTheCap: the simulator's engines refuse at their
// queue cap as a vLLM with --max-num-queued-reqs does, and the pod's page
// counts them (admission_rejections_total): an engine flooded at three
// times what it serves refuses about two thirds of its arrivals, and its
// queue never grows past the cap. Fails on the code before: the arrivals
// were turned away silently, the page counting none.
func TestSimulatorRefusesAtTheCap(t *testing.T) {
	l := simOverloadPod
	l.rate = 3 * simCapacity(l)
	pod := &simPod{engines: []*simEngine{newSimEngine(5, 0), newSimEngine(5, 1)}}
	for at := 1; at <= 120; at++ {
		for _, e := range pod.engines {
			e.run(float64(at), &l)
			if len(e.waiting) > simMaxWaiting+l.maxRunning {
				t.Fatalf("%d s: %d requests waiting, beyond the cap of %d and a batch preempted", at, len(e.waiting), simMaxWaiting)
			}
		}
	}
	o := pod.observe()
	started := o.TTFT.Counts[len(o.TTFT.Counts)-1]
	share := o.Rejections / (o.Rejections + started)
	if !(share > 0.55 && share < 0.75) {
		t.Errorf("flooded at 3x capacity for 2 minutes: %.0f refused, %.0f started (%.2f refused), want about two thirds refused", o.Rejections, started, share)
	}
}
