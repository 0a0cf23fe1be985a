package diagnosis

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// feeder drives one Diagnoser with the test pod, a second at a time.
type feeder struct {
	d    *Diagnoser
	p    *pod
	i    int
	fams []exposition.Family
}

func newFeeder(t *testing.T, opts Options) *feeder {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &feeder{d: d, p: newPod()}
}

// feed runs n seconds of s; each, if given, sees the families after each.
func (f *feeder) feed(n int, s second, each func(fams []exposition.Family)) {
	f.feedRanks(n, s, nil, each)
}

// feedRanks is feed with the k-th second's ranks engines(k) (nil: none).
func (f *feeder) feedRanks(n int, s second, engines func(k int) []EngineLoad, each func(fams []exposition.Family)) {
	for k := range n {
		o := f.p.tick(s)
		if engines != nil {
			o.Engines = engines(k)
		}
		f.observe(o)
		if each != nil {
			each(f.fams)
		}
	}
}

// observe scrapes o at the feeder's next second (one a second from t0).
func (f *feeder) observe(o Observation) []exposition.Family {
	f.fams = f.d.Observe(t0.Add(time.Duration(f.i)*time.Second), []Observation{o})
	f.i++
	return f.fams
}

// causes are the cause family's values after the last second fed.
func (f *feeder) causes() map[string]float64 { return values(f.fams, FamilyCause, "cause") }

// phase is n seconds of s.
type phase struct {
	n int
	s second
}

// fed is a feeder with opts that has run the phases in turn.
func fed(t *testing.T, opts Options, phases ...phase) *feeder {
	t.Helper()
	f := newFeeder(t, opts)
	for _, p := range phases {
		f.feed(p.n, p.s, nil)
	}
	return f
}

// waitingBaseline is the report's baseline mean of the requests waiting.
func waitingBaseline(f *feeder) *float64 { return f.d.Report().Models[0].Steps[1].Signals[0].Baseline }

func (f *feeder) now() time.Time { return t0.Add(time.Duration(f.i-1) * time.Second) }

// overload is a saturated second: TTFT 0.6 s (p90 0.76 s, 4x healthy) and
// ten requests waiting.
var overload = func() second {
	s := healthy
	s.ttft, s.waiting = 0.6, 10
	return s
}()

// flash feeds one second of 30 requests at TTFT 0.8 s (the recent p90
// jumps past 0.4 s, the exact mean to 1.5x) and one of 150 at 0.05 s (the
// p90 falls back within its bucket, the mean to 1.07x): a symptom for one
// evaluation, which never holds. (40 fast ones brought the p90 back but
// left the window's mean 1.34x for a whole window: no flash.)
func (f *feeder) flash() {
	s := healthy
	s.requests, s.ttft = 30, 0.8
	f.feed(1, s, nil)
	s.requests, s.ttft = 150, 0.05
	f.feed(1, s, nil)
}

