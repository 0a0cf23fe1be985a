package derive_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/internal/mappingtest"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// TestOneSpecEntryIsServed adds a derived gauge by adding one entry to
// the specs' table (export_test.go) and nothing else, and reads it on the
// sidecar's /metrics: with its HELP, per model_name and engine and window,
// and the value its computation gives for a real vLLM V1 page whose prefix
// cache counted 1000 queried tokens, 250 of them hits, between two scrapes.
func TestOneSpecEntryIsServed(t *testing.T) {
	restore := derive.AddMissRatioSpec()
	defer restore()

	page, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	// The second page is the first with the prefix cache counters grown.
	grow := func(page []byte, family string, by float64) []byte {
		re := regexp.MustCompile(`(?m)^(` + regexp.QuoteMeta(family) + `\{[^}]*\}) (\S+)$`)
		return re.ReplaceAllFunc(page, func(line []byte) []byte {
			m := re.FindSubmatch(line)
			v, err := strconv.ParseFloat(string(m[2]), 64)
			if err != nil {
				t.Fatal(err)
			}
			return []byte(string(m[1]) + " " + strconv.FormatFloat(v+by, 'g', -1, 64))
		})
	}
	second := grow(grow(page, "vllm:prefix_cache_queries_total", 1000), "vllm:prefix_cache_hits_total", 250)
	if bytes.Equal(second, page) {
		t.Fatal("the fixture has no prefix cache counters to grow")
	}
	var scrapes atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if scrapes.Add(1) == 1 {
			w.Write(page)
			return
		}
		w.Write(second)
	}))
	defer upstream.Close()

	m := mappingtest.Mapper(t, mapping.Options{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := collector.New(collector.Config{
		ScrapeURI: upstream.URL, Interval: time.Second, Timeout: time.Second,
		MaxBodyBytes: 32 << 20, SampleLimit: 50000,
		Windows: []time.Duration{time.Minute}, Mapper: m,
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	c.ScrapeOnce(context.Background())
	now = now.Add(time.Second)
	c.ScrapeOnce(context.Background())

	rec := httptest.NewRecorder()
	c.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.Bytes()
	if !bytes.Contains(body, []byte("# HELP "+derive.DerivedPrefixCacheMissRatio+" Prefix cache miss ratio in tokens: 1 - increase(vllm:prefix_cache_hits_total)")) {
		t.Errorf("no HELP with the roles' families for %s on /metrics", derive.DerivedPrefixCacheMissRatio)
	}
	samples := pagetest.Samples(t, body, "text/plain")
	series := func(name string) string {
		return labels.FromStrings("__name__", name, "engine", "0", "model_name", "TinyLlama", "role", "both", "window", "1m").String()
	}
	key := series(derive.DerivedPrefixCacheMissRatio)
	v, ok := samples[key]
	if !ok {
		t.Fatalf("%s is not served", key)
	}
	if v != 0.75 {
		t.Errorf("%s = %v, want 1 - 250/1000 = 0.75", key, v)
	}
	hit := samples[series(derive.DerivedPrefixCacheHitRatio)]
	if v+hit != 1 {
		t.Errorf("miss ratio %v and hit ratio %v do not add up to 1", v, hit)
	}
}
