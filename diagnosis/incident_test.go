package diagnosis

import (
	"math"
	"strings"
	"testing"
)

// TestHoldNeedsEvidence: a named cause stays named only while its own
// evidence holds. Requests queue (waiting 6 against 1) for three minutes,
// then the queue is gone while TTFT stays up for another reason (prompts
// 2.5x as long): queueing must clear once the recent window no longer
// shows the queue, within the window and a few evaluations, not be held
// by the three-window hold on data that stopped showing it (issue 30:
// 56-89 % of the false claims were such holds).
func TestHoldNeedsEvidence(t *testing.T) {
	f := newFeeder(t, testOpts)
	queue, prompts := healthy, healthy
	queue.waiting, queue.ttft = 6, 0.3
	prompts.prompt, prompts.ttft = 1000, 0.3
	feed := func(n int, s second) (named []bool) {
		for range n {
			f.feed(1, s, nil)
			named = append(named, f.causes()[CauseQueueing] == 1)
		}
		return named
	}
	feed(640, healthy)
	if q := feed(180, queue); !q[len(q)-1] {
		t.Fatal("queueing not named after three minutes of queue")
	}
	q := feed(240, prompts)
	cleared := -1
	for k := len(q) - 1; k >= 0 && !q[k]; k-- {
		cleared = k
	}
	if limit := 60 + 10; cleared < 0 || cleared > limit {
		t.Errorf("queueing cleared %d s after the queue was gone (-1: never), want within the 60 s window and a few evaluations (%d s)", cleared, limit)
	}
}

// TestHoldClearsWithItsEvidence: a named cause clears at the first
// evaluation where its own evidence is gone, not a fixed number of
// evaluations later (issue 30: holds outlived their evidence). Requests
// queue (waiting 6 against 1) for three minutes, then the queue is gone
// while TTFT stays up for another reason (prompts 2.5x): queueing must
// clear at the evaluation where the recent window's waiting falls within
// the minimum change of the baseline. Fails on the code before: it cleared
// HoldEvaluations - 1 evaluations later.
func TestHoldClearsWithItsEvidence(t *testing.T) {
	f := newFeeder(t, testOpts)
	queue, prompts := healthy, healthy
	queue.waiting, queue.ttft = 6, 0.3
	prompts.prompt, prompts.ttft = 1000, 0.3
	f.feed(640, healthy, nil)
	f.feed(180, queue, nil)
	if values(f.fams, FamilyCause, "cause")[CauseQueueing] != 1 {
		t.Fatal("queueing not named after three minutes of queue")
	}
	gone, cleared := -1, -1
	for k := range 120 {
		f.feed(1, prompts, nil)
		if gone < 0 {
			if w := f.d.Report().Models[0].Steps[1].Signals[0]; w.Ratio != nil && *w.Ratio < 1+testOpts.MinChange {
				gone = k
			}
		}
		if cleared < 0 && values(f.fams, FamilyCause, "cause")[CauseQueueing] == 0 {
			cleared = k
		}
	}
	if gone < 0 || cleared != gone {
		t.Errorf("waiting back within the minimum change %d s after the queue was gone, queueing cleared %d s after: want the same evaluation", gone, cleared)
	}
	if got := values(f.fams, FamilyCause, "cause")[CauseLongPrompts]; got != 1 {
		t.Errorf("long_prompts %v, want named", got)
	}
}

// TestCauseNamedWithItsIncident: a cause whose own evidence held through
// the evaluations that name the incident's symptom is named with it, not
// HoldEvaluations - 1 evaluations later (issue 30: on bursty traffic each
// queueing burst went unexplained for its first seconds, a few per cent of
// an overload's evaluations). Requests queue (waiting 6 against 1) and,
// once the first have waited, TTFT rises (0.3 s against 0.15 s): queueing
// must be named at the evaluation that names ttft_up. Fails on the code
// before: two evaluations later.
func TestCauseNamedWithItsIncident(t *testing.T) {
	f := newFeeder(t, testOpts)
	waiting, queue := healthy, healthy
	waiting.waiting = 6
	queue.waiting, queue.ttft = 6, 0.3
	f.feed(640, healthy, nil)
	f.feed(10, waiting, nil)
	symptom, cause := -1, -1
	for k := range 60 {
		f.feed(1, queue, nil)
		if symptom < 0 && values(f.fams, FamilySymptom, "symptom")[SymptomTTFTUp] == 1 {
			symptom = k
		}
		if cause < 0 && values(f.fams, FamilyCause, "cause")[CauseQueueing] == 1 {
			cause = k
		}
	}
	if symptom < 0 || cause != symptom {
		t.Errorf("ttft_up named %d s into the queue, queueing %d s (-1: never): want the same evaluation", symptom, cause)
	}
}

