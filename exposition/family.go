package exposition

import (
	"slices"
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
	// Created are the start times of the family's counter or histogram
	// children that the sidecar knows, in the order of their samples:
	// OpenMetrics prints each as a _created line after its child's last
	// sample; text format 0.0.4 has no way to say it and prints none.
	Created []Created
}

// Created is when one child of a counter or histogram (a counter series,
// or a histogram's buckets, _sum and _count together) began counting from
// zero: every count it holds came after.
type Created struct {
	// Labels are the child's labels, without __name__ and le.
	Labels labels.Labels
	// Time is in Unix seconds, as OpenMetrics prints it.
	Time float64
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
	out := Family{Name: newName, Type: f.Type, Help: f.Help, Unit: f.Unit, Samples: make([]Sample, len(f.Samples)), Created: f.Created}
	var b labels.Builder
	for i, s := range f.Samples {
		suffix, _ := SampleSuffix(f.Name, f.Type, s.Name())
		b.Reset(s.Labels)
		b.Set(model.MetricNameLabel, newName+suffix)
		out.Samples[i] = Sample{Labels: b.Labels(), Value: s.Value, TimestampMs: s.TimestampMs, HasTimestamp: s.HasTimestamp}
	}
	return out
}

// shadowTypes are the types under which the expfmt parser, which the
// routers read pages with, files a sample named as one of the type's
// suffixed samples (all of typeSuffixes but _created, which it never
// strips), whatever TYPE line the sample's own name had: it then rejects
// the page for that family's second TYPE line.
var shadowTypes = [...]model.MetricType{model.MetricTypeHistogram, model.MetricTypeSummary}

// shadowBases calls yield with each name that name could be filed under,
// and the type that family must have for it to be.
func shadowBases(name string, yield func(base string, t model.MetricType) bool) {
	for _, t := range shadowTypes {
		for _, s := range typeSuffixes[t] {
			if s == "_created" {
				continue
			}
			if base, ok := strings.CutSuffix(name, s); ok && base != "" && !yield(base, t) {
				return
			}
		}
	}
}

// FoldShadowed returns fams (in order) without the families named as the
// samples of a histogram or summary in fams: "x_count" beside histogram
// "x", as a HELP or TYPE line of its own or a sample printed before x's
// header makes it. Their samples of exactly that name join x, where
// Prometheus stores them by name anyway, unless x already has the series;
// those and any other sample of theirs are dropped and counted. The owning
// family gets a new Samples slice; nothing else in fams is changed.
func FoldShadowed(fams []Family) ([]Family, int) {
	// Nearly every page has no family so named: it costs a suffix test each.
	if !slices.ContainsFunc(fams, func(f Family) bool {
		could := false
		shadowBases(f.Name, func(string, model.MetricType) bool { could = true; return false })
		return could
	}) {
		return fams, 0
	}
	index := make(map[string]int, len(fams))
	for j := range fams {
		if _, dup := index[fams[j].Name]; !dup {
			index[fams[j].Name] = j
		}
	}
	owner := make([]int, len(fams))
	found := false
	for i := range fams {
		owner[i] = -1
		shadowBases(fams[i].Name, func(base string, t model.MetricType) bool {
			if j, ok := index[base]; ok && fams[j].Type == t {
				owner[i], found = j, true
				return false
			}
			return true
		})
	}
	if !found {
		return fams, 0
	}
	// A family leaves when its owner stays: once "x_count" has left, an
	// "x_count_sum" beside it no longer clashes with anything.
	leaves := make([]int8, len(fams)) // 0 unknown, 1 leaves, 2 stays
	var leave func(i int) bool
	leave = func(i int) bool {
		if leaves[i] == 0 {
			leaves[i] = 2
			if owner[i] >= 0 && !leave(owner[i]) {
				leaves[i] = 1
			}
		}
		return leaves[i] == 1
	}
	dropped := 0
	series := map[int]seriesSet{} // each owner's series
	for i := range fams {
		if !leave(i) {
			continue
		}
		j := owner[i]
		have, ok := series[j]
		if !ok {
			// The owner's samples may be shared with the caller's input.
			fams[j].Samples = slices.Clone(fams[j].Samples)
			have = make(seriesSet, len(fams[j].Samples))
			for _, s := range fams[j].Samples {
				have.add(s.Labels)
			}
			series[j] = have
		}
		key := boundLabel(fams[j].Type)
		for _, s := range fams[i].Samples {
			// Served under x's header, the sample's bound is read as x's
			// own samples' are.
			s.Labels = respellBound(s.Labels, key)
			if s.Name() != fams[i].Name || !have.add(s.Labels) {
				dropped++
				continue
			}
			fams[j].Samples = append(fams[j].Samples, s)
		}
	}
	out := make([]Family, 0, len(fams))
	for i := range fams {
		if !leave(i) {
			out = append(out, fams[i])
		}
	}
	return out, dropped
}

// seriesSet holds label sets by hash, for the passes that must tell a
// repeated series from a hash collision.
type seriesSet map[uint64][]labels.Labels

// add records l and reports whether it was not there yet.
func (set seriesSet) add(l labels.Labels) bool {
	h := l.Hash()
	if slices.ContainsFunc(set[h], func(m labels.Labels) bool { return labels.Equal(m, l) }) {
		return false
	}
	set[h] = append(set[h], l)
	return true
}
