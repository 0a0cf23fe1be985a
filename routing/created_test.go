package routing

import (
	"math"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// createdPage is a counter of three models over two engines (constructed:
// vLLM's name and labels, made-up values): model a has counted on both
// engines, model b on neither, model c on engine 0.
func createdPage(a0, a1 float64) *exposition.Family {
	s := func(engine, m string, v float64) exposition.Sample {
		return exposition.Sample{Labels: labels.FromStrings("__name__", "vllm:prompt_tokens_total", "engine", engine, "model_name", m), Value: v}
	}
	return &exposition.Family{Name: "vllm:prompt_tokens_total", Type: model.MetricTypeCounter, Samples: []exposition.Sample{
		s("0", "a", a0), s("1", "a", a1), s("0", "b", 0), s("1", "b", 0), s("0", "c", 5),
	}}
}

// startsOf answers StartOf from a table by engine and model; 0 for what it
// lacks.
func startsOf(table map[string]float64) func(labels.Labels) float64 {
	return func(l labels.Labels) float64 { return table[l.Get("engine")+"/"+l.Get(mapping.LabelModel)] }
}

func sumCreated(t *testing.T, s *Sums, f *exposition.Family, r Restarts) (map[string]float64, []exposition.Sample) {
	t.Helper()
	tot, ok := s.Sum(func(mapping.Role) *exposition.Family { return f }, []mapping.Role{mapping.RolePromptTokens}, r).Of(mapping.RolePromptTokens)
	if !ok {
		t.Fatal("no sums")
	}
	got := map[string]float64{}
	for _, c := range tot.Created() {
		got[c.Labels.Get(mapping.LabelModel)] = c.Time
	}
	return got, tot.Samples(f.Name)
}

// TestSumsCreated: a model's sums are dated by the earliest start of the
// engines that had counted when it was first summed (a: engine 1's 90, the
// earlier; b: nothing counted, the scrape's time; c: its engine does not
// say, so no date). An upstream restart folded into the sums (engine 0
// starts again at 150 and counts past its old value) starts no new life:
// the sums go on up and keep their date.
func TestSumsCreated(t *testing.T) {
	var s Sums
	starts := map[string]float64{"0/a": 100, "1/a": 90, "0/b": 100, "1/b": 90}
	got, _ := sumCreated(t, &s, createdPage(40, 10), Restarts{StartOf: startsOf(starts), Now: 120})
	want := map[string]float64{"a": 90, "b": 120}
	if len(got) != len(want) || got["a"] != want["a"] || got["b"] != want["b"] {
		t.Fatalf("created %v, want %v (none for c, whose engine does not say when it started)", got, want)
	}

	starts["0/a"] = 150
	restart := Restarts{StartOf: startsOf(starts), Now: 160,
		Series: []labels.Labels{labels.FromStrings("__name__", "vllm:prompt_tokens_total", "engine", "0", "model_name", "a")}}
	got, samples := sumCreated(t, &s, createdPage(60, 20), restart)
	if got["a"] != 90 || got["b"] != 120 {
		t.Errorf("after engine 0's restart: created %v, want a and b as before", got)
	}
	if v := samples[0].Value; v != 40+60+20 {
		t.Errorf("model a's sum after the restart is %g, want 120 (40 before it, 60 and 20 now)", v)
	}
}

// TestSumsCreatedLife: a model gone from the page ends its sums' life;
// back, it is dated again. Without StartOf no date is kept at all.
func TestSumsCreatedLife(t *testing.T) {
	var s Sums
	starts := map[string]float64{"0/a": 100, "1/a": 90, "0/c": 50}
	r := func(now float64) Restarts { return Restarts{StartOf: startsOf(starts), Now: now} }
	if got, _ := sumCreated(t, &s, createdPage(40, 10), r(120)); got["c"] != 50 {
		t.Fatalf("created %v, want c at 50", got)
	}
	onlyC := createdPage(0, 0)
	onlyC.Samples = onlyC.Samples[4:]
	sumCreated(t, &s, onlyC, r(130))
	starts["1/a"] = 135
	if got, _ := sumCreated(t, &s, createdPage(3, 4), r(140)); got["a"] != 100 || got["c"] != 50 {
		t.Errorf("created %v, want a dated again (100: both engines counted, engine 0 started first) and c kept", got)
	}

	var plain Sums
	tot, _ := plain.Sum(func(mapping.Role) *exposition.Family { return createdPage(40, 10) }, []mapping.Role{mapping.RolePromptTokens}, Restarts{}).Of(mapping.RolePromptTokens)
	if c := tot.Created(); c != nil {
		t.Errorf("created %v without StartOf, want none", c)
	}
}

// TestSumsCreatedUnknown: a start after the scrape (a clock ahead, or a
// value that is no time) dates nothing.
func TestSumsCreatedUnknown(t *testing.T) {
	var s Sums
	starts := map[string]float64{"0/a": 100, "1/a": 500, "0/c": math.NaN()}
	got, _ := sumCreated(t, &s, createdPage(40, 10), Restarts{StartOf: startsOf(starts), Now: 120})
	if _, ok := got["a"]; ok {
		t.Errorf("created %v: a has an engine starting after the scrape, want no date", got)
	}
	if _, ok := got["c"]; ok {
		t.Errorf("created %v: c's start is NaN, want no date", got)
	}
}

// TestCompatPageCreated: the compatibility page's summed histogram, as
// OpenMetrics, carries each model's _created line after its _count.
func TestCompatPageCreated(t *testing.T) {
	var s Sums
	h := &exposition.Family{Name: "vllm:e2e_request_latency_seconds", Type: model.MetricTypeHistogram}
	for _, e := range []string{"0", "1"} {
		for _, x := range []struct {
			suffix, le string
			v          float64
		}{{"_bucket", "1", 1}, {"_bucket", "+Inf", 2}, {"_sum", "", 3}, {"_count", "", 2}} {
			kv := []string{"__name__", h.Name + x.suffix, "engine", e, "model_name", "m"}
			if x.le != "" {
				kv = append(kv, "le", x.le)
			}
			h.Samples = append(h.Samples, exposition.Sample{Labels: labels.FromStrings(kv...), Value: x.v})
		}
	}
	tot, ok := s.Sum(func(mapping.Role) *exposition.Family { return h }, []mapping.Role{mapping.RoleE2ELatency},
		Restarts{StartOf: func(labels.Labels) float64 { return 1764700000 }, Now: 1764700060}).Of(mapping.RoleE2ELatency)
	if !ok {
		t.Fatal("no sums")
	}
	om := string(exposition.AppendOpenMetrics(nil, []exposition.Family{{Name: h.Name, Type: h.Type, Samples: tot.Samples(h.Name), Created: tot.Created()}}))
	want := "vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 4\nvllm:e2e_request_latency_seconds_created{model_name=\"m\"} 1.7647e+09\n"
	if !strings.Contains(om, want) {
		t.Errorf("page lacks\n%s\n%s", want, om)
	}
}
