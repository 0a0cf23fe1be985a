package mapping

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// literalExempt are the directories whose Go code may spell upstream metric
// names, and why. Everything else works on roles: a new vLLM release or a
// new server kind is a data change (catalogue, roles, profiles) plus
// fixtures, never a Go change.
var literalExempt = map[string]string{
	"demo":       "simulates a vLLM server, so it prints vLLM's own names",
	"dashboards": "generates Grafana dashboards whose PromQL queries vLLM's names",
	"scripts":    "fixture generators and measurement tools, which write or read one server's page on purpose",
}

// No Go string literal outside tests and the exempt directories holds an
// upstream metric name: none starts a name with a prefix of the catalogue
// or of a server profile.
func TestNoMetricNameLiterals(t *testing.T) {
	cat, err := LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := LoadProfiles(cat.Roles())
	if err != nil {
		t.Fatal(err)
	}
	prefixes := []string{cat.Prefix}
	for _, p := range ps.All() {
		prefixes = append(prefixes, p.Detect.Prefixes...)
	}
	root := ".."
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			top, _, _ := strings.Cut(rel, string(filepath.Separator))
			if _, ok := literalExempt[top]; ok || strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				// A module of its own (e2e/consumers/*: tests that read
				// consumers' names on purpose) is not part of the product.
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, pre := range prefixes {
				if i := strings.Index(s, pre); i >= 0 && (i == 0 || !isNameByte(s[i-1])) && len(s) > i+len(pre) && isNameByte(s[i+len(pre)]) {
					t.Errorf("%s: string %q spells an upstream metric name (%s...): read it from the catalogue, roles or a profile instead", fset.Position(lit.Pos()), s, pre)
					break
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("only %d Go files checked; is the walk rooted at the repository?", checked)
	}
}

func isNameByte(b byte) bool {
	return b == '_' || b == ':' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}
