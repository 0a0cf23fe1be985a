package routing

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// Families the routing view serves because a router or autoscaler reads
// them, beyond the gauges the current llm-d endpoint picker compares
// (View). They are kept apart, in one table, so that they stay easy to
// see, to test and to move onto roles:
//
//   - legacy names that routers still read: vllm:gpu_cache_usage_perc (GIE
//     up to 1.2, AIBrix least-gpu-cache and its autoscaler samples,
//     production-stack), vllm:gpu_prefix_cache_hit_rate and the
//     vllm:gpu_prefix_cache_*_total counters (production-stack),
//     vllm:time_per_output_token_seconds (AIBrix TPOT) and
//     vllm:cpu_cache_usage_perc (AIBrix least-kv-cache needs it beside
//     vllm:kv_cache_usage_perc);
//   - current histograms and counters that routers reading this view
//     through the proxy or the routing listener read per scrape: the
//     inter-token latency and TTFT histograms (kthena, AIBrix) and the
//     prefix-cache counters (AIBrix).
//
// Everything is one series per model_name: counters and histograms summed
// over engines and API-server processes (per le for buckets), which is
// what a consumer summing them itself (AIBrix) computes, except that the
// sums do not go down when an engine restarts or drops off the page
// (sumHistogramOrCounter).
//
// No metric name is spelled here: the current families are read by role,
// and the legacy names are the catalogue's renames into a role's family
// (Roles.Legacy), which is exactly the name older vLLM printed; the
// derived hit ratio is handed over as a value (Input.HitRatio).

// summed says, for the counter inputs (mapping.Counter) whose families
// the routing view serves summed per model, who reads them: served under
// the canonical name and, when legacy is set, under each of its legacy
// names too. They are served in the counter table's order
// (mapping.CounterRoles); a counter input without an entry is not served.
var summed = map[mapping.Role]struct {
	legacy       bool
	help         string // what it is; the rule is added
	reader       string // who reads it, and who its legacy name
	legacyReader string
}{
	mapping.RoleTTFT:               {false, "Time to first token", "kthena, AIBrix", ""},
	mapping.RoleInterTokenLatency:  {true, "Inter-token latency", "kthena, AIBrix", "AIBrix TPOT"},
	mapping.RolePrefixCacheHits:    {true, "Prefix-cache hits in tokens", "AIBrix", "production-stack"},
	mapping.RolePrefixCacheQueries: {true, "Prefix-cache queries in tokens", "AIBrix", "production-stack"},
	// The rest of what AIBrix's gateway fetches (least-latency, throughput,
	// PD routing), so that its metric-port can point at the routing view.
	mapping.RoleExternalPrefixCacheHits:    {false, "External prefix-cache hits in tokens", "AIBrix", ""},
	mapping.RoleExternalPrefixCacheQueries: {false, "External prefix-cache queries in tokens", "AIBrix", ""},
	mapping.RoleQueueTime:                  {false, "Queue time per request", "AIBrix least-latency, kthena", ""},
	mapping.RolePrefillTime:                {false, "Prefill time per request", "AIBrix least-latency, kthena", ""},
	mapping.RoleDecodeTime:                 {false, "Decode time per request", "AIBrix least-latency, kthena", ""},
	mapping.RoleE2ELatency:                 {false, "End-to-end latency per request", "AIBrix, kthena", ""},
	mapping.RoleTimePerOutputToken:         {false, "Mean time per output token of each request", "AIBrix, kthena", ""},
	mapping.RolePromptTokens:               {false, "Prompt tokens", "AIBrix throughput", ""},
	mapping.RoleGenerationTokens:           {false, "Generated tokens", "AIBrix throughput", ""},
	mapping.RoleRequestPromptTokens:        {false, "Prompt length per request", "AIBrix", ""},
	mapping.RoleRequestGenerationTokens:    {false, "Generated tokens per request", "AIBrix", ""},
}

