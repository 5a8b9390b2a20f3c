package main

import (
	"fmt"
	"github.com/urbit-relay/relay/relay/route"
	"math"
	"strings"
	"time"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
	"github.com/urbit-relay/relay/internal/svgchart"
	"github.com/urbit-relay/relay/lane"
)

const (
	// TightenRequests is how many requests each pair of the tightening
	// experiment makes in turn.
	TightenRequests = 10
	// TightenGap is the pause between an answer and the next request: long
	// enough for duplicates through looser routes to land (SettleTime), as
	// in the relay's end-to-end test.
	TightenGap = time.Second
	// TightenPairs and TightenPairsShort are the pairs per receiver
	// category.
	TightenPairs      = 100
	TightenPairsShort = 12
	// TightenStagger spreads the pairs' first requests.
	TightenStagger = 10 * time.Second
	// TightenLoss is the link loss of the lossy runs.
	TightenLoss = 0.01
)

// category is a kind of receiver, by depth and reachability.
type category struct {
	name  string
	class lane.Class
	nat   bool
}

func categories() []category {
	return []category{
		{"galaxy", lane.Galaxy, false}, {"star", lane.Star, false},
		{"planet", lane.Planet, false}, {"planet behind NAT", lane.Planet, true},
		{"moon", lane.Moon, false}, {"moon behind NAT", lane.Moon, true},
	}
}

// catResult is one receiver category's outcome in one run.
type catResult struct {
	pairs, wentDirect int
	roundTrips        []float64 // per pair that went direct: requests answered before the first direct one
	settledHops       []float64 // per pair: hops of its last answer
	requests, retried int
	retriedPairs      int // pairs with a request that needed a second send
	lost              int
	msgsByK           [][]float64 // by request number: datagrams per request
	delayByK          [][]float64 // by request number: ms
}

type tightenRun struct {
	strategy sim.Strategy
	loss     float64
	cats     []catResult
	stock    sim.StockStats // what stock requesters learned (sim.Network.StockStats)
}

type tighteningResult struct {
	runs []tightenRun // indexed by the run* constants
}

// Runs of the tightening experiment, in tighteningResult.runs.
const (
	runDesign      = iota // chain, dual, no loss
	runToday              // galaxy-only, dual, no loss
	runDesignLossy        // chain, dual, TightenLoss
	runTodayLossy         // galaxy-only, dual, TightenLoss
	runSingle             // chain, single, no loss
)

// strategySingle is the design with SingleRoute: each request on the
// tightest candidate alone.
func strategySingle() sim.Strategy {
	s := sim.Strategy{SingleRoute: true}
	s.Name = strategyName(s)
	return s
}

func runTightening(p params) (*tighteningResult, error) {
	type spec struct {
		st   sim.Strategy
		loss float64
	}
	specs := []spec{runDesign: {strategyDesign(), 0}, runToday: {strategyToday(), 0},
		runDesignLossy: {strategyDesign(), TightenLoss}, runTodayLossy: {strategyToday(), TightenLoss},
		runSingle: {strategySingle(), 0}}
	res := &tighteningResult{runs: make([]tightenRun, len(specs))}
	var jobs []func() error
	for i, s := range specs {
		jobs = append(jobs, func() error {
			r, err := tightenOnce(p, s.st, s.loss)
			res.runs[i] = r
			return err
		})
	}
	return res, parallel(p.workers, jobs)
}

func tightenOnce(p params, st sim.Strategy, loss float64) (tightenRun, error) {
	return tightenWith(p, st, loss, TightenGap, TightenRequests)
}

