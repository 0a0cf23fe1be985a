package diagnosis

import (
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// TestResumedBatchHeldAsTheIncidentItResumed: a batch 2x (16 running
// against 8) slows the steps 1.4x for 200 s and is named batch_growth; the
// steps come back (the batch stays 2x) and the incident ends on the batch's
// probation; they slow 1.4x again for 40 s and the incident resumes at
// once, batch_growth carried; then they dip to 1.2x (under the minimum
// change, over half way to it) for 2 minutes with the batch still 2x. The
// resumed incident is as old as the one it resumed: the batch's evidence
// holds it through the dip, as it held the first. Fails on the code before:
// the resumed incident counted its age from its resumption, the hold that
// keeps a burst out waited HoldWindows recent windows again, and the
// incident ended at the dip's first evaluation under the minimum change
// (held-out seed 12's batch_growth on the bursty simulator: resumed and
// ended every second, 3 of its missed polls).
func TestResumedBatchHeldAsTheIncidentItResumed(t *testing.T) {
	slow := healthy
	slow.running, slow.itl = 16, 0.07
	back := slow
	back.itl = healthy.itl
	dip := slow
	dip.itl = 0.06
	f := fed(t, testOpts, phase{11 * 60, healthy}, phase{200, slow})
	if got := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth]; got != 1 {
		t.Fatalf("batch_growth not named after 200 s of the batch 2x and the steps 1.4x (%v)", got)
	}
	ended := false
	f.feed(120, back, func([]exposition.Family) {
		ended = ended || !f.d.tracks["m"].inc.open
	})
	if !ended || !f.d.tracks["m"].inc.batched() {
		t.Fatalf("the steps back with the batch 2x: ended %v, on the batch's probation %v; want both", ended, f.d.tracks["m"].inc.batched())
	}
	f.feed(40, slow, nil)
	if got := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth]; got != 1 {
		t.Fatalf("batch_growth not named 40 s after the steps slowed again on the batch's probation (%v)", got)
	}
	named := 0
	f.feed(120, dip, func(fams []exposition.Family) {
		if values(fams, FamilyCause, "cause")[CauseBatchGrowth] == 1 {
			named++
		}
	})
	if named < 120 {
		t.Errorf("batch_growth named in %d of the dip's 120 evaluations (the steps 1.2x, the batch 2x), want all: the resumed incident is as old as the one it resumed, and the batch's evidence holds it", named)
	}
}
