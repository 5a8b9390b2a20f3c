// Command simnet simulates an Urbit network of up to 100,000 ships in
// virtual time, running the project's real relay and endpoint code, and
// measures routes, delivery and relay load under each routing strategy. It
// writes docs/simulation.md and the plots in docs/simulation/.
//
//	go run ./cmd/simnet -experiment all            # regenerate docs/simulation.md
//	go run ./cmd/simnet -experiment strategies -ships 2000 -seed 7
//
// See docs/simulation.md for the model and the experiments.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
)

// experiment is one of the experiments -experiment names.
type experiment struct {
	name string
	run  func(params) (section, error)
}

func experiments() []experiment {
	return []experiment{
		{"stock", func(p params) (section, error) {
			r, err := runStock(p)
			if err != nil {
				return section{}, err
			}
			return r.section(), nil
		}},
		{"tightening", func(p params) (section, error) {
			r, err := runTightening(p)
			if err != nil {
				return section{}, err
			}
			return r.section(), nil
		}},
		{"strategies", func(p params) (section, error) {
			r, err := runStrategies(p)
			if err != nil {
				return section{}, err
			}
			return r.section(), nil
		}},
		{"notifications", func(p params) (section, error) {
			r, err := runNotifications(p)
			if err != nil {
				return section{}, err
			}
			return r.section(), nil
		}},
		{"churn", func(p params) (section, error) {
			r, err := runChurn(p)
			if err != nil {
				return section{}, err
			}
			return r.section(), nil
		}},
		{"download", func(p params) (section, error) {
			r, err := runDownload(p)
			if err != nil {
				return section{}, err
			}
			return r.section(), nil
		}},
	}
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "simnet:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simnet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names []string
	for _, e := range experiments() {
		names = append(names, e.name)
	}
	which := fs.String("experiment", "all", "experiment to run: all, "+strings.Join(names, ", "))
	ships := fs.Int("ships", 0, fmt.Sprintf("ships in the network, galaxies included (default %d; %d with -short)", DefaultShips, ShortShips))
	seed := fs.Uint64("seed", 1, "random seed: the same seed gives the same results")
	out := fs.String("out", "docs", "directory for simulation.md and simulation/*.svg")
	nat := fs.Float64("nat", DefaultNAT, "share of planets and moons behind a NAT")
	short := fs.Bool("short", false, "a small, quick run (fewer ships and pairs), as in CI")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "simulations run at once")
	prodTables := fs.Bool("production-tables", false, "size the relays' tables as in production (about 7 MiB a relay), to check that the simulation's sizes change no figure")
	fragments := fs.Int("fragments", 0, fmt.Sprintf("fragments of the download experiment's message (default %d; %d with -short)", DownloadFragments, DownloadFragmentsShort))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	p := params{ships: *ships, seed: *seed, nat: *nat, short: *short, workers: *workers, fragments: *fragments, productionTables: *prodTables}
	if p.workers <= 0 {
		p.workers = runtime.GOMAXPROCS(0)
	}
	if p.ships == 0 {
		p.ships = DefaultShips
		if p.short {
			p.ships = ShortShips
		}
	}
	var todo []experiment
	for _, e := range experiments() {
		if *which == "all" || *which == e.name {
			todo = append(todo, e)
		}
	}
	if len(todo) == 0 {
		return fmt.Errorf("unknown experiment %q (want all, %s)", *which, strings.Join(names, ", "))
	}
	var secs []section
	for _, e := range todo {
		t0 := time.Now()
		s, err := e.run(p)
		if err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		fmt.Fprintf(stderr, "simnet: %s done in %v\n", e.name, time.Since(t0).Round(time.Millisecond))
		secs = append(secs, s)
	}
	plotDir := filepath.Join(*out, "simulation")
	if err := os.MkdirAll(plotDir, 0o755); err != nil {
		return err
	}
	for _, s := range secs {
		keys := make([]string, 0, len(s.plots))
		for k := range s.plots {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := os.WriteFile(filepath.Join(plotDir, k), s.plots[k], 0o644); err != nil {
				return err
			}
		}
	}
	if *which != "all" {
		// One experiment: its section goes to stdout, the document is
		// left as it is.
		for _, s := range secs {
			fmt.Fprintf(stdout, "## %s\n\n%s\n", s.title, s.markdown)
			if len(s.findings) > 0 {
				fmt.Fprintf(stdout, "Findings:\n\n")
				for _, fd := range s.findings {
					fmt.Fprintf(stdout, "* %s\n", fd)
				}
				fmt.Fprintln(stdout)
			}
		}
		return nil
	}
	doc, err := document(p, secs)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, "simulation.md"), []byte(doc), 0o644)
}

// topologySummary describes the network p builds.
func topologySummary(p params) (string, error) {
	n, err := sim.New(p.config(strategyDesign(), sim.Fast()))
	if err != nil {
		return "", err
	}
	var count [4]int
	var nat, relays int
	for _, s := range n.Ships() {
		count[s.Class]++
		if s.NAT {
			nat++
		}
		if s.Relay {
			relays++
		}
	}
	return fmt.Sprintf("%d ships: %d galaxies, %d stars, %d planets, %d moons; %d behind a NAT; %d relays under the sponsorship-chain strategies (galaxies, stars, and planets with moons), %d under galaxy-only",
		len(n.Ships()), count[0], count[1], count[2], count[3], nat, relays, count[0]), nil
}
