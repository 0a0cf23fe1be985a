// Package nhcb rewrites PromQL that reads classic histograms (their _bucket,
// _sum and _count series) so that it also reads them as Prometheus 3 stores
// them when a scrape job sets convert_classic_histograms_to_nhcb: one native
// histogram with custom buckets per series, and no _bucket, _sum or _count
// series at all. The shipped recording rules and dashboards are written
// with Either, so they answer the same on either kind of job.
package nhcb

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Either returns expr when it reads no classic histogram, and otherwise
// "(expr) or (native)", with native reading the same histograms as native
// ones. A pod's histograms are stored one way or the other, so for each
// output series at most one side has data; where the classic side has it,
// or keeps it. isHistogram says which family names are histograms (so a
// summary's _sum and _count are left alone).
func Either(expr string, isHistogram func(family string) bool) (string, error) {
	native, changed, err := Native(expr, isHistogram)
	if err != nil || !changed {
		return expr, err
	}
	return "(\n" + indent(expr) + "\n)\nor\n(\n" + indent(native) + "\n)", nil
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// Native returns expr reading the classic histograms it names as native
// histograms, and whether it read any.
func Native(expr string, isHistogram func(family string) bool) (string, bool, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return "", false, fmt.Errorf("nhcb: %q is not PromQL: %w", expr, err)
	}
	r := rewriter{isHistogram: isHistogram}
	e = r.expr(e)
	if r.err != nil {
		return "", false, r.err
	}
	return e.String(), r.changed, nil
}

type rewriter struct {
	isHistogram func(string) bool
	changed     bool
	err         error
}

func (r *rewriter) expr(e parser.Expr) parser.Expr {
	switch n := e.(type) {
	case *parser.AggregateExpr:
		if sel := r.part(n.Expr, "_bucket"); sel != nil {
			return r.buckets(n, sel)
		}
		n.Expr = r.expr(n.Expr)
		if n.Param != nil {
			n.Param = r.expr(n.Param)
		}
	case *parser.Call:
		for _, part := range []string{"_sum", "_count"} {
			if sel := r.part(n, part); sel != nil {
				r.toNative(sel, part)
				return call("histogram"+part, n)
			}
		}
		for i, a := range n.Args {
			n.Args[i] = r.expr(a)
		}
	case *parser.BinaryExpr:
		n.LHS, n.RHS = r.expr(n.LHS), r.expr(n.RHS)
	case *parser.ParenExpr:
		n.Expr = r.expr(n.Expr)
	case *parser.UnaryExpr:
		n.Expr = r.expr(n.Expr)
	case *parser.SubqueryExpr:
		n.Expr = r.expr(n.Expr)
	case *parser.MatrixSelector, *parser.VectorSelector:
		if sel := selectorOf(n); sel != nil && r.classicPart(sel.Name) != "" {
			r.fail(fmt.Errorf("nhcb: %s is read outside rate() or increase() in an aggregation: no native form is known; write the expression so", sel.Name))
		}
	}
	return e
}

// buckets rewrites an aggregation of a rate or increase of a histogram's
// buckets: grouped by le (a quantile's or heatmap's input) it becomes the
// same aggregation of the native histogram; restricted to one bound by an le
// matcher (the share under a target), the count at or under that bound.
func (r *rewriter) buckets(agg *parser.AggregateExpr, sel *parser.VectorSelector) parser.Expr {
	if i := slices.Index(agg.Grouping, "le"); i >= 0 && !agg.Without {
		agg.Grouping = slices.Delete(agg.Grouping, i, i+1)
		if hasLe(sel) {
			r.fail(fmt.Errorf("nhcb: %s grouped by le and restricted to some le: no native form is known", sel.Name))
		}
		r.toNative(sel, "_bucket")
		return agg
	}
	bound, ok := leBound(sel)
	if !ok {
		r.fail(fmt.Errorf("nhcb: %s aggregated without le and not restricted to one bound: no native form is known", sel.Name))
		return agg
	}
	r.toNative(sel, "_bucket")
	count := call("histogram_count", agg)
	if math.IsInf(bound, 1) {
		return count
	}
	fraction := call("histogram_fraction", &parser.NumberLiteral{Val: math.Inf(-1)}, &parser.NumberLiteral{Val: bound}, agg)
	return &parser.ParenExpr{Expr: &parser.BinaryExpr{Op: parser.MUL, LHS: fraction, RHS: count, VectorMatching: &parser.VectorMatching{Card: parser.CardOneToOne}}}
}

// part returns the selector of a histogram's part read by e, when e is
// rate(...) or increase(...) of it.
func (r *rewriter) part(e parser.Expr, suffix string) *parser.VectorSelector {
	c, ok := e.(*parser.Call)
	if !ok || (c.Func.Name != "rate" && c.Func.Name != "increase") || len(c.Args) != 1 {
		return nil
	}
	sel := selectorOf(c.Args[0])
	if sel == nil || r.classicPart(sel.Name) != suffix {
		return nil
	}
	return sel
}

// classicPart is the suffix (_bucket, _sum, _count) of a histogram's part
// named name, "" if name is none.
func (r *rewriter) classicPart(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, s); ok && r.isHistogram(base) {
			return s
		}
	}
	return ""
}

// toNative makes sel select the histogram itself: its name without the
// part's suffix, without le matchers.
func (r *rewriter) toNative(sel *parser.VectorSelector, suffix string) {
	r.changed = true
	sel.Name = strings.TrimSuffix(sel.Name, suffix)
	sel.LabelMatchers = slices.DeleteFunc(sel.LabelMatchers, func(m *labels.Matcher) bool { return m.Name == "le" })
	for i, m := range sel.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			sel.LabelMatchers[i] = parser.MustLabelMatcher(labels.MatchEqual, model.MetricNameLabel, sel.Name)
		}
	}
}

func (r *rewriter) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func selectorOf(e parser.Expr) *parser.VectorSelector {
	switch n := e.(type) {
	case *parser.MatrixSelector:
		sel, _ := n.VectorSelector.(*parser.VectorSelector)
		return sel
	case *parser.VectorSelector:
		return n
	}
	return nil
}

func hasLe(sel *parser.VectorSelector) bool {
	return slices.ContainsFunc(sel.LabelMatchers, func(m *labels.Matcher) bool { return m.Name == "le" })
}

// leBound is the one bucket bound sel's le matcher picks: le="0.5", or a
// regular expression of spellings of one number (le=~"0\\.5|0\\.50").
func leBound(sel *parser.VectorSelector) (float64, bool) {
	for _, m := range sel.LabelMatchers {
		if m.Name != "le" {
			continue
		}
		var spellings []string
		switch m.Type {
		case labels.MatchEqual:
			spellings = []string{m.Value}
		case labels.MatchRegexp:
			spellings = strings.Split(strings.ReplaceAll(m.Value, `\.`, "."), "|")
		default:
			return 0, false
		}
		bound, err := strconv.ParseFloat(spellings[0], 64)
		if err != nil {
			return 0, false
		}
		for _, s := range spellings[1:] {
			if v, err := strconv.ParseFloat(s, 64); err != nil || v != bound {
				return 0, false
			}
		}
		return bound, true
	}
	return 0, false
}

func call(name string, args ...parser.Expr) *parser.Call {
	return &parser.Call{Func: parser.Functions[name], Args: args}
}
