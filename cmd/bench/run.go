package main

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/urbit-relay/relay/internal/hist"
	"github.com/urbit-relay/relay/relay/transport"
)

// scenario is one server configuration under test.
type scenario struct {
	name, role string
	pending    int // entries pre-filled into the relay's table
	sockets    int
	procs      int    // GOMAXPROCS of the server child
	variant    string // the relay's configuration (relayVariant); "" the bench's
	bin        string // the executable to run as the child; "" this one
}

// round is one closed-loop measurement of one scenario.
type round struct {
	rate      float64       // round trips per second
	user, sys time.Duration // server CPU per datagram
	batch     float64       // datagrams per read
	mallocs   uint64        // heap allocations in the server over the round
	datagrams uint64        // datagrams the server read over the round
	drops     uint64        // kernel receive drops during the round
	lost      uint64        // requests written off by the generator
	turns     int           // measureTogether: the turns the server ran in
}

// measureSet runs scenarios side by side: every child starts at once, the
// tables are pre-filled, then rounds rounds each measure every scenario
// once, in turn, so that drift in the machine (other tenants, frequency,
// the page cache) falls on all of them alike. latencyRef is the index of
// the scenario whose median rate, halved, is the open-loop rate at which
// every scenario's latency is then measured; -1 skips latency.
func measureSet(cfg benchConfig, pairs int, scs []scenario, rounds, latencyRef int) ([]*result, error) {
	cfg.pairs = pairs
	children := make([]*child, len(scs))
	defer func() {
		for _, c := range children {
			if c != nil {
				c.stop()
			}
		}
	}()
	for i, sc := range scs {
		c, err := startChild(sc, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.name, err)
		}
		children[i] = c
	}
	g, err := newLoadGen(children[0].addr, pairs, cfg.pubs(), cfg.base, cfg.page, transport.Options{DisableGSO: cfg.noGSO})
	if err != nil {
		return nil, err
	}
	var pubs sync.WaitGroup
	g.runPublishers(&pubs)
	defer func() {
		g.close()
		pubs.Wait()
	}()
	results := make([]*result, len(scs))
	for i, sc := range scs {
		results[i] = &result{Name: sc.name, Role: sc.role, Pending: sc.pending, Sockets: sc.sockets, Procs: sc.procs, Pairs: pairs}
		if sc.pending == 0 {
			continue
		}
		c := children[i]
		g.server = c.addr
		if err := g.prefill(sc.pending, func() int {
			s, err := c.stats()
			if err != nil {
				return 0
			}
			return s.Pending
		}); err != nil {
			return nil, fmt.Errorf("%s: %w", sc.name, err)
		}
	}
	for k := 0; k < rounds; k++ {
		for i, c := range children {
			g.server = c.addr
			rd, err := measureRound(g, c, cfg)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", scs[i].name, err)
			}
			results[i].Rounds = append(results[i].Rounds, rd)
			fmt.Fprintf(os.Stderr, "round %d  %-36s %9.0f rt/s  cpu %v+%v/datagram  %.1f/read\n",
				k+1, scs[i].name, rd.rate, rd.user, rd.sys, rd.batch)
		}
	}
	for _, r := range results {
		r.summarize()
	}
	if latencyRef >= 0 {
		rate := results[latencyRef].RTPerSec / 2
		for i, c := range children {
			g.server = c.addr
			s0, err := c.stats()
			if err != nil {
				return nil, err
			}
			r := results[i]
			r.Rate = rate
			r.Lat, r.Answered = g.openLoop(rate, cfg.duration)
			s1, err := c.stats()
			if err != nil {
				return nil, err
			}
			r.Service = make([]uint64, hist.Buckets)
			for j := range r.Service {
				if j < len(s1.Service) && j < len(s0.Service) {
					r.Service[j] = s1.Service[j] - s0.Service[j]
				}
			}
		}
	}
	if err := readFinal(results, children); err != nil {
		return nil, err
	}
	return results, nil
}

// readFinal fills each result's figures read once, at the end of its
// child's rounds: memory, and whether it sent with GSO.
func readFinal(results []*result, children []*child) error {
	for i, c := range children {
		s, err := c.stats()
		if err != nil {
			return err
		}
		results[i].RSS = c.rss()
		results[i].GSO = s.GSO
		results[i].Heap = s.HeapInuse
	}
	return nil
}

// warmUp is the closed-loop run before each measured round.
const warmUp = 500 * time.Millisecond

// measureRound drives c's server closed loop for cfg.duration after a
// warm-up and reads what it cost the server.
func measureRound(g *loadGen, c *child, cfg benchConfig) (round, error) {
	var rd round
	g.closedLoop(cfg.window, warmUp)
	s0, err := c.stats()
	if err != nil {
		return rd, err
	}
	u0, k0 := c.cpuTime()
	lost0 := g.lost.Load()
	rd.rate = g.closedLoop(cfg.window, cfg.duration)
	u1, k1 := c.cpuTime()
	s1, err := c.stats()
	if err != nil {
		return rd, err
	}
	if dg := s1.Datagrams - s0.Datagrams; dg > 0 {
		rd.user = (u1 - u0) / time.Duration(dg)
		rd.sys = (k1 - k0) / time.Duration(dg)
		if b := s1.BatchesRead - s0.BatchesRead; b > 0 {
			rd.batch = float64(dg) / float64(b)
		}
	}
	rd.mallocs, rd.datagrams = s1.Mallocs, s1.Datagrams-s0.Datagrams
	rd.drops = s1.KernelDrops - s0.KernelDrops
	rd.lost = g.lost.Load() - lost0
	return rd, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