// TestLullRelapseNamedAtTheHoldLevel: in a lull (an incident named
// prefix_cache_misses on ttft_up ended while the cache still misses), the
// same symptom at the undivided level names the incident again after
// HoldEvaluations, with its cause, as a named symptom is held: the shift
// never went away (on the bursty simulator the strict tests, widened by
// the pod's bursts, named each resumption seconds late: prefix_cache_misses
// 18.9 -> 13.7 % wrong or missing). Outside a lull the same evaluations
// name nothing: a new incident still needs the strict tests. Fails on the
// code before: an incident opened only on the strict symptoms.
func TestLullRelapseNamedAtTheHoldLevel(t *testing.T) {
	var strict, lenient evaluation
	for i := range numSignals {
		strict.change[i], lenient.change[i] = ChangeFlat, ChangeFlat
	}
	strict.change[sHitRatio], lenient.change[sHitRatio] = ChangeDown, ChangeDown
	strict.enough, lenient.enough = true, true
	lenient.change[sTTFT], lenient.symptoms[yTTFT] = ChangeUp, true
	var ref stats
	for _, lull := range []bool{true, false} {
		in := incidentState{ended: true, uncausedSince: -1}
		if lull {
			in.lull[kPrefixMisses], in.lullSym[yTTFT] = true, true
		}
		for k := range HoldEvaluations {
			in.step(int64(k), 10, 50, &strict, &strict, &lenient, nil, nil, &ref, 0, 0, 1<<60)
		}
		named := in.open && in.named && in.sym[yTTFT].on
		if named != lull || in.cause[kPrefixMisses].on != lull {
			t.Errorf("in a lull %v: after %d evaluations with ttft_up at the undivided level only, named %v with prefix_cache_misses %v, want %v",
				lull, HoldEvaluations, named, in.cause[kPrefixMisses].on, lull)
		}
	}
}

// TestHeldThroughALull: a shift names its cause; then for two minutes its
// latency is back while the cause's own evidence still holds (queueing:
// TTFT back at 0.15 s while 4 requests wait against 1; batch_growth: the
// steps at 0.06 s, 1.2x, while the batch stays twice as large), then the
// shift resumes. The incident stays named by the cause, with no symptom,
// at every second of the lull and of the resumption, and its sentence says
// why; once the evidence is gone the incident ends (issue 30: holds with
// evidence; on the bursty simulator, seed 4, the incident ended in each
// lull of the overload while requests still waited and each resumption was
// named anew, 14.6 % of queueing's judged polls wrong or missing; a batch
// 2x slows its steps by a share of its growth that dips below the minimum
// change for seconds at a time). Fails on the code before each: the
// incident ended a few evaluations after the latency came back.
func TestHeldThroughALull(t *testing.T) {
	queued := healthy
	queued.waiting = 4
	// the steps below the minimum change, not back (TestBatchHoldEndsWithItsSteps)
	larger := healthy
	larger.running, larger.itl = 16, 0.06
	for _, c := range []struct {
		cause         string
		shift, lull   second
		sentence, why string
	}{
		{CauseQueueing, overload, queued, "requests still queue", "requests still wait"},
		{CauseBatchGrowth, batchGrowth, larger, "more requests still run at once", "the batch is still twice as large"},
	} {
		t.Run(c.cause, func(t *testing.T) {
			f := shiftNamed(t, c.shift, 180, c.cause)
			for k := range 180 {
				s := c.lull
				if k >= 120 {
					s = c.shift
				}
				f.feed(1, s, nil)
				if got := values(f.fams, FamilyCause, "cause")[c.cause]; got != 1 {
					t.Fatalf("%d s into the lull (the shift resumed at 120 s): %s %v (symptoms %v), want named while %s", k, c.cause, got, values(f.fams, FamilySymptom, "symptom"), c.why)
				}
				if k == 100 {
					if inc := f.d.Report().Models[0].Incident; inc == nil || !strings.Contains(inc.Sentence, c.sentence) {
						t.Errorf("incident %+v in the lull, want its sentence to say the latency is back and %s", inc, c.sentence)
					}
				}
			}
			f.feed(120, healthy, nil)
			if age := values(f.fams, FamilyIncident, "")[""]; age != 0 {
				t.Errorf("incident age %v s after two minutes without the evidence, want ended", age)
			}
		})
	}
}

