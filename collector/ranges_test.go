package collector

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

// hostileRanks is a constructed vLLM V1 page of four data-parallel engines
// (families and labels as vLLM v0.11's, e.g. testdata/fixtures/34-*; the
// kv_cache_size_tokens label as in fixture 20) whose per-engine running
// counts, KV usages and KV sizes the test chooses: values no server prints
// when healthy, as a broken or hostile upstream might.
type hostileRanks struct {
	running, kv, sizeTokens [4]string
}

func (h hostileRanks) page() string {
	var b strings.Builder
	b.WriteString("# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\n")
	for e, v := range h.running {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"%d\",model_name=\"m\"} %s\n", e, v)
	}
	b.WriteString("# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\n")
	for e := range 4 {
		fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"%d\",model_name=\"m\"} 0\n", e)
	}
	b.WriteString("# HELP vllm:kv_cache_usage_perc KV-Cache usage. 1 means 100 percent usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n")
	for e, v := range h.kv {
		fmt.Fprintf(&b, "vllm:kv_cache_usage_perc{engine=\"%d\",model_name=\"m\"} %s\n", e, v)
	}
	b.WriteString("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n")
	for e, v := range h.sizeTokens {
		fmt.Fprintf(&b, "vllm:cache_config_info{block_size=\"16\",engine=\"%d\",kv_cache_size_tokens=\"%s\",num_gpu_blocks=\"1000\"} 1.0\n", e, v)
	}
	return b.String()
}

// Ranges each derived gauge documents (docs/derived.md) for four engines.
var derivedRanges = map[string][2]float64{
	"vllm_derived_engine_imbalance_ratio": {1, 4},
	"vllm_derived_kv_cache_usage_spread":  {0, 1},
	"vllm_derived_kv_cache_free_tokens":   {0, 4 * 16000},
	"vllm_derived_requests_in_flight":     {0, math.MaxFloat64},
}

// TestHostileRankValues: a rank value outside its role's range (a negative
// count, a usage outside 0..1, an infinite or absurd size) is read as NaN
// is by every collapse over engines: left out of maxima, a sum or mean
// with it withdrawn for its model, counted; every derived gauge stays in
// its documented range. The server's own series keep its values.
func TestHostileRankValues(t *testing.T) {
	ok := hostileRanks{running: [4]string{"3", "2", "0", "1"}, kv: [4]string{"0.5", "0.5", "0.5", "0.5"}, sizeTokens: [4]string{"16000", "16000", "16000", "16000"}}
	for _, c := range []struct {
		name    string
		edit    func(*hostileRanks)
		family  string   // out-of-range family counted
		without []string // routing series that must be withdrawn
	}{
		{"negative running on an idle rank", func(h *hostileRanks) { h.running[2] = "-5" }, "vllm:num_requests_running", []string{"vllm:num_requests_running"}},
		{"running that cancels out", func(h *hostileRanks) { h.running = [4]string{"6", "-6", "0", "0"} }, "vllm:num_requests_running", []string{"vllm:num_requests_running"}},
		{"infinite running", func(h *hostileRanks) { h.running[1] = "+Inf" }, "vllm:num_requests_running", []string{"vllm:num_requests_running"}},
		{"absurd running", func(h *hostileRanks) { h.running[1] = "1e308" }, "vllm:num_requests_running", []string{"vllm:num_requests_running"}},
		{"negative KV usage", func(h *hostileRanks) { h.kv[3] = "-0.5" }, "vllm:kv_cache_usage_perc", []string{"vllm:kv_cache_usage_perc"}},
		{"KV usage past 1", func(h *hostileRanks) { h.kv[0] = "1.5" }, "vllm:kv_cache_usage_perc", []string{"vllm:kv_cache_usage_perc"}},
		{"absurd KV size", func(h *hostileRanks) { h.sizeTokens[1] = "1e30" }, "vllm_normalizer_kv_cache_capacity_tokens", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := ok
			c.edit(&h)
			page := h.page()
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain; version=0.0.4")
				_, _ = w.Write([]byte(page))
			}))
			defer up.Close()
			clock := newFakeClock()
			col := newTestCollector(t, up.URL, clock, nil)
			for i := range 3 {
				if i > 0 {
					clock.Advance(time.Second)
				}
				col.ScrapeOnce(context.Background())
			}
			full := get(t, col.MetricsHandler(), "/metrics", nil).Body.Bytes()
			compat := get(t, col.CompatHandler(), "/metrics", nil).Body.Bytes()
			counted, own := 0.0, map[string]float64{}
			pagetest.EachSeries(t, full, "text/plain", func(l labels.Labels, v float64) {
				switch l.Get("__name__") {
				case "vllm_normalizer_out_of_range_samples_total":
					if l.Get("family") == c.family {
						counted = v
					}
				case "vllm:num_requests_running":
					own[l.Get("engine")] = v
				case "vllm_derived_kv_cache_free_tokens":
					if c.family == "vllm_normalizer_kv_cache_capacity_tokens" && (l.Get("engine") == "1" || l.Get("engine") == "") {
						t.Errorf("%s = %v: free tokens from an absurd KV size", l, v)
					}
				}
			})
			if counted < 1 {
				t.Errorf("out-of-range samples of %s counted %v, want at least 1", c.family, counted)
			}
			// The server's own series are served as printed.
			for e, v := range h.running {
				want, _ := strconv.ParseFloat(v, 64)
				if got, ok := own[strconv.Itoa(e)]; !ok || got != want {
					t.Errorf("the full page serves engine %d's own running as %v, want %v as printed", e, got, want)
				}
			}
			for _, body := range [][]byte{full, compat} {
				pagetest.EachSeries(t, body, "text/plain", func(l labels.Labels, v float64) {
					name := l.Get("__name__")
					if r, ok := derivedRanges[name]; ok && !(v >= r[0] && v <= r[1]) {
						t.Errorf("%s = %v, outside its documented range %v", l, v, r)
					}
					if l.Has("engine") {
						return // the server's own series, as printed
					}
					if name == "vllm:kv_cache_usage_perc" && !(v >= 0 && v <= 1) || name == "vllm:num_requests_running" && !(v >= 0) {
						t.Errorf("%s = %v served", l, v)
					}
					if slices.Contains(c.without, name) {
						t.Errorf("%s = %v served; a collapse with an out-of-range rank is withdrawn", l, v)
					}
				})
			}
		})
	}
}

