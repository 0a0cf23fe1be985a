package otlp_test

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/internal/fixtures"
	"github.com/fos-study/vllm-normalizer/internal/pagetest"
	"github.com/fos-study/vllm-normalizer/otlp"
)

// promSamples writes OTLP metrics back as the samples a Prometheus OTLP
// receiver stores under translation_strategy NoUTF8EscapingWithSuffixes
// (names kept, _total added to monotonic sums, a classic histogram's
// _bucket, _sum and _count series), keyed as pageKey keys a page's.
func promSamples(t *testing.T, ms []*metricpb.Metric) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	put := func(name string, attrs []*commonpb.KeyValue, extra []string, v float64) {
		var b labels.ScratchBuilder
		b.Add(model.MetricNameLabel, name)
		for _, kv := range attrs {
			b.Add(kv.Key, kv.Value.GetStringValue())
		}
		for i := 0; i < len(extra); i += 2 {
			b.Add(extra[i], extra[i+1])
		}
		b.Sort()
		k := pageKey(b.Labels())
		if _, dup := out[k]; dup {
			t.Errorf("%s is written twice", k)
		}
		out[k] = v
	}
	for _, m := range ms {
		switch d := m.Data.(type) {
		case *metricpb.Metric_Gauge:
			for _, p := range d.Gauge.DataPoints {
				put(m.Name, p.Attributes, nil, p.GetAsDouble())
			}
		case *metricpb.Metric_Sum:
			if !d.Sum.IsMonotonic || d.Sum.AggregationTemporality != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
				t.Errorf("%s: a sum that is not monotonic and cumulative", m.Name)
			}
			for _, p := range d.Sum.DataPoints {
				put(strings.TrimSuffix(m.Name, "_total")+"_total", p.Attributes, nil, p.GetAsDouble())
			}
		case *metricpb.Metric_Histogram:
			if d.Histogram.AggregationTemporality != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
				t.Errorf("%s: a histogram that is not cumulative", m.Name)
			}
			for _, p := range d.Histogram.DataPoints {
				if len(p.BucketCounts) != len(p.ExplicitBounds)+1 {
					t.Fatalf("%s: %d buckets for %d bounds", m.Name, len(p.BucketCounts), len(p.ExplicitBounds))
				}
				var cum uint64
				for i, c := range p.BucketCounts {
					cum += c
					le := math.Inf(1)
					if i < len(p.ExplicitBounds) {
						le = p.ExplicitBounds[i]
					}
					put(m.Name+"_bucket", p.Attributes, []string{"le", strconv.FormatFloat(le, 'g', -1, 64)}, float64(cum))
				}
				if cum != p.Count {
					t.Errorf("%s: buckets hold %d, count %d", m.Name, cum, p.Count)
				}
				put(m.Name+"_count", p.Attributes, nil, float64(p.Count))
				put(m.Name+"_sum", p.Attributes, nil, p.GetSum())
			}
		case *metricpb.Metric_Summary:
			for _, p := range d.Summary.DataPoints {
				for _, q := range p.QuantileValues {
					put(m.Name, p.Attributes, []string{"quantile", strconv.FormatFloat(q.Quantile, 'g', -1, 64)}, q.Value)
				}
				put(m.Name+"_count", p.Attributes, nil, float64(p.Count))
				put(m.Name+"_sum", p.Attributes, nil, p.Sum)
			}
		default:
			t.Errorf("%s: unexpected data %T", m.Name, m.Data)
		}
	}
	return out
}

// pageKey spells a series with its le or quantile as a number, as
// Prometheus 3 normalises them ("1.0" and "1" are one bucket).
func pageKey(l labels.Labels) string {
	b := labels.NewBuilder(l)
	for _, n := range []string{model.BucketLabel, model.QuantileLabel} {
		if v := l.Get(n); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				b.Set(n, strconv.FormatFloat(f, 'g', -1, 64))
			}
		}
	}
	return b.Labels().String()
}

