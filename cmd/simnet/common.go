package main

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
	"github.com/urbit-relay/relay/lane"
)

const (
	// WarmUp is how long a network runs before an experiment's workload
	// starts: every ship has booted and pinged its sponsor once (ships
	// boot within the first ping interval, 25 s).
	WarmUp = 30 * time.Second

	// RequestTimeout is when a request counts as lost: the seed's bound
	// ("every request must be satisfied within thirty seconds"), which is
	// also the relays' pending-entry lifetime.
	RequestTimeout = 30 * time.Second

	// DefaultShips is the network size of a full run.
	DefaultShips = 10_000
	// ShortShips is the network size of a -short run (and of the CI test).
	ShortShips = 600
	// DefaultNAT is the share of planets and moons behind a NAT: hosted
	// ships are public, ships run at home mostly are not.
	DefaultNAT = 0.3
)

// params are an invocation's settings, shared by every experiment.
type params struct {
	ships int
	seed  uint64
	nat   float64
	short bool
	// workers bounds the simulations run at once (one goroutine each).
	workers int
	// fragments is the download experiment's message size (0: its
	// default).
	fragments int
	// productionTables sizes the relays' tables as in production
	// (sim.Config.ProductionTables).
	productionTables bool
}

func (p params) config(st sim.Strategy, lat sim.LatencyModel) sim.Config {
	return sim.Config{Seed: p.seed, Ships: p.ships, NATFraction: p.nat, Latency: lat, Strategy: st, ProductionTables: p.productionTables}
}

// section is one experiment's part of docs/simulation.md and its plots.
type section struct {
	title    string
	markdown string
	// findings are the experiment's headline results, one sentence each,
	// written from its numbers.
	findings []string
	// stock marks the section measured with stock arvo requesters, whose
	// findings head the document apart from the endpoint's.
	stock bool
	// notes are what the experiment shows about the code under test
	// beyond its question (the document's *Notes and limits*), written
	// from its numbers.
	notes []string
	// evicted and throttled add up the relays' pending-table evictions
	// and amplification refusals over the experiment's runs.
	evicted, throttled uint64
	plots              map[string][]byte // file name (under docs/simulation/) → SVG
}

// parallel runs jobs on up to workers goroutines; each job runs one
// simulation, which is single-threaded and deterministic, so results do not
// depend on the scheduling.
func parallel(workers int, jobs []func() error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = j()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Strategies. The design is the sponsorship chain with dual send and the
// no-fraternization rule; "today" is galaxy-only with dual send.
func strategyDesign() sim.Strategy { return sim.Strategy{Name: "chain, dual"} }
func strategyToday() sim.Strategy  { return sim.Strategy{Name: "galaxy-only, dual", GalaxyOnly: true} }

// allStrategies is every combination of the three switches.
func allStrategies() []sim.Strategy {
	var out []sim.Strategy
	for _, g := range []bool{true, false} {
		for _, frat := range []bool{false, true} {
			for _, single := range []bool{false, true} {
				s := sim.Strategy{GalaxyOnly: g, SingleRoute: single, Fraternize: frat}
				s.Name = strategyName(s)
				out = append(out, s)
			}
		}
	}
	return out
}

func strategyName(s sim.Strategy) string {
	parts := []string{"chain"}
	if s.GalaxyOnly {
		parts[0] = "galaxy-only"
	}
	if s.SingleRoute {
		parts = append(parts, "single")
	} else {
		parts = append(parts, "dual")
	}
	if s.Fraternize {
		parts = append(parts, "fraternize")
	}
	if s.NoHints {
		parts = append(parts, "no hints")
	}
	return strings.Join(parts, ", ")
}

// conversation is a requester asking a receiver for len(thinks) values in
// turn: the first at start, each next one thinks[k] after the previous was
// answered (or lost).
type conversation struct {
	requester, rcvr int
	start           time.Duration
	thinks          []time.Duration
}

// answer is one request of a conversation and its result.
type answer struct {
	conv, k int
	res     sim.Result
	msgs    uint64
	// directAfter: once this request's round trip settled (SettleTime
	// after its answer), the requester's route to the receiver was the
	// receiver's own lane, proven by a page from it at hop 0. A dual send
	// can prove it while a relay's copy of the page still wins the race.
	directAfter bool
}

// SettleTime is how long after an answer the requester's route is read:
// duplicates through other routes have landed by then. It is shorter than
// TightenGap, so the next request has not started.
const SettleTime = 500 * time.Millisecond

// runConversations drives convs on n until end and returns every request's
// answer, with the datagrams that carried it (counted until end, so late
// duplicates are included).
func runConversations(n *sim.Network, convs []conversation, prefix string, end time.Duration) ([]answer, error) {
	var out []answer
	var firstErr error
	var ask func(ci, k int)
	ask = func(ci, k int) {
		c := &convs[ci]
		path := fmt.Sprintf("%s/%d/%d", prefix, ci, k)
		n.Publish(c.rcvr, path, []byte(path))
		err := n.Peek(c.requester, c.rcvr, path, RequestTimeout, func(r sim.Result) {
			idx := len(out)
			out = append(out, answer{conv: ci, k: k, res: r})
			n.At(r.End+SettleTime, func() {
				out[idx].directAfter = n.Direct(c.requester, c.rcvr)
			})
			if k+1 < len(c.thinks) {
				n.At(r.End+c.thinks[k+1], func() { ask(ci, k+1) })
			}
		})
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for ci := range convs {
		n.At(convs[ci].start, func() { ask(ci, 0) })
	}
	n.RunUntil(end)
	for i := range out {
		a := &out[i]
		a.msgs = n.Track(fmt.Sprintf("%s/%d/%d", prefix, a.conv, a.k)).Msgs
	}
	slices.SortFunc(out, func(a, b answer) int {
		if a.conv != b.conv {
			return a.conv - b.conv
		}
		return a.k - b.k
	})
	return out, firstErr
}

// requesters returns the indexes of ships that make requests in workloads:
// planets and moons that run no relay. (A ship behind its own relay sees
// every page with a hop added by that relay, so "direct" would mean
// something else for it.)
func requesters(ships []sim.Ship) []int {
	var out []int
	for i := range ships {
		if c := ships[i].Class; (c == lane.Planet || c == lane.Moon) && !ships[i].Host {
			out = append(out, i)
		}
	}
	return out
}

// Statistics.

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// percentile returns the p-th percentile (0-100) of xs by nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Markdown.

// prose formats a duration for the document: "50 µs", "65 ms", "25 s",
// "4 min", rather than Go's "4m0s".
type prose time.Duration

func (d prose) String() string {
	t := time.Duration(d)
	switch {
	case t >= time.Minute && t%time.Minute == 0:
		return fmt.Sprintf("%d min", t/time.Minute)
	case t >= time.Second && t%time.Second == 0:
		return fmt.Sprintf("%d s", t/time.Second)
	case t >= time.Second:
		return fmt.Sprintf("%.1f s", t.Seconds())
	case t >= time.Millisecond:
		return fmt.Sprintf("%d ms", t/time.Millisecond)
	}
	return fmt.Sprintf("%d µs", t/time.Microsecond)
}

type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for range t.head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// f formats a number for a table: NaN as "–", otherwise with the given
// decimals.
func f(x float64, decimals int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return fmt.Sprintf("%.*f", decimals, x)
}

func pct(part, whole int) string {
	if whole == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(part)/float64(whole))
}
