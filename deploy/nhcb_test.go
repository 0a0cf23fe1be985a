package deploy

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	yaml "go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/internal/nhcb"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// TestRulesOnNativeHistograms: the recording rules answer the same when
// Prometheus 3 stores the histograms natively (a scrape job with
// convert_classic_histograms_to_nhcb: true keeps no _bucket, _sum or _count
// series). promtool runs recording_test.yml with each classic histogram's
// input series replaced by the one native histogram with custom buckets
// they convert to, and the same expectations.
func TestRulesOnNativeHistograms(t *testing.T) {
	pt := promtool(t)
	src, err := os.ReadFile(filepath.Join("prometheus", "tests", "recording_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file yaml.MapSlice
	if err := yaml.Unmarshal(src, &file); err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(filepath.Join("prometheus", "recording.yml"))
	if err != nil {
		t.Fatal(err)
	}
	histograms := catalogueHistograms(t)
	converted := 0
	for i, item := range file {
		switch item.Key {
		case "rule_files":
			file[i].Value = []string{rules}
		case "tests":
			for _, tc := range item.Value.([]any) {
				tc := tc.(yaml.MapSlice)
				for j, field := range tc {
					if field.Key == "input_series" {
						tc[j].Value, converted = toNativeSeries(t, field.Value.([]any), histograms, converted)
					}
				}
			}
		}
	}
	if converted < 4 {
		t.Fatalf("only %d histograms converted: recording_test.yml should feed the rules histograms", converted)
	}
	out, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "recording_nhcb_test.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := exec.Command(pt, "test", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules on native histograms (%d converted): %v\n%s", converted, err, res)
	}
	t.Logf("%d histograms read natively: the rules give recording_test.yml's answers", converted)
}

// catalogueHistograms says which families are the catalogue's histograms.
func catalogueHistograms(t *testing.T) func(string) bool {
	t.Helper()
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	return cat.Roles().IsHistogram
}

// nativeParts are one classic histogram's input series, point by point.
type nativeParts struct {
	lbls       string // the series' labels without le, as promtool reads them
	buckets    map[float64][]float64
	sum, count []float64
}

// toNativeSeries replaces the parts of every histogram in series by one
// native histogram series with custom buckets per label set.
func toNativeSeries(t *testing.T, series []any, isHistogram func(string) bool, converted int) ([]any, int) {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	var out []any
	byKey := map[string]*nativeParts{}
	var order []string
	for _, s := range series {
		m := s.(yaml.MapSlice)
		var desc, values string
		for _, f := range m {
			switch f.Key {
			case "series":
				desc = f.Value.(string)
			case "values":
				values = fmt.Sprint(f.Value)
			}
		}
		lbls, vals, err := p.ParseSeriesDesc(desc + " " + values)
		if err != nil {
			t.Fatalf("%s %s: %v", desc, values, err)
		}
		name := lbls.Get(model.MetricNameLabel)
		base, part := "", ""
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && isHistogram(b) {
				base, part = b, suffix
			}
		}
		if base == "" {
			out = append(out, s)
			continue
		}
		points := make([]float64, len(vals))
		for i, v := range vals {
			if v.Omitted {
				t.Fatalf("%s: a missing point is not converted here", desc)
			}
			points[i] = v.Value
		}
		b := labels.NewBuilder(lbls).Del("le").Set(model.MetricNameLabel, base).Labels()
		key := b.String()
		np := byKey[key]
		if np == nil {
			np = &nativeParts{lbls: key, buckets: map[float64][]float64{}}
			byKey[key] = np
			order = append(order, key)
		}
		switch part {
		case "_sum":
			np.sum = points
		case "_count":
			np.count = points
		default:
			le, err := strconv.ParseFloat(lbls.Get("le"), 64)
			if err != nil {
				t.Fatalf("%s: le: %v", desc, err)
			}
			np.buckets[le] = points
		}
	}
	for _, key := range order {
		out = append(out, yaml.MapSlice{{Key: "series", Value: key}, {Key: "values", Value: byKey[key].values(t)}})
		converted++
	}
	return out, converted
}

// values writes the points as promtool's native histogram notation.
func (np *nativeParts) values(t *testing.T) string {
	t.Helper()
	bounds := make([]float64, 0, len(np.buckets))
	n := 0
	for le, pts := range np.buckets {
		n = len(pts)
		if !math.IsInf(le, 1) {
			bounds = append(bounds, le)
		}
	}
	sort.Float64s(bounds)
	count := np.count
	if count == nil {
		count = np.buckets[math.Inf(1)]
	}
	if count == nil { // a test that feeds only the _sum: no observations counted
		count = make([]float64, len(np.sum))
	}
	if n == 0 {
		n = len(count)
	}
	var b strings.Builder
	for i := range n {
		total := count[i]
		var counts []string
		prev := 0.0
		for _, le := range bounds {
			counts = append(counts, strconv.FormatFloat(np.buckets[le][i]-prev, 'g', -1, 64))
			prev = np.buckets[le][i]
		}
		counts = append(counts, strconv.FormatFloat(total-prev, 'g', -1, 64))
		sum := 0.0
		if np.sum != nil {
			sum = np.sum[i]
		}
		cv := make([]string, len(bounds))
		for j, le := range bounds {
			cv[j] = strconv.FormatFloat(le, 'g', -1, 64)
		}
		custom := ""
		if len(cv) > 0 {
			custom = " custom_values:[" + strings.Join(cv, " ") + "]"
		}
		fmt.Fprintf(&b, "{{schema:-53 sum:%s count:%s%s buckets:[%s]}} ",
			strconv.FormatFloat(sum, 'g', -1, 64), strconv.FormatFloat(total, 'g', -1, 64), custom, strings.Join(counts, " "))
	}
	if slices.Contains(bounds, math.Inf(1)) {
		t.Fatal("unreachable: +Inf among the finite bounds")
	}
	return strings.TrimSpace(b.String())
}

// TestEveryRuleReadsNativeHistograms: a rule that reads a classic
// histogram's _bucket, _sum or _count series is written as nhcb.Either
// writes it, "(classic) or (native)", so that a job with
// convert_classic_histograms_to_nhcb: true does not leave it empty.
func TestEveryRuleReadsNativeHistograms(t *testing.T) {
	isHistogram := catalogueHistograms(t)
	p := parser.NewParser(parser.Options{})
	checked := 0
	for _, path := range ruleFiles {
		for _, g := range readRules(t, path).Groups {
			for _, r := range g.Rules {
				_, reads, err := nhcb.Native(r.Expr, isHistogram)
				if err != nil {
					t.Errorf("%s: rule %s%s: %v", path, r.Record, r.Alert, err)
					continue
				}
				if !reads {
					continue
				}
				checked++
				e, err := p.ParseExpr(r.Expr)
				if err != nil {
					t.Fatal(err)
				}
				bin, ok := unparen(e).(*parser.BinaryExpr)
				if ok && bin.Op == parser.LOR {
					want, _, err := nhcb.Native(unparen(bin.LHS).String(), isHistogram)
					if err == nil && want == unparen(bin.RHS).String() {
						continue
					}
				}
				t.Errorf("%s: rule %s%s reads classic histograms only: write it as nhcb.Either does, (classic) or (native)", path, r.Record, r.Alert)
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d rules read histograms", checked)
	}
}

func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}
