package routing

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
	"github.com/fos-study/vllm-normalizer/mapping"
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

// TestRoutingViewDataParallel checks each rule of docs/routing.md's
// table against values computed by hand.
func TestRoutingViewDataParallel(t *testing.T) {
	norm := parsePage(t, dataParallelPage)
	derived := []exposition.Family{{
		Name: "vllm_derived_preemptions_per_second", Type: model.MetricTypeGauge, Help: "h",
		Samples: []exposition.Sample{{Labels: labels.FromStrings(model.MetricNameLabel, "vllm_derived_preemptions_per_second", "model_name", "m", "window", "1m"), Value: 0.5}},
	}}
	got := routingSamples(t, View(norm, derived, testRoles, "v1", func(s string) string { return s }))
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
		// its legacy name, same value; V1 has no CPU KV cache.
		`{__name__="vllm:gpu_cache_usage_perc", model_name="m"}`: 0.3125,
		`{__name__="vllm:cpu_cache_usage_perc", model_name="m"}`: 0,
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
	for line := range strings.SplitSeq(dataParallelPage, "\n") {
		if strings.Contains(line, `engine="1"`) && strings.HasPrefix(line, "vllm:cache_config_info") {
			continue // engine 1's block count is unknown
		}
		page = append(page, line)
	}
	got := routingSamples(t, View(parsePage(t, strings.Join(page, "\n")), nil, testRoles, "v1", func(s string) string { return s }))
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
	got := routingSamples(t, View(parsePage(t, page), nil, testRoles, "v1", func(s string) string { return s }))
	checkSamples(t, got, map[string]float64{
		// num_cpu_blocks is not a number: kept as engine 2 prints it.
		`{__name__="vllm:cache_config_info", num_cpu_blocks="None", num_gpu_blocks="12", tag="two"}`: 1,
	})
}

// TestRoutingViewNameStyle: the view follows --output.name-style.
func TestRoutingViewNameStyle(t *testing.T) {
	underscore := func(s string) string { return strings.ReplaceAll(s, ":", "_") }
	got := routingSamples(t, View(parsePage(t, dataParallelPage), nil, testRoles, "v1", underscore))
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

var testRoles = func() *mapping.Roles {
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		panic(err)
	}
	return cat.Roles()
}()

var testProfiles = func() *mapping.Profiles {
	ps, err := mapping.LoadProfiles(testRoles)
	if err != nil {
		panic(err)
	}
	return ps
}()

// viewOf detects the page's server and returns its routing view.
func viewOf(t *testing.T, text, wantServer string) map[string]float64 {
	t.Helper()
	fams := parsePage(t, text)
	p := testProfiles.Detect(fams)
	if p == nil || p.Server != wantServer {
		t.Fatalf("detected %v, want %s", p, wantServer)
	}
	return routingSamples(t, View(p.Canonical(fams, testRoles), nil, testRoles, "", func(s string) string { return s }))
}

// A router reading vLLM's names gets SGLang's running, waiting and KV usage,
// summed (running, waiting) and averaged (KV) over its data-parallel ranks,
// from the labels SGLang really prints (tp_rank and friends, dp_rank).
func TestRoutingViewSGLang(t *testing.T) {
	const page = `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 7.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 5.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 2.0
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 1.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.5
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="qwen",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.25
`
	got := viewOf(t, page, "sglang")
	want := map[string]float64{
		`{__name__="vllm:num_requests_running", model_name="qwen"}`: 12,
		`{__name__="vllm:num_requests_waiting", model_name="qwen"}`: 3,
		`{__name__="vllm:kv_cache_usage_perc", model_name="qwen"}`:  0.375,
		// its legacy name, for routers that read only that one (GIE <= 1.2)
		`{__name__="vllm:gpu_cache_usage_perc", model_name="qwen"}`: 0.375,
	}
	checkSamples(t, got, want)
	if len(got) != len(want) {
		t.Errorf("routing view has %d series, want %d: %v", len(got), len(want), got)
	}
	// The sglang_ spelling (SGL router, some pipelines) reads the same.
	checkSamples(t, viewOf(t, strings.ReplaceAll(page, "sglang:", "sglang_"), "sglang"), want)

	// With --enable-metrics-for-all-schedulers a second tensor-parallel rank
	// repeats each engine's numbers: requests are not counted twice.
	var twice strings.Builder
	for _, line := range strings.SplitAfter(page, "\n") {
		twice.WriteString(line)
		if strings.Contains(line, `tp_rank="0"`) {
			twice.WriteString(strings.Replace(line, `tp_rank="0"`, `tp_rank="1"`, 1))
		}
	}
	checkSamples(t, viewOf(t, twice.String(), "sglang"), want)

	// Priority scheduling prints one series per priority beside the total
	// (priority=""): the total is read, not the total plus its parts.
	var prio strings.Builder
	for _, line := range strings.SplitAfter(page, "\n") {
		prio.WriteString(strings.Replace(line, `pp_rank="0"`, `pp_rank="0",priority=""`, 1))
		if strings.HasPrefix(line, "sglang:num_running_reqs") {
			prio.WriteString(strings.Replace(strings.Replace(line, `pp_rank="0"`, `pp_rank="0",priority="1"`, 1), "} 7.0", "} 4.0", 1))
		}
	}
	checkSamples(t, viewOf(t, prio.String(), "sglang"), want)
}