// TestQueueingResumedAtTheHoldLevel: an overload at least HoldWindows
// recent windows old held queueing until its queue drained, and ended
// then; while the calm
// after it is on probation, its symptom rising again at the undivided
// level only, with the queue back, names the incident again with queueing
// held (its evidence at the undivided level), as a lull's relapse is named
// (on the bursty simulator, seed 4, each resumption of the overload after
// the queue drained waited for the strict tests, the range check and the
// naming's evaluations: overload 11.5 -> 8.2 % wrong or missing). Once the
// probation is over the same evaluations name nothing: a new incident needs
// the strict tests. Fails on the code before: an ended overload left
// nothing, and the relapse was a new incident.
func TestQueueingResumedAtTheHoldLevel(t *testing.T) {
	strict, lenient := flatEvaluation(), flatEvaluation()
	strict.queueShare, lenient.queueShare = 0.25, 0.25/4
	lenient.change[sTTFT], lenient.symptoms[yTTFT] = ChangeUp, true
	lenient.change[sWaiting], lenient.inflowQueueUp, lenient.queueTimeUp, lenient.inflowQueueShare = ChangeUp, true, true, 1
	var ref stats
	const w, b = 10, 50
	// an overload named queueing from 0 to 40, its queue drained after
	in := incidentState{uncausedSince: -1}
	in.open, in.named, in.start, in.base = true, true, 0, &ref
	in.sym[yTTFT], in.cause[kQueueing] = hysteresis{on: true}, hysteresis{on: true}
	// its latency came back while requests still waited (held), then the
	// queue drained
	var queue, quiet evaluation
	queue.enough, quiet.enough = true, true
	for i := range numSignals {
		queue.change[i], quiet.change[i] = ChangeFlat, ChangeFlat
	}
	queue.queueShare = lenient.queueShare
	queue.change[sWaiting], queue.inflowQueueUp, queue.queueTimeUp, queue.inflowQueueShare = ChangeUp, true, true, 1
	k := int64(40)
	for ; k < 40+HoldEvaluations; k++ {
		in.step(k, w, b, &quiet, &quiet, &queue, nil, nil, &ref, 0, 0, 1<<60)
	}
	if !in.open || !in.quiet || !in.cause[kQueueing].on {
		t.Fatalf("incident open %v, quiet %v, queueing %v with TTFT back and the queue still there, want held", in.open, in.quiet, in.cause[kQueueing].on)
	}
	for ; in.open; k++ {
		in.step(k, w, b, &quiet, &quiet, &quiet, nil, nil, &ref, 0, 0, 1<<60)
	}
	ended := in
	for _, probation := range []bool{true, false} {
		in := ended
		from := ended.endedAt + 1
		if !probation {
			from += HoldWindows * w
		}
		for k := range int64(HoldEvaluations) {
			in.step(from+k, w, b, &strict, &strict, &lenient, nil, nil, &ref, 0, 0, 1<<60)
		}
		named := in.open && in.named && in.sym[yTTFT].on
		if named != probation || in.cause[kQueueing].on != probation {
			t.Errorf("on probation %v: after %d evaluations with ttft_up and the queue at the undivided level only, named %v with queueing %v, want %v",
				probation, HoldEvaluations, named, in.cause[kQueueing].on, probation)
		}
	}
}

