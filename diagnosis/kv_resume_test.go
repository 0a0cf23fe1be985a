package diagnosis

import (
	"math"
	"testing"
)

// kvResume feeds a KV cache cut that comes in bursts: a clump of
// preemptions (2 a second for 10 s) and 190 s more of the cut without one
// (the cache at 0.95, 30 waiting, the batch 6 against 8, the TTFT 4x),
// then a calm of 120 s (the TTFT and the queue back, the cache at kvCalm),
// then the next burst of the cut for 120 s with the cache at 0.95 and no
// preemption. kvCalm or the gauge NaN: a server without a KV gauge. It
// returns whether the incident was over at the calm's end, and the
// seconds into the burst its ttft_up and preemptions were first named (-1:
// never).
func kvResume(t *testing.T, kvCalm float64) (ended bool, symptom, preempted int) {
	t.Helper()
	base := healthy
	if math.IsNaN(kvCalm) {
		base.kv = kvCalm
	}
	cut := base
	cut.ttft, cut.running, cut.waiting = 0.6, 6, 30
	if !math.IsNaN(kvCalm) {
		cut.kv = 0.95
	}
	clump := cut
	clump.preemptions = 2
	calm := base
	calm.running, calm.kv = 6, kvCalm
	f := fed(t, testOpts, phase{640, base}, phase{10, clump}, phase{190, cut}, phase{120, calm})
	ended = values(f.fams, FamilyIncident, "")[""] == 0 && values(f.fams, FamilySymptom, "symptom")["ttft_up"] != 1
	symptom, preempted = -1, -1
	for k := range 120 {
		f.feed(1, cut, nil)
		if symptom < 0 && values(f.fams, FamilySymptom, "symptom")["ttft_up"] == 1 {
			symptom = k
		}
		if preempted < 0 && values(f.fams, FamilyCause, "cause")[CausePreemptions] == 1 {
			preempted = k
		}
	}
	return ended, symptom, preempted
}

// TestPreemptionsResumeWhileTheCacheStaysFull: an incident that named
// preemptions ends in a lull of the bursts while the KV cache stays full
// (0.9 against 0.4): the next burst, the cache full again with requests
// waiting behind a smaller batch, is the same memory limit, named with
// preemptions as soon as its TTFT shows (issue 30: on the bursty
// simulator's KV cut, seed 7, each burst's first seconds named nothing or
// the TTFT alone). Fails on the code before: the burst's ttft_up named
// without preemptions, which were never named again (no preemption fell).
func TestPreemptionsResumeWhileTheCacheStaysFull(t *testing.T) {
	ended, symptom, preempted := kvResume(t, 0.9)
	if !ended {
		t.Fatal("the incident still open after 120 s of calm: the test does not test a resumption")
	}
	if symptom < 0 {
		t.Fatal("the burst's ttft_up never named")
	}
	if preempted != symptom {
		t.Errorf("preemptions named %d s into the burst (-1: never), its ttft_up at %d s, with the cache full through the calm (0.9 against 0.4) and again in the burst: want both at once", preempted, symptom)
	}
}

// TestPreemptionsDoNotResumeOnceTheCacheIsFreed: the same burst after a
// calm in which the cache was freed (0.4, the baseline's) is a new
// incident: a full cache alone names no preemptions, nor does a server
// without a KV gauge.
func TestPreemptionsDoNotResumeOnceTheCacheIsFreed(t *testing.T) {
	for _, kv := range []float64{0.4, math.NaN()} {
		ended, symptom, preempted := kvResume(t, kv)
		if !ended || symptom < 0 {
			t.Fatalf("KV in the calm %v: the incident ended %v, the burst's ttft_up named at %d s: the test does not test a new incident", kv, ended, symptom)
		}
		if preempted >= 0 {
			t.Errorf("KV in the calm %v: preemptions named %d s into a burst without one (ttft_up at %d s), want never: the cache was freed (or no gauge says it was full)", kv, preempted, symptom)
		}
	}
}
