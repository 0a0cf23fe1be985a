package derive

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/fos-study/vllm-normalizer/internal/nhcb"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// The recording rules of the derived gauges in deploy/prometheus/recording.yml
// are generated from the spec table, between these two lines; the rest of
// the file (the diagnosis and fleet groups) is written by hand.
const (
	rulesFile  = "../deploy/prometheus/recording.yml"
	rulesBegin = "  # derived-rules:begin (generated from derive's spec table: go test ./derive -run TestGeneratedRecordingRules -update)\n"
	rulesEnd   = "  # derived-rules:end\n"
)

// ruleGrouping is what a derived rule keeps of a series: the pod
// Prometheus's Kubernetes discovery names, and the sidecar's grouping.
const (
	ruleGrouping         = ruleGroupingPerModel + ", " + mapping.LabelEngine
	ruleGroupingPerModel = "namespace, pod, " + mapping.LabelModel
)

// ruleSLOTargets are the targets the attainment rules are recorded for: those
// of deploy/autoscaling/slo (deploy's TestRulesParse checks them).
var ruleSLOTargets = SLOTargets{TTFT: []time.Duration{500 * time.Millisecond}, TPOT: []time.Duration{50 * time.Millisecond}, E2E: []time.Duration{10 * time.Second}}

// rangeCall is a range function over one selector in a spec's PromQL.
var rangeCall = regexp.MustCompile(`\b(rate|increase|avg_over_time)\(([^()\[\]]+)\[w\]\)`)

// ruleRef is an earlier gauge's rule in a Rule template.
var ruleRef = regexp.MustCompile(`\{rule (vllm_derived_[a-z0-9_]+)\}`)

type recordingRule struct {
	record, expr string
	labels       [][2]string
}

// recordName is the rule of gauge name for window w ("" for a gauge of the
// current scrape).
func recordName(s Spec, w string) string {
	return "vllm:derived_" + strings.TrimPrefix(s.Name, "vllm_derived_") + ":" + s.Record + w
}

