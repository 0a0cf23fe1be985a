package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestDiagnosisLeavesReadyAfterAnOutage: the binary on the demo's eight
// engines is ready; the upstream then answers 503 for 4 s, 40 % of the
// 10 s recent window. From the first successful scrape after the outage
// the diagnosis is not ready (vllm_diagnosis_ready 0, warming_up in the
// API, no symptom or cause claimed) while the window holds the gap, and
// ready again once a whole window is observed. Before the fix (f542c62,
// issue 32) a 45 s outage left it ready for 15 s, judging a window 75 %
// unobserved.
func TestDiagnosisLeavesReadyAfterAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary for a minute and a half")
	}
	t.Parallel()
	up, err := demo.New(demo.Options{Seed: 7, Engines: 8})
	if err != nil {
		t.Fatal(err)
	}
	sw := newSwitchable(up)
	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, sw)
	p := testbin.Start(t, "--vllm.scrape-uri=http://"+ln.Addr().String()+"/metrics",
		"--vllm.scrape-interval=500ms", "--vllm.timeout=500ms", "--derive.window=10s",
		"--diagnosis.window=10s", "--diagnosis.baseline=50s")
	// state reads the scrape's success, the model's readiness gauge and
	// how many symptoms and causes are claimed (1).
	state := func() (scraped, ready, claimed float64) {
		s, _ := metrics(t, p)
		for _, v := range s.with("vllm_diagnosis_ready{") {
			ready = v
		}
		for _, fam := range []string{"vllm_diagnosis_symptom{", "vllm_diagnosis_cause{"} {
			for _, v := range s.with(fam) {
				claimed += v
			}
		}
		return s["vllm_up"], ready, claimed
	}
	// The recent window and five of them of baseline: about a minute.
	waitFor(t, 3*time.Minute, "the diagnosis ready", func() bool { _, r, _ := state(); return r == 1 })
	sw.set(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	waitFor(t, settle, "a failed scrape", func() bool { u, _, _ := state(); return u == 0 })
	time.Sleep(4 * time.Second)
	sw.set(up)
	back := time.Now()
	waitFor(t, settle, "a scrape after the outage", func() bool { u, _, _ := state(); return u == 1 })
	// The window holds the gap for 10 s after it; the first 6 s are
	// checked, so that a late scrape on a busy machine is not read as
	// the window's end.
	for checks := 0; time.Since(back) < 6*time.Second; checks++ {
		scraped, ready, claimed := state()
		if scraped != 1 {
			continue // a timeout on a busy machine: no gauges to judge
		}
		if ready != 0 || claimed != 0 {
			t.Fatalf("%s after a 4 s outage in a 10 s window: ready %v, %v symptoms and causes claimed; want not ready, none", time.Since(back).Round(time.Millisecond), ready, claimed)
		}
		if checks == 0 {
			var rep struct {
				Models []struct {
					Readiness struct {
						State string `json:"state"`
					} `json:"readiness"`
				} `json:"models"`
			}
			if err := json.Unmarshal(mustGet(t, p.URL+"/api/v1/diagnosis").body, &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Models) != 1 || rep.Models[0].Readiness.State != "warming_up" {
				t.Errorf("the API after the outage: %+v, want one model warming_up", rep.Models)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, time.Minute, "ready once a whole window is observed again", func() bool { _, r, _ := state(); return r == 1 })
	t.Logf("ready again %s after the outage", time.Since(back).Round(100*time.Millisecond))
}
