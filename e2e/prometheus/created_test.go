package prometheus_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// restartingUpstream serves a constructed vLLM V1 page (vLLM's names and
// labels, one engine of model createdModel, values set by the test): the
// prompt-token counter, the end-to-end latency histogram, their _created
// gauges as Python's prometheus_client prints them, and the process start
// time, with the gauges that make the page a vLLM one.
type restartingUpstream struct {
	mu       sync.Mutex
	start    float64 // process_start_time_seconds
	tokens   float64 // vllm:prompt_tokens_total
	requests float64 // requests observed, all under 1 s
}

const createdModel = "created-model"

// set makes the upstream a process started at start that has counted
// tokens and requests since: one atomic step, so that a scraper sees the
// old page or the new one.
func (u *restartingUpstream) set(start time.Time, tokens, requests float64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.start, u.tokens, u.requests = float64(start.UnixNano())/1e9, tokens, requests
}

func (u *restartingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	start, tokens, requests := u.start, u.tokens, u.requests
	u.mu.Unlock()
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	lbl := fmt.Sprintf(`engine="0",model_name=%q`, createdModel)
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{%s} 0\n", lbl)
	fmt.Fprintf(&b, "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{%s} 0\n", lbl)
	fmt.Fprintf(&b, "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{%s} 0.1\n", lbl)
	fmt.Fprintf(&b, "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{%s} %s\n", lbl, f(tokens))
	fmt.Fprintf(&b, "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{%s} %s\n", lbl, f(tokens/2))
	b.WriteString("# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.\n# TYPE vllm:e2e_request_latency_seconds histogram\n")
	for _, le := range []string{"0.3", "0.5", "0.8", "1.0", "+Inf"} {
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{%s,le=%q} %s\n", lbl, le, f(requests))
	}
	fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_sum{%s} %s\nvllm:e2e_request_latency_seconds_count{%s} %s\n", lbl, f(requests*0.2), lbl, f(requests))
	for _, base := range []string{"vllm:prompt_tokens", "vllm:generation_tokens", "vllm:e2e_request_latency_seconds"} {
		fmt.Fprintf(&b, "# HELP %s_created Start time.\n# TYPE %s_created gauge\n%s_created{%s} %s\n", base, base, base, lbl, f(start))
	}
	fmt.Fprintf(&b, "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %s\n", f(start))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = io.WriteString(w, b.String())
}

// startRestartingUpstream serves a restartingUpstream born a second ago
// that has counted 50 tokens and 5 requests since.
func startRestartingUpstream(t *testing.T) (*restartingUpstream, *httptest.Server, time.Time) {
	up := &restartingUpstream{}
	born := time.Now().Add(-time.Second)
	up.set(born, 50, 5)
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	return up, srv, born
}

