package prometheus_test

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// truthModel is the model_name of the known-truth upstream.
const truthModel = "truth-model"

// truthEngines are its two data-parallel engines.
var truthEngines = []string{"0", "1"}

// counterSpec is a counter that grows at a fixed rate per engine.
type counterSpec struct {
	name   string // sample name, with _total
	labels string // extra labels, e.g. `finished_reason="stop"`
	rate   [2]float64
}

// histSpec is a histogram whose observations arrive at fixed rates per
// bucket: cum[e][i] is the number of observations per second of engine e
// that are <= les[i] (the last le is +Inf, so cum[e][last] is the count
// rate); sum[e] is the observed total per second.
type histSpec struct {
	name string // family name, without _bucket/_sum/_count
	les  []float64
	cum  [2][]float64
	sum  [2]float64
}

// truthCounters and truthHists are the upstream's series. Every value is a
// linear function of the time counted since the upstream (re)started, so
// any increase over [a, b] is exactly rate*(b-a), every ratio of two
// increases is a ratio of rates, and every bucket increase is proportional
// to cum: the true derived values below do not depend on when anyone
// scrapes.
var truthCounters = []counterSpec{
	{"vllm:num_preemptions_total", "", [2]float64{0.5, 0.25}},
	{"vllm:prompt_tokens_total", "", [2]float64{300, 500}},
	{"vllm:generation_tokens_total", "", [2]float64{150, 100}},
	{"vllm:request_success_total", `finished_reason="stop"`, [2]float64{2, 1}},
	{"vllm:request_success_total", `finished_reason="length"`, [2]float64{1, 0.5}},
	{"vllm:request_success_total", `finished_reason="abort"`, [2]float64{0.5, 0}},
	{"vllm:prefix_cache_queries_total", "", [2]float64{300, 500}},
	{"vllm:prefix_cache_hits_total", "", [2]float64{120, 300}},
	{"vllm:external_prefix_cache_queries_total", "", [2]float64{100, 200}},
	{"vllm:external_prefix_cache_hits_total", "", [2]float64{25, 20}},
	// Prompt tokens by source: 200 and 400 computed a second.
	{"vllm:prompt_tokens_by_source_total", `source="local_compute"`, [2]float64{200, 400}},
	{"vllm:prompt_tokens_by_source_total", `source="local_cache_hit"`, [2]float64{100, 100}},
	// NIXL failures beside the transfers of vllm:nixl_xfer_time_seconds.
	{"vllm:nixl_num_failed_transfers_total", "", [2]float64{0.5, 1}},
	{"vllm:kv_offload_load_bytes_total", "", [2]float64{1e6, 2e6}},
	{"vllm:kv_offload_store_bytes_total", "", [2]float64{3e6, 1e6}},
}

// truthRejections are the requests the model refuses at admission per
// second, by reason: vLLM counts them per model, without engine.
var truthRejections = []struct {
	reason string
	rate   float64
}{{"max_num_queued_reqs", 3}, {"max_num_queued_tokens", 1.5}}

var inf = math.Inf(1)

