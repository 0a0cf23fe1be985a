package mapping

import (
	"strings"
	"testing"
)

func TestLoadCatalogue(t *testing.T) {
	cat := mustCatalogue(t)
	// The reference lists 71 core families and 50 KV-connector families up
	// to vLLM main of 2026-08-22; 12 core families (the last the admission
	// rejections of v0.29) and 1 KV-connector family were catalogued from
	// later vLLM changes.
	if got := len(cat.Metrics); got != 134 {
		t.Errorf("catalogue has %d metrics, want 134 (121 from the reference plus 13 later families)", got)
	}
	for _, tc := range []struct {
		name, typ, replacement string
		removed                bool
	}{
		{"vllm:gpu_cache_usage_perc", "gauge", "vllm:kv_cache_usage_perc", false},
		{"vllm:time_in_queue_requests", "histogram", "vllm:request_queue_time_seconds", false},
		{"vllm:gpu_prefix_cache_queries_total", "counter", "vllm:prefix_cache_queries_total", false},
		{"vllm:gpu_prefix_cache_hits_total", "counter", "vllm:prefix_cache_hits_total", false},
		{"vllm:time_per_output_token_seconds", "histogram", "vllm:inter_token_latency_seconds", false},
		{"vllm:kv_offload_tiering_block_queries_total", "counter", "vllm:kv_offload_tiering_chunk_queries_total", false},
		{"vllm:cpu_cache_usage_perc", "gauge", "", true},
		{"vllm:num_requests_swapped", "gauge", "", true},
		{"vllm:kv_cache_usage_perc", "gauge", "", false},
		{"vllm:iteration_tokens_total", "histogram", "", false},
	} {
		m, ok := cat.Lookup(tc.name)
		if !ok {
			t.Errorf("%s missing", tc.name)
			continue
		}
		if m.Type != tc.typ || m.Replacement != tc.replacement || m.IsRemoved() != tc.removed {
			t.Errorf("%s: type %s replacement %q removed %v; want %s %q %v", tc.name, m.Type, m.Replacement, m.IsRemoved(), tc.typ, tc.replacement, tc.removed)
		}
	}
	split, _ := cat.Lookup("vllm:kv_offload_total_bytes_total")
	if got := strings.Join(split.Replacements(), ","); got != "vllm:kv_offload_load_bytes_total,vllm:kv_offload_store_bytes_total" {
		t.Errorf("split replacements = %s", got)
	}
}

// Every vllm: family a real vLLM page prints must be in the catalogue
// (the _created companions excepted: they belong to their counter or
// histogram).
func TestCatalogueCoversFixtures(t *testing.T) {
	cat := mustCatalogue(t)
	for _, short := range []string{"01", "02", "03", "12", "13"} {
		for _, f := range fixture(t, short) {
			if !strings.HasPrefix(f.Name, "vllm:") {
				continue
			}
			if _, ok := cat.Lookup(f.Name); ok {
				continue
			}
			if base, ok := strings.CutSuffix(f.Name, "_created"); ok {
				if _, ok := cat.Lookup(base + "_total"); ok {
					continue
				}
				if m, ok := cat.Lookup(base); ok && m.Type == "histogram" {
					continue
				}
			}
			t.Errorf("fixture %s: family %s is not in the catalogue", short, f.Name)
		}
	}
}

func TestParseCatalogueRejects(t *testing.T) {
	const good = `
  - name: vllm:a
    type: gauge
    unit: x
    labels: [model_name]
    kind: routing
    engines: [v1]
    added: v0.9.2
`
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "version: 1\nprefix: \"vllm:\"\nmetrics:" + good + "    colour: red\n", "field colour not found"},
		{"wrong version", "version: 2\nmetrics:" + good, "version is 2; this build reads version 1 only"},
		{"duplicate", "version: 1\nprefix: \"vllm:\"\nmetrics:" + good + good, `metrics[1] "vllm:a": duplicate name, first defined at metrics[0]`},
		{"bad type", "version: 1\nprefix: \"vllm:\"\nmetrics:" + strings.Replace(good, "type: gauge", "type: gauge_histogram", 1), `type "gauge_histogram" is invalid`},
		{"bad kind", "version: 1\nprefix: \"vllm:\"\nmetrics:" + strings.Replace(good, "kind: routing", "kind: routeing", 1), `kind "routeing" is invalid`},
		{"counter without _total", "version: 1\nprefix: \"vllm:\"\nmetrics:" + strings.Replace(strings.Replace(good, "type: gauge", "type: counter", 1), "kind: routing", "kind: diagnostic", 1), "ends in _total"},
		{"missing replacement", "version: 1\nprefix: \"vllm:\"\nmetrics:" + good + "    deprecated: v0.9.3\n    replacement: vllm:b\n", `replacement "vllm:b" is not in the catalogue`},
		{"cycle", "version: 1\nprefix: \"vllm:\"\nmetrics:" +
			strings.Replace(good, "added: v0.9.2", "added: v0.9.2\n    deprecated: v1.0.0\n    replacement: vllm:b", 1) +
			strings.Replace(strings.Replace(good, "vllm:a", "vllm:b", 1), "added: v0.9.2", "added: v0.9.2\n    deprecated: v1.0.0\n    replacement: vllm:a", 1),
			"rename cycle vllm:a -> vllm:b -> vllm:a"},
		{"type change on rename", "version: 1\nprefix: \"vllm:\"\nmetrics:" +
			strings.Replace(good, "added: v0.9.2", "added: v0.9.2\n    removed: v1.0.0\n    replacement: vllm:b", 1) +
			strings.Replace(strings.Replace(strings.Replace(good, "vllm:a", "vllm:b", 1), "type: gauge", "type: histogram", 1), "kind: routing", "kind: diagnostic", 1),
			`replacement "vllm:b" is a histogram, not a gauge`},
		{"split target missing", "version: 1\nprefix: \"vllm:\"\nmetrics:" + good + "    deprecated: v1.0.0\n    split:\n      label: t\n      into: {x: vllm:zz}\n", `replacement "vllm:zz" is not in the catalogue`},
		{"not vllm", "version: 1\nprefix: \"vllm:\"\nmetrics:" + strings.Replace(good, "vllm:a", "sglang:a", 1), "starting with vllm:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCatalogue([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted; want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	// The fragment itself is valid, so the cases above fail for their own reason.
	if _, err := parseCatalogue([]byte("version: 1\nprefix: \"vllm:\"\nmetrics:" + good)); err != nil {
		t.Fatalf("base catalogue rejected: %v", err)
	}
}
