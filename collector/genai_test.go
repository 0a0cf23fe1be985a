package collector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/genai"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// TestGenAIGolden: the GenAI view of real pages of vLLM V1 and V0, SGLang
// and TensorRT-LLM, against testdata/golden/genai-<fixture>.metrics
// (rewrite with -update); genai's own tests check the counts against the
// pages' text.
func TestGenAIGolden(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		opts    genai.Options
	}{
		{"13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context", genai.Options{}},
		{"12-vllm-0.5.x-V0-kubeai-hack-vllm-mock-metrics", genai.Options{}},
		{"26-dynamo-worker+sglang-2026-01-complete-dynamo-docs-metrics-examples-sglang", genai.Options{}},
		{"25-dynamo-worker+trtllm-2026-01-complete-dynamo-docs-metrics-examples-trtllm", genai.Options{
			Provider: "tensorrt-llm", Operation: "text_completion", ServerAddress: "qwen.llm.svc:8000", NameStyle: genai.Unsuffixed}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			up := serveFile(t, filepath.Join("..", "testdata", "fixtures", tc.fixture+".prom"))
			c := newTestCollector(t, up.URL+"/metrics", newFakeClock(), func(cfg *Config) { cfg.GenAI = tc.opts })
			c.ScrapeOnce(context.Background())
			body := get(t, c.GenAIHandler(), "/metrics/genai", nil).Body.Bytes()
			checkValidPage(t, body)
			compareGolden(t, filepath.Join("..", "testdata", "golden", "genai-"+tc.fixture+".metrics"), body)
		})
	}
}

// TestGenAIWithdrawnOnFailure: after a failed scrape the view holds no
// histogram, rather than the last one served as if fresh.
func TestGenAIWithdrawnOnFailure(t *testing.T) {
	var fail atomic.Bool
	body, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(up.Close)
	c := newTestCollector(t, up.URL, newFakeClock(), nil)
	c.ScrapeOnce(context.Background())
	if got := get(t, c.GenAIHandler(), "/metrics/genai", nil).Body.String(); !strings.Contains(got, "gen_ai_server_time_to_first_token_seconds_count") {
		t.Fatalf("no view after a good scrape:\n%s", got)
	}
	fail.Store(true)
	c.ScrapeOnce(context.Background())
	if got := get(t, c.GenAIHandler(), "/metrics/genai", nil).Body.String(); strings.Contains(got, "gen_ai_") {
		t.Errorf("the view is still served after a failed scrape:\n%s", got)
	}
}

func TestNewRejectsBadGenAI(t *testing.T) {
	_, err := New(Config{ScrapeURI: "http://127.0.0.1:1/metrics", Interval: time.Second, MaxBodyBytes: 1 << 20, Windows: []time.Duration{time.Minute},
		Mapper: testMapper(t, mapping.Options{}), GenAI: genai.Options{ServerAddress: "no-port"}})
	if err == nil || !strings.Contains(err.Error(), "must be host:port") {
		t.Errorf("error %v, want the GenAI view's address rule", err)
	}
}
