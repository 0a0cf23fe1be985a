package e2e

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestSeriesCapOnManyEngines runs the binary on a 64-engine vLLM V1 page
// (2.5 MB, values moving). With the default --history.max-series every
// engine has its derived gauges and vllm_normalizer_history_limited is 0 on
// both pages; with the old default of 5000 (room for 56 engines) the model
// has no derived gauge on either page, never a subset of its engines, and
// vllm_normalizer_history_limited is 1 on both. Before, the cap bit the
// default silently: 192 derived gauges on /metrics, 3 on the routing view.
func TestSeriesCapOnManyEngines(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): scrapes a 64-engine demo for seconds")
	}
	t.Parallel()
	const engines = 64
	up, err := demo.New(demo.Options{Engines: engines, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	// A 2.5 MB page takes a while to read on a busy machine: two seconds.
	args := []string{"--vllm.scrape-uri=" + srv.URL + "/metrics", "--vllm.scrape-interval=2s", "--vllm.timeout=2s", "--derive.window=8s"}
	for _, c := range []struct {
		name    string
		extra   []string
		limited float64
	}{
		{"default", nil, 0},
		{"max-series=5000", []string{"--history.max-series=5000"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// The derived gauges are on the compatibility page (the routing
			// listener's /metrics), not on the endpoint pickers' /metrics/routing.
			routingAddr := testbin.FreeAddr(t)
			p := testbin.Start(t, append(slices.Clip(args), append(c.extra, "--web.routing-listen-address="+routingAddr)...)...)
			waitFor(t, settle, "a first scrape", func() bool {
				page, _ := metrics(t, p)
				// A model beyond the cap is left out whole: no series kept.
				return page["vllm_up"] == 1 && (page["vllm_normalizer_history_series"] > 0 || page["vllm_normalizer_history_limited"] == 1)
			})
			time.Sleep(5 * time.Second) // two more scrapes: rates in the window
			page, _ := metrics(t, p)
			routing := mustParse(t, mustGet(t, "http://"+routingAddr+"/metrics").body)
			// Per engine, its windowed derived gauges.
			perEngine := map[string]int{}
			for k := range page.with("vllm_derived_") {
				if i := strings.Index(k, `engine="`); i >= 0 && strings.Contains(k, `window="8s"`) {
					perEngine[k[i+8:i+8+strings.IndexByte(k[i+8:], '"')]]++
				}
			}
			derivedRouting := len(routing.with("vllm_derived_"))
			for name, s := range map[string]series{"/metrics": page, "routing listener /metrics": routing} {
				if got, ok := s["vllm_normalizer_history_limited"]; !ok || got != c.limited {
					t.Errorf("%s: vllm_normalizer_history_limited = %v (present %v), want %v", name, got, ok, c.limited)
				}
			}
			if c.limited == 1 {
				if len(page.with("vllm_derived_")) != 0 || derivedRouting != 0 {
					t.Errorf("the cap bit, yet /metrics has %d derived gauges and the routing view %d", len(page.with("vllm_derived_")), derivedRouting)
				}
				return
			}
			if len(perEngine) != engines {
				t.Errorf("windowed derived gauges on %d engines, want %d", len(perEngine), engines)
			}
			if page["vllm_normalizer_history_unwindowed_samples_total"] != 0 {
				t.Errorf("%v samples unwindowed with the defaults", page["vllm_normalizer_history_unwindowed_samples_total"])
			}
			if derivedRouting < 20 {
				t.Errorf("the routing view has %d derived gauges, want every one", derivedRouting)
			}
		})
	}
}
