package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
	"github.com/urbit-relay/relay/internal/svgchart"
	"github.com/urbit-relay/relay/lane"
)

const (
	// ChurnInterval is how often each affected conversation makes a new
	// request (whether or not the last was answered), so that recovery is
	// resolved to about a second.
	ChurnInterval = time.Second
	// ChurnAt is when the churn happens, after the routes had a minute to
	// tighten.
	ChurnAt = WarmUp + time.Minute
	// ChurnAfter is how long requests go on after the churn.
	ChurnAfter = 2 * time.Minute
	// ChurnOutage is how long a sponsor stays offline.
	ChurnOutage = time.Minute
	// ChurnReceivers, ChurnSponsors and ChurnGalaxies size a scenario: up
	// to this many receivers are affected, under up to this many stars or
	// galaxies.
	ChurnReceivers      = 100
	ChurnReceiversShort = 20
	ChurnSponsors       = 10
	ChurnGalaxies       = 4

	streamChurn = 0x6368726e
)

// scenario is one kind of churn.
type scenario struct {
	name string
	// pick chooses the affected receivers (and the sponsors whose relays
	// are hit, when any).
	pick func(ships []sim.Ship, rng *rand.Rand, want int) (rcvrs, hit []int)
	// apply does the churn at ChurnAt.
	apply func(n *sim.Network, rcvrs, hit []int) error
	// outage is set when the churn is undone ChurnOutage later.
	outage bool
	// needsRelay is set when the hit ships must run relays (so the scenario
	// does not apply to galaxy-only, where stars run none).
	needsRelay bool
}

// leaves returns the planets and moons that run no relay, optionally only
// those behind a NAT (or only public ones).
func leafPool(ships []sim.Ship, nat, public bool) []int {
	var out []int
	for i := range ships {
		s := &ships[i]
		if (s.Class == lane.Planet || s.Class == lane.Moon) && !s.Host && (!nat || s.NAT) && (!public || !s.NAT) {
			out = append(out, i)
		}
	}
	return out
}

func shuffled(rng *rand.Rand, xs []int) []int {
	xs = slices.Clone(xs)
	rng.Shuffle(len(xs), func(a, b int) { xs[a], xs[b] = xs[b], xs[a] })
	return xs
}

// underSponsors picks up to want leaves under up to k sponsors of class c
// (the leaf's star, or its galaxy).
func underSponsors(c lane.Class, k int) func([]sim.Ship, *rand.Rand, int) ([]int, []int) {
	return func(ships []sim.Ship, rng *rand.Rand, want int) ([]int, []int) {
		by := map[int][]int{}
		var order []int
		for _, i := range leafPool(ships, false, false) {
			sp := ships[i].Galaxy
			if c == lane.Star {
				// The leaf's star: a planet's sponsor, a moon's
				// sponsor's sponsor.
				sp = ships[i].Sponsor
				if ships[sp].Class != lane.Star {
					sp = ships[sp].Sponsor
				}
			}
			if len(by[sp]) == 0 {
				order = append(order, sp)
			}
			by[sp] = append(by[sp], i)
		}
		order = shuffled(rng, order)
		// Leave most sponsors unhit, so that requesters remain outside.
		k := max(1, min(k, len(order)/4))
		var rcvrs, hit []int
		per := (want + k - 1) / k
		for _, sp := range order {
			if len(hit) == k || len(rcvrs) >= want {
				break
			}
			hit = append(hit, sp)
			rs := shuffled(rng, by[sp])
			rcvrs = append(rcvrs, rs[:min(per, len(rs))]...)
		}
		return rcvrs, hit
	}
}

func scenarios() []scenario {
	rebind := func(n *sim.Network, rcvrs, _ []int) error {
		for _, r := range rcvrs {
			if err := n.Rebind(r); err != nil {
				return err
			}
		}
		return nil
	}
	restart := func(n *sim.Network, _, hit []int) error {
		for _, h := range hit {
			if err := n.RestartRelay(h); err != nil {
				return err
			}
		}
		return nil
	}
	offline := func(n *sim.Network, _, hit []int) error {
		for _, h := range hit {
			if err := n.SetOffline(h, true); err != nil {
				return err
			}
		}
		return nil
	}
	pickLeaves := func(nat bool) func([]sim.Ship, *rand.Rand, int) ([]int, []int) {
		return func(ships []sim.Ship, rng *rand.Rand, want int) ([]int, []int) {
			p := shuffled(rng, leafPool(ships, nat, !nat))
			return p[:min(want, len(p))], nil
		}
	}
	return []scenario{
		{name: "NAT rebinding (ship behind NAT gets a new lane)", pick: pickLeaves(true), apply: rebind},
		{name: "address change (public ship gets a new lane)", pick: pickLeaves(false), apply: rebind},
		{name: "star relay restart", pick: underSponsors(lane.Star, ChurnSponsors), apply: restart, needsRelay: true},
		{name: "galaxy relay restart", pick: underSponsors(lane.Galaxy, ChurnGalaxies), apply: restart},
		{name: "star offline for 1 min", pick: underSponsors(lane.Star, ChurnSponsors), apply: offline, outage: true},
		{name: "galaxy offline for 1 min", pick: underSponsors(lane.Galaxy, ChurnGalaxies), apply: offline, outage: true},
	}
}