var truthHists = []histSpec{
	// Engine 0: 3 requests/s queued 0.05, 0.1 and 0.15 s (mean 0.1);
	// engine 1: 1.5 requests/s, half 0.3 s and half 0.5 s (mean 0.4).
	{"vllm:request_queue_time_seconds", []float64{0.05, 0.1, 0.2, 0.5, 1, inf},
		[2][]float64{{1, 2, 3, 3, 3, 3}, {0, 0, 0, 1.5, 1.5, 1.5}}, [2]float64{0.3, 0.6}},
	// Prefill: 0.2, 0.3, 0.4 s (mean 0.3); 0.4 and 0.8 s (mean 0.6).
	{"vllm:request_prefill_time_seconds", []float64{0.05, 0.1, 0.2, 0.5, 1, inf},
		[2][]float64{{0, 0, 1, 3, 3, 3}, {0, 0, 0, 0.75, 1.5, 1.5}}, [2]float64{0.9, 0.9}},
	// Decode: 1, 2, 3 s (mean 2); 3 and 5 s (mean 4).
	{"vllm:request_decode_time_seconds", []float64{1, 2.5, 5, 10, inf},
		[2][]float64{{1, 2, 3, 3, 3}, {0, 0, 1.5, 1.5, 1.5}}, [2]float64{6, 6}},
	// Prompt lengths 50, 100, 150 (mean 100); 200 and 466.67 (mean 333.33).
	{"vllm:request_prompt_tokens", []float64{50, 100, 200, 500, 1000, inf},
		[2][]float64{{1, 2, 3, 3, 3, 3}, {0, 0, 0.75, 1.5, 1.5, 1.5}}, [2]float64{300, 500}},
	// Output lengths 25, 50, 75 (mean 50); 33.33 and 100 (mean 66.67).
	{"vllm:request_generation_tokens", []float64{16, 64, 256, 1024, inf},
		[2][]float64{{0, 2, 3, 3, 3}, {0, 0.75, 1.5, 1.5, 1.5}}, [2]float64{150, 100}},
	// TTFT = queue + prefill per request: means 0.4 and 1.0 s.
	{"vllm:time_to_first_token_seconds", []float64{0.1, 0.25, 0.5, 1, 2.5, inf},
		[2][]float64{{0.3, 1.2, 2.4, 2.85, 3, 3}, {0.05, 0.15, 0.3, 0.9, 1.4, 1.5}}, [2]float64{1.2, 1.5}},
	{"vllm:inter_token_latency_seconds", []float64{0.01, 0.025, 0.05, 0.1, inf},
		[2][]float64{{40, 100, 140, 150, 150}, {0, 10, 60, 92, 100}}, [2]float64{3.75, 5}},
	{"vllm:e2e_request_latency_seconds", []float64{1, 2.5, 5, 10, inf},
		[2][]float64{{0.6, 1.2, 2.4, 3, 3}, {0.15, 0.45, 0.8, 1.2, 1.5}}, [2]float64{7.2, 7.5}},
	// NIXL transfers: 8/s of 0.005, 0.03 (4) and 0.075 s (2), 0.28 s a
	// second; 4/s of 0.03 and 0.075 s (2 each), 0.21 s.
	{"vllm:nixl_xfer_time_seconds", []float64{0.01, 0.05, 0.1, 0.5, inf},
		[2][]float64{{2, 6, 8, 8, 8}, {0, 2, 4, 4, 4}}, [2]float64{0.28, 0.21}},
	// Their bytes: 4 MB and 5 MB each.
	{"vllm:nixl_bytes_transferred", []float64{1e6, 1e8, inf},
		[2][]float64{{0, 8, 8}, {0, 4, 4}}, [2]float64{3.2e7, 2e7}},
	// Mean time per output token of each request (SLO attainment, slo="tpot").
	{"vllm:request_time_per_output_token_seconds", []float64{0.025, 0.05, 0.1, inf},
		[2][]float64{{1, 2, 3, 3}, {0, 0.5, 1, 1.5}}, [2]float64{0.12, 0.15}},
}

// truthKV is each engine's KV-cache usage and size: free tokens are
// (1 - usage) * blocks * blockSize = 12000 and 16000, 28000 for the model.
var truthKV = [2]struct {
	usage             float64
	blocks, blockSize int
}{{0.25, 1000, 16}, {0.5, 2000, 16}}

// idleModel is a second model on the page that never works: running and
// waiting 0 and no counter, so it is idle since the sidecar started.
const idleModel = "idle-model"

// truthUpstream serves the series above. On its resetAt-th request it
// "restarts": every counter starts again from zero at the time of the
// previous request, so the first value after the restart is low (one scrape
// interval's worth) and equals exactly the increase since the last scrape.
// Readers that count a drop as a restart from zero (Prometheus, the sidecar)
// therefore lose nothing, and the known truth holds across the reset.
type truthUpstream struct {
	mu       sync.Mutex
	start    time.Time
	resetAt  int
	requests int
	last     float64 // seconds since start at the previous request
	origin   float64 // seconds since start at which counters were zero
	resetSeq []float64
}

func newTruthUpstream(resetAt int) *truthUpstream {
	return &truthUpstream{start: time.Now(), resetAt: resetAt}
}

// resets returns the upstream times (seconds since start) of the restarts.
func (u *truthUpstream) resets() []float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]float64(nil), u.resetSeq...)
}

func (u *truthUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	u.mu.Lock()
	now := time.Since(u.start).Seconds()
	u.requests++
	if u.requests == u.resetAt {
		u.origin = u.last
		u.resetSeq = append(u.resetSeq, now)
	}
	u.last = now
	elapsed := now - u.origin
	u.mu.Unlock()

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(truthPage(elapsed)))
}

