package mapping

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// withValues returns a copy of fams with every sample's value set by f
// (of its family's index and the value): a page of the same shape.
func withValues(fams []exposition.Family, f func(i int, v float64) float64) []exposition.Family {
	out := slices.Clone(fams)
	for i := range out {
		out[i].Samples = slices.Clone(out[i].Samples)
		for j := range out[i].Samples {
			out[i].Samples[j].Value = f(i, out[i].Samples[j].Value)
		}
	}
	return out
}

// TestNormalizeShapeMatchesNormalize: on every text fixture, a page of the
// same shape with other values (all zero: no request finished yet; all
// moved on; negative) normalises with the memo of the first page exactly
// as Normalize does without one, families and report alike; and a memo
// another Mapper filled is not taken.
func TestNormalizeShapeMatchesNormalize(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "fixtures", "*.prom"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("fixtures: %v (%d)", err, len(paths))
	}
	mappers := map[string]*Mapper{
		"default": mustMapper(t, Options{}),
		"other":   mustMapper(t, Options{}),
	}
	changes := map[string]func(i int, v float64) float64{
		"zero":     func(int, float64) float64 { return 0 },
		"moved":    func(i int, v float64) float64 { return v*2 + float64(i) },
		"negative": func(i int, v float64) float64 { return -v - float64(i%3) },
	}
	pages := map[string][]exposition.Family{}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fams, _, err := exposition.Parse(b, exposition.ContentTypeText, exposition.ParseOptions{})
		if err != nil {
			continue // a fixture of a broken page (07's -nan(ind)): no shape to keep
		}
		name := strings.TrimSuffix(filepath.Base(path), ".prom")
		pages[name] = fams
		if strings.HasPrefix(name, "13-") {
			// A V1 page before its first request lacks the gauges vLLM
			// printed only after it: their status depends on the values.
			pages[name+"-before-first-request"] = slices.DeleteFunc(slices.Clone(fams), func(f exposition.Family) bool {
				return f.Name == "vllm:num_requests_running" || f.Name == "vllm:num_requests_waiting"
			})
		}
	}
	for name, first := range pages {
		for change, f := range changes {
			m := mappers["default"]
			var memo ShapeMemo
			gotFirst, repFirst := m.NormalizeShape(first, &memo, false)
			wantFirst, wantRepFirst := m.Normalize(first)
			if !reflect.DeepEqual(gotFirst, wantFirst) || !reflect.DeepEqual(repFirst, wantRepFirst) {
				t.Fatalf("%s: filling the memo changed what Normalize returns", name)
			}
			next := withValues(first, f)
			got, rep := m.NormalizeShape(next, &memo, true)
			want, wantRep := m.Normalize(next)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, values %s: the families differ from Normalize's", name, change)
			}
			if !reflect.DeepEqual(rep, wantRep) {
				t.Errorf("%s, values %s: report\n%+v\nNormalize's\n%+v", name, change, rep, wantRep)
			}
			// The report is the caller's: changing it leaves the memo as it was.
			rep.Upstream.Labels["evidence"] = "changed"
			if len(rep.Statuses) > 0 {
				rep.Statuses[0].Status = "changed"
			}
			if _, again := m.NormalizeShape(next, &memo, true); !reflect.DeepEqual(again, wantRep) {
				t.Errorf("%s, values %s: a change to a report reached the memo", name, change)
			}
			// Another Mapper (a reloaded configuration) finds it all again.
			other := mappers["other"]
			if _, rep := other.NormalizeShape(next, &memo, true); !reflect.DeepEqual(rep, wantRep) || memo.m != other {
				t.Errorf("%s, values %s: another Mapper took the memo", name, change)
			}
		}
	}
}

