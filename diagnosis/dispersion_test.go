package diagnosis

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestPearsonDispersion checks the estimator on sub-windows worked out by
// hand: counts, shares and means, independence as the floor, and the
// minimum of sub-windows.
func TestPearsonDispersion(t *testing.T) {
	sub := func(preempt, k, n float64) subWindow {
		s := subWindow{seconds: 10}
		s.c[cPreemptions] = preempt
		s.k[0], s.n[0] = k, n
		return s
	}
	base := nanStats()
	// 0, 20, 0, 20 events in 10 s each: rate 1/s, 10 expected a window;
	// χ² = 4 × 10²/10 = 40 over 3 degrees of freedom.
	bursty := []subWindow{sub(0, 5, 10), sub(20, 0, 10), sub(0, 5, 10), sub(20, 0, 10)}
	phi, lo, hi := pearson(bursty, measureOf(sPreempt, &base))
	if math.Abs(phi-40.0/3) > 1e-9 || lo != 0 || hi != 2 {
		t.Errorf("preemptions 0, 20, 0, 20: φ %v, range %v-%v, want 13.33, 0-2", phi, lo, hi)
	}
	// 5, 0, 5, 0 of 10 above the baseline's p90: pooled 0.25, each term
	// 2.5²/(10 × 0.25 × 0.75) = 3.33, χ² = 13.33 over 3.
	base.v[sTTFT] = 1
	phi, lo, hi = pearson(bursty, measureOf(sTTFT, &base))
	if math.Abs(phi-40.0/9) > 1e-9 || lo != 0 || hi != 0.5 {
		t.Errorf("shares 5, 0, 5, 0 of 10: φ %v, range %v-%v, want 4.44, 0-0.5", phi, lo, hi)
	}
	// Counts exactly as expected: no spread, φ 0 (dispersions floors it at 1).
	even := []subWindow{sub(10, 1, 10), sub(10, 1, 10), sub(10, 1, 10), sub(10, 1, 10)}
	if phi, _, _ := pearson(even, measureOf(sPreempt, &base)); phi != 0 {
		t.Errorf("even counts: φ %v, want 0", phi)
	}
	// Three sub-windows are too few to measure anything.
	if phi, lo, _ := pearson(bursty[:3], measureOf(sPreempt, &base)); phi != 1 || !math.IsNaN(lo) {
		t.Errorf("3 sub-windows: φ %v, range from %v, want 1 and NaN", phi, lo)
	}
}

// TestDispersionOfTheBaseline measures φ on a Diagnoser's own history:
// independence (1) for an even pod, above it for a pod whose prompts and
// TTFT come in bursts; a baseline shorter than MinDispersionWindows recent
// windows is split into that many shorter sub-windows.
func TestDispersionOfTheBaseline(t *testing.T) {
	phiAt := func(opts Options, secs []second) stats {
		d, _, _ := run(t, opts, secs)
		tr := d.tracks["m"]
		from, a, _, ok := d.windows(tr, tr.lastT)
		if !ok {
			t.Fatal("no baseline")
		}
		return baselineStats(tr, from, a, int64(opts.Window), true)
	}
	even := phiAt(testOpts, timeline(700, 0, healthy))
	if even.phiWindows < 9 {
		t.Errorf("even pod: φ measured on %d sub-windows, want the baseline's 10 (or 9 aligned)", even.phiWindows)
	}
	for i, phi := range even.phi {
		if phi != 1 {
			t.Errorf("even pod: %s φ %v, want 1 (independence is the floor)", signalInfo[i].name, phi)
		}
	}
	bursts := phiAt(testOpts, burstyTimeline(720, 0, healthy))
	for _, i := range []int{sTTFT, sPromptMean} {
		if !(bursts.phi[i] > 10) {
			t.Errorf("bursty pod: %s φ %v, want far above 1", signalInfo[i].name, bursts.phi[i])
		}
	}
	short := testOpts
	short.Baseline = 3 * time.Minute
	few := phiAt(short, timeline(300, 0, healthy))
	if few.phiWindows != MinDispersionWindows || few.phi[sTTFT] != 1 {
		t.Errorf("3-window baseline: %d sub-windows, φ %v, want %d shorter ones and 1", few.phiWindows, few.phi[sTTFT], MinDispersionWindows)
	}
	fewBursts := phiAt(short, burstyTimeline(420, 0, healthy))
	if !(fewBursts.phi[sTTFT] > 1) {
		t.Errorf("3-window baseline of a bursty pod: φ %v, want above 1", fewBursts.phi[sTTFT])
	}
}

// burstySecond is a burst of a batch client: its requests' prompts three
// times as long, their TTFT twice.
var burstySecond = second{requests: 4, ttft: 0.3, itl: 0.05, itlPerReq: 100, prompt: 1200, output: 100,
	running: 8, waiting: 1, kv: 0.4, hitRatio: 0.5}

// burstyTimeline is the pod bursting for 30 s every 5 minutes (the last 30
// s of each), for before seconds, then shifted for after seconds.
func burstyTimeline(before, after int, shifted second) []second {
	out := make([]second, 0, before+after)
	for i := range before {
		s := healthy
		if i%300 >= 270 {
			s = burstySecond
		}
		out = append(out, s)
	}
	for range after {
		out = append(out, shifted)
	}
	return out
}

