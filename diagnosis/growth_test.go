package diagnosis

import (
	"math"
	"testing"
)

// TestQueueGrowthReadOverTheRecentWindow: the queue's growth that
// splitQueue adds to the requests started (the arrivals) is read from the
// fine ring as the Diagnoser keeps it, pruned to the recent window: a queue
// growing by half a request a second reads 0.5 a second, and a standing
// one 0. Fails on the code before: the ring's oldest point is the recent
// window's start, the growth read the queue there from the point before
// it, which pruning had dropped, and was NaN at every evaluation (the
// arrivals were the requests started alone: a burst's queue building up
// counted as no arrival).
func TestQueueGrowthReadOverTheRecentWindow(t *testing.T) {
	growth := func(rise float64) float64 {
		f := fed(t, testOpts, phase{640, healthy})
		s := healthy
		for k := range 120 {
			s.waiting = healthy.waiting + rise*float64(k)
			f.feed(1, s, nil)
		}
		var tr *track
		for _, x := range f.d.tracks {
			tr = x // the test pod's one model
		}
		now := tr.fine.newest()
		a := tr.fine.atOrBefore(now.t - int64(testOpts.Window))
		return queueGrowth(&tr.fine, a, now)
	}
	if g := growth(0.5); !(math.Abs(g-0.5) <= 0.05) {
		t.Errorf("a queue growing by 0.5 requests a second read %.3g a second over the recent window, want 0.5", g)
	}
	if g := growth(0); !(math.Abs(g) <= 0.01) {
		t.Errorf("a standing queue read %.3g requests a second of growth, want 0", g)
	}
}
