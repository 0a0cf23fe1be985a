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

// TestKeptOrderMatchesMerge: a keptOrder merging call after call (the same
// names in the same order, then others, duplicates within and across
// parts, parts empty) gives what merge gives, the earlier part's family
// for a name two parts hold.
func TestKeptOrderMatchesMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	names := []string{"a", "b", "c", "vllm:x", "vllm_y", "z", "vllm:kv", "m_total"}
	parts := func() [][]exposition.Family {
		out := make([][]exposition.Family, 1+rng.IntN(3))
		for p := range out {
			for range rng.IntN(6) {
				out[p] = append(out[p], exposition.Family{Name: names[rng.IntN(len(names))], Help: "part " + strconv.Itoa(p)})
			}
		}
		return out
	}
	var k keptOrder
	last := parts()
	for call := range 300 {
		ps := last
		if call%4 == 0 { // a new set of parts every fourth call; the others repeat the last
			ps = parts()
		}
		last = ps
		if got, want := k.merge(ps...), merge(ps...); !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: kept order\n%v\nwant\n%v", call, got, want)
		}
	} // the same names in the same order, split between the parts
	// differently: the places kept are by part, so they are not reused
	fam := func(name string, part int) exposition.Family {
		return exposition.Family{Name: name, Help: "part " + strconv.Itoa(part)}
	}
	for _, ps := range [][][]exposition.Family{
		{{fam("a", 0), fam("b", 0)}, {fam("c", 1)}},
		{{fam("a", 0)}, {fam("b", 1), fam("c", 1)}},
		{{fam("a", 0)}, {fam("b", 1)}, {fam("c", 2)}},
	} {
		if got, want := k.merge(ps...), merge(ps...); !reflect.DeepEqual(got, want) {
			t.Fatalf("parts split anew: kept order\n%v\nwant\n%v", got, want)
		}
	}
}
