package exposition

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// sameParse fails unless a and b hold the same families, samples, labels,
// values and stats.
func sameParse(t *testing.T, what string, a, b []Family, sa, sb ParseStats) {
	t.Helper()
	if sa != sb {
		t.Fatalf("%s: stats %+v, a fresh parse gives %+v", what, sa, sb)
	}
	if len(a) != len(b) {
		t.Fatalf("%s: %d families, a fresh parse gives %d", what, len(a), len(b))
	}
	for i := range a {
		fa, fb := a[i], b[i]
		if fa.Name != fb.Name || fa.Type != fb.Type || fa.Help != fb.Help || fa.Unit != fb.Unit || len(fa.Samples) != len(fb.Samples) {
			t.Fatalf("%s: family %d is %s/%s/%d samples, a fresh parse gives %s/%s/%d", what, i, fa.Name, fa.Type, len(fa.Samples), fb.Name, fb.Type, len(fb.Samples))
		}
		for j := range fa.Samples {
			x, y := fa.Samples[j], fb.Samples[j]
			if !labels.Equal(x.Labels, y.Labels) || !sameValue(x.Value, y.Value) || x.HasTimestamp != y.HasTimestamp || x.TimestampMs != y.TimestampMs {
				t.Fatalf("%s: sample %v %v, a fresh parse gives %v %v", what, x.Labels, x.Value, y.Labels, y.Value)
			}
		}
	}
}

