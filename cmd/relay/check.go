package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/urbit-relay/relay/relay/front"
)

// runCheck is `relay check`: it validates a configuration as `relay run`
// would, without binding a socket or creating a file, for a unit's
// ExecStartPre and for CI. It takes run's flags (--config FILE and any
// others); it exits 0 and prints "config ok" and a summary to stdout, or
// prints run's one-line message to stderr and exits 2.
func runCheck(args []string, stdout, stderr io.Writer) int {
	cfg, err := loadRunConfig(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			checkUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "relay check: %v\n", err)
		return exitUsage
	}
	mode := "ship lane " + addrOrNone(cfg.relay.ShipLane)
	if cfg.front != nil {
		// The namespace trap: one made where the host cannot see it.
		if err := front.CheckVisible(cfg.front.Namespace); err != nil {
			fmt.Fprintf(stderr, "relay check: %v\n", err)
			return exitUsage
		}
		mode = "fronting in namespace " + cfg.front.Namespace
	}
	pkiNote := ""
	if cfg.pki != "" {
		pkiNote = fmt.Sprintf(", pki %s: %d ships", cfg.pki, cfg.pkiSnap.Len())
	}
	fmt.Fprintf(stdout, "config ok: %s on %v, %s, %d galaxies, %d pinned lanes%s\n",
		cfg.relay.Ship, cfg.listen, mode, len(cfg.relay.Galaxies), len(cfg.relay.Pinned), pkiNote)
	return 0
}

// checkUsage prints the usage of `relay check`.
func checkUsage(w io.Writer) {
	fmt.Fprint(w, `usage: relay check [--config FILE] [relay run's flags]

Validates the configuration relay run would start with, and binds nothing:
exit 0 and "config ok" on stdout, or exit 2 and relay run's one-line error
on stderr. For a systemd unit's ExecStartPre, and CI. Flags as relay run -h.
`)
}
