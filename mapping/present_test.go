package mapping

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/fos-study/vllm-normalizer/exposition"
)

func configured(t *testing.T, opts Options, cfg string) *Mapper {
	t.Helper()
	c, err := LoadConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	opts.Config = c
	return mustMapper(t, opts)
}

func countSeries(fams []exposition.Family) int {
	n := 0
	for _, f := range fams {
		n += len(f.Samples)
	}
	return n
}

func TestPresentAliases(t *testing.T) {
	in, _ := mustMapper(t, Options{}).Normalize(fixture(t, "13"))

	off, _ := mustMapper(t, Options{}).Present(in)
	for _, legacy := range []string{"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds", "vllm:gpu_prefix_cache_queries_total"} {
		if family(off, legacy) != nil {
			t.Errorf("alias %s emitted although aliases are off", legacy)
		}
	}

	on, st := mustMapper(t, Options{LegacyAliases: true}).Present(in)
	if st != (PresentStats{}) {
		t.Errorf("stats %+v", st)
	}
	for _, tc := range []struct{ alias, source string }{
		{"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"},
		{"vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"},
		{"vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_queries_total"},
		{"vllm:gpu_prefix_cache_hits_total", "vllm:prefix_cache_hits_total"},
	} {
		src := family(in, tc.source)
		a := family(on, tc.alias)
		if src == nil || a == nil {
			t.Errorf("%s: source present %v, alias present %v", tc.alias, src != nil, a != nil)
			continue
		}
		if fmt.Sprint(series(*a)) != fmt.Sprint(renameSeries(src, tc.alias)) {
			t.Errorf("%s does not carry %s's series", tc.alias, tc.source)
		}
		if a.Type != src.Type || !strings.HasPrefix(a.Help, "Alias of "+tc.source+" emitted by vllm-normalizer for legacy consumers") {
			t.Errorf("%s: type %s help %q", tc.alias, a.Type, a.Help)
		}
		if family(on, tc.source) == nil {
			t.Errorf("%s no longer served next to its alias", tc.source)
		}
	}
	if len(on) != len(off)+4 {
		t.Errorf("aliases added %d families, want 4", len(on)-len(off))
	}
}

// An upstream that prints the legacy family itself never gets a second one.
func TestPresentAliasNotDuplicated(t *testing.T) {
	m := mustMapper(t, Options{LegacyAliases: true})
	in := fixture(t, "03") // gpu_cache_usage_perc and kv_cache_usage_perc side by side, not normalised
	out, _ := m.Present(in)
	n := 0
	for _, f := range out {
		if f.Name == "vllm:gpu_cache_usage_perc" {
			n++
			if strings.HasPrefix(f.Help, "Alias of") {
				t.Error("the upstream's own legacy family was replaced by an alias")
			}
		}
	}
	if n != 1 {
		t.Errorf("vllm:gpu_cache_usage_perc served %d times", n)
	}
}

// A V0 page keeps its legacy families as printed beside their current
// names, whether aliases are on or off; a drop entry for the legacy name
// removes only the legacy copy.
func TestPresentKeepsPrintedLegacyNames(t *testing.T) {
	in := fixture(t, "12") // V0: vllm:gpu_cache_usage_perc, vllm:time_per_output_token_seconds
	for _, aliases := range []bool{false, true} {
		m := mustMapper(t, Options{LegacyAliases: aliases})
		norm, rep := m.Normalize(in)
		out, st := m.Present(append(norm, rep.Kept...))
		if st != (PresentStats{}) {
			t.Errorf("aliases %v: stats %+v", aliases, st)
		}
		for _, tc := range []struct{ legacy, current string }{
			{"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"},
			{"vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"},
		} {
			src, got, cur := family(in, tc.legacy), family(out, tc.legacy), family(out, tc.current)
			if got == nil || cur == nil {
				t.Errorf("aliases %v: %s served %v, %s served %v; want both", aliases, tc.legacy, got != nil, tc.current, cur != nil)
				continue
			}
			if fmt.Sprint(series(*got)) != fmt.Sprint(series(*src)) || got.Help != src.Help || got.Type != src.Type {
				t.Errorf("aliases %v: %s is not the family as printed: %+v", aliases, tc.legacy, *got)
			}
			if fmt.Sprint(series(*cur)) != fmt.Sprint(renameSeries(src, tc.current)) {
				t.Errorf("aliases %v: %s does not carry %s's series", aliases, tc.current, tc.legacy)
			}
		}
	}
	m := configured(t, Options{}, "drop: [vllm:gpu_cache_usage_perc]\n")
	norm, rep := m.Normalize(in)
	out, _ := m.Present(append(norm, rep.Kept...))
	if family(out, "vllm:gpu_cache_usage_perc") != nil || family(out, "vllm:kv_cache_usage_perc") == nil {
		t.Error("drop of the legacy name must remove the legacy copy only")
	}
}

