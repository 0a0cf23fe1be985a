package derive

import (
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// WithLegacyLabels serves the same values under the labels before the
// rename: quantile for q, le for target; nothing under the new names.
func TestLegacyLabels(t *testing.T) {
	h := newHistorySLO([]time.Duration{time.Minute}, time.Second, SLOTargets{TTFT: []time.Duration{500 * time.Millisecond}})
	for i, ttft := range [][]float64{{0, 0, 0}, {4, 8, 10}} {
		p := page{lbls: `model_name="m",engine="0"`, ttftLE: []string{"0.5", "1.0", "+Inf"}, ttft: ttft}
		h.Observe(at(float64(10*i)), parsePage(t, mergeFamilies(p.text())))
	}
	legacy := testHistory{h.History, h.d.WithLegacyLabels()}
	l := []string{"engine", "0", "model_name", "m", "window", "1m"}
	cur, old := h.Derive(at(10), byModelEngine), legacy.Derive(at(10), byModelEngine)
	wantValue(t, cur, 0.4, DerivedSLOAttainmentRatio, append(l, "slo", "ttft", "target", "0.5")...)
	wantValue(t, old, 0.4, DerivedSLOAttainmentRatio, append(l, "slo", "ttft", "le", "0.5")...)
	wantAbsent(t, old, DerivedSLOAttainmentRatio, append(l, "slo", "ttft", "target", "0.5")...)
	for _, q := range []string{"0.5", "0.9", "0.99"} {
		v := valueOf(t, cur, DerivedTTFTSeconds, append(l, "q", q)...)
		wantValue(t, old, v, DerivedTTFTSeconds, append(l, "quantile", q)...)
		wantAbsent(t, old, DerivedTTFTSeconds, append(l, "q", q)...)
	}
	// The current Deriver is untouched by its legacy copy.
	wantValue(t, h.Derive(at(10), byModelEngine), 0.4, DerivedSLOAttainmentRatio, append(l, "slo", "ttft", "target", "0.5")...)
}

// valueOf is the value of one derived series, failing when it is absent.
func valueOf(t *testing.T, fams []exposition.Family, name string, kv ...string) float64 {
	t.Helper()
	for _, f := range fams {
		if f.Name != name {
			continue
		}
		for _, s := range f.Samples {
			if s.Labels.Len() == len(kv)/2+1 && matches(s, kv) {
				return s.Value
			}
		}
	}
	t.Fatalf("%s%v is absent", name, kv)
	return 0
}

func matches(s exposition.Sample, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		if s.Labels.Get(kv[i]) != kv[i+1] {
			return false
		}
	}
	return true
}