// A scratch that remembers series from earlier pages parses every later
// page exactly as a fresh parse does: pages whose values move, whose
// series come and go, whose label values, HELP texts and family names are
// rewritten, with invalid and duplicate series, in text and OpenMetrics.
func TestParseMemoMatchesFreshParse(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", "13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(base)
	pages := []struct{ name, contentType, body string }{
		{"fixture", ContentTypeText, page},
		{"same again", ContentTypeText, page},
		{"values moved", ContentTypeText, strings.ReplaceAll(page, " 0.0\n", " 7.0\n")},
		{"engine relabelled", ContentTypeText, strings.ReplaceAll(page, `engine="0"`, `engine="1"`)},
		{"help rewritten", ContentTypeText, strings.ReplaceAll(page, "# HELP vllm:num_requests_running ", "# HELP vllm:num_requests_running Rewritten: ")},
		{"families renamed", ContentTypeText, strings.ReplaceAll(page, "vllm:num_requests_", "vllm:requests_")},
		{"half the series gone", ContentTypeText, page[:strings.LastIndex(page[:len(page)/2], "\n")+1]},
		{"invalid and duplicate series", ContentTypeText, page + "vllm:num_requests_running{engine=\"0\",model_name=\"TinyLlama/TinyLlama-1.1B-Chat-v1.0\"} 9\n" +
			"{\"a.b\"} 1\nx{\"é\"=\"1\"} 2\ny{a=\"1\",a=\"2\"} 3\n"},
		{"a series twice", ContentTypeText, page + "vllm:num_requests_running{engine=\"0\",model_name=\"TinyLlama\"} 9\n"},
		{"a series twice again, in place", ContentTypeText, page + "vllm:num_requests_running{engine=\"0\",model_name=\"TinyLlama\"} 9\n"},
		{"a series twice, spelt otherwise", ContentTypeText, page + "vllm:num_requests_running{model_name=\"TinyLlama\",engine=\"0\"} 9\n"},
		{"a series twice, spelt otherwise, in place", ContentTypeText, page + "vllm:num_requests_running{model_name=\"TinyLlama\",engine=\"0\"} 9\n"},
		{"invalid again", ContentTypeText, page + "{\"a.b\"} 1\nx{\"é\"=\"1\"} 2\n"},
		{"invalid once more", ContentTypeText, page + "{\"a.b\"} 1\nx{\"é\"=\"1\"} 2\n"},
		// The memo first compares each series with the one printed at its
		// place on the last page: places shifted, reordered and repeated.
		{"a series inserted first", ContentTypeText, "a_new_gauge 1\n" + page},
		{"halves swapped", ContentTypeText, page[strings.Index(page[len(page)/2:], "\n# HELP")+len(page)/2+1:] + page[:strings.Index(page[len(page)/2:], "\n# HELP")+len(page)/2+1]},
		{"fixture after the swap", ContentTypeText, page},
		{"openmetrics", ContentTypeOpenMetrics, "# TYPE a counter\na_total{x=\"1\"} 1\n# TYPE b gauge\nb{x=\"1\"} 2\n# EOF\n"},
		{"fixture after openmetrics", ContentTypeText, page},
		// textparse decodes le by the TYPE in effect ("1" becomes "1.0"
		// under a histogram TYPE): the same bytes must not come back with
		// the last page's labels when the TYPE line appears or goes.
		{"untyped bucket", ContentTypeText, "x_bucket{le=\"1\"} 1\nx_bucket{le=\"+Inf\"} 2\n"},
		{"typed bucket", ContentTypeText, "# TYPE x histogram\nx_bucket{le=\"1\"} 1\nx_bucket{le=\"+Inf\"} 2\nx_count 2\nx_sum 3\n"},
		{"untyped again", ContentTypeText, "x_bucket{le=\"1\"} 1\nx_bucket{le=\"+Inf\"} 2\n"},
		// The same bytes in the same places, made duplicates by a TYPE line.
		{"two untyped buckets", ContentTypeText, "x_bucket{le=\"1\"} 1\nx_bucket{le=\"1.0\"} 2\nx_bucket{le=\"+Inf\"} 2\n"},
		{"two untyped buckets again", ContentTypeText, "x_bucket{le=\"1\"} 1\nx_bucket{le=\"1.0\"} 2\nx_bucket{le=\"+Inf\"} 2\n"},
		{"the same buckets typed", ContentTypeText, "# TYPE x histogram\nx_bucket{le=\"1\"} 1\nx_bucket{le=\"1.0\"} 2\nx_bucket{le=\"+Inf\"} 2\nx_count 2\nx_sum 3\n"},
		{"summary quantile typed", ContentTypeText, "# TYPE y summary\ny{quantile=\"1\"} 1\ny_count 2\ny_sum 3\n"},
		{"summary quantile untyped", ContentTypeText, "y{quantile=\"1\"} 1\n"},
	}
	sc := &ParseScratch{}
	for _, p := range pages {
		got, gs, err := Parse([]byte(p.body), p.contentType, ParseOptions{Scratch: sc})
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		want, ws, err := Parse([]byte(p.body), p.contentType, ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameParse(t, p.name, got, want, gs, ws)
	}
	invalid := page + "{\"a.b\"} 1\nx{\"é\"=\"1\"} 2\n"
	if _, s, _ := Parse([]byte(invalid), ContentTypeText, ParseOptions{Scratch: sc}); s.InvalidNames != 2 {
		t.Fatalf("a remembered invalid series is dropped uncounted: InvalidNames = %d, want 2", s.InvalidNames)
	}
}

// An upstream whose label values change on every page (a pid, a request
// id) keeps the memo bounded: series no longer printed are forgotten.
func TestParseMemoForgets(t *testing.T) {
	sc := &ParseScratch{}
	var b strings.Builder
	for n := range 500 {
		b.Reset()
		for i := range 100 {
			fmt.Fprintf(&b, "requests{pid=\"%d\",slot=\"%d\"} %d\n", n, i, i)
		}
		got, gs, err := Parse([]byte(b.String()), ContentTypeText, ParseOptions{Scratch: sc})
		if err != nil {
			t.Fatal(err)
		}
		want, ws, _ := Parse([]byte(b.String()), ContentTypeText, ParseOptions{})
		sameParse(t, fmt.Sprintf("page %d", n), got, want, gs, ws)
		if len(sc.memo) > 2*100+256 {
			t.Fatalf("after page %d the memo holds %d series for pages of 100", n, len(sc.memo))
		}
	}
}

// The memo stops growing at its bounds: series beyond them are parsed in
// full, with the same result.
func TestParseMemoBounded(t *testing.T) {
	defer func(n, b int) { memoMaxSeries, memoMaxBytes = n, b }(memoMaxSeries, memoMaxBytes)
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "requests{slot=\"%d\",value=\"%s\"} %d\n", i, strings.Repeat("v", i), i)
	}
	page := []byte(b.String())
	for _, bound := range []struct{ series, bytes int }{{100, 1 << 20}, {1 << 16, 8 << 10}} {
		memoMaxSeries, memoMaxBytes = bound.series, bound.bytes
		sc := &ParseScratch{}
		for range 3 {
			got, gs, err := Parse(page, ContentTypeText, ParseOptions{Scratch: sc})
			if err != nil {
				t.Fatal(err)
			}
			want, ws, _ := Parse(page, ContentTypeText, ParseOptions{})
			sameParse(t, fmt.Sprintf("bounds %+v", bound), got, want, gs, ws)
		}
		keys := 0
		for k := range sc.memo {
			keys += len(k)
		}
		if len(sc.memo) > bound.series || keys > bound.bytes || keys != sc.memoBytes {
			t.Fatalf("bounds %+v: the memo holds %d series, %d key bytes (counted %d)", bound, len(sc.memo), keys, sc.memoBytes)
		}
		if len(sc.memo) == 0 {
			t.Fatalf("bounds %+v: nothing remembered", bound)
		}
	}
}