// tightenWith is tightenOnce with nreq requests a pair, gap apart.
func tightenWith(p params, st sim.Strategy, loss float64, gap time.Duration, nreq int) (tightenRun, error) {
	cfg := p.config(st, sim.Fast())
	cfg.Loss = loss
	n, err := sim.New(cfg)
	if err != nil {
		return tightenRun{}, err
	}
	ships := n.Ships()
	rng := n.Rand()
	reqs := requesters(ships)
	cats := categories()
	pairs := TightenPairs
	if p.short {
		pairs = TightenPairsShort
	}
	var convs []conversation
	var convCat []int
	for ci, c := range cats {
		var pool []int
		for i := range ships {
			if ships[i].Class == c.class && ships[i].NAT == c.nat {
				pool = append(pool, i)
			}
		}
		rng.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
		for _, rcvr := range pool[:min(pairs, len(pool))] {
			rq := reqs[rng.IntN(len(reqs))]
			for rq == rcvr {
				rq = reqs[rng.IntN(len(reqs))]
			}
			thinks := make([]time.Duration, nreq)
			for k := range thinks {
				thinks[k] = gap
			}
			start := WarmUp + time.Duration(rng.Int64N(int64(TightenStagger)))
			convs = append(convs, conversation{requester: rq, rcvr: rcvr, start: start, thinks: thinks})
			convCat = append(convCat, ci)
		}
	}
	end := WarmUp + TightenStagger + time.Duration(nreq)*(gap+RequestTimeout) + time.Minute
	answers, err := runConversations(n, convs, "t", end)
	if err != nil {
		return tightenRun{}, err
	}
	run := tightenRun{strategy: st, loss: loss, cats: make([]catResult, len(cats)), stock: n.StockStats()}
	for i := range run.cats {
		run.cats[i].msgsByK = make([][]float64, nreq)
		run.cats[i].delayByK = make([][]float64, nreq)
	}
	// Answers come sorted by conversation, then request number.
	for i := 0; i < len(answers); {
		ci := answers[i].conv
		cr := &run.cats[convCat[ci]]
		cr.pairs++
		firstDirect := -1
		last := -1
		retried := false
		for ; i < len(answers) && answers[i].conv == ci; i++ {
			a := answers[i]
			cr.requests++
			cr.msgsByK[a.k] = append(cr.msgsByK[a.k], float64(a.msgs))
			if a.res.Lost {
				cr.lost++
				continue
			}
			cr.delayByK[a.k] = append(cr.delayByK[a.k], ms(a.res.Delay()))
			if a.res.Tries > 1 {
				cr.retried++
				retried = true
			}
			if a.directAfter && firstDirect < 0 {
				firstDirect = a.k
			}
			last = a.res.Hops
		}
		if retried {
			cr.retriedPairs++
		}
		if firstDirect >= 0 {
			cr.wentDirect++
			cr.roundTrips = append(cr.roundTrips, float64(firstDirect))
		}
		if last >= 0 {
			cr.settledHops = append(cr.settledHops, float64(last))
		}
	}
	return run, nil
}

// flatten concatenates xss.
func flatten(xss [][]float64) []float64 {
	var out []float64
	for _, xs := range xss {
		out = append(out, xs...)
	}
	return out
}

func maxOf(xs []float64) float64 {
	m := math.NaN()
	for _, x := range xs {
		if math.IsNaN(m) || x > m {
			m = x
		}
	}
	return m
}

