// Package manymodels writes the constructed page of many models the memory
// tests and benchmarks read: the worst case of what the sidecar keeps per
// model.
package manymodels

import (
	"fmt"
	"strings"
)

// Page is a constructed vLLM V1 page (family names and labels as
// vLLM v0.11 prints them, testdata/fixtures/13-*) of n models on one
// engine, the first named org/m-<from>, five series each, about 350 bytes
// a model: the most models a page within the default limits names with
// the gauges and counters a diagnosis reads (9,000 models: 3.2 MB, 45,000
// samples). v moves the counters.
func Page(from, n, v int) []byte {
	var b strings.Builder
	b.Grow(n * 360)
	for _, f := range []struct{ name, typ, extra string }{
		{"vllm:num_requests_running", "gauge", ""},
		{"vllm:num_requests_waiting", "gauge", ""},
		{"vllm:kv_cache_usage_perc", "gauge", ""},
		{"vllm:request_success_total", "counter", `,finished_reason="stop"`},
		{"vllm:generation_tokens_total", "counter", ""},
	} {
		fmt.Fprintf(&b, "# TYPE %s %s\n", f.name, f.typ)
		for i := from; i < from+n; i++ {
			val := 1
			if f.typ == "counter" {
				val = v * (i%5 + 1)
			}
			fmt.Fprintf(&b, "%s{engine=\"0\"%s,model_name=\"org/m-%05d\"} %d\n", f.name, f.extra, i, val)
		}
	}
	return []byte(b.String())
}