// TestCreatedTimestampsPrometheus: Prometheus 3 with created-timestamp
// ingestion scrapes the compatibility page and the GenAI view of two
// sidecars of one upstream, one with --output.created-timestamps, and the
// upstream itself. The upstream had counted 50 tokens and 5 requests
// before anyone scraped it, then restarts and counts 80 and 8, past its old
// totals, before the next scrape.
//
//   - Without the flag the sums' first samples (50, 5) are where their
//     series begin, so increase() over everything reads only what came
//     after: 80 and 8. The upstream's own series read 30: the first 50,
//     and the restart counted past the old value, are both lost.
//   - With it, Prometheus puts a zero at the sums' start (the upstream's
//     process start) and reads all of it: 130 and 13; the restart, folded
//     into the sums, moves no start, so no zero is put in the middle
//     (resets() is 0) and nothing is counted twice.
//   - On /metrics, the server's own series: without the flag they read 30,
//     as the upstream's; with it they carry the server's _created times,
//     so Prometheus puts a zero at the start and reads the first 50: 80.
//     It sees the restart too (another zero, resets() 1, 130) unless it
//     scraped the sidecar between the restart and the sidecar's next scrape
//     of the server: a sample after the new start still holding the old
//     value leaves no room for the zero before it. The sums do not depend
//     on that.
func TestCreatedTimestampsPrometheus(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	up, srv, born := startRestartingUpstream(t)

	type sidecar struct {
		job    string
		proc   *testbin.Process
		compat string
	}
	var sides []sidecar
	for _, job := range []string{"created", "plain"} {
		compat := testbin.FreeAddr(t)
		args := []string{"--vllm.scrape-uri=" + srv.URL + "/metrics", "--vllm.scrape-interval=1s", "--web.routing-listen-address=" + compat}
		if job == "created" {
			args = append(args, "--output.created-timestamps")
		}
		p := testbin.Start(t, args...)
		sides = append(sides, sidecar{job, p, compat})
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range sides {
				t.Logf("%s sidecar log:\n%s", s.job, s.proc.Logs())
			}
		}
	})
	// Both sidecars have scraped the upstream before Prometheus first reads
	// them, and the sums are on their pages.
	for _, s := range sides {
		waitForBody(t, "http://"+s.compat+"/metrics", "vllm:prompt_tokens_total{")
		waitForBody(t, s.proc.URL+"/metrics/genai", "gen_ai_server_request_duration_seconds_count{")
	}

	var jobs []scrapeJob
	for _, s := range sides {
		jobs = append(jobs,
			scrapeJob{Name: s.job, Target: s.compat},
			scrapeJob{Name: s.job + "-genai", Target: s.proc.Addr, MetricsPath: "/metrics/genai"},
			scrapeJob{Name: s.job + "-full", Target: s.proc.Addr})
	}
	jobs = append(jobs, scrapeJob{Name: "upstream", Target: strings.TrimPrefix(srv.URL, "http://")})
	prom := startPrometheusWith(t, promBin, jobs, nil, "", "--enable-feature=created-timestamp-zero-ingestion")

	const tokens, requests = "vllm:prompt_tokens_total", "gen_ai_server_request_duration_seconds_count"
	// Every job has read the first totals (and a few scrapes more) ...
	prom.waitFor(t, fmt.Sprintf(`count(%s == 50) == 5 and count(%s == 5) == 2`, tokens, requests), 2*time.Minute)
	time.Sleep(4 * time.Second)
	// ... before the upstream restarts and counts past them.
	up.set(time.Now(), 80, 8)
	prom.waitFor(t, fmt.Sprintf(`count(%s{job=~"created|plain"} == 130) == 2 and count(%s{job=~"upstream|.*-full"} == 80) == 3 and count(%s == 13) == 2`, tokens, tokens, requests), 2*time.Minute)
	time.Sleep(4 * time.Second)

	at := time.Now()
	// The range reaches back past the upstream's start.
	rng := fmt.Sprintf("%ds", int(math.Ceil(at.Sub(born).Seconds()))+10)
	value := func(expr string) float64 {
		t.Helper()
		return prom.one(t, expr, at)
	}
	for _, c := range []struct {
		job, name string
		truth     float64 // what the upstream counted
		want      float64 // what increase() can read of it
	}{
		{"created", tokens, 130, 130},
		{"plain", tokens, 130, 80},
		{"upstream", tokens, 130, 30},
		{"plain-full", tokens, 130, 30},
		{"created-genai", requests, 13, 13},
		{"plain-genai", requests, 13, 8},
	} {
		sel := fmt.Sprintf("%s{job=%q}", c.name, c.job)
		inc := value(fmt.Sprintf("increase(%s[%s])", sel, rng))
		rate := value(fmt.Sprintf("rate(%s[%s])", sel, rng))
		// increase() extrapolates past the first and last samples (at
		// most 1.1 scrape intervals, not below a zero): some percent over
		// on a series of ten-odd samples, never under.
		if inc < c.want*0.999 || inc > c.want*1.25 {
			t.Errorf("%s: increase over %s = %.2f, want %.0f (of the %.0f counted)\n%s", sel, rng, inc, c.want, c.truth, prom.raw(sel+"["+rng+"]", at))
		}
		secs, _ := strconv.ParseFloat(strings.TrimSuffix(rng, "s"), 64)
		if math.Abs(rate*secs-inc) > 1e-6*inc {
			t.Errorf("%s: rate %.4f/s over %s is not increase/range (%.2f)", sel, rate, rng, inc)
		}
		t.Logf("%s: increase %.2f of the %.0f counted", sel, inc, c.truth)
	}
	for sel, want := range map[string]float64{
		tokens + `{job="created"}`:         0, // the sums go on through the restart
		requests + `{job="created-genai"}`: 0,
	} {
		if r := value(fmt.Sprintf("resets(%s[%s])", sel, rng)); r != want {
			t.Errorf("%s: %v resets, want %v\n%s", sel, r, want, prom.raw(sel+"["+rng+"]", at))
		}
	}
	// The server's own series on the flagged sidecar's /metrics: the first
	// 50 always, the restart when its zero fitted.
	full := tokens + `{job="created-full"}`
	switch r, inc := value(fmt.Sprintf("resets(%s[%s])", full, rng)), value(fmt.Sprintf("increase(%s[%s])", full, rng)); {
	case r == 1 && inc >= 130*0.999 && inc <= 130*1.25:
		t.Logf("%s: the restart was seen (a zero at the new start): increase %.2f", full, inc)
	case r == 0 && inc >= 80*0.999 && inc <= 80*1.25:
		t.Logf("%s: Prometheus scraped the old value after the restart, so no zero fitted at the new start: increase %.2f", full, inc)
	default:
		t.Errorf("%s: %v resets and an increase of %.2f: want one reset and the 130 counted, or none and 80\n%s", full, r, inc, prom.raw(full+"["+rng+"]", at))
	}
}

// waitForBody polls url until its body contains want.
func waitForBody(t *testing.T, url, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: after a minute, no %s (HTTP %d):\n%s", url, want, resp.StatusCode, body)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("%s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