// TestConvertKeepsEverySample converts real pages and reads them back as
// a Prometheus OTLP receiver stores them: every sample of the page, with
// its value (histogram counts are whole numbers on these pages), and
// nothing else.
func TestConvertKeepsEverySample(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, prefix := range []string{"13-", "20-", "04-", "27-", "26-"} {
		t.Run(prefix, func(t *testing.T) {
			fams := fixtures.Families(t, prefix)
			text := exposition.AppendText(nil, fams)
			counters := map[string]bool{}
			for _, f := range fams {
				if f.Type == model.MetricTypeCounter {
					counters[f.Name] = true
				}
			}
			want := map[string]float64{}
			pagetest.EachSeries(t, text, "text/plain; version=0.0.4", func(l labels.Labels, v float64) {
				// A counter printed without _total (TGI's) is stored
				// with it by a receiver that adds suffixes.
				if n := l.Get(model.MetricNameLabel); counters[n] && !strings.HasSuffix(n, "_total") {
					l = labels.NewBuilder(l).Set(model.MetricNameLabel, n+"_total").Labels()
				}
				want[pageKey(l)] = v
			})

			c := otlp.NewConverter()
			got := promSamples(t, c.Convert(otlp.Page{Families: fams, At: at}))
			if len(c.Dropped) > 0 && c.Dropped[otlp.DropInvalidHistogram] > 0 {
				t.Errorf("dropped %v series of a real page", c.Dropped)
			}
			var missing, extra, differ []string
			for k, v := range want {
				g, ok := got[k]
				switch {
				case !ok:
					missing = append(missing, k)
				case g != v && !(math.IsNaN(g) && math.IsNaN(v)):
					differ = append(differ, fmt.Sprintf("%s: page %g, OTLP %g", k, v, g))
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					extra = append(extra, k)
				}
			}
			for what, l := range map[string][]string{"missing from OTLP": missing, "only in OTLP": extra, "different": differ} {
				if len(l) > 0 {
					slices.Sort(l)
					t.Errorf("%d series %s, e.g.:\n%s", len(l), what, strings.Join(l[:min(len(l), 8)], "\n"))
				}
			}
			if len(want) < 50 {
				t.Fatalf("the fixture has %d series; want a real page", len(want))
			}
		})
	}
}

// starts returns the start time of every cumulative point by metric name
// and attributes.
func starts(ms []*metricpb.Metric) map[string]time.Time {
	out := map[string]time.Time{}
	key := func(name string, attrs []*commonpb.KeyValue) string {
		var b strings.Builder
		for _, kv := range attrs {
			b.WriteString(kv.Key + "=" + kv.Value.GetStringValue() + ",")
		}
		return name + "|" + b.String()
	}
	for _, m := range ms {
		switch d := m.Data.(type) {
		case *metricpb.Metric_Sum:
			for _, p := range d.Sum.DataPoints {
				out[key(m.Name, p.Attributes)] = time.Unix(0, int64(p.StartTimeUnixNano))
			}
		case *metricpb.Metric_Histogram:
			for _, p := range d.Histogram.DataPoints {
				out[key(m.Name, p.Attributes)] = time.Unix(0, int64(p.StartTimeUnixNano))
			}
		}
	}
	return out
}