// evaluationTime waits until a little more than a minute after
// firstSample, the first sample Prometheus had: its [1m] ranges must be
// covered by its own samples, else rate() extrapolates only half an
// interval past the first and reads low. It fails the test unless the
// upstream reset exactly once meanwhile, and returns the time to evaluate
// at: lag before now, on a whole second.
func (u *truthUpstream) evaluationTime(t *testing.T, firstSample time.Time, lag time.Duration) time.Time {
	t.Helper()
	if d := time.Until(firstSample.Add(62 * time.Second)); d > 0 {
		t.Logf("waiting %s for the 1m window to fill", d.Round(time.Second))
		time.Sleep(d)
	}
	resets := u.resets()
	if len(resets) != 1 {
		t.Fatalf("the upstream reset %d times, want 1 (the sidecar scraped too slowly?)", len(resets))
	}
	at := time.Now().Add(-lag).Truncate(time.Second)
	t.Logf("evaluating at %s; upstream reset at %.1f s after its start", at.Format(time.TimeOnly), resets[0])
	return at
}

// truthPage is the exposition of every series after elapsed seconds of
// counting.
func truthPage(elapsed float64) string {
	var b strings.Builder
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	lbl := func(e int, extra string) string {
		s := fmt.Sprintf(`engine=%q,model_name=%q`, truthEngines[e], truthModel)
		if extra != "" {
			s += "," + extra
		}
		return "{" + s + "}"
	}
	// Gauges so the page looks like vLLM V1's and the routing view has
	// something besides the derived gauges.
	b.WriteString("# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\n")
	for e := range truthEngines {
		fmt.Fprintf(&b, "vllm:num_requests_running%s %d\n", lbl(e, ""), 4+e)
	}
	fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\",model_name=%q} 0\n", idleModel)
	b.WriteString("# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\n")
	for e := range truthEngines {
		fmt.Fprintf(&b, "vllm:num_requests_waiting%s %d\n", lbl(e, ""), e)
	}
	fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"0\",model_name=%q} 0\n", idleModel)
	// Engine 1's waiting request is deferred (on remote KV).
	b.WriteString("# HELP vllm:num_requests_waiting_by_reason Waiting requests by reason.\n# TYPE vllm:num_requests_waiting_by_reason gauge\n")
	for e := range truthEngines {
		fmt.Fprintf(&b, "vllm:num_requests_waiting_by_reason%s 0\n", lbl(e, `reason="capacity"`))
		fmt.Fprintf(&b, "vllm:num_requests_waiting_by_reason%s %d\n", lbl(e, `reason="deferred"`), e)
	}
	b.WriteString("# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n")
	for e := range truthEngines {
		fmt.Fprintf(&b, "vllm:kv_cache_usage_perc%s %s\n", lbl(e, ""), f(truthKV[e].usage))
	}
	b.WriteString("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n")
	for e := range truthEngines {
		fmt.Fprintf(&b, "vllm:cache_config_info{block_size=\"%d\",engine=%q,num_gpu_blocks=\"%d\"} 1\n", truthKV[e].blockSize, truthEngines[e], truthKV[e].blocks)
	}
	done := map[string]bool{}
	for _, c := range truthCounters {
		if !done[c.name] {
			done[c.name] = true
			fmt.Fprintf(&b, "# HELP %s Known-truth counter.\n# TYPE %s counter\n", c.name, c.name)
			// All series of one family together, as the format requires.
			for _, c2 := range truthCounters {
				if c2.name != c.name {
					continue
				}
				for e := range truthEngines {
					fmt.Fprintf(&b, "%s%s %s\n", c2.name, lbl(e, c2.labels), f(c2.rate[e]*elapsed))
				}
			}
		}
	}
	b.WriteString("# HELP vllm:admission_rejections_total Number of admission attempts rejected.\n# TYPE vllm:admission_rejections_total counter\n")
	for _, r := range truthRejections {
		fmt.Fprintf(&b, "vllm:admission_rejections_total{model_name=%q,reason=%q} %s\n", truthModel, r.reason, f(r.rate*elapsed))
	}
	for _, h := range truthHists {
		fmt.Fprintf(&b, "# HELP %s Known-truth histogram.\n# TYPE %s histogram\n", h.name, h.name)
		for e := range truthEngines {
			for i, le := range h.les {
				les := "+Inf"
				if le != inf {
					les = f(le)
				}
				fmt.Fprintf(&b, "%s_bucket%s %s\n", h.name, lbl(e, `le="`+les+`"`), f(h.cum[e][i]*elapsed))
			}
			fmt.Fprintf(&b, "%s_sum%s %s\n", h.name, lbl(e, ""), f(h.sum[e]*elapsed))
			fmt.Fprintf(&b, "%s_count%s %s\n", h.name, lbl(e, ""), f(h.cum[e][len(h.les)-1]*elapsed))
		}
	}
	return b.String()
}
