package diagnosis

import (
	"testing"
	"time"
)

// batchGrowth is a batch twice as large (16 running against 8) with every
// inter-token step three times as long: batch_growth on itl_up.
var batchGrowth = func() second {
	s := healthy
	s.running, s.itl = 16, 0.15
	return s
}()

// TestBatchGrowthHeldThroughABurstOfStarts: a named batch_growth stays
// named while the batch is still large when generated tokens per request
// started rise (half the requests get their first token: 2x), as they do
// in every lull of a bursty pod's starts while the batch already admitted
// keeps generating; the same rise, there before the batch grew, still
// keeps batch_growth from being named (longer outputs show in the
// finished requests only as they end). On the bursty simulator the rise cleared batch_growth in 13 to 20
// of the judged polls of each seed. Fails on the code before: it cleared
// 24 s into the lull of starts.
func TestBatchGrowthHeldThroughABurstOfStarts(t *testing.T) {
	fewStarts := batchGrowth
	fewStarts.starts = 2
	f := shiftNamed(t, batchGrowth, 120, CauseBatchGrowth)
	for k := range 60 {
		f.feed(1, fewStarts, nil)
		if got := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth]; got != 1 {
			t.Fatalf("%d s into the lull of starts: batch_growth %v (causes %v), want held while the batch is still twice as large", k, got, values(f.fams, FamilyCause, "cause"))
		}
	}
	quiet := healthy
	quiet.starts = 2
	f = newFeeder(t, testOpts)
	f.feed(640, healthy, nil)
	f.feed(60, quiet, nil)
	f.feed(120, fewStarts, nil)
	if got := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth]; got != 0 {
		t.Errorf("batch_growth %v after two minutes of a larger batch with tokens per request started 2x since before it grew, want not named", got)
	}
}

// TestBatchGrowthBeyondTheWork: a named batch_growth (4x the requests
// running, inter-token steps 1.6x) stays named when outputs then grow
// 1.5x and long_outputs is named beside it: 1.5x the tokens at 1.6x the
// time per step keep a request 2.4x as long, which accounts for a batch
// of at most 2.4 x 1.25 times, not 4 (Little's law: more requests
// arrived). A batch that grows only as far as its work does (outputs 3x,
// each step 1.6x: 3x the requests, at most 6x accounted for) is still
// the effect of longer outputs: batch_growth clears and long_outputs is
// named alone. On the bursty simulator a rate 2.5x ran 3-8x the requests
// while the drifting mix's outputs were 1.3x: batch_growth went unnamed
// beside long_outputs in 66 of seed 6's judged polls. Fails on the code
// before: batch_growth cleared once the outputs rose.
func TestBatchGrowthBeyondTheWork(t *testing.T) {
	more := healthy
	more.running, more.itl = 32, 0.08
	longer := more
	longer.output = 150
	f := shiftNamed(t, more, 120, CauseBatchGrowth)
	f.feed(120, longer, nil)
	c := values(f.fams, FamilyCause, "cause")
	if c[CauseBatchGrowth] != 1 || c[CauseLongOutputs] != 1 {
		t.Errorf("batch 4x, outputs 1.5x, steps 1.6x: batch_growth %v, long_outputs %v, want both named", c[CauseBatchGrowth], c[CauseLongOutputs])
	}

	grew := more
	grew.running = 16
	withWork := grew
	withWork.running, withWork.output = 24, 300
	f = shiftNamed(t, grew, 120, CauseBatchGrowth)
	f.feed(120, withWork, nil)
	c = values(f.fams, FamilyCause, "cause")
	if c[CauseBatchGrowth] != 0 || c[CauseLongOutputs] != 1 {
		t.Errorf("batch 3x, outputs 3x, steps 1.6x: batch_growth %v, long_outputs %v, want long_outputs alone", c[CauseBatchGrowth], c[CauseLongOutputs])
	}
}

