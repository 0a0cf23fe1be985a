package diagnosis

import (
	"testing"
	"time"
)

// rankWindow feeds a topoState one scrape a second over a recent window of
// 10 s, rank 0 at its running and no queue, rank 1 at its running with the
// queue waiting(s) at second s, and evaluates the rank finding at the end.
func rankWindow(run0, run1 float64, waiting func(s int) float64) topoEval {
	const w = int64(10 * time.Second)
	var ts topoState
	res := int64(time.Second)
	var t int64
	for s := 0; s <= 10; s++ {
		t = int64(s) * res
		ts.observe(t, &Observation{Engines: []EngineLoad{{Engine: "0", Running: run0}, {Engine: "1", Running: run1, Waiting: waiting(s)}}}, res)
	}
	var e topoEval
	ts.ranks(&e, 0, t, w, 0.25, 0.01/4, 0.01)
	return e
}

// TestRankDrainingQueueNotNamed: a rank whose queue drains within the
// window while the other has room is the pod's own burst ending (the
// bursty simulator at 90 %, seeds 2 and 5: rank_imbalance named 8-10 s at a
// time, the queue already gone, no latency moved); the window's mean still
// reads it queueing. It is not named, but a named finding holds on it. A
// queue that stays names as before. On main the drain was named (strict).
func TestRankDrainingQueueNotNamed(t *testing.T) {
	// rank 1's queue of 125 drains to nothing over the window (seed 2 at
	// 90 %, 18m58s-19m11s), rank 0 runs 150 with none waiting
	drain := rankWindow(150, 240, func(s int) float64 { return max(0, 125-12.5*float64(s)) })
	if drain.strict[0] {
		t.Errorf("a queue that drained within the window names rank_imbalance (queued %v, idle %v)", drain.queued, drain.idle)
	}
	if !drain.hold[0] {
		t.Error("a named rank_imbalance is no longer held on the window's load while its queue drains")
	}
	// a queue that stays
	stays := rankWindow(150, 240, func(s int) float64 { return 60 })
	if !stays.strict[0] || len(stays.queued) != 1 || stays.queued[0] != "1" {
		t.Errorf("a rank queueing 60 all along beside an idle one is not named: strict %v, queued %v", stays.strict[0], stays.queued)
	}
	// a queue that empties at the latest scrape only
	gone := rankWindow(150, 240, func(s int) float64 {
		if s == 10 {
			return 0
		}
		return 60
	})
	if gone.strict[0] {
		t.Error("a rank with no queue at the latest scrape is named as queueing")
	}
}