// specRules are a spec's recording rules for window w: one, or one per
// quantile or SLO target.
func specRules(s Spec, w string, roles *mapping.Roles, earlier map[string]Spec) ([]recordingRule, error) {
	by, expr := ruleGrouping, s.Rule
	if s.PerModel { // a gauge of the whole server: no engine label to keep
		by = ruleGroupingPerModel
	}
	base := [][2]string{}
	if w != "" {
		base = append(base, [2]string{WindowLabel, w})
	}
	perValue := ""
	for _, l := range s.Labels {
		switch l {
		case QuantileLabel, SLOLabel, SLOTargetLabel:
		case PerLabel:
			perValue = perTPRank
		default: // a label of the inputs the gauge keeps: part of the grouping
			by += ", " + l
		}
	}
	if expr == "" {
		if !rangeCall.MatchString(s.PromQL) {
			return nil, fmt.Errorf("%s: its PromQL %q has no range function over [w] to sum by the grouping; give the spec a Rule", s.Name, s.PromQL)
		}
		expr = rangeCall.ReplaceAllString(s.PromQL, "sum by ({by}) ($1($2[w]))")
	}
	var refErr error
	expr = ruleRef.ReplaceAllStringFunc(expr, func(m string) string {
		ref, ok := earlier[ruleRef.FindStringSubmatch(m)[1]]
		if !ok {
			refErr = fmt.Errorf("%s: its Rule reads %s, which is not a gauge before it in the spec table (rules of a group run in order)", s.Name, m)
		}
		return recordName(ref, w)
	})
	if refErr != nil {
		return nil, refErr
	}
	expr = strings.NewReplacer("{by}", by, "[w]", "["+w+"]", "{w}", w).Replace(expr)
	if perValue != "" {
		base = append(base, [2]string{PerLabel, perValue})
	}
	var out []recordingRule
	switch {
	case slices.Contains(s.Labels, QuantileLabel):
		for _, q := range derivedQuantiles {
			out = append(out, recordingRule{recordName(s, w), strings.ReplaceAll(expr, "{q}", q.label), append(slices.Clone(base), [2]string{QuantileLabel, q.label})})
		}
	case slices.Contains(s.Labels, SLOLabel):
		for _, k := range sloKinds {
			for _, t := range k.get(&ruleSLOTargets) {
				// A bound reads 10 or 10.0 depending on who wrote the page
				// and the Prometheus that scraped it.
				spellings := []string{regexp.QuoteMeta(strconv.FormatFloat(t.Seconds(), 'f', -1, 64))}
				if o := regexp.QuoteMeta(FormatSLOTarget(t)); o != spellings[0] {
					spellings = append(spellings, o)
				}
				le := strings.ReplaceAll(strings.Join(spellings, "|"), `\`, `\\`) // a PromQL string
				e := strings.NewReplacer("{histogram}", roles.Family(k.src.Role()), "{le}", le).Replace(expr)
				out = append(out, recordingRule{recordName(s, w), e, append(slices.Clone(base), [2]string{SLOLabel, k.label}, [2]string{SLOTargetLabel, FormatSLOTarget(t)})})
			}
		}
	default:
		out = append(out, recordingRule{recordName(s, w), expr, base})
	}
	return out, nil
}

// derivedRules is the generated part of recording.yml: a group per window of
// windows, and one for the gauges of the current scrape.
func derivedRules(roles *mapping.Roles, windows []time.Duration) (string, error) {
	var b strings.Builder
	b.WriteString("  # Do not edit: each gauge's rule comes from its entry in derive/spec.go\n" +
		"  # (docs/develop.md, \"Add a derived gauge\"), documented in docs/derived.md.\n")
	group := func(name string, now bool, w string) error {
		fmt.Fprintf(&b, "  - name: %s\n    rules:\n", name)
		earlier := map[string]Spec{}
		for _, s := range Specs(roles) {
			if s.Now != now {
				continue
			}
			rules, err := specRules(s, w, roles, earlier)
			if err != nil {
				return err
			}
			earlier[s.Name] = s
			for _, r := range rules {
				// Prometheus 3 may store the histograms natively
				// (convert_classic_histograms_to_nhcb): the rule reads either.
				expr, err := nhcb.Either(r.expr, roles.IsHistogram)
				if err != nil {
					return fmt.Errorf("%s: %w", s.Name, err)
				}
				r.expr = expr
				fmt.Fprintf(&b, "      - record: %s\n        expr: |\n", r.record)
				for line := range strings.SplitSeq(r.expr, "\n") {
					b.WriteString("          " + line + "\n")
				}
				if len(r.labels) > 0 {
					b.WriteString("        labels:\n")
				}
				for _, l := range r.labels {
					v := l[1]
					if _, err := strconv.ParseFloat(v, 64); err == nil {
						v = strconv.Quote(v) // a string, not a YAML number
					}
					fmt.Fprintf(&b, "          %s: %s\n", l[0], v)
				}
			}
		}
		return nil
	}
	for _, d := range windows {
		w := model.Duration(d).String()
		if err := group("vllm-derived-"+w, false, w); err != nil {
			return "", err
		}
	}
	b.WriteString("  # Gauges of the current scrape: no window.\n")
	if err := group("vllm-derived-now", true, ""); err != nil {
		return "", err
	}
	return b.String(), nil
}

// deploy/prometheus/recording.yml's derived rules are the spec table's, over
// the default windows, and each parses as PromQL.
func TestGeneratedRecordingRules(t *testing.T) {
	want, err := derivedRules(testRoles(), DefaultWindows())
	if err != nil {
		t.Fatal(err)
	}
	exprRE := regexp.MustCompile(`(?m)^        expr: \|\n((?:          .*\n)+)`)
	p := parser.NewParser(parser.Options{})
	for _, m := range exprRE.FindAllStringSubmatch(want, -1) {
		if _, err := p.ParseExpr(m[1]); err != nil {
			t.Errorf("generated rule does not parse: %v\n%s", err, m[1])
		}
	}
	checkGenerated(t, rulesFile, rulesBegin, rulesEnd, want,
		"the derived rules differ from derive's spec table; run go test ./derive -run TestGeneratedRecordingRules -update, then go test ./deploy -run TestPrometheusRuleMatchesFiles -update")
}