// TestBatchResumedAtTheHoldLevel: a larger batch named batch_growth on
// itl_up in an incident that outlasted the probation's length, and ended
// when its steps came back while the batch was still larger (batched).
// While the calm after it is on probation, itl_up rising again at the
// undivided level only, with the batch's own evidence there, names the
// incident again at once, held as a named one is, with batch_growth
// carried (as an overload's queueing is: TestQueueingResumedAtTheHoldLevel);
// with the strict test's itl_up too but the batch significant at the
// undivided level only, batch_growth is still carried, not named anew.
// The resumed incident, however young it ends, leaves the calm on
// probation again. Once the probation is over (the batch back within the
// minimum change: batched cleared) the same evaluations name nothing, or
// itl_up alone after HoldEvaluations. On the bursty simulator a third of
// batch_growth's missed polls on seed 1 were the evaluations each
// re-opened incident waited to be named. Fails on the code before: the
// relapse at the undivided level named nothing, and the strict one named
// itl_up without batch_growth, HoldEvaluations later.
func TestBatchResumedAtTheHoldLevel(t *testing.T) {
	quiet, lenient := flatEvaluation(), flatEvaluation()
	lenient.change[sITL], lenient.symptoms[yITL] = ChangeUp, true
	lenient.change[sRunning] = ChangeUp
	strictITL := quiet
	strictITL.change[sITL], strictITL.symptoms[yITL] = ChangeUp, true
	var ref stats
	const w, b = 10, 50
	ended := batchEndedOnProbation(t, &ref, w, b)
	for _, c := range []struct {
		name      string
		strict    *evaluation
		probation bool
		itl, bg   bool
	}{
		{"undivided itl_up on probation", &quiet, true, true, true},
		{"strict itl_up on probation", &strictITL, true, true, true},
		{"undivided itl_up after probation", &quiet, false, false, false},
		{"strict itl_up after probation", &strictITL, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := ended
			in.probationOf(kBatchGrowth).on = c.probation
			for k := range int64(HoldEvaluations) {
				in.step(26+k, w, b, c.strict, c.strict, &lenient, nil, nil, &ref, 0, 0, 1<<60)
				itl := in.open && in.named && in.sym[yITL].on
				if k < HoldEvaluations-1 && !c.probation {
					continue
				}
				if itl != c.itl || in.cause[kBatchGrowth].on != c.bg {
					t.Fatalf("after %d evaluations: itl_up named %v, batch_growth %v; want %v, %v", k+1, itl, in.cause[kBatchGrowth].on, c.itl, c.bg)
				}
			}
			if c.probation {
				in.step(26+HoldEvaluations, w, b, &quiet, &quiet, &quiet, nil, nil, &ref, 0, 0, 1<<60)
				if in.open || !in.batched() {
					t.Errorf("the resumed incident ended %d s old: open %v, batched %v; want ended on probation", HoldEvaluations, in.open, in.batched())
				}
			}
		})
	}
}

// TestBatchReopenedAtOnceBesideItsProbation: an incident that named
// batch_growth on itl_up ends, 25 s old, with the calm on the batch's
// probation. An incident opening within HoldWindows recent windows of that
// end, on the strict itl_up with the batch's naming evidence, is that
// incident back and is named at once (TestReopenedIncidentNamedAtOnce), when
// the probation lapsed before it opened (the batch dipped within the minimum
// change) and when the probation was on but the batch's evidence came one
// evaluation after the opening, which the probation's rule checks alone.
// After the hold's windows it waits as a new incident does. On the bursty
// simulator (held-out seed 14, the rate 2.5x) two incidents opened 27 and
// 14 s after a named one ended, unnamed for 2-4 polls: 6.6 -> 5.6 % wrong
// or missing; queueing's probation alike (seed 4's queueing 5.6 -> 5.1 %,
// 28 rows better over the sweeps, none worse). Fails on main 60438d2: the
// probation the ended incident left took its cause out of the causes a
// re-opened incident names at once.
func TestBatchReopenedAtOnceBesideItsProbation(t *testing.T) {
	quiet, batch := flatEvaluation(), flatEvaluation()
	batch.change[sRunning] = ChangeUp
	itl := batch
	itl.change[sITL], itl.symptoms[yITL] = ChangeUp, true
	// itl_up strict with the batch flat: the opening the probation does not resume
	itlAlone := quiet
	itlAlone.change[sITL], itlAlone.symptoms[yITL] = ChangeUp, true
	var ref stats
	const w, b = 10, 50
	ended := batchEndedOnProbation(t, &ref, w, b)
	for _, c := range []struct {
		name      string
		probation bool // on at the opening
		opening   *evaluation
		at        int64 // the evaluation with the batch's naming evidence
		want      bool
	}{
		{"the probation lapsed", false, &itl, 26, true},
		{"the batch's evidence one evaluation after the opening", true, &itlAlone, 27, true},
		{"after the hold's windows", false, &itl, 25 + HoldWindows*w + 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := ended
			in.probationOf(kBatchGrowth).on = c.probation
			if c.opening == &itlAlone {
				in.step(c.at-1, w, b, &itlAlone, &itlAlone, &itlAlone, nil, nil, &ref, 0, 0, 1<<60)
				if !in.open || in.named {
					t.Fatalf("the opening without the batch: open %v, named %v, want open and unnamed", in.open, in.named)
				}
			}
			in.step(c.at, w, b, &itl, &itl, &itl, nil, nil, &ref, 0, 0, 1<<60)
			got := in.open && in.named && in.sym[yITL].on && in.cause[kBatchGrowth].on
			if got != c.want {
				t.Errorf("strict itl_up with the batch's naming evidence %d s after the end: open %v, named %v, itl_up %v, batch_growth %v; want named at once %v",
					c.at-25, in.open, in.named, in.sym[yITL].on, in.cause[kBatchGrowth].on, c.want)
			}
		})
	}
}

