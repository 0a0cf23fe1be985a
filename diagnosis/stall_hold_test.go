package diagnosis

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// TestIncidentHeldThroughStall: a KV cache cut named as preemptions (3 a
// second, the inter-token latency 3x) deepens until the pod all but stops
// finishing requests (0.1 a second, too little traffic to judge) while
// 300 wait: the incident has not ended, so preemptions stay named
// (vllm_diagnosis_ready 0, the incident marked held through the stall)
// until the load returns, and then clear as after any incident. Fails on
// the code before: nothing was named while the pod read too_little_traffic
// (the self-exciting simulator's KV cut at 65 %, seed 1: 137 of 569
// judged polls). The guard: the same incident whose traffic merely falls,
// nothing waiting, names nothing while it cannot be judged, as before.
func TestIncidentHeldThroughStall(t *testing.T) {
	cut := healthy
	cut.itl, cut.kv, cut.preemptions = 0.15, 0.95, 3
	// A stall whose output fell is judged on it (TestStallJudgedOnItsThroughput);
	// one whose generated tokens a second stay (each of its few requests
	// far longer) has nothing to judge, and its incident is held.
	for _, tc := range []struct {
		name    string
		waiting float64
		held    bool
	}{{"stall", 300, true}, {"quiet", 0, false}} {
		f := fed(t, testOpts, phase{700, healthy})
		f.feed(120, cut, nil)
		if got := values(f.fams, FamilyCause, "cause")[CausePreemptions]; got != 1 {
			t.Fatalf("%s: preemptions %v after 120 s of the cut (causes %v), want named: the test does not test a named incident", tc.name, got, values(f.fams, FamilyCause, "cause"))
		}
		low := cut
		low.requests, low.running, low.waiting, low.output = 0.1, 1, tc.waiting, cut.output*cut.requests/0.1
		lowTraffic, held := 0, 0
		f.feed(150, low, func(fams []exposition.Family) {
			m := &f.d.Report().Models[0]
			if m.Readiness.State != ReadyLowTraffic {
				return
			}
			lowTraffic++
			if values(fams, FamilyReady, "")[""] != 0 {
				t.Fatalf("%s: vllm_diagnosis_ready %v while too_little_traffic, want 0", tc.name, values(fams, FamilyReady, ""))
			}
			named := values(fams, FamilyCause, "cause")[CausePreemptions] == 1
			marked := m.Incident != nil && m.Incident.Held == HeldStall && m.Readiness.Stall
			if named != marked {
				t.Fatalf("%s: preemptions named %t but the incident marked held through a stall %t (incident %+v, readiness %+v)", tc.name, named, marked, m.Incident, m.Readiness)
			}
			if named && held == 0 {
				// the page says it too, under the not-ready banner
				rec := httptest.NewRecorder()
				f.d.PageHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/diagnosis", nil))
				for _, want := range []string{`id="verdict">Not ready.`, "This is a stall, not a quiet pod", `data-held="stall"`, "Held through a stall", `data-cause="preemptions"`} {
					if !strings.Contains(rec.Body.String(), want) {
						t.Errorf("%s: the page held through the stall lacks %q", tc.name, want)
					}
				}
			}
			if named {
				held++
			}
		})
		if lowTraffic < 80 {
			t.Fatalf("%s: too_little_traffic in %d of 150 evaluations, want at least 80: the test does not test a stall", tc.name, lowTraffic)
		}
		if want := 0; tc.held {
			want = lowTraffic
			if held != want {
				t.Errorf("%s: preemptions held in %d of %d evaluations that read too_little_traffic while 300 wait, want all: the incident has not ended", tc.name, held, lowTraffic)
			}
		} else if held != want {
			t.Errorf("%s: preemptions named in %d of %d evaluations that read too_little_traffic with nothing waiting, want none: a quiet pod cannot be judged", tc.name, held, lowTraffic)
		}
		if !tc.held {
			continue
		}
		cleared := -1
		for k := range 300 {
			f.feed(1, healthy, nil)
			if cleared < 0 && values(f.fams, FamilyReady, "")[""] == 1 && values(f.fams, FamilyCause, "cause")[CausePreemptions] == 0 {
				cleared = k
			}
		}
		if limit := HoldWindows*60 + 30; cleared < 0 || cleared > limit {
			t.Errorf("%s: preemptions cleared %d s after the load returned (-1: never), want within %d s", tc.name, cleared, limit)
		}
	}
}