// TestStartTimes follows the cumulative series of a real page pair
// (fixture 32 at t=600 s and t=615 s): first seen, counting on, restarted
// (the earlier page again: every count that went down), gone and back.
func TestStartTimes(t *testing.T) {
	p600, p615 := fixtures.Families(t, "32-vllm-pd-prefill-constructed-t600"), fixtures.Families(t, "32-vllm-pd-prefill-constructed-t615")
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	c := otlp.NewConverter()

	first := starts(c.Convert(otlp.Page{Families: p600, At: t0}))
	if len(first) < 10 {
		t.Fatalf("%d cumulative series on fixture 32; want a real page", len(first))
	}
	for k, s := range first {
		if !s.Equal(t0) {
			t.Errorf("%s: first seen at %s, start %s", k, t0, s)
		}
	}

	t1 := t0.Add(15 * time.Second)
	second := starts(c.Convert(otlp.Page{Families: p615, At: t1}))
	for k, s := range second {
		if !s.Equal(t0) {
			t.Errorf("%s counted on: start %s, want %s (first seen)", k, s, t0)
		}
	}

	// The earlier page after the later: what went down restarted after t1.
	down := map[string]bool{}
	prev := promSamples(t, otlp.NewConverter().Convert(otlp.Page{Families: p615, At: t0}))
	now := promSamples(t, otlp.NewConverter().Convert(otlp.Page{Families: p600, At: t0}))
	for k, v := range now {
		if strings.Contains(k, "_bucket") {
			continue
		}
		if pv, ok := prev[k]; ok && v < pv && (strings.Contains(k, "_total") || strings.Contains(k, "_count")) {
			down[k] = true
		}
	}
	if len(down) == 0 {
		t.Fatal("no count goes down from t615 to t600: the pair is not what this test needs")
	}
	t2 := t1.Add(15 * time.Second)
	third := starts(c.Convert(otlp.Page{Families: p600, At: t2}))
	restarted := 0
	for k, s := range third {
		switch {
		case s.Equal(t1.Add(time.Millisecond)):
			restarted++
		case !s.Equal(t0):
			t.Errorf("%s: start %s, want %s (on) or %s (restarted)", k, s, t0, t1.Add(time.Millisecond))
		}
	}
	if restarted == 0 {
		t.Errorf("no series restarted, though %d counts went down, e.g. %v", len(down), slices.Sorted(func(yield func(string) bool) {
			for k := range down {
				if !yield(k) {
					return
				}
			}
		})[:1])
	}

	// Gone (a failed scrape withdraws every upstream series) and back
	// within ten minutes: the old start. Back after longer: first seen.
	c.Convert(otlp.Page{Families: nil, At: t2.Add(time.Minute)})
	for k, s := range starts(c.Convert(otlp.Page{Families: p600, At: t2.Add(2 * time.Minute)})) {
		if !s.Equal(third[k]) {
			t.Errorf("%s back after a minute: start %s, want %s", k, s, third[k])
		}
	}
	late := t2.Add(20 * time.Minute)
	c.Convert(otlp.Page{Families: nil, At: late})
	for k, s := range starts(c.Convert(otlp.Page{Families: p600, At: late.Add(time.Second)})) {
		if !s.Equal(late.Add(time.Second)) {
			t.Errorf("%s back after 20 minutes: start %s, want %s (first seen again)", k, s, late.Add(time.Second))
		}
	}
}

// TestInvalidHistogramDropped: a histogram series whose buckets go down
// cannot be an OTLP histogram; it is left out and counted, its family's
// other series kept.
func TestInvalidHistogramDropped(t *testing.T) {
	fams := fixtures.Families(t, "13-")
	var hist *exposition.Family
	for i := range fams {
		counts := 0
		for _, s := range fams[i].Samples {
			if s.Name() == fams[i].Name+"_count" {
				counts++
			}
		}
		if fams[i].Type == model.MetricTypeHistogram && counts >= 2 && len(fams[i].Samples) > 2*counts+2 {
			hist = &fams[i]
			break
		}
	}
	if hist == nil {
		t.Fatal("fixture 13 has no histogram of two series")
	}
	// Constructed from the fixture: the second bucket of the first series
	// raised above the third, so the buckets are not cumulative.
	bad := *hist
	bad.Samples = slices.Clone(hist.Samples)
	bad.Samples[1].Value = bad.Samples[2].Value + 1000
	c := otlp.NewConverter()
	ms := c.Convert(otlp.Page{Families: []exposition.Family{bad, *hist}, At: time.Unix(1e9, 0)})
	if c.Dropped[otlp.DropInvalidHistogram] != 1 {
		t.Errorf("dropped %v, want one invalid_histogram", c.Dropped)
	}
	if len(ms) != 2 {
		t.Fatalf("%d metrics, want 2", len(ms))
	}
	n := func(m *metricpb.Metric) int { return len(m.GetHistogram().DataPoints) }
	if n(ms[0]) != n(ms[1])-1 {
		t.Errorf("the broken family has %d series, the whole one %d; want one fewer", n(ms[0]), n(ms[1]))
	}
}

