package diagnosis

import (
	"testing"
	"time"
)

// TestThinReferenceWidensItsDispersion: two incidents a short calm apart,
// more than a baseline after the pod's start, leave the second one a
// starved reference: under half a baseline of incident-free time in two
// stretches (the first minute and the calm after the first incident), its
// dispersion measured on a dozen sub-windows. The tests take the upper
// bound of what those allow, not the estimate itself. A reference of half
// a baseline or more, or a young pod's, keeps its estimate.
// Fails on the code before: the thin reference's φ was its stretches' own
// 1 (issue 30, bursty seed 12 at 65 %: 115 s in three stretches, five
// sub-windows, named the pod's own bursts at p = 0.0003).
func TestThinReferenceWidensItsDispersion(t *testing.T) {
	opts := Options{Window: 10 * time.Second, Baseline: 5 * time.Minute, MinChange: 0.25, Interval: time.Second}
	second := func(f *feeder, first, calm int) (*stats, int) {
		f.feed(first, overload, nil)
		if got := values(f.fams, FamilyCause, "cause")[CauseQueueing]; got != 1 {
			t.Fatalf("first incident not named queueing: %v", values(f.fams, FamilyCause, "cause"))
		}
		f.feed(calm, healthy, nil)
		if in := f.d.tracks["m"].inc; in.open {
			t.Fatalf("first incident still open after %d s of calm", calm)
		}
		f.feed(30, overload, nil)
		in := f.d.tracks["m"].inc
		if !in.open || in.baseStretches < 2 {
			t.Fatalf("second incident open %v on %d stretches, want open on the calm before and after the first", in.open, in.baseStretches)
		}
		return in.base, int((in.baseEnd - in.baseStart) / int64(time.Second))
	}
	f := newFeeder(t, opts)
	f.feed(70, healthy, nil)
	thin, span := second(f, 200, 90)
	if thin.seconds >= opts.Baseline.Seconds()/2 || thin.phiWindows < MinDispersionWindows {
		t.Fatalf("reference of %.0f s (spanning %d s) on %d sub-windows, want under half the baseline, measured", thin.seconds, span, thin.phiWindows)
	}
	for _, i := range []int{sTTFT, sTTFTMean, sWaiting} {
		// the healthy pod's own φ is 1; its bound on 12 sub-windows 1.35
		if !(thin.phi[i] >= 1.3) {
			t.Errorf("signal %d: φ %.2f on a reference of %.0f s and %d sub-windows, want its upper bound (≥ 1.3)", i, thin.phi[i], thin.seconds, thin.phiWindows)
		}
	}
	f = newFeeder(t, opts)
	f.feed(70, healthy, nil)
	full, _ := second(f, 200, 220)
	if full.seconds < opts.Baseline.Seconds()/2 {
		t.Fatalf("reference of %.0f s after 220 s of calm, want at least half the baseline", full.seconds)
	}
	for _, i := range []int{sTTFT, sTTFTMean, sWaiting} {
		if full.phi[i] != 1 {
			t.Errorf("signal %d: φ %.2f on a reference of %.0f s, want the healthy pod's own 1", i, full.phi[i], full.seconds)
		}
	}
	// a young pod's (its incidents within a baseline of its start) is
	// short, not starved: it keeps its estimate
	f = newFeeder(t, opts)
	f.feed(70, healthy, nil)
	young, span := second(f, 60, 90)
	if young.seconds >= opts.Baseline.Seconds()/2 || span >= int(opts.Baseline.Seconds()) {
		t.Fatalf("reference of %.0f s spanning %d s, want under half a baseline within one", young.seconds, span)
	}
	for _, i := range []int{sTTFT, sTTFTMean, sWaiting} {
		if young.phi[i] != 1 {
			t.Errorf("signal %d: φ %.2f on a young pod's reference of %.0f s, want its own 1", i, young.phi[i], young.seconds)
		}
	}
}
