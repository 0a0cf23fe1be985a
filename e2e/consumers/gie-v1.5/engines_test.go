package giev15

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/e2e/consumers/harness"
)

// readsTable is the product's table of which names each router reads
// (routing/readers.yaml), as far as these tests need it.
type readsTable struct {
	Consumers []struct {
		Consumer    string `yaml:"consumer"`
		EngineLabel string `yaml:"engine_label"`
		Engines     map[string]struct {
			Server         string `yaml:"server"`
			Waiting        string `yaml:"waiting"`
			Running        string `yaml:"running"`
			KVUsage        string `yaml:"kv_usage"`
			CacheBlockSize string `yaml:"cache_block_size"`
			CacheNumBlocks string `yaml:"cache_num_blocks"`
			CacheInfo      *struct {
				Family         string `yaml:"family"`
				BlockSizeLabel string `yaml:"block_size_label"`
				NumBlocksLabel string `yaml:"num_blocks_label"`
			} `yaml:"cache_info"`
		} `yaml:"engines"`
	} `yaml:"consumers"`
}

func loadTable(t *testing.T) readsTable {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "routing", "readers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var r readsTable
	if err := yaml.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// giesEngineConfigs reads defaultEngineConfigs and the engine label key
// from GIE 1.5.0's own source (factories.go, mapping_registry.go): the
// variable is unexported.
func giesEngineConfigs(t *testing.T) (map[string]map[string]string, string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api-inference-extension").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "pkg", "epp", "framework", "plugins", "datalayer", "extractor", "metrics")
	src, err := os.ReadFile(filepath.Join(dir, "factories.go"))
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	body = body[strings.Index(body, "var defaultEngineConfigs"):]
	body = body[:strings.Index(body, "\n}\n")]
	configs := map[string]map[string]string{}
	for _, block := range strings.Split(body, "\n\t{")[1:] {
		fields := map[string]string{}
		for _, m := range regexp.MustCompile(`(\w+):\s*"([^"]*)"`).FindAllStringSubmatch(block, -1) {
			fields[m[1]] = m[2]
		}
		configs[fields["Name"]] = fields
	}
	reg, err := os.ReadFile(filepath.Join(dir, "mapping_registry.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`DefaultEngineTypeLabelKey\s*=\s*"([^"]+)"`).FindSubmatch(reg)
	if m == nil {
		t.Fatal("DefaultEngineTypeLabelKey not found in GIE's mapping_registry.go")
	}
	return configs, string(m[1])
}

// TestReadersTableIsGIEs: the product's gie-v1.5 table is exactly what
// GIE 1.5.0's built-in SGLang and TensorRT-LLM engine configs read.
func TestReadersTableIsGIEs(t *testing.T) {
	configs, labelKey := giesEngineConfigs(t)
	var found bool
	for _, c := range loadTable(t).Consumers {
		if c.Consumer != "gie-v1.5" {
			continue
		}
		found = true
		if c.EngineLabel != labelKey {
			t.Errorf("table's engine label %q, GIE 1.5 reads %q", c.EngineLabel, labelKey)
		}
		for _, engine := range []string{"sglang", "trtllm-serve"} {
			e, ok := c.Engines[engine]
			cfg := configs[engine]
			if !ok || cfg == nil {
				t.Errorf("engine %s: in the table %v, in GIE %v", engine, ok, cfg != nil)
				continue
			}
			want := map[string][2]string{
				"waiting": {cfg["QueuedRequestsSpec"], e.Waiting}, "running": {cfg["RunningRequestsSpec"], e.Running},
				"kv_usage": {cfg["KVUsageSpec"], e.KVUsage}, "cache_block_size": {cfg["CacheBlockSizeSpec"], e.CacheBlockSize},
				"cache_num_blocks": {cfg["CacheNumBlocksSpec"], e.CacheNumBlocks},
			}
			if e.CacheInfo != nil {
				want["cache_info"] = [2]string{cfg["CacheInfoSpec"] + "/" + cfg["CacheBlockSizeLabelName"] + "/" + cfg["CacheNumBlocksLabelName"],
					e.CacheInfo.Family + "/" + e.CacheInfo.BlockSizeLabel + "/" + e.CacheInfo.NumBlocksLabel}
			} else {
				want["cache_info"] = [2]string{cfg["CacheInfoSpec"], ""}
			}
			for field, w := range want {
				if w[0] != w[1] {
					t.Errorf("engine %s, %s: GIE 1.5 reads %q, the table says %q", engine, field, w[0], w[1])
				}
			}
		}
	}
	if !found {
		t.Fatal("the table has no gie-v1.5 consumer")
	}
}

// pollEngine is poll with the endpoint labelled as engine (GIE's engine
// label), so that the extractor uses that engine's built-in config.
func pollEngine(t *testing.T, host, path, labelKey, engine string) (harness.RouterRead, error, error) {
	t.Helper()
	return pollLabelled(t, host, path, map[string]string{labelKey: engine})
}

// sglangTwoRanks is fixture 04 with a second data-parallel rank (half the
// load) and each rank's cache information as SGLang 0.5.9 prints it.
func sglangTwoRanks(t *testing.T) []byte {
	page := harness.TwoRanks(harness.Fixture(t, "04"), 0.5, "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage")
	return append(page, []byte(`# HELP sglang:cache_config_info cache config
# TYPE sglang:cache_config_info gauge
sglang:cache_config_info{dp_rank="0",model_name="meta-llama/Llama-3.1-8B-Instruct",num_pages="1000",page_size="16"} 1
sglang:cache_config_info{dp_rank="1",model_name="meta-llama/Llama-3.1-8B-Instruct",num_pages="3000",page_size="16"} 1
`)...)
}

// TestEngineLabelledNeverWorseThanRaw: GIE 1.5's EPP with its SGLang and
// TensorRT-LLM engine configs (the pod labelled with the engine) reads the
// sidecar's router-facing pages at least as right as the raw page, and the
// collapsed truth on a two-rank page.
func TestEngineLabelledNeverWorseThanRaw(t *testing.T) {
	_, labelKey := giesEngineConfigs(t)
	sglang := harness.Native{Running: "sglang:num_running_reqs", Waiting: "sglang:num_queue_reqs", KV: "sglang:token_usage", EngineLabel: "dp_rank",
		CacheInfo: "sglang:cache_config_info", BlockSizeLabel: "page_size", NumBlocksLabel: "num_pages"}
	trtllm := harness.Native{Running: "trtllm_num_requests_running", Waiting: "trtllm_num_requests_waiting", KV: "trtllm_kv_cache_utilization",
		BlockSizeGauge: "trtllm_kv_cache_tokens_per_block", NumBlocksGauge: "trtllm_kv_cache_max_blocks"}
	for _, p := range []struct {
		name, engine string
		body         []byte
		native       harness.Native
		twoRanks     bool
	}{
		{"sglang 04", "sglang", harness.Fixture(t, "04"), sglang, false},
		{"sglang dynamo worker 26", "sglang", harness.Fixture(t, "26"), sglang, false},
		// SGLang 0.5.22 on a hybrid model (constructed): token_usage 0.9
		// counts the full Mamba states, the KV pools are at 0.3; GIE
		// reads SGLang's own name and must get what SGLang printed.
		{"sglang hybrid 37", "sglang", harness.Fixture(t, "37"), sglang, false},
		{"sglang 04, two data-parallel ranks", "sglang", sglangTwoRanks(t), sglang, true},
		{"trtllm dynamo worker 25", "trtllm-serve", harness.Fixture(t, "25"), trtllm, false},
		{"trtllm iteration stats 31", "trtllm-serve", harness.Fixture(t, "31"), trtllm, false},
	} {
		t.Run(p.name, func(t *testing.T) {
			truth, err := harness.ComputeNativeTruth(p.body, p.native)
			if err != nil {
				t.Fatal(err)
			}
			up := harness.NewUpstream(t, p.body)
			side := harness.StartSidecar(t, up)
			raw, rawPollErr, rawErr := pollEngine(t, up.Host, "/metrics", labelKey, p.engine)
			t.Logf("truth %+v", truth)
			t.Logf("raw %+v (poll %v, extract %v)", raw, rawPollErr, rawErr)
			for _, target := range []struct{ host, path string }{
				{side.Host, "/metrics/routing"}, {side.RoutingHost, "/metrics"}, {side.Host, "/metrics"},
			} {
				got, pollErr, extractErr := pollEngine(t, target.host, target.path, labelKey, p.engine)
				where := fmt.Sprintf("sidecar %s%s", target.host, target.path)
				if pollErr != nil {
					t.Errorf("%s: the EPP cannot poll it: %v", where, pollErr)
					continue
				}
				t.Logf("%s: %+v (extract %v)", where, got, extractErr)
				router := target.path != "/metrics" || target.host == side.RoutingHost
				harness.CheckRouter(t, where, []string{harness.FieldWaiting, harness.FieldRunning, harness.FieldKV, harness.FieldCache}, truth, raw, got, router)
			}
			if p.twoRanks && harness.Equal(raw.Running, truth.Running) {
				t.Errorf("raw already reads the summed running count %v; this page does not test data parallelism", raw.Running)
			}
		})
	}
}

// TestNewerEnginesConfigured: GIE 1.5.0 has no built-in atom or
// tokenspeed engine config (its defaultEngineConfigs: vllm, sglang,
// trtllm-serve, triton-tensorrt-llm, triton); an operator adds them as
// engineConfigs with the names llm-d's later built-in configs read
// (routing/readers.yaml, llm-d-router-late-2026). With them, GIE's own
// extractor reads ATOM's and TokenSpeed's pages through the sidecar at
// least as right as raw.
func TestNewerEnginesConfigured(t *testing.T) {
	configs, labelKey := giesEngineConfigs(t)
	var late map[string]struct{ w, r, kv, ci string }
	for _, c := range loadTable(t).Consumers {
		if c.Consumer != "llm-d-router-late-2026" {
			continue
		}
		late = map[string]struct{ w, r, kv, ci string }{}
		for name, e := range c.Engines {
			ci := ""
			if e.CacheInfo != nil {
				ci = e.CacheInfo.Family
			}
			late[name] = struct{ w, r, kv, ci string }{e.Waiting, e.Running, e.KVUsage, ci}
		}
	}
	for _, p := range []struct {
		engine, fixture string
		native          harness.Native
	}{
		{"atom", "35", harness.Native{Running: "atom:requests_running", Waiting: "atom:requests_waiting", KV: "atom:kv_cache_usage_ratio",
			CacheInfo: "atom:cache_config_info", BlockSizeLabel: "block_size", NumBlocksLabel: "num_gpu_blocks"}},
		{"tokenspeed", "36", harness.Native{Running: "tokenspeed:num_requests_running", Waiting: "tokenspeed:num_requests_waiting", KV: "tokenspeed:kv_cache_usage_perc", EngineLabel: "dp_rank"}},
	} {
		t.Run(p.engine, func(t *testing.T) {
			if _, ok := configs[p.engine]; ok {
				t.Fatalf("GIE 1.5.0 has a built-in %s config; test it as the built-in ones are", p.engine)
			}
			e, ok := late[p.engine]
			if !ok {
				t.Fatalf("readers.yaml's llm-d-router-late-2026 has no %s entry", p.engine)
			}
			if e.w != p.native.Waiting || e.r != p.native.Running || e.kv != p.native.KV || e.ci != p.native.CacheInfo {
				t.Fatalf("readers.yaml reads %+v of %s, this test %+v", e, p.engine, p.native)
			}
			params, _ := json.Marshal(map[string]any{"engineConfigs": []map[string]string{{
				"name": p.engine, "queuedRequestsSpec": e.w, "runningRequestsSpec": e.r, "kvUsageSpec": e.kv, "cacheInfoSpec": e.ci,
			}}})
			body := harness.Fixture(t, p.fixture)
			truth, err := harness.ComputeNativeTruth(body, p.native)
			if err != nil {
				t.Fatal(err)
			}
			up := harness.NewUpstream(t, body)
			side := harness.StartSidecar(t, up)
			labels := map[string]string{labelKey: p.engine}
			raw, _, _ := pollWith(t, up.Host, "/metrics", labels, params)
			fields := []string{harness.FieldWaiting, harness.FieldRunning, harness.FieldKV}
			if p.native.CacheInfo != "" {
				fields = append(fields, harness.FieldCache)
			}
			for _, target := range []struct{ host, path string }{
				{side.Host, "/metrics/routing"}, {side.RoutingHost, "/metrics"},
			} {
				got, pollErr, extractErr := pollWith(t, target.host, target.path, labels, params)
				where := fmt.Sprintf("sidecar %s%s", target.host, target.path)
				if pollErr != nil {
					t.Errorf("%s: the EPP cannot poll it: %v", where, pollErr)
					continue
				}
				t.Logf("%s: %+v (extract %v); raw %+v; truth %+v", where, got, extractErr, raw, truth)
				harness.CheckRouter(t, where, fields, truth, raw, got, true)
			}
		})
	}
}
