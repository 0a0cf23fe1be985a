package mapping

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// synthetic holds, for the renames no real dump has, series as vLLM prints
// them (names, types and labels from the reference tables).
const synthetic = `# HELP vllm:gpu_prefix_cache_queries_total GPU prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{engine="0",model_name="m"} 117.0
vllm:gpu_prefix_cache_queries_total{engine="1",model_name="m"} 40.0
# HELP vllm:gpu_prefix_cache_queries_created GPU prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:gpu_prefix_cache_queries_created gauge
vllm:gpu_prefix_cache_queries_created{engine="0",model_name="m"} 1.75e+09
# HELP vllm:gpu_prefix_cache_hits_total GPU prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 64.0
# HELP vllm:time_in_queue_requests Histogram of time the request spent in the queue in seconds.
# TYPE vllm:time_in_queue_requests histogram
vllm:time_in_queue_requests_bucket{le="0.3",model_name="m"} 2.0
vllm:time_in_queue_requests_bucket{le="+Inf",model_name="m"} 3.0
vllm:time_in_queue_requests_sum{model_name="m"} 1.25
vllm:time_in_queue_requests_count{model_name="m"} 3.0
# HELP vllm:kv_offload_tiering_block_queries_total Tier lookups.
# TYPE vllm:kv_offload_tiering_block_queries_total counter
vllm:kv_offload_tiering_block_queries_total{engine="0",model_name="m",tier="ssd"} 9.0
# HELP vllm:kv_offload_tiering_block_hits_total Tier hits.
# TYPE vllm:kv_offload_tiering_block_hits_total counter
vllm:kv_offload_tiering_block_hits_total{engine="0",model_name="m",tier="ssd"} 4.0
# HELP vllm:kv_offload_total_bytes_total Bytes transferred.
# TYPE vllm:kv_offload_total_bytes_total counter
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 1000.0
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 2000.0
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="disk_to_GPU"} 5.0
# HELP vllm:kv_offload_size Transfer sizes.
# TYPE vllm:kv_offload_size histogram
vllm:kv_offload_size_bucket{engine="0",le="1e+06",model_name="m",transfer_type="GPU_to_CPU"} 1.0
vllm:kv_offload_size_bucket{engine="0",le="+Inf",model_name="m",transfer_type="GPU_to_CPU"} 2.0
vllm:kv_offload_size_sum{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 3.0e+06
vllm:kv_offload_size_count{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 2.0
`

// splitSeries returns the series of f whose label has value v, as they
// should look under family to without that label.
func splitSeries(f *exposition.Family, label, v, to string) map[string]float64 {
	out := map[string]float64{}
	for k, val := range renameSeries(f, to) {
		if !strings.Contains(k, label+`="`+v+`"`) {
			continue
		}
		out[strings.Replace(strings.Replace(k, ", "+label+`="`+v+`"`, "", 1), label+`="`+v+`", `, "", 1)] = val
	}
	return out
}

