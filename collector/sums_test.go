package collector

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// The summed counters and histograms of the compatibility page and of the
// GenAI view follow one restart rule, the history's (issue 32). The demo
// upstream (vllm-v1.prom, two data-parallel engines) restarts as vLLM does:
// counters from zero, _created and process_start_time_seconds at the
// restart time.

// sumsDemo is a collector scraping the demo upstream (two engines) on a
// fake clock, scraped once a second n times; it returns the last page
// scraped. Its windows reach an hour back, so that the history remembers
// a series across a long gap.
func sumsDemo(t *testing.T, n int, opts ...func(*Config)) (c *Collector, clock *fakeClock, up *demo.Upstream, scrape func(page []byte), last []byte) {
	clock = newFakeClock()
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 5, Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	tr := &memTransport{}
	c = newTestCollector(t, "http://127.0.0.1:8000/metrics", clock, func(cfg *Config) {
		cfg.Client = &http.Client{Transport: tr}
		cfg.Windows = []time.Duration{time.Minute, time.Hour}
		for _, o := range opts {
			o(cfg)
		}
	})
	scrape = func(page []byte) {
		tr.page = page
		c.ScrapeOnce(context.Background())
		if c.lastReason != "" {
			t.Fatalf("scrape failed: %s", c.lastReason)
		}
	}
	for range n {
		clock.Advance(time.Second)
		last = up.Page()
		scrape(last)
	}
	return c, clock, up, scrape, last
}

