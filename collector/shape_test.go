package collector

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/serve"
)

// scaledValues returns page with every series' value v written as v*k+1:
// a page of the same shape with other values.
func scaledValues(t *testing.T, page []byte, k float64) []byte {
	t.Helper()
	var out bytes.Buffer
	for line := range strings.Lines(string(page)) {
		body := strings.TrimSuffix(line, "\n")
		if body == "" || body[0] == '#' {
			out.WriteString(line)
			continue
		}
		// the value follows the labels (or the name) after a space
		at := strings.LastIndexByte(body, '}') + 1
		rest := strings.Fields(body[at:])
		if at == 0 {
			rest = strings.Fields(body)[1:]
			at = strings.IndexAny(body, " \t")
		}
		v, err := strconv.ParseFloat(rest[0], 64)
		if err != nil {
			t.Fatalf("value of %q: %v", body, err)
		}
		rest[0] = strconv.FormatFloat(v*k+1, 'g', -1, 64)
		out.WriteString(body[:at] + " " + strings.Join(rest, " ") + "\n")
	}
	return out.Bytes()
}

// TestShapeKeptMatchesFresh: a collector that keeps what depends only on
// a page's shape (shapeKept, the views' encoded lines and their families'
// order) serves, after every scrape, byte for byte
// the pages of a collector that finds it all again every scrape, on the
// same pages: the demo's moving values, a V0 page with legacy names, a
// vLLM V1 page and an SGLang page with their values changed, the demo
// again and with more engines, a mapper reloaded midway. Both keep
// windows and diagnoses, so a wrong structure kept would show in the
// derived gauges, the statuses or the views.
func TestShapeKeptMatchesFresh(t *testing.T) {
	clock := newFakeClock()
	one, err := demo.New(demo.Options{Now: clock.Now, Seed: 1, Engines: 1})
	if err != nil {
		t.Fatal(err)
	}
	two, err := demo.New(demo.Options{Now: clock.Now, Seed: 1, Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	fixture := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	v0 := fixture("02-vllm-0.4.3to0.5.0-datadog-vllm-fixture.prom")
	v1 := fixture("13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	sglang := fixture("04-sglang-0.3.x-sglang-docs-production_metrics.prom")

	var mu sync.Mutex
	var page []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(page)
	}))
	t.Cleanup(srv.Close)
	collector := func() *Collector {
		d, err := diagnosis.New(diagnosis.Options{Window: 30 * time.Second, Baseline: 150 * time.Second, MinChange: 0.25, Interval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return newTestCollector(t, srv.URL+"/metrics", clock, func(cfg *Config) { cfg.Diagnosis = d })
	}
	kept, fresh := collector(), collector()

	steps := []struct {
		what  string
		n     int
		page  func(i int) []byte
		after func()
	}{
		{"demo, one engine", 40, func(int) []byte { return one.Page() }, nil},
		{"V0 page, legacy names", 5, func(i int) []byte { return scaledValues(t, v0, float64(i+1)) }, nil},
		{"V1 page", 5, func(i int) []byte { return scaledValues(t, v1, float64(i+1)) }, nil},
		{"SGLang page", 5, func(i int) []byte { return scaledValues(t, sglang, float64(i+1)) }, nil},
		{"demo again", 10, func(int) []byte { return one.Page() }, func() {
			// a reload: another Mapper, the same configuration
			m := testMapper(t, mapping.Options{})
			kept.mapper.Store(m)
			fresh.mapper.Store(m)
		}},
		{"demo after the reload", 10, func(int) []byte { return one.Page() }, nil},
		{"demo, two engines", 10, func(int) []byte { return two.Page() }, nil},
	}
	hits := 0
	for _, st := range steps {
		for i := range st.n {
			clock.Advance(time.Second)
			mu.Lock()
			page = st.page(i)
			mu.Unlock()
			last := kept.shape.id
			kept.ScrapeOnce(context.Background())
			fresh.shape = shapeKept{} // finds everything again
			for _, e := range []*serve.Encoder{&fresh.routingEnc, &fresh.compatEnc, &fresh.genaiEnc} {
				e.KeepLines() // empty: every line encoded afresh
			}
			fresh.routingOrder, fresh.compatOrder = keptOrder{}, keptOrder{} // sorted afresh
			fresh.fullOrder, fresh.runtimeOrder = keptOrder{}, keptOrder{}
			fresh.ScrapeOnce(context.Background())
			if last != 0 && last == kept.scratch.Shape() {
				hits++
			}
			for _, h := range []struct {
				name string
				k, f http.Handler
				path string
			}{
				{"/metrics", kept.MetricsHandler(), fresh.MetricsHandler(), "/metrics"},
				{"/metrics/routing", kept.RoutingHandler(), fresh.RoutingHandler(), "/metrics/routing"},
				{"compatibility page", kept.CompatHandler(), fresh.CompatHandler(), "/metrics"},
				{"/metrics/genai", kept.GenAIHandler(), fresh.GenAIHandler(), "/metrics/genai"},
			} {
				got, want := get(t, h.k, h.path, nil), get(t, h.f, h.path, nil)
				if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
					t.Fatalf("%s, scrape %d: %s differs from a collector's that keeps nothing (%d against %d):\n%s",
						st.what, i, h.name, got.Code, want.Code, lineDiff(want.Body.String(), got.Body.String()))
				}
			}
		}
		if st.after != nil {
			st.after()
		}
	}
	t.Logf("%d of %d scrapes read a page of the last one's shape", hits, 85)
	if hits < 60 {
		t.Fatalf("%d scrapes read a page of the last one's shape, want most of them: the test would not test the kept shape", hits)
	}
}