func TestNormalizeRenames(t *testing.T) {
	m := mustMapper(t, Options{})
	for _, tc := range []struct {
		page, from, to string
		// split: label and value selecting the series that move
		label, value string
	}{
		{page: "02", from: "vllm:gpu_cache_usage_perc", to: "vllm:kv_cache_usage_perc"},
		{page: "02", from: "vllm:time_per_output_token_seconds", to: "vllm:inter_token_latency_seconds"},
		{page: "12", from: "vllm:gpu_cache_usage_perc", to: "vllm:kv_cache_usage_perc"},
		{page: "12", from: "vllm:time_per_output_token_seconds", to: "vllm:inter_token_latency_seconds"},
		{page: "01", from: "vllm:gpu_cache_usage_perc", to: "vllm:kv_cache_usage_perc"},
		{page: "synthetic", from: "vllm:gpu_prefix_cache_queries_total", to: "vllm:prefix_cache_queries_total"},
		{page: "synthetic", from: "vllm:gpu_prefix_cache_queries_created", to: "vllm:prefix_cache_queries_created"},
		{page: "synthetic", from: "vllm:gpu_prefix_cache_hits_total", to: "vllm:prefix_cache_hits_total"},
		{page: "synthetic", from: "vllm:time_in_queue_requests", to: "vllm:request_queue_time_seconds"},
		{page: "synthetic", from: "vllm:kv_offload_tiering_block_queries_total", to: "vllm:kv_offload_tiering_chunk_queries_total"},
		{page: "synthetic", from: "vllm:kv_offload_tiering_block_hits_total", to: "vllm:kv_offload_tiering_chunk_hits_total"},
		{page: "synthetic", from: "vllm:kv_offload_total_bytes_total", to: "vllm:kv_offload_load_bytes_total", label: "transfer_type", value: "CPU_to_GPU"},
		{page: "synthetic", from: "vllm:kv_offload_total_bytes_total", to: "vllm:kv_offload_store_bytes_total", label: "transfer_type", value: "GPU_to_CPU"},
		{page: "synthetic", from: "vllm:kv_offload_size", to: "vllm:kv_offload_store_size", label: "transfer_type", value: "GPU_to_CPU"},
	} {
		t.Run(tc.page+"/"+tc.to, func(t *testing.T) {
			var in []exposition.Family
			if tc.page == "synthetic" {
				in = parsePage(t, synthetic)
			} else {
				in = fixture(t, tc.page)
			}
			src := family(in, tc.from)
			if src == nil || len(src.Samples) == 0 {
				t.Fatalf("input has no series of %s", tc.from)
			}
			if family(in, tc.to) != nil {
				t.Fatalf("input already has %s; this case is about renaming", tc.to)
			}
			out, rep := m.Normalize(in)
			got := family(out, tc.to)
			if got == nil {
				t.Fatalf("%s not served", tc.to)
			}
			want := renameSeries(src, tc.to)
			note := fmt.Sprintf("(renamed from %s by vllm-normalizer)", tc.from)
			if tc.label != "" {
				want = splitSeries(src, tc.label, tc.value, tc.to)
				note = fmt.Sprintf("(renamed from %s{%s=%q} by vllm-normalizer)", tc.from, tc.label, tc.value)
			}
			if g := series(*got); fmt.Sprint(g) != fmt.Sprint(want) {
				t.Errorf("series of %s:\n got %v\nwant %v", tc.to, g, want)
			}
			if got.Type != src.Type {
				t.Errorf("type %s, want %s", got.Type, src.Type)
			}
			if !strings.HasPrefix(got.Help, src.Help) || !strings.HasSuffix(got.Help, note) {
				t.Errorf("help %q: want the original help followed by %q", got.Help, note)
			}
			if family(out, tc.from) != nil {
				t.Errorf("legacy family %s in the normalised output (derivations must see current names only)", tc.from)
			}
			// The page keeps the legacy family exactly as printed.
			if k := family(rep.Kept, tc.from); k == nil || fmt.Sprint(series(*k)) != fmt.Sprint(series(*src)) || k.Help != src.Help || k.Type != src.Type {
				t.Errorf("Report.Kept has %+v for %s, want the family as printed", k, tc.from)
			}
			legacy := strings.TrimSuffix(tc.from, "_created")
			if legacy != tc.from {
				legacy += "_total"
			}
			if i := sort.SearchStrings(rep.LegacyInUse, legacy); i == len(rep.LegacyInUse) || rep.LegacyInUse[i] != legacy {
				t.Errorf("LegacyInUse %v lacks %s", rep.LegacyInUse, legacy)
			}
		})
	}

	// A split value the catalogue does not know is not guessed at: its
	// series stays under the legacy name only, in the kept family.
	in := parsePage(t, synthetic)
	out, rep := m.Normalize(in)
	for _, f := range out {
		for _, s := range f.Samples {
			if s.Labels.Get("transfer_type") == "disk_to_GPU" {
				t.Errorf("unknown transfer_type moved into %s", f.Name)
			}
		}
	}
	if k := family(rep.Kept, "vllm:kv_offload_total_bytes_total"); k == nil || len(k.Samples) != len(family(in, "vllm:kv_offload_total_bytes_total").Samples) {
		t.Errorf("unknown transfer_type: kept legacy family is %+v, want every series as printed", k)
	}
	if f := family(out, "vllm:kv_offload_size"); f != nil {
		t.Errorf("fully split legacy family in the normalised output: %+v", f)
	}
	if f := family(out, "vllm:kv_offload_load_size"); f != nil {
		t.Errorf("load_size served although no CPU_to_GPU series was observed")
	}
}

