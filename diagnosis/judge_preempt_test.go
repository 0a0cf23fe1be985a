package diagnosis

import (
	"testing"
	"time"
)

// TestJudgeTakesPreemptionsOverTheHeldWindows: the judge's truth of
// preemptions reads the windows a named cause is held by as the diagnosis
// holds them. A 10 s window with 4 preemptions after a baseline of one in
// 100 s (its 10 s windows reach 1) truly preempted; 15 s later the recent
// window holds 0 and the 30 s since the window of 4 still hold 4 against a
// background of 0.3 and bursts of 1 over 30 s: preemptions are truly up
// there, not blamed; once those 30 s hold none, they are not. Fails on the
// code before: the truth read the recent window alone (the self-exciting
// long_prompts shift, seed 11: 14 polls held over the windows of a
// clump of 4 counted wrong).
func TestJudgeTakesPreemptionsOverTheHeldWindows(t *testing.T) {
	tr := &simTruth{window: 10 * time.Second, baseline: 300 * time.Second, shift: 400 * time.Second}
	c := 0.0
	for s := range 600 {
		switch {
		case s < 400 && s%100 == 50:
			c++ // the background: one in 100 s
		case s >= 420 && s < 424:
			c++ // the clump: 4 in 4 s
		}
		tr.plog = append(tr.plog, c)
	}
	for _, x := range []struct {
		i    int
		want bool
		why  string
	}{
		{425, true, "the recent window holds the clump of 4"},
		{440, true, "the recent window holds none, the 30 s held hold the 4"},
		{460, false, "the 30 s held hold none"},
		{390, false, "before the shift"},
	} {
		if got := tr.preemptUp(x.i); got != x.want {
			t.Errorf("poll at %d s: preemptions truly up %t, want %t (%s)", x.i+1, got, x.want, x.why)
		}
	}
}
