package mapping

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

func fixtureFile(t *testing.T, name string) []exposition.Family {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return parsePage(t, string(b))
}

// Dynamo's frontend page is Dynamo's and fills the roles from its
// dynamo_frontend_* families; a worker's page stays its engine's, with
// Dynamo's families beside it not reported as another server's.
func TestDynamoPages(t *testing.T) {
	m := mustMapper(t, Options{})
	roles := m.Catalogue().Roles()
	canonical := func(name string) (Detection, map[string]exposition.Family) {
		norm, _ := m.Normalize(exposition.DropCreated(fixtureFile(t, name)))
		d := m.Profiles().Detection(norm)
		if d.Profile == nil {
			t.Fatalf("%s: no server detected (tie %q)", name, d.Tie)
		}
		canon, _ := d.Profile.CanonicalStats(norm, roles)
		out := map[string]exposition.Family{}
		for _, f := range canon {
			out[f.Name] = f
		}
		return d, out
	}
	d, fe := canonical("24-dynamo-frontend-2026-01-complete-dynamo-docs-metrics-examples-fe.prom")
	if d.Profile.Server != "dynamo" {
		t.Fatalf("24: server %s, want dynamo", d.Profile.Server)
	}
	for _, r := range []Role{RoleRequestsWaiting, RoleTTFT, RoleInterTokenLatency, RoleE2ELatency, RoleGenerationTokens, RoleRequestPromptTokens} {
		f, ok := fe[roles.Family(r)]
		if !ok || len(f.Samples) == 0 {
			t.Errorf("24: role %s is empty", r)
			continue
		}
		if got := f.Samples[0].Labels.Get(LabelModel); got != "qwen/qwen3-0.6b" {
			t.Errorf("24: role %s has model_name %q, want the page's model", r, got)
		}
	}
	if f, ok := fe[roles.Family(RoleGenerationTokens)]; !ok || f.Samples[0].Value != 300 {
		t.Errorf("24: generation tokens %v, want the page's 300", f.Samples)
	}
	if _, ok := fe[roles.Family(RoleRequestsRunning)]; ok {
		t.Error("24: requests_running filled from inflight_requests, which counts the queued requests too")
	}

	d, _ = canonical("25-dynamo-worker+trtllm-2026-01-complete-dynamo-docs-metrics-examples-trtllm.prom")
	if d.Profile.Server != "trtllm" || d.Odd != "" {
		t.Errorf("25: server %s, odd %q; want trtllm, Dynamo's families not odd", d.Profile.Server, d.Odd)
	}
	d, sg := canonical("26-dynamo-worker+sglang-2026-01-complete-dynamo-docs-metrics-examples-sglang.prom")
	if d.Profile.Server != "sglang" || d.Odd != "" {
		t.Fatalf("26: server %s, odd %q; want sglang, Dynamo's families not odd", d.Profile.Server, d.Odd)
	}
	if f := sg[roles.Family(RoleKVCacheUsage)]; len(f.Samples) == 0 || f.Samples[0].Labels.Get("tp_rank") == "" && f.Samples[0].Labels.Get("engine_type") == "" {
		t.Errorf("26: kv_cache_usage is not SGLang's own: %v", f.Samples)
	}
}

// SGLang's kv_transfer_latency_ms became a histogram in 2026 under the same
// name: the histogram plays kv_transfer_time in seconds, the older gauge
// plays nothing (a latest value is no distribution).
func TestSGLangKVTransferBothForms(t *testing.T) {
	m := mustMapper(t, Options{})
	roles := m.Catalogue().Roles()
	const head = "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=\"q\"} 3\n" +
		"# TYPE sglang:num_transfer_failed_reqs_total counter\nsglang:num_transfer_failed_reqs_total{model_name=\"q\"} 2\n"
	canon := func(page string) map[string]exposition.Family {
		norm, _ := m.Normalize(parsePage(t, page))
		d := m.Profiles().Detection(norm)
		if d.Profile == nil || d.Profile.Server != "sglang" {
			t.Fatalf("not detected as SGLang: %+v", d)
		}
		out := map[string]exposition.Family{}
		c, _ := d.Profile.CanonicalStats(norm, roles)
		for _, f := range c {
			out[f.Name] = f
		}
		return out
	}
	hist := canon(head + "# TYPE sglang:kv_transfer_latency_ms histogram\n" +
		"sglang:kv_transfer_latency_ms_bucket{model_name=\"q\",le=\"50\"} 3\n" +
		"sglang:kv_transfer_latency_ms_bucket{model_name=\"q\",le=\"+Inf\"} 4\n" +
		"sglang:kv_transfer_latency_ms_sum{model_name=\"q\"} 180\n" +
		"sglang:kv_transfer_latency_ms_count{model_name=\"q\"} 4\n")
	f, ok := hist[roles.Family(RoleKVTransferTime)]
	if !ok {
		t.Fatal("the histogram form does not play kv_transfer_time")
	}
	got := map[string]float64{}
	for _, s := range f.Samples {
		got[s.Labels.Get("__name__")+"{"+s.Labels.Get("le")+"}"] = s.Value
	}
	name := roles.Family(RoleKVTransferTime)
	for k, want := range map[string]float64{name + "_bucket{0.05}": 3, name + "_bucket{+Inf}": 4, name + "_sum{}": 0.18, name + "_count{}": 4} {
		if v, ok := got[k]; !ok || math.Abs(v-want) > 1e-12 {
			t.Errorf("%s = %v (present %v), want %v (milliseconds in seconds): %v", k, v, ok, want, got)
		}
	}
	if f, ok := hist[roles.Family(RoleKVTransferFailures)]; !ok || f.Samples[0].Value != 2 {
		t.Errorf("kv_transfer_failures: %v", f)
	}
	gauge := canon(head + "# TYPE sglang:kv_transfer_latency_ms gauge\nsglang:kv_transfer_latency_ms{model_name=\"q\"} 45\n")
	if _, ok := gauge[roles.Family(RoleKVTransferTime)]; ok {
		t.Error("the old gauge form plays kv_transfer_time")
	}
}
