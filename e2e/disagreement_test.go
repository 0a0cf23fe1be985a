package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// kvOffloadPage is testdata/constructed/vllm-0.26-kv-offload.prom with the
// load gauges that make the page a vLLM one.
func kvOffloadPage(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "testdata", "constructed", "vllm-0.26-kv-offload.prom"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0
`), b...)
}

// TestNoDisagreementWithDeclaredEmptyFamilies: the binary, scraping a vLLM
// 0.26 KV-offload page for several scrapes, counts no rename disagreement
// (the old code counted 6 a scrape) and serves the twin's series under the
// current names.
func TestNoDisagreementWithDeclaredEmptyFamilies(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): scrapes for seconds")
	}
	t.Parallel()
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static(kvOffloadPage(t)))
	// A second between scrapes: a busy machine must not time them out.
	p := testbin.Start(t, "--vllm.scrape-uri=http://"+ln.Addr().String()+"/metrics", "--vllm.scrape-interval=1s")
	var s series
	waitFor(t, settle, "three successful scrapes", func() bool {
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
