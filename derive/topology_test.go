package derive

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/scripts/topologypages/scenario"
)

// topologyGauges are the gauges of data-parallel ranks, prefill/decode and
// KV transfer: a single-engine page without a KV connector has none of
// them, and TestTopologyGauges checks each on the constructed pages.
var topologyGauges = map[string]bool{
	DerivedEngineImbalanceRatio: true, DerivedKVCacheUsageSpread: true, DerivedPrefillTokensPerSecond: true,
	DerivedPrefillBacklogSeconds: true, DerivedRequestsWaitingDeferred: true, DerivedKVTransferFailureRatio: true,
	DerivedKVTransferSeconds: true, DerivedKVTransferBytesPerSecond: true,
	DerivedKVOffloadLoadBytesPerSec: true, DerivedKVOffloadStoreBytesPerSec: true,
}

// admissionGauges need a server with admission control (vLLM 0.29 on, or
// a cap given): TestAdmissionGauges checks them on constructed pages.
var admissionGauges = map[string]bool{
	DerivedAdmissionRejectionsPerSecond: true, DerivedAdmissionRejectedRatio: true, DerivedAdmissionAtCap: true,
}

// conditionalGauges need more than their roles on the page.
var conditionalGauges = map[string]string{
	DerivedEngineImbalanceRatio:    "two engines or more",
	DerivedKVCacheUsageSpread:      "two engines or more",
	DerivedRequestsWaitingDeferred: "a waiting request",
}

// histQuantile is histogram_quantile over per-second cumulative bucket
// counts, written out here so that the truth does not come from the code
// under test: the bucket whose count first reaches q × total, linear
// inside it from its lower bound (0 for the first); the +Inf bucket gives
// the highest finite bound.
func histQuantile(q float64, h scenario.Hist) float64 {
	total := h.Cum[len(h.Cum)-1]
	rank := q * total
	for i, c := range h.Cum {
		if c < rank {
			continue
		}
		if math.IsInf(h.Les[i], 1) {
			return h.Les[i-1]
		}
		lo, below := 0.0, 0.0
		if i > 0 {
			lo, below = h.Les[i-1], h.Cum[i-1]
		}
		return lo + (h.Les[i]-lo)*(rank-below)/(c-below)
	}
	return math.NaN()
}

// observeScenario feeds pod's pages at its two committed times (15 s
// apart) and one in between into a 1m history, and returns the derived
// gauges per engine and per model, and the current-scrape gauges.
func observeScenario(t *testing.T, pod scenario.Pod) (perEngine, perModel, nowEngine, nowModel []exposition.Family) {
	t.Helper()
	h := NewHistory([]time.Duration{time.Minute}, time.Second)
	t0, t1 := scenario.Times[0], scenario.Times[1]
	var last []exposition.Family
	for _, s := range []float64{t0, (t0 + t1) / 2, t1} {
		last = normalizedPage(t, scenario.Page(pod, s))
		h.Observe(at(s-t0), last)
	}
	both := h.Groupings(at(t1-t0), byModelEngine, byModel)
	idle := testDeriver.NewIdleTracker(at(0))
	return both[0], both[1], testDeriver.Capacity(last, idle, at(t1-t0), true), testDeriver.Capacity(last, idle, at(t1-t0), false)
}

