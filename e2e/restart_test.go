package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
	"github.com/fos-study/vllm-normalizer/scrape"
)

// TestSidecarStartedBeforeVLLM: with nothing listening at first the
// sidecar reports refused scrapes and a 503 routing view, and recovers by
// itself once vLLM starts on that port.
func TestSidecarStartedBeforeVLLM(t *testing.T) {
	addr := testbin.FreeAddr(t)
	p := testbin.Start(t, sidecarArgs("http://"+addr+"/metrics", fastInterval, fastTimeout)...)

	waitFor(t, settle, "a refused scrape", func() bool {
		q, _ := quick(t, p)
		return q.failures(scrape.ReasonRefused) >= 1
	})
	s, _ := metrics(t, p)
	if s["vllm_up"] != 0 {
		t.Errorf("vllm_up = %v before vLLM listens, want 0", s["vllm_up"])
	}
	if r := mustGet(t, p.URL+"/metrics/routing"); r.status != http.StatusServiceUnavailable {
		t.Errorf("routing view answered %d before vLLM listens, want 503", r.status)
	}

	serveOn(t, listen(t, addr), static(v1Page(10, 5)))
	start := time.Now()
	waitFor(t, settle, "vllm_up 1 after vLLM started", func() bool {
		q, _ := quick(t, p)
		return q["vllm_up"] == 1
	})
	waitFor(t, settle, "routing view 200 after vLLM started", func() bool {
		return mustGet(t, p.URL+"/metrics/routing").status == http.StatusOK
	})
	t.Logf("recovered %s after vLLM started listening", time.Since(start).Round(time.Millisecond))
	r := mustGet(t, p.URL+"/metrics/routing")
	if got := mustParse(t, r.body)[`vllm:num_requests_running{model_name="m",role="both"}`]; got != 3 {
		t.Errorf("routing view running = %v, want 3", got)
	}
}

// counterUpstream is a vLLM whose counters grow at known rates from the
// moment it (re)started, from base.
type counterUpstream struct {
	mu          sync.Mutex
	start       time.Time
	base        float64
	prompt, gen float64 // tokens per second
}

func (u *counterUpstream) restart(base float64) {
	u.mu.Lock()
	u.start, u.base = time.Now(), base
	u.mu.Unlock()
}

func (u *counterUpstream) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	u.mu.Lock()
	el := time.Since(u.start).Seconds()
	body := v1Page(u.base+u.prompt*el, u.base+u.gen*el)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write(body)
}

// TestVLLMRestartUnderSidecar: vLLM restarts (its counters fall from
// millions back to zero mid-window), once at once and once after being
// down for a while on the same port. The derived rates must never be
// negative nor above the true rate (plus jitter), and must come back to
// the true rate once a whole window has passed.
func TestVLLMRestartUnderSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): restarts the upstream and waits for a window of rates")
	}
	for _, downtime := range []time.Duration{0, 500 * time.Millisecond} {
		name := "instant"
		if downtime > 0 {
			name = "down " + downtime.String()
		}
		t.Run(name, func(t *testing.T) { testRestart(t, downtime) })
	}
}

func testRestart(t *testing.T, downtime time.Duration) {
	up := &counterUpstream{prompt: 1000, gen: 250}
	up.restart(5e6)
	ln := listen(t, "127.0.0.1:0")
	addr := ln.Addr().String()
	srv := serveOn(t, ln, up)
	p := testbin.Start(t, sidecarArgs("http://"+addr+"/metrics", fastInterval, fastTimeout)...)

	rates := func() map[string]float64 {
		s, _ := metrics(t, p)
		out := map[string]float64{}
		for prefix, truth := range map[string]float64{
			"vllm_derived_prompt_tokens_per_second{":     up.prompt,
			"vllm_derived_generation_tokens_per_second{": up.gen,
		} {
			for k, v := range s.with(prefix) {
				if !strings.Contains(k, `window="2s"`) {
					continue
				}
				out[k] = v / truth // as a fraction of the truth
			}
		}
		return out
	}
	// Tolerance on the measured rate: the upstream computes its value when
	// asked, the sidecar stamps it when the scrape ends, so intervals are
	// off by a few milliseconds of 200.
	const tolerance = 0.10
	steady := func(when string) {
		t.Helper()
		var last map[string]float64
		waitFor(t, 2*fastWindow+2*time.Second, "derived rates at the true rate "+when, func() bool {
			last = rates()
			if len(last) != 2 {
				return false
			}
			for _, f := range last {
				if f < 1-tolerance || f > 1+tolerance {
					return false
				}
			}
			return true
		})
		t.Logf("%s: rates as fractions of the truth: %v", when, last)
	}
	steady("before the restart")

	restartAt := time.Now()
	if downtime > 0 {
		_ = srv.Close()
		time.Sleep(downtime)
		up.restart(0)
		serveOn(t, listen(t, addr), up)
	} else {
		up.restart(0)
	}

	// Through one and a half windows after the restart, every published
	// rate stays within [0, truth+tolerance].
	var seen, minF, maxF = 0, 1.0, 0.0
	for time.Since(restartAt) < fastWindow*3/2 {
		for k, f := range rates() {
			seen++
			minF, maxF = min(minF, f), max(maxF, f)
			if f < 0 || f > 1+tolerance {
				t.Errorf("%s after the restart: %s is %.3f of the true rate, want within [0, %.2f]", time.Since(restartAt).Round(time.Millisecond), k, f, 1+tolerance)
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	if seen == 0 {
		t.Fatal("no derived rate was served after the restart")
	}
	t.Logf("after the restart: %d rate readings between %.3f and %.3f of the truth", seen, minF, maxF)
	steady("a window after the restart")
	if got := mustGet(t, p.URL+"/metrics/routing").status; got != http.StatusOK {
		t.Errorf("routing view answered %d after recovery", got)
	}
}