func (r *tighteningResult) section() section {
	var b strings.Builder
	design, today := r.runs[runDesign], r.runs[runToday]
	cats := categories()
	fmt.Fprintf(&b, "Each pair is a requester (a random planet or moon that runs no relay) and a receiver of the category; the requester asks for %d values in turn, each %v after the previous answer. "+
		"A request *goes direct* when the requester sends it on the receiver's own lane and the receiver answers there, which proves that lane (read from the requester's route table once the round trip has settled); *round trips to direct* counts the requests before it (the seed's example, a moon under a planet relay, takes 3: the 4th request goes direct). "+
		"*Retransmitted* requests needed a second send (a datagram was lost on the way), *lost* ones were not answered within %v. Fast preset, no link loss.\n\n",
		TightenRequests, prose(TightenGap), prose(RequestTimeout))
	t := table{head: []string{"receiver", "pairs", "design: went direct", "round trips to direct (mean / max)", "hops once settled", "retransmitted", "lost",
		"today: went direct", "round trips to direct (mean / max)", "retransmitted", "lost"}}
	for i, c := range cats {
		d, g := design.cats[i], today.cats[i]
		if d.pairs == 0 {
			continue
		}
		t.add(c.name, fmt.Sprint(d.pairs), pct(d.wentDirect, d.pairs),
			f(mean(d.roundTrips), 2)+" / "+f(maxOf(d.roundTrips), 0), f(mean(d.settledHops), 2),
			fmt.Sprint(d.retried), fmt.Sprint(d.lost),
			pct(g.wentDirect, g.pairs), f(mean(g.roundTrips), 2)+" / "+f(maxOf(g.roundTrips), 0),
			fmt.Sprint(g.retried), fmt.Sprint(g.lost))
	}
	b.WriteString(t.String())
	fmt.Fprintf(&b, "\nDesign: %s (relays at galaxies, stars and planets with moons; dual send; no fraternization). Today: %s (see *Strategies* above).\n\n",
		design.strategy.Name, today.strategy.Name)
	extra, public := extraRoundTrips(design)
	if extra == 0 {
		fmt.Fprintf(&b, "None of the design's %d direct pairs took more round trips than the receiver's depth, though a dual send's page through the looser route (the relay a step up, often the galaxy) often reaches the requester first, within the links' jitter: the endpoint takes the next-hop from the tighter route's late copy too (`endpoint.Core.page`; `Routes.Answered` ignores hints from looser lanes), so no round trip is lost. Pairs whose requester's own sponsor is on the receiver's chain need fewer round trips than the depth.\n\n",
			public)
	} else {
		fmt.Fprintf(&b, "%d of the design's %d direct pairs took more round trips than the receiver's depth: a tightening step was lost, though the endpoint takes the next-hop from a late duplicate through the tighter route too (`endpoint.Core.page`). Pairs whose requester's own sponsor is on the receiver's chain need fewer round trips than the depth.\n\n",
			extra, public)
	}

	b.WriteString("Datagrams per request (every copy on every link, requests and pages, duplicates included) and mean delay, by request number, design:\n\n")
	head := []string{"receiver"}
	for k := range TightenRequests {
		head = append(head, fmt.Sprintf("#%d", k+1))
	}
	mt := table{head: head}
	for i, c := range cats {
		d := design.cats[i]
		if d.pairs == 0 {
			continue
		}
		row := []string{c.name}
		for k := range TightenRequests {
			row = append(row, f(mean(d.msgsByK[k]), 1)+" / "+f(mean(d.delayByK[k]), 0)+" ms")
		}
		mt.add(row...)
	}
	b.WriteString(mt.String())

	lossy := r.runs[runDesignLossy : runTodayLossy+1]
	fmt.Fprintf(&b, "\nWith %.0f %% loss on every link, the same pairs:\n\n", 100*TightenLoss)
	lt := table{head: []string{"strategy", "requests", "retransmitted", "lost", "went direct (public receivers)"}}
	for _, run := range lossy {
		var reqs, ret, lost, pairs, direct int
		for i, c := range cats {
			reqs += run.cats[i].requests
			ret += run.cats[i].retried
			lost += run.cats[i].lost
			if !c.nat {
				pairs += run.cats[i].pairs
				direct += run.cats[i].wentDirect
			}
		}
		lt.add(run.strategy.Name, fmt.Sprint(reqs), pct(ret, reqs), fmt.Sprint(lost), pct(direct, pairs))
	}
	b.WriteString(lt.String())

	single := r.runs[runSingle]
	fmt.Fprintf(&b, "\nThe same pairs with a single route (%s: each request on the tightest candidate alone, proven or not, so a hint is tried without a copy on the known-good route), no link loss; delays are over every answered request of the pair, against the design's:\n\n", single.strategy.Name)
	st := table{head: []string{"receiver", "went direct", "round trips to direct (mean / max)", "retransmitted", "lost", "delay mean / p99 / max", "design: delay mean / p99 / max"}}
	for i, c := range cats {
		sc := single.cats[i]
		if sc.pairs == 0 {
			continue
		}
		sd, dd := flatten(sc.delayByK), flatten(design.cats[i].delayByK)
		st.add(c.name, pct(sc.wentDirect, sc.pairs), f(mean(sc.roundTrips), 2)+" / "+f(maxOf(sc.roundTrips), 0),
			fmt.Sprint(sc.retried), fmt.Sprint(sc.lost),
			f(mean(sd), 0)+" / "+f(percentile(sd, 99), 0)+" / "+f(maxOf(sd), 0)+" ms",
			f(mean(dd), 0)+" / "+f(percentile(dd, 99), 0)+" / "+f(maxOf(dd), 0)+" ms")
	}
	b.WriteString(st.String())
	b.WriteString("\n![Datagrams per request by request number](simulation/tightening.svg)\n")

	chart := svgchart.LineChart{Title: "Tightening: datagrams per request (design, fast preset)", XLabel: "request number in the conversation",
		YLabel: "datagrams per request"}
	for i, c := range cats {
		d := design.cats[i]
		if d.pairs == 0 {
			continue
		}
		s := svgchart.Series{Name: c.name}
		for k := range TightenRequests {
			s.X = append(s.X, float64(k+1))
			s.Y = append(s.Y, mean(d.msgsByK[k]))
		}
		chart.Series = append(chart.Series, s)
	}
	return section{title: "1. Tightening", markdown: b.String(), plots: map[string][]byte{"tightening.svg": chart.Render()},
		findings: r.findings(), notes: r.notes()}
}

