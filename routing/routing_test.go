package routing

import (
	"math"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

// dataParallelPage is what one vLLM port prints with two data-parallel
// engines (engine="0", "1") behind two API-server processes (pid="10",
// "11"): every engine's gauges once per process, the idle process
// reporting 0 KV usage. Engine "1" is printed first, and cache_config_info
// repeats once per process, so that neither the page's order nor the
// repetition can pass for the rule.
const dataParallelPage = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="1",model_name="m",pid="10"} 4
vllm:num_requests_running{engine="1",model_name="m",pid="11"} 0
vllm:num_requests_running{engine="0",model_name="m",pid="10"} 3
vllm:num_requests_running{engine="0",model_name="m",pid="11"} 1
vllm:num_requests_running{engine="0",model_name="other",pid="10"} 2
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="1",model_name="m",pid="10"} 5
vllm:num_requests_waiting{engine="1",model_name="m",pid="11"} 2
vllm:num_requests_waiting{engine="0",model_name="m",pid="10"} 0
vllm:num_requests_waiting{engine="0",model_name="m",pid="11"} 6
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="1",model_name="m",pid="10"} 0
vllm:kv_cache_usage_perc{engine="1",model_name="m",pid="11"} 0.25
vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="10"} 0.5
vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="11"} 0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="1",gpu_memory_utilization="0.8",num_cpu_blocks="20",num_gpu_blocks="3000",pid="10"} 1
vllm:cache_config_info{block_size="16",engine="1",gpu_memory_utilization="0.8",num_cpu_blocks="20",num_gpu_blocks="3000",pid="11"} 1
vllm:cache_config_info{block_size="16",engine="0",gpu_memory_utilization="0.9",num_cpu_blocks="10",num_gpu_blocks="1000",pid="10"} 1
vllm:cache_config_info{block_size="16",engine="0",gpu_memory_utilization="0.9",num_cpu_blocks="10",num_gpu_blocks="1000",pid="11"} 1
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="4",running_lora_adapters="a",waiting_lora_adapters=""} 1.7e+09
vllm:lora_requests_info{max_lora="4",running_lora_adapters="a,b",waiting_lora_adapters="c"} 1.7000002e+09
vllm:lora_requests_info{max_lora="4",running_lora_adapters="",waiting_lora_adapters=""} 1.7000001e+09
# HELP vllm:num_preemptions_total Cumulative number of preemptions.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 7
`

// routingSamples encodes the routing view and reads it back with
// Prometheus's parser: series -> value.
func routingSamples(t *testing.T, fams []exposition.Family) map[string]float64 {
	t.Helper()
	return pagetest.Samples(t, exposition.AppendText(nil, fams), "text/plain; version=0.0.4")
}

func checkSamples(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing %s (want %g)", k, w)
			continue
		}
		if math.Abs(g-w) > 1e-12*math.Max(1, math.Abs(w)) {
			t.Errorf("%s = %.17g, want %.17g", k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s = %g", k, g)
		}
	}
}

// TestRoutingViewDataParallel checks each rule of the README's routing
// table against values computed by hand.
func TestRoutingViewDataParallel(t *testing.T) {
	norm := parsePage(t, dataParallelPage)
	derived := []exposition.Family{{
		Name: "vllm_derived_preemptions_per_second", Type: model.MetricTypeGauge, Help: "h",
		Samples: []exposition.Sample{{Labels: labels.FromStrings(model.MetricNameLabel, "vllm_derived_preemptions_per_second", "model_name", "m", "window", "1m"), Value: 0.5}},
	}}
	got := routingSamples(t, View(norm, derived, func(s string) string { return s }))
	checkSamples(t, got, map[string]float64{
		// 4+0+3+1 over engines and pids; the other model on its own.
		`{__name__="vllm:num_requests_running", model_name="m"}`:     8,
		`{__name__="vllm:num_requests_running", model_name="other"}`: 2,
		// 5+2+0+6
		`{__name__="vllm:num_requests_waiting", model_name="m"}`: 13,
		// engine 0: max(0.5, 0) = 0.5 over 1000 blocks; engine 1:
		// max(0, 0.25) = 0.25 over 3000 blocks;
		// (0.5*1000 + 0.25*3000) / 4000 = 1250/4000.
		`{__name__="vllm:kv_cache_usage_perc", model_name="m"}`: 0.3125,
		// engine 0's labels (gpu_memory_utilization 0.9, pid of its first
		// sample), engine dropped, blocks summed once per engine.
		`{__name__="vllm:cache_config_info", block_size="16", gpu_memory_utilization="0.9", num_cpu_blocks="30", num_gpu_blocks="4000"}`: 1,
		// the largest timestamp wins, whatever its position.
		`{__name__="vllm:lora_requests_info", max_lora="4", running_lora_adapters="a,b", waiting_lora_adapters="c"}`: 1.7000002e+09,
		// derived families pass through as given.
		`{__name__="vllm_derived_preemptions_per_second", model_name="m", window="1m"}`: 0.5,
	})
}

// TestRoutingViewKVPlainMean: without num_gpu_blocks for every engine the
// mean over engines is unweighted.
func TestRoutingViewKVPlainMean(t *testing.T) {
	var page []string
	for _, line := range strings.Split(dataParallelPage, "\n") {
		if strings.Contains(line, `engine="1"`) && strings.HasPrefix(line, "vllm:cache_config_info") {
			continue // engine 1's block count is unknown
		}
		page = append(page, line)
	}
	got := routingSamples(t, View(parsePage(t, strings.Join(page, "\n")), nil, func(s string) string { return s }))
	// (0.5 + 0.25) / 2
	if v := got[`{__name__="vllm:kv_cache_usage_perc", model_name="m"}`]; v != 0.375 {
		t.Errorf("KV usage with one engine's blocks unknown = %g, want the plain mean 0.375", v)
	}
	// One engine left: its own counts, not summed.
	if _, ok := got[`{__name__="vllm:cache_config_info", block_size="16", gpu_memory_utilization="0.9", num_cpu_blocks="10", num_gpu_blocks="1000"}`]; !ok {
		t.Errorf("cache_config_info of the only engine not served as printed (less engine and pid); got %v", got)
	}
}

// TestRoutingViewEngineOrder: the lowest engine is the lowest number, not
// the first string ("2" before "10").
func TestRoutingViewEngineOrder(t *testing.T) {
	page := `# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{engine="10",num_cpu_blocks="None",num_gpu_blocks="5",tag="ten"} 1
