package routing

import (
	"strings"
	"testing"
)

// The built-in table loads, and rejects what a router could not read.
func TestReaders(t *testing.T) {
	r, err := LoadReaders()
	if err != nil {
		t.Fatal(err)
	}
	n := r.For("sglang")
	if len(n.Waiting) != 1 || n.Waiting[0] != "sglang:num_queue_reqs" || len(n.CacheInfo) != 1 || len(n.CacheGauges) != 1 {
		t.Errorf("sglang: %+v", n)
	}
	if got := r.Paths(); len(got) != 1 || got[0] != "/prometheus/metrics" {
		t.Errorf("paths %v, want AIBrix's /prometheus/metrics", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"version: 2\n", "version 2"},
		{"version: 1\nconsumers:\n  - consumer: x\n    engines:\n      e: {waiting: w}\n", "has no server"},
		{"version: 1\nconsumers:\n  - consumer: x\n    engines:\n      e: {server: s, cache_block_size: b}\n", "only one of cache_block_size"},
		{"version: 1\nconsumers:\n  - consumer: x\n    engines:\n      e: {server: s, path: metrics}\n", "must start with /"},
		{"version: 1\nconsumers:\n  - consumer: x\n    typo: 1\n", "typo"},
	} {
		if _, err := ParseReaders([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.yaml, err, tc.want)
		}
	}
}

// An SGLang page with two data-parallel ranks and its cache information:
// the endpoint pickers' page carries SGLang's own names with the collapsed
// values, and the cache information in every form the table lists.
func TestViewsSGLangNatives(t *testing.T) {
	const page = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",model_name="q",tp_rank="0"} 7
sglang:num_running_reqs{dp_rank="1",model_name="q",tp_rank="0"} 5
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",model_name="q",tp_rank="0"} 2
sglang:num_queue_reqs{dp_rank="1",model_name="q",tp_rank="0"} 1
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",model_name="q",tp_rank="0"} 0.5
sglang:token_usage{dp_rank="1",model_name="q",tp_rank="0"} 0.25
# TYPE sglang:page_size gauge
sglang:page_size{dp_rank="0",model_name="q",tp_rank="0"} 16
sglang:page_size{dp_rank="1",model_name="q",tp_rank="0"} 16
# TYPE sglang:num_pages gauge
sglang:num_pages{dp_rank="0",model_name="q",tp_rank="0"} 1000
sglang:num_pages{dp_rank="1",model_name="q",tp_rank="0"} 3000
`
	fams := parsePage(t, page)
	p := testProfiles.Detect(fams)
	if p == nil || p.Server != "sglang" {
		t.Fatalf("detected %v", p)
	}
	bs, ok := p.KVBlockSize(fams)
	if !ok || bs != 16 {
		t.Fatalf("block size %d %v, want 16", bs, ok)
	}
	readers, err := LoadReaders()
	if err != nil {
		t.Fatal(err)
	}
	epp, compat := new(Viewer).Views(Input{Canon: p.Canonical(fams, testRoles), Roles: testRoles, Server: p.Server, BlockSize: bs, Readers: readers, Style: func(s string) string { return s }})
	want := map[string]float64{
		`{__name__="vllm:num_requests_running", model_name="q"}`:                      12,
		`{__name__="vllm:num_requests_waiting", model_name="q"}`:                      3,
		`{__name__="vllm:kv_cache_usage_perc", model_name="q"}`:                       0.375,
		`{__name__="vllm:gpu_cache_usage_perc", model_name="q"}`:                      0.375,
		`{__name__="sglang:num_running_reqs", model_name="q"}`:                        12,
		`{__name__="sglang:num_queue_reqs", model_name="q"}`:                          3,
		`{__name__="sglang:token_usage", model_name="q"}`:                             0.375,
		`{__name__="vllm:cache_config_info", block_size="16", num_gpu_blocks="4000"}`: 1,
		`{__name__="sglang:cache_config_info", num_pages="4000", page_size="16"}`:     1,
		`{__name__="sglang:page_size"}`:                                               16,
		`{__name__="sglang:num_pages"}`:                                               4000,
	}
	checkSamples(t, routingSamples(t, epp), want)
	if len(compat) < len(epp) {
		t.Errorf("the compatibility page has %d families, fewer than the endpoint pickers' %d", len(compat), len(epp))
	}
}
