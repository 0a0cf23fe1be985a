package mapping

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// vLLM fixtures, by short name (see testdata/fixtures/README.md).
var fixtures = map[string]string{
	"01": "01-vllm-0.7.x-aibrix-runtime-docs.prom",
	"02": "02-vllm-0.4.3to0.5.0-datadog-vllm-fixture.prom",
	"03": "03-vllm-composite-0.5.0+v1families-datadog-vllm-fixture.prom",
	"04": "04-sglang-0.3.x-sglang-docs-production_metrics.prom",
	"12": "12-vllm-0.5.x-V0-kubeai-hack-vllm-mock-metrics.prom",
	"13": "13-vllm-v1-2026-nixl-pd-kserve-llmisvc-context.prom",
}

func fixture(t testing.TB, short string) []exposition.Family {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", fixtures[short]))
	if err != nil {
		t.Fatal(err)
	}
	return parsePage(t, string(b))
}

func parsePage(t testing.TB, page string) []exposition.Family {
	t.Helper()
	fams, _, err := exposition.Parse([]byte(page), "text/plain; version=0.0.4", exposition.ParseOptions{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return fams
}

func mustCatalogue(t testing.TB) *Catalogue {
	t.Helper()
	cat, err := LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func mustMapper(t testing.TB, opts Options) *Mapper {
	t.Helper()
	m, err := New(mustCatalogue(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func family(fams []exposition.Family, name string) *exposition.Family {
	for i := range fams {
		if fams[i].Name == name {
			return &fams[i]
		}
	}
	return nil
}

// series maps each sample's full label set (with __name__) to its value.
func series(fams ...exposition.Family) map[string]float64 {
	out := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.Samples {
			out[s.Labels.String()] = s.Value
		}
	}
	return out
}

// renameSeries returns f's series as they would look under family name to,
// computed independently of the code under test: the family-name prefix of
// each sample name is replaced, the suffix kept.
func renameSeries(f *exposition.Family, to string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range f.Samples {
		name := s.Labels.Get(model.MetricNameLabel)
		b := labels.NewBuilder(s.Labels)
		b.Set(model.MetricNameLabel, to+name[len(f.Name):])
		out[b.Labels().String()] = s.Value
	}
	return out
}

func statusOf(r Report, metric string) (Status, bool) {
	i := sort.Search(len(r.Statuses), func(i int) bool { return r.Statuses[i].Metric >= metric })
	if i < len(r.Statuses) && r.Statuses[i].Metric == metric {
		return r.Statuses[i], true
	}
	return Status{}, false
}

// deepCopy copies families so that a later comparison detects in-place edits.
func deepCopy(in []exposition.Family) []exposition.Family {
	out := make([]exposition.Family, len(in))
	for i, f := range in {
		out[i] = f
		out[i].Samples = make([]exposition.Sample, len(f.Samples))
		for j, s := range f.Samples {
			s.Labels = s.Labels.Copy()
			out[i].Samples[j] = s
		}
	}
	return out
}

func equalFamilies(t *testing.T, got, want []exposition.Family) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d families, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Type != w.Type || g.Help != w.Help || g.Unit != w.Unit || len(g.Samples) != len(w.Samples) {
			t.Fatalf("family %d changed: %q/%s -> %q/%s", i, w.Name, w.Type, g.Name, g.Type)
		}
		for j := range g.Samples {
			gs, ws := g.Samples[j], w.Samples[j]
			if !labels.Equal(gs.Labels, ws.Labels) || !(gs.Value == ws.Value || gs.Value != gs.Value && ws.Value != ws.Value) {
				t.Fatalf("family %q sample %d changed: %s %v -> %s %v", g.Name, j, ws.Labels, ws.Value, gs.Labels, gs.Value)
			}
		}
	}
}
