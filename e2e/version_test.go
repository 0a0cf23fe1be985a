package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// TestMakeBuildStampsVersion: `make build` stamps version, revision,
// branch and build date, and --version, vllm_normalizer_build_info and
// the landing page show them.
func TestMakeBuildStampsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of the fast lane (-short): builds the binary again with make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make is not installed; deploy/ci-deps.sh installs it")
		}
		t.Skip("make is not installed")
	}
	bin := filepath.Join(t.TempDir(), "vllm-normalizer")
	const ver, rev, branch, date = "9.8.7-test", "feedc0de", "release-9.8", "20261201-10:15:00"
	// make's own command, without CGO_ENABLED=0 and -trimpath: those
	// rebuild every dependency (minutes on a busy machine), while the
	// stamping is all in -ldflags.
	dry := exec.Command("make", "-s", "-n", "build", "OUT="+bin, "VERSION="+ver, "REVISION="+rev, "BRANCH="+branch, "BUILD_DATE="+date)
	dry.Dir = repoRoot()
	line, err := dry.Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	script := strings.NewReplacer("CGO_ENABLED=0 ", "", " -trimpath", "").Replace(strings.TrimSpace(string(line)))
	if !strings.Contains(script, "go build") || !strings.Contains(script, "-ldflags") {
		t.Fatalf("make build does not run go build with -ldflags: %s", line)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	for _, w := range []string{"version " + ver, "branch: " + branch, "revision: " + rev, "build date:       " + date} {
		if !strings.Contains(string(out), w) {
			t.Errorf("--version does not say %q:\n%s", w, out)
		}
	}

	ln := listen(t, "127.0.0.1:0")
	serveOn(t, ln, static(v1Page(1, 1)))
	p := testbin.StartBinary(t, bin, testbin.FreeAddr(t), "http", sidecarArgs("http://"+ln.Addr().String()+"/metrics", fastInterval, fastTimeout)...)
	s, _ := metrics(t, p)
	if !hasSeries(s, "vllm_normalizer_build_info", `version="`+ver+`"`) || !hasSeries(s, "vllm_normalizer_build_info", `revision="`+rev+`"`) || !hasSeries(s, "vllm_normalizer_build_info", `branch="`+branch+`"`) {
		t.Errorf("vllm_normalizer_build_info does not carry the stamped fields: %v", s.with("vllm_normalizer_build_info"))
	}
	landing := string(mustGet(t, p.URL+"/").body)
	for _, w := range []string{ver, rev, branch, date} {
		if !strings.Contains(landing, w) {
			t.Errorf("the landing page does not show %q", w)
		}
	}
}

// TestPlainBuildVersionNotBlank: a plain go build (the test binary) names
// what it does not know instead of printing empty fields.
func TestPlainBuildVersionNotBlank(t *testing.T) {
	out, err := exec.Command(testbin.Build(t), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	for _, blank := range []string{"version  (", "branch: ,", "revision: )", "build date:       \n"} {
		if strings.Contains(string(out), blank) {
			t.Errorf("--version has a blank field (%q):\n%s", blank, out)
		}
	}
}
