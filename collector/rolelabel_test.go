package collector

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// TestRoleLabelerMatchesWithRole: one roleLabeler labelling call after
// call (the same series, then series reordered, some gone, new ones,
// duplicates, some already labelled) gives each call what withRole gives
// a copy of it.
func TestRoleLabelerMatchesWithRole(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var pool []labels.Labels
	for i := range 40 {
		l := labels.FromStrings(model.MetricNameLabel, "vllm_derived_x", "model_name", "m"+strconv.Itoa(i%7), "window", strconv.Itoa(i))
		if i%9 == 0 {
			l = labels.NewBuilder(l).Set("role", "decode").Labels()
		}
		pool = append(pool, l)
	}
	page := func() []exposition.Family {
		n := 5 + rng.IntN(30)
		f := exposition.Family{Name: "vllm_derived_x", Type: model.MetricTypeGauge}
		for range n {
			f.Samples = append(f.Samples, exposition.Sample{Labels: pool[rng.IntN(len(pool))], Value: rng.Float64()})
		}
		return []exposition.Family{f, {Name: "vllm_derived_y", Samples: slices.Clone(f.Samples[:n/2])}}
	}
	var r roleLabeler
	last := page()
	for call := range 200 {
		fams := last
		if call%3 == 0 { // every third call is a new page; the others repeat the last
			fams = page()
		}
		last = fams
		want := withRole(copyFamilies(fams), "prefill")
		got := r.label(copyFamilies(fams), "prefill")
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: the kept labeller's\n%v\nwant\n%v", call, got, want)
		}
	}
}

func copyFamilies(fams []exposition.Family) []exposition.Family {
	out := slices.Clone(fams)
	for i := range out {
		out[i].Samples = slices.Clone(out[i].Samples)
	}
	return out
}
