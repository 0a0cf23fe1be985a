// Package manymodels writes the constructed page of many models the memory
// tests and benchmarks read: the worst case of what the sidecar keeps per
// model.
package manymodels

import (
	"fmt"
	"strconv"
	"strings"
)

// family is one family of a constructed page.
type family struct{ name, typ, extra string }

var (
	gauges = []family{
		{"vllm:num_requests_running", "gauge", ""},
		{"vllm:num_requests_waiting", "gauge", ""},
		{"vllm:kv_cache_usage_perc", "gauge", ""},
	}
	counters = []family{
		{"vllm:request_success_total", "counter", `,finished_reason="stop"`},
		{"vllm:generation_tokens_total", "counter", ""},
	}
)

// Page is a constructed vLLM V1 page (family names and labels as
// vLLM v0.11 prints them, testdata/fixtures/13-*) of n models on one
// engine, the first named org/m-<from>, five series each, about 350 bytes
// a model: the most models a page within the default limits names with
// the gauges and counters a diagnosis reads (9,000 models: 3.2 MB, 45,000
// samples). v moves the counters.
func Page(from, n, v int) []byte {
	return page(from, n, v, false, append(append([]family(nil), gauges...), counters...))
}

// Busy is Page with every series moving every scrape: the gauges change
// with v and the counters grow by uneven steps, so that no value is what
// the one before predicts (Page's gauges hold and its counters grow
// steadily, which the diagnosis' rings store in a byte a point).
func Busy(from, n, v int) []byte {
	return page(from, n, v, true, append(append([]family(nil), gauges...), counters...))
}

// Gauge is a page of n models that print the KV cache usage alone, moving
// with v, about 66 bytes a model: the most models a page within the
// default limits names (50,000: the sample limit, 3.3 MB), none with a
// history series, each with a diagnosis of its gauge.
func Gauge(from, n, v int) []byte { return page(from, n, v, true, gauges[2:]) }

// page writes fams for n models; move: the gauges change with v (else 1)
// and the counters grow unevenly (else steadily).
func page(from, n, v int, move bool, fams []family) []byte {
	var b strings.Builder
	b.Grow(n * 72 * len(fams))
	for _, f := range fams {
		fmt.Fprintf(&b, "# TYPE %s %s\n", f.name, f.typ)
		for i := from; i < from+n; i++ {
			val := 1.0
			switch {
			case f.typ == "counter" && move:
				val = float64(v*(i%5+1) + v*v/3) // growing steps, uneven by the rounding
			case f.typ == "counter":
				val = float64(v * (i%5 + 1))
			case move && f.name == "vllm:kv_cache_usage_perc":
				val = float64((v+i)%8) / 8 // a share, within 0-1
			case move:
				val = float64((v + i) % 8)
			}
			fmt.Fprintf(&b, "%s{engine=\"0\"%s,model_name=\"org/m-%05d\"} %s\n", f.name, f.extra, i, strconv.FormatFloat(val, 'f', -1, 64))
		}
	}
	return []byte(b.String())
}
