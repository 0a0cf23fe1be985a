package exposition

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

func sameValue(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// TestRoundTripFixtures parses every real dump, writes it back as text, and
// checks that the output holds exactly the input's samples (same names,
// labels, values) and parses again with both Prometheus's parser and the
// expfmt parser that routers such as the llm-d endpoint picker use.
func TestRoundTripFixtures(t *testing.T) {
	for _, file := range pagetest.FixturePaths(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fams, _, err := Parse(body, "text/plain; version=0.0.4", ParseOptions{})
			if strings.Contains(file, "nan-ind") {
				if err == nil || !strings.Contains(err.Error(), "nan(ind)") {
					t.Fatalf("want a parse error naming the bad value, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := pagetest.Samples(t, body, "text/plain")
			out := AppendText(nil, fams)
			got := pagetest.Samples(t, out, "text/plain")
			if len(got) != len(want) {
				t.Errorf("output has %d samples, input %d", len(got), len(want))
			}
			for k, v := range want {
				if g, ok := got[k]; !ok || !sameValue(g, v) {
					t.Errorf("sample %s: input %v, output %v (present %v)", k, v, g, ok)
				}
			}
			tp := expfmt.NewTextParser(model.LegacyValidation)
			if _, err := tp.TextToMetricFamilies(bytes.NewReader(out)); err != nil {
				t.Errorf("expfmt rejects the output: %v", err)
			}
			om := AppendOpenMetrics(nil, fams)
			if gotOM := pagetest.Samples(t, om, "application/openmetrics-text; version=1.0.0"); len(gotOM) != len(want) {
				t.Errorf("OpenMetrics output has %d samples, input %d", len(gotOM), len(want))
			}
		})
	}
}

func TestParseGroupsFamilies(t *testing.T) {
	body := []byte(`# HELP h A histogram printed sum first.
# TYPE h histogram
h_sum{model_name="m"} 3
h_bucket{model_name="m",le="1"} 1
h_bucket{model_name="m",le="+Inf"} 2
h_count{model_name="m"} 2
# HELP empty Declared, never observed.
# TYPE empty counter
# TYPE c_total counter
c_total 5
# TYPE c_created gauge
c_created 1.7e9
loose{a="1"} 1
c_total{x="again"} 6
`)
	fams, stats, err := Parse(body, "", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.Name+":"+string(f.Type)+":"+itoa(len(f.Samples)))
	}
	want := "h:histogram:4 empty:counter:0 c_total:counter:2 c_created:gauge:1 loose:unknown:1"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("families\n got %s\nwant %s", got, want)
	}
	if stats.Samples != 8 {
		t.Errorf("samples = %d, want 8", stats.Samples)
	}
	kept := DropCreated(fams)
	for _, f := range kept {
		if f.Name == "c_created" {
			t.Error("c_created belongs to counter c_total and should be dropped")
		}
	}
	if len(kept) != 4 {
		t.Errorf("after DropCreated %d families, want 4", len(kept))
	}
}

func itoa(i int) string { return string(AppendFloat(nil, float64(i))) }