func TestPresentNameStyle(t *testing.T) {
	in, _ := mustMapper(t, Options{}).Normalize(fixture(t, "13"))
	m := mustMapper(t, Options{NameStyle: NameStyleUnderscore})
	if got := m.StyleName("vllm:kv_cache_usage_perc"); got != "vllm_kv_cache_usage_perc" {
		t.Errorf("StyleName = %s", got)
	}
	if got := mustMapper(t, Options{}).StyleName("vllm:kv_cache_usage_perc"); got != "vllm:kv_cache_usage_perc" {
		t.Errorf("colon StyleName = %s", got)
	}
	out, st := m.Present(in)
	if st.Collisions != 0 || len(out) != len(in) || countSeries(out) != countSeries(in) {
		t.Fatalf("%d families %d series (collisions %d), want %d and %d", len(out), countSeries(out), st.Collisions, len(in), countSeries(in))
	}
	for _, f := range out {
		if strings.Contains(f.Name, ":") {
			t.Errorf("family %s keeps a colon", f.Name)
		}
		for _, s := range f.Samples {
			if n := s.Name(); strings.Contains(n, ":") || !strings.HasPrefix(n, f.Name) {
				t.Errorf("sample %s in family %s", n, f.Name)
			}
		}
	}
	want := series(in...)
	got := map[string]float64{}
	maps.Copy(got, series(out...))
	for k, v := range want {
		k2 := strings.Replace(k, "vllm:", "vllm_", 1)
		if gv, ok := got[k2]; !ok || gv != v && gv == gv {
			t.Errorf("series %s lost or changed in underscore style", k)
			break
		}
	}
	if !sort.SliceIsSorted(out, func(i, j int) bool { return out[i].Name < out[j].Name }) {
		t.Error("output not sorted by name")
	}
}

func TestPresentCollisions(t *testing.T) {
	// A Ray-style family next to vLLM's own: in underscore style both are
	// named vllm_num_requests_running.
	in := parsePage(t, `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3
# HELP vllm_num_requests_running Ray copy.
# TYPE vllm_num_requests_running gauge
vllm_num_requests_running{model_name="m"} 4
`)
	out, st := mustMapper(t, Options{NameStyle: NameStyleUnderscore}).Present(in)
	if st.Collisions != 1 || len(out) != 1 || out[0].Samples[0].Value != 3 {
		t.Errorf("collisions %d, families %v; want the first family (value 3) kept and one collision", st.Collisions, out)
	}
	out, st = mustMapper(t, Options{}).Present(in)
	if st.Collisions != 0 || len(out) != 2 {
		t.Errorf("colon style: collisions %d, %d families", st.Collisions, len(out))
	}
}

