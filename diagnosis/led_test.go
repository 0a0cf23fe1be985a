package diagnosis

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTrafficShiftFreezesItsReference: the prefix cache stops hitting
// (0.5 -> 0) on a pod with room to spare, so TTFT does not move for two
// and a half minutes; then it rises (0.15 -> 0.3 s). By then the rolling
// baseline holds two minutes of misses: a sub-window of it reads a hit
// ratio of 0, the recent window's 0 lies beyond none of them, and the
// misses that explain the rise are never named: the symptom is left
// unexplained (the bursty simulator, seed 5: ttft_up named 61 s after
// the cache stopped hitting, then unexplained). The hit ratio's own fall,
// strong (TTFT would take 2x as long) and significant at the strict
// level, opens the incident without a symptom and freezes the reference
// before the shift enters it: the rise is then named with its cause.
// Fails on the code before.
func TestTrafficShiftFreezesItsReference(t *testing.T) {
	f := newFeeder(t, testOpts)
	misses := healthy
	misses.hitRatio = 0
	slow := misses
	slow.ttft = 0.3
	f.feed(640, healthy, nil)
	f.feed(150, misses, nil)
	if got := values(f.fams, FamilySymptom, "symptom")[SymptomTTFTUp]; got != 0 {
		t.Fatalf("ttft_up %v while TTFT has not moved, want 0", got)
	}
	f.feed(90, slow, nil)
	c := values(f.fams, FamilyCause, "cause")
	if values(f.fams, FamilySymptom, "symptom")[SymptomTTFTUp] != 1 || c[CausePrefixCacheMisses] != 1 || c[CauseUnexplained] != 0 {
		t.Errorf("ttft_up %v, causes %v after TTFT rose with the cache missing for 4 minutes, want ttft_up and prefix_cache_misses", values(f.fams, FamilySymptom, "symptom")[SymptomTTFTUp], c)
	}
}

// TestTrafficCauseLeadsItsSymptom: a latency symptom shown only at the
// undivided level counts as shown where a traffic cause of its side moved
// at the strict level by a factor of (1 + m)² at least: the prefix cache's
// hit ratio 0.45 -> 0 (prefill 1.8x the work) leads TTFT at p <= α, not
// ITL (decode is not its side); 0.45 -> 0.30 (1.27x) leads nothing, and
// with no symptom at the undivided level none is shown, though the fall
// still opens an incident (traffic). The rule is new (the bursty
// simulator, seeds 3 to 5: prefix_cache_misses never named, its TTFT at
// p = 0.002-0.01 on the pod's bursts while the hit ratio fell at p <
// 0.0001).
func TestTrafficCauseLeadsItsSymptom(t *testing.T) {
	const m = 0.25
	for _, c := range []struct {
		name              string
		hit               float64
		ttft, itl         bool // shown at the undivided level
		wantTTFT, wantITL bool
		wantTraffic       bool
	}{
		{"hit ratio to 0, TTFT at the undivided level", 0, true, true, true, false, true},
		{"hit ratio to 0.30, TTFT at the undivided level", 0.30, true, false, false, false, false},
		{"hit ratio to 0, no symptom", 0, false, false, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			recent, base := nanStats(), nanStats()
			recent.v[sHitRatio], base.v[sHitRatio] = c.hit, 0.45
			var strict evaluation
			strict.enough = true
			for i := range strict.change {
				strict.change[i] = ChangeFlat
			}
			strict.change[sHitRatio] = ChangeDown
			lenient := strict
			lenient.symptoms[yTTFT], lenient.symptoms[yITL] = c.ttft, c.itl
			strict.ledBy(&lenient, &recent, &base, m)
			if strict.symptoms[yTTFT] != c.wantTTFT || strict.symptoms[yITL] != c.wantITL || strict.traffic != c.wantTraffic {
				t.Errorf("ttft_up %v, itl_up %v, traffic %v; want %v, %v, %v", strict.symptoms[yTTFT], strict.symptoms[yITL], strict.traffic, c.wantTTFT, c.wantITL, c.wantTraffic)
			}
		})
	}
}

