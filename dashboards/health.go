package dashboards

import "fmt"

func health() Dashboard {
	l := &layout{}
	upDown := []any{map[string]any{"type": "value", "options": map[string]any{
		"0": map[string]any{"text": "DOWN", "color": "red", "index": 0},
		"1": map[string]any{"text": "UP", "color": "green", "index": 1},
	}}}
	redGreen := []any{
		map[string]any{"color": "red", "value": nil},
		map[string]any{"color": "green", "value": 1},
	}
	hidden := []string{"Value", "__name__", "job", "instance", "container", "endpoint"}

	l.row("Upstream vLLM")
	l.add(stat("vLLM reachable",
		"Can the sidecar scrape its vLLM server right now? vllm_up per pod: 1 when the last scrape and parse of vLLM /metrics succeeded.",
		"short", upDown, redGreen,
		q(fmt.Sprintf(`vllm_up{%s}`, selPod), "{{pod}}")), 12, 6)
	l.add(table("Upstream engine and sidecar version",
		"Which vLLM engine generation (v0, v1 or unknown) does each sidecar see, and which sidecar build runs there?",
		hidden, map[string]string{"Value #A": "engine seen", "Value #B": "build"},
		instant(fmt.Sprintf(`vllm_normalizer_upstream_info{%s}`, selPod)),
		instant(fmt.Sprintf(`vllm_normalizer_build_info{%s}`, selPod))), 12, 6)
	l.add(timeseries("vLLM reachable over time",
		"When was vLLM unreachable? vllm_up per pod over time (the sidecar itself keeps answering; Prometheus' own up is the sidecar's reachability).",
		tsOpt{unit: "short", min: f(0), max: f(1)},
		q(fmt.Sprintf(`vllm_up{%s}`, selPod), "{{pod}}")), 12, 8)
	l.add(timeseries("Scrape failures per second by reason",
		"Why do scrapes of vLLM fail? Failure rate per reason: refused, timeout, http_status, parse, body_too_large, sample_limit.",
		tsOpt{unit: "short", min: f(0), stack: true},
		q(fmt.Sprintf(`sum by (namespace, pod, reason) (rate(vllm_normalizer_scrape_failures_total{%s}[$__rate_interval]))`, selPod), "{{pod}} {{reason}}")), 12, 8)
	l.add(timeseries("Upstream scrape duration",
		"Is vLLM slow to answer /metrics? Duration of the sidecar's last scrape of vLLM; routers polling every 50 ms need this well under their step timeout.",
		tsOpt{unit: "s", min: f(0)},
		q(fmt.Sprintf(`vllm_normalizer_scrape_duration_seconds{%s}`, selPod), "{{pod}}")), 8, 8)
	l.add(timeseries("Age of the served upstream data",
		"How stale are the values the sidecar serves? Age of the upstream data behind the last /metrics answer, and time since the last successful scrape.",
		tsOpt{unit: "s", min: f(0)},
		q(fmt.Sprintf(`vllm_normalizer_upstream_age_seconds{%s}`, selPod), "{{pod}} data age"),
		q(fmt.Sprintf(`time() - vllm_normalizer_last_scrape_success_timestamp_seconds{%s}`, selPod), "{{pod}} since last success")), 8, 8)
	l.add(timeseries("Upstream body size",
		"How large is vLLM's /metrics answer? A sudden growth (new label values, LoRA adapters, engines) can hit the body or sample limits.",
		tsOpt{unit: "bytes", min: f(0)},
		q(fmt.Sprintf(`vllm_normalizer_upstream_bytes{%s}`, selPod), "{{pod}}")), 8, 8)

	l.row("Metric names: what the next vLLM upgrade will break")
	l.add(table("Legacy metric names still in use",
		"Which metrics does vLLM still expose under a legacy name that the next vLLM upgrade removes? Consumers reading the legacy name will break then; point them at the replacement. (superseded names, which this server does not print, are not listed.)",
		hidden, nil,
		instant(fmt.Sprintf(`vllm_normalizer_metric_status{%s, status=~"renamed|legacy"} == 1`, selPod))), 12, 8)
	l.add(table("Removed or absent metrics",
		"Which expected metrics are missing? removed: vLLM dropped the metric (use the replacement if any); absent: not exposed by this server (feature off or not yet observed).",
		hidden, nil,
		instant(fmt.Sprintf(`vllm_normalizer_metric_status{%s, status=~"removed|absent"} == 1`, selPod))), 12, 8)
	l.add(timeseries("Metrics per status",
		"How many tracked metrics are present, renamed, superseded, legacy, removed or absent on each pod over time? A change shows up right after a vLLM upgrade.",
		tsOpt{unit: "short", min: f(0)},
		q(fmt.Sprintf(`count by (namespace, pod, status) (vllm_normalizer_metric_status{%s} == 1)`, selPod), "{{pod}} {{status}}")), 24, 8)

	l.row("Sidecar configuration")
	l.add(stat("Last config reload successful",
		"Is the sidecar running the configuration on disk? 0 means the last reload failed and the previous configuration is still in use.",
		"short", []any{map[string]any{"type": "value", "options": map[string]any{
			"0": map[string]any{"text": "FAILED", "color": "red", "index": 0},
			"1": map[string]any{"text": "OK", "color": "green", "index": 1},
		}}}, redGreen,
		q(fmt.Sprintf(`vllm_normalizer_config_last_reload_successful{%s}`, selPod), "{{pod}}")), 8, 8)
	l.add(timeseries("Config reloads by outcome",
		"When was the configuration reloaded, and did it work? Reloads per interval by outcome.",
		tsOpt{unit: "short", min: f(0), bars: true},
		q(fmt.Sprintf(`sum by (namespace, pod, outcome) (increase(vllm_normalizer_config_reloads_total{%s}[$__rate_interval]))`, selPod), "{{pod}} {{outcome}}")), 8, 8)
	l.add(timeseries("Time since last successful config reload",
		"How old is the configuration in use? Seconds since the last successful (re)load.",
		tsOpt{unit: "s", min: f(0)},
		q(fmt.Sprintf(`time() - vllm_normalizer_config_last_reload_success_timestamp_seconds{%s}`, selPod), "{{pod}}")), 8, 8)

	return newDashboard("vllm-normalizer-health", "vLLM / Normalizer health",
		"Is the vllm-normalizer sidecar healthy, can it reach vLLM, and which metric names will break at the next vLLM upgrade?",
		[]string{"health"}, standardVars(), l.panels)
}
