package collector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// A llama.cpp page names no model: the routing series get the model the
// upstream's /v1/models lists, or --upstream.model-name's, and
// vllm_normalizer_upstream_info says which. Before, they had no model_name
// and AIBrix, which keys by it, read nothing.
func TestLlamaCppModelName(t *testing.T) {
	page, err := os.ReadFile("../testdata/fixtures/08-llamacpp-2026-server-cuda-LFM2.5-opencode-session.prom")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"LFM2.5-1.2B","object":"model"}]}`))
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(page)
	}))
	t.Cleanup(up.Close)
	for _, tc := range []struct{ flag, model, source string }{
		{"", "LFM2.5-1.2B", "/v1/models"},
		{"lfm", "lfm", "flag"},
	} {
		c := newTestCollector(t, up.URL+"/metrics", newFakeClock(), func(cfg *Config) { cfg.ModelName = tc.flag })
		c.ScrapeOnce(context.Background())
		routing := samplesOf(t, get(t, c.RoutingHandler(), "/metrics/routing", nil).Body.Bytes())
		k := `{__name__="vllm:num_requests_running", model_name="` + tc.model + `", role="both"}`
		if _, ok := routing[k]; !ok {
			t.Errorf("flag %q: no %s on the routing view: %v", tc.flag, k, routing)
		}
		full := get(t, c.MetricsHandler(), "/metrics", nil).Body.String()
		if !strings.Contains(full, `model_name="`+tc.model+`",model_source="`+tc.source+`"`) {
			t.Errorf("flag %q: upstream_info does not say model %s from %s", tc.flag, tc.model, tc.source)
		}
	}
}
