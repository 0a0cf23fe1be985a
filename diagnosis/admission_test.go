package diagnosis

import (
	"math/rand/v2"
	"testing"
	"time"
)

// refusing is healthy with n requests a second refused at admission.
func refusing(n float64) second {
	s := healthy
	s.refused = n
	return s
}

// admissionNamed says whether the last families name admission.
func (f *feeder) admissionNamed() bool {
	return values(f.fams, FamilyCause, "cause")[CauseAdmission] == 1
}

// admissionTopo is the model's topology state (one model fed).
func (f *feeder) admissionTopo() *topoState {
	for _, tr := range f.d.tracks {
		return &tr.topo
	}
	return nil
}

// TestAdmissionBurstsOfTheBaselineAreNoChange: a pod whose bursts reach its
// queue cap refuses in bursts (20 s refusing 3 of every 7 attempts, one
// every 90 to 150 s at random), the latency flat. A
// recent window holding one such burst refuses about 20 % of its attempts
// against the baseline's 11 %: independent refusals would make that
// p < 0.001, but the baseline shows a burst of that size every two minutes,
// so it is no change (issue 30) and admission is never named. Fails on the
// code before (Fisher's test on refusals as independent events: named at
// most bursts, as on the bursty simulator at 90 % of capacity, seed 10,
// where admission was named in 9 % of the overload's steady polls without
// the refused share truly rising).
func TestAdmissionBurstsOfTheBaselineAreNoChange(t *testing.T) {
	f := newFeeder(t, testOpts)
	rng := rand.New(rand.NewPCG(30, 30))
	named := 0
	f.refusalBursts(32*60, 90, 60, rng, func(k int) {
		if k >= 12*60 && f.admissionNamed() {
			named++
		}
	})
	if named > 0 {
		t.Errorf("admission named in %d of the 1200 polls of a pod refusing in the bursts its baseline shows every two minutes, want none", named)
	}
}

// TestAdmissionClearsWithItsEvidence: named, admission is held by its own
// evidence at the undivided α and clears at the first evaluation where that
// evidence is gone, as an incident's causes do (issue 30: holds with
// evidence), not HoldEvaluations evaluations later. Fails on the code
// before: held two more evaluations by the hysteresis (on the bursty
// simulator at 90 %, seed 10, admission named on 53 polls of the steady
// hour whose windows refused nothing more).
func TestAdmissionClearsWithItsEvidence(t *testing.T) {
	f := fed(t, testOpts, phase{11 * 60, healthy}, phase{3 * 60, refusing(2)})
	if !f.admissionNamed() {
		t.Fatal("admission not named after 3 minutes refusing a third of the attempts of a pod that refused none")
	}
	k := admissionIndex()
	for i := range 2 * 60 {
		f.feed(1, healthy, nil)
		held := f.admissionTopo().last.hold[k]
		if !held && f.admissionNamed() {
			t.Fatalf("%d s after the refusals stopped: the evidence is gone (recent %.3g, baseline %.3g, p %.3g) and admission is still named", i+1,
				f.admissionTopo().last.recent[zRefused], f.admissionTopo().last.base[zRefused], f.admissionTopo().last.p[zRefused])
		}
		if held && !f.admissionNamed() {
			t.Fatalf("%d s after the refusals stopped: cleared while its evidence holds", i+1)
		}
	}
	if f.admissionNamed() {
		t.Error("admission still named two minutes after the refusals stopped")
	}
}

func admissionIndex() int { return causeIndex(CauseAdmission) }