func TestParseRejects(t *testing.T) {
	cases := []struct {
		name, body, want string
		opts             ParseOptions
	}{
		{"conflicting types", "# TYPE a gauge\na 1\n# TYPE a counter\n", `family "a" is declared as gauge and again as counter`, ParseOptions{}},
		{"binary", "\x00\x01binary{{{\n", "NUL byte at offset 0", ParseOptions{}},
		{"not utf-8", "a{l=\"\xff\xfe\"} 1\n", "not valid UTF-8", ParseOptions{}},
		{"garbled", "a{l=1} 1\n", "parse error", ParseOptions{}},
		{"msvc nan", "a -nan(ind)\n", "-nan(ind)", ParseOptions{}},
		{"sample limit", "a 1\nb 2\nc 3\n", "more than 2 samples", ParseOptions{SampleLimit: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tc.body), "text/plain", tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDuplicatesAndInvalidNamesDropped(t *testing.T) {
	body := "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n{\"utf8.name\"} 3\nb 4\n"
	fams, stats, err := Parse([]byte(body), "text/plain", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.DuplicateSeries != 1 || stats.InvalidNames != 1 {
		t.Errorf("stats = %+v, want 1 duplicate and 1 invalid name", stats)
	}
	if fams[0].Samples[0].Value != 1 || len(fams[0].Samples) != 1 {
		t.Errorf("the first of two duplicate series must be kept, got %+v", fams[0].Samples)
	}
}

// TestHostileLabelValues checks that nothing a label value or HELP text
// holds can break out of its quotes or line in either output format.
func TestHostileLabelValues(t *testing.T) {
	body := []byte("# HELP a Help with \\\\ backslash and \\n newline.\n# TYPE a gauge\n" +
		`a{v="quote \" backslash \\ newline \n done",u="ünïcödé ☃"} 1` + "\n")
	fams, _, err := Parse(body, "text/plain", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := fams[0].Samples[0].Labels
	for _, tc := range []struct {
		ct  string
		out []byte
	}{
		{"text/plain", AppendText(nil, fams)},
		{"application/openmetrics-text; version=1.0.0", AppendOpenMetrics(nil, fams)},
	} {
		back, _, err := Parse(tc.out, tc.ct, ParseOptions{})
		if err != nil {
			t.Fatalf("%s output does not parse: %v\n%s", tc.ct, err, tc.out)
		}
		if got := back[0].Samples[0].Labels; !labels.Equal(got, want) {
			t.Errorf("%s: labels changed\n got %s\nwant %s", tc.ct, got, want)
		}
		if back[0].Help != fams[0].Help {
			t.Errorf("%s: help changed: %q vs %q", tc.ct, back[0].Help, fams[0].Help)
		}
	}
}

func TestOpenMetricsInputComesOutAsText(t *testing.T) {
	body := []byte("# TYPE c counter\n# HELP c Requests.\nc_total 3\nc_created 1.7e9\n# TYPE i info\ni_info{version=\"1\"} 1\n# EOF\n")
	fams, _, err := Parse(body, "application/openmetrics-text; version=1.0.0", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := string(AppendText(nil, fams))
	for _, want := range []string{"# TYPE c_total counter\nc_total 3\n", "# TYPE i_info gauge\ni_info{version=\"1\"} 1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("text output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "c_created") {
		t.Errorf("OpenMetrics _created series should be skipped:\n%s", got)
	}
}

// TestInvalidBoundsDropped: a bucket bound or quantile that is not a number
// would make routers' expfmt parser reject the whole page; only those
// samples are dropped (found by FuzzParse).
func TestInvalidBoundsDropped(t *testing.T) {
	body := "# TYPE h histogram\nh_bucket{le=\"x\"} 1\nh_bucket{le=\"1e-3\"} 1\nh_bucket{le=\"0x1p-2\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n" +
		"# TYPE s summary\ns{quantile=\"D.5\"} 1\ns{quantile=\"0.5\"} 1\ns_sum 1\ns_count 1\n# TYPE g gauge\ng{le=\"x\"} 1\n"
	fams, stats, err := Parse([]byte(body), "text/plain", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.InvalidBounds != 2 {
		t.Errorf("InvalidBounds = %d, want 2 (le=x, quantile=D.5)", stats.InvalidBounds)
	}
	out := AppendText(nil, fams)
	tp := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := tp.TextToMetricFamilies(bytes.NewReader(out)); err != nil {
		t.Fatalf("expfmt rejects the output: %v\n%s", err, out)
	}
	// Numeric bounds come out as Prometheus stores them (its parser
	// normalises them), so series match whether it scrapes vLLM or us.
	for _, want := range []string{`h_bucket{le="0.001"} 1`, `h_bucket{le="0.25"} 1`, `s{quantile="0.5"} 1`, `g{le="x"} 1`} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

// TestHeaderOnlyInvalidFamilyDropped: a HELP or TYPE line may name a family
// with a quoted UTF-8 (or empty) name; no sample can follow it into the
// output, and neither may its header (found by FuzzPipeline).
func TestHeaderOnlyInvalidFamilyDropped(t *testing.T) {
	body := "# HELP \"\" empty\n# TYPE \"a.b\" gauge\n# TYPE ok gauge\nok 1\n"
	fams, _, err := Parse([]byte(body), "text/plain", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 1 || fams[0].Name != "ok" {
		t.Fatalf("families = %+v, want only ok", fams)
	}
}

// TestLabelSetRules: a sample that repeats a label name is dropped, and
// so is a bucket with le="" (absent le is fine); other empty label values
// are kept as printed (vLLM's lora_requests_info has running_lora_adapters="").
// Found by the fuzzers: the routers' expfmt parser rejects a whole page for
// either.
func TestLabelSetRules(t *testing.T) {
	body := "# TYPE h histogram\nh_bucket{le=\"\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n" +
		"# TYPE a gauge\na{x=\"\"} 1\n# TYPE d gauge\nd{m=\"1\",m=\"2\"} 3\nd{m=\"1\"} 4\n"
	fams, stats, err := Parse([]byte(body), "text/plain", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.InvalidNames != 1 || stats.InvalidBounds != 1 {
		t.Errorf("stats = %+v, want 1 invalid name (repeated m) and 1 invalid bound (le=\"\")", stats)
	}
	out := AppendText(nil, fams)
	tp := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := tp.TextToMetricFamilies(bytes.NewReader(out)); err != nil {
		t.Fatalf("expfmt rejects the output: %v\n%s", err, out)
	}
	for _, want := range []string{"h_bucket{le=\"+Inf\"} 1\n", "a{x=\"\"} 1\n", "d{m=\"1\"} 4\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), `le=""`) {
		t.Errorf("le=\"\" reached the output:\n%s", out)
	}
}

// TestShadowingFamiliesFolded: a family named as the samples of a
// histogram or summary ("x_count" beside histogram "x") makes the routers'
// expfmt parser reject the whole page for x's second TYPE line (found by
// FuzzPipeline). Its samples of exactly that name join x; the rest are
// counted as collisions; every other series comes out as Prometheus reads it.
func TestShadowingFamiliesFolded(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", "02-vllm-0.4.3to0.5.0-datadog-vllm-fixture.prom"))
	if err != nil {
		t.Fatal(err)
	}
	const tpotCount = "vllm:time_per_output_token_seconds_count{"
	if !bytes.Contains(fixture, []byte(tpotCount)) {
		t.Fatal("the fixture no longer has the series this test shadows")
	}
	for _, tc := range []struct {
		name, page string
		collisions int
		// owner must end up holding sample; gone must not be a family.
		owner, sample, gone string
	}{{
		name:   "untyped header of a histogram's count",
		page:   strings.Replace(string(fixture), tpotCount, "# TYPE vllm:time_per_output_token_seconds_count untyped\n"+tpotCount, 1),
		owner:  "vllm:time_per_output_token_seconds",
		sample: "vllm:time_per_output_token_seconds_count",
		gone:   "vllm:time_per_output_token_seconds_count",
	}, {
		name:   "summary sum with a HELP of its own",
		page:   "# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_count 3\n# HELP s_sum sum\ns_sum 2\n",
		owner:  "s",
		sample: "s_sum",
		gone:   "s_sum",
	}, {
		name:   "count printed before the histogram's header",
		page:   "h_count 2\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\n",
		owner:  "h",
		sample: "h_count",
		gone:   "h_count",
	}, {
		name:       "histogram named as another histogram's count",
		page:       "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\n# TYPE h_count histogram\nh_count_bucket{le=\"+Inf\"} 2\nh_count_sum 4\nh_count_count 2\n# TYPE h_count_sum gauge\nh_count_sum{x=\"1\"} 5\n",
		collisions: 3, // h_count's own samples; h_count_sum{x} stays, as h_count left
		owner:      "h",
		sample:     "h_sum",
		gone:       "h_count",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fams, stats, err := Parse([]byte(tc.page), "text/plain", ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if stats.Collisions != tc.collisions {
				t.Errorf("Collisions = %d, want %d", stats.Collisions, tc.collisions)
			}
			out := AppendText(nil, fams)
			tp := expfmt.NewTextParser(model.LegacyValidation)
			if _, err := tp.TextToMetricFamilies(bytes.NewReader(out)); err != nil {
				t.Fatalf("expfmt rejects the output: %v\n%s", err, out)
			}
			want, got := pagetest.Samples(t, []byte(tc.page), "text/plain"), pagetest.Samples(t, out, "text/plain")
			if len(got)+stats.Collisions != len(want) {
				t.Errorf("output has %d series and %d collisions, the input %d series", len(got), stats.Collisions, len(want))
			}
			for k, v := range got {
				if w, ok := want[k]; !ok || !sameValue(w, v) {
					t.Errorf("output series %s = %v, input %v (present %v)", k, v, w, ok)
				}
			}
			found := false
			for _, f := range fams {
				if f.Name == tc.gone {
					t.Errorf("family %s is still served", tc.gone)
				}
				if f.Name == tc.owner {
					found = slices.ContainsFunc(f.Samples, func(s Sample) bool { return s.Name() == tc.sample })
				}
			}
			if !found {
				t.Errorf("family %s lacks its %s sample:\n%s", tc.owner, tc.sample, out)
			}
		})
	}
}

// TestStrayBoundsRespelled: Prometheus's parsers respell le in a histogram
// and quantile in a summary (le="2" reads as le="2.0"), but only under
// that family's own TYPE line. A bucket printed again after another
// family's header keeps le="2"; served back under the histogram's header
// it would read as a second copy of the le="2.0" series (found by
// FuzzPipeline on the Dynamo frontend fixture). Each such copy is dropped
// and counted, the first printed is kept, and a bound seen only out of
// place is served in the spelling Prometheus gives it under the header.
func TestStrayBoundsRespelled(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", "24-dynamo-frontend-2026-01-complete-dynamo-docs-metrics-examples-fe.prom"))
	if err != nil {
		t.Fatal(err)
	}
	const itl = `dynamo_frontend_inter_token_latency_seconds_bucket{model="qwen/qwen3-0.6b",le=`
	if !bytes.Contains(fixture, []byte(itl+`"2"} 299`)) {
		t.Fatal("the fixture no longer has the bucket this test repeats")
	}
	for _, tc := range []struct {
		name, page       string
		dups, collisions int
		want             map[string]float64 // series (as textparse reads the output) and value
	}{{
		name: "buckets repeated after another family's header",
		page: string(fixture) + "# TYPE stray gauge\nstray 1\n" + itl + `"2"} 7` + "\n" + itl + `"1.1"} 7` + "\n" + itl + `"3"} 7` + "\n",
		dups: 2,
		want: map[string]float64{
			`{__name__="dynamo_frontend_inter_token_latency_seconds_bucket", le="2.0", model="qwen/qwen3-0.6b"}`: 299,
			`{__name__="dynamo_frontend_inter_token_latency_seconds_bucket", le="1.1", model="qwen/qwen3-0.6b"}`: 299,
			`{__name__="dynamo_frontend_inter_token_latency_seconds_bucket", le="3.0", model="qwen/qwen3-0.6b"}`: 7,
		},
	}, {
		name: "quantiles repeated after another family's header",
		page: "# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_count 3\n# TYPE g gauge\ng 1\ns{quantile=\".5\"} 9\ns{quantile=\"1\"} 2\n",
		dups: 1,
		want: map[string]float64{`{__name__="s", quantile="0.5"}`: 1, `{__name__="s", quantile="1.0"}`: 2},
	}, {
		name:       "bucket printed before the histogram's header",
		page:       "h_bucket{le=\"2\"} 5\n# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
		collisions: 1,
		want:       map[string]float64{`{__name__="h_bucket", le="2.0"}`: 5, `{__name__="h_bucket", le="+Inf"}`: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fams, stats, err := Parse([]byte(tc.page), "text/plain", ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if stats.DuplicateSeries != tc.dups || stats.Collisions != tc.collisions {
				t.Errorf("DuplicateSeries = %d, Collisions = %d; want %d and %d", stats.DuplicateSeries, stats.Collisions, tc.dups, tc.collisions)
			}
			out := AppendText(nil, fams)
			tp := expfmt.NewTextParser(model.LegacyValidation)
			if _, err := tp.TextToMetricFamilies(bytes.NewReader(out)); err != nil {
				t.Fatalf("expfmt rejects the output: %v\n%s", err, out)
			}
			got := pagetest.Samples(t, out, "text/plain")
			if n := seriesLines(t, out); n != len(got) {
				t.Errorf("the output prints %d series lines for %d series: some series twice\n%s", n, len(got), out)
			}
			if in := seriesLines(t, []byte(tc.page)); len(got)+tc.dups+tc.collisions != in {
				t.Errorf("output has %d series, the input %d series lines, with %d dropped", len(got), in, tc.dups+tc.collisions)
			}
			for k, v := range tc.want {
				if w, ok := got[k]; !ok || w != v {
					t.Errorf("%s = %v (present %v), want %v\n%s", k, w, ok, v, out)
				}
			}
		})
	}
}

// seriesLines counts the series Prometheus's parser reads on a text page,
// repeats included.
func seriesLines(t *testing.T, page []byte) int {
	n := 0
	pagetest.EachSeries(t, page, "text/plain", func(labels.Labels, float64) { n++ })
	return n
}

// DropCreated drops a _created family only when its counter (named with or
// without _total), histogram or summary is on the page; constructed
// families, named after what each case tests.
func TestDropCreatedOwners(t *testing.T) {
	fam := func(name string, typ model.MetricType) Family { return Family{Name: name, Type: typ} }
	fams := []Family{
		fam("a_total", model.MetricTypeCounter), fam("a_created", model.MetricTypeGauge), // counter with _total
		fam("b", model.MetricTypeCounter), fam("b_created", model.MetricTypeGauge), // counter without _total
		fam("h", model.MetricTypeHistogram), fam("h_created", model.MetricTypeGauge),
		fam("s", model.MetricTypeSummary), fam("s_created", model.MetricTypeUnknown),
		fam("g", model.MetricTypeGauge), fam("g_created", model.MetricTypeGauge), // a gauge's: kept
		fam("orphan_created", model.MetricTypeGauge),                                 // nothing of its name: kept
		fam("c_created", model.MetricTypeCounter), fam("c", model.MetricTypeCounter), // a counter itself: kept
	}
	var got []string
	for _, f := range DropCreated(fams) {
		got = append(got, f.Name)
	}
	want := "a_total b h s g g_created orphan_created c_created c"
	if strings.Join(got, " ") != want {
		t.Errorf("DropCreated kept\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
}

// TestAppendTextUntilInPieces: every fixture encoded in pieces of at
// least limit bytes each, for limits from one byte to more than a page,
// is byte for byte what AppendText writes, every piece but the last ends
// a line, and no piece runs more than two lines (a family's HELP and
// TYPE) past its limit.
func TestAppendTextUntilInPieces(t *testing.T) {
	for _, file := range pagetest.FixturePaths(t) {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fams, _, err := Parse(body, "text/plain; version=0.0.4", ParseOptions{})
		if err != nil {
			continue // the fixtures meant to be refused
		}
		whole := AppendText(nil, fams)
		longest := 0
		for line := range strings.Lines(string(whole)) {
			longest = max(longest, len(line))
		}
		for _, limit := range []int{1, 100, 4096, 32 << 10, len(whole) + 1} {
			var got []byte
			var piece []byte
			pieces := 0
			for at := (TextPos{}); !at.Done(fams); pieces++ {
				piece, at = AppendTextUntil(piece[:0], fams, at, limit)
				if len(piece) == 0 {
					t.Fatalf("%s, limit %d: an empty piece at %+v", filepath.Base(file), limit, at)
				}
				if !at.Done(fams) && (piece[len(piece)-1] != '\n' || len(piece) < limit || len(piece) >= limit+2*longest) {
					t.Fatalf("%s, limit %d: a piece of %d bytes ending %q", filepath.Base(file), limit, len(piece), piece[max(0, len(piece)-20):])
				}
				got = append(got, piece...)
			}
			if !bytes.Equal(got, whole) {
				t.Fatalf("%s, limit %d: %d pieces make %d bytes that are not AppendText's %d", filepath.Base(file), limit, pieces, len(got), len(whole))
			}
		}
	}
}
