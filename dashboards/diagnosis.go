package dashboards

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	diagnosisrules "github.com/fos-study/vllm-normalizer/diagnosis"
)

// diagnosis follows the order operators walk when throughput drops.
func diagnosis() Dashboard {
	l := &layout{}
	legend := "{{pod}} {{model_name}} p{{q}}"

	// (0) The sidecar's own verdict: the five steps done automatically.
	yesNo := []any{map[string]any{"type": "value", "options": map[string]any{
		"0": map[string]any{"text": "no", "color": "green", "index": 0},
		"1": map[string]any{"text": "YES", "color": "red", "index": 1},
	}}}
	greenRed := []any{
		map[string]any{"color": "green", "value": nil},
		map[string]any{"color": "red", "value": 1},
	}
	l.row("Verdict: the sidecar's automated triage (docs/diagnosis.md)")
	readyText := []any{map[string]any{"type": "value", "options": map[string]any{
		"0": map[string]any{"text": "not ready", "color": "text", "index": 0},
		"1": map[string]any{"text": "ready", "color": "green", "index": 1},
	}}}
	l.add(stat("Ready",
		"Can the diagnosis judge this pod? 0 while the windows are not covered, with too little traffic, or when the server does not print the inputs (or prints a latency histogram with a child lacking its +Inf bucket, withheld); /diagnosis and /api/v1/diagnosis say which.",
		"short", readyText, nil,
		q(fmt.Sprintf(`min by (%s) (vllm_diagnosis_ready{%s})`, inst, selModel), "{{pod}}")), 4, 6)
	l.add(stat("Incident age",
		"How long has the current incident lasted? Seconds since its first symptom showed, against the baseline frozen then; 0 when there is none.",
		"s", nil, greenRed,
		q(fmt.Sprintf(`max by (%s) (vllm_diagnosis_incident_seconds{%s})`, inst, selModel), "{{pod}}")), 4, 6)
	l.add(stat("Symptoms",
		"Which side got slower against this pod's own past? ttft_up and itl_up: the 90th percentile over the recent window rose by --diagnosis.min-change, significantly, against the baseline (frozen during an incident); throughput_down: fewer tokens per second without fewer requests running, or with more requests waiting; in a stall fewer tokens per second. Absent while not ready.",
		"short", yesNo, greenRed,
		q(fmt.Sprintf(`max by (%s, symptom) (vllm_diagnosis_symptom{%s})`, inst, selModel), "{{pod}} {{symptom}}")), 6, 6)
	l.add(stat("Causes",
		"What explains it? "+causesByStep()+". They follow the incident; several may hold at once; with no change against the baseline all are at no.",
		"short", yesNo, greenRed,
		q(fmt.Sprintf(`max by (%s, cause) (vllm_diagnosis_cause{%s})`, inst, selModel), "{{pod}} {{cause}}")), 10, 6)
	l.add(timeseries("Change ratios: recent window / baseline",
		"How much did each signal the rules read move? Recent-window value divided by the baseline's; 1 is no change, the rules count a change from 1 ± --diagnosis.min-change. A rise from 0 is +Inf (not drawn).",
		tsOpt{unit: "short", min: f(0)},
		q(fmt.Sprintf(`max by (%s, signal) (vllm_diagnosis_change_ratio{%s} < +Inf)`, inst, selModel), "{{pod}} {{signal}}")), 24, 8)

	// (1) Prefill or decode?
	l.row("1. Prefill or decode? Time to first token vs inter-token latency")
	l.add(timeseries("Time to first token per instance",
		"Is the slowdown in prefill (or queueing before it)? Windowed time-to-first-token quantiles per instance from the sidecar's derived gauges. Rising TTFT with steady inter-token latency points at prefill or queueing.",
		tsOpt{unit: "s", min: f(0)},
		q(fmt.Sprintf(`max by (%s, q) (vllm_derived_ttft_seconds{%s})`, inst, selWin), legend)), 12, 8)
	l.add(timeseries("Inter-token latency per instance",
		"Is the slowdown in decode? Windowed inter-token latency quantiles per instance. Rising inter-token latency with steady TTFT points at decode: a larger batch, longer contexts or memory pressure.",
		tsOpt{unit: "s", min: f(0)},
		q(fmt.Sprintf(`max by (%s, q) (vllm_derived_inter_token_latency_seconds{%s})`, inst, selWin), legend)), 12, 8)
	l.add(timeseries("TTFT split: queue vs prefill (mean)",
		"Where does time-to-first-token go: waiting in the queue or computing the prefill? Mean queue time and mean prefill time per instance over the derived window.",
		tsOpt{unit: "s", min: f(0)},
		q(fmt.Sprintf(`max by (%s) (vllm_derived_queue_time_mean_seconds{%s})`, inst, selWin), "{{pod}} queue"),
		q(fmt.Sprintf(`max by (%s) (vllm_derived_prefill_time_mean_seconds{%s})`, inst, selWin), "{{pod}} prefill"),
		q(fmt.Sprintf(`max by (%s) (vllm_derived_decode_time_mean_seconds{%s})`, inst, selWin), "{{pod}} decode")), 8, 8)
	l.add(timeseries("TTFT queue share",
		"How much of time-to-first-token is queueing (0..1)? Near 1 the instance is saturated and prefill is not the problem; near 0 the time is spent computing the prefill.",
		tsOpt{unit: "percentunit", min: f(0), max: f(1)},
		q(fmt.Sprintf(`max by (%s) (vllm_derived_ttft_queue_ratio{%s})`, inst, selWin), "{{pod}} {{model_name}}")), 8, 8)
	l.add(timeseries("Model-wide TTFT and inter-token latency p90",
		"Is the whole model slow or only some instances? 90th percentile over all selected instances, aggregated from the raw vLLM histograms.",
		tsOpt{unit: "s", min: f(0)},
		q(classicOrNative(fmt.Sprintf(`histogram_quantile(0.9, sum by (model_name, le) (rate(vllm:time_to_first_token_seconds_bucket{%s}[$__rate_interval])))`, selModel)), "{{model_name}} TTFT p90"),
		q(classicOrNative(fmt.Sprintf(`histogram_quantile(0.9, sum by (model_name, le) (rate(vllm:inter_token_latency_seconds_bucket{%s}[$__rate_interval])))`, selModel)), "{{model_name}} ITL p90")), 8, 8)

	// (2) Saturation.
	l.row("2. Saturation: waiting vs running")
	l.add(timeseries("Waiting vs running requests",
		"Is the instance saturated? Running requests are in the batch; waiting requests could not be scheduled. Waiting that grows while running stays flat means the instance is at capacity.",
		tsOpt{unit: "short", min: f(0)},
		q(fmt.Sprintf(`sum by (%s) (vllm:num_requests_running{%s})`, inst, selModel), "{{pod}} running"),
		q(fmt.Sprintf(`sum by (%s) (vllm:num_requests_waiting{%s})`, inst, selModel), "{{pod}} waiting")), 12, 8)
	l.add(timeseries("Throughput vs latency: batch size and inter-token latency",
		"What does a bigger batch cost? Mean running batch size per model (left axis) against median inter-token latency (right axis): if latency climbs with the batch, throughput is bought with slower tokens.",
		tsOpt{unit: "short", min: f(0), overrides: []map[string]any{rightAxis(".*ITL.*", "s")}},
		q(fmt.Sprintf(`avg by (model_name) (vllm:num_requests_running{%s})`, selModel), "{{model_name}} running batch"),
		q(fmt.Sprintf(`avg by (model_name) (vllm_derived_inter_token_latency_seconds{%s, q="0.5"})`, selWin), "{{model_name}} ITL p50")), 12, 8)
	l.add(timeseries("Finished requests per second by reason",
		"Is the work finishing, and how? Requests per second per finish reason (stop, length, abort, error...). A rise in abort or error explains a throughput drop that latency does not.",
		tsOpt{unit: "reqps", min: f(0), stack: true},
		q(fmt.Sprintf(`sum by (model_name, finished_reason) (vllm_derived_requests_per_second{%s})`, selWin), "{{model_name}} {{finished_reason}}")), 12, 8)
	l.add(timeseries("Token throughput",
		"How many tokens per second do the instances process? Prompt (prefill) and generation (decode) tokens per second per model.",
		tsOpt{unit: "short", min: f(0)},
		q(fmt.Sprintf(`sum by (model_name) (vllm_derived_prompt_tokens_per_second{%s})`, selWin), "{{model_name}} prompt tok/s"),
		q(fmt.Sprintf(`sum by (model_name) (vllm_derived_generation_tokens_per_second{%s})`, selWin), "{{model_name}} generation tok/s")), 12, 8)

	// (3) Memory pressure.
	l.row("3. Memory pressure: KV cache and preemptions")
	l.add(timeseries("KV-cache usage per instance",
		"How full is the KV cache? A full cache alone is normal for vLLM; it matters only when it causes preemptions (next panel).",
		tsOpt{unit: "percentunit", min: f(0), max: f(1)},
		q(fmt.Sprintf(`max by (%s) (vllm:kv_cache_usage_perc{%s})`, inst, selModel), "{{pod}} {{model_name}}")), 8, 8)
	l.add(timeseries("Preemptions per second per instance",
		"Is the instance short of KV-cache memory? Preempted requests are evicted and recomputed later, which costs throughput and latency. Any sustained rate is the memory-pressure signal.",
		tsOpt{unit: "short", min: f(0)},
		q(fmt.Sprintf(`sum by (%s) (vllm_derived_preemptions_per_second{%s})`, inst, selWin), "{{pod}} {{model_name}}")), 8, 8)
	l.add(timeseries("Prefix-cache hit ratio",
		"Is the prefix cache saving prefill work? Share of prompt tokens found in the local prefix cache, and in an external KV connector cache when one is configured. A drop means more prefill work per request.",
		tsOpt{unit: "percentunit", min: f(0), max: f(1)},
		q(fmt.Sprintf(`avg by (%s) (vllm_derived_prefix_cache_hit_ratio{%s})`, inst, selWin), "{{pod}} local"),
		q(fmt.Sprintf(`avg by (%s) (vllm_derived_external_prefix_cache_hit_ratio{%s})`, inst, selWin), "{{pod}} external")), 8, 8)

	// (4) Traffic shape.
	l.row("4. Did the traffic change? Prompt and output lengths")
	l.add(timeseries("Mean prompt and output length",
		"Did requests get longer? Mean prompt tokens and mean generated tokens per finished request, per model. Longer prompts slow prefill; longer outputs keep requests in the batch longer.",
		tsOpt{unit: "short", min: f(0)},
		q(fmt.Sprintf(`avg by (model_name) (vllm_derived_prompt_tokens_mean{%s})`, selWin), "{{model_name}} prompt"),
		q(fmt.Sprintf(`avg by (model_name) (vllm_derived_generation_tokens_mean{%s})`, selWin), "{{model_name}} output")), 8, 8)
	l.add(heatmap("Prompt length distribution",
		"Did the mix of prompt lengths change? Finished requests per prompt-length bucket over time (raw vLLM histogram).",
		"short",
		Target{Expr: classicOrNative(fmt.Sprintf(`sum by (le) (increase(vllm:request_prompt_tokens_bucket{%s}[$__rate_interval]))`, selModel)), LegendFormat: "{{le}}", Range: true}), 8, 8)
	l.add(heatmap("Output length distribution",
		"Did the mix of output lengths change? Finished requests per generated-length bucket over time (raw vLLM histogram).",
		"short",
		Target{Expr: classicOrNative(fmt.Sprintf(`sum by (le) (increase(vllm:request_generation_tokens_bucket{%s}[$__rate_interval]))`, selModel)), LegendFormat: "{{le}}", Range: true}), 8, 8)

	// (5) Configuration.
	l.row("5. Configuration")
	l.add(table("KV-cache configuration",
		"Did the configuration change (block size, number of GPU blocks, cache dtype, GPU memory utilisation, prefix caching)? One row per instance and engine from vllm:cache_config_info. This metric has no model_name label, so only namespace and pod filter it.",
		[]string{"Value", "__name__", "job", "instance", "container", "endpoint"}, nil,
		instant(fmt.Sprintf(`vllm:cache_config_info{%s}`, selPod))), 24, 8)

	return newDashboard("vllm-normalizer-diagnosis", "vLLM / Diagnosis",
		"Throughput dropped: where? The top row is the sidecar's own verdict; the rows below follow the diagnosis order: prefill or decode, saturation, memory pressure, traffic change, configuration. Data from the vllm-normalizer sidecar.",
		[]string{"diagnosis"}, standardVars(windowVar()), l.panels)
}

// causesByStep names the diagnosis' causes step by step, from its records
// (docs/diagnosis.md says what each means): "queueing, batch_growth (step
// 2); preemptions (step 3); ...".
func causesByStep() string {
	var parts []string
	names, step := []string{}, 0
	flush := func() {
		if len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%s (step %d)", strings.Join(names, ", "), step))
		}
	}
	cs := diagnosisrules.Causes()
	slices.SortStableFunc(cs, func(a, b diagnosisrules.Cause) int { return cmp.Compare(a.Step, b.Step) })
	for _, c := range cs {
		if c.Step != step {
			flush()
			names, step = nil, c.Step
		}
		names = append(names, c.Name)
	}
	flush()
	return strings.Join(parts, "; ")
}