func TestNormalizeStatuses(t *testing.T) {
	m := mustMapper(t, Options{})
	for _, tc := range []struct{ page, metric, status, replacement string }{
		{"13", "vllm:cpu_cache_usage_perc", StatusRemoved, ""},
		{"13", "vllm:num_requests_swapped", StatusRemoved, ""},
		{"13", "vllm:kv_cache_usage_perc", StatusPresent, ""},
		{"13", "vllm:gpu_cache_usage_perc", StatusSuperseded, "vllm:kv_cache_usage_perc"},
		{"13", "vllm:time_per_output_token_seconds", StatusSuperseded, "vllm:inter_token_latency_seconds"},
		{"13", "vllm:gpu_prefix_cache_hits_total", StatusSuperseded, "vllm:prefix_cache_hits_total"},
		{"13", "vllm:inter_token_latency_seconds", StatusPresent, ""},
		{"13", "vllm:prompt_tokens_recomputed_total", StatusLegacy, ""},
		{"13", "vllm:nixl_xfer_time_seconds", StatusPresent, ""},
		{"13", "vllm:kv_offload_load_bytes_total", StatusAbsent, ""},
		{"13", "vllm:kv_offload_total_bytes_total", StatusSuperseded, "vllm:kv_offload_load_bytes_total,vllm:kv_offload_store_bytes_total"},
		{"02", "vllm:gpu_cache_usage_perc", StatusRenamed, "vllm:kv_cache_usage_perc"},
		{"02", "vllm:kv_cache_usage_perc", StatusPresent, ""},
		{"02", "vllm:time_per_output_token_seconds", StatusRenamed, "vllm:inter_token_latency_seconds"},
		{"02", "vllm:gpu_prefix_cache_hits_total", StatusSuperseded, "vllm:prefix_cache_hits_total"},
		{"02", "vllm:inter_token_latency_seconds", StatusPresent, ""},
		{"02", "vllm:num_requests_swapped", StatusLegacy, ""},
		{"02", "vllm:cpu_cache_usage_perc", StatusLegacy, ""},
		{"02", "vllm:request_params_best_of", StatusLegacy, ""},
		{"02", "vllm:avg_prompt_throughput_toks_per_s", StatusLegacy, ""},
		{"02", "vllm:prefix_cache_queries_total", StatusAbsent, ""},
		{"02", "vllm:engine_sleep_state", StatusAbsent, ""},
		{"02", "vllm:prompt_tokens_recomputed_total", StatusRemoved, ""},
		{"12", "vllm:spec_decode_num_emitted_tokens_total", StatusLegacy, ""},
		{"12", "vllm:spec_decode_num_draft_tokens_total", StatusPresent, ""},
		{"01", "vllm:gpu_prefix_cache_hit_rate", StatusLegacy, ""},
		{"01", "vllm:cpu_prefix_cache_hit_rate", StatusLegacy, ""},
		{"01", "vllm:lora_requests_info", StatusPresent, ""},
		{"01", "vllm:iteration_tokens_total", StatusPresent, ""},
		{"03", "vllm:kv_cache_usage_perc", StatusPresent, ""},
		{"03", "vllm:gpu_cache_usage_perc", StatusRenamed, "vllm:kv_cache_usage_perc"},
		{"03", "vllm:num_requests_swapped", StatusLegacy, ""},
		{"03", "vllm:prompt_tokens_recomputed_total", StatusLegacy, ""},
		{"04", "vllm:num_requests_running", StatusAbsent, ""},
		{"04", "vllm:num_requests_swapped", StatusRemoved, ""},
		{"04", "vllm:gpu_cache_usage_perc", StatusSuperseded, "vllm:kv_cache_usage_perc"},
		{"04", "vllm:time_per_output_token_seconds", StatusSuperseded, "vllm:inter_token_latency_seconds"},
	} {
		t.Run(tc.page+"/"+tc.metric, func(t *testing.T) {
			_, rep := m.Normalize(fixture(t, tc.page))
			st, ok := statusOf(rep, tc.metric)
			if !ok {
				t.Fatalf("no status for %s", tc.metric)
			}
			if st.Status != tc.status || st.Replacement != tc.replacement {
				t.Errorf("status %s replacement %q; want %s %q", st.Status, st.Replacement, tc.status, tc.replacement)
			}
		})
	}
}

