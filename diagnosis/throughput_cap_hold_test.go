package diagnosis

import (
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// capped is a second of a pod queueing at its cap of 40 before any
// incident: 28-40 waiting (mean 34), a refusal every fifth second, the
// latency and output healthy.
func capped(k int) second {
	s := healthy
	s.waiting = 28 + float64(k%13)
	if k%5 == 0 {
		s.refused = 1
	}
	return s
}

// TestThroughputDownHeldWhileTheCapRefuses: a pod already queueing at its
// cap (34 waiting on average, 1 refusal in 20 attempts) takes a KV cache
// cut: it stalls for two minutes (0.1 requests a second, 1 running, 2
// preemptions a second) and throughput_down is named on its output; then
// it serves again, too slowly (1.5 a second, 2 running, a third of the
// output), its queue stuck at the cap (40: 1.18x, within the minimum
// change, as it cannot grow) while it refuses 2.5 of every 4 attempts.
// throughput_down stays named until the load returns: the cap refusing
// more is the queue that cannot grow. Fails without that rule (rules.go,
// unserved): the incident ended as soon as the stall did, naming nothing
// but the topology's admission (the self-exciting KV cut at 90 %, seeds 3,
// 6 and 10: throughput_down ended and re-opened every few seconds, 40-54 %
// wrong or missing). The guard: once the pod serves as before, it clears.
func TestThroughputDownHeldWhileTheCapRefuses(t *testing.T) {
	f := newFeeder(t, testOpts)
	for k := range 700 {
		f.feed(1, capped(k), nil)
	}
	stall := healthy
	stall.requests, stall.running, stall.waiting, stall.kv, stall.refused, stall.preemptions = 0.1, 1, 40, 0.95, 4, 2
	f.feed(120, stall, nil)
	if got := values(f.fams, FamilySymptom, "symptom")[SymptomThroughputDown]; got != 1 {
		t.Fatalf("throughput_down %v after two minutes of the stall (symptoms %v), want named: the test does not test a hold", got, values(f.fams, FamilySymptom, "symptom"))
	}
	served := stall
	served.requests, served.running, served.preemptions, served.refused = 1.5, 2, 0, 2.5
	held, judged := 0, 0
	f.feed(180, served, func(fams []exposition.Family) {
		if m := &f.d.Report().Models[0]; m.Readiness.State != ReadyOK || m.Readiness.Stall {
			return // the window still holds the stall
		}
		judged++
		if values(fams, FamilySymptom, "symptom")[SymptomThroughputDown] == 1 {
			held++
		}
	})
	if judged < 150 || held < judged {
		t.Errorf("throughput_down held in %d of the %d evaluations after the stall (of 180 s) with the queue at its cap refusing 62 %% of the attempts, want all of at least 150", held, judged)
	}
	cleared := -1
	for k := range 200 {
		f.feed(1, capped(700+k), nil)
		if cleared < 0 && values(f.fams, FamilySymptom, "symptom")[SymptomThroughputDown] == 0 {
			cleared = k
		}
	}
	if limit := 60 + 10; cleared < 0 || cleared > limit {
		t.Errorf("throughput_down cleared %d s after the pod served as before (-1: never), want within the 60 s window and a few evaluations (%d s)", cleared, limit)
	}
}
