package diagnosis

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// starvedPod is a pod whose TTFT bursts by its own: in each 10 s block a
// set number of its 20 requests a second take 0.3 s instead of 0.15 s, by
// a cycle of 0-20 % (a burstiness its dispersion factors measure), then a
// lone TTFT shift of slow of 20 a second, with nothing else changed.
type starvedPod struct {
	f     *feeder
	block int
}

func (p *starvedPod) second(slow int) second {
	s := healthy
	s.requests = 20
	s.ttfts = make([]float64, 20)
	for k := range s.ttfts {
		s.ttfts[k] = 0.15
		if k < slow {
			s.ttfts[k] = 0.3
		}
	}
	return s
}

// calm feeds n seconds of the pod's own bursts.
func (p *starvedPod) calm(n int) {
	cycle := []int{0, 2, 1, 4, 2, 0, 3, 4}
	for i := 0; i < n; i += 10 {
		p.f.feed(min(10, n-i), p.second(cycle[p.block%len(cycle)]), nil)
		p.block++
	}
}

// TestStarvedReferenceNamesNoLoneSymptom: an overload of 200 s and a calm
// of 90 s after the pod's first 70 s leave the incident-free reference
// starved: under half a baseline of time (the first minute and the calm
// after the probation) though it began more than a baseline ago. A lone
// TTFT shift against it (40 % of the requests slow where the pod's bursts
// reach 20 %, no cause moving) opens an incident, which keeps its time out
// of the reference, but nothing is named until a symptom shows at the
// dispersion's upper bound: on five or a dozen sub-windows the pod's
// bursts may be twice what they read. The same shift after a calm of a
// baseline, a stronger one, or one with a cause of its own is named.
// Fails on the code before: the lone shift on the starved reference was
// named ttft_up (issue 30, bursty seed 12 at 65 %: TTFT 1.27-1.31x against
// 115 s in three stretches over 22 minutes, truly 1.24x, named from its
// first seconds in 1.07 % of the steady polls).
func TestStarvedReferenceNamesNoLoneSymptom(t *testing.T) {
	opts := Options{Window: 10 * time.Second, Baseline: 5 * time.Minute, MinChange: 0.25, Interval: time.Second}
	var p0 *starvedPod // the last shift's pod
	shift := func(calm, slow int, s second) (*incidentState, []string, []string) {
		t.Helper()
		p := &starvedPod{f: newFeeder(t, opts)}
		p0 = p
		p.calm(70)
		p.f.feed(200, overload, nil)
		if got := values(p.f.fams, FamilyCause, "cause")[CauseQueueing]; got != 1 {
			t.Fatalf("the overload is not named queueing: %v", values(p.f.fams, FamilyCause, "cause"))
		}
		p.calm(calm)
		if p.f.d.tracks["m"].inc.open {
			t.Fatalf("the overload's incident still open after %d s of calm", calm)
		}
		in := &p.f.d.tracks["m"].inc
		x := p.second(slow)
		x.waiting = s.waiting
		for range 30 {
			p.f.feed(1, x, nil)
			if in.open && in.named {
				break
			}
		}
		if !in.open || !in.named {
			t.Fatalf("after %d s of calm, %d of 20 slow: the incident open %v, named %v; want both (its time kept out of the reference)", calm, slow, in.open, in.named)
		}
		p.f.feed(20, x, nil) // the shift goes on: held, not named anew
		return in, active(values(p.f.fams, FamilySymptom, "symptom")), active(values(p.f.fams, FamilyCause, "cause"))
	}
	in, sym, cs := shift(90, 8, healthy)
	if in.base.seconds >= opts.Baseline.Seconds()/2 || in.baseEnd-in.baseStart <= int64(opts.Baseline) {
		t.Fatalf("reference of %.0f s spanning %v, want under half a baseline spanning more than one", in.base.seconds, time.Duration(in.baseEnd-in.baseStart))
	}
	if len(sym) > 0 || len(cs) > 0 {
		t.Errorf("a lone shift of 40 %% slow against a starved reference named %v %v, want nothing until it shows at the dispersion's upper bound", sym, cs)
	}
	// and it says it cannot judge yet, in the JSON and on the page
	if mr := p0.f.d.Report().Models[0]; !mr.Baseline.Frozen || !mr.Baseline.Thin || mr.Incident != nil {
		t.Errorf("the report's baseline frozen %v, thin %v, incident %v; want a thin frozen baseline and no incident", mr.Baseline.Frozen, mr.Baseline.Thin, mr.Incident)
	}
	rec := httptest.NewRecorder()
	p0.f.d.PageHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/diagnosis", nil))
	if body := rec.Body.String(); !strings.Contains(body, "too little calm to judge it yet") {
		t.Errorf("the page does not say the change cannot be judged yet")
	}
	in, sym, _ = shift(400, 8, healthy)
	if in.base.seconds < opts.Baseline.Seconds()/2 || len(sym) != 1 || sym[0] != SymptomTTFTUp {
		t.Errorf("the same shift after a calm of a baseline (a reference of %.0f s) named %v, want ttft_up", in.base.seconds, sym)
	}
	_, sym, _ = shift(90, 14, healthy)
	if len(sym) != 1 || sym[0] != SymptomTTFTUp {
		t.Errorf("a shift of 70 %% slow against the starved reference named %v, want ttft_up", sym)
	}
	queued := healthy
	queued.waiting = 10
	_, sym, cs = shift(90, 8, queued)
	if len(sym) != 1 || sym[0] != SymptomTTFTUp || len(cs) != 1 || cs[0] != CauseQueueing {
		t.Errorf("the shift with ten requests waiting against the starved reference named %v %v, want ttft_up and queueing", sym, cs)
	}
}
