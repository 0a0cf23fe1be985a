package derive

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// Label values the topology gauges read or write. vLLM's
// prompt_tokens_by_source names the computed tokens local_compute and its
// waiting_by_reason the requests waiting on remote KV deferred.
const (
	sourceLabel        = "source"
	sourceLocalCompute = "local_compute"
	reasonLabel        = "reason"
	reasonDeferred     = "deferred"
	// PerLabel says what a value is per: vLLM pools the NIXL observations
	// of every TP rank of an engine, each one rank's share of a transfer.
	PerLabel  = "per"
	perTPRank = "tp_rank"
)

// prefillTokensRate is the rate of prompt tokens computed locally: the
// server's own split by source, else (V1 before it printed one) prompt
// tokens less those the local and external prefix caches supplied.
func prefillTokensRate(c *windowCalc) (float64, bool) {
	if c.inWindow(mapping.CounterPromptTokensBySource) {
		for _, r := range c.split() {
			if r.counter == mapping.CounterPromptTokensBySource && r.value == sourceLocalCompute {
				return r.rate, true
			}
		}
		return 0, false
	}
	prompt, ok := c.rate(mapping.CounterPromptTokens)
	hits, hok := c.rate(mapping.CounterPrefixCacheHits)
	if !ok || !hok {
		return 0, false // V0 counts no hits in tokens: no fallback
	}
	ext, _ := c.rate(mapping.CounterExternalPrefixCacheHits)
	if v := prompt - hits - ext; v >= 0 {
		return v, true
	}
	return 0, false
}

func prefillTokensPerSecond(c *windowCalc) {
	if v, ok := prefillTokensRate(c); ok {
		c.emit(v)
	}
}

// prefillBacklog is the seconds of prefill the waiting requests hold at
// the window's prefill throughput: their mean number times the window's
// mean prompt length (no server prints waiting prompt tokens) over the
// computed prompt tokens per second.
func prefillBacklog(c *windowCalc) {
	rate, ok := prefillTokensRate(c)
	g := c.gauge(gaugeWaiting)
	if !ok || !g.meanHas || rate <= 0 {
		return
	}
	if g.meanSum == 0 {
		c.emit(0) // nothing waits: no backlog, whatever the prompts were
		return
	}
	if mean, ok := c.ratio(mapping.CounterRequestPromptTokensSum, mapping.CounterRequestPromptTokensCount); ok {
		c.emit(g.meanSum * mean / rate)
	}
}

// kvTransferFailureRatio is failed transfers over all transfers: the
// failures plus the completed ones (each observed in kv_transfer_time).
var kvTransferFailureRatio = shareOf(mapping.CounterKVTransferFailures, mapping.CounterKVTransferTimeCount)

// kvTransferBandwidth is bytes moved over seconds spent moving them, per
// TP rank as vLLM pools the ranks' observations.
func kvTransferBandwidth(c *windowCalc) {
	if v, ok := c.ratio(mapping.CounterKVTransferBytesSum, mapping.CounterKVTransferTimeSum); ok {
		c.emitWith([]labels.Label{{Name: PerLabel, Value: perTPRank}}, perTPRank, v)
	}
}

// perEngineOf is one value per (model_name, engine) of a gauge family:
// the highest over processes, or NaN when a process printed NaN.
func perEngineOf(f *exposition.Family, add bool) map[groupKey]float64 {
	out := map[groupKey]float64{}
	if f == nil {
		return out
	}
	for _, s := range f.Samples {
		k := groupKey{s.Labels.Get(mapping.LabelModel), s.Labels.Get(mapping.LabelEngine)}
		v, seen := out[k]
		switch {
		case !seen || math.IsNaN(s.Value):
			out[k] = s.Value
		case math.IsNaN(v):
		case add:
			out[k] = v + s.Value
		default:
			out[k] = max(v, s.Value)
		}
	}
	return out
}

// engineValuesByModel groups per-engine values by model, engines in order; a model
// with a NaN engine is left out (its extremes are unknown), as is one with
// fewer than two engines (no ranks to compare).
func engineValuesByModel(perEngine map[groupKey]float64) map[string][]float64 {
	keys := make([]groupKey, 0, len(perEngine))
	for k := range perEngine {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.model, b.model), mapping.CompareEngines(a.engine, b.engine))
	})
	out := map[string][]float64{}
	bad := map[string]bool{}
	for _, k := range keys {
		v := perEngine[k]
		if math.IsNaN(v) {
			bad[k.model] = true
		}
		out[k.model] = append(out[k.model], v)
	}
	for m, vs := range out {
		if bad[m] || len(vs) < 2 {
			delete(out, m)
		}
	}
	return out
}

// engineImbalance is, per model, the busiest engine's running + waiting
// over the engines' mean: 1 when balanced, the number of engines when one
// holds everything; 1 when every engine is idle (nothing is uneven).
func engineImbalance(c *currentCalc) map[groupKey]float64 {
	load := inFlight(c.family(mapping.RoleRequestsRunning), c.family(mapping.RoleRequestsWaiting), true)
	per := map[groupKey]float64{}
	maps.Copy(per, load)
	// An engine that lacks one of the gauges is absent from load: count
	// it as unknown, not as idle.
	for k := range perEngineOf(c.family(mapping.RoleRequestsRunning), true) {
		if _, ok := load[k]; !ok {
			per[k] = math.NaN()
		}
	}
	out := map[groupKey]float64{}
	for m, vs := range engineValuesByModel(per) {
		sum, hi := 0.0, math.Inf(-1)
		for _, v := range vs {
			sum += v
			hi = max(hi, v)
		}
		if sum == 0 {
			out[groupKey{model: m}] = 1
			continue
		}
		out[groupKey{model: m}] = hi / (sum / float64(len(vs)))
	}
	return out
}

// kvUsageSpread is, per model, the highest engine's KV usage minus the
// lowest's (each the highest over its processes).
func kvUsageSpread(c *currentCalc) map[groupKey]float64 {
	out := map[groupKey]float64{}
	for m, vs := range engineValuesByModel(perEngineOf(c.family(mapping.RoleKVCacheUsage), false)) {
		out[groupKey{model: m}] = slices.Max(vs) - slices.Min(vs)
	}
	return out
}

// deferredShare is the share of waiting requests that wait on remote KV
// (and vLLM's other transient constraints), per engine or per model.
func deferredShare(c *currentCalc) map[groupKey]float64 {
	f := c.family(mapping.RoleRequestsWaitingByReason)
	if f == nil {
		return nil
	}
	type part struct{ deferred, total float64 }
	per := map[groupKey]*part{}
	for _, s := range f.Samples {
		k := groupKey{model: s.Labels.Get(mapping.LabelModel)}
		if c.byEngine {
			k.engine = s.Labels.Get(mapping.LabelEngine)
		}
		p := per[k]
		if p == nil {
			p = &part{}
			per[k] = p
		}
		p.total += s.Value // NaN stays NaN: the share is left out
		if s.Labels.Get(reasonLabel) == reasonDeferred {
			p.deferred += s.Value
		}
	}
	out := map[groupKey]float64{}
	for k, p := range per {
		if p.total > 0 {
			out[k] = p.deferred / p.total
		}
	}
	return out
}