// churnRun is one scenario's outcome under one strategy.
type churnRun struct {
	applies  bool
	rcvrs    int
	recovery []float64 // s after the churn, per conversation that recovered
	never    int       // conversations with no answer to a request made after the churn
	requests int       // made from ChurnAt − RequestTimeout on
	lost     int       // of those, unanswered within RequestTimeout
	retried  int
	lostPre  int // lost among requests made before ChurnAt − RequestTimeout (should be none)
}

type churnResult struct {
	strategies []sim.Strategy
	scenarios  []scenario
	runs       [][]churnRun // [scenario][strategy]
}

func runChurn(p params) (*churnResult, error) {
	res := &churnResult{strategies: []sim.Strategy{strategyDesign(), strategyToday()}, scenarios: scenarios()}
	res.runs = make([][]churnRun, len(res.scenarios))
	var jobs []func() error
	for si, sc := range res.scenarios {
		res.runs[si] = make([]churnRun, len(res.strategies))
		for ti, st := range res.strategies {
			jobs = append(jobs, func() error {
				r, err := churnOnce(p, sc, st)
				res.runs[si][ti] = r
				return err
			})
		}
	}
	return res, parallel(p.workers, jobs)
}

func churnOnce(p params, sc scenario, st sim.Strategy) (churnRun, error) {
	n, err := sim.New(p.config(st, sim.Fast()))
	if err != nil {
		return churnRun{}, err
	}
	ships := n.Ships()
	rng := rand.New(rand.NewPCG(p.seed, streamChurn))
	want := ChurnReceivers
	if p.short {
		want = ChurnReceiversShort
	}
	rcvrs, hit := sc.pick(ships, rng, want)
	if sc.needsRelay {
		for _, h := range hit {
			if !ships[h].Relay {
				return churnRun{}, nil // does not apply
			}
		}
	}
	// Requesters are not under any ship the churn hits.
	hitSet := map[int]bool{}
	for _, h := range hit {
		hitSet[h] = true
	}
	var reqPool []int
	for _, i := range requesters(ships) {
		s := &ships[i]
		if !hitSet[s.Galaxy] && !hitSet[s.Sponsor] && !hitSet[ships[s.Sponsor].Sponsor] && !slices.Contains(rcvrs, i) {
			reqPool = append(reqPool, i)
		}
	}
	if len(reqPool) == 0 || len(rcvrs) == 0 {
		return churnRun{}, fmt.Errorf("churn %q: %d ships are too few for receivers and requesters apart", sc.name, len(ships))
	}
	r := churnRun{applies: true, rcvrs: len(rcvrs)}
	var failed error // the first error a scheduled step met
	fail := func(err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	first := make([]time.Duration, len(rcvrs)) // earliest answer to a request made at or after ChurnAt
	for i := range first {
		first[i] = -1
	}
	for ci, rcvr := range rcvrs {
		rq := reqPool[rng.IntN(len(reqPool))]
		phase := time.Duration(rng.Int64N(int64(ChurnInterval)))
		k := 0
		var tick func()
		tick = func() {
			now := n.Now()
			if now > ChurnAt+ChurnAfter {
				return
			}
			path := fmt.Sprintf("x/%d/%d", ci, k)
			k++
			n.Publish(rcvr, path, []byte(path))
			err := n.Peek(rq, rcvr, path, RequestTimeout, func(res sim.Result) {
				switch {
				case res.Start < ChurnAt-RequestTimeout:
					if res.Lost {
						r.lostPre++
					}
					return
				case res.Lost:
					r.lost++
				case res.Tries > 1:
					r.retried++
				}
				r.requests++
				if !res.Lost && res.Start >= ChurnAt && (first[ci] < 0 || res.End < first[ci]) {
					first[ci] = res.End
				}
			})
			fail(err)
			n.At(now+ChurnInterval, tick)
		}
		n.At(WarmUp+phase, tick)
	}
	n.At(ChurnAt, func() { fail(sc.apply(n, rcvrs, hit)) })
	if sc.outage {
		n.At(ChurnAt+ChurnOutage, func() {
			for _, h := range hit {
				fail(n.SetOffline(h, false))
			}
		})
	}
	n.RunUntil(ChurnAt + ChurnAfter + RequestTimeout + time.Second)
	if failed != nil {
		return churnRun{}, fmt.Errorf("churn %q: %w", sc.name, failed)
	}
	for _, t := range first {
		if t < 0 {
			r.never++
			continue
		}
		r.recovery = append(r.recovery, (t - ChurnAt).Seconds())
	}
	return r, nil
}

func (r *churnResult) section() section {
	var b strings.Builder
	fmt.Fprintf(&b, "Each affected receiver has one requester (a planet or moon not under any ship the churn hits) asking it for a new value every %v, from the warm-up on; the churn happens a minute later, when routes have tightened, and requests go on for %v after it. "+
		"*Recovery* is the time from the churn to the first answer to a request made after it (so about one round trip when nothing broke); *lost* counts requests made from %v before the churn on that were not answered within %v. Fast preset, no link loss; up to %d receivers per scenario.\n\n",
		prose(ChurnInterval), prose(ChurnAfter), prose(RequestTimeout), prose(RequestTimeout), ChurnReceivers)
	head := []string{"churn", "receivers"}
	for _, st := range r.strategies {
		head = append(head, st.Name+": recovery median / p90 / max", "never", "lost / requests", "retransmitted")
	}
	t := table{head: head}
	chart := svgchart.LineChart{Title: "Recovery after churn (design: chain, dual)", XLabel: "seconds since the churn",
		YLabel: "share of conversations recovered", Steps: true, LegendBottom: true}
	for si, sc := range r.scenarios {
		row := []string{sc.name, ""}
		for ti := range r.strategies {
			run := r.runs[si][ti]
			if !run.applies {
				row = append(row, "does not apply", "", "", "")
				continue
			}
			row[1] = fmt.Sprint(run.rcvrs)
			row = append(row, f(percentile(run.recovery, 50), 1)+" / "+f(percentile(run.recovery, 90), 1)+" / "+f(maxOf(run.recovery), 1)+" s",
				fmt.Sprint(run.never), fmt.Sprintf("%d / %d", run.lost, run.requests), fmt.Sprint(run.retried))
		}
		t.add(row...)
		if d := r.runs[si][0]; d.applies && d.rcvrs > 0 {
			s := svgchart.Series{Name: sc.name}
			rec := slices.Clone(d.recovery)
			slices.Sort(rec)
			s.X, s.Y = append(s.X, 0), append(s.Y, 0)
			for i, x := range rec {
				s.X = append(s.X, x)
				s.Y = append(s.Y, float64(i+1)/float64(d.rcvrs))
			}
			s.X, s.Y = append(s.X, (ChurnAfter).Seconds()), append(s.Y, float64(len(rec))/float64(d.rcvrs))
			chart.Series = append(chart.Series, s)
		}
	}
	b.WriteString(t.String())
	b.WriteString("\n![Recovery after churn](simulation/churn.svg)\n")
	return section{title: "4. Churn", markdown: b.String(), plots: map[string][]byte{"churn.svg": chart.Render()},
		findings: r.findings()}
}

// worst returns the largest recovery of a run, or +Inf when a conversation
// never recovered.
func (c *churnRun) worst() float64 {
	if c.never > 0 {
		return math.Inf(1)
	}
	return maxOf(c.recovery)
}

func (r *churnResult) findings() []string {
	// Scenario indexes: see scenarios(); strategy 0 is the design, 1 today.
	const natRebind, addrChange, starRestart, galaxyRestart, starOff, galaxyOff = 0, 1, 2, 3, 4, 5
	w := func(s, t int) string { return f(r.runs[s][t].worst(), 0) }
	lost := func(s, t int) int { return r.runs[s][t].lost }
	return []string{
		fmt.Sprintf("A ship whose lane changes (NAT rebinding, or a new address) is unreachable until its next ping teaches its sponsor the new lane: at most %s s and %s s, the 25 s ping interval plus a request's round trip, with %d and %d requests lost.",
			w(natRebind, 0), w(addrChange, 0), lost(natRebind, 0), lost(addrChange, 0)),
		fmt.Sprintf("A restarted star relay forgets its sponsees' lanes: routes that had gone direct do not notice, ships reached through the star wait for their next ping (at most %s s, %d requests lost). After a galaxy relay restart the design's conversations recover within %s s, galaxy-only's within %s s: there every route not yet direct goes through the galaxy.",
			w(starRestart, 0), lost(starRestart, 0), w(galaxyRestart, 0), w(galaxyRestart, 1)),
		fmt.Sprintf("A sponsor offline for a minute cuts off the ships only it can reach (behind a NAT, or not yet tightened): under the design a star's outage loses %d requests and its sponsees recover at most %s s after it began; a galaxy's outage loses %d requests (galaxy-only: %d).",
			lost(starOff, 0), w(starOff, 0), lost(galaxyOff, 0), lost(galaxyOff, 1)),
	}
}