// summedRoles are summed's roles in the counter table's order.
var summedRoles = slices.DeleteFunc(mapping.CounterRoles(), func(r mapping.Role) bool {
	_, ok := summed[r]
	return !ok
})

// consumerFamilies returns the table's families for the canonical page
// (byName; role finds a role's family), the collapsed KV usage already
// computed (kv), the routing derived gauges, and the vLLM engine the page
// comes from (mapping's v0, v1 or unknown; empty for other servers).
func consumerFamilies(byName map[string]*exposition.Family, roles *mapping.Roles, kv []exposition.Sample, sums, legacy Totals, hitRatio derive.Freshest, upstream string, style func(string) string, named *names) []exposition.Family {
	role := func(r mapping.Role) *exposition.Family { return byName[roles.Family(r)] }
	out := make([]exposition.Family, 0, 2+2*len(summedRoles))
	gauge := func(name, help string, samples []exposition.Sample) {
		if len(samples) == 0 {
			return
		}
		name = style(name)
		for i := range samples {
			samples[i].Labels = named.withName(samples[i].Labels, name)
		}
		out = append(out, exposition.Family{Name: name, Type: model.MetricTypeGauge, Help: help, Samples: samples})
	}

	kvName := roles.Family(mapping.RoleKVCacheUsage)

	cpuName := roles.Family(mapping.RoleCPUCacheUsage)
	switch f := role(mapping.RoleCPUCacheUsage); {
	case f != nil:
		// A V0 server's own CPU swap-space usage, one series per model.
		gauge(cpuName, "CPU (swap) KV-cache usage of this V0 server, 0..1: the highest value over its series per model_name.", maxByModel(f))
	case role(mapping.RoleKVOffloadCPUUsage) != nil && len(role(mapping.RoleKVOffloadCPUUsage).Samples) > 0:
		// A V1 server that offloads KV to CPU: its offload tier's CPU
		// cache usage is the CPU KV-cache usage a router asks for.
		gauge(cpuName, "CPU KV-cache usage of this V1 server's KV offload tier, 0..1: "+roles.Family(mapping.RoleKVOffloadCPUUsage)+", the highest value over engines per model_name; served because some routers (AIBrix least-kv-cache) need it beside "+kvName+".", maxByModel(role(mapping.RoleKVOffloadCPUUsage)))
	case upstream == mapping.EngineV1 && len(kv) > 0 && offloads(role):
		// It offloads KV to CPU but prints no usage of that cache: 0 would
		// be a wrong number, so nothing is served (docs/routing.md).
	case upstream == mapping.EngineV1 && len(kv) > 0:
		zeros := slices.Clone(kv)
		for i := range zeros {
			zeros[i].Value = 0
		}
		gauge(cpuName, "0: this vLLM V1 server shows no CPU KV cache (V0's swap space was removed, and the page has no KV-offload family); served because some routers (AIBrix least-kv-cache) need it beside "+kvName+".", zeros)
	}

	rateName := roles.Family(mapping.RolePrefixCacheHitRateGauge)
	if f := role(mapping.RolePrefixCacheHitRateGauge); f != nil {
		// A V0 server prints the gauge itself (-1 when it has no data):
		// serve what it says.
		gauge(rateName, "Prefix-cache hit rate as this V0 server prints it (-1: no data), one series per model_name.", firstByModel(f))
	} else if samples, window := withNoData(hitRatio, role(mapping.RolePrefixCacheQueries)); len(samples) > 0 {
		gauge(rateName, fmt.Sprintf("Prefix-cache hit rate, 0..1: increase(%s[%s]) / increase(%s[%s]) over all engines of the model (%s of the shortest window); -1 when no query was counted in the window, as V0, whose contract this name carries, printed it.",
			roles.Family(mapping.RolePrefixCacheHits), window, roles.Family(mapping.RolePrefixCacheQueries), window, style(hitRatio.Name)), samples)
	}

	for _, r := range summedRoles {
		s, f := summed[r], role(r)
		tot, ok := sums.Of(r)
		if !ok || f == nil {
			continue
		}
		familyNames := []string{f.Name}
		if s.legacy {
			familyNames = append(familyNames, roles.Legacy(r)...)
		}
		legacyTot, _ := legacy.Of(r)
		legacyName := legacyTot.Family // "" without a legacy twin
		for i, n := range familyNames {
			own := i > 0 && n == legacyName
			help := named.help(helpKey{r, f.Name, f.Type, i > 0, own}, func() string {
				rule := " summed over data-parallel engines and API-server processes"
				if f.Type == model.MetricTypeHistogram {
					rule += " per model_name and le"
				}
				switch {
				case own:
					return "Legacy name of " + f.Name + " as the server printed it (" + strings.TrimPrefix(rule, " ") + "), for routers that still read it (" + s.legacyReader + ")."
				case i > 0:
					return "Legacy name of " + f.Name + " (same values," + rule + "), for routers that still read it (" + s.legacyReader + ")."
				}
				return s.help + "," + rule + ". Read by " + s.reader + "."
			})
			name := style(n)
			from := tot
			if own {
				// A legacy name the server printed beside its current
				// twin (vLLM 0.9.2-0.11) is summed from its own series:
				// the two may differ.
				from = legacyTot
			}
			if samples := from.Samples(name); len(samples) > 0 {
				out = append(out, exposition.Family{Name: name, Type: f.Type, Help: help, Samples: samples, Created: from.Created()})
			}
		}
	}
	return out
}

