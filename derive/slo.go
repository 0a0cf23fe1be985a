package derive

import (
	"slices"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/internal/setting"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// SLOTargets are the latency targets vllm_derived_slo_attainment_ratio is
// computed for, per latency. Nothing is computed for a latency without
// targets.
type SLOTargets struct {
	TTFT, TPOT, E2E []time.Duration
}

// sloKinds ties each latency to its slo label value and histogram.
var sloKinds = [...]struct {
	label string
	field string // in SLOTargets
	src   mapping.Counter
	get   func(*SLOTargets) []time.Duration
}{
	{"ttft", "TTFT", mapping.CounterTTFTBuckets, func(s *SLOTargets) []time.Duration { return s.TTFT }},
	{"tpot", "TPOT", mapping.CounterTimePerOutputTokenBuckets, func(s *SLOTargets) []time.Duration { return s.TPOT }},
	{"e2e", "E2E", mapping.CounterE2ELatencyBuckets, func(s *SLOTargets) []time.Duration { return s.E2E }},
}

// Validate rejects targets that are not positive: no request takes at most
// 0 s, so such a target would always read 0. The error is a
// *setting.Error naming the field (derive.SLOTargets.TTFT).
func (s SLOTargets) Validate() error {
	for _, k := range sloKinds {
		for _, d := range k.get(&s) {
			if d <= 0 {
				return &setting.Error{Setting: "derive.SLOTargets." + k.field, Value: d.String(),
					Rule: "is not positive: a latency target must be a positive duration", Fix: "give one such as 500ms or 2s"}
			}
		}
	}
	return nil
}

// FormatSLOTarget prints a target in seconds the way Prometheus prints a
// bucket bound in its le label ("0.5", "1.0", "2.5"), so that an
// attainment's le reads like the bucket it comes from.
func FormatSLOTarget(d time.Duration) string {
	return labels.FormatOpenMetricsFloat(d.Seconds())
}

// sloTarget is one target ready for derive: its histogram, its value in
// seconds and its slo and le labels.
type sloTarget struct {
	src     mapping.Counter
	seconds float64
	lbls    []labels.Label
	key     string // lbls' values, for the label cache
}

// WithSLOs returns a Deriver like d that also computes SLO attainment for
// slos (each latency's targets sorted, duplicates dropped). Its Inputs keep
// the TPOT histogram when there are TPOT targets.
func (d *Deriver) WithSLOs(slos SLOTargets) (*Deriver, error) {
	if err := slos.Validate(); err != nil {
		return nil, err
	}
	out := *d
	out.byName = nil // its own scratch: copies may scrape at once
	out.labels = &labelCache{}
	out.slos = nil
	for _, k := range sloKinds {
		ds := slices.Clone(k.get(&slos))
		slices.Sort(ds)
		for _, t := range slices.Compact(ds) {
			out.slos = append(out.slos, sloTarget{src: k.src, seconds: t.Seconds(), lbls: []labels.Label{
				{Name: SLOLabel, Value: k.label}, {Name: d.targetLabel, Value: FormatSLOTarget(t)},
			}, key: k.label + "\xff" + FormatSLOTarget(t)})
		}
	}
	out.inputs = out.buildInputs(out.slos)
	return &out, nil
}

// WithLegacyLabels returns a Deriver like d that labels the latency
// quantiles quantile and the SLO targets le, the names before q and target,
// for consumers that have not moved yet (--derive.legacy-labels; to be
// removed after a deprecation period).
func (d *Deriver) WithLegacyLabels() *Deriver {
	out := *d
	out.byName = nil // its own scratch: copies may scrape at once
	out.labels = &labelCache{}
	out.quantileLabel, out.targetLabel = LegacyQuantileLabel, LegacySLOTargetLabel
	out.slos = slices.Clone(d.slos)
	for i := range out.slos {
		lbls := slices.Clone(out.slos[i].lbls)
		for j := range lbls {
			if lbls[j].Name == d.targetLabel {
				lbls[j].Name = out.targetLabel
			}
		}
		out.slos[i].lbls = lbls
	}
	return &out
}
