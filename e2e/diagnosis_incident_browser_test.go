package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/internal/mappingtest"
	"github.com/fos-study/vllm-normalizer/internal/testbin"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// virtualClock is a clock the test moves: hours of incident take no time.
type virtualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *virtualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestDiagnosisLongIncidentInBrowser drives the whole pipeline (the demo's
// queueing scenario over HTTP, parse, normalise, the diagnosis) in virtual
// time through an incident five baselines long, where a rolling baseline
// used to take the incident in and turn the page green, then opens
// /diagnosis in headless Chromium: the incident is still named, in a
// sentence with its action, there is no "Healthy", every chart has a time
// axis and marks the incident's start, and ?refresh=N adds the refresh.
func TestDiagnosisLongIncidentInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates minutes of an incident and starts Chromium")
	}
	bin := chromium(t)
	t.Parallel()
	const window, baseline, shift = 10 * time.Second, 40 * time.Second, 70 * time.Second
	clock := &virtualClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 3, Engines: 4, Scenario: demo.ScenarioQueueing, ShiftAfter: shift})
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	d, err := diagnosis.New(diagnosis.Options{Window: window, Baseline: baseline, MinChange: 0.25, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mapper := mappingtest.Mapper(t, mapping.Options{})
	c, err := collector.New(collector.Config{ScrapeURI: upstream.URL + "/metrics", Interval: time.Second, Timeout: time.Second,
		MaxBodyBytes: 32 << 20, SampleLimit: 50000, Windows: []time.Duration{time.Minute}, Mapper: mapper, Now: clock.Now, Diagnosis: d})
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	for clock.Now().Sub(start) < shift+5*baseline {
		c.ScrapeOnce(context.Background())
		clock.Advance(time.Second)
	}
	c.ScrapeOnce(context.Background())
	rep := d.Report()
	if len(rep.Models) != 1 || rep.Models[0].Incident == nil {
		t.Fatalf("no incident %s after the shift: %+v", 5*baseline, rep.Models)
	}
	if age := rep.Models[0].Incident.Seconds; age < 4*baseline.Seconds() {
		t.Fatalf("the incident is %v s old, want at least four baselines (%v s)", age, 4*baseline.Seconds())
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/diagnosis" {
			d.APIHandler().ServeHTTP(w, r)
			return
		}
		d.PageHandler().ServeHTTP(w, r)
	}))
	defer page.Close()
	dom := string(headless(t, bin, "--dump-dom", page.URL+"/diagnosis?refresh=5"))

	if strings.Contains(dom, "Healthy") || strings.Contains(dom, "healthy") {
		t.Errorf("the page says healthy during an incident")
	}
	verdict := regexp.MustCompile(`<div class="banner bad" id="verdict">([^<]*)</div>`).FindStringSubmatch(dom)
	if verdict == nil || !strings.HasPrefix(verdict[1], "Since ") || !strings.Contains(verdict[1], "Time to first token") {
		t.Errorf("no incident sentence: %v", verdict)
	}
	if !strings.Contains(dom, `<li data-cause="queueing"><b>Requests are queueing: inflow is above what the pod can serve.</b> Add replicas or shed load`) {
		t.Errorf("no action for queueing")
	}
	if !strings.Contains(dom, "<title>vLLM diagnosis</title>") || !strings.Contains(dom, `<meta http-equiv="refresh" content="5">`) {
		t.Errorf("title or refresh missing")
	}
	charts := regexp.MustCompile(`(?s)<svg class="chart".*?</svg>`).FindAllString(dom, -1)
	if len(charts) != 12 {
		t.Fatalf("%d charts, want 12", len(charts))
	}
	tick := regexp.MustCompile(`<text class="tick"[^>]*>(\d\d:\d\d(:\d\d)?)</text>`)
	for i, ch := range charts {
		if n := len(tick.FindAllString(ch, -1)); n < 3 {
			t.Errorf("chart %d has %d time-axis labels, want at least 3", i, n)
		}
		if !strings.Contains(ch, `<line class="incident"`) {
			t.Errorf("chart %d does not mark the incident's start", i)
		}
	}
	// Red only for changes in the bad direction.
	for _, m := range regexp.MustCompile(`<div class="signal ([a-z]+)( bad| good)?" data-signal="([a-z_0-9]+)" data-bad="(true|false)"`).FindAllStringSubmatch(dom, -1) {
		if (m[2] == " bad") != (m[4] == "true") {
			t.Errorf("signal %s: class %q but bad=%s", m[3], m[2], m[4])
		}
	}
	if regexp.MustCompile(`<script|(src|href)="https?:`).MatchString(dom) {
		t.Errorf("the rendered page holds a script or an external reference")
	}
}

// TestDiagnosisWithoutInputsInBrowser runs the real binary against a page
// that prints no finished-request counter and no TTFT histogram: the
// diagnosis is not ready from the first scrape on, says which inputs the
// server does not print, and never asks to wait.
func TestDiagnosisWithoutInputsInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary and Chromium")
	}
	bin := chromium(t)
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n"+
			"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 0\n"+
			"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{model_name=\"m\"} 1000\n")
	}))
	defer upstream.Close()
	p := testbin.Start(t, "--vllm.scrape-uri="+upstream.URL+"/metrics", "--vllm.scrape-interval=250ms",
		"--diagnosis.window=1s", "--diagnosis.baseline=2s")
	var rep diagnosis.Report
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := json.Unmarshal(mustGet(t, p.URL+"/api/v1/diagnosis").body, &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Models) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no model reported: %+v", rep)
		}
		time.Sleep(250 * time.Millisecond)
	}
	r := rep.Models[0].Readiness
	if r.State != diagnosis.ReadyNoInputs || strings.Join(r.Missing, ",") != "vllm:request_success_total,vllm:time_to_first_token_seconds" {
		t.Fatalf("readiness %+v, want no_inputs naming the finished-request counter and the TTFT histogram", r)
	}
	metrics := string(mustGet(t, p.URL+"/metrics").body)
	if !strings.Contains(metrics, `vllm_diagnosis_ready{model_name="m"} 0`) || strings.Contains(metrics, "vllm_diagnosis_cause{") {
		t.Errorf("/metrics: want vllm_diagnosis_ready 0 and no cause series")
	}
	dom := string(headless(t, bin, "--dump-dom", p.URL+"/diagnosis"))
	want := `id="verdict">Not ready. This server does not print vllm:request_success_total, vllm:time_to_first_token_seconds: no diagnosis.</div>`
	if !strings.Contains(dom, want) || !strings.Contains(dom, `data-ready="false" data-readiness="no_inputs"`) {
		t.Errorf("the page does not say which inputs are missing: %s", regexp.MustCompile(`<div class="banner[^"]*" id="verdict">[^<]*</div>`).FindString(dom))
	}
	if strings.Contains(dom, "too little data") || strings.Contains(dom, "Healthy") {
		t.Errorf("the page asks to wait, or says healthy, where the inputs can never come")
	}
}
