package diagnosis

import (
	"testing"
)

// preemptionsProbation is the model's record of what the incident that
// ended left for preemptions (one model fed).
func (f *feeder) preemptionsProbation() probation {
	for _, tr := range f.d.tracks {
		for i, k := range probationCauses {
			if k == kPreemptions {
				return tr.inc.probations[i]
			}
		}
	}
	return probation{}
}

// TestPreemptionsProbationResumedOnAFullCacheAlone: prompts 2.5x fill the
// KV cache (0.95 against 0.4) with 30 waiting and the TTFT 4x; a clump of
// preemptions (1 a second for 20 s) names preemptions. The queue drains,
// the prompts and the full cache stay (0.9): the incident ends with the
// calm on preemptions' probation. Then, 200 s on, the queue is back (30
// waiting, the TTFT 4x, the cache 0.95) with no preemption: the full cache
// alone (evaluation.cacheFull) resumes the incident, preemptions carried,
// and the memory check clears them in that same evaluation: the windows
// they are held by show no preemption and each running request holds what
// its prompt accounts for (memoryHeld), so they are never named. The
// same TTFT with the cache full but no queue is no full cache: it waits
// HoldEvaluations as a new incident. Fails without the resumption's
// full-cache rule (Cause.probation.resumes: ttft_up named at once, the
// incident 0 s old), without the resumption (the probation never taken)
// and without the memory check on it (preemptions named in the burst).
func TestPreemptionsProbationResumedOnAFullCacheAlone(t *testing.T) {
	for _, queued := range []bool{true, false} {
		shift := healthy
		shift.ttft, shift.waiting, shift.kv, shift.prompt = 0.6, 30, 0.95, 1000
		clump := shift
		clump.preemptions = 1
		calm := healthy
		calm.kv, calm.prompt = 0.9, 1000
		f := fed(t, testOpts, phase{640, healthy}, phase{150, shift}, phase{20, clump}, phase{30, shift})
		if got := values(f.fams, FamilyCause, "cause")[CausePreemptions]; got != 1 {
			t.Fatalf("preemptions %v at the shift's end (causes %v), want named: the test does not test their probation", got, active(values(f.fams, FamilyCause, "cause")))
		}
		f.feed(200, calm, nil)
		if age := values(f.fams, FamilyIncident, "")[""]; age != 0 || !f.preemptionsProbation().on {
			t.Fatalf("after 200 s of calm with the cache full: incident %v s old, preemptions' probation %+v, want ended and on: the test does not test a resumption", age, f.preemptionsProbation())
		}
		burst := shift
		if !queued {
			burst.waiting = 1
		}
		named, preempted := -1, 0
		for k := range 60 {
			f.feed(1, burst, nil)
			if named < 0 && values(f.fams, FamilySymptom, "symptom")[SymptomTTFTUp] == 1 {
				named = k
				if age := values(f.fams, FamilyIncident, "")[""]; age < HoldEvaluations-1 {
					t.Errorf("queued %v: ttft_up named %d s into the burst in an incident %v s old, want held HoldEvaluations evaluations first: no full cache resumes it", queued, k, age)
				}
				if resumed := f.preemptionsProbation().from; resumed != queued {
					t.Errorf("queued %v: the incident named %d s into the burst resumed preemptions' probation: %v, want %v (the cache full with requests waiting resumes it)", queued, k, resumed, queued)
				}
			}
			if values(f.fams, FamilyCause, "cause")[CausePreemptions] == 1 {
				preempted++
			}
		}
		if named < 0 {
			t.Fatalf("queued %v: the burst's ttft_up never named", queued)
		}
		if preempted > 0 {
			t.Errorf("queued %v: preemptions named in %d of the burst's 60 evaluations with no preemption in its windows and the cache's share per request what the prompts account for, want none", queued, preempted)
		}
	}
}
