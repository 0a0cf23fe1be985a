package diagnosis

import (
	"math"
	"testing"
)

// kvCut feeds a KV cache cut: a clump of preemptions (2 a second for
// 10 s, 8 % of a window's 240 requests), then none while the cache stays
// at kv (NaN: a server without the gauge), the batch 6 against 8,
// 30 requests waiting and the TTFT 4x; then the cache freed (0.4, the
// baseline's) with the queue still there. It returns the second the
// preemptions were first named, the first second after it they were not
// while the cache stayed full, and the seconds they stayed named after
// it was freed (-1: never).
func kvCut(t *testing.T, kv float64) (named, dropped, cleared int) {
	t.Helper()
	return kvCutAt(t, kv, 6)
}

// kvCutAt is kvCut with the batch at running during the cut.
func kvCutAt(t *testing.T, kv, running float64) (named, dropped, cleared int) {
	t.Helper()
	base := healthy
	base.kv = kv
	if !math.IsNaN(kv) {
		base.kv = 0.4
	}
	cut := base
	cut.ttft, cut.running, cut.waiting, cut.kv = 0.6, running, 30, kv
	f := fed(t, testOpts, phase{640, base})
	named, dropped, cleared = -1, -1, -1
	for k := range 400 {
		s := cut
		if k < 10 {
			s.preemptions = 2
		}
		f.feed(1, s, nil)
		got := values(f.fams, FamilyCause, "cause")[CausePreemptions]
		if named < 0 && got == 1 {
			named = k
		}
		if named >= 0 && dropped < 0 && got != 1 {
			dropped = k
		}
	}
	freed := cut
	freed.kv = base.kv
	for k := range 200 {
		f.feed(1, freed, nil)
		if cleared < 0 && values(f.fams, FamilyCause, "cause")[CausePreemptions] != 1 {
			cleared = k
		}
	}
	return named, dropped, cleared
}

// TestPreemptionsHeldWhileTheCacheStaysFull: once preemptions are named on
// their own evidence, a KV cache that stays full (0.95 against 0.4) while
// requests wait behind a batch smaller than the baseline's is the same
// memory limit between two preemptions: they stay named while that holds
// and clear within a window once the cache is freed (issue 30: on the
// bursty simulator's KV cut, seed 7, windows with 0-1 preemptions at 0.94
// of the cache named queueing alone, 17.3 % of the judged polls wrong or
// missing). Fails on the code before: cleared as the clump left the
// windows a named cause is held by, 69 s into the cut (the cache still full).
func TestPreemptionsHeldWhileTheCacheStaysFull(t *testing.T) {
	named, dropped, cleared := kvCut(t, 0.95)
	checkHeldWhileFull(t, "0.75", named, dropped, cleared)
}

// checkHeldWhileFull asserts what a cut at 0.95 of the cache with the
// batch at the given ratio must show: preemptions named within a few
// evaluations, held while the cache stays full, cleared within the
// recent window once it is freed.
func checkHeldWhileFull(t *testing.T, batch string, named, dropped, cleared int) {
	t.Helper()
	if named < 0 || named > 10 {
		t.Fatalf("preemptions named %d s into the clump (-1: never), want within a few evaluations", named)
	}
	if dropped >= 0 {
		t.Errorf("preemptions dropped %d s into the cut (named at %d s) with the KV cache still at 0.95 against 0.4, 30 requests waiting and the batch %s times: want held while the cache stays full", dropped, named, batch)
	}
	if limit := 60 + 5; cleared < 0 || cleared > limit {
		t.Errorf("preemptions cleared %d s after the cache was freed (-1: never), want within the recent window (%d s)", cleared, limit)
	}
}

// TestPreemptionsHeldBesideABatchWithinTheMinimumChange: the same cut
// with the batch at 8.3 against 8 (1.04 times, within the minimum change,
// as flat as any signal there) is the same memory limit: preemptions stay
// named while the cache stays full. Fails on the code before: a batch a
// hair above the baseline's (ratio > 1) was read as a larger one, the
// preemptions dropped once the clump left the windows they are held by,
// and the queue went to the inflow (the bursty simulator's KV cut, seed
// 17: the batch 1.00-1.03 times at 0.95 of the cache, queueing listed
// first in 29 judged polls and 8.3 % wrong or missing).
func TestPreemptionsHeldBesideABatchWithinTheMinimumChange(t *testing.T) {
	named, dropped, cleared := kvCutAt(t, 0.95, 8.3)
	checkHeldWhileFull(t, "1.04", named, dropped, cleared)
}

