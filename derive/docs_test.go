package derive

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
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
	checkGenerated(t, "../docs/derived.md", tableBegin, tableEnd, derivedTable(testRoles()),
		"the derived-gauge table is stale; run go test ./derive -run TestDerivedTable -update")
}

// checkGenerated fails when the text between the lines begin and end of
// the file at path is not want, saying stale; with -update it writes want
// there instead.
func checkGenerated(t *testing.T, path, begin, end, want, stale string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q section", path, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	if got := text[i+len(begin) : j]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(text[:i+len(begin)]+want+text[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", path, stale, got, want)
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
		var windows []string
		for _, d := range DefaultWindows() {
			windows = append(windows, model.Duration(d).String())
		}
		if s.Now {
			windows = []string{""} // a value of the current scrape
		}
		for _, w := range windows {
			rec := recordName(s, w)
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

func testRoles() *mapping.Roles {
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		panic(err)
	}
	return cat.Roles()
}
