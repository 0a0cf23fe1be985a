package collector

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
)

// The demo's admission scenario through the whole pipeline on a fake
// clock: before the inflow rises the cap refuses part of the bursts (under
// 30 % of the attempts); a minute after, it refuses most of the surplus
// and both /metrics and the compatibility page say it is at its cap, per
// model (vLLM counts refusals without engine), with the refused share of
// the window's attempts.
func TestDemoAdmissionScenario(t *testing.T) {
	const shift = 90 * time.Second
	clock := newFakeClock()
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 3, Engines: 2, Scenario: demo.ScenarioAdmission, ShiftAfter: shift})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	c := newTestCollector(t, srv.URL+"/metrics", clock, func(cfg *Config) { cfg.Windows = []time.Duration{time.Minute} })
	const (
		atCap = `{__name__="vllm_derived_admission_at_cap", model_name="TinyLlama", role="both", window="1m"}`
		ratio = `{__name__="vllm_derived_admission_rejected_ratio", model_name="TinyLlama", role="both", window="1m"}`
		rate  = `{__name__="vllm_derived_admission_rejections_per_second", model_name="TinyLlama", reason="max_num_queued_reqs", role="both", window="1m"}`
	)
	scrapeUntil := func(d time.Duration) {
		for start := clock.Now(); clock.Now().Sub(start) < d; clock.Advance(time.Second) {
			c.ScrapeOnce(context.Background())
		}
		clock.Advance(-time.Second) // serve as of the last scrape
		c.ScrapeOnce(context.Background())
		clock.Advance(time.Second)
	}
	scrapeUntil(shift - 10*time.Second)
	page := samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	if _, ok := page[atCap]; !ok {
		t.Error("before the shift: no at_cap, though the page has the rejection counter")
	}
	if v, ok := page[ratio]; !ok || v > 0.3 {
		t.Errorf("before the shift: refused share %v (present %v), want under 0.3", v, ok)
	}
	scrapeUntil(70 * time.Second)
	page = samplesOf(t, get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes())
	if v := page[atCap]; v != 1 {
		t.Errorf("a minute after the shift: at_cap %v, want 1\n%v", v, page)
	}
	if v := page[rate]; !(v > 0) {
		t.Errorf("a minute after the shift: %v refusals a second, want some", v)
	}
	if v := page[ratio]; !(v > 0.4 && v < 0.9) {
		t.Errorf("a minute after the shift: refused share %v, want a good part of a 2.5 times higher inflow", v)
	}
	for name := range page {
		if strings.Contains(name, "vllm_derived_admission_") && strings.Contains(name, `engine="`) {
			t.Errorf("%s has an engine label: refusals are counted per model", name)
		}
	}
	cp := samplesOf(t, get(t, c.CompatHandler(), "/metrics", nil).Body.Bytes())
	if v := cp[atCap]; v != 1 {
		t.Errorf("compatibility page: at_cap %v, want 1", v)
	}
}