// TestOverloadResumedByItsQueue: an overload at least HoldWindows recent
// windows old held queueing until its queue drained, and ended then.
// While the calm after it is on probation, the queue comes back, strongly
// (queueing at the strict level, its queue time alone (1 + m)² times the
// baseline's TTFT p90), before the TTFT test, widened by the pod's bursts,
// shows it even at the undivided level: the overload resumed, and is named
// again with queueing held. Once the probation is over the same
// evaluations name nothing. Fails on the code before: the resumption
// waited for its TTFT at the undivided level (the bursty simulator, seed
// 4: queueing 10.9 -> 10.0 % wrong or missing, relapse 3.8 -> 1.5 %).
func TestOverloadResumedByItsQueue(t *testing.T) {
	var queue, quiet evaluation
	queue.enough, quiet.enough = true, true
	for i := range numSignals {
		queue.change[i], quiet.change[i] = ChangeFlat, ChangeFlat
	}
	queue.queueShare = 0.25 / 4
	queue.change[sWaiting], queue.inflowQueueUp, queue.queueTimeUp, queue.inflowQueueShare = ChangeUp, true, true, 1
	strong := quiet // the strict evaluation: the queue, no latency symptom
	strong.queued = true
	var ref stats
	const w, b = 10, 50
	in := incidentState{uncausedSince: -1}
	in.open, in.named, in.start, in.base = true, true, 0, &ref
	in.sym[yTTFT], in.cause[kQueueing] = hysteresis{on: true}, hysteresis{on: true}
	k := int64(40)
	for ; k < 40+HoldEvaluations; k++ {
		in.step(k, w, b, &quiet, &quiet, &queue, nil, &ref, &ref, 0, 0, 1<<60)
	}
	for ; in.open; k++ {
		in.step(k, w, b, &quiet, &quiet, &quiet, nil, &ref, &ref, 0, 0, 1<<60)
	}
	ended := in
	for _, probation := range []bool{true, false} {
		in := ended
		from := ended.endedAt + 1
		if !probation {
			from += HoldWindows * w
		}
		for k := range int64(HoldEvaluations) {
			in.step(from+k, w, b, &strong, &strong, &queue, nil, &ref, &ref, 0, 0, 1<<60)
		}
		named := in.open && in.named
		if named != probation || in.cause[kQueueing].on != probation {
			t.Errorf("on probation %v: after %d evaluations of the queue back strongly, TTFT not shown, named %v with queueing %v, want %v",
				probation, HoldEvaluations, named, in.cause[kQueueing].on, probation)
		}
	}
}

// TestPageSaysAnUnnamedFreeze: a traffic change that opened an incident
// whose latency has not moved freezes the baseline with no incident
// reported; the page says the baseline is frozen while the change is
// checked, not "at the incident's start" of an incident it does not show.
func TestPageSaysAnUnnamedFreeze(t *testing.T) {
	f := newFeeder(t, testOpts)
	misses := healthy
	misses.hitRatio = 0
	f.feed(640, healthy, nil)
	f.feed(90, misses, nil)
	mr := f.d.Report().Models[0]
	if !mr.Baseline.Frozen || mr.Incident != nil {
		t.Fatalf("baseline frozen %v, incident %v after 90 s of misses at an unchanged TTFT, want frozen with no incident", mr.Baseline.Frozen, mr.Incident)
	}
	rec := httptest.NewRecorder()
	f.d.PageHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/diagnosis", nil))
	if body := rec.Body.String(); !strings.Contains(body, "frozen while a change is checked") || strings.Contains(body, "frozen at the incident") {
		t.Errorf("the page does not say the baseline is frozen while a change is checked:\n%s", body)
	}
}