// The statuses must agree with what is actually in the input and output.
func TestNormalizeStatusInvariants(t *testing.T) {
	m := mustMapper(t, Options{})
	cat := mustCatalogue(t)
	for short := range fixtures {
		t.Run(short, func(t *testing.T) {
			in := fixture(t, short)
			out, rep := m.Normalize(in)
			kept := func(name string) bool { return family(rep.Kept, name) != nil }
			if len(rep.Statuses) != len(cat.Metrics) {
				t.Fatalf("%d statuses for %d catalogue metrics", len(rep.Statuses), len(cat.Metrics))
			}
			if !sort.SliceIsSorted(rep.Statuses, func(i, j int) bool { return rep.Statuses[i].Metric < rep.Statuses[j].Metric }) {
				t.Error("statuses not sorted by metric")
			}
			for _, st := range rep.Statuses {
				inIn, inOut := family(in, st.Metric) != nil, family(out, st.Metric) != nil
				switch st.Status {
				case StatusPresent:
					if !inOut {
						t.Errorf("%s present but not served", st.Metric)
					}
				case StatusAbsent, StatusUntilFirstRequest:
					if inOut {
						t.Errorf("%s %s but served", st.Metric, st.Status)
					}
				case StatusLegacy:
					if !inIn || !inOut {
						t.Errorf("%s legacy but not exposed and passed through", st.Metric)
					}
				case StatusRemoved:
					if inIn {
						t.Errorf("%s removed but exposed", st.Metric)
					}
				case StatusRenamed:
					if st.Replacement == "" {
						t.Errorf("%s renamed without replacement", st.Metric)
					}
					if !inIn || !kept(st.Metric) {
						t.Errorf("%s renamed, but not printed by the upstream and kept as printed", st.Metric)
					}
					if st.Replacement != "" && !strings.Contains(st.Replacement, ",") && family(out, st.Replacement) == nil {
						t.Errorf("%s exposed but its replacement %s is not served", st.Metric, st.Replacement)
					}
					if inOut {
						t.Errorf("renamed %s in the normalised output under its legacy name", st.Metric)
					}
				case StatusSuperseded:
					if st.Replacement == "" {
						t.Errorf("%s superseded without replacement", st.Metric)
					}
					if inIn || inOut || kept(st.Metric) {
						t.Errorf("%s superseded, but the upstream prints it", st.Metric)
					}
				default:
					t.Errorf("%s: invalid status %q", st.Metric, st.Status)
				}
			}
		})
	}
}