// Every topology gauge on the constructed pages, against the truth worked
// out from the scenario's parameters.
func TestTopologyGauges(t *testing.T) {
	for _, pod := range scenario.PrefillDecode {
		t.Run(pod.Role, func(t *testing.T) {
			e := pod.Engines[0]
			fams, perModel, nowE, nowM := observeScenario(t, pod)
			l := []string{"engine", "0", "model_name", pod.Model, "window", "1m"}
			wantValue(t, fams, e.LocalCompute, DerivedPrefillTokensPerSecond, l...)
			wantValue(t, fams, e.Waiting()*e.PromptLen.Mean()/e.LocalCompute, DerivedPrefillBacklogSeconds, l...)
			wantValue(t, perModel, e.LocalCompute, DerivedPrefillTokensPerSecond, "model_name", pod.Model, "window", "1m")
			deferred := []string{"engine", "0", "model_name", pod.Model}
			wantValue(t, nowE, e.WaitingDeferred/e.Waiting(), DerivedRequestsWaitingDeferred, deferred...)
			wantValue(t, nowM, e.WaitingDeferred/e.Waiting(), DerivedRequestsWaitingDeferred, "model_name", pod.Model)
			// One engine: no ranks to compare.
			wantAbsent(t, nowM, DerivedEngineImbalanceRatio, "model_name", pod.Model)
			wantAbsent(t, nowM, DerivedKVCacheUsageSpread, "model_name", pod.Model)
			if pod.Offload {
				wantValue(t, fams, e.OffloadLoadBytes, DerivedKVOffloadLoadBytesPerSec, l...)
				wantValue(t, fams, e.OffloadStoreBytes, DerivedKVOffloadStoreBytesPerSec, l...)
			} else {
				wantAbsent(t, fams, DerivedKVOffloadLoadBytesPerSec, l...)
			}
			if e.XferTime.Cum == nil {
				// The prefill side prints NIXL families that never move:
				// no transfer in the window, so no ratio, quantile or
				// bandwidth.
				wantAbsent(t, fams, DerivedKVTransferFailureRatio, l...)
				wantAbsent(t, fams, DerivedKVTransferBytesPerSecond, append(l, "per", "tp_rank")...)
				return
			}
			wantValue(t, fams, e.FailedXfer/(e.FailedXfer+e.XferTime.Count()), DerivedKVTransferFailureRatio, l...)
			wantValue(t, fams, e.XferBytes.Sum/e.XferTime.Sum, DerivedKVTransferBytesPerSecond, append(l, "per", "tp_rank")...)
			for _, q := range []float64{0.5, 0.9, 0.99} {
				qs := strconv.FormatFloat(q, 'g', -1, 64)
				wantValue(t, fams, histQuantile(q, e.XferTime), DerivedKVTransferSeconds, append(l, "q", qs)...)
			}
		})
	}
	t.Run("data-parallel", func(t *testing.T) {
		pod := scenario.DataParallel
		fams, perModel, _, nowM := observeScenario(t, pod)
		m := []string{"model_name", pod.Model}
		var sum, hi, kvHi, kvLo, compute float64
		kvLo = 1
		for _, e := range pod.Engines {
			load := e.Running + e.Waiting()
			sum += load
			hi = max(hi, load)
			kvHi, kvLo = max(kvHi, e.KVUsage), min(kvLo, e.KVUsage)
			compute += e.LocalCompute
		}
		wantValue(t, nowM, hi/(sum/float64(len(pod.Engines))), DerivedEngineImbalanceRatio, m...)
		wantValue(t, nowM, kvHi-kvLo, DerivedKVCacheUsageSpread, m...)
		wantValue(t, perModel, compute, DerivedPrefillTokensPerSecond, "model_name", pod.Model, "window", "1m")
		// The queueing rank's own backlog.
		e := pod.Engines[2]
		wantValue(t, fams, e.Waiting()*e.PromptLen.Mean()/e.LocalCompute, DerivedPrefillBacklogSeconds, "engine", "2", "model_name", pod.Model, "window", "1m")
		// An idle rank: nothing waits, no backlog.
		wantValue(t, fams, 0, DerivedPrefillBacklogSeconds, "engine", "0", "model_name", pod.Model, "window", "1m")

		// Every engine idle: balanced, 1, not 0/0.
		idle := pod
		idle.Engines = append([]scenario.Engine(nil), pod.Engines...)
		for i := range idle.Engines {
			idle.Engines[i].Running, idle.Engines[i].WaitingCapacity = 0, 0
		}
		_, _, _, nowIdle := observeScenario(t, idle)
		wantValue(t, nowIdle, 1, DerivedEngineImbalanceRatio, m...)
	})
}