// TestBurstTheBaselineShowsIsNoChange: a pod that bursts every five
// minutes (30 s of prompts three times as long and TTFT twice) names
// nothing when the recent window holds such a burst, since the baseline
// shows one every five minutes; a sustained shift beyond the bursts is
// still named within the recent window. Fails on the code before the
// dispersion factor (ttft_up and long_prompts named at every burst).
func TestBurstTheBaselineShowsIsNoChange(t *testing.T) {
	f := newFeeder(t, testOpts)
	shifted := second{requests: 4, ttft: 0.7, itl: 0.05, itlPerReq: 100, prompt: 3000, output: 100,
		running: 8, waiting: 1, kv: 0.4, hitRatio: 0.5}
	secs := burstyTimeline(1800, 120, shifted)
	var named [][]string
	for i, s := range secs {
		f.feed(1, s, nil)
		fams := f.fams
		got := append(active(values(fams, FamilySymptom, "symptom")), active(values(fams, FamilyCause, "cause"))...)
		if i < 1800 && len(got) > 0 {
			named = append(named, append([]string{time.Duration(i * int(time.Second)).String()}, got...))
		}
		if i == 1800+int(testOpts.Window/time.Second) {
			if !slices.Contains(got, SymptomTTFTUp) || !slices.Contains(got, CauseLongPrompts) {
				t.Errorf("a window after a shift beyond the bursts: %v, want ttft_up and long_prompts", got)
			}
		}
	}
	if len(named) > 0 {
		t.Errorf("bursts the baseline shows every 5 minutes named %d times, first %v", len(named), named[0])
	}
}

// TestQueueRampIsSignificant: on a pod whose baseline queues in bursts
// (waiting 0 at 290 of 300 scrapes, 4.4 on average at the other ten,
// together in one of its 30 sub-windows: φ 9.2), a recent window where the
// queue ramps from 0 to 27 (mean 13.5, 90x the baseline's) is a change at
// α / 10: under no change the recent window is one more sub-window, whose
// mean varies as φ times the baseline's per-scrape variance. Fails on the
// code before: the recent window's own variance (82.5, the ramp) times φ
// read p = 0.06, and the bursty simulator's queueing went unnamed for
// seconds into each burst.
func TestQueueRampIsSignificant(t *testing.T) {
	r, b := nanStats(), nanStats()
	g := gWaiting
	b.gMean[g], b.gN[g] = 0.148, 300
	b.gVar[g] = 10*4.4*4.4/300 - b.gMean[g]*b.gMean[g]
	b.phi[sWaiting] = 9.2
	r.gMean[g], r.gVar[g], r.gN[g] = 13.5, 82.5, 10
	if p := testSignal(sWaiting, &r, &b, +1); !(p <= DefaultSignificance/numSignals) {
		t.Errorf("a queue ramping to 27 against a baseline of 0.15: p = %v, want at most %v", p, DefaultSignificance/numSignals)
	}
	// the baseline's own level is no change
	r.gMean[g], r.gVar[g] = b.gMean[g], b.gVar[g]
	if p := testSignal(sWaiting, &r, &b, +1); !(p >= 0.4) {
		t.Errorf("the baseline's own level: p = %v, want about 0.5", p)
	}
}

// TestSplitStretchDoesNotSetTheReferencesDispersion: a reference summed
// from stretches takes its dispersion from those measured at the recent
// window's length. A stretch of 23 s, split into MinDispersionWindows
// sub-windows of under 6 s of which the last caught a burst's first
// seconds, reads a far larger φ than the pod's baseline before it; as the
// reference's largest factor it widened every test (the bursty simulator,
// seed 4: an open stretch of 23 s read φ 137, 36.5 a second later, and
// the overload's later bursts read p = 0.1 at 12x).
func TestSplitStretchDoesNotSetTheReferencesDispersion(t *testing.T) {
	opts := Options{Window: 10 * time.Second, Baseline: 5 * time.Minute, MinChange: 0.25, Interval: time.Second}
	part := func(secs []second, span time.Duration) burstiness {
		d, _, _ := run(t, opts, secs)
		tr := d.tracks["m"]
		a := tr.coarse.newest()
		from := tr.coarse.atOrBefore(a.t - int64(span))
		if a == nil || from == nil {
			t.Fatal("no history")
		}
		st := baselineStats(tr, from, a, int64(opts.Window), false)
		return burstinessOf(&st)
	}
	// an even pod's baseline: 30 of its recent windows, φ 1
	whole := part(timeline(620, 0, healthy), opts.Baseline)
	// 23 s of healthy traffic, a burst in its last 4 s
	split := part(timeline(326, 4, burstySecond), 23*time.Second)
	if whole.split || whole.windows < 25 || !split.split || split.windows != MinDispersionWindows {
		t.Fatalf("parts measured on %d sub-windows (split %v) and %d (split %v), want the baseline's 30 at its length and %d shorter ones",
			whole.windows, whole.split, split.windows, split.split, MinDispersionWindows)
	}
	if !(split.phi[sTTFT] > 2*whole.phi[sTTFT]) {
		t.Fatalf("TTFT share: the split stretch's φ %v, the baseline's %v: the case needs the split one far larger", split.phi[sTTFT], whole.phi[sTTFT])
	}
	for _, parts := range [][]burstiness{{split, whole}, {whole, split}} {
		var ref stats
		combine(&ref, parts)
		if ref.phi[sTTFT] != whole.phi[sTTFT] || ref.phiWindows != whole.windows {
			t.Errorf("reference of a split stretch (φ %.1f) and a baseline (φ %.1f): φ %.1f on %d sub-windows, want the baseline's on its %d",
				split.phi[sTTFT], whole.phi[sTTFT], ref.phi[sTTFT], ref.phiWindows, whole.windows)
		}
	}
	// alone, the split stretch is all there is to measure
	var ref stats
	combine(&ref, []burstiness{split})
	if ref.phi[sTTFT] != split.phi[sTTFT] {
		t.Errorf("reference of the split stretch alone: φ %v, want its own %v", ref.phi[sTTFT], split.phi[sTTFT])
	}
}