// TestRelapseAfterALongIncidentIsNamed: an incident of 18 minutes ends (the
// maximum is 20), a flash follows, then a relapse of 116 s at TTFT p90 1.68x
// with requests queueing (issue 30: "a real incident never named"). The
// relapse must be named against the incident-free time (the 10 minutes
// before the incident: the two minutes of calm after it are on probation,
// onProbation), never against the overload. Fails on the code before: the relapse joined the long
// incident's chain, was adopted as the normal within a minute, and the
// rolling baseline, full of the overload, read it 0.42x.
func TestRelapseAfterALongIncidentIsNamed(t *testing.T) {
	opts := testOpts
	opts.MaxIncident = 20 * time.Minute
	f := newFeeder(t, opts)
	f.feed(640, healthy, nil)
	incidentStart := f.now()
	f.feed(18*60, overload, nil)
	if got := values(f.fams, FamilyCause, "cause")[CauseQueueing]; got != 1 {
		t.Fatalf("the long incident is not named queueing: %v", values(f.fams, FamilyCause, "cause"))
	}
	f.feed(75, healthy, nil)
	if age := values(f.fams, FamilyIncident, "")[""]; age != 0 {
		t.Fatalf("the incident has not ended 75 s after the load returned (age %v s)", age)
	}
	f.flash()
	f.feed(43, healthy, nil)
	// 1 in 4 seconds at TTFT 0.3 s: a quarter of the requests in (0.2, 0.4],
	// p90 0.2 + 0.2 × (0.9 − 0.75) / 0.25 = 0.32 s against 0.19: 1.68x.
	relapse := healthy
	relapse.waiting = 4
	var named, queueing int
	for k := range 116 {
		s := relapse
		if k%4 == 0 {
			s.ttft = 0.3
		}
		f.feed(1, s, func(fams []exposition.Family) {
			if values(fams, FamilySymptom, "symptom")[SymptomTTFTUp] == 1 {
				named++
			}
			if values(fams, FamilyCause, "cause")[CauseQueueing] == 1 {
				queueing++
			}
		})
	}
	rep := f.d.Report().Models[0]
	if named < 116-70 || queueing < 116-70 {
		t.Errorf("the relapse named ttft_up in %d and queueing in %d of its 116 s, want both from its first window on (at least 46)", named, queueing)
	}
	r := rep.Steps[0].Signals[0]
	if r.Ratio == nil || *r.Ratio < 1.6 || *r.Ratio > 1.7 {
		t.Errorf("TTFT p90 ratio %v at the relapse's end, want 1.6-1.7 against the incident-free baseline (recent %v, baseline %v)",
			formatNumber(r.Ratio), formatNumber(r.Recent), formatNumber(r.Baseline))
	}
	if b := rep.Baseline; b.Start == nil || !b.Start.Before(incidentStart) || b.Stretches > 1 || !b.Frozen {
		t.Errorf("the relapse's baseline %+v, want frozen from the incident-free time before the incident (%s) alone: the calm after it was shorter than the probation", b, incidentStart)
	}
}

// TestChainedIncidentsReferenceIncidentFreeTime: on bursty traffic
// incidents follow each other within a baseline; between them the pod is
// back to normal, at a level of its own (2 requests waiting, against 1 in
// the first minutes). Each incident is judged against the latest
// incident-free time, so once the pauses add up to a baseline the first
// minutes are no longer the reference. Fails on the code before: each
// incident inherited the first one's frozen baseline (waiting 1, from the
// first minutes) for as long as the chain lasted.
func TestChainedIncidentsReferenceIncidentFreeTime(t *testing.T) {
	f := newFeeder(t, testOpts)
	f.feed(640, healthy, nil)
	firstStart := f.now()
	pause := healthy
	pause.waiting = 2
	for cycle := range 5 {
		f.feed(120, overload, nil)
		if got := values(f.fams, FamilyCause, "cause")[CauseQueueing]; got != 1 {
			t.Fatalf("incident %d not named queueing: %v", cycle+1, values(f.fams, FamilyCause, "cause"))
		}
		f.feed(300, pause, nil)
		if age := values(f.fams, FamilyIncident, "")[""]; age != 0 {
			t.Fatalf("incident %d has not ended after 300 s of the pause (age %v s)", cycle+1, age)
		}
	}
	rep := f.d.Report().Models[0]
	b := rep.Baseline
	if b.Start == nil || !b.Start.After(firstStart) || b.Frozen || b.Stretches < 2 {
		t.Errorf("baseline after five incidents %+v, want stretches of the pauses only, all after the first incident (%s)", b, firstStart)
	}
	w := rep.Steps[1].Signals[0]
	if w.Baseline == nil || math.Abs(*w.Baseline-2) > 1e-9 {
		t.Errorf("waiting in the baseline %v, want 2 (the pauses' level, not the first minutes' 1)", formatNumber(w.Baseline))
	}
	if b.Seconds < 0.99*600 || b.Seconds > 600 {
		t.Errorf("baseline of %v s, want the baseline's 600 s of incident-free time", b.Seconds)
	}
}

