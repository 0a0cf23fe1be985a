package prometheus_test

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/pagetest"
	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// otlpJob is the job label Prometheus's OTLP receiver gives the pushed
// series: the sidecar's default service.name.
const otlpJob = "vllm-normalizer"

// TestOTLPPushAgreesWithScrape pushes the full page over OTLP into
// Prometheus 3's OTLP receiver while the same Prometheus scrapes the same
// page: the PromQL answers agree with each other and with the known truth,
// across a true restart of the upstream (its counters drop to a value
// below the last), which Prometheus reads from the pushed series with no
// undercount. With created-timestamp-zero-ingestion, Prometheus writes a
// zero at each pushed start time: one inside the window shows the start
// time moved at the restart.
func TestOTLPPushAgreesWithScrape(t *testing.T) {
	promBin := needPrometheus(t)
	// Not parallel: the pod's variables reach the sidecar through the
	// process environment.
	t.Setenv("K8S_POD_NAME", "vllm-0")
	t.Setenv("K8S_NAMESPACE_NAME", "llm")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	t.Setenv("OTEL_SERVICE_NAME", "")

	// The 45th request (~45 s in) restarts the upstream's counters, inside
	// both windows when they are compared at ~65 s.
	up := newTruthUpstream(45)
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)

	testbin.Build(t)
	sideAddr := testbin.FreeAddr(t)
	prom := startPrometheusWith(t, promBin, []scrapeJob{{Name: "sidecar", Target: sideAddr}}, nil,
		"otlp:\n  promote_resource_attributes: [k8s.pod.name]\n",
		"--web.enable-otlp-receiver", "--enable-feature=created-timestamp-zero-ingestion")
	side := testbin.StartAt(t, sideAddr, "http",
		"--vllm.scrape-uri="+srv.URL+"/metrics",
		"--vllm.scrape-interval=1s", "--vllm.timeout=1s",
		"--derive.window=30s", "--derive.window=1m",
		"--otlp.endpoint="+prom.URL+"/api/v1/otlp/v1/metrics", "--otlp.interval=1s",
	)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", side.Logs())
		}
	})

	for _, job := range []string{"sidecar", otlpJob} {
		prom.waitFor(t, fmt.Sprintf(`vllm_derived_preemptions_per_second{job=%q,window="1m"}`, job), 30*time.Second)
	}
	// A second further back than a scrape's evaluation: a pushed sample
	// arrives up to an interval after the time it carries.
	at := up.evaluationTime(t, time.Now(), 1500*time.Millisecond)

	one := func(expr string) (float64, bool) {
		res, err := prom.query(expr, at)
		if err != nil || len(res) != 1 {
			t.Errorf("%s: %v (err %v), want one sample", expr, res, err)
			return 0, false
		}
		return res[0].Value, true
	}
	// Pushed series carry the resource: job and instance from service.name
	// and service.instance.id, the promoted pod name.
	if _, ok := one(fmt.Sprintf(`count(vllm:num_requests_running{job=%q,instance="llm.vllm-0",k8s_pod_name="vllm-0"})`, otlpJob)); !ok {
		t.Logf("pushed series: %s", prom.raw(fmt.Sprintf(`vllm:num_requests_running{job=%q}`, otlpJob), at))
	}

	// The restart reached Prometheus through the push as a drop.
	res := byKey(t, "resets", prom.mustQuery(t, fmt.Sprintf(`resets(vllm:num_preemptions_total{job=%q}[2m])`, otlpJob), at), "engine")
	for _, e := range truthEngines {
		if res[e] < 1 {
			t.Errorf("Prometheus read %v restarts of engine %s's pushed preemption counter, want >= 1", res[e], e)
		}
	}
	// And as a start time: the zero written at it after the restart (a
	// series' first start is its first point's time, where no zero goes).
	if v, ok := one(fmt.Sprintf(`min(min_over_time(vllm:num_preemptions_total{job=%q,engine="0"}[2m]))`, otlpJob)); ok && v != 0 {
		t.Errorf("the pushed counter never read 0 in the last 2m (its least value %g): the start time did not move at the restart", v)
	}

	var totalPrompt, totalGen, totalPreempt float64
	for e := range truthEngines {
		totalPrompt += truthCounters[1].rate[e]
		totalGen += truthCounters[2].rate[e]
		totalPreempt += truthCounters[0].rate[e]
	}
	type check struct {
		expr        string // with %[1]q for the job and %[2]s for the window
		truth       float64
		agree, near float64 // relative tolerances: pushed vs scraped, pushed vs truth
	}
	var sumRate, sumCount float64
	for e := range truthEngines {
		sumRate += truthHists[7].sum[e]
		sumCount += truthHists[7].cum[e][len(truthHists[7].les)-1]
	}
	checks := []check{
		{`sum(rate(vllm:prompt_tokens_total{job=%[1]q,engine!=""}[%[2]s]))`, totalPrompt, 0.02, 0.03},
		{`sum(rate(vllm:generation_tokens_total{job=%[1]q,engine!=""}[%[2]s]))`, totalGen, 0.02, 0.03},
		{`sum(rate(vllm:num_preemptions_total{job=%[1]q,engine!=""}[%[2]s]))`, totalPreempt, 0.02, 0.03},
		// Across the restart: no undercount.
		{`sum(increase(vllm:prompt_tokens_total{job=%[1]q,engine!=""}[%[2]s]))`, math.NaN(), 0.02, 0.03},
		// A histogram's mean (its counts pushed as whole numbers) and one
		// bucket's rate.
		{`sum(rate(vllm:e2e_request_latency_seconds_sum{job=%[1]q,engine!=""}[%[2]s])) / sum(rate(vllm:e2e_request_latency_seconds_count{job=%[1]q,engine!=""}[%[2]s]))`, sumRate / sumCount, 0.02, 0.03},
		{`sum(rate(vllm:inter_token_latency_seconds_bucket{job=%[1]q,engine!="",le="0.05"}[%[2]s]))`, 140 + 60, 0.02, 0.03},
		// Derived gauges and a plain gauge, as the page says.
		{`sum(vllm_derived_preemptions_per_second{job=%[1]q,window=%[2]q,engine!=""})`, totalPreempt, 0.02, 0.05},
		{`sum(vllm:num_requests_running{job=%[1]q,model_name="truth-model"})`, 9, 0, 0},
	}
	for _, w := range []string{"30s", "1m"} {
		for _, c := range checks {
			pushedQ, scrapedQ := fmt.Sprintf(c.expr, otlpJob, w), fmt.Sprintf(c.expr, "sidecar", w)
			pushed, ok1 := one(pushedQ)
			scraped, ok2 := one(scrapedQ)
			if !ok1 || !ok2 {
				continue
			}
			truth := c.truth
			if math.IsNaN(truth) {
				d, _ := time.ParseDuration(w)
				truth = totalPrompt * d.Seconds()
			}
			t.Logf("window %s: pushed %g, scraped %g, truth %g: %s", w, pushed, scraped, truth, pushedQ)
			if !near(pushed, scraped, c.agree) {
				t.Errorf("%s: pushed %g, scraped %g (%s): off by more than %g%%", pushedQ, pushed, scraped, scrapedQ, 100*c.agree)
			}
			if !near(pushed, truth, c.near) {
				t.Errorf("%s: pushed %g, truth %g: off by more than %g%%", pushedQ, pushed, truth, 100*c.near)
			}
		}
	}
}

