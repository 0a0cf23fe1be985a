package main

import (
	"runtime/debug"
	"strings"

	"github.com/prometheus/common/version"
)

// unknownBuild is what a build field says when nothing stamped it.
const unknownBuild = "unknown"

// stampVersion fills the build fields that -ldflags left empty (plain go
// build or go run) from what the Go toolchain recorded, so that --version,
// vllm_normalizer_build_info and the landing page are never blank: the
// module version (a pseudo-version from VCS, else devel), vcs.revision
// (with -modified for a dirty tree) and vcs.time as the date. Branch is
// not recorded by the toolchain.
func stampVersion(bi *debug.BuildInfo, ok bool) {
	settings := map[string]string{}
	if ok {
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	if version.Version == "" {
		version.Version = "devel"
		if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version.Version = strings.TrimPrefix(bi.Main.Version, "v")
		}
	}
	if version.Revision == "" {
		version.Revision = unknownBuild
		if rev := settings["vcs.revision"]; rev != "" {
			version.Revision = rev
			if settings["vcs.modified"] == "true" {
				version.Revision += "-modified"
			}
		}
	}
	if version.Branch == "" {
		version.Branch = unknownBuild
	}
	if version.BuildDate == "" {
		version.BuildDate = orDefault(settings["vcs.time"], unknownBuild)
	}
	if version.BuildUser == "" {
		version.BuildUser = unknownBuild
	}
}

// versionText is the build as the landing pages show it.
func versionText() string {
	return version.Version + " (revision " + version.GetRevision() + ", branch " + version.Branch + ", built " + version.BuildDate + ", " + version.GoVersion + ")"
}
