package diagnosis

import (
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// TestStallJudgedOnItsThroughput: a KV cache cut so deep that the pod all
// but stops finishing requests at once (0.1 a second, too few to test a
// latency, 1 running against 8, 300 waiting against 1, 5 preemptions a
// second against none) is judged on its throughput: throughput_down and
// preemptions are named, vllm_diagnosis_ready 1 with the readiness marked a
// stall. Fails on the code before: nothing was named in any of the stall's
// evaluations, no incident being open and named before it to hold (the
// self-exciting simulator's KV cut at 90 %, seed 1: too_little_traffic for
// three minutes, 97 % of the judged polls wrong or missing). The guard: a
// quiet pod (its traffic gone, nothing waiting) is still not judged.
func TestStallJudgedOnItsThroughput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waiting float64
		judged  bool
	}{{"stall", 300, true}, {"quiet", 0, false}} {
		f := fed(t, testOpts, phase{700, healthy})
		stall := healthy
		stall.requests, stall.running, stall.waiting, stall.kv = 0.1, 1, tc.waiting, 0.95
		if tc.judged {
			stall.preemptions = 5
		}
		stalls, named := 0, 0
		f.feed(150, stall, func(fams []exposition.Family) {
			m := &f.d.Report().Models[0]
			if m.Readiness.State == ReadyOK && !m.Readiness.Stall {
				return // the window still holds enough finished requests
			}
			if m.Readiness.State != ReadyOK {
				if c := values(fams, FamilyCause, "cause"); len(active(c)) > 0 {
					t.Fatalf("%s: causes %v named while not judged", tc.name, c)
				}
				return
			}
			stalls++
			if values(fams, FamilyReady, "")[""] != 1 {
				t.Fatalf("%s: vllm_diagnosis_ready %v in a judged stall, want 1", tc.name, values(fams, FamilyReady, ""))
			}
			if values(fams, FamilySymptom, "symptom")[SymptomThroughputDown] == 1 && values(fams, FamilyCause, "cause")[CausePreemptions] == 1 {
				named++
			}
		})
		switch {
		case !tc.judged && stalls > 0:
			t.Errorf("%s: a quiet pod (0.1 requests a second, nothing waiting) judged in %d evaluations, want none", tc.name, stalls)
		case tc.judged && (stalls < 80 || named < stalls-10):
			t.Errorf("%s: throughput_down with preemptions named in %d of %d judged stall evaluations (of 150 s; the window holds the stall from 57 s on), want all but the naming's first seconds", tc.name, named, stalls)
		}
	}
}

// TestPreemptionsOnsetFreezesTheReference: a KV cache cut preempts most in
// its first seconds (30 a second for 15 s against none), before any
// latency moves; then the pod serves on with a preemption a second, 50
// waiting, and its TTFT rises 70 s after the cut. Preemptions are named
// with the TTFT: the onset opened the incident, freezing the reference
// before the cut entered it. Fails on the code before: the onset joined
// the rolling baseline (its sub-window of 30 a second made 1 a second read
// within the bursts) and preemptions were named in none of the 60
// evaluations after the TTFT rose (the self-exciting simulator's KV cut at
// 50 %, seed 1: 100 % wrong or missing, never named). The guard: the same
// pod without the cut's preemptions names none.
func TestPreemptionsOnsetFreezesTheReference(t *testing.T) {
	for _, cut := range []bool{true, false} {
		f := fed(t, testOpts, phase{700, healthy})
		onset, served := healthy, healthy
		onset.waiting, onset.running = 50, 6
		served.waiting, served.running = 50, 6
		if cut {
			onset.preemptions, served.preemptions = 30, 1
		}
		f.feed(15, onset, nil)
		f.feed(55, served, nil)
		late := served
		late.ttft = 0.6
		named := 0
		f.feed(60, late, func(fams []exposition.Family) {
			if values(fams, FamilyCause, "cause")[CausePreemptions] == 1 {
				named++
			}
		})
		switch {
		case cut && named < 50:
			t.Errorf("preemptions named in %d of the 60 evaluations after the TTFT rose, want at least 50 (causes at the end %v)", named, values(f.fams, FamilyCause, "cause"))
		case !cut && named > 0:
			t.Errorf("without the cut's preemptions, preemptions named in %d evaluations, want none", named)
		}
	}
}