// TestNoQuietHoldOnAStaleReference: after a long shift of prompts 3x ends,
// the mix stays 1.45x the reference of before the shift (a drift); a new
// incident on it (TTFT 2x) names long_prompts, rightly, against that
// reference, which ended more than a baseline before the incident began.
// Once the latency is back, the incident is not held with no symptom by
// long_prompts' evidence: against a stale reference that evidence is the
// drift, not a shift (the bursty simulator's seed 5: 100 polls held where
// no latency moved). Fails without the reference's age in the hold.
func TestNoQuietHoldOnAStaleReference(t *testing.T) {
	shifted, drifted, slow := healthy, healthy, healthy
	shifted.prompt, shifted.ttft = 1200, 0.6
	drifted.prompt = 580
	slow.prompt, slow.ttft = 580, 0.3
	f := fed(t, testOpts, phase{640, healthy}, phase{660, shifted}, phase{90, drifted}, phase{240, slow})
	if got := values(f.fams, FamilyCause, "cause"); got[CauseLongPrompts] != 1 {
		t.Fatalf("the incident on the drifted mix: causes %v, want long_prompts", active(got))
	}
	f.feed(150, drifted, nil)
	if got := values(f.fams, FamilyCause, "cause"); got[CauseLongPrompts] != 0 || f.d.Report().Models[0].Incident != nil {
		t.Errorf("latency back for 150 s on the drifted mix: causes %v, incident %+v; want none (the reference is stale)", active(got), f.d.Report().Models[0].Incident)
	}
}

// TestSymptomClearsWithItsEvidence: a named symptom is held while its own
// evidence holds at the undivided level, and clears at the first
// evaluation where it does not, not HoldEvaluations later (issue 30: holds
// with evidence; on the bursty simulator at 65 % of capacity each incident
// ended with one to three polls naming a latency the truth had left: false
// symptoms 0.56-1.12 % of the steady polls over seeds 1-6, 0.00-0.07 %
// now). Fails on the code before: the symptom stayed on for two more
// evaluations.
func TestSymptomClearsWithItsEvidence(t *testing.T) {
	up, back := flatEvaluation(), flatEvaluation()
	up.change[sTTFT], up.symptoms[yTTFT] = ChangeUp, true
	var ref stats
	const w, b = 10, 50
	in := incidentState{uncausedSince: -1}
	k := int64(0)
	for ; k < 2*HoldEvaluations; k++ {
		in.step(k, w, b, &up, &up, &up, nil, nil, &ref, 0, 0, 1<<60)
	}
	if !in.named || !in.sym[yTTFT].on {
		t.Fatalf("after %d evaluations of ttft_up: named %v, symptom %v, want both", k, in.named, in.sym[yTTFT].on)
	}
	in.step(k, w, b, &back, &back, &back, nil, nil, &ref, 0, 0, 1<<60)
	if in.sym[yTTFT].on {
		t.Errorf("the first evaluation without ttft_up at the undivided level still holds it, want it cleared with its evidence")
	}
}