// TestPresentStyledShadow: in underscore style a gauge printed as
// vllm_x_count is named as the samples of histogram vllm:x, which the
// routers' expfmt parser rejects the page for. Its series joins the
// histogram where the histogram lacks it and is a collision where not.
func TestPresentStyledShadow(t *testing.T) {
	in := parsePage(t, `# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 2
vllm:e2e_request_latency_seconds_sum{model_name="m"} 1.5
vllm:e2e_request_latency_seconds_count{model_name="m"} 2
# TYPE vllm_e2e_request_latency_seconds_count gauge
vllm_e2e_request_latency_seconds_count{model_name="m"} 9
vllm_e2e_request_latency_seconds_count{model_name="other"} 4
`)
	out, st := mustMapper(t, Options{NameStyle: NameStyleUnderscore}).Present(in)
	if st.Collisions != 1 {
		t.Errorf("collisions = %d, want 1 (the gauge's series the histogram has)", st.Collisions)
	}
	if len(out) != 1 || out[0].Name != "vllm_e2e_request_latency_seconds" {
		t.Fatalf("families %v, want the histogram alone", out)
	}
	got := series(out...)
	for k, v := range map[string]float64{
		`{__name__="vllm_e2e_request_latency_seconds_count", model_name="m"}`:     2,
		`{__name__="vllm_e2e_request_latency_seconds_count", model_name="other"}`: 4,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if _, st := mustMapper(t, Options{}).Present(in); st.Collisions != 0 {
		t.Errorf("colon style: collisions %d, want 0 (the names differ)", st.Collisions)
	}
}

// TestPresentStyledShadowBound: a bucket that joins a histogram only once
// the underscore style names both alike was parsed under its own gauge
// header, so its le="2" was never respelled as the histogram's le="2.0";
// served under the histogram's header it would read as that series twice.
func TestPresentStyledShadowBound(t *testing.T) {
	in := parsePage(t, `# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="2",model_name="m"} 1
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 2
vllm:e2e_request_latency_seconds_sum{model_name="m"} 1.5
vllm:e2e_request_latency_seconds_count{model_name="m"} 2
# TYPE vllm_e2e_request_latency_seconds_bucket gauge
vllm_e2e_request_latency_seconds_bucket{le="2",model_name="m"} 9
vllm_e2e_request_latency_seconds_bucket{le="5",model_name="m"} 4
`)
	out, st := mustMapper(t, Options{NameStyle: NameStyleUnderscore}).Present(in)
	if st.Collisions != 1 {
		t.Errorf("collisions = %d, want 1 (the gauge's le=\"2\", the histogram's le=\"2.0\")", st.Collisions)
	}
	got := series(out...)
	for k, v := range map[string]float64{
		`{__name__="vllm_e2e_request_latency_seconds_bucket", le="2.0", model_name="m"}`: 1,
		`{__name__="vllm_e2e_request_latency_seconds_bucket", le="5.0", model_name="m"}`: 4,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d series, want the histogram's 4 and the le=\"5.0\" bucket: %v", len(got), got)
	}
}

func TestPresentRelabel(t *testing.T) {
	norm, _ := mustMapper(t, Options{}).Normalize(fixture(t, "02"))
	total := countSeries(norm)

	t.Run("drop", func(t *testing.T) {
		m := configured(t, Options{}, `metric_relabel_configs:
  - {source_labels: [__name__], regex: 'vllm:(num_requests_swapped|cpu_cache_usage_perc)', action: drop}
`)
		out, st := m.Present(norm)
		want := len(family(norm, "vllm:num_requests_swapped").Samples) + len(family(norm, "vllm:cpu_cache_usage_perc").Samples)
		if st.Dropped != want || countSeries(out) != total-want {
			t.Errorf("dropped %d (served %d of %d), want %d dropped", st.Dropped, countSeries(out), total, want)
		}
		if family(out, "vllm:num_requests_swapped") != nil || family(out, "vllm:cpu_cache_usage_perc") != nil {
			t.Error("families whose every series was dropped are still served")
		}
	})

	t.Run("keep", func(t *testing.T) {
		m := configured(t, Options{}, `metric_relabel_configs:
  - {source_labels: [__name__], regex: 'vllm:(kv_cache_usage_perc|num_requests_.*)', action: keep}
`)
		out, st := m.Present(norm)
		var names []string
		for _, f := range out {
			names = append(names, f.Name)
		}
		if fmt.Sprint(names) != "[vllm:kv_cache_usage_perc vllm:num_requests_running vllm:num_requests_swapped vllm:num_requests_waiting]" {
			t.Errorf("kept %v", names)
		}
		if st.Dropped != total-countSeries(out) {
			t.Errorf("dropped %d, want %d", st.Dropped, total-countSeries(out))
		}
	})

	t.Run("labeldrop", func(t *testing.T) {
		m := configured(t, Options{}, `metric_relabel_configs:
  - {regex: model_name, action: labeldrop}
`)
		out, st := m.Present(norm)
		for _, f := range out {
			for _, s := range f.Samples {
				if s.Labels.Has("model_name") {
					t.Fatalf("%s keeps model_name", s.Labels)
				}
			}
		}
		// Dropping the only label that told series apart makes duplicates:
		// the fixture has one model, so no series collide.
		if st.Collisions != 0 || countSeries(out) != total {
			t.Errorf("collisions %d, served %d of %d", st.Collisions, countSeries(out), total)
		}
	})

	t.Run("labeldrop that merges series", func(t *testing.T) {
		m := configured(t, Options{}, `metric_relabel_configs:
  - {regex: finished_reason, action: labeldrop}
`)
		norm13, _ := mustMapper(t, Options{}).Normalize(fixture(t, "13"))
		out, st := m.Present(norm13)
		rs := family(norm13, "vllm:request_success_total")
		if len(rs.Samples) < 2 {
			t.Fatalf("fixture 13 should have request_success_total per finished_reason")
		}
		got := family(out, "vllm:request_success_total")
		if got == nil || len(got.Samples) != 1 || got.Samples[0].Value != rs.Samples[0].Value {
			t.Errorf("want the first series kept, got %+v", got)
		}
		// request_success_created has the same label, and collides the same way.
		created := family(norm13, "vllm:request_success_created")
		if st.Collisions != len(rs.Samples)-1+len(created.Samples)-1 {
			t.Errorf("collisions %d, want %d", st.Collisions, len(rs.Samples)-1)
		}
	})

	t.Run("rename histogram", func(t *testing.T) {
		m := configured(t, Options{}, `metric_relabel_configs:
  - source_labels: [__name__]
    regex: 'vllm:e2e_request_latency_seconds(_bucket|_sum|_count)'
    target_label: __name__
    replacement: 'llm_request_latency_seconds${1}'
`)
		out, st := m.Present(norm)
		src := family(norm, "vllm:e2e_request_latency_seconds")
		got := family(out, "llm_request_latency_seconds")
		if got == nil {
			t.Fatal("renamed histogram not served")
		}
		if family(out, "vllm:e2e_request_latency_seconds") != nil {
			t.Error("old histogram family still served")
		}
		if got.Type != model.MetricTypeHistogram || got.Help != src.Help {
			t.Errorf("type %s help %q; want the original's", got.Type, got.Help)
		}
		if fmt.Sprint(series(*got)) != fmt.Sprint(renameSeries(src, "llm_request_latency_seconds")) {
			t.Error("series not moved intact")
		}
		if st != (PresentStats{}) {
			t.Errorf("stats %+v", st)
		}
	})

	t.Run("rename into an existing family", func(t *testing.T) {
		m := configured(t, Options{}, `metric_relabel_configs:
  - {source_labels: [__name__], regex: 'vllm:num_requests_swapped', target_label: __name__, replacement: 'vllm:num_requests_waiting'}
  - {source_labels: [__name__], regex: 'vllm:time_to_first_token_seconds_sum', target_label: __name__, replacement: 'vllm:num_requests_running'}
`)
		out, st := m.Present(norm)
		w := family(out, "vllm:num_requests_waiting")
		if w == nil || fmt.Sprint(series(*w)) != fmt.Sprint(series(*family(norm, "vllm:num_requests_waiting"))) {
			t.Errorf("the family's own series must win over the moved one: %+v", w)
		}
		// swapped duplicates waiting's series; the histogram's _sum, moved
		// under a new name without its suffix, becomes an untyped family
		// that collides with the gauge of that name.
		want := len(family(norm, "vllm:num_requests_swapped").Samples)
		for _, s := range family(norm, "vllm:time_to_first_token_seconds").Samples {
			if s.Name() == "vllm:time_to_first_token_seconds_sum" {
				want++
			}
		}
		if st.Collisions != want {
			t.Errorf("collisions %d, want %d", st.Collisions, want)
		}
		names := map[string]bool{}
		for _, f := range out {
			if names[f.Name] {
				t.Errorf("family %s twice", f.Name)
			}
			names[f.Name] = true
		}
	})

	t.Run("header-only families survive", func(t *testing.T) {
		in, _ := mustMapper(t, Options{}).Normalize(fixture(t, "12"))
		var empty []string
		for _, f := range in {
			if len(f.Samples) == 0 {
				empty = append(empty, f.Name)
			}
		}
		if len(empty) == 0 {
			t.Fatal("fixture 12 should hold families without samples")
		}
		m := configured(t, Options{}, "metric_relabel_configs:\n  - {regex: pid, action: labeldrop}\n")
		out, _ := m.Present(in)
		for _, n := range empty {
			if family(out, n) == nil {
				t.Errorf("header-only family %s lost", n)
			}
		}
	})
}

func TestPresentDropList(t *testing.T) {
	norm, _ := mustMapper(t, Options{}).Normalize(fixture(t, "02"))
	m := configured(t, Options{LegacyAliases: true}, "drop: ['vllm:num_requests_swapped', 'vllm:prompt_tokens', 'vllm:gpu_cache_usage_perc']\n")
	out, st := m.Present(norm)
	want := len(family(norm, "vllm:num_requests_swapped").Samples) + len(family(norm, "vllm:prompt_tokens_total").Samples)
	if st.Dropped != want {
		t.Errorf("dropped %d, want %d", st.Dropped, want)
	}
	for _, n := range []string{"vllm:num_requests_swapped", "vllm:prompt_tokens_total", "vllm:gpu_cache_usage_perc"} {
		if family(out, n) != nil {
			t.Errorf("%s served despite the drop list", n)
		}
	}
}

func TestPresentDoesNotModifyInput(t *testing.T) {
	m := configured(t, Options{LegacyAliases: true, NameStyle: NameStyleUnderscore}, `metric_relabel_configs:
  - {source_labels: [__name__], regex: 'vllm:(.*)', target_label: __name__, replacement: 'x_$1'}
  - {regex: engine, action: labeldrop}
`)
	in, _ := mustMapper(t, Options{}).Normalize(fixture(t, "13"))
	before := deepCopy(in)
	m.Present(in)
	equalFamilies(t, in, before)
}

func BenchmarkPresent(b *testing.B) {
	cfg, _ := LoadConfig([]byte(`metric_relabel_configs:
  - {source_labels: [__name__], regex: 'vllm:num_requests_swapped', action: drop}
  - {regex: pid, action: labeldrop}
`))
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"default", Options{}},
		{"aliases+underscore", Options{LegacyAliases: true, NameStyle: NameStyleUnderscore}},
		{"relabel", Options{Config: cfg}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			in, _ := mustMapper(b, Options{}).Normalize(fixture(b, "13"))
			m := mustMapper(b, tc.opts)
			b.ReportAllocs()
			for b.Loop() {
				m.Present(in)
			}
		})
	}
}

// One Mapper serves concurrent scrapes (run with -race).
func TestMapperConcurrent(t *testing.T) {
	m := configured(t, Options{LegacyAliases: true, NameStyle: NameStyleUnderscore},
		"metric_relabel_configs:\n  - {regex: engine, action: labeldrop}\n")
	in := fixture(t, "13")
	want, _ := m.Present(func() []exposition.Family { n, _ := m.Normalize(in); return n }())
	done := make(chan []exposition.Family)
	for range 4 {
		go func() {
			var out []exposition.Family
			for range 20 {
				n, _ := m.Normalize(in)
				out, _ = m.Present(n)
			}
			done <- out
		}()
	}
	for range 4 {
		got := <-done
		if fmt.Sprint(series(got...)) != fmt.Sprint(series(want...)) {
			t.Error("concurrent run gave another result")
		}
	}
}