// TestAdmissionThroughAGap: a pod refusing a third of its attempts for 12
// minutes (longer than the 10-minute baseline), its latency flat, so no
// incident freezes the reference; the finding keeps its own. A gap of 5 s
// in the scrapes (an engine restart) makes the model not ready for a while;
// once ready again the refusals are still judged against the time before
// them, and admission is named again after HoldEvaluations evaluations.
// Fails on the code before: not being ready dropped the finding's frozen
// baseline, the reference became the last ten minutes, nearly all of them
// refusing, and admission was never named again (the bursty simulator at
// 90 %, seed 10: unnamed for the overload's last six minutes after the
// restart).
func TestAdmissionThroughAGap(t *testing.T) {
	f := fed(t, testOpts, phase{11 * 60, healthy}, phase{9 * 60, refusing(2)})
	if !f.admissionNamed() {
		t.Fatal("admission not named after 9 minutes refusing a third of the attempts")
	}
	f.i += 5 // no scrape for 5 s
	missed, readyFor, notReady := 0, 0, 0
	for range 3 * 60 {
		f.feed(1, refusing(2), nil)
		if values(f.fams, FamilyReady, "")[""] != 1 {
			readyFor = 0
			notReady++
			continue
		}
		if readyFor++; readyFor > HoldEvaluations && !f.admissionNamed() {
			missed++
		}
	}
	if notReady == 0 {
		t.Fatal("never not ready after the gap: the test needs the gap to count")
	}
	if missed > 0 {
		t.Errorf("admission not named in %d ready polls (after the first %d of each ready stretch) of the 3 minutes after the gap, while the pod refuses a third of its attempts against none before, want none", missed, HoldEvaluations)
	}
}

// TestTTFTPinnedAtTheQueueCap: a pod refusing at its queue cap in both
// windows waits the cap's time: its slowest tenth of first tokens sit in a
// narrow spike, here 0.19 s and then 0.21 s (1.1x), across the 0.2 s bound.
// Interpolated inside the (0.2, 0.4] bucket the recent p90 reads 0.33 s,
// 1.7x; at the conservative end of what the buckets allow it is no change
// (0.2 / 0.2), and ttft_up is never named. The same pod refusing nothing
// keeps the interpolated reading (the control: the rule is the refusals').
// Fails on the code before: ttft_up named (the bursty simulator at 90 %,
// seeds 10 and 11: 3.89 % and 1.25 % of the overload's steady polls named
// a symptom, the TTFT p90 read 1.49x across 5 s at a true 1.04-1.24x).
func TestTTFTPinnedAtTheQueueCap(t *testing.T) {
	for _, refused := range []float64{1, 0} {
		rng := rand.New(rand.NewPCG(3, 3))
		at := func(tail float64) second {
			s := healthy
			s.refused = refused
			// three of four at 0.12-0.18 s, one at the spike
			s.ttfts = []float64{0.12 + 0.06*rng.Float64(), 0.12 + 0.06*rng.Float64(), 0.12 + 0.06*rng.Float64(), tail}
			return s
		}
		f := newFeeder(t, testOpts)
		for range 11 * 60 {
			f.feed(1, at(0.19), nil)
		}
		symptom := 0
		for range 3 * 60 {
			f.feed(1, at(0.21), nil)
			if values(f.fams, FamilySymptom, "symptom")[SymptomTTFTUp] == 1 {
				symptom++
			}
		}
		switch {
		case refused > 0 && symptom > 0:
			t.Errorf("refusing at its cap in both windows: ttft_up named in %d of 180 polls of a spike 1.1x across a bound, want none", symptom)
		case refused == 0 && symptom == 0:
			t.Errorf("refusing nothing: ttft_up never named, want the interpolated reading kept (the control)")
		}
	}
}