// TestFlashKeepsTheIncidentFreeBaseline: after an incident, a flash (a
// symptom for one evaluation) neither discards the incident-free time
// before the incident nor ends the one after it: the reference still
// skips the incident, whose level (TTFT 0.6 s, 10 waiting) never enters it.
func TestFlashKeepsTheIncidentFreeBaseline(t *testing.T) {
	f := newFeeder(t, testOpts)
	f.feed(640, healthy, nil)
	start := f.now()
	f.feed(300, overload, nil)
	f.feed(70, healthy, nil)
	f.flash()
	f.feed(200, healthy, nil)
	rep := f.d.Report().Models[0]
	if rep.Incident != nil {
		t.Fatalf("the flash was named: %+v", rep.Incident)
	}
	b := rep.Baseline
	if b.Start == nil || !b.Start.Before(start) || b.Stretches != 2 || b.Frozen {
		t.Errorf("baseline after the flash %+v, want two stretches, the older before the incident (%s)", b, start)
	}
	if w := rep.Steps[1].Signals[0]; w.Baseline == nil || *w.Baseline > 1.01 {
		t.Errorf("waiting in the baseline %v, want about 1: the incident's 10 must not be in it", formatNumber(w.Baseline))
	}
	if r := rep.Steps[0].Signals[0]; r.Baseline == nil || *r.Baseline > 0.2 {
		t.Errorf("TTFT p90 of the baseline %v, want about 0.19 s: the incident's 0.76 s must not be in it", formatNumber(r.Baseline))
	}
}

// TestAdoptedLevelIsTheNormal: after --diagnosis.max-incident the new level
// becomes the normal, stretches of incident-free time or not: the rolling
// baseline (all new level) is the reference.
func TestAdoptedLevelIsTheNormal(t *testing.T) {
	opts := testOpts
	opts.MaxIncident = 20 * time.Minute
	// one incident, ended, then one past the maximum
	f := fed(t, opts, phase{640, healthy}, phase{300, overload}, phase{120, healthy}, phase{22 * 60, overload})
	rep := f.d.Report().Models[0]
	if rep.Adopted == nil || rep.Incident != nil {
		t.Fatalf("after the maximum: adopted %+v, incident %+v", rep.Adopted, rep.Incident)
	}
	if w := waitingBaseline(f); w == nil || *w != 10 || rep.Baseline.Stretches != 0 {
		t.Errorf("waiting in the baseline %v from %d stretches, want 10 from the rolling baseline", formatNumber(w), rep.Baseline.Stretches)
	}
}

// TestStretchesAreBounded: however many incidents come, a model keeps at
// most MaxStretches closed stretches, and none once a baseline of
// incident-free time has passed.
func TestStretchesAreBounded(t *testing.T) {
	f := newFeeder(t, testOpts)
	f.feed(640, healthy, nil)
	for range 12 {
		f.feed(90, overload, nil)
		f.feed(150, healthy, nil)
		if n := len(f.d.tracks["m"].free.closed); n > MaxStretches {
			t.Fatalf("%d closed stretches kept, want at most %d", n, MaxStretches)
		}
	}
	f.feed(11*60, healthy, nil)
	if fr := f.d.tracks["m"].free; len(fr.closed) != 0 || fr.start != nil {
		t.Errorf("after a baseline of incident-free time: %d stretches and a start point kept, want none", len(fr.closed))
	}
}

// TestLookbackBoundsTheIncidentFreeTime: incident-free time that ended
// longer ago than --diagnosis.baseline-lookback is no longer the pod's
// normal: after an incident longer than the lookback, the reference is the
// calm time since it, and the rolling baseline while that is shorter than
// the shortest baseline (five recent windows).
func TestLookbackBoundsTheIncidentFreeTime(t *testing.T) {
	opts := testOpts
	opts.BaselineLookback = 15 * time.Minute
	f := fed(t, opts, phase{640, healthy}, phase{16 * 60, overload}, phase{120, healthy})
	if n := len(f.d.tracks["m"].free.closed); n != 0 {
		t.Errorf("%d stretches kept that ended more than the lookback ago", n)
	}
	if b := f.d.Report().Models[0].Baseline; b.Stretches != 0 || b.Seconds < 599 {
		t.Errorf("baseline %+v, want the rolling one", b)
	}
	f.feed(6*60, healthy, nil)
	if w := waitingBaseline(f); w == nil || *w != 1 {
		t.Errorf("waiting in the baseline %v, want 1: the calm time since the incident", formatNumber(w))
	}
}

