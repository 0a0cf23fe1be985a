package main

import (
	"context"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/demo"
)

// The history's bounds left unset follow the limits given (the series
// bound the body limit, the model bound the series bound), as their
// defaults follow the defaults; a bound given is kept as given.
func TestHistoryBoundsFollowTheLimits(t *testing.T) {
	for _, tc := range []struct {
		args              []string
		series, maxModels int
	}{
		{nil, 16384, 1638},
		{[]string{"--vllm.max-body-bytes=16MiB"}, 65536, 6553},
		{[]string{"--vllm.max-body-bytes=1MiB"}, 4096, 409},
		// docs/operating.md's bound for the 9,000-model page: its models too
		{[]string{"--history.max-series=126000"}, 126000, 12600},
		{[]string{"--history.max-series=0"}, 0, 0},
		{[]string{"--vllm.max-body-bytes=16MiB", "--history.max-series=20000"}, 20000, 2000},
		{[]string{"--vllm.max-body-bytes=16MiB", "--history.max-models=100"}, 65536, 100},
		{[]string{"--history.max-series=100", "--history.max-models=0"}, 100, 0},
	} {
		f, err := parseFlags(tc.args, io.Discard, io.Discard)
		if err != nil {
			t.Errorf("%v refused: %v", tc.args, err)
			continue
		}
		if cfg := f.collectorConfig(); cfg.MaxSeries != tc.series || cfg.MaxModels != tc.maxModels {
			t.Errorf("%v: series bound %d, model bound %d; want %d, %d", tc.args, cfg.MaxSeries, cfg.MaxModels, tc.series, tc.maxModels)
		}
	}
}

// A page the body limit given admits is kept whole: 190 data-parallel
// engines (about 8 MB, 20,900 history series), beyond the 16,384 series
// of the default body limit, have their derived gauges with
// --vllm.max-body-bytes=16MiB alone (and the sample limit lifted). With the
// fixed series default the one model was left out whole: no derived gauge,
// no diagnosis.
func TestRaisedBodyLimitKeepsItsPage(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): scrapes a 190-engine demo of 8 MB")
	}
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	up, err := demo.New(demo.Options{Now: clock, Seed: 3, Engines: 190})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(up)
	defer srv.Close()
	// A slow interval on a clock that stands still while a page is read:
	// an 8 MB page took more than 15 s to read under -race on a busy machine.
	f, err := parseFlags([]string{"--vllm.scrape-uri=" + srv.URL + "/metrics", "--vllm.max-body-bytes=16MiB", "--vllm.sample-limit=0",
		"--vllm.scrape-interval=1m", "--vllm.timeout=1m", "--derive.window=2m", "--diagnosis.window=2m"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := testMapper(t)
	cfg := f.collectorConfig()
	cfg.Mapper, cfg.Registry, cfg.Now = m, prometheus.NewRegistry(), clock
	coll, err := collector.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		// A scrape the machine starved past the timeout is retried at the
		// same instant: the test judges the bounds, not the machine's speed.
		for try := 1; ; try++ {
			coll.ScrapeOnce(context.Background())
			if _, ok := coll.Families(collector.ViewRouting); ok || try == 3 {
				break
			}
			t.Logf("scrape %d failed on a busy machine; retried", try)
		}
		now = now.Add(time.Minute)
	}
	rec := httptest.NewRecorder()
	coll.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	page := rec.Body.String()
	value := func(name string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no %s on the page (%d bytes)", name, len(page))
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	if up := value("vllm_up"); up != 1 {
		t.Fatalf("vllm_up %v: the page was not read", up)
	}
	series, limited, leftOut := value("vllm_normalizer_history_series"), value("vllm_normalizer_history_limited"), value("vllm_normalizer_history_models_left_out")
	if limited != 0 || leftOut != 0 || series <= float64(collector.DefaultMaxSeries) {
		t.Errorf("history series %v (the default bound %d), limited %v, models left out %v: want the page kept whole", series, collector.DefaultMaxSeries, limited, leftOut)
	}
	engines := map[string]bool{}
	for _, e := range regexp.MustCompile(`(?m)^vllm_derived_\w+\{[^}]*engine="(\d+)"[^}]*window="2m"`).FindAllStringSubmatch(page, -1) {
		engines[e[1]] = true
	}
	if len(engines) != 190 {
		t.Errorf("windowed derived gauges on %d engines, want 190", len(engines))
	}
}
