// Package pagetest holds what tests of several packages need to read
// exposition pages: the real fixtures and Prometheus's own view of a page.
package pagetest

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// FixturePaths returns every real page under testdata/fixtures.
func FixturePaths(t testing.TB) []string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	paths, err := filepath.Glob(filepath.Join(filepath.Dir(self), "..", "..", "testdata", "fixtures", "*.prom"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures under testdata/fixtures: %v", err)
	}
	return paths
}

// AddFixtureSeeds adds every real page as a seed of f, once with each
// value of the fuzz target's second (bool) argument.
func AddFixtureSeeds(f *testing.F) {
	for _, p := range FixturePaths(f) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
}

// Samples walks a page with Prometheus's parser alone and returns every
// sample as "series -> value", failing the test on any parse error: the
// reference a faithful re-exposition must reproduce.
func Samples(t testing.TB, body []byte, contentType string) map[string]float64 {
	t.Helper()
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{FallbackContentType: "text/plain"})
	if p == nil {
		t.Fatalf("textparse.New: %v", err)
	}
	out := map[string]float64{}
	var l labels.Labels
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("the page does not parse: %v", err)
		}
		if e == textparse.EntrySeries {
			_, _, v := p.Series()
			p.Labels(&l)
			out[l.String()] = v
		}
	}
}

// KVOffloadPage is how vLLM 0.26 prints KV offloading with the CPU
// offloading spec (constructed from its metric definitions): the
// transfer_type families with their samples, and the load_*/store_*
// families that replace them declared, HELP and TYPE, without a sample.
const KVOffloadPage = `# HELP vllm:kv_offload_total_bytes_total Number of bytes offloaded by KV connector
# TYPE vllm:kv_offload_total_bytes_total counter
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 4.5e+08
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 9e+08
# HELP vllm:kv_offload_total_time_total Total time measured by all KV offloading operations
# TYPE vllm:kv_offload_total_time_total counter
vllm:kv_offload_total_time_total{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 0.75
vllm:kv_offload_total_time_total{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 1.5
# HELP vllm:kv_offload_size Histogram of KV offload transfer size, in bytes.
# TYPE vllm:kv_offload_size histogram
vllm:kv_offload_size_bucket{engine="0",le="1e+08",model_name="m",transfer_type="CPU_to_GPU"} 5
vllm:kv_offload_size_bucket{engine="0",le="+Inf",model_name="m",transfer_type="CPU_to_GPU"} 6
vllm:kv_offload_size_count{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 6
vllm:kv_offload_size_sum{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 4.5e+08
vllm:kv_offload_size_bucket{engine="0",le="1e+08",model_name="m",transfer_type="GPU_to_CPU"} 10
vllm:kv_offload_size_bucket{engine="0",le="+Inf",model_name="m",transfer_type="GPU_to_CPU"} 12
vllm:kv_offload_size_count{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 12
vllm:kv_offload_size_sum{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 9e+08
# HELP vllm:kv_offload_load_bytes_total Number of bytes loaded from the offloading medium
# TYPE vllm:kv_offload_load_bytes_total counter
# HELP vllm:kv_offload_load_time_total Total time of loads
# TYPE vllm:kv_offload_load_time_total counter
# HELP vllm:kv_offload_load_size Histogram of load sizes, in bytes.
# TYPE vllm:kv_offload_load_size histogram
# HELP vllm:kv_offload_store_bytes_total Number of bytes stored to the offloading medium
# TYPE vllm:kv_offload_store_bytes_total counter
# HELP vllm:kv_offload_store_time_total Total time of stores
# TYPE vllm:kv_offload_store_time_total counter
# HELP vllm:kv_offload_store_size Histogram of store sizes, in bytes.
# TYPE vllm:kv_offload_store_size histogram
`
