package prometheus_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// jitterUpstream serves one preemption counter growing by exactly 2 a
// second from 1000, whose _created time jitters by 1 ms either way at every
// request and whose process_start_time_seconds steps 0.6 s forward every
// other request: metadata that moves without any restart.
type jitterUpstream struct {
	mu       sync.Mutex
	start    time.Time
	requests int
}

func (u *jitterUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.requests++
	n := u.requests
	u.mu.Unlock()
	elapsed := time.Since(u.start).Seconds()
	born := float64(u.start.Add(-time.Hour).UnixNano()) / 1e9
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	const l = `{engine="0",model_name="m"}`
	page := "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running" + l + " 1\n" +
		"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting" + l + " 0\n" +
		"# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total" + l + " " + f(1000+2*elapsed) + "\n" +
		"# TYPE vllm:num_preemptions_created gauge\nvllm:num_preemptions_created" + l + " " + f(born+0.001*float64(n%3-1)) + "\n" +
		"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds " + f(born+0.6*float64(n%2)) + "\n"
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(page))
}

// TestAgreementUnderStartTimeJitter: with _created and the process start
// time jittering and no restart, the sidecar's preemption rate is the true
// 2/s and equals Prometheus's rate() of the series the sidecar re-exposes;
// every change is counted as jitter, none as a restart. Before jitter was
// told from restarts, every change was a restart that added the whole
// counter (over 1000) as one scrape's increase.
func TestAgreementUnderStartTimeJitter(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	up := httptest.NewServer(&jitterUpstream{start: time.Now()})
	t.Cleanup(up.Close)
	side := testbin.Start(t, "--vllm.scrape-uri="+up.URL+"/metrics", "--vllm.scrape-interval=1s", "--vllm.timeout=1s", "--derive.window=30s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", side.Logs())
		}
	})
	prom := startPrometheus(t, promBin, []scrapeJob{{Name: "sidecar", Target: side.Addr}}, nil)
	prom.waitFor(t, `vllm_derived_preemptions_per_second{job="sidecar",window="30s"}`, 20*time.Second)
	first := time.Now()
	// Prometheus's [30s] range covered by its own samples, and 20 s of
	// sidecar values with a full window.
	time.Sleep(time.Until(first.Add(34 * time.Second)))
	at := time.Now().Add(-500 * time.Millisecond).Truncate(time.Second)

	side30 := byKey(t, "sidecar rate", prom.mustQuery(t, `vllm_derived_preemptions_per_second{job="sidecar",window="30s"}`, at), "")
	ref := byKey(t, "Prometheus rate", prom.mustQuery(t, `sum(rate(vllm:num_preemptions_total{job="sidecar"}[30s]))`, at), "")
	got, want := side30[""], ref[""]
	if math.Abs(got-2) > truthRate*2 {
		t.Errorf("sidecar's 30s preemption rate %g, truth 2 (allowed %g)", got, truthRate*2)
	}
	if tol := agreeRateFor("30s"); math.Abs(got-want) > tol*want {
		t.Errorf("sidecar %g vs Prometheus %g: off by %g, allowed %g", got, want, got-want, tol*want)
	}
	t.Logf("30s preemption rate: sidecar %g, Prometheus %g, truth 2", got, want)
	// Every value served over the last 20 s, not just the last one.
	for _, agg := range []string{"min_over_time", "max_over_time"} {
		q := fmt.Sprintf(`%s(vllm_derived_preemptions_per_second{job="sidecar",window="30s"}[20s])`, agg)
		v := byKey(t, q, prom.mustQuery(t, q, at), "")[""]
		if math.Abs(v-2) > sidecarOverTime*2 {
			t.Errorf("%s = %g, truth 2 (allowed %g); over time: %s", q, v, sidecarOverTime*2,
				prom.raw(`vllm_derived_preemptions_per_second{job="sidecar",window="30s"}[20s]`, at))
		}
	}
	restarts := byKey(t, "restarts", prom.mustQuery(t, `vllm_normalizer_upstream_restarts_detected_total{job="sidecar"}`, at), "")
	if restarts[""] != 0 {
		t.Errorf("%g restarts detected, want 0: the start times only jittered", restarts[""])
	}
	jitter := byKey(t, "jitter", prom.mustQuery(t, `vllm_normalizer_metadata_jitter_total{job="sidecar"}`, at), "metadata")
	// Both change at nearly every scrape of the ~50 so far.
	for _, m := range []string{"_created", "process_start_time_seconds"} {
		if jitter[m] < 10 {
			t.Errorf("vllm_normalizer_metadata_jitter_total{metadata=%q} = %g, want one per change (~one per scrape)", m, jitter[m])
		}
	}
}
