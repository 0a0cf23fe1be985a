package harness

import (
	"bytes"
	"net/http"
	"slices"
	"testing"
	"time"
)

// The truth of real fixtures, against values read off the files by hand.
func TestComputeTruthFixtures(t *testing.T) {
	tr, err := ComputeTruth(Fixture(t, "12")) // V0 0.5
	if err != nil {
		t.Fatal(err)
	}
	// vllm:num_requests_running{...Llama-3.1-8B-Instruct-FP8} 3.0, waiting 2.0
	// (the other/OTHER line belongs to another model), gpu_cache_usage_perc
	// 0.0026235242675994863, cache_config_info block_size 16, 4574 blocks.
	want := Truth{Model: "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", Running: 3, Waiting: 2, HasRunning: true, HasWaiting: true,
		KV: 0.0026235242675994863, HasKV: true, CPUCache: 0, HasCPUCache: true, BlockSize: 16, NumGPUBlocks: 4574, HasCacheInfo: true, Engines: 1}
	if !equalTruth(tr, want) {
		t.Errorf("fixture 12:\n got %+v\nwant %+v", tr, want)
	}

	tr, err = ComputeTruth(Fixture(t, "01")) // V0 0.7, with LoRA info
	if err != nil {
		t.Fatal(err)
	}
	if !tr.HasLoRA || tr.MaxLoRA != 0 || len(tr.LoRARunning) != 0 || tr.NumGPUBlocks != 81767 || tr.KV != 0 {
		t.Errorf("fixture 01: %+v", tr)
	}
}

// A two-engine page: sums and the block-weighted KV mean, by hand.
func TestComputeTruthDataParallel(t *testing.T) {
	page := []byte(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:num_requests_running{engine="1",model_name="m"} 4
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1
vllm:num_requests_waiting{engine="1",model_name="m"} 5
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="1"} 0.5
vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="2"} 0
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000",pid="1"} 1
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000",pid="2"} 1
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="3000"} 1
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="b,a",waiting_lora_adapters=""} 20
vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 10
`)
	tr, err := ComputeTruth(page)
	if err != nil {
		t.Fatal(err)
	}
	// (0.5*1000 + 0.25*3000) / 4000
	if tr.Running != 7 || tr.Waiting != 6 || tr.KV != 0.3125 || tr.NumGPUBlocks != 4000 || tr.Engines != 2 ||
		!slices.Equal(tr.LoRARunning, []string{"a", "b"}) || tr.MaxLoRA != 2 {
		t.Errorf("got %+v", tr)
	}
	later, err := AddToCounter([]byte("# TYPE c counter\nc{engine=\"1\",model_name=\"m\"} 40\nc{engine=\"0\",model_name=\"m\"} 1\n"), "c", "1", 2.5)
	if err != nil || string(later) != "# TYPE c counter\nc{engine=\"1\",model_name=\"m\"} 42.5\nc{engine=\"0\",model_name=\"m\"} 1\n" {
		t.Errorf("AddToCounter: %v\n%s", err, later)
	}
}

func equalTruth(a, b Truth) bool {
	return a.Model == b.Model && a.Running == b.Running && a.Waiting == b.Waiting && a.HasRunning == b.HasRunning &&
		a.HasWaiting == b.HasWaiting && a.KV == b.KV && a.HasKV == b.HasKV && a.CPUCache == b.CPUCache &&
		a.HasCPUCache == b.HasCPUCache && a.BlockSize == b.BlockSize && a.NumGPUBlocks == b.NumGPUBlocks &&
		a.HasCacheInfo == b.HasCacheInfo && a.Engines == b.Engines && a.HasLoRA == b.HasLoRA
}

// TestRouterFacing503FromFirstFailure runs the binary with every
// router-facing page on: once vLLM fails one scrape, each of them answers
// 503 before a second scrape could have failed, while /metrics keeps
// answering 200 with vllm_up 0; all come back with the next good scrape.
func TestRouterFacing503FromFirstFailure(t *testing.T) {
	up := NewUpstream(t, Fixture(t, "13"))
	side := StartSidecar(t, up)
	pages := []string{side.URL + "/metrics/routing", side.RoutingURL + "/metrics", side.ProxyURL + "/metrics"}
	for _, u := range pages {
		if code, b, err := Status(u); code != http.StatusOK {
			t.Fatalf("%s before the failure: %d %v %s", u, code, err, b)
		}
	}
	up.Fail(true)
	failedAt := time.Now()
	// Wait for the sidecar's first failed scrape: /metrics says vllm_up 0.
	side.WaitFor(t, "/metrics", func(b []byte) bool { return bytes.Contains(b, []byte("\nvllm_up 0\n")) })
	for _, u := range pages {
		code, b, err := Status(u)
		if code != http.StatusServiceUnavailable || !bytes.Contains(b, []byte("last scrape of vLLM failed")) {
			t.Errorf("%s after the first failed scrape (%s after the failure began): %d %v %q, want 503 naming the failure", u, time.Since(failedAt).Round(time.Millisecond), code, err, b)
		}
	}
	up.Fail(false)
	side.WaitFor(t, "/metrics", func(b []byte) bool { return bytes.Contains(b, []byte("\nvllm_up 1\n")) })
	for _, u := range pages {
		if code, b, err := Status(u); code != http.StatusOK {
			t.Errorf("%s after recovery: %d %v %s", u, code, err, b)
		}
	}
}

// The sidecar refuses two listener flags on one address, and CI once drew
// the same just-closed port for two of them (gie-v1.5, composite (03)).
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("FreeAddr returned %s twice", addr)
		}
		seen[addr] = true
	}
}