// TestPreemptionsWithoutAKVGaugeClearAsBefore: a server without a KV
// gauge holds preemptions only on their own count (the windows a named
// cause is held by): the same cut clears them once the clump has left
// those windows (69 s into the cut, as on the code before). A full cache
// is never read where no gauge says so.
func TestPreemptionsWithoutAKVGaugeClearAsBefore(t *testing.T) {
	named, dropped, _ := kvCut(t, math.NaN())
	if named < 0 || named > 10 {
		t.Fatalf("preemptions named %d s into the clump (-1: never), want within a few evaluations", named)
	}
	if limit := HoldWindows*60 + 10; dropped < 0 || dropped > limit {
		t.Errorf("without a KV gauge preemptions dropped %d s into the cut (-1: never), want once the clump left the %d windows a cause is held by (%d s)", dropped, HoldWindows, limit)
	}
}

// burstyKVCut feeds a baseline whose arrivals come in bursts (2 minutes at
// 3 requests a second, 2 at 5, no queue in either), then a KV cache cut
// (2 preemptions a second for 10 s, the cache at 0.95 against 0.4, 30
// requests waiting behind the baseline's batch, TTFT 4x) while arrive
// requests a second arrive. It returns the evaluations naming both
// preemptions and queueing and the first second of the cut where queueing
// was listed first (-1: never).
func burstyKVCut(t *testing.T, arrive float64) (both, first int) {
	t.Helper()
	low, high := healthy, healthy
	low.requests, high.requests = 3, 5
	f := newFeeder(t, testOpts)
	for range 3 {
		f.feed(120, low, nil)
		f.feed(120, high, nil)
	}
	f.feed(40, low, nil)
	cut := healthy
	cut.requests, cut.ttft, cut.waiting, cut.kv = arrive, 0.6, 30, 0.95
	first = -1
	for k := range 400 {
		s := cut
		if k < 10 {
			s.preemptions = 2
		}
		f.feed(1, s, nil)
		got := values(f.fams, FamilyCause, "cause")
		if got[CausePreemptions] != 1 || got[CauseQueueing] != 1 {
			continue
		}
		both++
		m := &f.d.Report().Models[0]
		if q, p := m.share[causeIndex(CauseQueueing)], m.share[causeIndex(CausePreemptions)]; q >= p && first < 0 {
			first = k
			t.Logf("arrivals %g a second, %d s into the cut: queueing explains %.3g, preemptions %.3g", arrive, k, q, p)
		}
	}
	return both, first
}

// TestFullCacheQueueNotCreditedToTheBaselinesBursts: in burstyKVCut, 4.6
// requests a second arrive during the cut: above the baseline's mean,
// within the bursts it served without a queue. Once preemptions are named
// and held by the full cache, the queue is memory's, and preemptions are
// listed before queueing in every evaluation that names both; at 7 a
// second, beyond the baseline's bursts, the inflow built the queue and
// queueing comes first. Fails on the code before: the arrivals above the
// baseline's mean rate (0.6 a second, 36 a window against 29 more
// waiting) were credited with the whole queue, and queueing was listed
// first 189 s into the cut, once the clump had left the windows the cause
// is held by (the bursty simulator's KV cut, seed 17: a burst at 42 a
// second against a mean of 35 whose sub-windows reached 57, 7 polls).
func TestFullCacheQueueNotCreditedToTheBaselinesBursts(t *testing.T) {
	both, first := burstyKVCut(t, 4.6)
	if both == 0 {
		t.Fatal("preemptions and queueing never named together in the cut: the test does not test the order")
	}
	if first >= 0 {
		t.Errorf("queueing listed before preemptions %d s into the cut (of %d evaluations naming both), with the KV cache at 0.95 and 4.6 requests a second arriving, within the baseline's bursts of 5: want preemptions first while the cache holds the queue", first, both)
	}
	both, first = burstyKVCut(t, 7)
	if both == 0 || first < 0 {
		t.Errorf("at 7 requests a second, beyond the baseline's bursts of 5, queueing was never listed first (%d evaluations naming both): want the inflow credited with the queue it built", both)
	}
}

// TestPreemptedRequestsWaitingAgainAreNoInflow: a KV cache cut at an
// unchanged inflow of 4 requests a second admits 3 of them a second into a
// batch of 6 (the baseline's 8) and preempts 2 a second, which go back to
// wait: the queue grows 2 a second (1 new request that is not admitted, 2
// preempted, 1 of them re-admitted). The arrivals are the starts plus the
// queue's growth less the preempted requests waiting again, 3 + 2 - 2: no
// more than the baseline's, so the queue is memory's and queueing is not
// named beside preemptions. Fails on the code before: the preempted
// requests counted as arrivals, 5 a second against 4, the inflow was
// credited with half the queue and queueing was named (the demo's
// preemptions scenario, 28 s after its cut, once the queue's growth was
// read at all).
func TestPreemptedRequestsWaitingAgainAreNoInflow(t *testing.T) {
	f := newFeeder(t, testOpts)
	f.feed(11*60, healthy, nil)
	preempted, queued := 0, 0
	for k := range 300 {
		s := healthy
		s.requests, s.running, s.ttft, s.kv, s.preemptions, s.waiting = 3, 6, 0.6, 0.95, 2, float64(1+2*k)
		f.feed(1, s, nil)
		got := values(f.fams, FamilyCause, "cause")
		if got[CausePreemptions] == 1 {
			preempted++
			if got[CauseQueueing] == 1 {
				queued++
			}
		}
	}
	if preempted == 0 || queued > 0 {
		t.Errorf("a KV cut at an unchanged inflow named preemptions in %d of 300 evaluations, queueing beside them in %d: want preemptions, and no queueing (the preempted requests waiting again are no arrivals)", preempted, queued)
	}
}

