package derive

import (
	"time"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// Spec is everything about one derived gauge, in one place: its name,
// HELP, input roles and the computation itself (Deriver iterates the
// table; adding a gauge is adding an entry), and the texts that tests write
// docs/derived.md's table and deploy/prometheus's recording rules from. In Help and PromQL, {role} stands for the
// canonical family that plays the role (mapping.Roles.Family), so no
// metric name is written here.
type Spec struct {
	// Name is the family name, a public contract.
	Name string
	// Help is the HELP text template.
	Help string
	// Unit of the value.
	Unit string
	// Inputs are the roles it reads: a windowed computation finds the
	// counter inputs (mapping.Counter) and window gauges of these roles
	// in the window, and nothing else.
	Inputs []mapping.Role
	// PromQL is what Prometheus computes for it over the window [w],
	// for one grouping (docs/derived.md's table shows it).
	PromQL string
	// Decision is the routing or scaling decision it serves.
	Decision string
	// Labels are the labels it has beside the grouping and window labels.
	Labels []string
	// Record is the recording-rule operation in deploy/prometheus
	// (vllm:derived_<gauge>:<Record><window>, or without window for Now).
	Record string
	// Rule is the recording rule's expression where it is not PromQL with
	// each range function summed by the grouping: {role} for a family, [w]
	// for the window, {by} for the grouping labels, {q} for a quantile,
	// {histogram} and {le} for an SLO's histogram and target, and
	// {rule <gauge>} for an earlier gauge's rule in the same window.
	// deploy/prometheus/recording.yml is generated from it (derive's
	// TestGeneratedRecordingRules).
	Rule string
	// AnyInput marks a gauge with one series per input it finds (SLO
	// attainment per latency): it exists where any of its inputs does.
	AnyInput bool
	// Now marks a value of the current scrape: no window label, and a
	// recording rule without window.
	Now bool
	// RuleAggregatesGauge marks a gauge PromQL cannot compute from the
	// role families (PromQL says why): its recording rule aggregates the
	// sidecar's own gauge across pods instead.
	RuleAggregatesGauge bool
	// PerModel marks a gauge of the whole server, computed over the
	// model's engines together on every page: its inputs come before an
	// engine sees the request (vLLM's API server refuses at admission and
	// labels no engine).
	PerModel bool

	// window computes the gauge for one group over one window; current
	// from the current scrape (Now). Exactly one is set.
	window  func(*windowCalc)
	current func(*currentCalc) map[groupKey]float64
}

// Shared tails of the HELP texts.
const (
	helpCounter = " Counters are read at the points scraped in the window (no extrapolation); a counter that goes down counts from zero." +
		" Absent with fewer than 2 points in the window or a zero denominator."
	helpRatio    = " Increases are summed over all but the grouping labels before dividing."
	helpRate     = " Each series' increase is divided by the seconds between its first and last point in the window; the rates are summed over all but the grouping labels."
	helpQuantile = " Estimated like PromQL histogram_quantile from the increases of the buckets in the window, summed by le;" +
		" counters are read at the points scraped in the window (no extrapolation); absent without observations in the window."
)

// Names of the derived gauge families. They are a public contract; see
// docs/derived.md.
const (
	DerivedPreemptionsPerSecond        = "vllm_derived_preemptions_per_second"
	DerivedPrefixCacheHitRatio         = "vllm_derived_prefix_cache_hit_ratio"
	DerivedExternalPrefixCacheHitRatio = "vllm_derived_external_prefix_cache_hit_ratio"
	DerivedQueueTimeMeanSeconds        = "vllm_derived_queue_time_mean_seconds"
	DerivedPrefillTimeMeanSeconds      = "vllm_derived_prefill_time_mean_seconds"
	DerivedDecodeTimeMeanSeconds       = "vllm_derived_decode_time_mean_seconds"
	DerivedTTFTQueueRatio              = "vllm_derived_ttft_queue_ratio"
	DerivedTTFTSeconds                 = "vllm_derived_ttft_seconds"
	DerivedInterTokenLatencySeconds    = "vllm_derived_inter_token_latency_seconds"
	DerivedE2ELatencySeconds           = "vllm_derived_e2e_latency_seconds"
	DerivedPromptTokensPerSecond       = "vllm_derived_prompt_tokens_per_second"
	DerivedGenerationTokensPerSecond   = "vllm_derived_generation_tokens_per_second"
	DerivedRequestsPerSecond           = "vllm_derived_requests_per_second"
	DerivedPromptTokensMean            = "vllm_derived_prompt_tokens_mean"
	DerivedGenerationTokensMean        = "vllm_derived_generation_tokens_mean"

	// Signals for autoscalers; see docs/autoscaling.md.
	DerivedRequestsInFlight                    = "vllm_derived_requests_in_flight"
	DerivedKVCacheFreeTokens                   = "vllm_derived_kv_cache_free_tokens"
	DerivedSLOAttainmentRatio                  = "vllm_derived_slo_attainment_ratio"
	DerivedIdleSeconds                         = "vllm_derived_idle_seconds"
	DerivedGenerationTokensPerSecondPerRequest = "vllm_derived_generation_tokens_per_second_per_request"

	// Data-parallel ranks, prefill/decode and KV transfer; see
	// docs/derived.md and docs/autoscaling.md.
	DerivedEngineImbalanceRatio      = "vllm_derived_engine_imbalance_ratio"
	DerivedKVCacheUsageSpread        = "vllm_derived_kv_cache_usage_spread"
	DerivedPrefillTokensPerSecond    = "vllm_derived_prefill_tokens_per_second"
	DerivedPrefillBacklogSeconds     = "vllm_derived_prefill_backlog_seconds"
	DerivedRequestsWaitingDeferred   = "vllm_derived_requests_waiting_deferred_ratio"
	DerivedKVTransferFailureRatio    = "vllm_derived_kv_transfer_failure_ratio"
	DerivedKVTransferSeconds         = "vllm_derived_kv_transfer_seconds"
	DerivedKVTransferBytesPerSecond  = "vllm_derived_kv_transfer_bytes_per_second"
	DerivedKVOffloadLoadBytesPerSec  = "vllm_derived_kv_offload_load_bytes_per_second"
	DerivedKVOffloadStoreBytesPerSec = "vllm_derived_kv_offload_store_bytes_per_second"

	// Admission control and how requests end; see docs/derived.md.
	DerivedAdmissionRejectionsPerSecond = "vllm_derived_admission_rejections_per_second"
	DerivedAdmissionRejectedRatio       = "vllm_derived_admission_rejected_ratio"
	DerivedAdmissionAtCap               = "vllm_derived_admission_at_cap"
	DerivedFinishedRatio                = "vllm_derived_finished_ratio"

	// WindowLabel names the window a derived value covers ("1m").
	WindowLabel = "window"
	// QuantileLabel names the quantile of the latency gauges ("0.9"), and
	// SLOTargetLabel an attainment ratio's target in seconds ("0.5"). Not
	// quantile and le: on a gauge those say summary and histogram bucket
	// to consumers and linters (promtool check metrics), which it is not.
	QuantileLabel  = "q"
	SLOTargetLabel = "target"
	// LegacyQuantileLabel and LegacySLOTargetLabel are the names before;
	// WithLegacyLabels (--derive.legacy-labels) serves them instead, for a
	// deprecation period.
	LegacyQuantileLabel  = "quantile"
	LegacySLOTargetLabel = "le"
	// SLOLabel names the latency an attainment ratio is about: ttft, tpot
	// or e2e; its target is in SLOTargetLabel.
	SLOLabel = "slo"

	finishedReasonLabel = mapping.LabelFinishedReason
)

// DefaultWindows are the windows the derived gauges cover unless
// --derive.window says otherwise, and those deploy/prometheus's recording
// rules are generated for.
func DefaultWindows() []time.Duration { return []time.Duration{time.Minute, 5 * time.Minute} }

// prefillRateRule is the prefill rate's recording rule: the computed prompt
// tokens where the server splits them by source, else prompt tokens less
// local and external prefix-cache hits (external ones 0 where absent).
const prefillRateRule = "sum by ({by}) (rate({prompt_tokens_by_source}{source=\"local_compute\"}[w]))\n" +
	"or\n(\n  sum by ({by}) (rate({prompt_tokens}[w]))\n  - sum by ({by}) (rate({prefix_cache_hits}[w]))\n" +
	"  - (sum by ({by}) (rate({external_prefix_cache_hits}[w])) or 0 * sum by ({by}) (rate({prefix_cache_hits}[w])))\n) >= 0"

// specs is the table, in docs/derived.md's order.
var specs = []Spec{
	{
		Name: DerivedPreemptionsPerSecond, Unit: "1/s", Record: "rate",
		Inputs:   []mapping.Role{mapping.RolePreemptions},
		Help:     "Preemptions per second: rate of {preemptions}." + helpRate + helpCounter,
		PromQL:   "rate({preemptions}[w])",
		Decision: "memory pressure: avoid instances that preempt",
		window:   rateOf(mapping.CounterPreemptions),
	},
	{
		Name: DerivedPrefixCacheHitRatio, Unit: "ratio", Record: "ratio",
		Inputs: []mapping.Role{mapping.RolePrefixCacheHits, mapping.RolePrefixCacheQueries, mapping.RolePrefixCacheHitRateGauge},
		Help: "Prefix cache hit ratio in tokens: increase({prefix_cache_hits}) / increase({prefix_cache_queries})." +
			" Where those counters are absent (V0), the mean of the {prefix_cache_hit_rate_gauge} gauge over the window's points, ignoring negative values." + helpRatio + helpCounter,
		PromQL:   "increase({prefix_cache_hits}[w]) / increase({prefix_cache_queries}[w])",
		Decision: "cache affinity actually paying off",
		window:   prefixHitRatio,
	},
	{
		Name: DerivedExternalPrefixCacheHitRatio, Unit: "ratio", Record: "ratio",
		Inputs:   []mapping.Role{mapping.RoleExternalPrefixCacheHits, mapping.RoleExternalPrefixCacheQueries},
		Help:     "External (KV connector) prefix cache hit ratio in tokens: increase({external_prefix_cache_hits}) / increase({external_prefix_cache_queries})." + helpRatio + helpCounter,
		PromQL:   "increase({external_prefix_cache_hits}[w]) / increase({external_prefix_cache_queries}[w])",
		Decision: "KV-connector (P/D) cache effectiveness",
		window:   ratioOf(mapping.CounterExternalPrefixCacheHits, mapping.CounterExternalPrefixCacheQueries),
	},
	meanSpec(DerivedQueueTimeMeanSeconds, "Mean queue time per request", mapping.CounterQueueTimeSum, mapping.CounterQueueTimeCount, "s", "saturation"),
	meanSpec(DerivedPrefillTimeMeanSeconds, "Mean prefill time per request", mapping.CounterPrefillTimeSum, mapping.CounterPrefillTimeCount, "s", "prompt-heavy traffic"),
	meanSpec(DerivedDecodeTimeMeanSeconds, "Mean decode time per request", mapping.CounterDecodeTimeSum, mapping.CounterDecodeTimeCount, "s", "decode-bound load"),
	{
		Name: DerivedTTFTQueueRatio, Unit: "ratio", Record: "ratio",
		Inputs: []mapping.Role{mapping.RoleQueueTime, mapping.RolePrefillTime},
		Help: "Queueing share of time to first token: " + DerivedQueueTimeMeanSeconds + " / (" + DerivedQueueTimeMeanSeconds + " + " + DerivedPrefillTimeMeanSeconds + ")," +
			" same labels; absent if either is absent or their sum is 0.",
		PromQL:   "queue mean / (queue mean + prefill mean)",
		Rule:     "{rule " + DerivedQueueTimeMeanSeconds + "}\n/\n(\n  ({rule " + DerivedQueueTimeMeanSeconds + "} + {rule " + DerivedPrefillTimeMeanSeconds + "}) > 0\n)",
		Decision: "saturated (high) vs long prompts (low)",
		window:   ttftQueueRatio,
	},
	quantileSpec(DerivedTTFTSeconds, "Time to first token", mapping.CounterTTFTBuckets, "latency SLOs"),
	quantileSpec(DerivedInterTokenLatencySeconds, "Inter-token latency", mapping.CounterInterTokenLatencyBuckets, "decode speed"),
	quantileSpec(DerivedE2ELatencySeconds, "End-to-end request latency", mapping.CounterE2ELatencyBuckets, "end-to-end SLOs"),
	{
		Name: DerivedPromptTokensPerSecond, Unit: "tokens/s", Record: "rate",
		Inputs:   []mapping.Role{mapping.RolePromptTokens},
		Help:     "Prompt tokens per second: rate of {prompt_tokens}." + helpRate + helpCounter,
		PromQL:   "rate({prompt_tokens}[w])",
		Decision: "prefill throughput",
		window:   rateOf(mapping.CounterPromptTokens),
	},
	{
		Name: DerivedGenerationTokensPerSecond, Unit: "tokens/s", Record: "rate",
		Inputs:   []mapping.Role{mapping.RoleGenerationTokens},
		Help:     "Generated tokens per second: rate of {generation_tokens}." + helpRate + helpCounter,
		PromQL:   "rate({generation_tokens}[w])",
		Decision: "decode throughput",
		window:   rateOf(mapping.CounterGenerationTokens),
	},
	{
		Name: DerivedRequestsPerSecond, Unit: "1/s", Record: "rate", Labels: []string{finishedReasonLabel},
		Inputs:   []mapping.Role{mapping.RoleRequestsFinished},
		Help:     "Finished requests per second by finished_reason: rate of {requests_finished}." + helpRate + helpCounter,
		PromQL:   "rate({requests_finished}[w])",
		Decision: "load and abort/length share",
		window:   ratesBy(mapping.CounterRequestsFinished),
	},
	{
		Name: DerivedFinishedRatio, Unit: "ratio", Record: "ratio", Labels: []string{finishedReasonLabel},
		Inputs: []mapping.Role{mapping.RoleRequestsFinished},
		Help: "Share of the requests finished in the window that ended with each finished_reason (abort: the client went away; error; length; stop ...):" +
			" increase({requests_finished}) of the reason over that of all reasons." + helpRatio + helpCounter,
		PromQL: "sum by (finished_reason) (increase({requests_finished}[w])) / ignoring (finished_reason) group_left sum(increase({requests_finished}[w]))",
		// {by} holds finished_reason: the denominator sums it away first.
		Rule:     "sum by ({by}) (increase({requests_finished}[w]))\n/ ignoring (finished_reason) group_left ()\n(sum by ({by}) (sum without (finished_reason) (increase({requests_finished}[w]))) > 0)",
		Decision: "clients giving up (abort) or failing requests (error)",
		window:   finishedRatio,
	},
	meanSpec(DerivedPromptTokensMean, "Mean prompt length in tokens", mapping.CounterRequestPromptTokensSum, mapping.CounterRequestPromptTokensCount, "tokens", "did the traffic change?"),
	meanSpec(DerivedGenerationTokensMean, "Mean generated tokens per request", mapping.CounterRequestGenerationTokensSum, mapping.CounterRequestGenerationTokensCount, "tokens", "did the traffic change?"),
	{
		Name: DerivedRequestsInFlight, Unit: "requests", Record: "sum", Now: true,
		Inputs: []mapping.Role{mapping.RoleRequestsRunning, mapping.RoleRequestsWaiting},
		Help: "Requests in flight now: {requests_running} + {requests_waiting}, summed over API-server processes (and engines where they are collapsed)." +
			" Absent where either gauge is missing.",
		PromQL:   "{requests_running} + {requests_waiting} (now)",
		Rule:     "sum by ({by}) ({requests_running})\n+\nsum by ({by}) ({requests_waiting})",
		Decision: "scale on load: rises as batches fill, before requests queue",
		current:  requestsInFlight,
	},
	{
		Name: DerivedKVCacheFreeTokens, Unit: "tokens", Record: "sum", Now: true, RuleAggregatesGauge: true,
		Inputs: []mapping.Role{mapping.RoleKVCacheUsage, mapping.RoleKVCacheCapacity},
		Help: "KV-cache tokens free now, whole tokens: the free tokens the server prints where it does (TensorRT-LLM: free blocks times tokens per block; SGLang: available plus evictable tokens)," +
			" else (1 - {kv_cache_usage}) times the KV cache's size in tokens as the server prints it (vLLM: kv_cache_size_tokens of cache_config_info, else num_gpu_blocks * block_size;" +
			" SGLang: max_total_num_tokens, else pages * page size; ATOM: num_gpu_blocks * block_size), usage being the highest value over API-server processes; summed over engines where they are collapsed." +
			" Absent where the usage or the size is missing, or usage is outside 0..1.",
		PromQL:   "(1 - {kv_cache_usage}) × KV size in tokens (now; PromQL cannot read label values as numbers)",
		Rule:     "sum by (namespace, model_name) (" + DerivedKVCacheFreeTokens + ")", // per model across pods: the deployment's headroom
		Decision: "headroom for long prompts; place or admit by free memory",
		current:  kvCacheFreeTokens,
	},
	{
		Name: DerivedSLOAttainmentRatio, Unit: "ratio", Record: "ratio", Labels: []string{SLOLabel, SLOTargetLabel}, AnyInput: true,
		Inputs: []mapping.Role{mapping.RoleTTFT, mapping.RoleTimePerOutputToken, mapping.RoleE2ELatency},
		Help: "Share of the requests finished in the window whose latency was at most target seconds:" +
			" slo=\"ttft\" time to first token ({ttft}), \"tpot\" mean time per output token of the request ({time_per_output_token}), \"e2e\" end-to-end latency ({e2e_latency})." +
			" From the increases of the buckets in the window, summed by le: exact when the target is a bucket bound, linearly interpolated inside the bucket otherwise (the lowest bucket from 0);" +
			" above the highest finite bound only when no observation lies beyond it. One series per target (--slo.ttft, --slo.tpot, --slo.e2e); none without targets." +
			" Counters are read at the points scraped in the window (no extrapolation); absent without observations in the window.",
		PromQL:   "increase(H_bucket{le=\"t\"}[w]) / increase(H_bucket{le=\"+Inf\"}[w]), H = {ttft}, {time_per_output_token}, {e2e_latency}; interpolated between bounds",
		Rule:     "sum by ({by}) (increase({histogram}_bucket{le=~\"{le}\"}[w]))\n/\n(sum by ({by}) (increase({histogram}_bucket{le=\"+Inf\"}[w])) > 0)", // exact at a bucket bound: one rule per target of deploy/autoscaling/slo
		Decision: "latency SLOs: scale or shed when the share falls",
		window:   sloAttainment,
	},
	{
		Name: DerivedIdleSeconds, Unit: "s", Record: "min", Now: true, RuleAggregatesGauge: true,
		Inputs: []mapping.Role{mapping.RoleRequestsRunning, mapping.RoleRequestsWaiting},
		Help: "Seconds since the server was last seen working: {requests_running} or {requests_waiting} above 0, or, where the server has them, {requests_finished}, {prompt_tokens} or {generation_tokens} increased" +
			" (a counter that restarts counts its value after the restart); since the sidecar started if never." +
			" Absent without both in-flight gauges. Resolution: one scrape interval.",
		PromQL:   "time since {requests_running} + {requests_waiting} > 0 or {requests_finished}, {prompt_tokens}, {generation_tokens} last increased (now; state PromQL does not keep)",
		Rule:     "min by (namespace, model_name) (" + DerivedIdleSeconds + ")", // per model: idle since its most recently busy pod was
		Decision: "scale to zero after a quiet period",
		current:  idleSeconds,
	},
	{
		Name: DerivedGenerationTokensPerSecondPerRequest, Unit: "tokens/s", Record: "ratio",
		Inputs: []mapping.Role{mapping.RoleGenerationTokens, mapping.RoleRequestsRunning},
		Help: "Generated tokens per second per running request: rate of {generation_tokens} divided by the mean of {requests_running} over the window's points," +
			" both summed over all but the grouping labels: the decode speed one request sees, which falls as batches grow." + helpCounter,
		PromQL:   "rate({generation_tokens}[w]) / avg_over_time({requests_running}[w])",
		Rule:     "sum by ({by}) (rate({generation_tokens}[w]))\n/\n(sum by ({by}) (avg_over_time({requests_running}[w])) > 0)",
		Decision: "latency-first routing picks high; throughput-first fills batches",
		window:   tokensPerSecondPerRequest,
	},
	{
		Name: DerivedEngineImbalanceRatio, Unit: "ratio", Record: "ratio", Now: true,
		Inputs: []mapping.Role{mapping.RoleRequestsRunning, mapping.RoleRequestsWaiting},
		Help: "Load imbalance over the model's data-parallel engines now: the highest engine's {requests_running} + {requests_waiting} divided by the engines' mean." +
			" 1 is balanced, the number of engines means one engine holds all the load (one rank queueing while the others idle); 1 when every engine is idle." +
			" Per model_name on both pages; absent with one engine, or where an engine lacks either gauge or prints NaN.",
		PromQL:   "max(E) / avg(E) over engines, E = {requests_running} + {requests_waiting} per engine (now); 1 when all E are 0",
		Rule:     engineImbalanceRule,
		Decision: "data-parallel balance: route to the rank, or fix the pinning",
		current:  engineImbalance,
	},
	{
		Name: DerivedKVCacheUsageSpread, Unit: "ratio", Record: "spread", Now: true,
		Inputs: []mapping.Role{mapping.RoleKVCacheUsage},
		Help: "Spread of KV-cache usage over the model's data-parallel engines now: the highest engine's {kv_cache_usage} minus the lowest's, each the highest over API-server processes, 0 to 1." +
			" Per model_name on both pages; absent with one engine or where an engine prints NaN.",
		PromQL:   "max({kv_cache_usage}) - min({kv_cache_usage}) over engines (now)",
		Rule:     kvUsageSpreadRule,
		Decision: "a rank near full while others have room",
		current:  kvUsageSpread,
	},
	{
		Name: DerivedPrefillTokensPerSecond, Unit: "tokens/s", Record: "rate",
		Inputs: []mapping.Role{mapping.RolePromptTokensBySource, mapping.RolePromptTokens, mapping.RolePrefixCacheHits, mapping.RoleExternalPrefixCacheHits},
		Help: "Prompt tokens computed per second (prefill work, cached and transferred tokens left out): rate of {prompt_tokens_by_source} with source=\"local_compute\"." +
			" Where the server does not split prompt tokens by source (V1 before it did), the fallback: rate of {prompt_tokens} minus the rates of {prefix_cache_hits} and {external_prefix_cache_hits} (0 where absent);" +
			" absent without the prefix-cache hits (V0) or when the difference is negative." + helpRate + helpCounter,
		PromQL:   "rate({prompt_tokens_by_source}{source=\"local_compute\"}[w]); without it rate({prompt_tokens}[w]) - rate({prefix_cache_hits}[w]) - rate({external_prefix_cache_hits}[w])",
		Rule:     prefillRateRule,
		Decision: "prefill throughput; the denominator of the prefill backlog",
		window:   prefillTokensPerSecond,
	},
	{
		Name: DerivedPrefillBacklogSeconds, Unit: "s", Record: "ratio",
		Inputs: []mapping.Role{mapping.RolePromptTokensBySource, mapping.RolePromptTokens, mapping.RolePrefixCacheHits, mapping.RoleExternalPrefixCacheHits, mapping.RoleRequestsWaiting, mapping.RoleRequestPromptTokens},
		Help: "Seconds of prefill queued, an estimate: no server prints its waiting prompt tokens, so the mean of {requests_waiting} over the window's points times the window's mean prompt length" +
			" (increase({request_prompt_tokens}_sum) / increase({request_prompt_tokens}_count)), divided by " + DerivedPrefillTokensPerSecond + "." +
			" Cached prompt tokens count as work, so on a cache-friendly load it overstates. 0 when nothing waits;" +
			" absent without computed-token counts, without a finished request in the window while requests wait, or when no prompt token was computed." + helpCounter,
		PromQL: "avg_over_time({requests_waiting}[w]) × increase({request_prompt_tokens}_sum[w]) / increase({request_prompt_tokens}_count[w]) / " + DerivedPrefillTokensPerSecond,
		Rule: "sum by ({by}) (avg_over_time({requests_waiting}[w]))\n" +
			"* (sum by ({by}) (increase({request_prompt_tokens}_sum[w])) / sum by ({by}) (increase({request_prompt_tokens}_count[w])))\n" +
			"/ ((" + prefillRateRule + ") > 0)",
		Decision: "scale the prefill pool on seconds of queue, not requests",
		window:   prefillBacklog,
	},
	{
		Name: DerivedRequestsWaitingDeferred, Unit: "ratio", Record: "ratio", Now: true,
		Inputs: []mapping.Role{mapping.RoleRequestsWaitingByReason},
		Help: "Share of the waiting requests that are deferred now (waiting on remote KV, in a P/D decode pool, or on other transient constraints): {requests_waiting_by_reason} with reason=\"deferred\" over all reasons," +
			" summed over API-server processes (and engines where they are collapsed). Absent when nothing waits or the server does not split waiting by reason.",
		PromQL:   "{requests_waiting_by_reason}{reason=\"deferred\"} / sum over reasons (now)",
		Rule:     "sum by ({by}) ({requests_waiting_by_reason}{reason=\"deferred\"})\n/\n(sum by ({by}) ({requests_waiting_by_reason}) > 0)",
		Decision: "decode pool waiting on KV transfer, not on capacity",
		current:  deferredShare,
	},
	{
		Name: DerivedKVTransferFailureRatio, Unit: "ratio", Record: "ratio",
		Inputs: []mapping.Role{mapping.RoleKVTransferFailures, mapping.RoleKVTransferTime},
		Help: "Share of KV-cache transfers between instances that failed: increase({kv_transfer_failures}) / (increase({kv_transfer_failures}) + increase({kv_transfer_time}_count))," +
			" the completed transfers being the transfer-time observations." + helpRatio + helpCounter,
		PromQL:   "increase({kv_transfer_failures}[w]) / (increase({kv_transfer_failures}[w]) + increase({kv_transfer_time}_count[w]))",
		Decision: "P/D transfers failing: route around the pair",
		window:   kvTransferFailureRatio,
	},
	{
		Name: DerivedAdmissionRejectionsPerSecond, Unit: "1/s", Record: "rate", Labels: []string{reasonLabel}, PerModel: true,
		Inputs: []mapping.Role{mapping.RoleAdmissionRejections},
		Help: "Requests refused at admission per second (HTTP 503 before they reach an engine) by reason, the cap that refused them: rate of {admission_rejections}." +
			" Per model_name on every page: the server refuses before an engine sees the request." + helpRate + helpCounter,
		PromQL:   "rate({admission_rejections}[w])",
		Decision: "a pod refusing work: send it elsewhere, scale out",
		window:   ratesBy(mapping.CounterAdmissionRejections),
	},
	{
		Name: DerivedAdmissionRejectedRatio, Unit: "ratio", Record: "ratio", PerModel: true,
		Inputs: []mapping.Role{mapping.RoleAdmissionRejections, mapping.RoleTTFT},
		Help: "Share of the admission attempts refused: increase({admission_rejections}) / (increase({admission_rejections}) + increase({ttft}_count))," +
			" the requests started being those that reached their first token. Per model_name on every page." + helpRatio + helpCounter,
		PromQL:   "increase({admission_rejections}[w]) / (increase({admission_rejections}[w]) + increase({ttft}_count[w]))",
		Decision: "how much of the offered load the pod turns away",
		window:   admissionRejectedRatio,
	},
	{
		Name: DerivedAdmissionAtCap, Unit: "boolean", Record: "max", PerModel: true, RuleAggregatesGauge: true,
		Inputs: []mapping.Role{mapping.RoleAdmissionRejections, mapping.RoleRequestsRunning, mapping.RoleRequestsWaiting},
		Help: "1 while the server refuses requests at admission: {admission_rejections} increased in the window, or {requests_running} + {requests_waiting} at the window's last point" +
			" reached the cap on them that --upstream.max-num-queued-reqs gives (vLLM's --max-num-queued-reqs); else 0." +
			" Waiting + running then stay at the cap however much more arrives, so the queue looks short. Per model_name on every page;" +
			" absent where the server prints no rejection counter and no cap is given.",
		PromQL:   "increase({admission_rejections}[w]) > bool 0, or last_over_time({requests_running}[w]) + last_over_time({requests_waiting}[w]) >= bool cap (PromQL does not know the cap flag)",
		Rule:     "max by ({by}) (" + DerivedAdmissionAtCap + "{window=\"{w}\"})", // the cap is the sidecar's flag: its own gauge, per pod
		Decision: "a pod at its cap looks idle to a least-queue router: skip it",
		window:   admissionAtCap,
	},
	quantileSpec(DerivedKVTransferSeconds, "Duration of one KV-cache transfer between instances (vLLM pools every TP rank's observations)", mapping.CounterKVTransferTimeBuckets, "decode slow to pull KV"),
	{
		Name: DerivedKVTransferBytesPerSecond, Unit: "bytes/s", Record: "ratio", Labels: []string{PerLabel},
		Inputs: []mapping.Role{mapping.RoleKVTransferBytes, mapping.RoleKVTransferTime},
		Help: "Effective KV-transfer bandwidth: increase({kv_transfer_bytes}_sum) / increase({kv_transfer_time}_sum), bytes over the seconds spent transferring them." +
			" per=\"tp_rank\": vLLM pools the observations of every TP rank of an engine, each one rank's share of a transfer, so this is one rank's bandwidth; ranks transfer side by side." + helpRatio + helpCounter,
		PromQL:   "increase({kv_transfer_bytes}_sum[w]) / increase({kv_transfer_time}_sum[w])",
		Decision: "interconnect health of a P/D pair",
		window:   kvTransferBandwidth,
	},
	{
		Name: DerivedKVOffloadLoadBytesPerSec, Unit: "bytes/s", Record: "rate",
		Inputs:   []mapping.Role{mapping.RoleKVOffloadLoadBytes},
		Help:     "KV-cache bytes loaded from the offload tier (CPU) into GPU memory per second: rate of {kv_offload_load_bytes}." + helpRate + helpCounter,
		PromQL:   "rate({kv_offload_load_bytes}[w])",
		Decision: "offload tier paying off (loads) or thrashing",
		window:   rateOf(mapping.CounterKVOffloadLoadBytes),
	},
	{
		Name: DerivedKVOffloadStoreBytesPerSec, Unit: "bytes/s", Record: "rate",
		Inputs:   []mapping.Role{mapping.RoleKVOffloadStoreBytes},
		Help:     "KV-cache bytes stored from GPU memory into the offload tier (CPU) per second: rate of {kv_offload_store_bytes}." + helpRate + helpCounter,
		PromQL:   "rate({kv_offload_store_bytes}[w])",
		Decision: "offload write load",
		window:   rateOf(mapping.CounterKVOffloadStoreBytes),
	},
}

// The rules of the engine gauges: per model across its data-parallel
// engines; series without engine (V0's, a scraped routing view's) are no
// rank, and a model with one engine has none.
const (
	engineLoad          = "(sum by ({by}) ({requests_running}{engine!=\"\"}) + sum by ({by}) ({requests_waiting}{engine!=\"\"}))"
	engineImbalanceRule = "(\n" +
		"  max by (namespace, pod, model_name) (" + engineLoad + ") / ((sum by (namespace, pod, model_name) (" + engineLoad + ") / count by (namespace, pod, model_name) (" + engineLoad + ")) > 0)\n" +
		"  or\n" +
		"  max by (namespace, pod, model_name) (" + engineLoad + ") * 0 + 1\n" +
		")\n" +
		"and on (namespace, pod, model_name) (count by (namespace, pod, model_name) (" + engineLoad + ") > 1)"
	engineUsage       = "max by ({by}) ({kv_cache_usage}{engine!=\"\"})"
	kvUsageSpreadRule = "(max by (namespace, pod, model_name) (" + engineUsage + ") - min by (namespace, pod, model_name) (" + engineUsage + "))\n" +
		"and on (namespace, pod, model_name) (count by (namespace, pod, model_name) (" + engineUsage + ") > 1)"
)

// meanSpec is the mean of a histogram input: increase(sum) / increase(count).
func meanSpec(name, what string, sum, count mapping.Counter, unit, decision string) Spec {
	role := sum.Role()
	r := "{" + string(role) + "}"
	return Spec{
		Name: name, Unit: unit, Record: "mean", Inputs: []mapping.Role{role}, window: ratioOf(sum, count),
		Help:     what + ": increase(" + r + "_sum) / increase(" + r + "_count)." + helpRatio + helpCounter,
		PromQL:   "increase(" + r + "_sum[w]) / increase(" + r + "_count[w])",
		Decision: decision,
	}
}

// quantileSpec is the latency quantiles of a histogram input's buckets.
func quantileSpec(name, what string, buckets mapping.Counter, decision string) Spec {
	role := buckets.Role()
	r := "{" + string(role) + "}"
	return Spec{
		Name: name, Unit: "s", Record: "histogram_quantile", Inputs: []mapping.Role{role}, Labels: []string{QuantileLabel}, window: quantilesOf(buckets),
		Help:     what + " quantile from " + r + "." + helpQuantile,
		PromQL:   "histogram_quantile(q, sum by (le) (increase(" + r + "_bucket[w]))), q = 0.5, 0.9, 0.99",
		Rule:     "histogram_quantile({q}, sum by ({by}, le) (rate(" + r + "_bucket[w])))", // rate or increase: the same quantile
		Decision: decision,
	}
}

// Specs returns the derived gauges' table with every {role} replaced by
// the family that plays it.
func Specs(roles *mapping.Roles) []Spec { return expandSpecs(specs, roles) }

func expandSpecs(table []Spec, roles *mapping.Roles) []Spec {
	out := make([]Spec, len(table))
	for i, s := range table {
		s.Help = roles.Expand(s.Help)
		s.PromQL = roles.Expand(s.PromQL)
		s.Rule = roles.Expand(s.Rule)
		s.Inputs = append([]mapping.Role(nil), s.Inputs...)
		out[i] = s
	}
	return out
}
