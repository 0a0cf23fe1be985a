package pagetest

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// FixturePaths returns every real page under testdata/fixtures.
func FixturePaths(t testing.TB) []string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	paths, err := filepath.Glob(filepath.Join(filepath.Dir(self), "..", "..", "testdata", "fixtures", "*.prom"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures under testdata/fixtures: %v", err)
	}
	return paths
}

// AddFixtureSeeds adds every real page as a seed of f, once with each
// value of the fuzz target's second (bool) argument.
func AddFixtureSeeds(f *testing.F) {
	for _, p := range FixturePaths(f) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
}

// Samples walks a page with Prometheus's parser alone and returns every
// sample as "series -> value", failing the test on any parse error: the
// reference a faithful re-exposition must reproduce.
func Samples(t testing.TB, body []byte, contentType string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	EachSeries(t, body, contentType, func(l labels.Labels, v float64) { out[l.String()] = v })
	return out
}

// EachSeries walks a page with Prometheus's parser alone and calls fn with
// every sample's labels and value in page order, repeats included, failing
// the test on any parse error.
func EachSeries(t testing.TB, body []byte, contentType string, fn func(labels.Labels, float64)) {
	t.Helper()
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{FallbackContentType: "text/plain"})
	if p == nil {
		t.Fatalf("textparse.New: %v", err)
	}
	var l labels.Labels
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("the page does not parse: %v", err)
		}
		if e == textparse.EntrySeries {
			_, _, v := p.Series()
			p.Labels(&l)
			fn(l, v)
		}
	}
}

// Starts reads an OpenMetrics page as a Prometheus scrape with
// created-timestamp ingestion does, and returns every series with its start
// time in Unix ms (0: none), failing the test on any parse error or on a
// _created line read as a series of its own.
func Starts(t testing.TB, om []byte) map[string]int64 {
	t.Helper()
	p, err := textparse.New(om, "application/openmetrics-text; version=1.0.0", labels.NewSymbolTable(), textparse.ParserOptions{OpenMetricsSkipSTSeries: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	var l labels.Labels
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Prometheus's parser rejects the page: %v", err)
		}
		if e != textparse.EntrySeries {
			continue
		}
		p.Labels(&l)
		if strings.HasSuffix(l.Get("__name__"), "_created") {
			t.Fatalf("read %s as a series", l)
		}
		out[l.String()] = p.StartTimestamp()
	}
}
