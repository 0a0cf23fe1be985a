package collector

import (
	"os"
	"testing"

	"go.yaml.in/yaml/v2"
)

// catalogueRenames reads mapping/catalogue.yaml itself, not through the
// mapper under test: legacy family -> the current family that carries its
// data, following chains of renames. Label-dependent (split) renames are
// left out; mapping's tests check them.
func catalogueRenames(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../mapping/catalogue.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Metrics []struct {
			Name        string `yaml:"name"`
			Replacement string `yaml:"replacement"`
		} `yaml:"metrics"`
	}
	if err := yaml.Unmarshal(b, &cat); err != nil {
		t.Fatal(err)
	}
	next := map[string]string{}
	for _, m := range cat.Metrics {
		if m.Replacement != "" {
			next[m.Name] = m.Replacement
		}
	}
	out := map[string]string{}
	for from, to := range next {
		for seen := 0; next[to] != "" && seen < len(next); seen++ {
			to = next[to]
		}
		out[from] = to
	}
	if len(out) < 5 {
		t.Fatalf("only %d renames in the catalogue", len(out))
	}
	return out
}
