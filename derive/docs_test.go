package derive

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"

	"github.com/fos-study/vllm-normalizer/mapping"
)

var update = flag.Bool("update", false, "rewrite docs/derived.md's derived-gauge table from the spec table")

const (
	tableBegin = "<!-- derived-gauges:begin (generated from derive's spec table: go test ./derive -run TestDerivedTable -update) -->\n"
	tableEnd   = "<!-- derived-gauges:end -->\n"
)

// derivedTable is docs/derived.md's table of derived gauges, written from the specs.
func derivedTable(roles *mapping.Roles) string {
	var b strings.Builder
	b.WriteString("| gauge | definition (PromQL over the window `w`) | unit | routing decision it serves |\n|---|---|---|---|\n")
	for _, s := range Specs(roles) {
		name := s.Name
		if len(s.Labels) > 0 {
			name += "{" + strings.Join(s.Labels, ",") + "}"
		}
		b.WriteString("| `" + name + "` | `" + s.PromQL + "` | " + s.Unit + " | " + s.Decision + " |\n")
	}
	return b.String()
}

// docs/derived.md's table of derived gauges is the spec table's.
func TestDerivedTable(t *testing.T) {
	const path = "../docs/derived.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i, j := strings.Index(text, tableBegin), strings.Index(text, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/derived.md has no %q ... %q section", strings.TrimSpace(tableBegin), strings.TrimSpace(tableEnd))
	}
	want := derivedTable(testRoles())
	if got := text[i+len(tableBegin) : j]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(text[:i+len(tableBegin)]+want+text[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/derived.md's derived-gauge table is stale; run go test ./derive -run TestDerivedTable -update\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// docs/derived.md documents every derived gauge.
func TestDerivedDocs(t *testing.T) {
	raw, err := os.ReadFile("../docs/derived.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Specs(testRoles()) {
		if !strings.Contains(string(raw), "`"+s.Name) {
			t.Errorf("docs/derived.md does not document %s", s.Name)
		}
	}
}

// Every derived gauge has a recording rule in deploy/prometheus for each
// window the rules cover, named vllm:derived_<gauge>:<operation><window>,
// computed from the families of the roles the gauge reads (directly or
// through another recording rule).
func TestRecordingRulesCoverSpecs(t *testing.T) {
	raw, err := os.ReadFile("../deploy/prometheus/recording.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			exprs[r.Record] += r.Expr + "\n"
		}
	}
	recordRE := regexp.MustCompile(`vllm:derived_[a-z0-9_]+:[a-z_]+[0-9]+[smh]`)
	var mentions func(expr, family string, depth int) bool
	mentions = func(expr, family string, depth int) bool {
		if strings.Contains(expr, family) {
			return true
		}
		for _, rec := range recordRE.FindAllString(expr, -1) {
			if depth < 3 && mentions(exprs[rec], family, depth+1) {
				return true
			}
		}
		return false
	}
	roles := testRoles()
	for _, s := range Specs(roles) {
		if awaitingGeneratedRules[s.Name] {
			continue
		}
		windows := []string{"1m", "5m"}
		if s.Now {
			windows = []string{""} // a value of the current scrape
		}
		for _, w := range windows {
			rec := "vllm:derived_" + strings.TrimPrefix(s.Name, "vllm_derived_") + ":" + s.Record + w
			expr, ok := exprs[rec]
			if !ok {
				t.Errorf("%s: no recording rule %s", s.Name, rec)
				continue
			}
			if s.RuleAggregatesGauge {
				// PromQL cannot compute it from the raw series: the rule
				// aggregates the sidecar's gauge.
				if !strings.Contains(expr, s.Name) {
					t.Errorf("%s: rule %s does not aggregate %s", s.Name, rec, s.Name)
				}
				continue
			}
			for _, in := range s.Inputs {
				if in == mapping.RolePrefixCacheHitRateGauge {
					continue // the V0 fallback has no recording rule
				}
				if fam := roles.Family(in); !mentions(expr, fam, 0) {
					t.Errorf("%s: rule %s does not read %s (role %s)", s.Name, rec, fam, in)
				}
			}
		}
	}
}

// awaitingGeneratedRules are the gauges added or changed (the prefill
// fallback) while deploy/prometheus/recording.yml is being made generated
// from this table (branch gen): their windowed rules are written by that
// generator, not by hand. Empty this when it lands.
var awaitingGeneratedRules = map[string]bool{
	DerivedFinishedRatio: true, DerivedAdmissionRejectionsPerSecond: true, DerivedAdmissionRejectedRatio: true,
	DerivedAdmissionAtCap: true, DerivedPrefillTokensPerSecond: true, DerivedPrefillBacklogSeconds: true,
}

func testRoles() *mapping.Roles {
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		panic(err)
	}
	return cat.Roles()
}
