package dashboards

import "fmt"

// routingSignal is one gauge a router looks at, as an expression that
// yields one series per instance (namespace, pod, model_name).
type routingSignal struct {
	title    string
	expr     string
	unit     string
	question string
}

func routingSignals() []routingSignal {
	return []routingSignal{
		{"Waiting requests", fmt.Sprintf(`sum by (%s) (vllm:num_requests_waiting{%s})`, inst, selModel), "short",
			"Which instance has the longest queue? Requests accepted but not yet scheduled into a batch."},
		{"Running requests", fmt.Sprintf(`sum by (%s) (vllm:num_requests_running{%s})`, inst, selModel), "short",
			"How big is each instance's running batch? More running requests means more throughput but slower tokens."},
		{"KV-cache usage", fmt.Sprintf(`max by (%s) (vllm:kv_cache_usage_perc{%s})`, inst, selModel), "percentunit",
			"How full is each instance's KV cache (0..1, highest data-parallel engine)? High usage alone is normal; read it together with preemptions."},
		{"Preemptions per second", fmt.Sprintf(`sum by (%s) (vllm_derived_preemptions_per_second{%s})`, inst, selWin), "short",
			"Is an instance evicting running requests for lack of KV-cache memory? Preemption, not KV usage, is the memory-pressure signal."},
		{"TTFT queue share", fmt.Sprintf(`max by (%s) (vllm_derived_ttft_queue_ratio{%s})`, inst, selWin), "percentunit",
			"Which share of time-to-first-token does each instance spend queueing (mean queue time / mean TTFT)? A high share means the instance is the bottleneck, not the model."},
		{"Prefix-cache hit ratio", fmt.Sprintf(`avg by (%s) (vllm_derived_prefix_cache_hit_ratio{%s})`, inst, selWin), "percentunit",
			"How much of each instance's prompt tokens are served from its prefix cache? Low on one instance means prefix-aware routing is not sending it matching traffic."},
	}
}

// relativeToPeers divides each instance's value by the average over the
// instances that serve the same model: 1 is average, 2 twice the average.
func relativeToPeers(perInstance string) string {
	return fmt.Sprintf("%s\n/ on (model_name) group_left ()\navg by (model_name) (%s)", perInstance, perInstance)
}

func routing() Dashboard {
	l := &layout{}
	sig := routingSignals()

	l.row("Now: every instance side by side")
	up := stat("Sidecars reporting vLLM up",
		"How many vLLM instances in the selection can be routed to right now? Counts sidecars whose last scrape of vLLM succeeded (vllm_up == 1) against all sidecars.",
		"short", nil, nil,
		q(fmt.Sprintf(`sum(vllm_up{%s})`, selPod), "up"),
		q(fmt.Sprintf(`count(vllm_up{%s})`, selPod), "sidecars"))
	l.add(up, 4, 8)

	var tableTargets []Target
	rename := map[string]string{}
	for i, s := range sig {
		tableTargets = append(tableTargets, instant(s.expr))
		rename[fmt.Sprintf("Value #%c", 'A'+i)] = s.title
	}
	l.add(table("Routing view per instance",
		"Which instance would a router pick right now? The routing gauges of every instance in one row each, at the end of the time range; sort by any column. Preemptions, TTFT queue share and prefix-cache hit ratio use the selected derived window.",
		nil, rename, tableTargets...), 20, 8)

	l.row("Absolute values per instance")
	for _, s := range sig {
		o := tsOpt{unit: s.unit, min: f(0)}
		if s.unit == "percentunit" {
			o.max = f(1)
		}
		l.add(timeseries(s.title+" per instance", s.question, o, q(s.expr, "{{pod}} {{model_name}}")), 8, 8)
	}

	l.row("Each instance relative to its peers (1 = average of the instances serving the same model)")
	for _, s := range sig {
		l.add(timeseries(s.title+" relative to peers",
			"Is this instance out of line with the others serving the same model? Value divided by the average over those instances: 1 is average, 2 is twice the average. vLLM has no official absolute thresholds, so the comparison between instances is the signal. Empty when every instance is at 0.",
			tsOpt{unit: "short", min: f(0)},
			q(relativeToPeers(s.expr), "{{pod}} {{model_name}}")), 8, 8)
	}

	fleetRow(l)

	return newDashboard("vllm-normalizer-routing", "vLLM / Routing view",
		"The gauges routers use, for every vLLM instance side by side and relative to its peers. Data from the vllm-normalizer sidecar.",
		[]string{"routing"}, standardVars(windowVar()), l.panels)
}

