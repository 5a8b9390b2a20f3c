package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/urbit-relay/relay/relay/transport"
)

// Measuring configurations at once (-slot).
//
// measureSet measures its configurations one after another, a few seconds
// each. This VM's speed moves between those slots by up to a fifth (a
// host's other tenants; the guest sees no steal time, so a slow second is
// charged to whatever ran in it), and a saturated server's CPU per
// datagram moves with it: the same forwarder measured as two
// configurations differs by 0.73-1.47 from round to round.
//
// measureTogether removes that drift from the comparison. Every
// configuration runs through the whole round, each with a load generator
// of its own, and the server children take turns on their core in slots
// of a few milliseconds: one runs, the others are stopped (SIGSTOP), in
// rotation. Each still runs alone while it runs, as in measureSet, but a
// slow second of the machine falls on every configuration alike. The
// price: a child resumed after its turn finds its caches holding the
// others' data, a cost per slot that a longer slot makes smaller.

// portStride separates the ports of the load generators of a
// measureTogether: a generator's requesters at base+k*portStride, its
// publishers pairOffset above them.
const portStride = 2 * pairOffset

// maxTurnWait is the longest a child may wait between its turns: far
// below the relay's shortest timer a requester's silence would trip (its
// pending entries live DefaultTTL, 30 s).
const maxTurnWait = time.Second

// measureTogether runs scenarios at once: rounds rounds, each measuring
// every scenario over the same cfg.duration while their children take
// turns of slot each (see above). It returns one result per scenario, as
// measureSet does, without latency.
func measureTogether(cfg benchConfig, pairs int, scs []scenario, rounds int, slot time.Duration) ([]*result, error) {
	cfg.pairs = pairs
	if !canPause {
		return nil, fmt.Errorf("measuring at once pauses children with SIGSTOP: not on this system")
	}
	if slot <= 0 {
		return nil, fmt.Errorf("slot %v: must be positive", slot)
	}
	// A child waits (len(scs)-1) slots between its turns; its generator
	// must not take that for requests lost (loadGen.stall), and the
	// relay must not take it for a requester gone (its pending entries
	// live seconds).
	wait := time.Duration(len(scs)-1) * slot
	if wait > maxTurnWait {
		return nil, fmt.Errorf("%d configurations in slots of %v wait %v between turns: keep it under %v", len(scs), slot, wait, maxTurnWait)
	}
	for _, sc := range scs {
		if sc.pending > 0 {
			// measureSet's prefill is not done here: refused, not skipped.
			return nil, fmt.Errorf("%s: a pre-filled table is measured one configuration after another (measureSet)", sc.name)
		}
	}
	if base := cfg.base + len(scs)*portStride; base > 65535 {
		return nil, fmt.Errorf("%d configurations from port %d need ports up to %d", len(scs), cfg.base, base)
	}
	children := make([]*child, len(scs))
	gens := make([]*loadGen, len(scs))
	var pubs sync.WaitGroup
	defer func() {
		for _, c := range children {
			if c != nil {
				c.resume()
				c.stop()
			}
		}
		for _, g := range gens {
			if g != nil {
				g.close()
			}
		}
		pubs.Wait()
	}()
	for i, sc := range scs {
		ccfg := cfg
		ccfg.base = cfg.base + i*portStride
		c, err := startChild(sc, ccfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.name, err)
		}
		children[i] = c
		g, err := newLoadGen(c.addr, pairs, cfg.pubs(), ccfg.base, cfg.page, transport.Options{DisableGSO: cfg.noGSO})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.name, err)
		}
		g.stall = stallAfter + wait
		gens[i] = g
		g.runPublishers(&pubs)
	}
	results := make([]*result, len(scs))
	for i, sc := range scs {
		results[i] = &result{Name: sc.name, Role: sc.role, Pending: sc.pending, Sockets: sc.sockets, Procs: sc.procs, Pairs: pairs}
	}
	for k := 0; k < rounds; k++ {
		rds, err := togetherRound(cfg, children, gens, slot, k)
		if err != nil {
			return nil, err
		}
		for i, rd := range rds {
			results[i].Rounds = append(results[i].Rounds, rd)
			fmt.Fprintf(os.Stderr, "round %d  %-36s %9.0f rt/s  cpu %v+%v/datagram  %.1f/read  %d turns\n",
				k+1, scs[i].name, rd.rate, rd.user, rd.sys, rd.batch, rd.turns)
		}
	}
	for _, r := range results {
		r.summarize()
	}
	if err := readFinal(results, children); err != nil {
		return nil, err
	}
	return results, nil
}

