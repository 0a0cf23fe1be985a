package demo

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/diagnosis"
)

// TestScenarioPerCause: the demo has a scenario per cause record that does
// not say why it has none, named by the cause, and no other but steady;
// each shifts the load.
func TestScenarioPerCause(t *testing.T) {
	var want []string
	for _, c := range diagnosis.Causes() {
		if c.NoDemo == "" {
			want = append(want, c.Name)
			if err := CheckScenario(c.Name); err != nil {
				t.Errorf("cause %s: %v (add its load to scenarioLoads, or say in its record why the demo has none)", c.Name, err)
			}
		}
	}
	if got := Scenarios[1:]; Scenarios[0] != ScenarioSteady || !slices.Equal(got, want) {
		t.Errorf("scenarios %v, want steady and then %v", Scenarios, want)
	}
	for _, sc := range Scenarios[1:] {
		before, after := scenarioLoads(sc)
		if before == after {
			t.Errorf("scenario %s shifts nothing", sc)
		}
	}
}

// TestScenarioDocs: docs/diagnosis.md's "Demo scenarios" has a row per
// scenario.
func TestScenarioDocs(t *testing.T) {
	b, err := os.ReadFile("../docs/diagnosis.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sect, _ := strings.Cut(string(b), "\n## Demo scenarios\n")
	sect, _, _ = strings.Cut(sect, "\n## ")
	for _, sc := range Scenarios {
		if !strings.Contains(sect, "\n| `"+sc+"` | ") {
			t.Errorf("docs/diagnosis.md's Demo scenarios has no row for %s", sc)
		}
	}
}