// fleetSignal is one signal of the vllm-fleet recording rules
// (deploy/prometheus/recording.yml), by its signal label.
type fleetSignal struct {
	signal, title, unit string
}

func fleetSignals() []fleetSignal {
	return []fleetSignal{
		{"ttft_p90", "TTFT p90", "s"},
		{"itl_p90", "ITL p90", "s"},
		{"preemptions_per_second", "Preemptions per second", "short"},
		{"ttft_queue_ratio", "TTFT queue share", "percentunit"},
		{"kv_cache_usage", "KV-cache usage", "percentunit"},
	}
}

// The fleet is every pod of the model, so its selector leaves out $pod.
const (
	selFleet = `namespace=~"$namespace", model_name=~"$model_name"`
	fleetKey = "namespace, model_name, role, signal"
	podKey   = "cluster, namespace, pod, model_name, role, signal"
)

// fleetRow ranks the pods of each model against the model's fleet median,
// from the recording rules the VLLMInstanceOutlierInFleet alert reads.
func fleetRow(l *layout) {
	l.row("Fleet: each pod against the median of the pods serving the same model")
	l.add(stat("Fleet outliers now",
		"How many pods are out of line with their model's fleet right now? Pods and signals where vllm:fleet_outlier:pod5m holds: at least the signal's ratio times the fleet median and its minimum difference above it, in fleets of 3 pods or more. VLLMInstanceOutlierInFleet fires when one stays so for 10 minutes.",
		"short", nil,
		[]any{map[string]any{"color": "green", "value": nil}, map[string]any{"color": "red", "value": 1}},
		q(fmt.Sprintf(`count(vllm:fleet_outlier:pod5m{%s}) or vector(0)`, selFleet), "outliers")), 4, 8)
	ranked := table("Pods ranked against their fleet median",
		"Which pod is the odd one out? Every pod and signal with its 5m value, its model's fleet median (3 pods or more, same role) and the ratio of the two, largest ratio first; Outlier is 1 where the pod passes the signal's ratio and minimum difference. The ratio is empty where the median is 0 (preemptions on a healthy fleet): read the value then.",
		nil, map[string]string{
			"Value #A": "Ratio to median", "Value #B": "Value", "Value #C": "Fleet median", "Value #D": "Outlier",
		},
		// The same label set in every query (no __name__), so the merge
		// puts one pod and signal on one row.
		instant(fmt.Sprintf(`max by (%s) (vllm:fleet_ratio:pod5m{%s})`, podKey, selFleet)),
		instant(fmt.Sprintf(`max by (%s) (vllm:fleet_value:pod5m{%s})`, podKey, selFleet)),
		instant(fmt.Sprintf("max by (%s) (\n  vllm:fleet_median:model5m{%s}\n  + on (%s) group_right ()\n  (0 * vllm:fleet_value:pod5m{%s})\n)", podKey, selFleet, fleetKey, selFleet)),
		instant(fmt.Sprintf(`max by (%s) (vllm:fleet_outlier:pod5m{%s}) * 0 + 1`, podKey, selFleet)))
	ranked.Options["sortBy"] = []any{map[string]any{"displayName": "Ratio to median", "desc": true}}
	l.add(ranked, 20, 8)
	for _, s := range fleetSignals() {
		o := tsOpt{unit: s.unit, min: f(0), overrides: []map[string]any{{
			"matcher": map[string]any{"id": "byRegexp", "options": "fleet median.*"},
			"properties": []any{
				map[string]any{"id": "custom.lineStyle", "value": map[string]any{"fill": "dash", "dash": []int{10, 10}}},
				map[string]any{"id": "custom.lineWidth", "value": 2},
			},
		}}}
		l.add(timeseries(s.title+" per pod against the fleet median",
			"Does one pod leave the others serving its model? Each pod's 5m value (slowest engine for latencies, summed over engines for preemptions, busiest process per engine for KV usage) and, dashed, the fleet median of its model and role (3 pods or more). Latencies count only for pods that finished 0.1 requests/s or more.",
			o,
			q(fmt.Sprintf(`vllm:fleet_value:pod5m{%s, signal=%q}`, selFleet, s.signal), "{{pod}} {{model_name}}"),
			q(fmt.Sprintf(`vllm:fleet_median:model5m{%s, signal=%q}`, selFleet, s.signal), "fleet median {{model_name}} {{role}}")), 8, 8)
	}
}