// togetherRound is one round of measureTogether: every generator keeps its
// window in flight while the children take turns, first for warmUp,
// then for cfg.duration between two snapshots of each child. A round's
// rate is the child's round trips per second of its own turns. k is the
// round's number, from 0.
func togetherRound(cfg benchConfig, children []*child, gens []*loadGen, slot time.Duration, k int) ([]round, error) {
	n := len(children)
	for _, c := range children {
		c.pause()
	}
	// The closed loops outlast the rotation: warm-up, the measurement,
	// and the snapshots (a pipe round trip each) on either side of it.
	span := warmUp + cfg.duration + time.Duration(n)*100*time.Millisecond
	var loops sync.WaitGroup
	for _, g := range gens {
		loops.Add(1)
		go func() {
			defer loops.Done()
			if cfg.rate > 0 {
				g.pacedLoop(cfg.window, cfg.rate, span)
			} else {
				g.closedLoop(cfg.window, span)
			}
		}()
	}
	defer func() {
		for _, c := range children {
			c.resume()
		}
		loops.Wait()
	}()
	order := rotationOrder(n, k)
	rotate(children, order, slot, warmUp, nil)
	type snap struct {
		s         serverStats
		user, sys time.Duration
		answered  uint64
		lost      uint64
	}
	snapshot := func() ([]snap, error) {
		out := make([]snap, n)
		for i, c := range children {
			c.resume()
			s, err := c.stats()
			user, sys := c.cpuTime()
			c.pause()
			if err != nil {
				return nil, err
			}
			out[i] = snap{s: s, user: user, sys: sys, answered: gens[i].answered.Load(), lost: gens[i].lost.Load()}
		}
		return out, nil
	}
	s0, err := snapshot()
	if err != nil {
		return nil, err
	}
	turns := make([]int, n)
	ran := make([]time.Duration, n)
	rotate(children, order, slot, cfg.duration, func(i int, d time.Duration) { turns[i]++; ran[i] += d })
	s1, err := snapshot()
	if err != nil {
		return nil, err
	}
	rds := make([]round, n)
	for i := range children {
		a, b := s0[i], s1[i]
		rd := &rds[i]
		rd.turns = turns[i]
		if ran[i] > 0 {
			rd.rate = float64(b.answered-a.answered) / ran[i].Seconds()
		}
		if dg := b.s.Datagrams - a.s.Datagrams; dg > 0 {
			rd.user = (b.user - a.user) / time.Duration(dg)
			rd.sys = (b.sys - a.sys) / time.Duration(dg)
			if r := b.s.BatchesRead - a.s.BatchesRead; r > 0 {
				rd.batch = float64(dg) / float64(r)
			}
			rd.datagrams = dg
		}
		rd.mallocs = b.s.Mallocs
		rd.drops = b.s.KernelDrops - a.s.KernelDrops
		rd.lost = b.lost - a.lost
	}
	return rds, nil
}

// rotationOrder is the order of round k's turns among n children:
// forward in even rounds and backward in odd ones, so that each
// configuration follows each of its neighbours as often. What a turn
// leaves behind (the kernel still freeing its sends, its data in the
// caches) falls on the turn after it.
func rotationOrder(n, k int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if k%2 == 1 {
			order[i] = n - 1 - i
		}
	}
	return order
}

// rotate gives children turns of slot each, in the order order names
// them (indexes into children), one running and the others paused, for d
// in all, and leaves them all paused. each, if not nil, is told every turn
// taken: whose, and how long it ran.
func rotate(children []*child, order []int, slot, d time.Duration, each func(i int, ran time.Duration)) {
	t0 := time.Now()
	for k := 0; time.Since(t0) < d; k++ {
		i := order[k%len(order)]
		c := children[i]
		start := time.Now()
		c.resume()
		time.Sleep(slot)
		c.pause()
		if each != nil {
			each(i, time.Since(start))
		}
	}
}