// Real pages (SGLang 04, busy, and 26, a Dynamo worker; the TensorRT-LLM
// page 31 with iteration statistics): their gauges come out under vLLM's
// names with the values the server printed, summed per model, one series.
// The expected values are read off the fixture files by hand (26 is idle,
// so 04 and 31 are the cases a zero from the view would fail).
func TestRoutingViewFixtures(t *testing.T) {
	for _, tc := range []struct {
		file, server, model string
		gauges              map[string]string  // native -> canonical
		want                map[string]float64 // canonical -> value printed in the file
	}{
		{"04-sglang-0.3.x-sglang-docs-production_metrics.prom", "sglang", "meta-llama/Llama-3.1-8B-Instruct", map[string]string{
			"sglang:num_running_reqs": "vllm:num_requests_running", "sglang:num_queue_reqs": "vllm:num_requests_waiting", "sglang:token_usage": "vllm:kv_cache_usage_perc"},
			map[string]float64{"vllm:num_requests_running": 162, "vllm:num_requests_waiting": 2826, "vllm:kv_cache_usage_perc": 0.28}},
		{"26-dynamo-worker+sglang-2026-01-complete-dynamo-docs-metrics-examples-sglang.prom", "sglang", "Qwen/Qwen3-0.6B", map[string]string{
			"sglang:num_running_reqs": "vllm:num_requests_running", "sglang:num_queue_reqs": "vllm:num_requests_waiting", "sglang:token_usage": "vllm:kv_cache_usage_perc"},
			map[string]float64{"vllm:num_requests_running": 0, "vllm:num_requests_waiting": 0, "vllm:kv_cache_usage_perc": 0}},
		// Dynamo's frontend: waiting only (its inflight counts the queued too).
		{"24-dynamo-frontend-2026-01-complete-dynamo-docs-metrics-examples-fe.prom", "dynamo", "qwen/qwen3-0.6b", map[string]string{
			"dynamo_frontend_queued_requests": "vllm:num_requests_waiting"},
			map[string]float64{"vllm:num_requests_waiting": 0}},
		{"31-trtllm-iteration-stats-constructed-from-25.prom", "trtllm", "Qwen/Qwen3-0.6B", map[string]string{
			"trtllm_num_requests_running": "vllm:num_requests_running", "trtllm_num_requests_waiting": "vllm:num_requests_waiting", "trtllm_kv_cache_utilization": "vllm:kv_cache_usage_perc"},
			map[string]float64{"vllm:num_requests_running": 3, "vllm:num_requests_waiting": 2, "vllm:kv_cache_usage_perc": 0.125}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile("../testdata/fixtures/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			native := pagetest.Samples(t, raw, "text/plain; version=0.0.4")
			got := viewOf(t, string(raw), tc.server)
			sumOf := func(m map[string]float64, name string) (float64, int) {
				sum, n := 0.0, 0
				for k, v := range m {
					if strings.Contains(k, `__name__="`+name+`"`) {
						sum += v
						n++
					}
				}
				return sum, n
			}
			for nat, canonical := range tc.gauges {
				printed, n := sumOf(native, nat)
				if n != 1 {
					t.Fatalf("fixture has %d series of %s; this test reads one", n, nat)
				}
				if printed != tc.want[canonical] {
					t.Fatalf("fixture prints %s %v, the table says %v: fix the table", nat, printed, tc.want[canonical])
				}
				key := `{__name__="` + canonical + `", model_name="` + tc.model + `"}`
				if g, ok := got[key]; !ok || g != tc.want[canonical] {
					t.Errorf("routing %s = %v (present %v), want %v as %s prints it", key, g, ok, tc.want[canonical], nat)
				}
				if _, gn := sumOf(got, canonical); gn != 1 {
					t.Errorf("%s: %d series in the routing view, want one per model", canonical, gn)
				}
			}
		})
	}
}