// TestTTFTStrayRefusalNotPinned: the pod of TestTTFTPinnedAtTheQueueCap
// refusing one request a minute (one of every 241 attempts, in both
// windows) has no queue at its cap: its slowest tenth of first tokens is
// its own, and the TTFT p90 keeps the interpolated reading, ttft_up named
// in as many polls as the same pod refusing nothing. Refusing three a
// minute (1.2 %, above pinnedShare) is a queue at its cap again: never
// named. Fails on the code before, which took any refusal in both windows
// as the pin: ttft_up named in none of the 180 polls of the 1.1x spike
// where the control names it.
func TestTTFTStrayRefusalNotPinned(t *testing.T) {
	var polls [3]int // refusing nothing, one a minute, three a minute
	for i, every := range []int{0, 60, 20} {
		rng := rand.New(rand.NewPCG(3, 3))
		n := 0
		at := func(tail float64) second {
			s := healthy
			if n++; every > 0 && n%every == 0 {
				s.refused = 1
			}
			s.ttfts = []float64{0.12 + 0.06*rng.Float64(), 0.12 + 0.06*rng.Float64(), 0.12 + 0.06*rng.Float64(), tail}
			return s
		}
		f := newFeeder(t, testOpts)
		for range 11 * 60 {
			f.feed(1, at(0.19), nil)
		}
		for range 3 * 60 {
			f.feed(1, at(0.21), nil)
			if values(f.fams, FamilySymptom, "symptom")[SymptomTTFTUp] == 1 {
				polls[i]++
			}
		}
	}
	if polls[0] == 0 {
		t.Fatal("refusing nothing: ttft_up never named on the spike 1.1x across a bound read inside its bucket, the control of this test")
	}
	if polls[1] != polls[0] {
		t.Errorf("refusing one request a minute (0.4 %% of the attempts): ttft_up named in %d of 180 polls, want %d as refusing nothing (the interpolated reading: a stray refusal is no queue at its cap)", polls[1], polls[0])
	}
	if polls[2] > 0 {
		t.Errorf("refusing three requests a minute (1.2 %% of the attempts): ttft_up named in %d of 180 polls of a spike 1.1x across a bound, want none (the queue pinned at its cap)", polls[2])
	}
}

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

// burstyRefusals feeds n seconds of the pod refusing in bursts (20 s
// refusing 3 of every 7 attempts, one every 90 to 150 s at random, the
// latency flat), each seeing the burst it is in (0: none).
func (f *feeder) burstyRefusals(n int, rng *rand.Rand, each func(burst int)) {
	next, bursts := 0, 0
	for k := range n {
		if k == next {
			next += 90 + rng.IntN(60)
			bursts++
		}
		s, in := healthy, 0
		if k >= next-20 {
			s, in = refusing(3), bursts
		}
		f.feed(1, s, nil)
		if each != nil {
			each(in)
		}
	}
}

// episodeThenLull feeds a pod refusing in bursts (burstyRefusals, 12
// minutes), then 4 minutes overloaded at its queue cap refusing half its
// attempts (admission named: a refusal episode), then a lull of 75 s
// refusing nothing that clears it, and returns the overload's state.
func (f *feeder) episodeThenLull(t *testing.T) (over second) {
	t.Helper()
	f.burstyRefusals(12*60, rand.New(rand.NewPCG(30, 30)), nil)
	over = refusing(4)
	f.feed(4*60, over, nil)
	if !f.admissionNamed() {
		t.Fatal("admission not named after 4 minutes refusing half the attempts of a pod whose bursts refuse a fifth of a window's: the test needs the episode")
	}
	f.feed(75, healthy, nil)
	if f.admissionNamed() {
		t.Fatal("admission still named after 75 s refusing nothing: the test needs the lull to clear it")
	}
	return over
}

