package derive

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/scripts/topologypages/scenario"
)

// observePod feeds pod's pages at the scenario's two times and one in
// between into a 1m history read by d, and returns the windowed gauges per
// (model, engine) and per model.
func observePod(t *testing.T, d *Deriver, pod scenario.Pod) (perEngine, perModel []exposition.Family) {
	t.Helper()
	h := testHistory{NewHistory([]time.Duration{time.Minute}, time.Second).History, d}
	t0, t1 := scenario.Times[0], scenario.Times[1]
	for _, s := range []float64{t0, (t0 + t1) / 2, t1} {
		h.Observe(at(s-t0), normalizedPage(t, scenario.Page(pod, s)))
	}
	both := h.Groupings(at(t1-t0), byModelEngine, byModel)
	return both[0], both[1]
}

// The admission gauges on the constructed pages of a server at each cap,
// against the truth from the scenario's parameters: vLLM counts refusals
// per model without engine, so every page has them per model only.
func TestAdmissionGauges(t *testing.T) {
	for _, pod := range scenario.Admission {
		t.Run(pod.File, func(t *testing.T) {
			e := pod.Engines[0]
			refused := 0.0
			for _, r := range pod.Rejections {
				refused += r
			}
			perEngine, perModel := observePod(t, testDeriver, pod)
			for _, fams := range [][]exposition.Family{perEngine, perModel} {
				l := []string{"model_name", pod.Model, "window", "1m"}
				for reason, rate := range pod.Rejections {
					wantValue(t, fams, rate, DerivedAdmissionRejectionsPerSecond, append(l, "reason", reason)...)
				}
				if n := seriesCount(fams, DerivedAdmissionRejectionsPerSecond); n != len(pod.Rejections) {
					t.Errorf("%d series of %s, want one per reason (%d)", n, DerivedAdmissionRejectionsPerSecond, len(pod.Rejections))
				}
				wantValue(t, fams, refused/(refused+e.TTFT.Count()), DerivedAdmissionRejectedRatio, l...)
				wantValue(t, fams, 1, DerivedAdmissionAtCap, l...)
				for _, name := range []string{DerivedAdmissionRejectedRatio, DerivedAdmissionAtCap} {
					if n := seriesCount(fams, name); n != 1 {
						t.Errorf("%d series of %s, want 1 (per model)", n, name)
					}
				}
			}
		})
	}
	// The figures the scenario documents: two thirds and a quarter.
	if got := 10.0 / (10 + scenario.Admission[0].Engines[0].TTFT.Count()); !sameFloat(got, 2.0/3) {
		t.Errorf("pod 35 refuses %v of its attempts, want 2/3", got)
	}
}

// At the cap without a refusal in the window: the cap from
// --upstream.max-num-queued-reqs says so from waiting + running; without
// a cap the counter alone, which did not move, says 0.
func TestAdmissionAtCapFromCap(t *testing.T) {
	pod := scenario.Admission[0] // 64 running, 0 waiting
	pod.Rejections = map[string]float64{"max_num_queued_reqs": 0}
	l := []string{"model_name", pod.Model, "window", "1m"}
	for _, tc := range []struct {
		cap  int
		want float64
	}{{0, 0}, {64, 1}, {63, 1}, {65, 0}} {
		_, fams := observePod(t, testDeriver.WithQueuedReqsCap(tc.cap), pod)
		if got, ok := lookupValue(fams, DerivedAdmissionAtCap, l...); !ok || got != tc.want {
			t.Errorf("cap %d: at_cap = %v (present %v), want %v", tc.cap, got, ok, tc.want)
		}
		wantValue(t, fams, 0, DerivedAdmissionRejectedRatio, l...)
	}
	// A server without the counter (before v0.29): unknown without a cap,
	// and from waiting + running with one.
	pod.Rejections = nil
	_, fams := observePod(t, testDeriver, pod)
	wantAbsent(t, fams, DerivedAdmissionAtCap, l...)
	wantAbsent(t, fams, DerivedAdmissionRejectedRatio, l...)
	_, fams = observePod(t, testDeriver.WithQueuedReqsCap(64), pod)
	wantValue(t, fams, 1, DerivedAdmissionAtCap, l...)
}

// The share of finished requests per finished_reason: pod 35 finishes 4
// per second with stop and abandons 1 (abort).
func TestFinishedRatio(t *testing.T) {
	pod := scenario.Admission[0]
	e := pod.Engines[0]
	perEngine, perModel := observePod(t, testDeriver, pod)
	for _, c := range []struct {
		fams []exposition.Family
		l    []string
	}{
		{perEngine, []string{"engine", "0", "model_name", pod.Model, "window", "1m"}},
		{perModel, []string{"model_name", pod.Model, "window", "1m"}},
	} {
		wantValue(t, c.fams, e.Requests/(e.Requests+e.Aborts), DerivedFinishedRatio, append(c.l, "finished_reason", "stop")...)
		wantValue(t, c.fams, e.Aborts/(e.Requests+e.Aborts), DerivedFinishedRatio, append(c.l, "finished_reason", "abort")...)
	}
}

// A real V1 page from before vLLM split prompt tokens by source (fixture
// 13 without its prompt_tokens_by_source_total, which vLLM added on
// 2026-02-04): the prefill rate and backlog fall back to prompt tokens
// less local and external prefix-cache hits. Between the scrapes prompt
// tokens grow by 30, hits by 10 and external hits by 5 over 10 s: (30 -
// 10 - 5) / 10 = 1.5 computed tokens/s; waiting goes 0 -> 10 (mean 5) and
// the mean prompt is 1 token: a backlog of 5 × 1 / 1.5 s.
func TestPrefillFallbackWithoutBySource(t *testing.T) {
	raw, err := os.ReadFile(fixture13)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(raw), "\n") {
		if !strings.Contains(line, "vllm:prompt_tokens_by_source_total") {
			b.WriteString(line)
		}
	}
	fams := parsePage(t, b.String())
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	h.Observe(at(0), fams)
	grow := map[string]float64{
		"vllm:prompt_tokens_total": 30, "vllm:prefix_cache_hits_total": 10, "vllm:external_prefix_cache_hits_total": 5,
		"vllm:num_requests_waiting": 10, "vllm:request_prompt_tokens_sum": 10, "vllm:request_prompt_tokens_count": 10,
	}
	for fi := range fams {
		for si := range fams[fi].Samples {
			fams[fi].Samples[si].Value += grow[fams[fi].Samples[si].Name()]
		}
	}
	h.Observe(at(10), fams)
	out := h.Derive(at(10), byModelEngine)
	l := []string{"engine", "0", "model_name", "TinyLlama", "window", "1m"}
	wantValue(t, out, 1.5, DerivedPrefillTokensPerSecond, l...)
	wantValue(t, out, 5*1/1.5, DerivedPrefillBacklogSeconds, l...)

	// More hits than prompt tokens (recomputation after preemption counts
	// lookups again): no negative rate, nothing served.
	fams = parsePage(t, b.String())
	h = NewHistory([]time.Duration{time.Minute}, time.Second)
	h.Observe(at(0), fams)
	for fi := range fams {
		for si := range fams[fi].Samples {
			if fams[fi].Samples[si].Name() == "vllm:prefix_cache_hits_total" {
				fams[fi].Samples[si].Value += 50
			}
		}
	}
	h.Observe(at(10), fams)
	wantAbsent(t, h.Derive(at(10), byModelEngine), DerivedPrefillTokensPerSecond, l...)
}