// TensorRT-LLM's iteration gauges (trtllm-serve with enable_iter_perf_stats;
// no real dump has them, so the page is written from TensorRT-LLM's metric
// definitions): running, waiting and KV utilisation under vLLM's names.
func TestRoutingViewTensorRTLLM(t *testing.T) {
	const page = `# HELP trtllm_num_requests_running Number of requests currently running.
# TYPE trtllm_num_requests_running gauge
trtllm_num_requests_running{engine_type="trtllm",model_name="llama"} 9.0
# HELP trtllm_num_requests_waiting Number of requests waiting.
# TYPE trtllm_num_requests_waiting gauge
trtllm_num_requests_waiting{engine_type="trtllm",model_name="llama"} 4.0
# HELP trtllm_kv_cache_utilization KV cache utilization.
# TYPE trtllm_kv_cache_utilization gauge
trtllm_kv_cache_utilization{engine_type="trtllm",model_name="llama"} 0.625
# HELP trtllm_request_success_total Count of successfully processed requests.
# TYPE trtllm_request_success_total counter
trtllm_request_success_total{engine_type="trtllm",finished_reason="stop",model_name="llama"} 3.0
`
	got := viewOf(t, page, "trtllm")
	want := map[string]float64{
		`{__name__="vllm:num_requests_running", model_name="llama"}`: 9,
		`{__name__="vllm:num_requests_waiting", model_name="llama"}`: 4,
		`{__name__="vllm:kv_cache_usage_perc", model_name="llama"}`:  0.625,
		`{__name__="vllm:gpu_cache_usage_perc", model_name="llama"}`: 0.625,
	}
	checkSamples(t, got, want)
	if len(got) != len(want) {
		t.Errorf("routing view has %d series, want %d: %v", len(got), len(want), got)
	}
}

// A role the page lacks is absent from the view, never 0: llama.cpp has no
// KV-usage gauge.
func TestRoutingViewLlamaCppNoKV(t *testing.T) {
	raw, err := os.ReadFile("../testdata/fixtures/09-llamacpp-recent-go-test-real-llama-server-dump.prom")
	if err != nil {
		t.Fatal(err)
	}
	got := viewOf(t, string(raw), "llamacpp")
	native := pagetest.Samples(t, raw, "text/plain; version=0.0.4")
	running, ok := got[`{__name__="vllm:num_requests_running"}`]
	if want := native[`{__name__="llamacpp:requests_processing"}`]; !ok || running != want {
		t.Errorf("running %v, native %v (view %v)", running, want, got)
	}
	for k := range got {
		if strings.Contains(k, "vllm:kv_cache_usage_perc") {
			t.Errorf("KV usage %s invented for a server that has none", k)
		}
	}
}

// Every engine asleep: the view says so; one engine awake: it does not.
func TestAsleep(t *testing.T) {
	const head = "# TYPE vllm:engine_sleep_state gauge\n"
	state := func(engine, awake, offloaded string) string {
		return fmt.Sprintf("vllm:engine_sleep_state{engine=%q,model_name=\"m\",sleep_state=\"awake\"} %s\nvllm:engine_sleep_state{engine=%q,model_name=\"m\",sleep_state=\"weights_offloaded\"} %s\n", engine, awake, engine, offloaded)
	}
	for _, tc := range []struct {
		name, page string
		want       bool
	}{
		{"all asleep", head + state("0", "0", "1") + state("1", "0", "1"), true},
		{"one awake", head + state("0", "0", "1") + state("1", "1", "0"), false},
		{"awake", head + state("0", "1", "0"), false},
		{"no sleep states", "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n", false},
	} {
		got, states := Asleep(parsePage(t, tc.page), testRoles)
		if got != tc.want {
			t.Errorf("%s: asleep %v (%v), want %v", tc.name, got, states, tc.want)
		}
		if got && (len(states) != 1 || states[0] != "weights_offloaded") {
			t.Errorf("%s: states %v", tc.name, states)
		}
	}
}

