package derive

import (
	"math"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// Freshest is one windowed derived gauge in its shortest window, the
// freshest reading: what a reader that wants one current value of it (the
// routing view's prefix-cache hit rate) is handed, so that it never looks
// the gauge up by name or reads its window label.
type Freshest struct {
	// Name is the derived gauge's name, Window its shortest window as the
	// window label prints it ("" when no sample has one).
	Name, Window string
	// Samples are the gauge's samples in that window without the window
	// label, NaN left out.
	Samples []exposition.Sample
}

// PrefixCacheHitRatio returns the prefix-cache hit ratio in its shortest
// window from derived gauges (what Groupings returns for one grouping).
func PrefixCacheHitRatio(derived []exposition.Family) Freshest {
	return freshest(derived, DerivedPrefixCacheHitRatio)
}

func freshest(derived []exposition.Family, name string) Freshest {
	out := Freshest{Name: name}
	i := slices.IndexFunc(derived, func(f exposition.Family) bool { return f.Name == name })
	if i < 0 {
		return out
	}
	var shortest time.Duration = math.MaxInt64
	for _, s := range derived[i].Samples {
		w := s.Labels.Get(WindowLabel)
		if d, err := model.ParseDuration(w); err == nil && time.Duration(d) < shortest {
			shortest, out.Window = time.Duration(d), w
		}
	}
	for _, s := range derived[i].Samples {
		if s.Labels.Get(WindowLabel) != out.Window || math.IsNaN(s.Value) {
			continue
		}
		b := labels.NewBuilder(s.Labels)
		b.Del(WindowLabel)
		out.Samples = append(out.Samples, exposition.Sample{Labels: b.Labels(), Value: s.Value})
	}
	return out
}
