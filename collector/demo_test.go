package collector

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/exposition"
)

// derivedNames is the public contract of the derived gauges.
var derivedNames = []string{
	"vllm_derived_preemptions_per_second",
	"vllm_derived_prefix_cache_hit_ratio",
	"vllm_derived_external_prefix_cache_hit_ratio",
	"vllm_derived_queue_time_mean_seconds",
	"vllm_derived_prefill_time_mean_seconds",
	"vllm_derived_decode_time_mean_seconds",
	"vllm_derived_ttft_queue_ratio",
	"vllm_derived_ttft_seconds",
	"vllm_derived_inter_token_latency_seconds",
	"vllm_derived_e2e_latency_seconds",
	"vllm_derived_prompt_tokens_per_second",
	"vllm_derived_generation_tokens_per_second",
	"vllm_derived_requests_per_second",
	"vllm_derived_prompt_tokens_mean",
	"vllm_derived_generation_tokens_mean",
	"vllm_derived_slo_attainment_ratio",
	"vllm_derived_generation_tokens_per_second_per_request",
}

// nowNames are the derived gauges of the current scrape: no window label.
var nowNames = []string{
	"vllm_derived_requests_in_flight",
	"vllm_derived_kv_cache_free_tokens",
	"vllm_derived_idle_seconds",
}

// demoSLOs are SLO targets on the demo's bucket bounds and between them.
var demoSLOs = derive.SLOTargets{
	TTFT: []time.Duration{500 * time.Millisecond, 700 * time.Millisecond},
	TPOT: []time.Duration{50 * time.Millisecond},
	E2E:  []time.Duration{10 * time.Second},
}

// TestDemoGolden runs the sidecar against the --demo upstream (two
// data-parallel engines) for six simulated minutes on a fake clock and
// checks that the page serves every derived gauge for both windows and
// both engines, and that the routing view holds one series per model.
// The pages are kept as goldens: testdata/golden/sidecar-demo.metrics is
// the sidecar's real output that the dashboard tests check names against.
func TestDemoGolden(t *testing.T) {
	// The diagnosis with short windows, so that six minutes fill them.
	c, _, clock := diagnosedDemo(t, demo.Options{Seed: 7, Engines: 2},
		diagnosis.Options{Window: 30 * time.Second, Baseline: 150 * time.Second, MinChange: 0.25, Interval: time.Second},
		func(cfg *Config) { cfg.SLOs = demoSLOs })
	for range 6 * 60 {
		c.ScrapeOnce(context.Background())
		clock.Advance(time.Second)
	}
	clock.Advance(-time.Second) // serve as of the last scrape
	page := get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()
	checkValidPage(t, page)
	fams, _, err := exposition.Parse(page, "text/plain", exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]exposition.Family{}
	for _, f := range fams {
		byName[f.Name] = f
	}
	for _, name := range nowNames {
		f, ok := byName[name]
		if !ok {
			t.Errorf("%s is missing from the demo page", name)
			continue
		}
		seen := map[string]bool{}
		for _, s := range f.Samples {
			if s.Labels.Has("window") {
				t.Errorf("%s has a window label", s.Labels)
			}
			seen[s.Labels.Get("engine")] = true
		}
		if !seen["0"] || !seen["1"] || len(f.Samples) != 2 {
			t.Errorf("%s: %d series, want one per engine 0 and 1", name, len(f.Samples))
		}
	}
	les := map[string]bool{}
	for _, s := range byName["vllm_derived_slo_attainment_ratio"].Samples {
		les[s.Labels.Get("slo")+"/"+s.Labels.Get("target")] = true
	}
	for _, want := range []string{"ttft/0.5", "ttft/0.7", "tpot/0.05", "e2e/10.0"} {
		if !les[want] {
			t.Errorf("vllm_derived_slo_attainment_ratio has no slo/target %s: %v", want, les)
		}
	}
	for _, name := range derivedNames {
		f, ok := byName[name]
		if !ok {
			t.Errorf("%s is missing from the demo page", name)
			continue
		}
		seen := map[string]bool{}
		for _, s := range f.Samples {
			seen[s.Labels.Get("engine")+"/"+s.Labels.Get("window")] = true
		}
		for _, want := range []string{"0/1m", "0/5m", "1/1m", "1/5m"} {
			if !seen[want] {
				t.Errorf("%s has no series for engine/window %s", name, want)
			}
		}
	}

	for _, name := range []string{diagnosis.FamilyChangeRatio, diagnosis.FamilySymptom, diagnosis.FamilyCause} {
		f, ok := byName[name]
		if !ok {
			t.Errorf("%s is missing from the demo page", name)
			continue
		}
		for _, s := range f.Samples {
			if s.Labels.Get("model_name") != "TinyLlama" || s.Labels.Has("engine") {
				t.Errorf("%s: series %s, want one per model_name, engines collapsed", name, s.Labels)
			}
		}
	}

	compat := checkRouterPage(t, "compatibility page", get(t, c.CompatHandler(), "/metrics", nil))
	cnames := familyNames(t, compat)
	for _, name := range []string{diagnosis.FamilyChangeRatio, diagnosis.FamilySymptom, diagnosis.FamilyCause} {
		if !cnames[name] {
			t.Errorf("compatibility page: %s is missing", name)
		}
	}
	// The endpoint pickers' page: gauges only, within 4 KB.
	routing := checkRouterPage(t, "routing view", get(t, c.RoutingHandler(), "/metrics/routing", nil))
	rfams, _, _ := exposition.Parse(routing, "text/plain", exposition.ParseOptions{})
	for _, f := range rfams {
		if f.Type != model.MetricTypeGauge {
			t.Errorf("routing view: %s is a %s; the endpoint pickers' page holds gauges only", f.Name, f.Type)
		}
	}
	if len(routing) > 4096 {
		t.Errorf("routing view of a one-model pod is %d bytes, want at most 4096", len(routing))
	}
	compareGolden(t, filepath.Join("..", "testdata", "golden", "sidecar-demo.metrics"), page)
	compareGolden(t, filepath.Join("..", "testdata", "golden", "sidecar-demo-routing.metrics"), routing)
	compareGolden(t, filepath.Join("..", "testdata", "golden", "sidecar-demo-compat.metrics"), compat)
	// The live pages lint clean too (lint_test.go).
	pt := promtoolPath(t)
	lintPage(t, pt, "demo /metrics", page)
	lintPage(t, pt, "demo /metrics/routing", routing)
	lintPage(t, pt, "demo compatibility page", compat)
}