func (r *tighteningResult) findings() []string {
	design, today := r.runs[runDesign], r.runs[runToday]
	// Category indexes: see categories().
	const star, planet, planetNAT, moon, moonNAT = 1, 2, 3, 4, 5
	rt := func(run tightenRun, c int) string { return f(mean(run.cats[c].roundTrips), 1) }
	var settled []float64
	settled = append(settled, design.cats[planetNAT].settledHops...)
	settled = append(settled, design.cats[moonNAT].settledHops...)
	var out []string
	out = append(out, fmt.Sprintf("Routes tighten straight to the receiver, not one relay per round trip as the seed describes: a relay's next-hop names the receiver's own lane, as the relay nearest it heard it, never a relay's, because stock arvo stores a next-hop as the peer's lane (docs/arvo-lanes.md L3). Requests to public stars, planets and moons go direct after %s, %s and %s round trips on average under the design; "+
		"galaxy-only gets there in %s, %s and %s, because a galaxy already knows the lane of every ship under it. Ships behind a NAT never go direct: once settled, their requests arrive after %s hops on average (through the relays the requester held before the receiver's lane was named).",
		rt(design, star), rt(design, planet), rt(design, moon), rt(today, star), rt(today, planet), rt(today, moon), f(mean(settled), 1)))
	var reqs, bad int
	for _, c := range design.cats {
		reqs += c.requests
		bad += c.retried + c.lost
	}
	if bad == 0 {
		out = append(out, fmt.Sprintf("No request was lost or needed a retransmission while routes tightened (%d requests, no link loss): each untried tighter lane gets a copy beside the known-good one.", reqs))
	} else {
		out = append(out, fmt.Sprintf("%d of %d requests were retransmitted or lost while routes tightened without link loss (the target is none).", bad, reqs))
	}
	single := r.runs[runSingle]
	nat := r.natHintCost(single)
	dnat := r.natHintCost(design)
	pace := "as fast"
	for _, c := range []int{star, planet, moon} {
		if mean(single.cats[c].roundTrips) > mean(design.cats[c].roundTrips)+0.05 || len(single.cats[c].roundTrips) < len(design.cats[c].roundTrips) {
			pace = "more slowly"
		}
	}
	out = append(out, fmt.Sprintf("A single route (`SingleRoute`: each request on the tightest candidate alone, proven or not) tightens %s, %s, %s and %s round trips to public stars, planets and moons, for fewer datagrams; but relays hand out the lane of a sponsee behind a NAT as a next-hop like any other, and a requester that tries it alone loses requests until the lane fails its probes: %d of %d pairs to such receivers had requests re-sent, delayed up to %s (dual send: %d pairs, up to %s).",
		pace, rt(single, star), rt(single, planet), rt(single, moon), nat.retriedPairs, nat.pairs, msProse(nat.maxDelay), dnat.retriedPairs, msProse(dnat.maxDelay)))
	return out
}

