package collector

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/scripts/topologypages/scenario"
)

// scenarioUpstream serves pod's page at start plus the seconds the clock
// moved since the test began: counters grow at their scenario rates.
func scenarioUpstream(t *testing.T, pod scenario.Pod, clock *fakeClock) *httptest.Server {
	t.Helper()
	t0 := clock.Now()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(scenario.Page(pod, scenario.Times[0]+clock.Now().Sub(t0).Seconds())))
	}))
	t.Cleanup(s.Close)
	return s
}

// scrapeScenario runs n scrapes one second apart of pod with the given pod
// role and returns the collector.
func scrapeScenario(t *testing.T, pod scenario.Pod, role string, n int) *Collector {
	t.Helper()
	clock := newFakeClock()
	up := scenarioUpstream(t, pod, clock)
	c := newTestCollector(t, up.URL, clock, func(cfg *Config) { cfg.Role = role })
	for i := range n {
		if i > 0 {
			clock.Advance(time.Second)
		}
		c.ScrapeOnce(context.Background())
	}
	return c
}

// /metrics/routing/engines/{engine} is the routing view of that engine
// alone: the queueing rank of the data-parallel page shows its own load,
// which the whole server's view sums away. It is as small as the routing
// view (what endpoint pickers read, not the compatibility page: 35-47 KB
// before), with the engine's cache information.
func TestEngineRoutingPage(t *testing.T) {
	pod := scenario.DataParallel
	c := scrapeScenario(t, pod, "", 3)
	mux := http.NewServeMux()
	mux.Handle("/metrics/routing/engines/{engine}", c.EngineRoutingHandler())
	for i, e := range pod.Engines {
		rec := get(t, mux, fmt.Sprintf("/metrics/routing/engines/%d", i), nil)
		if rec.Code != 200 {
			t.Fatalf("engine %d: %d %s", i, rec.Code, rec.Body)
		}
		checkValidPage(t, rec.Body.Bytes())
		got := samplesOf(t, rec.Body.Bytes())
		sel := fmt.Sprintf(`{model_name=%q, role="both"}`, pod.Model)
		for name, want := range map[string]float64{
			"vllm:num_requests_running": e.Running,
			"vllm:num_requests_waiting": e.Waiting(),
			"vllm:kv_cache_usage_perc":  e.KVUsage,
		} {
			k := `{__name__="` + name + `", ` + strings.TrimPrefix(sel, "{")
			if v, ok := got[k]; !ok || v != want {
				t.Errorf("engine %d: %s = %v (present %v), want %v\n%s", i, k, v, ok, want, rec.Body)
			}
		}
		if strings.Contains(rec.Body.String(), `engine="`) {
			t.Errorf("engine %d: the page names engines:\n%s", i, rec.Body)
		}
		if n := rec.Body.Len(); n > 4096 {
			t.Errorf("engine %d: the page is %d bytes, more than the routing view's 4 KB:\n%s", i, n, rec.Body)
		}
		if !strings.Contains(rec.Body.String(), "vllm:cache_config_info{") || strings.Contains(rec.Body.String(), "vllm_derived_") {
			t.Errorf("engine %d: want the engine's cache information and no derived gauges:\n%s", i, rec.Body)
		}
	}
	rec := get(t, mux, "/metrics/routing/engines/7", nil)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"0", "1", "2", "3" (4 engines)`) {
		t.Errorf("an engine the page lacks: %d %q, want 404 naming engines 0, 1, 2, 3", rec.Code, rec.Body)
	}
}

// Before any scrape the engine page refuses as the routing view does.
func TestEngineRoutingPageBeforeScrape(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); w.WriteHeader(500) }))
	t.Cleanup(up.Close)
	c := newTestCollector(t, up.URL, newFakeClock(), nil)
	mux := http.NewServeMux()
	mux.Handle("/metrics/routing/engines/{engine}", c.EngineRoutingHandler())
	if rec := get(t, mux, "/metrics/routing/engines/0", nil); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("before a scrape: %d, want 503", rec.Code)
	}
}

// --upstream.role labels derived and routing series and the upstream info
// with its value, whichever llm-d role it is; a value llm-d does not define
// is served with a warning, a malformed one as both: a role never stops the
// sidecar.
func TestUpstreamRoleLabel(t *testing.T) {
	for _, role := range []string{"prefill", "decode", "encode", "prefill-decode", "encode-prefill", "encode-prefill-decode", "both", "Prefill"} {
		c := scrapeScenario(t, scenario.PrefillDecode[0], role, 3)
		page := get(t, c.MetricsHandler(), "/metrics", nil).Body.String()
		routing := get(t, c.RoutingHandler(), "/metrics/routing", nil).Body.String()
		label := fmt.Sprintf("role=%q", role)
		for l := range strings.SplitSeq(page, "\n") {
			if strings.HasPrefix(l, "vllm_derived_") && !strings.Contains(l, label) {
				t.Errorf("%s: derived series without %s: %s", role, label, l)
			}
			if strings.HasPrefix(l, "vllm_normalizer_upstream_info{") && !strings.Contains(l, label) {
				t.Errorf("%s: upstream info without the role: %s", role, l)
			}
			if strings.HasPrefix(l, "vllm:num_requests_running{") && strings.Contains(l, "role=") {
				t.Errorf("%s: the upstream's own series got a role label: %s", role, l)
			}
		}
		// The compatibility page too, its routing derived gauges and
		// summed families included; not the sidecar's own series nor the
		// diagnosis' (which describe the sidecar's reading, not the pod).
		compat := get(t, c.CompatHandler(), "/metrics", nil).Body.String()
		derived := 0
		for l := range strings.SplitSeq(routing+compat, "\n") {
			if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "vllm_up") || strings.HasPrefix(l, "vllm_normalizer_") || strings.HasPrefix(l, "vllm_diagnosis_") {
				continue
			}
			if strings.HasPrefix(l, "vllm_derived_") {
				derived++
			}
			if !strings.Contains(l, label) {
				t.Errorf("%s: routing or compatibility series without %s: %s", role, label, l)
			}
		}
		if derived == 0 {
			t.Errorf("%s: no derived gauge on the compatibility page", role)
		}
	}
	for _, c := range []struct{ role, served string }{{"Prefill", "Prefill"}, {"pre fill", "both"}} {
		var logs bytes.Buffer
		col, err := New(Config{ScrapeURI: "http://127.0.0.1:1/metrics", Interval: time.Second, MaxBodyBytes: 1, Windows: []time.Duration{time.Minute},
			Mapper: testMapper(t, mapping.Options{}), Role: c.role, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("role %q refused: %v; a role never stops the sidecar", c.role, err)
		}
		if col.cfg.Role != c.served || !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "prefill-decode") {
			t.Errorf("role %q: served as %q, logs %q; want %q and a warning naming llm-d's values", c.role, col.cfg.Role, logs.String(), c.served)
		}
	}
}

// A TokenSpeed page (its data-parallel rank in dp_rank): the engine's
// page carries the names llm-d reads of TokenSpeed beside vLLM's, with the
// values the page prints.
func TestEngineRoutingPageNativeNames(t *testing.T) {
	clock := newFakeClock()
	up := serveFile(t, "../testdata/fixtures/36-tokenspeed-constructed-from-source.prom")
	c := newTestCollector(t, up.URL+"/metrics", clock, nil)
	c.ScrapeOnce(context.Background())
	mux := http.NewServeMux()
	mux.Handle("/metrics/routing/engines/{engine}", c.EngineRoutingHandler())
	rec := get(t, mux, "/metrics/routing/engines/0", nil)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	got := samplesOf(t, rec.Body.Bytes())
	for name, want := range map[string]float64{
		"tokenspeed:num_requests_running": 2, "tokenspeed:num_requests_waiting": 5, "tokenspeed:kv_cache_usage_perc": 0.375,
		"vllm:num_requests_running": 2, "vllm:kv_cache_usage_perc": 0.375,
	} {
		k := `{__name__="` + name + `", model_name="Qwen/Qwen3-8B", role="both"}`
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v\n%s", k, v, ok, want, rec.Body)
		}
	}
}
