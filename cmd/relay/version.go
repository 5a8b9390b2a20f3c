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
