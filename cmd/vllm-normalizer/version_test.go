package main

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/common/version"
)

// restoreVersion puts prometheus/common/version's fields back after a test
// changed them.
func restoreVersion(t *testing.T) {
	v, r, b, d, u := version.Version, version.Revision, version.Branch, version.BuildDate, version.BuildUser
	t.Cleanup(func() {
		version.Version, version.Revision, version.Branch, version.BuildDate, version.BuildUser = v, r, b, d, u
	})
}

// TestStampVersion: a build without -ldflags takes what the toolchain
// recorded, and is never blank; what -ldflags stamped is kept.
func TestStampVersion(t *testing.T) {
	restoreVersion(t)
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201101500-0123456789ab+dirty"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef"},
		{Key: "vcs.time", Value: "2026-12-01T10:15:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	version.Version, version.Revision, version.Branch, version.BuildDate, version.BuildUser = "", "", "", "", ""
	stampVersion(bi, true)
	for name, c := range map[string][2]string{
		"version":  {version.Version, "0.0.0-20261201101500-0123456789ab+dirty"},
		"revision": {version.Revision, "0123456789abcdef-modified"},
		"branch":   {version.Branch, "unknown"},
		"date":     {version.BuildDate, "2026-12-01T10:15:00Z"},
	} {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}

	// Nothing recorded (GOFLAGS=-buildvcs=false, go run): named, not blank.
	version.Version, version.Revision, version.Branch, version.BuildDate, version.BuildUser = "", "", "", "", ""
	stampVersion(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true)
	if version.Version != "devel" || version.Revision != "unknown" || version.BuildDate != "unknown" || version.Branch != "unknown" {
		t.Errorf("without build info: %q %q %q %q, want devel and unknown", version.Version, version.Revision, version.BuildDate, version.Branch)
	}

	// -ldflags wins.
	version.Version, version.Revision, version.Branch, version.BuildDate = "1.2.3", "abc", "main", "20261201-10:15:00"
	stampVersion(bi, true)
	if version.Version != "1.2.3" || version.Revision != "abc" || version.Branch != "main" || version.BuildDate != "20261201-10:15:00" {
		t.Errorf("stamped fields overwritten: %q %q %q %q", version.Version, version.Revision, version.Branch, version.BuildDate)
	}
	if got := versionText(); !strings.Contains(got, "1.2.3") || !strings.Contains(got, "abc") || !strings.Contains(got, "main") || !strings.Contains(got, "20261201-10:15:00") {
		t.Errorf("landing page version %q misses a field", got)
	}
}

// TestBuildsStampEveryField: the Makefile and the Dockerfile stamp the
// same four fields.
func TestBuildsStampEveryField(t *testing.T) {
	for _, f := range []struct{ file, prefix string }{
		{"../../Makefile", "-X $(PKG)."},
		{"../../Dockerfile", "-X github.com/prometheus/common/version."},
	} {
		b, err := os.ReadFile(f.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{"Version", "Revision", "Branch", "BuildDate"} {
			if !strings.Contains(string(b), f.prefix+field+"=") {
				t.Errorf("%s does not stamp %s (%s%s=...)", f.file, field, f.prefix, field)
			}
		}
	}
}
