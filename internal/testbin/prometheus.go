package testbin

import (
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// prometheusMajor is the major version of Prometheus the tests hold the
// sidecar to: the one users run. tools/prometheus pins the exact release and
// deploy/ci-deps.sh builds its server and promtool into GOPATH/bin.
const prometheusMajor = "3"

var (
	toolMu    sync.Mutex
	toolPaths = map[string]string{}
	toolErrs  = map[string]string{}
)

// versionLine finds the version a Prometheus tool prints for --version.
var versionLine = regexp.MustCompile(`(?m)^\S+, version (\S+)`)

// PrometheusTool returns the path of the Prometheus tool name ("prometheus"
// or "promtool") of major version 3: GOPATH/bin's (where deploy/ci-deps.sh
// builds it) before PATH's, so a distribution's older one on PATH is never
// taken by mistake. Without one the test skips, except under CI=true, where
// it fails: CI must run these tests.
func PrometheusTool(t testing.TB, name string) string {
	t.Helper()
	toolMu.Lock()
	path, ok := toolPaths[name]
	why := toolErrs[name]
	if !ok && why == "" {
		path, why = findPrometheusTool(name)
		toolPaths[name], toolErrs[name] = path, why
	}
	toolMu.Unlock()
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s but CI=true: this test must run in CI (run deploy/ci-deps.sh)", why)
		}
		t.Skipf("%s; skipping (run deploy/ci-deps.sh, which builds it from tools/prometheus)", why)
	}
	return path
}

func findPrometheusTool(name string) (path, why string) {
	candidates := []string{filepath.Join(build.Default.GOPATH, "bin", name)}
	if p, err := exec.LookPath(name); err == nil {
		candidates = append(candidates, p)
	}
	var seen strings.Builder
	for _, c := range candidates {
		out, err := exec.Command(c, "--version").CombinedOutput()
		if err != nil {
			continue
		}
		m := versionLine.FindSubmatch(out)
		if m == nil {
			seen.WriteString(c + " prints no version; ")
			continue
		}
		if v := string(m[1]); len(v) > 1 && v[:2] == prometheusMajor+"." {
			return c, ""
		}
		seen.WriteString(c + " is version " + string(m[1]) + "; ")
	}
	return "", "no " + name + " " + prometheusMajor + ".x found in GOPATH/bin or on PATH (" + seen.String() + ")"
}