// shiftNamed feeds ten minutes of a healthy pod, then seconds of shift,
// and fails unless cause is named.
func shiftNamed(t *testing.T, shift second, seconds int, cause string) *feeder {
	t.Helper()
	f := newFeeder(t, testOpts)
	f.feed(640, healthy, nil)
	f.feed(seconds, shift, nil)
	if got := values(f.fams, FamilyCause, "cause")[cause]; got != 1 {
		t.Fatalf("%s %v after %d s of its shift, want named (causes %v)", cause, got, seconds, values(f.fams, FamilyCause, "cause"))
	}
	return f
}

// TestIncidentEndedInALullIsNamedAgain: bursty traffic has lulls that end
// an incident whose shift goes on (or, since the incident is held by its
// traffic cause's evidence, leave it named without a symptom:
// TestTrafficCauseHeldThroughALull; the lull's reference is what is
// checked here). The prefix cache stops hitting (TTFT
// 0.3 s); at a lull the load is lighter and TTFT is back (0.15 s) for 150 s
// while the cache still misses, and the incident ends; then TTFT rises
// again. The calm after the end is on probation (onProbation): it must
// not join the incident-free baseline, or its sub-windows' range (the
// cache at 0) hides the misses, and the resumed shift is never named
// (issue 30: incidents that vanish). Fails on the code before.
func TestIncidentEndedInALullIsNamedAgain(t *testing.T) {
	missesResumedAfterALull(t, 150)
}

// missesResumedAfterALull feeds ten minutes of a healthy pod, three of
// prefix cache misses (TTFT 0.3 s, named), lull seconds of the same misses
// at a lighter load (TTFT back to 0.15 s), then the misses again, and
// fails unless prefix_cache_misses is named within the window + 15 s.
func missesResumedAfterALull(t *testing.T, lull int) *feeder {
	t.Helper()
	misses, lulled := healthy, healthy
	misses.hitRatio, misses.ttft = 0, 0.3
	lulled.hitRatio = 0
	f := shiftNamed(t, misses, 180, CausePrefixCacheMisses)
	f.feed(lull, lulled, nil)
	named := -1
	for k := range 120 {
		f.feed(1, misses, nil)
		if named < 0 && values(f.fams, FamilyCause, "cause")[CausePrefixCacheMisses] == 1 {
			named = k
		}
	}
	if named < 0 || named > 60+15 {
		t.Errorf("prefix_cache_misses named %d s after the shift resumed (-1: never), want within the window + 15 s (causes %v)", named, values(f.fams, FamilyCause, "cause"))
	}
	return f
}

// TestTrafficShiftsLullIsNoReference: the prefix cache stops hitting (TTFT
// 0.3 s), then a lull of five minutes, longer than the probation, brings
// TTFT back (0.15 s) while the cache still misses, and the incident ends;
// then TTFT rises again (the incident may instead stay named through it:
// TestTrafficCauseHeldThroughALull). The lull is the same shift with a lighter load,
// not normal: it must not join the incident-free baseline (its
// sub-windows, the cache at 0, would hide the misses), so the resumed
// shift is named prefix_cache_misses against the hit ratio before it
// (issue 30: on the bursty simulator, once the lulls joined the
// reference, ttft_up was left unexplained). Fails on the code before:
// the lull joined the reference after its probation.
func TestTrafficShiftsLullIsNoReference(t *testing.T) {
	f := missesResumedAfterALull(t, 300)
	for _, st := range f.d.Report().Models[0].Steps {
		for _, h := range st.Signals {
			if h.Signal == SignalPrefixCacheHitRatio && (h.Baseline == nil || *h.Baseline < 0.49) {
				t.Errorf("%s in the baseline %v, want 0.5: the lull's misses must not be in it", h.Signal, formatNumber(h.Baseline))
			}
		}
	}
}