vllm:cache_config_info{engine="2",num_cpu_blocks="None",num_gpu_blocks="7",tag="two"} 1
`
	got := routingSamples(t, View(parsePage(t, page), nil, func(s string) string { return s }))
	checkSamples(t, got, map[string]float64{
		// num_cpu_blocks is not a number: kept as engine 2 prints it.
		`{__name__="vllm:cache_config_info", num_cpu_blocks="None", num_gpu_blocks="12", tag="two"}`: 1,
	})
}

// TestRoutingViewNameStyle: the view follows --output.name-style.
func TestRoutingViewNameStyle(t *testing.T) {
	underscore := func(s string) string { return strings.ReplaceAll(s, ":", "_") }
	got := routingSamples(t, View(parsePage(t, dataParallelPage), nil, underscore))
	if v, ok := got[`{__name__="vllm_num_requests_running", model_name="m"}`]; !ok || v != 8 {
		t.Errorf("underscore-style running = %g (present %v), want 8; got %v", v, ok, got)
	}
	for k := range got {
		if strings.Contains(k, "vllm:") {
			t.Errorf("colon name left in underscore style: %s", k)
		}
	}
}

// parsePage parses a text-format page the way the collector does.
func parsePage(tb testing.TB, text string) []exposition.Family {
	tb.Helper()
	fams, _, err := exposition.Parse([]byte(text), "text/plain; version=0.0.4", exposition.ParseOptions{})
	if err != nil {
		tb.Fatalf("parse: %v\n%s", err, text)
	}
	return fams
}
