package mapping

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// render is what the sidecar would serve for one page with these options,
// minus derived gauges and self-metrics: the presented families plus the
// status families, followed by the report's lists as comments.
func render(t *testing.T, m *Mapper, in []exposition.Family) []byte {
	t.Helper()
	norm, rep := m.Normalize(in)
	out, st := m.Present(append(norm, rep.Kept...))
	out = append(out, StatusFamilies(rep)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	var b bytes.Buffer
	b.WriteString("# legacy in use: " + strings.Join(rep.LegacyInUse, " ") + "\n")
	b.WriteString("# disagreements: " + strings.Join(rep.Disagreements, " ") + "\n")
	b.WriteString("# present stats: dropped=" + strconv.Itoa(st.Dropped) + " collisions=" + strconv.Itoa(st.Collisions) + "\n")
	b.Write(exposition.AppendText(nil, out))
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	aliasCfg := `metric_relabel_configs:
  - {source_labels: [__name__], regex: 'vllm:(nixl|estimated)_.*', action: drop}
  - {regex: engine, action: labeldrop}
`
	for _, tc := range []struct {
		name, page string
		opts       Options
		cfg        string
	}{
		{"01-v0-0.7", "01", Options{}, ""},
		{"02-v0-0.4", "02", Options{}, ""},
		{"03-composite", "03", Options{}, ""},
		{"12-v0-0.5", "12", Options{}, ""},
		{"13-v1", "13", Options{}, ""},
		{"13-v1-aliases-underscore-relabel", "13", Options{LegacyAliases: true, NameStyle: NameStyleUnderscore}, aliasCfg},
		{"synthetic-renames", "", Options{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := configured(t, tc.opts, tc.cfg)
			var in []exposition.Family
			if tc.page == "" {
				in = parsePage(t, synthetic)
			} else {
				in = fixture(t, tc.page)
			}
			got := render(t, m, in)
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./mapping -run TestGolden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (rerun with -update after checking the diff):\n%s", path, firstDiff(string(want), string(got)))
			}
			// Whatever is served must parse again.
			if _, _, err := exposition.Parse(got, "text/plain; version=0.0.4", exposition.ParseOptions{}); err != nil {
				t.Errorf("served output does not parse: %v", err)
			}
		})
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n- " + w + "\n+ " + g
		}
	}
	return ""
}