// maxByModel keeps the highest value of a gauge per model_name, NaN left
// out as PromQL's max leaves it out.
func maxByModel(f *exposition.Family) []exposition.Sample {
	best := map[string]float64{}
	var order []string
	for _, s := range f.Samples {
		if math.IsNaN(s.Value) {
			continue
		}
		m := s.Labels.Get("model_name")
		v, ok := best[m]
		if !ok {
			order = append(order, m)
		}
		if !ok || s.Value > v {
			best[m] = s.Value
		}
	}
	return modelSamples(order, best)
}

// firstByModel keeps the first series of a gauge per model_name.
func firstByModel(f *exposition.Family) []exposition.Sample {
	first := map[string]float64{}
	var order []string
	for _, s := range f.Samples {
		m := s.Labels.Get("model_name")
		if _, ok := first[m]; !ok {
			order = append(order, m)
			first[m] = s.Value
		}
	}
	return modelSamples(order, first)
}

// withNoData adds -1 (V0's "no data") for each model that counts prefix-cache
// queries (queries, the canonical family) but has no ratio in the window:
// no query was counted there yet.
func withNoData(ratio derive.Freshest, queries *exposition.Family) ([]exposition.Sample, string) {
	samples, window := ratio.Samples, ratio.Window
	if window == "" {
		window = "window" // no ratio yet in any window
	}
	if queries == nil {
		return samples, window
	}
	have := map[string]bool{}
	for _, s := range samples {
		have[s.Labels.Get(mapping.LabelModel)] = true
	}
	missing := map[string]float64{}
	var order []string
	for _, s := range queries.Samples {
		if m := s.Labels.Get(mapping.LabelModel); !have[m] {
			if _, ok := missing[m]; !ok {
				order = append(order, m)
			}
			missing[m] = -1
		}
	}
	if len(order) == 0 {
		return samples, window
	}
	out := append(slices.Clone(samples), modelSamples(order, missing)...)
	slices.SortFunc(out, func(a, b exposition.Sample) int { return labels.Compare(a.Labels, b.Labels) })
	return out, window
}

// offloads reports whether the page counts KV offload traffic (bytes
// stored to or loaded from the CPU tier): a V1 server with a CPU KV cache.
func offloads(role func(mapping.Role) *exposition.Family) bool {
	for _, r := range []mapping.Role{mapping.RoleKVOffloadStoreBytes, mapping.RoleKVOffloadLoadBytes} {
		if f := role(r); f != nil && len(f.Samples) > 0 {
			return true
		}
	}
	return false
}