// TestTTFTInsideItsBucketHoldsOnlyWithItsMean: a named ttft_up whose p90
// falls back into the reference's own bucket (the buckets allow 0.4-2.5x:
// ratio_low below 1) reads a rise there only by interpolating inside that
// bucket, and holds only while the exact mean still rose. On the bursty
// simulator at 65 % (seed 12) queue bursts ended with TTFT p90s read
// 1.25-1.30x inside the 0.1-0.25 s bucket at a true 1.04-1.24x, the mean
// 1.17-1.23x: the symptom held 7 steady polls, batch_growth 5 beside it.
// A p90 in a higher bucket than the reference's, or the mean up, still
// hold it. Fails on main e14a458: the interpolated p90 holds the symptom.
func TestTTFTInsideItsBucketHoldsOnlyWithItsMean(t *testing.T) {
	up := flatEvaluation()
	up.change[sTTFT], up.symptoms[yTTFT], up.ratioLow[sTTFT] = ChangeUp, true, 2
	var ref stats
	const w, b = 10, 50
	for _, c := range []struct {
		name     string
		ratioLow float64
		meanUp   bool
		want     bool
	}{
		{"inside the reference's bucket, the mean back", 0.4, false, false},
		{"inside the reference's bucket, the mean up", 0.4, true, true},
		{"in the bucket above the reference's, the mean back", 1, false, true},
		{"the buckets unknown, the mean back", math.NaN(), false, true},
	} {
		in := incidentState{uncausedSince: -1}
		k := int64(0)
		for ; k < 2*HoldEvaluations; k++ {
			in.step(k, w, b, &up, &up, &up, nil, nil, &ref, 0, 0, 1<<60)
		}
		if !in.named || !in.sym[yTTFT].on {
			t.Fatalf("%s: after %d evaluations of ttft_up: named %v, symptom %v, want both", c.name, k, in.named, in.sym[yTTFT].on)
		}
		// the strict tests no longer name it; the undivided ones read it up
		strict, lenient := flatEvaluation(), flatEvaluation()
		lenient.change[sTTFT], lenient.symptoms[yTTFT], lenient.ratioLow[sTTFT] = ChangeUp, true, c.ratioLow
		if c.meanUp {
			lenient.change[sTTFTMean] = ChangeUp
		}
		in.step(k, w, b, &strict, &strict, &lenient, nil, nil, &ref, 0, 0, 1<<60)
		if in.sym[yTTFT].on != c.want {
			t.Errorf("%s: ttft_up held %v, want %v", c.name, in.sym[yTTFT].on, c.want)
		}
	}
}

// TestNoQuietHoldOnADriftDuringTheIncident: a prefix-cache incident during
// which the prompts rose to 1.5x (long_prompts named four minutes in, once
// the chain was HoldWindows recent windows old) ends when the cache and the
// latency are back, though the prompts stay 1.5x the frozen reference: they
// have been so for longer than the rolling baseline, so they rose during
// the incident, not with a shift of their own, and hold nothing (bursty
// seed 5: long_prompts held its prefix-cache incident 9m21s past the load's
// return). Fails on main 9bd5392: the incident stays named by long_prompts.
func TestNoQuietHoldOnADriftDuringTheIncident(t *testing.T) {
	misses, longer, drifted := healthy, healthy, healthy
	misses.hitRatio, misses.ttft = 0, 0.45
	longer.hitRatio, longer.ttft, longer.prompt = 0, 0.6, 600
	drifted.prompt = 600
	f := fed(t, testOpts, phase{640, healthy}, phase{240, misses}, phase{720, longer})
	if got := values(f.fams, FamilyCause, "cause"); got[CausePrefixCacheMisses] != 1 || got[CauseLongPrompts] != 1 {
		t.Fatalf("the incident with the longer prompts: causes %v, want prefix_cache_misses and long_prompts", active(got))
	}
	f.feed(90, drifted, nil)
	if got := values(f.fams, FamilyCause, "cause"); got[CauseLongPrompts] != 0 || f.d.Report().Models[0].Incident != nil {
		t.Errorf("cache and latency back for 90 s, prompts as for the last 12 minutes: causes %v, incident %+v; want none (the prompts drifted during the incident)", active(got), f.d.Report().Models[0].Incident)
	}
}

