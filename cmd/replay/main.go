// Command replay load-tests an Urbit relay with recorded traffic.
//
//	replay gen  --mix steady|storm|ames|hostile [--seed N] -o FIXTURE.pcap
//	replay run  --relay ADDR:PORT [flags] FIXTURE.pcap
//	replay info FIXTURE.pcap
//
// Fixtures are pcap files captured at a relay (by relay run --capture, by
// tcpdump, or made by replay gen): every record is a UDP datagram the relay
// received or sent. replay run plays both sides of such a capture against a
// running relay: every other lane in it becomes a local UDP socket, which
// sends what that lane sent to the relay (requests, pings, noise) and
// answers what the relay hands it (as the fixture's publisher did), while
// replay measures what comes back. docs/replay.md has the details;
// testdata/README.md describes the checked-in fixtures.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage:
  replay gen  --mix steady|storm|ames|hostile [--seed N] [--vectors DIR] -o FIXTURE.pcap
  replay run  --relay ADDR:PORT [--speedup X | --rate R] [--concurrency C]
              [--duration D] [--timeout T] [--loop] [--limit N]
              [--metrics URL] [--json] FIXTURE.pcap
  replay info FIXTURE.pcap
`

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// errUsage is run's error for a command line with no command: the usage is
// printed, and it is an error.
var errUsage = errors.New("no command")

// exitCode is the process exit code for run's error, which it prints: 0 for
// none or for -h (flag.ErrHelp: the usage was asked for, and printed), 2
// for anything else.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintln(stderr, "replay:", err)
	return 2
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "gen":
		return cmdGen(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "info":
		return cmdInfo(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// laneFlag is a flag.Value holding an optional ADDR:PORT.
type laneFlag struct{ ap netip.AddrPort }

func (f *laneFlag) String() string {
	if !f.ap.IsValid() {
		return ""
	}
	return f.ap.String()
}

func (f *laneFlag) Set(s string) error {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return err
	}
	f.ap = ap
	return nil
}

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var relayAddr, fixtureRelay laneFlag
	fs.Var(&relayAddr, "relay", "the relay under test, ADDR:PORT (required)")
	fs.Var(&fixtureRelay, "fixture-relay", "the relay's lane in the fixture (default: the lane at an end of the most records)")
	speedup := fs.Float64("speedup", 1, "play at the recorded pace times this")
	rate := fs.Float64("rate", 0, "send scheduled datagrams at this fixed rate per second instead of the recorded pace")
	conc := fs.Int("concurrency", 0, "closed loop: at most this many requests awaiting their answer")
	duration := fs.Duration("duration", 0, "stop sending after this long (0: when the fixture ends)")
	timeout := fs.Duration("timeout", DefaultTimeout, "a request unanswered this long is missing; also the longest drain")
	loop := fs.Bool("loop", false, "repeat the fixture until --duration or --limit")
	limit := fs.Int("limit", 0, "send at most this many scheduled datagrams")
	metrics := fs.String("metrics", "", "the relay's Prometheus metrics URL, to report relay_drops_total")
	bind := fs.String("bind", "127.0.0.1", "local address of the lane sockets")
	ports := fs.String("ports", "auto", "lane ports: auto (the same ports for every run of a fixture, as the same ships keep their lanes), ephemeral (new ports every run: every ship moved), or the first of consecutive ports")
	hold := fs.Duration("hold-threshold", DefaultHoldThreshold, "a publisher page later than this after its request is held (see docs/replay.md)")
	jsonOut := fs.Bool("json", false, "print the summary as JSON")
	progress := fs.Bool("progress", isTerminal(os.Stderr), "draw a live progress line on stderr (default: when stderr is a terminal)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("run needs one FIXTURE")
	}
	if !relayAddr.ap.IsValid() {
		return errors.New("run needs --relay ADDR:PORT")
	}
	if *rate < 0 || *conc < 0 || *speedup <= 0 {
		return errors.New("--rate and --concurrency must be positive, --speedup above 0")
	}
	bindAddr, err := netip.ParseAddr(*bind)
	if err != nil {
		return fmt.Errorf("--bind: %w", err)
	}
	fx, err := loadFixture(fs.Arg(0), fixtureRelay.ap, *hold)
	if err != nil {
		return err
	}
	cfg := runConfig{
		Relay: relayAddr.ap, Speedup: *speedup, Rate: *rate, Concurrency: *conc,
		Duration: *duration, Timeout: *timeout, Loop: *loop, Limit: *limit,
		MetricsURL: *metrics, Bind: bindAddr, Ports: *ports,
	}
	if *progress {
		cfg.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := replay(ctx, fx, cfg)
	if err != nil {
		return err
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	s.writeText(stdout)
	return nil
}

func cmdInfo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var fixtureRelay laneFlag
	fs.Var(&fixtureRelay, "fixture-relay", "the relay's lane in the fixture (default: inferred)")
	hold := fs.Duration("hold-threshold", DefaultHoldThreshold, "as for run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("info needs one FIXTURE")
	}
	fx, err := loadFixture(fs.Arg(0), fixtureRelay.ap, *hold)
	if err != nil {
		return err
	}
	fx.describe(stdout)
	return nil
}

// isTerminal reports whether f is a character device (a terminal), without
// a terminal library.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