// TestAdmissionOverloadResumesAfterALull: a pod refusing in bursts (its
// baseline's share about 10 %, a burst's window 20 %) is overloaded at its
// queue cap, half its attempts refused for 4 minutes, its latency flat:
// admission is named. A lull of 75 s refuses nothing, admission clears and
// its frozen baseline thaws; the overload resumes. The resumed refusals are
// judged against the time before the overload, never against the overload
// itself, and admission is named again. Fails on the code before: the
// thawed reference was the last ten minutes, four of them refusing half
// the attempts, and admission was never named in the 5 minutes after the
// lull (the bursty simulator at 90 %, seeds 10-12: wrong or missing in
// 64.9 %, 98.1 %, 79.5 % of the overload's judged polls).
func TestAdmissionOverloadResumesAfterALull(t *testing.T) {
	f := newFeeder(t, testOpts)
	over := f.episodeThenLull(t)
	window := int(testOpts.Window / time.Second)
	missed := 0
	for i := range 5 * 60 {
		f.feed(1, over, nil)
		if i >= window && !f.admissionNamed() {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("the overload resumed after a lull: admission not named in %d of the %d polls after its first recent window, want none", missed, 5*60-window)
	}
}

// TestAdmissionBurstsAfterACalmStart: a pod that refused nothing for 12
// minutes begins refusing in bursts (20 s refusing 3 of every 7 attempts,
// one every 90 to 150 s). The first bursts are a change and may be named;
// once a baseline of them has passed they are the pod's normal, and none
// is named. A burst named is kept out of the findings' reference only
// while it lasts longer than the calm after it, as an overload's lulls
// are: a reference that kept every named burst out of it (a calm of
// HoldWindows recent windows asked before its time joined) had no burst
// in it, and named every one of the 20.
func TestAdmissionBurstsAfterACalmStart(t *testing.T) {
	f := newFeeder(t, testOpts)
	f.feed(12*60, healthy, nil)
	start := f.i
	late := map[int]bool{}
	f.burstyRefusals(40*60, rand.New(rand.NewPCG(30, 30)), func(burst int) {
		if f.i-start > int(testOpts.Baseline/time.Second) && f.admissionNamed() {
			late[burst] = true
		}
	})
	if len(late) > 0 {
		t.Errorf("admission named at %d bursts after a baseline of the pod's bursts, want none", len(late))
	}
}

// TestAdmissionSustainedWithinTheBurstsRange: a pod refusing in bursts of
// one recent window (20 s refusing 3 of every 7 attempts, one every 60 to
// 100 s) is overloaded at its queue cap: a minute refusing two thirds of
// its attempts (named), then 4 minutes refusing half, more than any
// window of the baseline but, one window at a time, within what the pod's
// bursts widen the test by (p > 0.01), its latency flat. The bursts last
// a window, the overload minutes: over the last HoldWindows windows it
// refuses more than any HoldWindows of the baseline did, significantly at
// that scale, and admission stays named. The bursts that follow once the
// load returned are not named. Fails on the code before: cleared 15 s
// into the half refused and never named again (the bursty simulator at
// 90 %, seeds 10-12: the overload missed in 31.2 %, 85.0 %, 48.1 % of its
// judged polls, most of them windows refusing under 45 % of their
// attempts where the pod's bursts reached 33-45 %).
func TestAdmissionSustainedWithinTheBurstsRange(t *testing.T) {
	f, rng := windowBurstsOnset(t)
	missed, judged, named := f.heldPastTheOnset(0, refusing(4), func(each func()) { f.windowBursts(10*60, rng, each) })
	if missed > 0 {
		t.Errorf("overloaded 4 minutes refusing half the attempts of a pod whose bursts of a window refuse 3 of 7: admission not named in %d of the %d polls, want none", missed, judged)
	}
	if named > 0 {
		t.Errorf("admission named in %d of the 600 polls of the pod's bursts after the overload, want none", named)
	}
}

// windowBursts feeds n seconds of a pod refusing in bursts of 20 s, one
// every 60 to 100 s, calling each after every second.
func (f *feeder) windowBursts(n int, rng *rand.Rand, each func()) {
	f.refusalBursts(n, 60, 40, rng, func(int) {
		if each != nil {
			each()
		}
	})
}

// refusalBursts feeds n seconds of a pod refusing in bursts of 20 s (3 of
// every 7 attempts), one every gap to gap+spread seconds, calling each
// with the second's index after it.
func (f *feeder) refusalBursts(n, gap, spread int, rng *rand.Rand, each func(k int)) {
	next := 0
	for k := range n {
		if k == next {
			next += gap + rng.IntN(spread)
		}
		s := healthy
		if k >= next-20 {
			s = refusing(3)
		}
		f.feed(1, s, nil)
		each(k)
	}
}

// TestAdmissionNotHeldByTheSpanOnceTheRefusalsFell: named on a minute
// refusing two thirds of the attempts of a pod whose bursts refuse 3 of 7,
// admission is not held by the last HoldWindows windows, which still hold
// that minute, once the recent window refuses a fifth: more than the
// baseline's pooled share, but within the pod's bursts and less than the
// span by more than the minimum change. It clears with its own evidence,
// as TestAdmissionClearsWithItsEvidence asks. Held by the span on the
// recent window's rise over the pooled share alone, admission stayed named
// through the whole span (and on the bursty simulator at 90 % of capacity,
// seeds 1, 2, 4 and 10-12 named causes in their steady hours).
func TestAdmissionNotHeldByTheSpanOnceTheRefusalsFell(t *testing.T) {
	opts := testOpts
	opts.Window = 20 * time.Second
	f := newFeeder(t, opts)
	f.windowBursts(12*60, rand.New(rand.NewPCG(31, 31)), nil)
	f.feed(60, refusing(8), nil)
	if !f.admissionNamed() {
		t.Fatal("admission not named after a minute refusing two thirds of the attempts: the test needs it named")
	}
	window := int(opts.Window / time.Second)
	held := 0
	for i := range 2 * 60 {
		f.feed(1, refusing(1), nil)
		if i < window {
			continue // the recent window still holds the overload
		}
		if f.admissionNamed() {
			held++
		}
	}
	if held > 0 {
		t.Errorf("admission held in %d of the %d polls whose recent window refused a fifth (the pod's bursts 3 of 7) on the last %d windows' refusals, want none", held, 2*60-window, HoldWindows)
	}
}

// TestAdmissionResumedWithinTheBurstsRangeNamedOnItsSpan: a pod refusing
// in bursts of one recent window (20 s refusing 3 of every 7 attempts) is
// overloaded at its queue cap: a minute refusing two thirds (named), a dip
// of 30 s refusing nothing (admission clears with its evidence, the
// episode runs on: the dip is shorter than the minute), then 3 minutes
// refusing half, one window at a time within what the bursts widen the
// test by. Over the last HoldWindows windows it refuses more than any
// HoldWindows of the baseline did, significantly at the naming α: within
// the episode that named it, admission is named again on that span once
// it covers the resumed refusals. Fails on the code before: the span only
// held a named admission, naming asked one window at α / 5, and the
// resumed overload was never named (the bursty simulator at 90 %, seed 11:
// 17m03-17m49, 47 s of windows refusing 35-53 % against 18 %, missed).
func TestAdmissionResumedWithinTheBurstsRangeNamedOnItsSpan(t *testing.T) {
	f, _ := windowBurstsOnset(t)
	f.feed(30, healthy, nil)
	if f.admissionNamed() {
		t.Fatal("admission still named after 30 s refusing nothing: the test needs the dip to clear it")
	}
	window := int(burstsWindow / time.Second)
	missed := 0
	for i := range 3 * 60 {
		f.feed(1, refusing(4), nil)
		if i >= HoldWindows*window+HoldEvaluations && !f.admissionNamed() {
			missed++
		}
	}
	if want := 3*60 - HoldWindows*window - HoldEvaluations; missed > 0 {
		t.Errorf("the overload resumed after a dip of 30 s, refusing half the attempts of a pod whose bursts of a window refuse 3 of 7: admission not named in %d of the %d polls once the last %d windows covered it, want none", missed, want, HoldWindows)
	}
}

// TestAdmissionKeptThroughAGapInItsEpisode: admission named outside an
// incident (a pod refusing a third of its attempts, its latency flat) is
// kept through a gap in the scrapes, as a named incident keeps its
// findings: at the first ready evaluation it is held by its own evidence
// (refusing on: named at once), and it clears with that evidence (refusing
// nothing: not named once the recent window lies after the refusals).
// Fails on the code before: the verdicts were forgotten and admission was
// missing for the HoldEvaluations evaluations naming takes (the bursty
// simulator at 95 %, seeds 5 and 8: 7.0, 7.4 -> 6.3, 7.0 % wrong or
// missing).
func TestAdmissionKeptThroughAGapInItsEpisode(t *testing.T) {
	window := int(testOpts.Window / time.Second)
	for _, after := range []string{"refusing", "calm"} {
		f := fed(t, testOpts, phase{11 * 60, healthy}, phase{3 * 60, refusing(2)})
		if !f.admissionNamed() {
			t.Fatal("admission not named after 3 minutes refusing a third of the attempts")
		}
		s := refusing(2)
		if after == "calm" {
			s = healthy
		}
		f.i += 5 // no scrape for 5 s
		notReady, wrong := 0, 0
		for k := range 2 * 60 {
			f.feed(1, s, nil)
			if values(f.fams, FamilyReady, "")[""] != 1 {
				notReady++
				continue
			}
			if after == "refusing" && !f.admissionNamed() || after == "calm" && k >= window && f.admissionNamed() {
				wrong++
			}
		}
		if notReady == 0 {
			t.Fatal("never not ready after the gap: the test needs the gap to count")
		}
		if wrong > 0 {
			t.Errorf("%s after the gap: admission named %t in %d of the ready polls of the 2 minutes after it, want none", after, after == "calm", wrong)
		}
	}
}

// TestAdmissionOverloadAboveThePodsRefusalBursts: a pod refusing in bursts
// (20 s refusing 3 of every 7 attempts, one every 90 to 150 s: its
// baseline's share about 11 %, a window's up to 20 %) is overloaded at its
// queue cap, refusing 5 of every 13 attempts (38 %) for 8 minutes, its
// latency flat. Its first windows read p = 0.004-0.03 against α / 5,
// widened by the bursts, and the rolling baseline takes the refusals in
// (11 % -> 23 % in four minutes). A refusal check keeps the time before
// them beside the findings' own reference, from the first window up beyond
// every sub-window at the undivided α, and admission is named within 2
// minutes and held while the overload lasts. Fails on the code before:
// never named in the 8 minutes (the self-exciting simulator at 80 %, seeds
// 7 and 9, 90 %, seed 4, 95 %, seed 1: never named in 11 minutes refusing
// 40-70 % against 6-24 %).
func TestAdmissionOverloadAboveThePodsRefusalBursts(t *testing.T) {
	f := newFeeder(t, testOpts)
	f.burstyRefusals(12*60, rand.New(rand.NewPCG(32, 32)), nil)
	first, missed := -1, 0
	for i := range 8 * 60 {
		f.feed(1, refusing(2.5), nil)
		switch named := f.admissionNamed(); {
		case named && first < 0:
			first = i
		case !named && first >= 0:
			missed++
		}
	}
	if first < 0 || first > 2*60 {
		t.Fatalf("admission first named %d s into 8 minutes refusing 38 %% of the attempts of a pod whose bursts refuse 20 %% of a window's, want within 2 minutes (-1: never)", first)
	}
	if missed > 0 {
		t.Errorf("admission not named in %d polls after it was first named, while the overload refuses as before, want none", missed)
	}
}

// longBursts feeds n seconds of a pod refusing in bursts of length
// seconds (3 of every 7 attempts), one every gap to gap+spread seconds,
// calling each after every second.
func (f *feeder) longBursts(n, length, gap, spread int, rng *rand.Rand, each func()) {
	next := 0
	for k := range n {
		if k == next {
			next += gap + rng.IntN(spread)
		}
		s := healthy
		if k >= next-length {
			s = refusing(3)
		}
		f.feed(1, s, nil)
		if each != nil {
			each()
		}
	}
}

// TestAdmissionSustainedBeyondTheBurstsAtALongerScale: a pod refusing in
// bursts of two recent windows (40 s refusing 3 of every 7 attempts, one
// every 80 to 100 s) is overloaded at its queue cap: a minute refusing 5
// of 6 (named), then 4 minutes refusing half. Over the last HoldWindows
// windows (a minute) the pod's bursts refuse as much, at that scale as
// widely (no test at α / 10 tells the overload from them); over twice as
// long they average out, and the overload refuses more than any such span
// of the baseline did, significantly: once that span lies past the
// onset's minute admission stays named. The bursts that follow once the
// load returned are not named. Fails on the code before (the span of
// HoldWindows windows only): missed in all 117 of those polls (the bursty
// simulator at 90 %, seed 12: 39.2 -> 27.0 % wrong or missing).
func TestAdmissionSustainedBeyondTheBurstsAtALongerScale(t *testing.T) {
	opts := testOpts
	opts.Window = 20 * time.Second // 30 sub-windows of the baseline: 10 merged HoldWindows at a time, 5 twice as many
	f := newFeeder(t, opts)
	rng := rand.New(rand.NewPCG(32, 32))
	f.longBursts(12*60, 40, 80, 20, rng, nil)
	f.feed(60, refusing(20), nil)
	if !f.admissionNamed() {
		t.Fatal("admission not named after a minute refusing 5 of 6 attempts: the test needs the onset named")
	}
	missed, judged, named := f.heldPastTheOnset(spanPastTheOnset(opts.Window), refusing(4), func(each func()) { f.longBursts(10*60, 40, 80, 20, rng, each) })
	if missed > 0 {
		t.Errorf("overloaded 4 minutes refusing half the attempts of a pod whose bursts of 40 s refuse 3 of 7: admission not named in %d of the %d polls once the last %d windows lay past the onset, want none", missed, judged, 2*HoldWindows)
	}
	if named > 0 {
		t.Errorf("admission named in %d of the 600 polls of the pod's bursts after the overload, want none", named)
	}
}

// heldPastTheOnset feeds 4 minutes of during after a named onset and
// counts the polls from the from-th on where admission is not named, of
// judged; then 3 healthy minutes and the pod's own bursts (bursts, 600
// polls), counting the polls that name it.
func (f *feeder) heldPastTheOnset(from int, during second, bursts func(each func())) (missed, judged, named int) {
	for i := range 4 * 60 {
		f.feed(1, during, nil)
		if i >= from && !f.admissionNamed() {
			missed++
		}
	}
	f.feed(3*60, healthy, nil)
	bursts(func() {
		if f.admissionNamed() {
			named++
		}
	})
	return missed, 4*60 - from, named
}

// spanPastTheOnset is the polls after an onset until the longer refusal
// span (2×HoldWindows windows of window) and naming's evaluations lie
// past it.
func spanPastTheOnset(window time.Duration) int {
	return 2*HoldWindows*int(window/time.Second) + HoldEvaluations
}

// burstsWindow is windowBurstsOnset's recent window.
const burstsWindow = 20 * time.Second

// windowBurstsOnset is a pod of 20 s windows (30 sub-windows of the
// baseline, 10 merged HoldWindows at a time) refusing in window-long
// bursts for 12 minutes, then a minute refusing two thirds of its
// attempts, which names admission: the onset the span-hold tests start
// from.
func windowBurstsOnset(t *testing.T) (*feeder, *rand.Rand) {
	t.Helper()
	opts := testOpts
	opts.Window = burstsWindow
	f := newFeeder(t, opts)
	rng := rand.New(rand.NewPCG(31, 31))
	f.windowBursts(12*60, rng, nil)
	f.feed(60, refusing(8), nil)
	if !f.admissionNamed() {
		t.Fatal("admission not named after a minute refusing two thirds of the attempts of a pod whose bursts refuse 3 of 7: the test needs the onset named")
	}
	return f, rng
}
