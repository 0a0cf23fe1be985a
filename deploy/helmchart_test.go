package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// helmChartFiles is the chart's directory of generated copies: Helm reads no
// file outside a chart (and a packaged chart has no symlinks), so the chart
// carries copies of the files it renders, and this test keeps them equal.
const helmChartFiles = "helm/vllm-normalizer/files"

// helmChartCopies maps each directory of copies in the chart to the glob of
// its sources, relative to deploy/.
var helmChartCopies = []struct{ dir, sources string }{
	{"rules", "prometheus/*.yml"},
	{"dashboards", "../dashboards/*.json"},
	{".", "components/sidecar/sidecar.yaml"},
}

// TestHelmChartFilesMatchSources fails when a copy in the chart differs from
// its source, when a source has no copy, or when a copy's source is gone; a
// new rule file or dashboard thus reaches the chart or fails here.
func TestHelmChartFilesMatchSources(t *testing.T) {
	const regen = "go test ./deploy -run TestHelmChartFilesMatchSources -update"
	for _, c := range helmChartCopies {
		sources, err := filepath.Glob(c.sources)
		if err != nil || len(sources) == 0 {
			t.Fatalf("%s: no source files (%v)", c.sources, err)
		}
		dir := filepath.Join(helmChartFiles, c.dir)
		want := map[string][]byte{}
		for _, src := range sources {
			data, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			want[filepath.Base(src)] = data
		}
		if *update {
			if c.dir != "." {
				// Drop stale copies, then write the current ones.
				old, _ := filepath.Glob(filepath.Join(dir, filepath.Base(c.sources)))
				for _, f := range old {
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, data := range want {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		copies, err := filepath.Glob(filepath.Join(dir, filepath.Base(c.sources)))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range copies {
			names = append(names, filepath.Base(f))
		}
		for name, data := range want {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Errorf("%s has no copy in the chart (%v): regenerate with %s", filepath.Join(filepath.Dir(c.sources), name), err, regen)
				continue
			}
			if !bytes.Equal(got, data) {
				t.Errorf("%s differs from its source %s: regenerate with %s", filepath.Join(dir, name), filepath.Join(filepath.Dir(c.sources), name), regen)
			}
		}
		for _, name := range names {
			if _, ok := want[name]; !ok {
				t.Errorf("%s has no source any more (sources: %s): regenerate with %s", filepath.Join(dir, name), c.sources, regen)
			}
		}
	}
}
