package diagnosis

import "testing"

// TestRefusalEpisodeIsNoLatencyReference: a pod whose TTFT bursts (one
// second in six of a window at 2x) is overloaded at its queue cap: half
// its attempts refused, its TTFT at the bursts' level in every window, so
// that no window alone is a change. While admission is named outside an
// incident, the latency is judged against the time before the refusals,
// never against the refusals' own: after six minutes its TTFT p90
// reference is still the pre-refusal one. Fails on the code before: the
// rolling baseline took the refusing time in (the self-exciting simulator
// at 80 %, seed 1: the TTFT p90 reference climbed 13 -> 38 s in four
// minutes and the overload, truly 2.4-2.8x, read 0.86-1.12x).
func TestRefusalEpisodeIsNoLatencyReference(t *testing.T) {
	f := newFeeder(t, testOpts)
	// the pod's own bursts: 10 s at 2x the TTFT every 100 s
	for i := range 12 * 60 {
		s := healthy
		if i%100 < 10 {
			s.ttft = 0.3
		}
		f.feed(1, s, nil)
	}
	before := *f.d.Report().Models[0].Steps[0].Signals[0].Baseline
	named := 0
	for i := range 6 * 60 {
		s := refusing(4)
		if i%6 == 0 {
			s.ttft = 0.3
		}
		f.feed(1, s, nil)
		if f.admissionNamed() {
			named++
		}
	}
	if named < 5*60 {
		t.Fatalf("admission named in %d of the 360 polls refusing half the attempts of a pod that refused none, the test needs it named", named)
	}
	sig := f.d.Report().Models[0].Steps[0].Signals[0]
	if after := *sig.Baseline; after > 1.1*before {
		t.Errorf("after 6 minutes refusing, the %s reference is %.3g against %.3g before the refusals (recent %.3g): it took the refusing time in", sig.Signal, after, before, *sig.Recent)
	}
}
