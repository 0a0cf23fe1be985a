package exposition

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

// addFixtureSeeds adds every real page under testdata/fixtures, read at
// test time, as a seed of f with both content types.
func addFixtureSeeds(f *testing.F) {
	pagetest.AddFixtureSeeds(f)
	f.Add([]byte("# TYPE x counter\n# HELP x h\\\\ \\n\nx_total{a=\"\\\"\\\\\\n\"} 1 1000\nx_created 2\n# EOF\n"), true)
	f.Add([]byte("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n# TYPE h histogram\nh_sum 4\n"), false)
	f.Add([]byte("# TYPE i info\ni_info{v=\"1\"} 1\n# TYPE s stateset\ns{s=\"a\"} 1\n# EOF\n"), true)
}

// sampleKey identifies a sample by its labels and timestamp.
type sampleKey struct {
	labels string
	ts     int64
	hasTS  bool
}

func fuzzSameValue(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// FuzzParse: whatever Parse accepts, AppendText writes as a page that
// Prometheus's text parser and expfmt (legacy validation, as routers read
// it) both accept, with the same samples and one header per family; and
// AppendOpenMetrics writes a page Prometheus's OpenMetrics parser accepts.
func FuzzParse(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte, openMetrics bool) {
		ct := "text/plain; version=0.0.4"
		if openMetrics {
			ct = "application/openmetrics-text; version=1.0.0"
		}
		fams, _, err := Parse(body, ct, ParseOptions{SampleLimit: 10000})
		if err != nil {
			return
		}
		want := map[sampleKey]float64{}
		names := map[string]bool{}
		for _, fam := range fams {
			if names[fam.Name] {
				t.Fatalf("Parse returned family %q twice", fam.Name)
			}
			names[fam.Name] = true
			for _, s := range fam.Samples {
				want[sampleKey{s.Labels.String(), s.TimestampMs, s.HasTimestamp}] = s.Value
			}
		}

		text := AppendText(nil, fams)
		tp := expfmt.NewTextParser(model.LegacyValidation)
		if _, err := tp.TextToMetricFamilies(bytes.NewReader(text)); err != nil {
			t.Fatalf("expfmt rejects the text output: %v\ninput:\n%q\noutput:\n%s", err, body, text)
		}
		got := map[sampleKey]float64{}
		p, err := textparse.New(text, "text/plain", labels.NewSymbolTable(), textparse.ParserOptions{})
		if p == nil {
			t.Fatal(err)
		}
		var l labels.Labels
		for {
			e, err := p.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("textparse rejects the text output: %v\ninput:\n%q\noutput:\n%s", err, body, text)
			}
			if e != textparse.EntrySeries {
				continue
			}
			_, ts, v := p.Series()
			p.Labels(&l)
			k := sampleKey{labels: l.String()}
			if ts != nil {
				k.ts, k.hasTS = *ts, true
			}
			if _, dup := got[k]; dup {
				t.Fatalf("series %s written twice\noutput:\n%s", k.labels, text)
			}
			got[k] = v
		}
		if len(got) != len(want) {
			t.Fatalf("%d samples written, %d parsed\ninput:\n%q\noutput:\n%s", len(got), len(want), body, text)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || !fuzzSameValue(g, v) {
				t.Fatalf("sample %v: wrote %v, read back %v (present %v)\noutput:\n%s", k, v, g, ok, text)
			}
		}
		again, _, err := Parse(text, "text/plain", ParseOptions{})
		if err != nil {
			t.Fatalf("the text output does not parse again: %v", err)
		}
		if len(again) != len(fams) {
			t.Fatalf("%d families written, %d read back\noutput:\n%s", len(fams), len(again), text)
		}

		om := AppendOpenMetrics(nil, fams)
		op, err := textparse.New(om, "application/openmetrics-text; version=1.0.0", labels.NewSymbolTable(), textparse.ParserOptions{})
		if op == nil {
			t.Fatal(err)
		}
		for {
			_, err := op.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("the OpenMetrics parser rejects the OpenMetrics output: %v\ninput:\n%q\noutput:\n%s", err, body, om)
			}
		}
	})
}