// TestBatchGrowthOnMoreArrivals: the batch grows 2.5x with its steps 3x
// and batch_growth is named (11 s in); then the longer prompts (1.4x, TTFT
// 2.3x) show in the finished requests and long_prompts is named (by 30
// s). The work per request (prompts 1.4x, each step 3x) accounts for a
// batch of up to 5.25x, so the batch alone no longer tells that more
// requests came; the starts do, doubled (4 -> 8 a second) over the
// windows a named cause is held by: batch_growth stays named beside
// long_prompts. The same batch and prompts with the starts flat is still
// read as the work's, long_prompts alone. On the bursty simulator a rate
// 2.5x ran 2.1-2.4x the requests with prompts 1.3-1.45x: long_prompts
// replaced batch_growth in 21 of seed 5's judged polls. Fails on main
// 04c40c5: batch_growth cleared once long_prompts was named.
func TestBatchGrowthOnMoreArrivals(t *testing.T) {
	work := healthy
	work.running, work.itl, work.prompt, work.ttft = 20, 0.15, 560, 0.35
	more := work
	more.requests = 8
	for _, c := range []struct {
		name  string
		shift second
		batch float64
	}{{"starts 2x", more, 1}, {"starts flat", work, 0}} {
		f := newFeeder(t, testOpts)
		f.feed(640, healthy, nil)
		f.feed(120, c.shift, nil)
		got := values(f.fams, FamilyCause, "cause")
		if got[CauseLongPrompts] != 1 || got[CauseBatchGrowth] != c.batch {
			t.Errorf("%s, prompts 1.4x, batch 2.5x, steps 3x: long_prompts %v, batch_growth %v (causes %v), want 1 and %v", c.name, got[CauseLongPrompts], got[CauseBatchGrowth], got, c.batch)
		}
	}
}

// TestBatchCalmIsNoNormal: with 10 s windows, a batch twice as large names
// batch_growth in an incident that outlasts the probation (20 s) but not
// the hold's age; then for two minutes the batch stays 1.5x with its
// steps 1.2x (below the minimum change: no incident), then the batch
// grows 2x again with its steps 1.3x. The calm is no normal while the
// batch is beyond the minimum change: the reference keeps the healthy
// steps, the relapse reads 1.3x and names itl_up with batch_growth. Fails
// on the code before: the calm joined the reference after the probation
// and the relapse read under the minimum change.
func TestBatchCalmIsNoNormal(t *testing.T) {
	opts := Options{Window: 10 * time.Second, Baseline: 3 * time.Minute, MinChange: 0.25, Interval: time.Second}
	calm, relapse := healthy, healthy
	calm.running, calm.itl = 12, 0.06
	relapse.running, relapse.itl = 16, 0.065
	f := newFeeder(t, opts)
	f.feed(240, healthy, nil)
	f.feed(18, batchGrowth, nil)
	if got := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth]; got != 1 {
		t.Fatalf("batch_growth %v after 18 s of a batch 2x, want named", got)
	}
	f.feed(120, calm, nil)
	if age := values(f.fams, FamilyIncident, "")[""]; age != 0 {
		t.Fatalf("incident age %v s after two minutes of steps 1.2x, want ended", age)
	}
	f.feed(30, relapse, nil)
	c, y := values(f.fams, FamilyCause, "cause"), values(f.fams, FamilySymptom, "symptom")
	if c[CauseBatchGrowth] != 1 || y[SymptomITLUp] != 1 {
		t.Errorf("30 s into the relapse (steps 1.3x the healthy ones, batch 2x): batch_growth %v, itl_up %v, want both named", c[CauseBatchGrowth], y[SymptomITLUp])
	}
}