// TestLoadPausesAreTheReference: a lull keeps only traffic causes out of
// the reference. After a queueing incident the pauses at a queue of their
// own (2 waiting, against 1 before) are the pod's normal at its level, as
// TestChainedIncidentsReferenceIncidentFreeTime asks; and after a
// prefix-cache incident whose cache hits again, the calm joins as before.
func TestLoadPausesAreTheReference(t *testing.T) {
	f := newFeeder(t, testOpts)
	misses := healthy
	misses.hitRatio, misses.ttft = 0, 0.3
	f.feed(640, healthy, nil)
	f.feed(180, misses, nil)
	f.feed(400, healthy, nil)
	if b := f.d.Report().Models[0].Baseline; b.Stretches < 2 {
		t.Errorf("baseline %+v after the cache hit again for 400 s, want the calm since the incident in it", b)
	}
	if in := f.d.tracks["m"].inc; in.inLull() {
		t.Errorf("still in a lull %v after the cache hit again", in.lull)
	}
}

// TestLullEndsWhenTheShiftIsGone: prompts three times as long name
// long_prompts; then TTFT is back and the prompts are 1.5x the baseline's
// (a mix that drifted, not the shift: the load returned). What is left is
// below half way, in log, to the incident's 3x: no lull, and the calm
// joins the reference after its probation, at its own prompt length. Fails
// on the code before: the lull held while the prompts stayed significantly
// longer than the stale reference, which then named long_prompts again at
// every latency burst (the bursty simulator, seed 5: 0.47 % false claims
// and 14 % of the steady polls naming something, against 0.00 and 1.1 %).
func TestLullEndsWhenTheShiftIsGone(t *testing.T) {
	long, drifted := healthy, healthy
	long.prompt, long.ttft = 1200, 0.3
	drifted.prompt = 600
	f := shiftNamed(t, long, 180, CauseLongPrompts)
	f.feed(400, drifted, nil)
	if in := f.d.tracks["m"].inc; in.open || in.inLull() {
		t.Errorf("incident open %v, lull %v after 400 s of prompts 1.5x at the baseline's TTFT, want neither", in.open, in.lull)
	}
	for _, st := range f.d.Report().Models[0].Steps {
		for _, s := range st.Signals {
			if s.Signal == SignalPromptTokensMean && (s.Baseline == nil || *s.Baseline < 450) {
				t.Errorf("%s in the baseline %v, want the calm's 600 in it (above 450)", s.Signal, formatNumber(s.Baseline))
			}
		}
	}
}

