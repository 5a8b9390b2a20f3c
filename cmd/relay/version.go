package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the relay's version, set at build time with
// -ldflags "-X main.version=v1.2.3"; "dev" otherwise.
var version = "dev"

// revision is the VCS revision the relay was built from, set at build time
// with -ldflags "-X main.revision=$(git rev-parse HEAD)" where the build
// records none (a Docker build of a tree without .git, or -buildvcs=false);
// empty otherwise, and then read from the build's vcs.revision.
var revision = ""

// buildRevision returns the revision relay_build_info reports: revision if
// set at build time, else the build's vcs.revision (with "-dirty" when
// vcs.modified says the tree had uncommitted changes), else "unknown".
func buildRevision() string {
	bi, _ := debug.ReadBuildInfo()
	return revisionOf(revision, bi)
}

// revisionOf is buildRevision for an override and a build's info (nil:
// none).
func revisionOf(override string, bi *debug.BuildInfo) string {
	if override != "" {
		return override
	}
	var rev, modified string
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	switch {
	case rev == "":
		return "unknown"
	case modified == "true":
		return rev + "-dirty"
	}
	return rev
}

// buildSettings are the debug.BuildInfo settings `relay version` prints,
// in this order, when the build recorded them.
var buildSettings = []string{"CGO_ENABLED", "GOOS", "GOARCH", "-trimpath", "vcs.revision", "vcs.time", "vcs.modified"}

// runVersion prints the version and build information.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: relay version")
		return exitUsage
	}
	fmt.Fprintf(stdout, "relay %s\n", version)
	fmt.Fprintf(stdout, "revision %s\n", buildRevision())
	fmt.Fprintf(stdout, "go %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return 0
	}
	fmt.Fprintf(stdout, "module %s %s\n", bi.Main.Path, bi.Main.Version)
	for _, name := range buildSettings {
		for _, s := range bi.Settings {
			if s.Key == name {
				fmt.Fprintf(stdout, "%s=%s\n", s.Key, s.Value)
			}
		}
	}
	return 0
}
