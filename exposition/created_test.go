package exposition

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/internal/pagetest"
)

// createdFamilies are a counter and a histogram of two models each, in the
// shape of the sidecar's summed families (constructed: the names are
// vLLM's, the values made up), with the start time of every child but
// model b's histogram.
func createdFamilies() []Family {
	s := func(v float64, kv ...string) Sample { return Sample{Labels: labels.FromStrings(kv...), Value: v} }
	c := func(t float64, model string) Created {
		return Created{Labels: labels.FromStrings("model_name", model), Time: t}
	}
	return []Family{
		{Name: "vllm:prompt_tokens_total", Type: model.MetricTypeCounter, Help: "Prompt tokens.",
			Samples: []Sample{
				s(40, "__name__", "vllm:prompt_tokens_total", "model_name", "a"),
				s(7, "__name__", "vllm:prompt_tokens_total", "model_name", "b"),
			},
			Created: []Created{c(1764700000.25, "a"), c(1764700100, "b")}},
		{Name: "vllm:e2e_request_latency_seconds", Type: model.MetricTypeHistogram, Help: "Latency.",
			Samples: []Sample{
				s(1, "__name__", "vllm:e2e_request_latency_seconds_bucket", "le", "1", "model_name", "a"),
				s(2, "__name__", "vllm:e2e_request_latency_seconds_bucket", "le", "+Inf", "model_name", "a"),
				s(3.5, "__name__", "vllm:e2e_request_latency_seconds_sum", "model_name", "a"),
				s(2, "__name__", "vllm:e2e_request_latency_seconds_count", "model_name", "a"),
				s(0, "__name__", "vllm:e2e_request_latency_seconds_bucket", "le", "1", "model_name", "b"),
				s(1, "__name__", "vllm:e2e_request_latency_seconds_bucket", "le", "+Inf", "model_name", "b"),
				s(2, "__name__", "vllm:e2e_request_latency_seconds_sum", "model_name", "b"),
				s(1, "__name__", "vllm:e2e_request_latency_seconds_count", "model_name", "b"),
			},
			Created: []Created{c(1764700000.25, "a")}},
	}
}

// TestOpenMetricsCreated: Prometheus's own OpenMetrics parser, as a scrape
// with created-timestamp ingestion runs it (pagetest.Starts), reads each
// child's start time from the _created lines, on every sample of the child,
// and no _created sample as a series; model b's histogram, without one, has
// none.
func TestOpenMetricsCreated(t *testing.T) {
	om := AppendOpenMetrics(nil, createdFamilies())
	want := map[string]int64{
		`{__name__="vllm:prompt_tokens_total", model_name="a"}`: 1764700000250,
		`{__name__="vllm:prompt_tokens_total", model_name="b"}`: 1764700100000,
	}
	// Prometheus's parser spells le as OpenMetrics floats.
	for _, n := range []string{`_bucket", le="1.0"`, `_bucket", le="+Inf"`, `_sum"`, `_count"`} {
		want[`{__name__="vllm:e2e_request_latency_seconds`+n+`, model_name="a"}`] = 1764700000250
	}
	all := pagetest.Starts(t, om)
	if len(all) != 10 {
		t.Errorf("read %d series, want the 10 samples\n%s", len(all), om)
	}
	got := map[string]int64{}
	for k, st := range all {
		if st != 0 {
			got[k] = st
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: start %d, want %d", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: start %d, want none", k, v)
		}
	}
	if t.Failed() {
		t.Logf("page:\n%s", om)
	}
}

// TestTextHasNoCreated: text format 0.0.4 cannot say a start time, so the
// text page is the same with or without them.
func TestTextHasNoCreated(t *testing.T) {
	with := createdFamilies()
	without := createdFamilies()
	for i := range without {
		without[i].Created = nil
	}
	if a, b := AppendText(nil, with), AppendText(nil, without); !bytes.Equal(a, b) {
		t.Errorf("the text page changed with start times:\n%s\nwithout:\n%s", a, b)
	}
	if om := AppendOpenMetrics(nil, without); bytes.Contains(om, []byte("_created")) {
		t.Errorf("OpenMetrics page without start times has _created lines:\n%s", om)
	}
}

// TestOpenMetricsCreatedOnlyWhereExpressible: a counter OpenMetrics writes
// as unknown (a sample not named _total) and a gauge get no _created line.
func TestOpenMetricsCreatedOnlyWhereExpressible(t *testing.T) {
	c := []Created{{Labels: labels.EmptyLabels(), Time: 1}}
	fams := []Family{
		{Name: "odd_counter", Type: model.MetricTypeCounter, Samples: []Sample{{Labels: labels.FromStrings("__name__", "odd_counter"), Value: 1}}, Created: c},
		{Name: "g", Type: model.MetricTypeGauge, Samples: []Sample{{Labels: labels.FromStrings("__name__", "g"), Value: 1}}, Created: c},
	}
	if om := AppendOpenMetrics(nil, fams); bytes.Contains(om, []byte("_created")) {
		t.Errorf("_created on a family OpenMetrics does not type as counter or histogram:\n%s", om)
	}
}

// TestOpenMetricsFamilyNamesUnique: Go's collector prints the gauge
// go_memstats_alloc_bytes beside the counter go_memstats_alloc_bytes_total,
// whose OpenMetrics family name would be go_memstats_alloc_bytes again; a
// MetricSet's family names must be unique (strict parsers, such as Python's
// prometheus_client, refuse the whole page), so that counter is written as
// unknown under its full name, every sample kept.
func TestOpenMetricsFamilyNamesUnique(t *testing.T) {
	page := []byte(`# HELP go_memstats_alloc_bytes Bytes in use.
# TYPE go_memstats_alloc_bytes gauge
go_memstats_alloc_bytes 3.8e+06
# HELP go_memstats_alloc_bytes_total Bytes allocated.
# TYPE go_memstats_alloc_bytes_total counter
go_memstats_alloc_bytes_total 1.3e+07
# HELP h_total A counter beside a histogram named as its family.
# TYPE h_total counter
h_total 4
# TYPE h histogram
h_bucket{le="+Inf"} 2
h_sum 1
h_count 2
# TYPE c_total counter
c_total 5
`)
	fams, _, err := Parse(page, "text/plain; version=0.0.4", ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	om := AppendOpenMetrics(nil, fams)
	seen := map[string]bool{}
	for line := range strings.SplitSeq(string(om), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ := strings.Cut(rest, " ")
			if seen[name] {
				t.Errorf("family %s declared twice:\n%s", name, om)
			}
			seen[name] = true
		}
	}
	for _, want := range []string{"# TYPE go_memstats_alloc_bytes_total unknown\n", "# TYPE h_total unknown\n", "# TYPE c counter\n"} {
		if !bytes.Contains(om, []byte(want)) {
			t.Errorf("want %q in:\n%s", want, om)
		}
	}
	if got, want := pagetest.Samples(t, om, "application/openmetrics-text; version=1.0.0"), pagetest.Samples(t, page, "text/plain"); len(got) != len(want) {
		t.Errorf("OpenMetrics page has %d samples, the text page %d", len(got), len(want))
	}
}