// TestFewerRunningWhileRequestsQueueIsThroughputDown: a KV cache cut that
// halves the requests running (8 -> 4) and the output (400 -> 200 tokens a
// second) while the queue grows (1 -> 40 waiting, 2 preemptions a second)
// is a server admitting fewer than it is asked to, not less traffic:
// throughput_down is named, with preemptions. Fails on the code before:
// fewer requests running always read as less traffic, and no symptom was
// named (the self-exciting simulator's KV cut at 50 %, seed 1: the first
// 20 s of the cut, running 0.1x with 300 waiting, named nothing). The
// guard is TestEachCause's "less traffic is no symptom" (the same halving,
// the queue as before).
func TestFewerRunningWhileRequestsQueueIsThroughputDown(t *testing.T) {
	f := fed(t, testOpts, phase{700, healthy})
	cut := healthy
	cut.requests, cut.running, cut.waiting, cut.preemptions = 2, 4, 40, 2
	f.feed(61, cut, nil)
	if got := values(f.fams, FamilySymptom, "symptom")[SymptomThroughputDown]; got != 1 {
		t.Errorf("throughput_down %v after 61 s of half the output with 40 waiting (symptoms %v), want 1", got, values(f.fams, FamilySymptom, "symptom"))
	}
	if got := values(f.fams, FamilyCause, "cause")[CausePreemptions]; got != 1 {
		t.Errorf("preemptions %v (causes %v), want named", got, values(f.fams, FamilyCause, "cause"))
	}
}

// TestPreemptionsHeldWhileTheBatchIsHeldBack: a KV cache cut named as
// preemptions (3 a second, the requests running 8 -> 2 with 40 waiting,
// the output halved) whose cache is then too small to preempt at all (no
// preemption, the batch still at 2 with 40 waiting, its usage gauge 0.35
// against 0.4: each request holds 3.5 times the share of it) keeps
// preemptions named: the limit they showed is still there, seen from the
// batch's side (TestPreemptionsHeldWhileTheCacheStaysFull's freed cache,
// a batch 0.75x at the baseline's usage, still clears them). Fails on the code before: the
// cut named nothing (fewer running read as less traffic); with it named,
// preemptions cleared at the first windows without one (the self-exciting
// simulator at 90 %, seed 1: 98 judged polls naming admission alone). The
// guard: once the batch is back (8 running, 1 waiting) they clear.
func TestPreemptionsHeldWhileTheBatchIsHeldBack(t *testing.T) {
	f := fed(t, testOpts, phase{700, healthy})
	cut := healthy
	cut.requests, cut.running, cut.waiting, cut.preemptions = 2, 2, 40, 3
	f.feed(90, cut, nil)
	if got := values(f.fams, FamilyCause, "cause")[CausePreemptions]; got != 1 {
		t.Fatalf("preemptions %v after 90 s of the cut (causes %v), want named: the test does not test a hold", got, values(f.fams, FamilyCause, "cause"))
	}
	small := cut
	small.preemptions, small.kv = 0, 0.35
	held := 0
	f.feed(120, small, func(fams []exposition.Family) {
		if values(fams, FamilyCause, "cause")[CausePreemptions] == 1 {
			held++
		}
	})
	if held < 120 {
		t.Errorf("preemptions held in %d of the 120 evaluations with the batch held back and none preempted, want all", held)
	}
	cleared := -1
	for k := range 200 {
		f.feed(1, healthy, nil)
		if cleared < 0 && values(f.fams, FamilyCause, "cause")[CausePreemptions] == 0 {
			cleared = k
		}
	}
	if limit := 60 + 30; cleared < 0 || cleared > limit {
		t.Errorf("preemptions cleared %d s after the batch came back (-1: never), want within %d s", cleared, limit)
	}
}