// TestQueueLeadsItsSymptom: TTFT shown only at the undivided level counts
// as shown where queueing moved at the strict level with its queue time
// alone (1 + m)² times the baseline's TTFT p90, as a traffic cause leads
// its symptom: the waiting requests' own evidence has done the search
// among the signals (the bursty simulator, seed 4: requests waited at p <
// 0.0001 while the TTFT test, widened by the pod's bursts, read p =
// 0.04-0.13 at a true 2.2-2.4x). A queue time 1.3 times it leads nothing,
// nor does the queue with no TTFT rise at the undivided level. Fails on
// the code before: the queue led its symptom only on the probation after
// an overload.
func TestQueueLeadsItsSymptom(t *testing.T) {
	const m = 0.25
	for _, c := range []struct {
		name      string
		queueTime float64 // s, against the baseline's TTFT p90 of 1 s
		ttft      bool    // shown at the undivided level
		want      bool
	}{
		{"queue time 2 s, TTFT at the undivided level", 2, true, true},
		{"queue time 0.3 s, TTFT at the undivided level", 0.3, true, false},
		{"queue time 2 s, no symptom", 2, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			recent, base := nanStats(), nanStats()
			base.v[sTTFT] = 1
			var strict evaluation
			strict.enough = true
			for i := range strict.change {
				strict.change[i] = ChangeFlat
			}
			strict.change[sWaiting] = ChangeUp
			strict.inflowQueueUp, strict.queueTimeUp, strict.inflowQueueShare, strict.queueShare = true, true, 1, m
			strict.queueTime, strict.inflowQueue = c.queueTime, 5
			lenient := strict
			lenient.symptoms[yTTFT] = c.ttft
			strict.ledBy(&lenient, &recent, &base, m)
			if strict.symptoms[yTTFT] != c.want || strict.symptoms[yITL] {
				t.Errorf("ttft_up %v, itl_up %v; want %v, false", strict.symptoms[yTTFT], strict.symptoms[yITL], c.want)
			}
		})
	}
}

// TestQueueHoldNeedsStrongWaiting: a named overload whose latency is back
// (no symptom at the undivided level) is held by its queue only while the
// waiting requests' rise is significant at the level a symptom is named
// at (α / 10), not merely at the undivided α. On the bursty pod at 90 %
// of capacity (seed 2) the requests waited 4.4 times the reference at p =
// 0.009 against a reference whose queue the pod had long left, the truth
// read TTFT 1.15-1.2 times the calm before, and queueing was held 20 s.
// Fails on the code before: the hold asked the undivided α alone.
func TestQueueHoldNeedsStrongWaiting(t *testing.T) {
	const alpha = 0.001
	for _, c := range []struct {
		name string
		p    float64
		held bool
	}{
		{"waiting up at p = 0.0005", 0.0005, true},
		{"waiting up at p = 0.009", 0.009, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var queue, quiet evaluation
			queue.enough, quiet.enough = true, true
			for i := range numSignals {
				queue.change[i], quiet.change[i] = ChangeFlat, ChangeFlat
			}
			quiet.alpha = alpha
			queue.queueShare = 0.25 / 4
			queue.change[sWaiting], queue.inflowQueueUp, queue.queueTimeUp, queue.inflowQueueShare = ChangeUp, true, true, 1
			queue.p[sWaiting] = c.p
			var ref stats
			const w, b = 10, 50
			in := incidentState{uncausedSince: -1}
			in.open, in.named, in.start, in.base = true, true, 0, &ref
			in.sym[yTTFT], in.cause[kQueueing] = hysteresis{on: true}, hysteresis{on: true}
			in.step(HoldWindows*w+10, w, b, &quiet, &quiet, &queue, nil, &ref, &ref, 0, 0, 1<<60)
			if held := in.open && in.cause[kQueueing].on; held != c.held {
				t.Errorf("TTFT back, %s: held by its queue %v (open %v), want %v", c.name, held, in.open, c.held)
			}
		})
	}
}
