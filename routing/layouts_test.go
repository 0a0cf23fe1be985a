package routing

import (
	"maps"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// TestSumLayoutsByChild: the rule "nothing for a histogram whose children
// print different bounds" holds for children told apart by any label, not
// only engine and pid: SGLang's ranks carry tp_rank, pp_rank or stage and no
// engine. A rank printed without +Inf beside one with it (no total count)
// left the model's sum with its le="1" above its +Inf (fails on the code
// before: le=1 10, +Inf 6); ranks with one layout are summed.
func TestSumLayoutsByChild(t *testing.T) {
	type bucket struct {
		rank, le string
		v        float64
	}
	sum := func(bs []bucket) map[string]float64 {
		f := &exposition.Family{Name: "sglang:e2e_request_latency_seconds", Type: model.MetricTypeHistogram}
		for _, b := range bs {
			f.Samples = append(f.Samples, exposition.Sample{Labels: labels.FromStrings(model.MetricNameLabel, f.Name+"_bucket",
				mapping.LabelModel, "m", "tp_rank", b.rank, model.BucketLabel, b.le), Value: b.v})
		}
		var s Sums
		tot, ok := s.Sum(func(mapping.Role) *exposition.Family { return f }, []mapping.Role{mapping.RoleE2ELatency}, Restarts{}).Of(mapping.RoleE2ELatency)
		if !ok {
			return nil
		}
		out := map[string]float64{}
		for _, smp := range tot.Samples("h") {
			out[smp.Labels.Get(model.BucketLabel)] = smp.Value
		}
		return out
	}
	if got := sum([]bucket{{"0", "1", 5}, {"0", "+Inf", 6}, {"1", "1", 5}, {"1", "+Inf", 6}}); got["1"] != 10 || got["+Inf"] != 12 {
		t.Errorf("two ranks of one layout: %v, want le=1 10 and +Inf 12", got)
	}
	for name, bs := range map[string][]bucket{
		"a rank without +Inf":     {{"0", "1", 5}, {"0", "+Inf", 6}, {"1", "1", 5}},
		"a rank with more bounds": {{"0", "1", 5}, {"0", "+Inf", 6}, {"1", "0.5", 1}, {"1", "1", 5}, {"1", "+Inf", 6}},
	} {
		if got := sum(bs); len(got) != 0 {
			t.Errorf("%s: the model's histogram is summed: %v", name, got)
		}
	}
}

// TestSumWithoutInfOnEveryChild: a model whose every rank prints its
// histogram without +Inf has no total count either, so its sum is left
// out as when one rank lacks it, and counted by why (fails on the code
// before: le=1 summed to 10, with _count 12 and no +Inf); a model of one
// layout with +Inf in the same family is still summed.
func TestSumWithoutInfOnEveryChild(t *testing.T) {
	f := &exposition.Family{Name: "sglang:e2e_request_latency_seconds", Type: model.MetricTypeHistogram}
	add := func(m, rank, suffix, le string, v float64) {
		kv := []string{model.MetricNameLabel, f.Name + suffix, mapping.LabelModel, m, "tp_rank", rank}
		if le != "" {
			kv = append(kv, model.BucketLabel, le)
		}
		f.Samples = append(f.Samples, exposition.Sample{Labels: labels.FromStrings(kv...), Value: v})
	}
	for _, rank := range []string{"0", "1"} {
		add("noinf", rank, "_bucket", "1", 5)
		add("noinf", rank, "_count", "", 6)
		add("whole", rank, "_bucket", "1", 5)
		add("whole", rank, "_bucket", "+Inf", 6)
		add("whole", rank, "_count", "", 6)
	}
	add("mixed", "0", "_bucket", "1", 5)
	add("mixed", "0", "_bucket", "+Inf", 6)
	add("mixed", "1", "_bucket", "2", 5)
	add("mixed", "1", "_bucket", "+Inf", 6)
	var s Sums
	totals := s.Sum(func(mapping.Role) *exposition.Family { return f }, []mapping.Role{mapping.RoleE2ELatency}, Restarts{})
	tot, ok := totals.Of(mapping.RoleE2ELatency)
	if !ok {
		t.Fatal("nothing summed")
	}
	got := map[string]float64{}
	for _, smp := range tot.Samples("h") {
		got[smp.Labels.Get(mapping.LabelModel)+" "+smp.Labels.Get(model.MetricNameLabel)+" "+smp.Labels.Get(model.BucketLabel)] = smp.Value
	}
	want := map[string]float64{"whole h_bucket 1": 10, "whole h_bucket +Inf": 12, "whole h_count ": 12}
	if !maps.Equal(got, want) {
		t.Errorf("sums %v, want only the whole model's %v", got, want)
	}
	if n := totals.Unsummed(); n != [NumUnsummed]int{UnsummedNoInf: 1, UnsummedBounds: 1} {
		t.Errorf("unsummed %v, want one model for no_inf and one for bucket_bounds", n)
	}
}