// TestParseScratchFollowsContentType: a scratch shared across parses
// remembers which content type was text format, and an upstream switching
// to OpenMetrics and back is read in each format as it says (an unknown
// type as text, as Prometheus falls back).
func TestParseScratchFollowsContentType(t *testing.T) {
	text := []byte("# TYPE c counter\nc_total 3\n")
	om := []byte("# TYPE c counter\nc_total 3\nc_created 1.7e9\n# EOF\n")
	sc := &ParseScratch{}
	for i, step := range []struct {
		ct   string
		body []byte
		om   bool
	}{
		{ContentTypeText, text, false},
		{ContentTypeText, text, false},
		{"application/openmetrics-text; version=1.0.0", om, true},
		{"application/openmetrics-text; version=1.0.0", om, true},
		{"", text, false},
		{"application/x-unknown", text, false}, // Prometheus's fallback: text
		{ContentTypeText, text, false},
		{"application/openmetrics-text; version=1.0.0", om, true},
	} {
		fams, stats, err := Parse(step.body, step.ct, ParseOptions{Scratch: sc})
		if err != nil {
			t.Fatalf("parse %d (%q): %v", i, step.ct, err)
		}
		if stats.OpenMetrics != step.om {
			t.Errorf("parse %d (%q): read as OpenMetrics %v, want %v", i, step.ct, stats.OpenMetrics, step.om)
		}
		if got := string(AppendText(nil, fams)); strings.Contains(got, "c_created") || !strings.Contains(got, "c_total 3\n") {
			t.Errorf("parse %d (%q): text output\n%s", i, step.ct, got)
		}
	}
}

// A remembered series is checked again against label limits that changed
// since it was met: tightened limits refuse the page as a fresh parse does.
func TestParseMemoChecksChangedLimits(t *testing.T) {
	body := []byte("# TYPE x gauge\nx{a=\"12345\"} 1\n")
	sc := &ParseScratch{}
	if _, _, err := Parse(body, ContentTypeText, ParseOptions{Scratch: sc, LabelLimits: LabelLimits{ValueLength: 10}}); err != nil {
		t.Fatal(err)
	}
	_, _, err := Parse(body, ContentTypeText, ParseOptions{Scratch: sc, LabelLimits: LabelLimits{ValueLength: 4}})
	if le, ok := errors.AsType[*LabelLimitError](err); !ok || le.Limit != LimitValueLength {
		t.Fatalf("a value of 5 bytes under a limit of 4 on a remembered series: err = %v, want a %s LabelLimitError", err, LimitValueLength)
	}
}