func TestNormalizeTwins(t *testing.T) {
	m := mustMapper(t, Options{})
	cat := mustCatalogue(t)
	in := fixture(t, "03")
	out, rep := m.Normalize(in)

	names := map[string]bool{}
	for _, f := range out {
		if names[f.Name] {
			t.Errorf("family %s served twice", f.Name)
		}
		names[f.Name] = true
	}
	seen := map[string]bool{}
	for _, f := range out {
		for _, s := range f.Samples {
			if k := s.Labels.String(); seen[k] {
				t.Errorf("series %s served twice", k)
			} else {
				seen[k] = true
			}
		}
	}

	// Expected disagreements, from the input alone: a legacy family whose
	// renamed series are not all present with equal values in its twin.
	var want []string
	twins := 0
	for _, md := range cat.Metrics {
		if md.Replacement == "" {
			continue
		}
		legacy, cur := family(in, md.Name), family(in, md.Replacement)
		if legacy == nil || cur == nil {
			continue
		}
		twins++
		if family(out, md.Name) != nil {
			t.Errorf("legacy twin %s still served", md.Name)
		}
		if fmt.Sprint(series(*family(out, md.Replacement))) != fmt.Sprint(series(*cur)) {
			t.Errorf("%s: the upstream's own series were not served as they are", md.Replacement)
		}
		cs := series(*cur)
		for k, v := range renameSeries(legacy, md.Replacement) {
			if cv, ok := cs[k]; !ok || cv != v {
				want = append(want, md.Replacement)
				break
			}
		}
	}
	if twins < 2 {
		t.Fatalf("fixture 03 should hold at least two legacy/current pairs, found %d", twins)
	}
	if len(want) == 0 {
		t.Fatal("fixture 03's TPOT and ITL histograms differ; the expected disagreement was not derived")
	}
	sort.Strings(want)
	if fmt.Sprint(rep.Disagreements) != fmt.Sprint(want) {
		t.Errorf("disagreements %v, want %v", rep.Disagreements, want)
	}
}

func TestNormalizeTwinsAgreeing(t *testing.T) {
	m := mustMapper(t, Options{})
	const page = `# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
`
	out, rep := m.Normalize(parsePage(t, page))
	if len(out) != 1 || out[0].Name != "vllm:kv_cache_usage_perc" {
		t.Fatalf("served %v, want only vllm:kv_cache_usage_perc", out)
	}
	if len(rep.Disagreements) != 0 {
		t.Errorf("equal twins reported as disagreeing: %v", rep.Disagreements)
	}
	if fmt.Sprint(rep.LegacyInUse) != "[vllm:gpu_cache_usage_perc]" {
		t.Errorf("LegacyInUse %v", rep.LegacyInUse)
	}
	_, rep = m.Normalize(parsePage(t, strings.Replace(page, "} 0.25\n# TYPE vllm:kv", "} 0.5\n# TYPE vllm:kv", 1)))
	if fmt.Sprint(rep.Disagreements) != "[vllm:kv_cache_usage_perc]" {
		t.Errorf("different twins: disagreements %v", rep.Disagreements)
	}
}

func TestNormalizeDoesNotModifyInput(t *testing.T) {
	m := mustMapper(t, Options{})
	for short := range fixtures {
		in := fixture(t, short)
		before := deepCopy(in)
		m.Normalize(in)
		t.Run(short, func(t *testing.T) { equalFamilies(t, in, before) })
	}
	in := parsePage(t, synthetic)
	before := deepCopy(in)
	m.Normalize(in)
	equalFamilies(t, in, before)
}

// Families that need no change are passed through without copying samples.
func TestNormalizeReusesUnchanged(t *testing.T) {
	m := mustMapper(t, Options{})
	in := fixture(t, "13")
	out, _ := m.Normalize(in)
	if len(out) != len(in) {
		t.Fatalf("fixture 13 has no legacy names, yet %d families became %d", len(in), len(out))
	}
	for i := range in {
		if len(in[i].Samples) > 0 && &out[i].Samples[0] != &in[i].Samples[0] {
			t.Errorf("%s: samples copied", in[i].Name)
		}
	}
}