// near reports whether got is within rel of want (exactly equal for 0).
func near(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Abs(want)
}

// hungReceiver accepts connections and never answers, counting the
// connections it holds open.
type hungReceiver struct {
	ln             net.Listener
	accepted, open atomic.Int64
}

func newHungReceiver(t *testing.T) *hungReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hungReceiver{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			h.open.Add(1)
			go func() {
				// Reads what comes, answers nothing; the connection ends
				// when the client closes it.
				_, _ = io.Copy(io.Discard, c)
				c.Close()
				h.open.Add(-1)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return h
}

// sidecarStats is what the dead-endpoint test reads from a sidecar's page.
type sidecarStats struct {
	scrapes    map[float64]bool // distinct last successful scrape times
	goroutines []float64
	rss        []float64
	exports    map[string]float64 // the last vllm_normalizer_otlp_exports_total by result
}

func (s *sidecarStats) read(t *testing.T, url string) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Errorf("reading the sidecar's page: %v", err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	samples := pagetest.Samples(t, body, resp.Header.Get("Content-Type"))
	s.scrapes[samples[`{__name__="vllm_normalizer_last_scrape_success_timestamp_seconds"}`]] = true
	s.goroutines = append(s.goroutines, samples[`{__name__="go_goroutines"}`])
	s.rss = append(s.rss, samples[`{__name__="vllm_normalizer_process_resident_memory_bytes"}`])
	for _, r := range []string{"success", "error", "timeout", "skipped_busy", "skipped_unchanged"} {
		s.exports[r] = samples[fmt.Sprintf(`{__name__="vllm_normalizer_otlp_exports_total", result=%q}`, r)]
	}
}

// TestOTLPDeadEndpoint runs the sidecar pushing every second to a closed
// port and to an endpoint that accepts and never answers, beside one that
// does not push (the control): the scrape loop keeps the control's
// cadence, every push is counted as failed, and the sidecar's goroutines,
// memory and connections to the endpoint stay bounded (nothing queues).
func TestOTLPDeadEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): runs three sidecars for half a minute")
	}
	testbin.Build(t)
	hung := newHungReceiver(t)
	closed := testbin.FreeAddr(t) // nothing listens there
	const control = "control"
	endpoints := map[string]string{
		"closed port": "http://" + closed + "/v1/metrics",
		"hung":        "http://" + hung.ln.Addr().String() + "/v1/metrics",
		control:       "",
	}
	sides := map[string]*testbin.Process{}
	stats := map[string]*sidecarStats{}
	for name, ep := range endpoints {
		sides[name] = testbin.Start(t, "--demo", "--vllm.scrape-interval=1s", "--otlp.endpoint="+ep, "--otlp.interval=1s")
		stats[name] = &sidecarStats{scrapes: map[float64]bool{}, exports: map[string]float64{}}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, s := range sides {
				t.Logf("%s sidecar log:\n%s", name, s.Logs())
			}
		}
	})
	// 30 s, read every half second; the first 5 s are the warm-up.
	const run = 30 * time.Second
	start := time.Now()
	for time.Since(start) < run {
		for name, s := range sides {
			stats[name].read(t, s.URL)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Each scrape is a new last-success time; a stalled loop repeats one.
	// The machine sets the pace: the control's.
	pace := len(stats[control].scrapes)
	t.Logf("control: %d scrapes in %s", pace, run)
	for name, s := range stats {
		if name == control {
			continue
		}
		if n := len(s.scrapes); n < pace*4/5 {
			t.Errorf("%s: %d distinct successful scrapes in %s, the control %d: the push held the scrape loop", name, n, run, pace)
		}
		failed := s.exports["error"] + s.exports["timeout"]
		// A push a scrape at most, and most of them tried.
		if s.exports["success"] != 0 || failed < float64(pace)/3 {
			t.Errorf("%s: exports %v; want none successful and at least %d failed (a third of the control's scrapes)", name, s.exports, pace/3)
		}
		warm := len(s.goroutines) / 6
		base, top := s.goroutines[warm], slices.Max(s.goroutines[warm:])
		if top > base+10 {
			t.Errorf("%s: goroutines grew from %v to %v: pushes pile up", name, base, top)
		}
		rssBase, rssTop := s.rss[warm], slices.Max(s.rss[warm:])
		if rssTop > rssBase+32<<20 {
			t.Errorf("%s: resident memory grew from %.1f MB to %.1f MB", name, rssBase/(1<<20), rssTop/(1<<20))
		}
		t.Logf("%s: %d scrapes, exports %v, goroutines %v..%v, RSS %.1f..%.1f MB", name, len(s.scrapes), s.exports, base, top, rssBase/(1<<20), rssTop/(1<<20))
	}
	if open, acc := hung.open.Load(), hung.accepted.Load(); open > 2 {
		t.Errorf("the hung endpoint holds %d open connections of %d accepted: timed-out exports leave them open", open, acc)
	} else {
		t.Logf("hung endpoint: %d connections accepted, %d open", acc, open)
	}
}

// TestOTLPPushCreatedTimestamps: a sidecar with --output.created-timestamps
// pushes /metrics/genai into Prometheus 3's OTLP receiver (with
// created-timestamp-zero-ingestion) from an upstream that had served 5
// requests before the sidecar started, then restarts and serves 8, past
// its old total (restartingUpstream). The pushed sum starts at the
// upstream's start, as the page dates it, so Prometheus puts a zero there
// and increase() reads all 13; the restart, folded into the sum, moves no
// start (no reset). Dated by its first push instead, it would read 8.
func TestOTLPPushCreatedTimestamps(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	up, srv, born := startRestartingUpstream(t)

	testbin.Build(t)
	prom := startPrometheusWith(t, promBin, nil, nil, "", "--web.enable-otlp-receiver", "--enable-feature=created-timestamp-zero-ingestion")
	side := testbin.Start(t, "--vllm.scrape-uri="+srv.URL+"/metrics", "--vllm.scrape-interval=1s", "--output.created-timestamps",
		"--otlp.endpoint="+prom.URL+"/api/v1/otlp/v1/metrics", "--otlp.view=genai", "--otlp.interval=1s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", side.Logs())
		}
	})

	sel := fmt.Sprintf("gen_ai_server_request_duration_seconds_count{job=%q}", otlpJob)
	prom.waitFor(t, sel+" == 5", 2*time.Minute)
	time.Sleep(3 * time.Second)
	up.set(time.Now(), 80, 8)
	prom.waitFor(t, sel+" == 13", 2*time.Minute)
	time.Sleep(3 * time.Second)

	at := time.Now()
	rng := fmt.Sprintf("%ds", int(math.Ceil(at.Sub(born).Seconds()))+10)
	// increase() extrapolates past the last sample, never below the zero.
	if inc := prom.one(t, fmt.Sprintf("increase(%s[%s])", sel, rng), at); inc < 13*0.999 || inc > 13*1.25 {
		t.Errorf("increase(%s[%s]) = %.2f, want the 13 requests counted, the 5 before the first push included\n%s", sel, rng, inc, prom.raw(sel+"["+rng+"]", at))
	}
	if r := prom.one(t, fmt.Sprintf("resets(%s[%s])", sel, rng), at); r != 0 {
		t.Errorf("resets(%s[%s]) = %v, want 0: the sum's start moved at the upstream's restart\n%s", sel, rng, r, prom.raw(sel+"["+rng+"]", at))
	}
}