// TestStallJudgedHeldAtTheUndividedLevel: a stall judged on its throughput
// (0.1 requests a second, 300 waiting, the output 400 -> 4 tokens a
// second: throughput_down named) whose few requests then generate more
// (each 3000 tokens: the output 0.75x, p = 0.004, significant at the
// undivided α but not at α / 10) stays judged, throughput_down named, as a
// named symptom is held. Fails without that hold (diagnosis.go,
// judgedStall on the strict symptom alone): judged in 57 of the 120
// evaluations, the rest not ready, the verdict held instead of judged.
func TestStallJudgedHeldAtTheUndividedLevel(t *testing.T) {
	f := fed(t, testOpts, phase{700, healthy})
	stall := healthy
	stall.requests, stall.running, stall.waiting, stall.kv, stall.preemptions = 0.1, 1, 300, 0.95, 5
	f.feed(120, stall, nil)
	if m := &f.d.Report().Models[0]; !m.Readiness.Stall || values(f.fams, FamilySymptom, "symptom")[SymptomThroughputDown] != 1 {
		t.Fatalf("after 120 s of the stall: readiness %+v, symptoms %v, want a judged stall naming throughput_down: the test does not test its hold", m.Readiness, active(values(f.fams, FamilySymptom, "symptom")))
	}
	longer := stall
	longer.output = 0.75 * healthy.requests * healthy.output / stall.requests
	judged := 0
	f.feed(120, longer, func(fams []exposition.Family) {
		m := &f.d.Report().Models[0]
		if m.Readiness.State == ReadyOK && m.Readiness.Stall && values(fams, FamilySymptom, "symptom")[SymptomThroughputDown] == 1 {
			judged++
		}
	})
	if judged < 120 {
		t.Errorf("the stall judged with throughput_down named in %d of the 120 evaluations at 0.75x the output, want all: named, it is held at the undivided level", judged)
	}
}

// preemptionsFrozen feeds 900 s of the healthy pod preempting rate a
// second after a baseline without one, and returns the seconds its
// reference was frozen, the first and the last (-1: never).
func preemptionsFrozen(t *testing.T, rate float64) (frozen, first, last int) {
	t.Helper()
	f := fed(t, testOpts, phase{700, healthy})
	s := healthy
	s.preemptions = rate
	first, last = -1, -1
	for k := range 900 {
		f.feed(1, s, nil)
		if f.d.Report().Models[0].Baseline.Frozen {
			frozen++
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	return frozen, first, last
}

// TestPreemptionsOnsetNeedsItsShare: preemptions from none to 0.07 a
// second (4 a window, p < 0.001 against none, beyond every sub-window) are
// 1.75 % of the requests started, under the share that names them
// (MinPreemptionShare, 2 %): they open no incident, and the reference is
// never frozen. Fails without the share in the onset's rule
// (evaluation.preempted): frozen for 602 s, the calm kept out of the
// reference for a rate that explains nothing.
func TestPreemptionsOnsetNeedsItsShare(t *testing.T) {
	if frozen, first, _ := preemptionsFrozen(t, 0.07); frozen > 0 {
		t.Errorf("the reference frozen %d s from %d s after 0.07 preemptions a second began (1.75 %% of the requests), want never", frozen, first)
	}
}

// TestPreemptionsOnsetThawsAfterABaseline: preemptions from none to one a
// second (a quarter of the requests) with no latency moved open an
// incident that names nothing; with no symptom after a baseline (10 min)
// it closes and the reference thaws, so the rolling baseline takes the
// new rate in. Fails without that end (incident.go, the calm counted
// only after a baseline): frozen for all 900 s.
func TestPreemptionsOnsetThawsAfterABaseline(t *testing.T) {
	frozen, first, last := preemptionsFrozen(t, 1)
	if first < 0 || first > 10 {
		t.Fatalf("the reference first frozen %d s after one preemption a second began (-1: never), want within seconds: the test does not test the onset", first)
	}
	if limit := int(testOpts.Baseline/time.Second) + 10; last > limit {
		t.Errorf("the reference frozen %d s, until %d s after the onset with no symptom, want thawed within a baseline and a few evaluations (%d s)", frozen, last, limit)
	}
}