// TestResumedYoungBatchCalmIsNoNormal: batch_growth named on itl_up in
// an incident that ends young (6 s of a batch 2x with steps 3x, then the
// batch 1.5x with its steps 1.2x: ended within the probation's 20 s), then
// resumed by the same batch back 14 s later, ending young again. For two
// minutes the batch stays 1.5x with its steps 1.2x (no incident), then
// grows 2x again with its steps 1.3x. An incident that resumed the one
// before it is the same shift back, no lone burst: while the batch stays
// beyond the minimum change the calm after it is no normal, as after an
// older incident, and the relapse, read against the healthy steps, names
// itl_up with batch_growth. After a lone young incident (it may have been
// one of the pod's bursts) the calm joins the reference as before, and so
// does a calm whose batch falls back within the minimum change (1.1x): the
// relapse reads under the minimum change. On the bursty simulator a rate
// 2.5x opened batch incidents 5-11 s long, each resuming the one before;
// the calms between, the batch 1.5-2.5x and the exact ITL mean 1.2x the
// pre-shift one, joined the reference (seed 7: 11.8 % wrong or missing).
// Fails on main 9a1f917: the resumed incident's calm joined the reference
// and the relapse went unnamed.
func TestResumedYoungBatchCalmIsNoNormal(t *testing.T) {
	opts := Options{Window: 10 * time.Second, Baseline: 3 * time.Minute, MinChange: 0.25, Interval: time.Second}
	larger, burst, relapse := healthy, healthy, healthy
	larger.running, larger.itl = 12, 0.06
	burst.running, burst.itl = 9, 0.06
	relapse.running, relapse.itl = 16, 0.065
	for _, c := range []struct {
		name    string
		resumed bool
		calm    second
		want    float64
	}{
		{"resumed, the batch 1.5x", true, larger, 1},
		{"alone, the batch 1.5x", false, larger, 0},
		{"resumed, the batch back within the minimum change", true, burst, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFeeder(t, opts)
			f.feed(240, healthy, nil)
			f.feed(6, batchGrowth, nil)
			f.feed(14, larger, nil)
			if age := values(f.fams, FamilyIncident, "")[""]; age != 0 {
				t.Fatalf("20 s after a batch 2x began: incident age %v s, want ended young", age)
			}
			if c.resumed {
				f.feed(6, batchGrowth, nil)
				if got := f.causes()[CauseBatchGrowth]; got != 1 {
					t.Fatalf("the batch 2x back 14 s after the incident ended: batch_growth %v, want resumed", got)
				}
				f.feed(10, larger, nil)
				if age := values(f.fams, FamilyIncident, "")[""]; age != 0 {
					t.Fatalf("10 s after the resumed batch dipped: incident age %v s, want ended young", age)
				}
			}
			f.feed(120, c.calm, nil)
			if age := values(f.fams, FamilyIncident, "")[""]; age != 0 {
				t.Fatalf("incident age %v s after two minutes of steps 1.2x, want no incident", age)
			}
			f.feed(30, relapse, nil)
			cs, y := f.causes(), values(f.fams, FamilySymptom, "symptom")
			if cs[CauseBatchGrowth] != c.want || y[SymptomITLUp] != c.want {
				t.Errorf("30 s into the relapse (steps 1.3x the healthy ones, batch 2x): batch_growth %v, itl_up %v, want both %v", cs[CauseBatchGrowth], y[SymptomITLUp], c.want)
			}
		})
	}
}

// TestBatchHeldQuietThroughALullOfStarts: a named batch_growth incident
// older than HoldWindows recent windows whose steps dip below the minimum
// change (1.2x) while the batch stays twice as large and generated tokens
// per request started rise 2x (a lull of starts: the batch admitted keeps
// generating) is held with no symptom by the batch's own evidence, as the
// same rise does not clear a named batch_growth while its symptom shows
// (TestBatchGrowthHeldThroughABurstOfStarts). On the bursty simulator the
// hold read the rise as if batch_growth were not named and ended the
// incident in such lulls (seeds 1-12: 8.4/2.7/3.0/6.0/7.9/0.9 and
// 18.5/7.1/13.5/11.5/4.8/18.6 -> 7.6/2.7/1.8/5.6/7.5/0.0 and
// 15.2/7.1/13.0/10.7/4.8/18.6 % wrong or missing, with
// TestBatchHoldEndsWithItsSteps). Fails on main 9bd5392: the incident
// ended 59 s into the lull, once the lull's starts filled the recent window.
func TestBatchHeldQuietThroughALullOfStarts(t *testing.T) {
	lull := healthy
	lull.running, lull.itl, lull.starts = 16, 0.06, 2
	f := shiftNamed(t, batchGrowth, 200, CauseBatchGrowth)
	for k := range 60 {
		f.feed(1, lull, nil)
		if got := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth]; got != 1 {
			t.Fatalf("%d s into the lull of starts (steps 1.2x, batch 2x): batch_growth %v (symptoms %v), want held by the batch's evidence", k, got, values(f.fams, FamilySymptom, "symptom"))
		}
	}
}

