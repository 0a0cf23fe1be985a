package collector

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// lintAllowed says whether promtool check metrics may warn about a family:
// only families the upstream server names itself, which the sidecar passes
// on as printed (renaming them would break every consumer that reads
// them): vLLM's and the other servers' colon-named families (vllm:,
// sglang:, llamacpp:), and TGI's, which has no namespace of its own
// (fixture 27: counters without _total, families without HELP). Every
// family of the sidecar's own (vllm_derived_*, vllm_normalizer_*,
// vllm_up, vllm_diagnosis_*) must lint clean.
func lintAllowed(family string) bool {
	return strings.Contains(family, ":") || strings.HasPrefix(family, "tgi_")
}

// promtoolPath finds promtool 3.x (testbin.PrometheusTool); under CI=true
// its absence fails the test, as CI must lint.
func promtoolPath(t *testing.T) string {
	t.Helper()
	return testbin.PrometheusTool(t, "promtool")
}

// lintPage runs promtool check metrics over page and fails on any
// problem outside lintAllowed, and on a page promtool cannot read.
func lintPage(t *testing.T, pt, name string, page []byte) {
	t.Helper()
	cmd := exec.Command(pt, "check", "metrics")
	cmd.Stdin = bytes.NewReader(page)
	out, err := cmd.CombinedOutput()
	problems := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		family, _, _ := strings.Cut(line, " ")
		if strings.HasPrefix(line, "error") || !lintAllowed(family) {
			t.Errorf("%s: promtool check metrics: %s", name, line)
		}
		problems++
	}
	if err != nil && problems == 0 {
		t.Errorf("%s: promtool check metrics failed without a problem line: %v\n%s", name, err, out)
	}
}

// TestGoldensLint runs promtool check metrics over every golden page: the
// sidecar's full output for each fixture and the demo's two pages.
func TestGoldensLint(t *testing.T) {
	pt := promtoolPath(t)
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "golden", "*.metrics"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("goldens: %v, %v", paths, err)
	}
	for _, p := range paths {
		page, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lintPage(t, pt, filepath.Base(p), page)
	}
}

// TestLintAllowedOnlyUpstream: the allow-list lets no family of the
// sidecar's own through, and promtool does flag what it should (so a
// clean run means something).
func TestLintAllowedOnlyUpstream(t *testing.T) {
	for _, own := range []string{"vllm_derived_ttft_seconds", "vllm_normalizer_scrapes_total", "vllm_up", "vllm_diagnosis_change_ratio"} {
		if lintAllowed(own) {
			t.Errorf("%s is allowed to lint dirty", own)
		}
	}
	pt := promtoolPath(t)
	cmd := exec.Command(pt, "check", "metrics")
	cmd.Stdin = strings.NewReader("# HELP vllm_derived_x_seconds x\n# TYPE vllm_derived_x_seconds gauge\nvllm_derived_x_seconds{quantile=\"0.9\"} 1\n")
	out, _ := cmd.CombinedOutput()
	if !bytes.Contains(out, []byte(`vllm_derived_x_seconds non-summary metrics should not have "quantile" label`)) {
		t.Errorf("promtool did not flag a quantile label on a gauge: %s", out)
	}
}