// diagnosedDemo runs a collector with a diagnosis of dopts against a demo
// upstream of opts, both on one fake clock, and no timeout a busy machine
// meets; extra configures the collector.
func diagnosedDemo(t *testing.T, opts demo.Options, dopts diagnosis.Options, extra func(*Config)) (*Collector, *diagnosis.Diagnoser, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	opts.Now = clock.Now
	up, err := demo.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	d, err := diagnosis.New(dopts)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCollector(t, srv.URL+"/metrics", clock, func(cfg *Config) {
		cfg.Diagnosis = d
		if extra != nil {
			extra(cfg)
		}
	})
	// The clock is fake but the scrape timeout real, at most the 1 s
	// interval Config allows: a process stalled past it on a busy machine
	// failed a scrape and the golden (a timeout counted); none of these
	// tests times a scrape out.
	c.cfg.Timeout = 10 * time.Minute
	return c, d, clock
}

// checkRouterPage checks a router-facing page: 200, valid, one series per
// model of every vllm: family (per sample name and bucket bound for a
// histogram), no engine label. It returns the body.
func checkRouterPage(t *testing.T, what string, rec *httptest.ResponseRecorder) []byte {
	t.Helper()
	if rec.Code != 200 {
		t.Fatalf("%s answered %d", what, rec.Code)
	}
	body := rec.Body.Bytes()
	checkValidPage(t, body)
	fams, _, _ := exposition.Parse(body, "text/plain", exposition.ParseOptions{})
	for _, f := range fams {
		if !strings.HasPrefix(f.Name, "vllm:") {
			continue
		}
		perSeries := map[string]int{}
		for _, s := range f.Samples {
			perSeries[s.Name()+"/"+s.Labels.Get("le")]++
		}
		for series, n := range perSeries {
			if n != 1 {
				t.Errorf("%s: %s has %d series of %s, want one per model", what, f.Name, n, series)
			}
		}
		for _, s := range f.Samples {
			if s.Labels.Has("engine") {
				t.Errorf("%s: %s keeps the engine label", what, s.Labels)
			}
		}
	}
	return body
}

func familyNames(t *testing.T, page []byte) map[string]bool {
	t.Helper()
	fams, _, _ := exposition.Parse(page, "text/plain", exposition.ParseOptions{})
	out := map[string]bool{}
	for _, f := range fams {
		out[f.Name] = true
	}
	return out
}

// TestDemoRanksBalanced: the default demo with two data-parallel engines is
// a healthy pod whose ranks share one inflow, so fifteen simulated minutes
// of its load never name a rank imbalance.
func TestDemoRanksBalanced(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): runs the demo for minutes of simulated time, three seeds")
	}
	for _, seed := range []int64{1, 7, 42} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { demoRanksBalanced(t, seed) })
	}
}

func demoRanksBalanced(t *testing.T, seed int64) {
	// Scrapes 2 s apart: a scrape is most of this test's cost under -race.
	const every = 2 * time.Second
	c, d, clock := diagnosedDemo(t, demo.Options{Seed: seed, Engines: 2},
		diagnosis.Options{Window: time.Minute, Baseline: 5 * time.Minute, MinChange: 0.25, Interval: every}, nil)
	named, judged := 0, 0
	for range 15 * time.Minute / every {
		c.ScrapeOnce(context.Background())
		clock.Advance(every)
		for _, m := range d.Report().Models {
			if !m.EnoughData {
				continue
			}
			for _, f := range m.Causes {
				if f.Name == diagnosis.CauseRankImbalance {
					judged++
					if f.Active {
						named++
					}
				}
			}
		}
	}
	if judged == 0 {
		t.Fatal("the diagnosis never judged the ranks")
	}
	if named > 0 {
		t.Errorf("rank_imbalance named in %d of %d judged scrapes of a balanced demo", named, judged)
	}
}