// TestTrafficCauseHeldThroughALull: the prefix cache stops hitting (TTFT
// 0.3 s) and prefix_cache_misses is named; then for 150 s the load is
// lighter and TTFT is back (0.15 s) while the cache still hits nothing.
// The cause's own evidence holds throughout: the incident stays named by
// it, with no symptom, and names ttft_up again as soon as TTFT rises
// (issue 30: holds with evidence; on the bursty simulator the incident
// ended in each lull and each resumption went unexplained for the 3
// evaluations and the range check of naming it again: prefix_cache_misses
// 13.7 % wrong or missing). Once the cache hits again the incident ends.
// Fails on the code before: the incident ended at the lull.
func TestTrafficCauseHeldThroughALull(t *testing.T) {
	misses, lull := healthy, healthy
	misses.hitRatio, misses.ttft = 0, 0.3
	lull.hitRatio = 0
	f := shiftNamed(t, misses, 180, CausePrefixCacheMisses)
	for k := range 150 {
		f.feed(1, lull, nil)
		cause, age := values(f.fams, FamilyCause, "cause")[CausePrefixCacheMisses], values(f.fams, FamilyIncident, "")[""]
		if cause != 1 || age == 0 {
			t.Fatalf("%d s into the lull: prefix_cache_misses %v, incident age %v s; want named in the incident while the cache still misses", k, cause, age)
		}
	}
	if got := values(f.fams, FamilySymptom, "symptom")[SymptomTTFTUp]; got != 0 {
		t.Errorf("ttft_up %v after 150 s at the baseline's TTFT, want cleared", got)
	}
	if inc := f.d.Report().Models[0].Incident; inc == nil || !strings.Contains(inc.Sentence, "atency is back within the baseline") {
		t.Errorf("incident %+v in the lull, want its sentence to say the latency is back", inc)
	}
	named := -1
	for k := range 60 {
		f.feed(1, misses, nil)
		if named < 0 && values(f.fams, FamilySymptom, "symptom")[SymptomTTFTUp] == 1 {
			named = k
		}
	}
	t.Logf("ttft_up named again %d s after TTFT rose", named)
	if named < 0 || named > 15 {
		t.Errorf("ttft_up named again %d s after TTFT rose (-1: never), want within 15 s", named)
	}
	f.feed(120, healthy, nil)
	if age := values(f.fams, FamilyIncident, "")[""]; age != 0 {
		t.Errorf("incident age %v s after the cache hit again for 120 s, want ended", age)
	}
}

// TestTrafficCauseBesideAQueueIsNotHeld: a client's batch of prompts three
// times as long queues (6 waiting, TTFT 0.3 s): queueing and long_prompts
// are named. Then the queue drains and TTFT is back while the prompts stay
// long: the queue's end explains the latency's return, so the incident is
// not held by long_prompts without a symptom (it ends, and the lull keeps
// the calm out of the reference as before). Fails without the rule that a
// load cause named in the incident forgoes the hold (on the bursty
// simulator, seed 5, long_prompts named beside preemptions was held after
// the load returned, on a mix that had drifted to 1.5-2x the reference:
// steady false claims 0.67 -> 9.57 % in preemptions' run).
func TestTrafficCauseBesideAQueueIsNotHeld(t *testing.T) {
	f := newFeeder(t, testOpts)
	burst, after := healthy, healthy
	burst.prompt, burst.waiting, burst.ttft = 1200, 6, 0.3
	after.prompt = 1200
	f.feed(640, healthy, nil)
	f.feed(180, burst, nil)
	c := values(f.fams, FamilyCause, "cause")
	if c[CauseQueueing] != 1 || c[CauseLongPrompts] != 1 {
		t.Fatalf("causes %v after three minutes of a queue of long prompts, want queueing and long_prompts", c)
	}
	f.feed(120, after, nil)
	if in := f.d.tracks["m"].inc; in.open {
		t.Errorf("incident open (quiet %v, causes %v) 120 s after the queue drained and TTFT came back, want ended", in.quiet, values(f.fams, FamilyCause, "cause"))
	}
}

// TestYoungIncidentHeldOnACurrentReference: the prefix cache stops hitting
// for 100 s, less than HoldWindows recent windows, and prefix_cache_misses
// is named; then TTFT is back while the cache still misses. The reference
// is the calm just before (current) and the misses held over all the
// incident's windows (no burst): the incident stays named by its cause, as
// an older one is (on the bursty simulator, seed 2, long_outputs' first
// incident ended 12 s old, its shift unnamed for two minutes: 18.1 % wrong
// or missing). Fails on the code before: the incident ended into a lull.
func TestYoungIncidentHeldOnACurrentReference(t *testing.T) {
	misses, lull := healthy, healthy
	misses.hitRatio, misses.ttft = 0, 0.3
	lull.hitRatio = 0
	f := shiftNamed(t, misses, 100, CausePrefixCacheMisses)
	f.feed(60, lull, nil)
	if in := f.d.tracks["m"].inc; !in.open || !in.quiet {
		t.Errorf("incident open %v (quiet %v), lull %v a window into the lull of a 100 s incident on a current reference, want held open, quiet", in.open, in.quiet, in.lull)
	}
	if got := values(f.fams, FamilyCause, "cause")[CausePrefixCacheMisses]; got != 1 {
		t.Errorf("prefix_cache_misses %v a window into the lull while the cache still misses, want named", got)
	}
}