func TestUpstreamInfo(t *testing.T) {
	m := mustMapper(t, Options{})
	// Engines and versions as the fixtures' README states them.
	for _, tc := range []struct {
		page, engine string
		versions     []string // releases the page is known to come from; the hint must admit them
		hint         bool
	}{
		{"02", EngineV0, []string{"0.4.3", "0.5.0"}, true},
		{"12", EngineV0, []string{"0.5.3", "0.5.5"}, true},
		{"01", EngineV0, []string{"0.7.0"}, true},
		{"13", EngineV1, []string{"0.10.1", "0.20.0"}, true}, // a 2026 release: later than every tag the catalogue knows
		{"03", EngineUnknown, nil, false},                    // composite: V0-only and V1-only families side by side
		{"04", EngineUnknown, nil, false},                    // SGLang, not vLLM
	} {
		t.Run(tc.page, func(t *testing.T) {
			_, rep := m.Normalize(fixture(t, tc.page))
			u := rep.Upstream
			if u.Engine != tc.engine {
				t.Errorf("engine %s (%s), want %s", u.Engine, u.Labels["evidence"], tc.engine)
			}
			if u.Labels["evidence"] == "" {
				t.Error("no evidence label")
			}
			hint, ok := u.Labels["version_hint"]
			if ok != tc.hint {
				t.Fatalf("version_hint %q present=%v, want present=%v", hint, ok, tc.hint)
			}
			for _, v := range tc.versions {
				if !admits(t, hint, v) {
					t.Errorf("version_hint %q excludes %s", hint, v)
				}
			}
		})
	}
}

// admits reports whether a hint such as ">=0.4.3,<0.6.3" admits version v.
func admits(t *testing.T, hint, v string) bool {
	t.Helper()
	rv, ok := parseRelease("v" + v)
	if !ok {
		t.Fatalf("bad version %s", v)
	}
	for part := range strings.SplitSeq(hint, ",") {
		op, ver := part[:2], part[2:]
		if op != ">=" {
			op, ver = part[:1], part[1:]
		}
		rb, ok := parseRelease("v" + ver)
		if !ok {
			t.Fatalf("bad hint %q", hint)
		}
		if op == ">=" && rv.less(rb) || op == "<" && !rv.less(rb) {
			return false
		}
	}
	return true
}

func TestStatusFamilies(t *testing.T) {
	m := mustMapper(t, Options{})
	_, rep := m.Normalize(fixture(t, "02"))
	fams := StatusFamilies(rep)
	if len(fams) != 2 || fams[0].Name != MetricStatusName || fams[1].Name != UpstreamInfoName {
		t.Fatalf("families %v", fams)
	}
	st := fams[0]
	if st.Type != model.MetricTypeGauge || len(st.Samples) != len(rep.Statuses) {
		t.Fatalf("status family: type %s, %d samples for %d statuses", st.Type, len(st.Samples), len(rep.Statuses))
	}
	for _, word := range []string{"present", "renamed", "legacy", "removed", "absent"} {
		if !strings.Contains(st.Help, word+" = ") {
			t.Errorf("status HELP does not explain %q", word)
		}
	}
	for i, s := range st.Samples {
		want := rep.Statuses[i]
		if s.Value != 1 || s.Labels.Get("metric") != want.Metric || s.Labels.Get("status") != want.Status ||
			s.Labels.Get("replacement") != want.Replacement || s.Labels.Get(model.MetricNameLabel) != MetricStatusName {
			t.Errorf("sample %d = %s %v, want %+v", i, s.Labels, s.Value, want)
		}
	}
	up := fams[1].Samples[0]
	if up.Labels.Get("engine") != EngineV0 || up.Labels.Get("version_hint") != rep.Upstream.Labels["version_hint"] || up.Value != 1 {
		t.Errorf("upstream info %s", up.Labels)
	}
	text := string(exposition.AppendText(nil, fams))
	if !strings.Contains(text, `vllm_normalizer_metric_status{metric="vllm:kv_cache_usage_perc",replacement="",status="present"} 1`) {
		t.Errorf("replacement=\"\" not written for a current metric:\n%s", text[:400])
	}
}