// Empty label values stay as the upstream printed them: the LoRA series'
// empty adapter lists (AIBrix reads them as ""), and cache_config_info's.
func TestRoutingViewKeepsEmptyLabels(t *testing.T) {
	const page = `# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""} 1.7e+09
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",kv_offloading_backend="",num_gpu_blocks="100"} 1
vllm:cache_config_info{block_size="16",engine="1",kv_offloading_backend="",num_gpu_blocks="300"} 1
`
	got := routingSamples(t, View(parsePage(t, page), nil, testRoles, "v1", func(s string) string { return s }))
	checkSamples(t, got, map[string]float64{
		`{__name__="vllm:lora_requests_info", max_lora="1", running_lora_adapters="", waiting_lora_adapters=""}`: 1.7e9,
		`{__name__="vllm:cache_config_info", block_size="16", kv_offloading_backend="", num_gpu_blocks="400"}`:   1,
	})
}

// A gauge the view passes through as printed (V0's prefix-cache hit rate)
// is never served as NaN: the series is left out and counted.
func TestRoutingViewServesNoNaN(t *testing.T) {
	page := "# TYPE vllm:gpu_prefix_cache_hit_rate gauge\nvllm:gpu_prefix_cache_hit_rate{model_name=\"m\"} NaN\n" +
		"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 2\n"
	var v Viewer
	fams := v.View(parsePage(t, page), nil, testRoles, "v0", func(s string) string { return s })
	for _, f := range fams {
		for _, s := range f.Samples {
			if math.IsNaN(s.Value) {
				t.Errorf("NaN served: %s", s.Labels)
			}
		}
	}
	if n := v.TakeNaN(); n != 1 {
		t.Errorf("TakeNaN %d, want 1", n)
	}
	if got := routingSamples(t, fams)[`{__name__="vllm:num_requests_running", model_name="m"}`]; got != 2 {
		t.Errorf("running %v, want 2", got)
	}
}

// TestRoutingViewCacheCapacityTogether: the capacity labels of
// cache_config_info are summed over engines together or not at all, so a
// router never reads the pod's blocks beside one engine's tokens (a
// constructed page; labels as vLLM v0.11 prints them, kv_cache_size_tokens
// as in testdata/fixtures/20-*).
func TestRoutingViewCacheCapacityTogether(t *testing.T) {
	line := func(engine, tokens string) string {
		return fmt.Sprintf("vllm:cache_config_info{block_size=\"16\",engine=%q,kv_cache_size_tokens=%q,num_cpu_blocks=\"None\",num_gpu_blocks=\"4000\"} 1\n", engine, tokens)
	}
	for _, c := range []struct {
		name, page, want string
	}{
		{"every engine prints counts", line("0", "64000") + line("1", "64000") + line("2", "64000") + line("3", "64000"),
			`{__name__="vllm:cache_config_info", block_size="16", kv_cache_size_tokens="256000", num_cpu_blocks="None", num_gpu_blocks="16000"}`},
		{"one engine's tokens not a count", line("0", "64000") + line("1", "64000") + line("2", "1e30") + line("3", "64000"),
			`{__name__="vllm:cache_config_info", block_size="16", kv_cache_size_tokens="64000", num_cpu_blocks="None", num_gpu_blocks="4000"}`},
		{"a count past 2^53", line("0", "64000") + line("1", "9007199254740993"),
			`{__name__="vllm:cache_config_info", block_size="16", kv_cache_size_tokens="64000", num_cpu_blocks="None", num_gpu_blocks="4000"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := routingSamples(t, View(parsePage(t, "# TYPE vllm:cache_config_info gauge\n"+c.page), nil, testRoles, "v1", func(s string) string { return s }))
			if _, ok := got[c.want]; !ok || len(got) != 1 {
				t.Errorf("got %v, want only %s", got, c.want)
			}
		})
	}
}