// TestYoungBatchResumedOnStrictEvidence: a larger batch named batch_growth
// on itl_up in an incident that ended 10 s old, younger than the
// probation's length, when its steps dipped while the batch stayed larger.
// While the batch stays beyond the minimum change (batchedYoung), itl_up
// back at the strict level with the batch beyond the baseline's bursts
// (the naming evaluation) names the incident again at once with
// batch_growth carried: the evidence is what named it, only the naming's
// HoldEvaluations are skipped. At the undivided level alone it waits as a
// new incident does (the calm after a young incident may follow one of the
// pod's bursts), and so does ttft_up, which a bursty pod's queue moves as
// well (at 90 % of capacity, seed 8, resumed on TTFT it named one steady
// poll where nothing truly moved). On the bursty simulator a rate 2.5x whose
// steps rose 1.2-1.3x opened incidents 10-12 s long, each one after the
// first waiting HoldEvaluations unnamed: seed 7 15.2 -> 11.8 % wrong or
// missing. Fails on main 9bd5392: the young incident left no probation.
func TestYoungBatchResumedOnStrictEvidence(t *testing.T) {
	quiet, lenient := flatEvaluation(), flatEvaluation()
	lenient.change[sRunning] = ChangeUp
	itl, ttft := lenient, lenient
	itl.change[sITL], itl.symptoms[yITL] = ChangeUp, true
	ttft.change[sTTFT], ttft.symptoms[yTTFT] = ChangeUp, true
	var ref stats
	const w, b = 10, 50
	ended := func(sym int) incidentState {
		in := incidentState{uncausedSince: -1}
		in.open, in.named, in.start, in.base = true, true, 0, &ref
		in.sym[sym], in.cause[kBatchGrowth] = hysteresis{on: true}, hysteresis{on: true}
		in.step(10, w, b, &quiet, &quiet, &quiet, nil, nil, &ref, 0, 0, 1<<60)
		if in.open {
			t.Fatalf("the steps dipped 10 s into the incident, want it ended")
		}
		return in
	}
	for _, c := range []struct {
		name          string
		sym           int
		strict, named *evaluation
		want          bool
	}{
		{"strict itl_up, the batch beyond its bursts", yITL, &itl, &itl, true},
		{"undivided itl_up", yITL, &quiet, &itl, false},
		{"the batch within its bursts", yITL, &itl, &quiet, false},
		{"strict ttft_up", yTTFT, &ttft, &ttft, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := ended(c.sym)
			in.step(11, w, b, c.strict, c.named, c.named, nil, nil, &ref, 0, 0, 1<<60)
			got := in.open && in.named && in.sym[c.sym].on && in.cause[kBatchGrowth].on
			if got != c.want {
				t.Errorf("one evaluation: open %v, named %v, symptom %v, batch_growth %v; want named at once %v",
					in.open, in.named, in.sym[c.sym].on, in.cause[kBatchGrowth].on, c.want)
			}
		})
	}
}

// probationOf is the probation record the incident keeps for cause k.
func (in *incidentState) probationOf(k int) *probation {
	for i, c := range probationCauses {
		if c == k {
			return &in.probations[i]
		}
	}
	panic("diagnosis: no probation rule for " + causes[k].Name)
}

// batched says whether the calm is on batch_growth's probation, a mature
// one (not young).
func (in *incidentState) batched() bool {
	p := in.probationOf(kBatchGrowth)
	return p.on && !p.young
}

// flatEvaluation is an evaluation with enough requests where no signal
// changed, for a test to set the changes it is about.
func flatEvaluation() evaluation {
	var e evaluation
	for i := range numSignals {
		// the buckets' range unknown, as evaluate starts them
		e.change[i], e.ratioLow[i], e.ratioHigh[i] = ChangeFlat, math.NaN(), math.NaN()
	}
	e.enough = true
	return e
}

// batchEndedOnProbation is an incident that named batch_growth on itl_up
// from 0 and ended at 25 s (over the probation's length, under the hold's
// age: it ends with its symptom), the calm on the batch's probation.
func batchEndedOnProbation(t *testing.T, ref *stats, w, b int64) incidentState {
	t.Helper()
	quiet := flatEvaluation()
	in := incidentState{uncausedSince: -1}
	in.open, in.named, in.start, in.base = true, true, 0, ref
	in.sym[yITL], in.cause[kBatchGrowth] = hysteresis{on: true}, hysteresis{on: true}
	in.step(25, w, b, &quiet, &quiet, &quiet, nil, nil, ref, 0, 0, 1<<60)
	if in.open || !in.batched() {
		t.Fatalf("after the steps came back: open %v, batched %v, want ended on probation", in.open, in.batched())
	}
	return in
}