func BenchmarkNormalize(b *testing.B) {
	for _, short := range []string{"13", "02", "03"} {
		b.Run(short, func(b *testing.B) {
			m := mustMapper(b, Options{})
			in := fixture(b, short)
			b.ReportAllocs()
			for b.Loop() {
				m.Normalize(in)
			}
		})
	}
}

// TestNormalizeLegacyOnlySeries: when both names are printed, a series
// (or a whole histogram child) that only the legacy name has is served
// under the current name; a child the current name has is served exactly
// as the current name prints it, never completed from the legacy one.
func TestNormalizeLegacyOnlySeries(t *testing.T) {
	m := mustMapper(t, Options{})
	const page = `# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.75
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.1",model_name="m"} 1
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 0.5
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 2
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{engine="0",le="0.05",model_name="m"} 1
vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2
vllm:time_per_output_token_seconds_sum{engine="0",model_name="m"} 0.5
vllm:time_per_output_token_seconds_count{engine="0",model_name="m"} 2
vllm:time_per_output_token_seconds_bucket{engine="1",le="0.05",model_name="m"} 3
vllm:time_per_output_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 4
vllm:time_per_output_token_seconds_sum{engine="1",model_name="m"} 1.5
vllm:time_per_output_token_seconds_count{engine="1",model_name="m"} 4
`
	out, rep := m.Normalize(parsePage(t, page))
	want := map[string]map[string]float64{
		"vllm:kv_cache_usage_perc": {
			`{__name__="vllm:kv_cache_usage_perc", engine="0", model_name="m"}`: 0.25,
			`{__name__="vllm:kv_cache_usage_perc", engine="1", model_name="m"}`: 0.75,
		},
		"vllm:inter_token_latency_seconds": {
			// engine 0: the current name's own child, its own buckets.
			`{__name__="vllm:inter_token_latency_seconds_bucket", engine="0", le="0.1", model_name="m"}`:  1,
			`{__name__="vllm:inter_token_latency_seconds_bucket", engine="0", le="+Inf", model_name="m"}`: 2,
			`{__name__="vllm:inter_token_latency_seconds_sum", engine="0", model_name="m"}`:               0.5,
			`{__name__="vllm:inter_token_latency_seconds_count", engine="0", model_name="m"}`:             2,
			// engine 1: only the legacy name has it.
			`{__name__="vllm:inter_token_latency_seconds_bucket", engine="1", le="0.05", model_name="m"}`: 3,
			`{__name__="vllm:inter_token_latency_seconds_bucket", engine="1", le="+Inf", model_name="m"}`: 4,
			`{__name__="vllm:inter_token_latency_seconds_sum", engine="1", model_name="m"}`:               1.5,
			`{__name__="vllm:inter_token_latency_seconds_count", engine="1", model_name="m"}`:             4,
		},
	}
	if len(out) != len(want) {
		t.Errorf("served %d families, want %d", len(out), len(want))
	}
	for name, ws := range want {
		f := family(out, name)
		if f == nil {
			t.Errorf("%s not served", name)
			continue
		}
		if got := series(*f); fmt.Sprint(got) != fmt.Sprint(ws) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, ws)
		}
	}
	if fmt.Sprint(rep.Disagreements) != "[vllm:inter_token_latency_seconds vllm:kv_cache_usage_perc]" {
		t.Errorf("disagreements %v", rep.Disagreements)
	}
	// The input is left as it was.
	in := parsePage(t, page)
	m.Normalize(in)
	if n := len(family(in, "vllm:kv_cache_usage_perc").Samples); n != 1 {
		t.Errorf("the input's current family now has %d samples", n)
	}
}