// extraRoundTrips counts run's pairs that went direct, and those of them
// that took more round trips than the receiver's depth.
func extraRoundTrips(run tightenRun) (extra, direct int) {
	for i, c := range categories() {
		for _, rt := range run.cats[i].roundTrips {
			direct++
			if rt > float64(c.class) {
				extra++
			}
		}
	}
	return extra, direct
}

// natCost sums a run's receivers behind a NAT: pairs, pairs with a
// request re-sent, and the longest delay (ms).
type natCost struct {
	pairs, retriedPairs int
	maxDelay            float64
}

func (r *tighteningResult) natHintCost(run tightenRun) natCost {
	var c natCost
	for i, cat := range categories() {
		if !cat.nat {
			continue
		}
		cr := run.cats[i]
		c.pairs += cr.pairs
		c.retriedPairs += cr.retriedPairs
		if m := maxOf(flatten(cr.delayByK)); m > c.maxDelay {
			c.maxDelay = m
		}
	}
	return c
}

// notes are the tightening runs' observations on the code under test.
func (r *tighteningResult) notes() []string {
	extra, direct := extraRoundTrips(r.runs[runDesign])
	var out []string
	if extra == 0 {
		out = append(out, fmt.Sprintf("**A tightening step is no longer lost when the looser route's copy of a page arrives first** (fixed): `endpoint.Core.page` takes the next-hop from a late duplicate too, and `route.Table.Answered` takes a hint only from a lane being tried, so a copy through the looser route teaches nothing wrong. None of the %d pairs in *Tightening* that went direct took a round trip more than the receiver's depth.", direct))
	} else {
		out = append(out, fmt.Sprintf("**Tightening steps are still lost**: %d of the %d pairs in *Tightening* that went direct took more round trips than the receiver's depth, though `endpoint.Core.page` takes the next-hop from a late duplicate too.", extra, direct))
	}
	single := r.runs[runSingle]
	nat := r.natHintCost(single)
	out = append(out, fmt.Sprintf("**`SingleRoute` is the optimistic alternative to dual send**: each request goes on the tightest candidate alone, proven or not, and falls back when the candidate fails `DefaultCandidateFailures` (%d) probes of `DefaultProbeTimeout` (%v) each. Routes to public ships tighten as under dual send for fewer datagrams; the cost is a next-hop that cannot be reached directly. A relay cannot tell that its sponsee is behind a NAT, so it hands out the sponsee's lane like any other, and a single-route requester loses its requests to it until the lane fails: in *Tightening* %d of %d pairs to receivers behind a NAT re-sent a request, the slowest answered after %s; the lane is then held out for `DefaultBadLaneHold` (%v) and tried again after it. Dual send pays for the same dead hint with a copy of each request, not with time.",
		route.DefaultCandidateFailures, prose(route.DefaultProbeTimeout), nat.retriedPairs, nat.pairs, msProse(nat.maxDelay), prose(route.DefaultBadLaneHold)))
	return out
}
