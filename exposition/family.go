// Package exposition holds the in-memory form of one Prometheus exposition
// page: families of flat samples, exactly as the upstream printed them.
//
// Samples stay flat (a histogram is its _bucket, _sum and _count samples, not
// a structured value) so that what the sidecar re-exposes is what vLLM
// printed: a histogram cut short upstream is re-exposed cut short, never
// completed with invented buckets or counts.
package exposition

import (
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// Family is one metric family: the HELP/TYPE header and every sample that
// belongs to it, in upstream order.
type Family struct {
	// Name is the family name as the TYPE line spells it. For a counter
	// printed in text format 0.0.4 this includes the _total suffix
	// (vLLM prints "# TYPE vllm:prompt_tokens_total counter").
	Name string
	// Type is the declared type; model.MetricTypeUnknown when the upstream
	// printed no TYPE line.
	Type model.MetricType
	// Help is the HELP text, unescaped. Empty when there was none.
	Help string
	// Unit is the OpenMetrics UNIT, empty for text-format upstreams.
	Unit    string
	Samples []Sample
}

// Sample is one series value. Labels include __name__, the sample name
// (e.g. "vllm:e2e_request_latency_seconds_bucket").
type Sample struct {
	Labels labels.Labels
	Value  float64
	// TimestampMs is the explicit timestamp printed upstream, if HasTimestamp.
	TimestampMs  int64
	HasTimestamp bool
}

// Name returns the sample (series) name.
func (s *Sample) Name() string { return s.Labels.Get(model.MetricNameLabel) }

// Suffixes that a sample name may carry beyond its family name, by type.
var typeSuffixes = map[model.MetricType][]string{
	model.MetricTypeCounter:        {"_total", "_created"},
	model.MetricTypeHistogram:      {"_bucket", "_sum", "_count", "_created"},
	model.MetricTypeGaugeHistogram: {"_bucket", "_gsum", "_gcount"},
	model.MetricTypeSummary:        {"_sum", "_count", "_created"},
	model.MetricTypeInfo:           {"_info"},
}

// SampleSuffix returns the part of sampleName after family name fam
// ("_bucket" for "x_bucket" in histogram "x"), and whether sampleName may
// belong to a family of that name and type at all.
func SampleSuffix(fam string, t model.MetricType, sampleName string) (string, bool) {
	if sampleName == fam {
		return "", true
	}
	if !strings.HasPrefix(sampleName, fam) {
		return "", false
	}
	rest := sampleName[len(fam):]
	for _, s := range typeSuffixes[t] {
		if rest == s {
			return s, true
		}
	}
	return "", false
}

// BaseName returns the name of the thing a family measures without the
// suffix the exposition format adds: "vllm:prompt_tokens" for the counter
// family "vllm:prompt_tokens_total". Other families are returned unchanged.
func (f *Family) BaseName() string {
	if f.Type == model.MetricTypeCounter {
		return strings.TrimSuffix(f.Name, "_total")
	}
	return f.Name
}

// Rename returns a copy of f under a new family name, with every sample
// renamed accordingly (suffixes such as _bucket are kept). Samples share
// nothing with f's, so the copy may be changed freely.
func (f *Family) Rename(newName string) Family {
	out := Family{Name: newName, Type: f.Type, Help: f.Help, Unit: f.Unit, Samples: make([]Sample, len(f.Samples))}
	var b labels.Builder
	for i, s := range f.Samples {
		suffix, _ := SampleSuffix(f.Name, f.Type, s.Name())
		b.Reset(s.Labels)
		b.Set(model.MetricNameLabel, newName+suffix)
		out.Samples[i] = Sample{Labels: b.Labels(), Value: s.Value, TimestampMs: s.TimestampMs, HasTimestamp: s.HasTimestamp}
	}
	return out
}
