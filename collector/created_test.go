package collector

import (
	"bytes"
	"context"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

// createdLine matches an OpenMetrics _created line.
var createdLine = regexp.MustCompile(`(?m)^[^#\s]+_created[{ ]`)

// startsOn reads an OpenMetrics page as Prometheus does with
// created-timestamp ingestion: each series named name and its start time
// (Unix ms, 0 for none).
func startsOn(t *testing.T, om []byte, name string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	prefix := `{__name__="` + name + `"`
	for k, st := range pagetest.Starts(t, om) {
		if strings.HasPrefix(k, prefix) {
			out[k] = st
		}
	}
	return out
}

// earliestCreated is the earliest of the _created samples of family base
// on an upstream text page, in Unix ms.
func earliestCreated(t *testing.T, page []byte, base string) int64 {
	t.Helper()
	fams, _, err := exposition.Parse(page, exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := math.Inf(1)
	for _, f := range fams {
		for _, s := range f.Samples {
			if s.Name() == base+"_created" {
				first = min(first, s.Value)
			}
		}
	}
	if math.IsInf(first, 1) {
		t.Fatalf("no %s_created on the upstream page", base)
	}
	return int64(first * 1000)
}

// TestCreatedTimestamps: with --output.created-timestamps the summed
// counters and histograms of the compatibility page and of the GenAI view
// carry the start of the engines' counts (the demo's _created times) on
// their OpenMetrics pages, where Prometheus's parser reads them; an
// upstream restart folded into the sums leaves the start as it was (the
// sums never went down). The text pages are the same as without the flag,
// whose OpenMetrics pages have no _created line.
func TestCreatedTimestamps(t *testing.T) {
	const hits, dur = "vllm:prefix_cache_hits_total", "gen_ai_server_request_duration_seconds_count"
	c, clock, up, scrape, first := sumsDemo(t, 3, func(cfg *Config) { cfg.CreatedTimestamps = true })
	plain, plainClock, _, plainScrape, _ := sumsDemo(t, 3)
	check := func(what string, wantHits, wantDur int64) {
		t.Helper()
		snap := c.snap.Load()
		compat, _ := snap.compat.OpenMetrics()
		genai, _ := snap.genai.OpenMetrics()
		for name, want := range map[string]int64{hits: wantHits, dur: wantDur} {
			page := compat
			if strings.HasPrefix(name, "gen_ai") {
				page = genai
			}
			got := startsOn(t, page, name)
			if len(got) == 0 {
				t.Fatalf("%s: no %s", what, name)
			}
			for k, st := range got {
				if st != want {
					t.Errorf("%s: %s starts at %d, want %d", what, k, st, want)
				}
			}
		}
	}
	wantHits, wantDur := earliestCreated(t, first, "vllm:prefix_cache_hits"), earliestCreated(t, first, "vllm:e2e_request_latency_seconds")
	check("first scrapes", wantHits, wantDur)
	checkFullPage(t, c, first)

	clock.Advance(time.Second)
	plainClock.Advance(time.Second)
	up.Restart()
	restarted := false
	for range 5 {
		clock.Advance(time.Second)
		plainClock.Advance(time.Second)
		page := up.Page()
		scrape(page)
		plainScrape(page)
		restarted = restarted || c.history.LastObservation().ProcessRestarted
	}
	if !restarted {
		t.Fatal("the history saw no restart")
	}
	check("after a restart", wantHits, wantDur)
	checkFullPage(t, c, up.Page())

	snap, plainSnap := c.snap.Load(), plain.snap.Load()
	if !bytes.Equal(snap.compat.Text(), plainSnap.compat.Text()) || !bytes.Equal(snap.genai.Text(), plainSnap.genai.Text()) {
		t.Error("the text pages differ with --output.created-timestamps")
	}
	for what, p := range map[string]interface{ OpenMetrics() ([]byte, []byte) }{"compatibility page": plainSnap.compat, "GenAI view": plainSnap.genai, "full page": plainSnap.page} {
		if om, _ := p.OpenMetrics(); createdLine.Match(om) {
			t.Errorf("%s without the flag has _created lines", what)
		}
	}
}

// checkFullPage: on the full page each engine's own series of the server
// keeps the start its server printed for it (its _created sample on page,
// the upstream page last scraped): after a restart, the new one.
func checkFullPage(t *testing.T, c *Collector, page []byte) {
	t.Helper()
	fams, _, err := exposition.Parse(page, exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, f := range fams {
		for _, s := range f.Samples {
			if s.Name() == "vllm:prefix_cache_hits_created" {
				b := labels.NewBuilder(s.Labels)
				b.Set("__name__", "vllm:prefix_cache_hits_total")
				want[b.Labels().String()] = int64(s.Value * 1000)
			}
		}
	}
	om, _ := c.snap.Load().page.OpenMetrics()
	got := startsOn(t, om, "vllm:prefix_cache_hits_total")
	if len(got) != len(want) || len(got) < 2 {
		t.Fatalf("full page: %d engines' hits series %v, the upstream dates %d %v", len(got), got, len(want), want)
	}
	for k, st := range got {
		if w, ok := want[k]; !ok || st != w {
			t.Errorf("full page: %s starts at %d, its server printed %d", k, st, w)
		}
	}
}

// TestCreatedOwnCounters: with the flag the sidecar's own counters carry
// the time each series was made (on the collector's clock), and the
// counters registered with client_golang the start it keeps for them.
func TestCreatedOwnCounters(t *testing.T) {
	clock := newFakeClock()
	made := clock.Now()
	reg := prometheus.NewRegistry()
	c := newTestCollector(t, "http://127.0.0.1:1/metrics", clock, func(cfg *Config) {
		cfg.CreatedTimestamps = true
		cfg.Registry, cfg.Gatherer = reg, reg
	})
	before := time.Now()
	reloads := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_reloads_total", Help: "A counter cmd/ could register."})
	after := time.Now()
	reg.MustRegister(reloads)
	clock.Advance(time.Minute)
	c.ScrapeOnce(context.Background()) // fails: nothing listens there
	om, _ := c.snap.Load().page.OpenMetrics()
	failures := startsOn(t, om, "vllm_normalizer_scrape_failures_total")
	if len(failures) < 2 {
		t.Fatalf("%d series of vllm_normalizer_scrape_failures_total:\n%s", len(failures), om)
	}
	for k, st := range failures {
		if st != made.UnixMilli() {
			t.Errorf("%s starts at %d, want the collector's start %d", k, st, made.UnixMilli())
		}
	}
	registered := startsOn(t, om, "test_reloads_total")
	if len(registered) != 1 {
		t.Fatalf("test_reloads_total: %v", registered)
	}
	for k, st := range registered {
		if st < before.UnixMilli() || st > after.UnixMilli() {
			t.Errorf("%s starts at %d, want client_golang's start of it, in [%d, %d]", k, st, before.UnixMilli(), after.UnixMilli())
		}
	}
}