// TestAnnouncedRestart: a restart the upstream announced after the last
// push moves the start though the counts went on up (fixture 32 at t=600 s,
// then at t=615 s); the same announcement read again at the next push
// moves nothing; series it does not name keep their start.
func TestAnnouncedRestart(t *testing.T) {
	p600, p615 := fixtures.Families(t, "32-vllm-pd-prefill-constructed-t600"), fixtures.Families(t, "32-vllm-pd-prefill-constructed-t615")
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(15*time.Second), t0.Add(30*time.Second)
	const named = "vllm:prompt_tokens_total"
	announced := func(family string, l labels.Labels) time.Time {
		if family == named {
			return t1.Add(-time.Second) // found by the scrape before the push at t1
		}
		return time.Time{}
	}
	c := otlp.NewConverter()
	c.Convert(otlp.Page{Families: p600, At: t0})
	for _, at := range []time.Time{t1, t2} {
		moved := 0
		for k, s := range starts(c.Convert(otlp.Page{Families: p615, At: at, RestartedAt: announced})) {
			switch {
			case strings.HasPrefix(k, strings.TrimSuffix(named, "_total")+"|"):
				moved++
				if !s.Equal(t0.Add(time.Millisecond)) {
					t.Errorf("push at %s: %s starts %s, want %s (just after the push before the restart)", at, k, s, t0.Add(time.Millisecond))
				}
			case !s.Equal(t0):
				t.Errorf("push at %s: %s, not announced, starts %s, want %s", at, k, s, t0)
			}
		}
		if moved == 0 {
			t.Fatalf("fixture 32 has no %s series", named)
		}
	}
}