// TestBatchHoldEndsWithItsSteps: a named batch_growth incident is held with
// no symptom only while its steps are still at least half way, in log, to
// the minimum change (1.118x at 25 %): a batch still twice as large whose
// steps are back at the healthy ones explains no latency, and the incident
// ends. On the bursty simulator the batch drained for half a minute after
// the load returned, its steps back at 1.08-1.10x, and with the hold
// through a lull of starts (TestBatchHeldQuietThroughALullOfStarts) seed 1
// cleared 31 s after the load returned (target: 30 s); with this rule 12 s.
// Fails on main 9bd5392: the incident was held for as long as the batch
// stayed large.
func TestBatchHoldEndsWithItsSteps(t *testing.T) {
	back := healthy
	back.running = 16
	f := shiftNamed(t, batchGrowth, 200, CauseBatchGrowth)
	f.feed(int(testOpts.Window/time.Second)+10, back, nil)
	if c, age := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth], values(f.fams, FamilyIncident, "")[""]; c != 0 || age != 0 {
		t.Errorf("a recent window and 10 s after the steps came back with the batch still 2x: batch_growth %v, incident age %v s, want ended", c, age)
	}
}

// TestBatchGrowthCarriedThroughItsQueue: a named batch_growth (batch 2x,
// steps 3x) whose batch then queues (10 waiting, TTFT 4x) hands over to
// queueing; once the queue has drained and queueing cleared, the batch is
// still 2x with its steps 3x while the drain's lull of starts doubles the
// generated tokens per request started: batch_growth is named again, the
// rise read as the drain's and not as longer outputs, since this incident
// named the batch before its queue. The same queue and drain in an
// incident that never named the batch leave it unnamed: the rise may
// still be longer outputs not yet finished. On the bursty simulator
// (batch 2.5x whose bursts fill the KV cache) the rise kept batch_growth
// unnamed after each drain: seeds 9 and 10 4.5 and 6.0 -> 2.7 and 2.3 %
// wrong or missing. Fails on main a0d4035: batch_growth unnamed two
// minutes after the queue drained.
func TestBatchGrowthCarriedThroughItsQueue(t *testing.T) {
	queued := batchGrowth
	queued.ttft, queued.waiting = 0.6, 10
	drained := batchGrowth
	drained.starts = 2
	f := shiftNamed(t, batchGrowth, 120, CauseBatchGrowth)
	f.feed(120, queued, nil)
	if c := values(f.fams, FamilyCause, "cause"); c[CauseQueueing] != 1 || c[CauseBatchGrowth] != 0 {
		t.Fatalf("two minutes of 10 requests waiting: queueing %v, batch_growth %v, want queueing alone", c[CauseQueueing], c[CauseBatchGrowth])
	}
	f.feed(120, drained, nil)
	if c := values(f.fams, FamilyCause, "cause"); c[CauseQueueing] != 0 || c[CauseBatchGrowth] != 1 {
		t.Errorf("two minutes after the queue drained (batch 2x, steps 3x, tokens per request started 2x): queueing %v, batch_growth %v, want batch_growth named again", c[CauseQueueing], c[CauseBatchGrowth])
	}

	f = shiftNamed(t, queued, 120, CauseQueueing)
	f.feed(120, drained, nil)
	if got := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth]; got != 0 {
		t.Errorf("two minutes after a queue drained in an incident that never named the batch: batch_growth %v, want not named while tokens per request started are 2x", got)
	}
}