// TestPresentShapeMatchesPresent: on every text fixture, normalised, a
// page of the same shape with other values is presented with the memo of
// the first exactly as Present presents it without one, under every kind
// of configuration (none; the underscore style; legacy aliases; a drop
// list; relabelling), and a memo another Mapper filled is not taken.
func TestPresentShapeMatchesPresent(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "fixtures", "*.prom"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("fixtures: %v (%d)", err, len(paths))
	}
	cfg, err := LoadConfig([]byte(`
drop: [vllm:num_preemptions_total, vllm:gpu_cache_usage_perc]
metric_relabel_configs:
  - source_labels: [__name__]
    regex: vllm:num_requests_waiting
    target_label: __name__
    replacement: vllm:queued
`))
	if err != nil {
		t.Fatal(err)
	}
	dropOnly, err := LoadConfig([]byte("drop: [vllm:num_preemptions_total, vllm:kv_cache_usage_perc, vllm:gpu_cache_usage_perc]\n"))
	if err != nil {
		t.Fatal(err)
	}
	mappers := map[string]*Mapper{
		"default":    mustMapper(t, Options{}),
		"underscore": mustMapper(t, Options{NameStyle: NameStyleUnderscore}),
		"aliases":    mustMapper(t, Options{LegacyAliases: true}),
		"drop":       mustMapper(t, Options{Config: dropOnly}),
		"relabel":    mustMapper(t, Options{Config: cfg}),
	}
	other := mustMapper(t, Options{})
	kept := 0
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fams, _, err := exposition.Parse(b, exposition.ContentTypeText, exposition.ParseOptions{})
		if err != nil {
			continue // a fixture of a broken page: no shape to keep
		}
		name := strings.TrimSuffix(filepath.Base(path), ".prom")
		for mname, m := range mappers {
			printed := func(fams []exposition.Family) []exposition.Family {
				norm, rep := m.Normalize(exposition.DropCreated(slices.Clone(fams)))
				return append(norm, rep.Kept...)
			}
			var memo PresentMemo
			first := printed(fams)
			got, gst := m.PresentShape(first, &memo, false)
			if want, wst := m.Present(first); !reflect.DeepEqual(got, want) || gst != wst {
				t.Fatalf("%s, %s: filling the memo changed what Present returns", name, mname)
			}
			if memo.order != nil {
				kept++
			}
			next := printed(withValues(fams, func(i int, v float64) float64 { return v*3 + float64(i) }))
			got, gst = m.PresentShape(next, &memo, true)
			want, wst := m.Present(next)
			if !reflect.DeepEqual(got, want) || gst != wst {
				t.Errorf("%s, %s: %d families %+v, Present gives %d %+v", name, mname, len(got), gst, len(want), wst)
			}
			if got, _ := other.PresentShape(next, &memo, true); !reflect.DeepEqual(got, want) && mname == "default" || memo.m != other {
				t.Errorf("%s, %s: another Mapper took the memo", name, mname)
			}
		}
	}
	if kept < len(paths) {
		t.Fatalf("%d arrangements kept over %d fixtures and %d configurations: the test would not test them", kept, len(paths), len(mappers))
	}
}

// With ReadOnly the report of a page of the memo's shape shares the memo's
// statuses instead of copying them, and still equals Normalize's; the
// statuses it changes for a page before the first request are a copy, and
// an append to the report's statuses leaves the memo as it was.
func TestNormalizeShapeReadOnlyShares(t *testing.T) {
	m := mustMapper(t, Options{})
	b, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", "13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := exposition.Parse(b, exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	memo := ShapeMemo{ReadOnly: true}
	m.NormalizeShape(first, &memo, false)
	if !memo.ReadOnly {
		t.Fatal("filling the memo dropped ReadOnly")
	}
	_, rep := m.NormalizeShape(first, &memo, true)
	_, want := m.Normalize(first)
	if !reflect.DeepEqual(rep, want) {
		t.Fatalf("report\n%+v\nNormalize's\n%+v", rep, want)
	}
	if len(rep.Statuses) == 0 || &rep.Statuses[0] != &memo.statuses[0] {
		t.Error("a ReadOnly memo's statuses were copied")
	}
	_ = append(rep.Statuses, Status{Metric: "appended"})
	if _, again := m.NormalizeShape(first, &memo, true); !reflect.DeepEqual(again, want) {
		t.Error("an append to a shared report reached the memo")
	}
	// Before the first request (no request finished, the gauges printed
	// only after it absent) some statuses read until_first_request, in a
	// copy: the next page of that shape, requests finished, reads none.
	shape := slices.DeleteFunc(slices.Clone(first), func(f exposition.Family) bool {
		return f.Name == "vllm:num_requests_running" || f.Name == "vllm:num_requests_waiting"
	})
	idle := withValues(shape, func(int, float64) float64 { return 0 })
	busy := withValues(shape, func(i int, v float64) float64 { return v*2 + 1 })
	memo = ShapeMemo{ReadOnly: true}
	m.NormalizeShape(idle, &memo, false)
	_, rep = m.NormalizeShape(idle, &memo, true)
	if _, want := m.Normalize(idle); !reflect.DeepEqual(rep, want) {
		t.Fatalf("before the first request: report\n%+v\nNormalize's\n%+v", rep, want)
	}
	if !slices.ContainsFunc(rep.Statuses, func(s Status) bool { return s.Status == StatusUntilFirstRequest }) {
		t.Fatal("no status reads until_first_request: the page is not one before the first request")
	}
	if _, got := m.NormalizeShape(busy, &memo, true); !reflect.DeepEqual(got, func() Report { _, r := m.Normalize(busy); return r }()) {
		t.Error("the statuses changed before the first request reached the memo")
	}
}