// total sums the samples named name on a text page, over every label set.
func total(t *testing.T, page []byte, name string) float64 {
	t.Helper()
	fams, _, err := exposition.Parse(page, exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, n := 0.0, 0
	for _, f := range fams {
		for _, s := range f.Samples {
			if s.Name() == name {
				sum += s.Value
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("no %s on the page", name)
	}
	return sum
}

// bucketsByLe returns the buckets of the histogram samples named name
// (one model on the page), in order of their bounds, and checks that they
// are cumulative: a summed histogram whose buckets are not is no histogram.
func checkCumulative(t *testing.T, what string, page []byte, name string) {
	t.Helper()
	fams, _, err := exposition.Parse(page, exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type bucket struct{ le, v float64 }
	var bs []bucket
	for _, f := range fams {
		for _, s := range f.Samples {
			if s.Name() == name {
				le, err := strconv.ParseFloat(s.Labels.Get(model.BucketLabel), 64)
				if err != nil {
					t.Fatal(err)
				}
				bs = append(bs, bucket{le, s.Value})
			}
		}
	}
	if len(bs) < 3 {
		t.Fatalf("%s: %d buckets of %s", what, len(bs), name)
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	for i := 1; i < len(bs); i++ {
		if bs[i].v < bs[i-1].v {
			t.Fatalf("%s: %s is not cumulative: le=%v holds %v, le=%v %v", what, name, bs[i-1].le, bs[i-1].v, bs[i].le, bs[i].v)
		}
	}
}

// fastRestart restarts the demo upstream and returns its page 45 minutes
// later, unscraped meanwhile (the demo moves one step per page): the
// counters named have counted past their values on last.
func fastRestart(t *testing.T, clock *fakeClock, up *demo.Upstream, last []byte, names ...string) []byte {
	t.Helper()
	clock.Advance(time.Second)
	up.Restart()
	var page []byte
	for range 45 * 60 {
		clock.Advance(time.Second)
		page = up.Page()
	}
	for _, name := range names {
		if total(t, page, name) <= total(t, last, name) {
			t.Fatalf("%s counted %v since the restart, not past its %v before: no fast restart", name, total(t, page, name), total(t, last, name))
		}
	}
	return page
}

// A fast restart (vLLM restarted and counted past its old totals before
// the next scrape) is a restart the page announces: the compatibility
// page's sums and the GenAI view's add the new counts to the old ones,
// agreeing with each other, where "higher is no restart" read only the
// difference (fails before the sums used the history's judgement).
func TestSumsFastRestartAnnounced(t *testing.T) {
	c, clock, up, scrape, last := sumsDemo(t, 30)
	const hits, count = "vllm:prefix_cache_hits_total", "vllm:e2e_request_latency_seconds_count"
	page := fastRestart(t, clock, up, last, hits, count)
	scrape(page)
	if c.history.LastObservation().Restarts == 0 {
		t.Fatal("the history saw no restart")
	}
	snap := c.snap.Load()
	compat, genai := snap.compat.Text(), snap.genai.Text()
	for _, name := range []string{hits, count} {
		want := total(t, last, name) + total(t, page, name)
		if got := total(t, compat, name); got != want {
			t.Errorf("compatibility page %s = %v after a fast restart, want %v (%v before it plus %v since)", name, got, want, total(t, last, name), total(t, page, name))
		}
	}
	if g, w := total(t, genai, "gen_ai_server_request_duration_seconds_count"), total(t, compat, count); g != w {
		t.Errorf("the GenAI view counts %v requests, the compatibility page %v", g, w)
	}
}

// One bucket of one engine one lower for a single scrape (a glitch, not a
// restart: nothing announces one, and the next scrape is back) is held,
// never added to the sum: the summed histograms stay cumulative, and once
// the bucket is back every sum is the plain sum again (fails while a lower
// value was a restart at once: the bucket's whole count stayed in the sum
// for good, above the +Inf bucket).
func TestSumsOneScrapeDip(t *testing.T) {
	c, clock, up, scrape, last := sumsDemo(t, 10)
	const bucket = "vllm:e2e_request_latency_seconds_bucket"
	// The highest finite bucket of engine 0: near the count, so that
	// counting it twice puts it above +Inf.
	re := regexp.MustCompile(`(?m)^vllm:e2e_request_latency_seconds_bucket\{engine="0",le="([0-9.e+]+)",model_name="[^"]*"\} ([0-9.e+]+)$`)
	highest := func(page []byte) []int {
		ms := re.FindAllSubmatchIndex(page, -1)
		if len(ms) == 0 {
			t.Fatal("no finite bucket of engine 0 on the demo page")
		}
		return ms[len(ms)-1]
	}
	for i, step := range []string{"dip", "back", "on"} {
		clock.Advance(time.Second)
		page := up.Page()
		if step == "dip" {
			// One below what the last scrape read: lower than before.
			m, was := highest(page), highest(last)
			v, _ := strconv.ParseFloat(string(last[was[4]:was[5]]), 64)
			page = slices.Concat(page[:m[4]], []byte(strconv.FormatFloat(v-1, 'f', -1, 64)), page[m[5]:])
		}
		scrape(page)
		snap := c.snap.Load()
		compat, genai := snap.compat.Text(), snap.genai.Text()
		checkCumulative(t, step+": compatibility page", compat, bucket)
		checkCumulative(t, step+": GenAI view", genai, "gen_ai_server_request_duration_seconds_bucket")
		if i == 0 {
			continue
		}
		// Back: every bucket is the plain sum of the engines'.
		upstream := samplesByLe(t, page, bucket)
		for le, got := range samplesByLe(t, compat, bucket) {
			if want := upstream[le]; got != want {
				t.Errorf("%s: compatibility page le=%s %v, want the plain sum %v", step, le, got, want)
			}
		}
	}
	if bytes.Contains(c.snap.Load().page.Text(), []byte("vllm_normalizer_upstream_restarts_detected_total 1")) {
		t.Error("a dip was counted as a restart")
	}
}

// samplesByLe sums the samples named name per le.
func samplesByLe(t *testing.T, page []byte, name string) map[string]float64 {
	t.Helper()
	fams, _, err := exposition.Parse(page, exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.Samples {
			if s.Name() == name && s.Labels.Get(mapping.LabelModel) != "" && !math.IsNaN(s.Value) {
				out[s.Labels.Get(model.BucketLabel)] += s.Value
			}
		}
	}
	return out
}
