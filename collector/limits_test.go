package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/scrape"
)

// derivedByEngine parses a page and returns, per engine label value ("" for
// the per-model gauges), the set of derived series, and the value of the
// named single-series gauge.
func derivedByEngine(t *testing.T, body []byte, gauge string) (map[string]map[string]bool, float64, bool) {
	t.Helper()
	fams, _, err := exposition.Parse(body, "text/plain", exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	v, found := 0.0, false
	for _, f := range fams {
		if f.Name == gauge && len(f.Samples) == 1 {
			v, found = f.Samples[0].Value, true
		}
		if !strings.HasPrefix(f.Name, "vllm_derived_") {
			continue
		}
		for _, s := range f.Samples {
			e := s.Labels.Get(mapping.LabelEngine)
			if out[e] == nil {
				out[e] = map[string]bool{}
			}
			b := s.Labels.Copy()
			// The engine's own label aside, every engine has the same series.
			out[e][strings.Replace(b.String(), `engine="`+e+`"`, "", 1)] = true
		}
	}
	return out, v, found
}

// scrapeDemo scrapes a demo upstream of n engines three times, 15 s
// apart, with the given limits, and returns the full page and the routing
// view.
func scrapeDemo(t *testing.T, engines, maxSeries int, maxBody int64) (page, routing []byte, c *Collector) {
	t.Helper()
	clock := newFakeClock()
	up, err := demo.New(demo.Options{Now: clock.Now, Seed: 3, Engines: engines})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	c = newTestCollector(t, srv.URL+"/metrics", clock, func(cfg *Config) {
		cfg.MaxSeries, cfg.MaxBodyBytes = maxSeries, maxBody
		// A 4 MiB page may take seconds to read under -race on a busy
		// machine: the fake interval leaves the real timeout room.
		cfg.Interval, cfg.Timeout = 15*time.Second, 15*time.Second
	})
	for range 3 {
		// A scrape the busy machine starved past the real timeout is
		// retried at the same instant: the page did not move, and the
		// test judges the caps, not the machine's speed.
		for try := 1; ; try++ {
			c.ScrapeOnce(context.Background())
			if c.lastReason != scrape.ReasonTimeout {
				break
			}
			if try == 4 {
				t.Fatalf("%d engines: 4 scrapes in a row timed out after %s each", engines, c.cfg.Timeout)
			}
			t.Logf("%d engines: a scrape timed out after %s on a busy machine; retried", engines, c.cfg.Timeout)
		}
		if c.lastReason != "" {
			t.Fatalf("%d engines: the scrape failed: %s", engines, c.lastReason)
		}
		clock.Advance(15 * time.Second)
	}
	clock.Advance(-15 * time.Second)
	return get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes(), get(t, c.CompatHandler(), "/metrics", nil).Body.Bytes(), c
}

// TestDefaultSeriesCapAdmitsDefaultPages: the largest data-parallel vLLM V1
// page the default body limit admits (the demo's, 88 kept series an
// engine), and the 64-engine page of 2.5 MB, are kept whole by the default
// series limit: every engine has the derived gauges it has without any
// limit, the
// model has its gauges on the routing view, and
// vllm_normalizer_history_limited is 0 on both pages. With the old default
// of 5000 the cap bit at 57 engines.
func TestDefaultSeriesCapAdmitsDefaultPages(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): builds and scrapes demos of a hundred engines (a minute or two)")
	}
	// A demo of a hundred engines takes seconds to build under -race, so
	// the two sizes that bound the answer are measured side by side, on a
	// clock that stands still (the page is not advanced while measured).
	sizes := func(engines ...int) []int {
		out := make([]int, len(engines))
		errs := make([]error, len(engines))
		var wg sync.WaitGroup
		for i, n := range engines {
			wg.Go(func() {
				up, err := demo.New(demo.Options{Now: newFakeClock().Now, Seed: 3, Engines: n})
				if err != nil {
					errs[i] = err
					return
				}
				out[i] = len(up.Page())
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Pages grow by the same bytes an engine: start from that estimate.
	small := sizes(1, 2)
	largest := 1 + (DefaultMaxBodyBytes-small[0])/(small[1]-small[0])
	for {
		s := sizes(largest, largest+1)
		if s[0] > DefaultMaxBodyBytes {
			largest--
		} else if s[1] <= DefaultMaxBodyBytes {
			largest++
		} else {
			break
		}
	}
	t.Logf("the largest demo page within %d bytes has %d engines", DefaultMaxBodyBytes, largest)
	for _, engines := range []int{64, largest} {
		// The capped and the uncapped scrape run side by side: under -race
		// each takes a minute or more on a busy machine.
		var page, routing, unlimited []byte
		var c *Collector
		t.Run(fmt.Sprintf("%d engines", engines), func(t *testing.T) {
			t.Run("default cap", func(t *testing.T) {
				t.Parallel()
				page, routing, c = scrapeDemo(t, engines, DefaultMaxSeries, DefaultMaxBodyBytes)
			})
			t.Run("no cap", func(t *testing.T) {
				t.Parallel()
				unlimited, _, _ = scrapeDemo(t, engines, 0, DefaultMaxBodyBytes)
			})
		})
		if c == nil || unlimited == nil {
			return
		}
		if n := c.history.StoredSeries(); n != 110*engines {
			t.Errorf("%d engines: the history keeps %d series, want 110 an engine (%d)", engines, n, 110*engines)
		}
		byEngine, limited, ok := derivedByEngine(t, page, HistoryLimitedName)
		if !ok || limited != 0 {
			t.Errorf("%d engines: %s on /metrics = %v (present %v), want 0", engines, HistoryLimitedName, limited, ok)
		}
		// The same series as with no limit at all.
		want, _, _ := derivedByEngine(t, unlimited, HistoryLimitedName)
		// Gauges across the model's engines (imbalance, spread) have no engine.
		delete(byEngine, "")
		delete(want, "")
		if len(byEngine) != engines || len(want) != engines {
			t.Errorf("%d engines: derived series on %d engines, %d without a limit", engines, len(byEngine), len(want))
		}
		for e, w := range want {
			if got := byEngine[e]; len(got) != len(w) {
				t.Errorf("%d engines: engine %s has %d derived series, %d without a limit", engines, e, len(got), len(w))
			}
		}
		perModel, limited, ok := derivedByEngine(t, routing, HistoryLimitedName)
		if !ok || limited != 0 {
			t.Errorf("%d engines: %s on the routing view = %v (present %v), want 0", engines, HistoryLimitedName, limited, ok)
		}
		if len(perModel[""]) < 20 {
			t.Errorf("%d engines: the routing view has %d derived series, want them all", engines, len(perModel[""]))
		}
	}
}

// TestSeriesCapAllOrNothing: when the series limit bites (64 engines, 5000
// series: room for 56 of them), the model has none of its derived gauges on
// either page, where it used to keep those of 56 engines on /metrics (a sum
// over engines reading 12 % less load) and 3 on the routing view; and
// vllm_normalizer_history_limited says so on both pages. The model is left
// out whole as it does not fit (--history.max-models' admission).
func TestSeriesCapAllOrNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): scrapes a 64-engine demo for windows of history")
	}
	page, routing, _ := scrapeDemo(t, 64, 5000, DefaultMaxBodyBytes)
	for name, body := range map[string][]byte{"/metrics": page, "/metrics/routing": routing} {
		byEngine, limited, ok := derivedByEngine(t, body, HistoryLimitedName)
		if !ok || limited != 1 {
			t.Errorf("%s: %s = %v (present %v), want 1", name, HistoryLimitedName, limited, ok)
		}
		n := 0
		for _, s := range byEngine {
			n += len(s)
		}
		if n != 0 {
			t.Errorf("%s: %d derived series of a model the cap bit, on %d engines; want none", name, n, len(byEngine))
		}
	}
	// The model does not fit: it is left out whole before the history
	// sees it, so no sample of it is windowed either.
	if _, n, _ := derivedByEngine(t, page, "vllm_normalizer_history_models_left_out"); n != 1 {
		t.Errorf("%v models left out, want the 1 that does not fit", n)
	}
}

// TestRoutingViewSizeWhateverTheEngines: the endpoint pickers' page of a
// one-model pod stays within 4 KB with 1, 4 and 16 data-parallel engines.
func TestRoutingViewSizeWhateverTheEngines(t *testing.T) {
	for _, engines := range []int{1, 4, 16} {
		_, _, c := scrapeDemo(t, engines, DefaultMaxSeries, DefaultMaxBodyBytes)
		rec := get(t, c.RoutingHandler(), "/metrics/routing", nil)
		if rec.Code != 200 || rec.Body.Len() > 4096 || rec.Body.Len() < 1024 {
			t.Errorf("%d engines: routing view %d, %d bytes; want 200 and at most 4096 bytes (and the gauges: at least 1 KB)", engines, rec.Code, rec.Body.Len())
		}
		t.Logf("%d engines: %d bytes", engines, rec.Body.Len())
	}
}
