// Command relay is the Urbit packet relay and the operator's tools around it.
//
// Usage:
//
//	relay run --ship ~SHIP [flags]     run the relay (see relay run -h)
//	relay check [--config FILE] [flags] validate the configuration as run would, binding nothing
//	relay front setup [flags] [-- CMD] make fronting mode's namespace and device, once, with privileges
//	relay demo [--keep] [--svg FILE]  a relay network on 127.0.0.1 showing route tightening
//	relay decode [--json] [HEX ...]   decode mesa and legacy ames packets
//	relay ship [--json] [SHIP ...]    print ships: @p, number, class, sponsorship chain
//	relay pki fetch [flags] [SHIP ...] write the --pki snapshot from the roller or Azimuth
//	relay health [--url URL]          probe a relay's /healthz (for container health checks)
//	relay version                     print the version and build information
package main

import (
	"fmt"
	"io"
	"os"
)

// exitUsage is the exit code for a bad command line or configuration.
const exitUsage = 2

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runRun(args[1:], stdout, stderr)
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "front":
		return runFront(args[1:], stdout, stderr)
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "health":
		return runHealth(args[1:], stdout, stderr)
	case "version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "decode":
		return runDecode(args[1:], stdin, stdout, stderr)
	case "ship":
		return runShip(args[1:], stdin, stdout, stderr)
	case "pki":
		return runPKI(args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "relay: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: relay COMMAND [ARGS]

commands:
  run --ship ~SHIP [flags]    run the relay on its UDP port (relay run -h for flags)
  check [run's flags]         validate a configuration as run would, binding nothing: exit 0 or 2
  front setup [run's flags]   make fronting mode's namespace and device once, with privileges,
                              for a relay that holds none (relay front setup -h)
  demo [--keep] [--svg FILE]  run a small relay network on 127.0.0.1 and show route tightening
  decode [--json] [HEX ...]   decode mesa and legacy ames packets (hex, one per line on stdin)
  ship [--json] [SHIP ...]    print ships (@p or decimal, one per line on stdin)
  pki fetch [flags] [SHIP ...] write the --pki snapshot from a roller (getPoint) or an
                              Ethereum endpoint (Azimuth.points) (relay pki fetch -h)
  health [--url URL]          probe a relay's /healthz: exit 0 if it answers 200
  version                     print the version and build information
`)
}