// TestYoungIncidentOnAStaleReferenceEndsInALull: as above, but the
// reference spans more than two baselines (a queueing incident of 700 s
// lies inside it, and a few minutes of calm since): an incident that
// young on a reference mostly that old is not held by its traffic cause
// without a symptom: it ends, and the lull keeps the calm out of the
// reference as before. Fails without the rule (on the bursty simulator,
// seed 5, short incidents on a prompt mix that had drifted from a stale
// reference were held: 3.28 % of long_prompts' steady polls named a cause
// where no latency moved).
func TestYoungIncidentOnAStaleReferenceEndsInALull(t *testing.T) {
	f := newFeeder(t, testOpts)
	queue, misses, lull := healthy, healthy, healthy
	queue.waiting, queue.ttft = 12, 0.3
	misses.hitRatio, misses.ttft = 0, 0.3
	lull.hitRatio = 0
	f.feed(640, healthy, nil)
	f.feed(700, queue, nil)
	f.feed(300, healthy, nil)
	if in := f.d.tracks["m"].inc; in.open {
		t.Fatalf("incident open (causes %v) 300 s after the queue drained, want ended", values(f.fams, FamilyCause, "cause"))
	}
	f.feed(100, misses, nil)
	if got := values(f.fams, FamilyCause, "cause")[CausePrefixCacheMisses]; got != 1 {
		t.Fatalf("prefix_cache_misses %v after 100 s of misses, want named", got)
	}
	in := f.d.tracks["m"].inc
	if span, b := in.baseEnd-in.baseStart, 2*int64(testOpts.Baseline); span < b {
		t.Fatalf("the reference spans %v, want over two baselines (%v): the test needs a stale one", time.Duration(span), time.Duration(b))
	}
	f.feed(60, lull, nil)
	if in := f.d.tracks["m"].inc; in.open || !in.inLull() {
		t.Errorf("incident open %v (quiet %v), lull %v a window into the lull of a 100 s incident on a stale reference, want ended into a lull", in.open, in.quiet, in.lull)
	}
}

// TestTrafficCauseBesideRefusalsIsNotHeld: the prefix cache stops hitting
// (TTFT 0.3 s) while the pod refuses a third of its attempts at its queue
// cap: prefix_cache_misses and admission are named. Then the refusals stop
// and TTFT is back while the cache still misses: the load's end explains
// the latency's return, as a drained queue's does
// (TestTrafficCauseBesideAQueueIsNotHeld), so the incident is not held by
// prefix_cache_misses without a symptom. On the bursty simulator at 90 %
// of capacity (seed 14) an overload named long_outputs and admission (not
// queueing), and long_outputs held the incident 23 polls after the load
// returned, TTFT down to 0.1x: 1.53 % false causes in the steady polls.
// Fails on main 35655fa: admission was not a load cause for the hold.
func TestTrafficCauseBesideRefusalsIsNotHeld(t *testing.T) {
	misses, lull := healthy, healthy
	misses.hitRatio, misses.ttft, misses.refused = 0, 0.3, 2
	lull.hitRatio = 0
	f := newFeeder(t, testOpts)
	f.feed(640, healthy, nil)
	f.feed(180, misses, nil)
	if c := values(f.fams, FamilyCause, "cause"); c[CausePrefixCacheMisses] != 1 || c[CauseAdmission] != 1 {
		t.Fatalf("causes %v after three minutes of cache misses and refusals, want prefix_cache_misses and admission", active(c))
	}
	f.feed(120, lull, nil)
	if in := f.d.tracks["m"].inc; in.open {
		t.Errorf("incident open (quiet %v, causes %v) 120 s after the refusals stopped and TTFT came back, want ended", in.quiet, active(values(f.fams, FamilyCause, "cause")))
	}
}