// TestNegativeCounterReadAsAbsent: a counter printed below zero (no
// client library lets a counter fall under 0: a corrupted page) is read as
// a NaN is, absent, and counted: before, it read as a reset, and the
// return to the counter's course as an increase of all it had counted, a
// windowed rate 3x the truth for a window. The server's series is served
// as printed.
func TestNegativeCounterReadAsAbsent(t *testing.T) {
	var value atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} %s\n", value.Load().(string))
	}))
	defer up.Close()
	clock := newFakeClock()
	col := newTestCollector(t, up.URL, clock, nil)
	var rate, counted, served float64
	read := func() {
		rate, counted, served = math.NaN(), 0, math.NaN()
		pagetest.EachSeries(t, get(t, col.MetricsHandler(), "/metrics", nil).Body.Bytes(), "text/plain", func(l labels.Labels, v float64) {
			switch l.Get("__name__") {
			case "vllm_derived_prompt_tokens_per_second":
				if l.Get("window") == "1m" && l.Get("engine") == "0" {
					rate = v
				}
			case "vllm_normalizer_out_of_range_samples_total":
				if l.Get("family") == "vllm:prompt_tokens_total" {
					counted = v
				}
			case "vllm:prompt_tokens_total":
				served = v
			}
		})
	}
	for i := range 40 {
		if i > 0 {
			clock.Advance(time.Second)
		}
		v := strconv.Itoa(100000 + 1000*i) // 1000 tokens a second
		if i >= 20 && i < 23 {
			v = "-5"
		}
		value.Store(v)
		col.ScrapeOnce(context.Background())
		read()
		if i >= 20 && i < 23 && served != -5 {
			t.Errorf("scrape %d: the server's counter served as %v, want -5 as printed", i, served)
		}
		if i >= 2 && math.Abs(rate-1000) > 1 {
			t.Errorf("scrape %d: prompt tokens per second %v, want 1000", i, rate)
		}
	}
	if counted != 3 {
		t.Errorf("out-of-range samples of vllm:prompt_tokens_total counted %v, want 3", counted)
	}
}