// kvOffloadPage is how vLLM 0.26 prints KV offloading with the CPU
// offloading spec (testdata/constructed/README.md).
func kvOffloadPage(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "constructed", "vllm-0.26-kv-offload.prom"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDeclaredEmptyCurrentFamilyDisagreesWithNothing: on a vLLM 0.26
// KV-offload page the six current families are declared without samples
// beside their legacy transfer_type twins. They disagree with nothing (the
// old rule counted six disagreements a scrape), and each is served with the
// twin's series of its transfer_type.
func TestDeclaredEmptyCurrentFamilyDisagreesWithNothing(t *testing.T) {
	m := mustMapper(t, Options{})
	in := parsePage(t, kvOffloadPage(t))
	if f := family(in, "vllm:kv_offload_load_bytes_total"); f == nil || len(f.Samples) != 0 {
		t.Fatalf("the page should hold vllm:kv_offload_load_bytes_total declared without samples, got %v", f)
	}
	out, rep := m.Normalize(in)
	if len(rep.Disagreements) != 0 {
		t.Errorf("disagreements %v, want none: a family without samples has no value to disagree with", rep.Disagreements)
	}
	for name, want := range map[string]map[string]float64{
		"vllm:kv_offload_load_bytes_total":  {`{__name__="vllm:kv_offload_load_bytes_total", engine="0", model_name="m"}`: 4.5e8},
		"vllm:kv_offload_store_bytes_total": {`{__name__="vllm:kv_offload_store_bytes_total", engine="0", model_name="m"}`: 9e8},
		"vllm:kv_offload_store_time_total":  {`{__name__="vllm:kv_offload_store_time_total", engine="0", model_name="m"}`: 1.5},
	} {
		f := family(out, name)
		if f == nil {
			t.Errorf("%s not served", name)
			continue
		}
		if got := series(*f); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
	if f := family(out, "vllm:kv_offload_load_size"); f == nil || len(f.Samples) != 4 {
		t.Errorf("vllm:kv_offload_load_size: %v, want the CPU_to_GPU child's 2 buckets, count and sum", f)
	}
}

// A fresh V1 server of a release before vLLM #60155 prints no running or
// waiting gauge until its first request: on a page without them that counts
// no finished request, their status says so rather than absent; once a
// request has finished, missing them is absent.
func TestNormalizeStatusUntilFirstRequest(t *testing.T) {
	m := mustMapper(t, Options{})
	page := func(finished float64) []exposition.Family {
		var out []exposition.Family
		for _, f := range fixture(t, "13") {
			switch f.Name {
			case "vllm:num_requests_running", "vllm:num_requests_waiting":
				continue
			case "vllm:request_success_total":
				f.Samples = slices.Clone(f.Samples)
				for i := range f.Samples {
					f.Samples[i].Value = finished
				}
			}
			out = append(out, f)
		}
		return out
	}
	for _, tc := range []struct {
		finished float64
		want     string
	}{{0, StatusUntilFirstRequest}, {3, StatusAbsent}} {
		_, rep := m.Normalize(page(tc.finished))
		if rep.Upstream.Engine != EngineV1 {
			t.Fatalf("engine %q, want v1", rep.Upstream.Engine)
		}
		for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting"} {
			if st, _ := statusOf(rep, name); st.Status != tc.want {
				t.Errorf("%v finished requests: %s is %s, want %s", tc.finished, name, st.Status, tc.want)
			}
		}
		// Families every release prints from the start stay absent.
		if st, _ := statusOf(rep, "vllm:kv_offload_load_bytes_total"); st.Status != StatusAbsent {
			t.Errorf("%v finished requests: kv_offload_load_bytes_total is %s, want absent", tc.finished, st.Status)
		}
	}
}