// TestStallHoldEndsAtMaxIncident: an incident held through a stall is
// released once it outlives --diagnosis.max-incident (here 7 minutes, the
// incident 2 of them old as the stall starts, the stall 7), as a judged
// one is adopted then: nothing is named after it.
func TestStallHoldEndsAtMaxIncident(t *testing.T) {
	opts := testOpts
	opts.Baseline, opts.MaxIncident = 5*time.Minute, 7*time.Minute
	cut := healthy
	cut.itl, cut.kv, cut.preemptions = 0.15, 0.95, 3
	f := fed(t, opts, phase{700, healthy}, phase{120, cut})
	stall := cut
	stall.requests, stall.running, stall.waiting, stall.output = 0.1, 1, 300, cut.output*cut.requests/0.1 // no throughput to judge
	first, last := -1, -1
	k := 0
	f.feed(420, stall, func(fams []exposition.Family) {
		if values(fams, FamilyCause, "cause")[CausePreemptions] == 1 {
			if f.d.Report().Models[0].Readiness.State == ReadyLowTraffic && first < 0 {
				first = k
			}
			last = k
		}
		k++
	})
	if first < 0 {
		t.Fatalf("preemptions never held through the stall: the test does not test a hold")
	}
	if last < 240 || last > 330 {
		t.Errorf("preemptions last named %d s into the 420 s stall (held from %d s), want released once the incident, opened about 120 s before the stall, outlived the maximum (7m)", last, first)
	}
}

// TestStallHoldKeepsTheRankFinding: the router sends every request to rank
// 0, which queues 30 beside an idle rank 1: queueing and rank_imbalance
// are named. Then the pod all but stops finishing requests (0.1 a second,
// each far longer, the output as before) while 300 wait on rank 0: the
// incident is held through the stall, and so is the finding named in it,
// in vllm_diagnosis_cause and the held incident's causes (the page's list
// under the not-ready banner), as last named (the
// router's skew is what the on-call has to fix; queueing alone says add
// replicas). Fails on the code before: the held verdict showed queueing
// without rank_imbalance in every held evaluation.
func TestStallHoldKeepsTheRankFinding(t *testing.T) {
	f := newFeeder(t, testOpts)
	even := []EngineLoad{{Engine: "0", Running: 4, Waiting: 0.5}, {Engine: "1", Running: 4, Waiting: 0.5}}
	f.feedRanks(640, healthy, ranks(even), nil)
	queued := healthy
	queued.ttft, queued.waiting = 0.3, 30
	f.feedRanks(180, queued, ranks([]EngineLoad{{Engine: "0", Running: 8, Waiting: 30}, {Engine: "1"}}), nil)
	if got := f.causes(); got[CauseQueueing] != 1 || got[CauseRankImbalance] != 1 {
		t.Fatalf("causes %v after three minutes of rank 0 queueing 30 beside an idle rank 1, want queueing and rank_imbalance: the test does not test a held finding", active(got))
	}
	stall := queued
	stall.requests, stall.running, stall.waiting, stall.output = 0.1, 1, 300, queued.output*queued.requests/0.1
	held, kept := 0, 0
	f.feedRanks(150, stall, ranks([]EngineLoad{{Engine: "0", Running: 1, Waiting: 300}, {Engine: "1"}}), func(fams []exposition.Family) {
		m := &f.d.Report().Models[0]
		if m.Incident == nil || m.Incident.Held != HeldStall {
			return
		}
		held++
		listed := false
		for _, a := range m.Incident.Causes {
			listed = listed || a.Cause == CauseRankImbalance
		}
		if got := values(fams, FamilyCause, "cause"); got[CauseQueueing] == 1 && got[CauseRankImbalance] == 1 && listed {
			kept++
		}
	})
	if held < 80 {
		t.Fatalf("the incident held through the stall in %d of 150 evaluations, want at least 80: the test does not test a held verdict", held)
	}
	if kept != held {
		t.Errorf("queueing and rank_imbalance named, the finding among the held incident's causes, in %d of the %d evaluations held through the stall, want all: the held verdict is the one last named", kept, held)
	}
}