// TestLongPromptsFillingTheCacheHoldNoPreemptions: prompts 2.5x fill the
// KV cache (0.95 against 0.55) with the batch 6 against 8, each running
// request holding the share of the cache its longer prompt accounts for,
// 30 waiting and the TTFT 4x; a clump of preemptions (2 a second for
// 10 s) names preemptions beside long_prompts. Once the clump has left
// the windows a named cause is held by, nothing shows the memory limit
// they were named for: the cache is full of the longer prompts, not
// smaller. Preemptions clear then, long_prompts stays named throughout.
// Fails on the code before: the full cache held preemptions all 400 s
// (the self-exciting simulator's long_prompts shift, seed 11 at 65 %:
// held 8 minutes after one window of 3 preemptions, 82.9 % of the judged
// polls wrong).
func TestLongPromptsFillingTheCacheHoldNoPreemptions(t *testing.T) {
	base := healthy
	base.kv = 0.55
	long := base
	long.prompt, long.ttft, long.running, long.waiting, long.kv = 1000, 0.6, 6, 30, 0.95
	f := fed(t, testOpts, phase{640, base})
	named, dropped, prompts := -1, -1, -1
	for k := range 400 {
		s := long
		if k < 10 {
			s.preemptions = 2
		}
		f.feed(1, s, nil)
		got := values(f.fams, FamilyCause, "cause")
		if named < 0 && got[CausePreemptions] == 1 {
			named = k
		}
		if named >= 0 && dropped < 0 && got[CausePreemptions] != 1 {
			dropped = k
		}
		if prompts < 0 && got[CauseLongPrompts] == 1 {
			prompts = k
		}
		if prompts >= 0 && got[CauseLongPrompts] != 1 {
			t.Fatalf("%d s into the shift (long_prompts named at %d s): long_prompts dropped (causes %v), want it named while the prompts stay 2.5x", k, prompts, got)
		}
	}
	if named < 0 || named > 10 {
		t.Fatalf("preemptions named %d s into the clump (-1: never), want within a few evaluations", named)
	}
	if prompts < 0 {
		t.Fatal("long_prompts never named at prompts 2.5x")
	}
	if limit := HoldWindows*60 + 15; dropped < 0 || dropped > limit {
		t.Errorf("preemptions dropped %d s into the shift (-1: never; named at %d s) with the cache full of prompts 2.5x and no preemption since 10 s: want cleared once the clump left the %d windows a cause is held by (%d s)", dropped, named, HoldWindows, limit)
	}
}

// TestPreemptionsNotHeldByACacheALargerBatchFills: preemptions named on a
// KV cache cut (2 a second, the cache 0.95 against 0.4, 30 waiting, the
// TTFT 4x); then none falls while the batch runs 12 against 8 (1.5x, past
// the minimum change), the cache as full and the queue as long. A cache
// that a larger batch fills is no memory limit held between two
// preemptions (cacheFull asks the batch no larger than the baseline's):
// preemptions clear once the recent window shows none, within the window
// and a few evaluations. Fails without that condition: held all 240 s, the
// full cache standing for the limit the preemptions no longer show.
func TestPreemptionsNotHeldByACacheALargerBatchFills(t *testing.T) {
	f := fed(t, testOpts, phase{700, healthy})
	cut := healthy
	cut.ttft, cut.waiting, cut.kv, cut.preemptions = 0.6, 30, 0.95, 2
	f.feed(90, cut, nil)
	if got := f.causes()[CausePreemptions]; got != 1 {
		t.Fatalf("preemptions %v after 90 s of the cut (causes %v), want named: the test does not test a hold", got, active(f.causes()))
	}
	larger := cut
	larger.preemptions, larger.running = 0, 12
	cleared := -1
	for k := range 240 {
		f.feed(1, larger, nil)
		if cleared < 0 && f.causes()[CausePreemptions] == 0 {
			cleared = k
		}
	}
	if limit := 60 + 10; cleared < 0 || cleared > limit {
		t.Errorf("preemptions cleared %d s after the last one (-1: never in 240 s), the batch 1.5x filling the cache, want within %d s", cleared, limit)
	}
}
