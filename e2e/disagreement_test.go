package e2e

import (
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// kvOffloadPage is a vLLM 0.26 page with KV offloading (CPU spec): the
// transfer_type families with samples, the load_*/store_* ones that replace
// them declared without any.
const kvOffloadPage = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0
# HELP vllm:kv_offload_total_bytes_total Number of bytes offloaded by KV connector
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

// TestNoDisagreementWithDeclaredEmptyFamilies: the binary, scraping a vLLM
// 0.26 KV-offload page for several scrapes, counts no rename disagreement
// (the old code counted 6 a scrape) and serves the twin's series under the
// current names.
func TestNoDisagreementWithDeclaredEmptyFamilies(t *testing.T) {
	t.Parallel()
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static([]byte(kvOffloadPage)))
	// A second between scrapes: a busy machine must not time them out.
	p := testbin.Start(t, "--vllm.scrape-uri=http://"+ln.Addr().String()+"/metrics", "--vllm.scrape-interval=1s")
	var s series
	waitFor(t, 20*time.Second, "three successful scrapes", func() bool {
		s, _ = metrics(t, p)
		return s["vllm_up"] == 1 && len(s.with("vllm:kv_offload_load_bytes_total")) > 0
	})
	time.Sleep(3 * time.Second) // three more scrapes
	s, _ = metrics(t, p)
	if d := s.with("vllm_normalizer_rename_disagreements_total"); len(d) != 0 || s["vllm_normalizer_upstream_samples"] == 0 {
		t.Errorf("rename disagreements counted: %v; a family without samples disagrees with nothing", d)
	}
	if v := s[`vllm:kv_offload_load_bytes_total{engine="0",model_name="m"}`]; v != 4.5e8 {
		t.Errorf("vllm:kv_offload_load_bytes_total = %v, want the CPU_to_GPU twin's 4.5e8", v)
	}
}