// TestPageStartTimes: a series whose page gives its start time (Family.Created,
// here the _created samples vLLM printed on fixture 13) is pushed with that
// start, not when the pusher first saw it; counting on keeps it; a count
// that goes down under the same created time still moves the start (a
// restart the page did not date); a later created time wins again.
func TestPageStartTimes(t *testing.T) {
	// Read as printed: fixtures.Families drops the _created families.
	b, err := os.ReadFile("../testdata/fixtures/13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom")
	if err != nil {
		t.Fatal(err)
	}
	fams, _, err := exposition.Parse(b, "text/plain; version=0.0.4", exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	printed := map[string]map[string]float64{} // base name → child labels → _created
	for _, f := range fams {
		base, ok := strings.CutSuffix(f.Name, "_created")
		if !ok || f.Type == model.MetricTypeCounter {
			continue
		}
		printed[base] = map[string]float64{}
		for _, s := range f.Samples {
			printed[base][withoutName(s.Labels).String()] = s.Value
		}
	}
	fams = exposition.DropCreated(fams)
	// dated returns fams with every counter and histogram child dated by
	// shift(its printed _created time), and its counts times scale.
	dated := func(shift func(float64) float64, scale float64) []exposition.Family {
		out := make([]exposition.Family, 0, len(fams))
		for _, f := range fams {
			if f.Type == model.MetricTypeCounter || f.Type == model.MetricTypeHistogram {
				f.Samples = slices.Clone(f.Samples)
				f.Created = nil
				seen := map[string]bool{}
				for i := range f.Samples {
					s := &f.Samples[i]
					if !strings.HasSuffix(s.Name(), "_sum") {
						s.Value *= scale
					}
					child := withoutName(s.Labels)
					child = labels.NewBuilder(child).Del(model.BucketLabel).Labels()
					if at, ok := printed[f.BaseName()][child.String()]; ok && !seen[child.String()] {
						seen[child.String()] = true
						f.Created = append(f.Created, exposition.Created{Labels: child, Time: shift(at)})
					}
				}
			}
			out = append(out, f)
		}
		return out
	}
	asPrinted := func(at float64) float64 { return at }
	// want keys the start times of the page's dated children as starts does.
	want := func(page []exposition.Family) map[string]time.Time {
		out := map[string]time.Time{}
		for _, f := range page {
			name := f.Name
			if f.Type == model.MetricTypeCounter {
				name = f.BaseName()
			}
			for _, cr := range f.Created {
				var attrs strings.Builder
				cr.Labels.Range(func(l labels.Label) { attrs.WriteString(l.Name + "=" + l.Value + ",") })
				sec, frac := math.Modf(cr.Time)
				out[name+"|"+attrs.String()] = time.Unix(int64(sec), int64(frac*1e9))
			}
		}
		return out
	}

	t0 := time.Unix(1_790_000_000, 0) // after every _created time of fixture 13
	t1, t2, t3 := t0.Add(15*time.Second), t0.Add(30*time.Second), t0.Add(45*time.Second)
	c := otlp.NewConverter()
	page := dated(asPrinted, 1)
	exp := want(page)
	if len(exp) < 10 {
		t.Fatalf("%d dated series on fixture 13; want a real page's", len(exp))
	}
	for _, at := range []time.Time{t0, t1} {
		got := starts(c.Convert(otlp.Page{Families: page, At: at}))
		for k, w := range exp {
			if s, ok := got[k]; !ok {
				t.Errorf("push at %s: %s not pushed", at, k)
			} else if !s.Equal(w) {
				t.Errorf("push at %s: %s starts %s, want %s (its created time)", at, k, s, w)
			}
		}
		for k, s := range got {
			if _, ok := exp[k]; !ok && !s.Equal(t0) {
				t.Errorf("push at %s: %s, undated, starts %s, want %s (first seen)", at, k, s, t0)
			}
		}
	}

	// Every count to zero, the created times as before: what went down
	// restarted after t1, whatever the page says.
	before := promSamples(t, c.Convert(otlp.Page{Families: page, At: t1}))
	got := starts(c.Convert(otlp.Page{Families: dated(asPrinted, 0), At: t2}))
	moved := 0
	for k, w := range exp {
		name, set, _ := strings.Cut(k, "|")
		count := before[pageKey(keyLabels(t, name+"_total", set))] + before[pageKey(keyLabels(t, name+"_count", set))]
		switch {
		case count > 0 && !got[k].Equal(t1.Add(time.Millisecond)):
			t.Errorf("%s went down from %g: starts %s, want %s (just after the push before)", k, count, got[k], t1.Add(time.Millisecond))
		case count > 0:
			moved++
		case !got[k].Equal(w):
			t.Errorf("%s stayed at 0: starts %s, want %s (its created time)", k, got[k], w)
		}
	}
	if moved == 0 {
		t.Fatal("no dated count of fixture 13 above 0: the page is not what this test needs")
	}

	// The upstream's restart dated: the new created time is the start.
	restarted := func(float64) float64 { return float64(t2.Add(time.Second).UnixNano()) / 1e9 }
	got = starts(c.Convert(otlp.Page{Families: dated(restarted, 1), At: t3}))
	for k := range exp {
		if !got[k].Equal(t2.Add(time.Second)) {
			t.Errorf("%s restarted at %s as the page says: starts %s", k, t2.Add(time.Second), got[k])
		}
	}
}

func withoutName(l labels.Labels) labels.Labels {
	return labels.NewBuilder(l).Del(model.MetricNameLabel).Labels()
}

// keyLabels returns the labels of a starts key's attribute encoding
// (k=v,k=v; fixture 13's values hold no comma or equals sign) under name.
func keyLabels(t *testing.T, name, set string) labels.Labels {
	t.Helper()
	b := labels.NewBuilder(labels.FromStrings(model.MetricNameLabel, name))
	for kv := range strings.SplitSeq(set, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("attribute %q: not k=v", kv)
		}
		b.Set(k, v)
	}
	return b.Labels()
}
