package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/routing"
)

// manyEnginesPage is a constructed vLLM V1 page (names and labels as
// vLLM's data-parallel pages print them, testdata/fixtures/34-*) of n
// engines whose engine label values are name(i).
func manyEnginesPage(n int, name func(int) string) string {
	var b strings.Builder
	for _, f := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
		fmt.Fprintf(&b, "# TYPE %s gauge\n", f)
		for i := range n {
			fmt.Fprintf(&b, "%s{engine=%q,model_name=\"m\"} 0\n", f, name(i))
		}
	}
	return b.String()
}

// TestEngineNotFoundBounded: the per-engine 404 names at most a few
// engines, each cut short, and how many there are, whatever the page
// prints (1,000 engines named with 4 KB each made a 4 MB body per request)
// or the request asks for.
func TestEngineNotFoundBounded(t *testing.T) {
	long := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("e", 4096) }
	page := manyEnginesPage(1000, long)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(page)) }))
	defer up.Close()
	// A 12 MB page: a minute to read it, so a loaded machine cannot turn
	// the scrape into a timeout (and the 404 into the 503 of a failed one).
	c := newTestCollector(t, up.URL, newFakeClock(), func(cfg *Config) {
		cfg.SampleLimit, cfg.LabelLimits.ValueLength = 0, 0
		cfg.Interval, cfg.Timeout = time.Minute, time.Minute
		cfg.Windows = []time.Duration{5 * time.Minute}
	})
	c.ScrapeOnce(context.Background())
	mux := http.NewServeMux()
	mux.Handle("/metrics/routing/engines/{engine}", c.EngineRoutingHandler())
	for _, ask := range []string{"nope", strings.Repeat("x", 8000)} {
		rec := get(t, mux, "/metrics/routing/engines/"+ask, nil)
		body := rec.Body.String()
		if rec.Code != http.StatusNotFound {
			t.Fatalf("engine %.20s…: %d, want 404: %.300s", ask, rec.Code, body)
		}
		if len(body) > 1024 {
			t.Errorf("404 body is %d bytes, want at most 1 KiB: %.300s…", len(body), body)
		}
		if !strings.Contains(body, "1000 engines") || !strings.Contains(body, "0000eee") {
			t.Errorf("404 body does not name the count and the first engine: %s", body)
		}
	}
	// A known engine is still served.
	if rec := get(t, mux, "/metrics/routing/engines/"+long(7), nil); rec.Code != http.StatusOK {
		t.Errorf("engine 7: %d, want 200", rec.Code)
	}
}

// TestBoundedListCountsInNumber: the count agrees with its noun (the
// 404 of a one-engine page said "(1 engines)").
func TestBoundedListCountsInNumber(t *testing.T) {
	for _, c := range []struct {
		items []string
		want  string
	}{
		{[]string{"0"}, `"0" (1 engine)`},
		{[]string{"0", "1"}, `"0", "1" (2 engines)`},
	} {
		if got := boundedList(c.items, "engines"); got != c.want {
			t.Errorf("boundedList(%q) = %s, want %s", c.items, got, c.want)
		}
	}
}

// BenchmarkEngineList measures listing the engines of a scrape (once per
// scrape, for the per-engine routing pages): linear in the samples, where
// it was quadratic in the engines (931 ms a scrape for 9,000 engines).
func BenchmarkEngineList(b *testing.B) {
	roles := testMapper(b, mapping.Options{}).Catalogue().Roles()
	for _, n := range []int{1, 1000, 9000} {
		fams, _, err := exposition.Parse([]byte(manyEnginesPage(n, func(i int) string { return fmt.Sprint(i) })), "text/plain", exposition.ParseOptions{})
		if err != nil {
			b.Fatal(err)
		}
		own := []exposition.Family{{Name: "vllm_up", Samples: []exposition.Sample{{Labels: labels.FromStrings("__name__", "vllm_up"), Value: 1}}}}
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			for b.Loop() {
				newEngineViews(routing.Input{Canon: fams, Roles: roles}, own, "both").list()
			}
		})
	}
}
