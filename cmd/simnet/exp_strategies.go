package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/internal/svgchart"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/pit"
)

const (
	// ShipsPerConversation sets the workload's size: one conversation per
	// this many ships.
	ShipsPerConversation = 5
	// ConversationMaxRequests bounds a conversation's length: it makes 1
	// to this many requests, uniformly.
	ConversationMaxRequests = 20
	// ConversationThink is the mean (exponential) pause between an answer
	// and the conversation's next request.
	ConversationThink = 5 * time.Second
	// StarReceiverShare is the share of conversations addressed to a star;
	// the rest go to planets and moons.
	StarReceiverShare = 0.1
	// StrategyWindow and StrategyWindowShort are how long conversations
	// keep starting (over its first half) and the window load is measured
	// over.
	StrategyWindow      = 4 * time.Minute
	StrategyWindowShort = 2 * time.Minute

	// streamWorkload is the random stream the workloads are drawn from,
	// apart from the network's own.
	streamWorkload = 0x776f726b
)

// workload draws the strategies experiment's conversations. It depends on
// the seed and the topology only, so every strategy gets the same one.
func workload(p params, ships []sim.Ship, window time.Duration) []conversation {
	rng := rand.New(rand.NewPCG(p.seed, streamWorkload))
	reqs := requesters(ships)
	var stars, leaves []int
	for i := range ships {
		switch ships[i].Class {
		case lane.Star:
			stars = append(stars, i)
		case lane.Planet, lane.Moon:
			leaves = append(leaves, i)
		}
	}
	convs := make([]conversation, p.ships/ShipsPerConversation)
	for i := range convs {
		c := &convs[i]
		c.requester = reqs[rng.IntN(len(reqs))]
		for c.rcvr = c.requester; c.rcvr == c.requester; {
			if rng.Float64() < StarReceiverShare {
				c.rcvr = stars[rng.IntN(len(stars))]
			} else {
				c.rcvr = leaves[rng.IntN(len(leaves))]
			}
		}
		c.start = WarmUp + time.Duration(rng.Int64N(int64(window/2)))
		c.thinks = make([]time.Duration, 1+rng.IntN(ConversationMaxRequests))
		for k := range c.thinks {
			c.thinks[k] = time.Duration(rng.ExpFloat64() * float64(ConversationThink))
		}
	}
	return convs
}

// strategyRun is one strategy's outcome under one latency preset.
type strategyRun struct {
	strategy sim.Strategy
	latency  string
	convs    int
	requests int
	delays   []float64 // ms, answered requests
	retried  int
	lost     int
	msgs     uint64
	window   time.Duration
	// Datagrams received in the window by class of ship: total, request
	// traffic, keepalives; and the busiest ship of the class.
	classLoad  [4][sim.NumTraffic]uint64
	busiest    [4]uint64
	relayDrops [len(relay.Snapshot{}.Drops)]uint64
	evicted    uint64 // pending entries the relays shed for room
	// cappedForwards are requests past an entry's requester cap that the
	// relays forwarded to refresh it upstream (relay.EventCappedForwards).
	cappedForwards uint64
	throttled      uint64 // pages the relays' amplification budget refused
	stock          sim.StockStats
}

func (r *strategyRun) pps(class lane.Class) float64 {
	var t uint64
	for _, v := range r.classLoad[class] {
		t += v
	}
	return float64(t) / r.window.Seconds()
}

func (r *strategyRun) ppsOf(class lane.Class, tr sim.Traffic) float64 {
	return float64(r.classLoad[class][tr]) / r.window.Seconds()
}

type strategiesResult struct {
	fast, slow []strategyRun // by allStrategies
}

func runStrategies(p params) (*strategiesResult, error) {
	sts := allStrategies()
	res := &strategiesResult{fast: make([]strategyRun, len(sts)), slow: make([]strategyRun, len(sts))}
	var jobs []func() error
	for i, st := range sts {
		for _, lat := range []sim.LatencyModel{sim.Fast(), sim.Slow()} {
			jobs = append(jobs, func() error {
				r, err := strategyOnce(p, st, lat)
				if lat.Name == "fast" {
					res.fast[i] = r
				} else {
					res.slow[i] = r
				}
				return err
			})
		}
	}
	return res, parallel(p.workers, jobs)
}

func strategyOnce(p params, st sim.Strategy, lat sim.LatencyModel) (strategyRun, error) {
	window := StrategyWindow
	if p.short {
		window = StrategyWindowShort
	}
	n, err := sim.New(p.config(st, lat))
	if err != nil {
		return strategyRun{}, err
	}
	ships := n.Ships()
	convs := workload(p, ships, window)
	n.RunUntil(WarmUp)
	before := n.Load()
	var during sim.Load
	n.At(WarmUp+window, func() { during = n.Load().Sub(before) })
	answers, err := runConversations(n, convs, "s", WarmUp+window+ConversationMaxRequests*RequestTimeout)
	if err != nil {
		return strategyRun{}, err
	}
	r := strategyRun{strategy: st, latency: lat.Name, window: window, convs: len(convs), stock: n.StockStats()}
	for _, a := range answers {
		r.requests++
		r.msgs += a.msgs
		if a.res.Lost {
			r.lost++
			continue
		}
		if a.res.Tries > 1 {
			r.retried++
		}
		r.delays = append(r.delays, ms(a.res.Delay()))
	}
	for i := range ships {
		c := ships[i].Class
		for t, v := range during[i] {
			r.classLoad[c][t] += v
		}
		r.busiest[c] = max(r.busiest[c], during.Total(i))
	}
	snap := n.RelayTotals()
	r.relayDrops = snap.Drops
	r.evicted, r.throttled = snap.Events[relay.EventEvicted], snap.Events[relay.EventAmpThrottled]
	r.cappedForwards = snap.Events[relay.EventCappedForwards]
	return r, nil
}

func (r *strategiesResult) section() section {
	var b strings.Builder
	f0 := r.fast[0]
	fmt.Fprintf(&b, "The same workload under every strategy: %d conversations, each a requester (a planet or moon) asking one receiver (a star %.0f %% of the time, otherwise a planet or moon) for 1 to %d values in turn, an exponential %v apart; they start over the first half of a %v window. %d requests in all. "+
		"*Delay* is from the request to its answer (answered requests); *datagrams/request* counts every copy of the request and its page on every link, duplicates and retransmissions included; *lost* is unanswered within %v.\n\n",
		f0.convs, 100*StarReceiverShare, ConversationMaxRequests, prose(ConversationThink), prose(f0.window), f0.requests, prose(RequestTimeout))
	t := table{head: []string{"strategy", "relays at", "dual send", "no-fraternization rule", "fast: delay mean / p99", "datagrams/request", "slow: delay mean / p99", "datagrams/request", "slow: retransmitted"}}
	for i := range r.fast {
		fa, sl := &r.fast[i], &r.slow[i]
		st := fa.strategy
		where := "galaxies, stars, planets with moons"
		if st.GalaxyOnly {
			where = "galaxies"
		}
		t.add("**"+st.Name+"**", where, yesNo(!st.SingleRoute), yesNo(!st.Fraternize),
			f(mean(fa.delays), 0)+" / "+f(percentile(fa.delays, 99), 0)+" ms", f(float64(fa.msgs)/float64(fa.requests), 2),
			f(mean(sl.delays), 0)+" / "+f(percentile(sl.delays, 99), 0)+" ms", f(float64(sl.msgs)/float64(sl.requests), 2), pct(sl.retried, sl.requests))
	}
	b.WriteString(t.String())

	fmt.Fprintf(&b, "\nLoad, fast preset: datagrams per second received over the window by all galaxies and by all stars (a relay host's relay and its ship together), with the request traffic and the keepalives (pings to sponsors and their acks) apart, and the busiest single galaxy and star; requests retransmitted and lost; and what relays dropped because a sponsee's lane was unknown or a pending entry had its %d requesters.\n\n", pit.DefaultMaxRequestersPerEntry)
	lt := table{head: []string{"strategy", "galaxies pkt/s (requests + keepalive)", "busiest galaxy", "stars pkt/s (requests + keepalive)", "busiest star", "retransmitted", "lost", "sponsee unknown", "requesters full"}}
	for i := range r.fast {
		fa := &r.fast[i]
		w := fa.window.Seconds()
		lt.add(fa.strategy.Name,
			f(fa.pps(lane.Galaxy), 0)+" ("+f(fa.ppsOf(lane.Galaxy, sim.TrafficTracked), 0)+" + "+f(fa.ppsOf(lane.Galaxy, sim.TrafficKeepalive), 0)+")",
			f(float64(fa.busiest[lane.Galaxy])/w, 1),
			f(fa.pps(lane.Star), 0)+" ("+f(fa.ppsOf(lane.Star, sim.TrafficTracked), 0)+" + "+f(fa.ppsOf(lane.Star, sim.TrafficKeepalive), 0)+")",
			f(float64(fa.busiest[lane.Star])/w, 1),
			pct(fa.retried, fa.requests), fmt.Sprint(fa.lost),
			fmt.Sprint(fa.relayDrops[relay.DropSponseeUnknown]), fmt.Sprint(fa.relayDrops[relay.DropRequestersFull]))
	}
	b.WriteString(lt.String())
	b.WriteString("\n![Packets per second carried by galaxies and stars](simulation/strategies-load.svg)\n\n![Delay by strategy](simulation/strategies-delay.svg)\n")

	var cats []string
	var gal, star, galReq, starReq []float64
	var fm, fp, sm, sp []float64
	for i := range r.fast {
		fa, sl := &r.fast[i], &r.slow[i]
		cats = append(cats, strings.ReplaceAll(fa.strategy.Name, ", ", "\n"))
		gal = append(gal, fa.pps(lane.Galaxy))
		star = append(star, fa.pps(lane.Star))
		galReq = append(galReq, fa.ppsOf(lane.Galaxy, sim.TrafficTracked))
		starReq = append(starReq, fa.ppsOf(lane.Star, sim.TrafficTracked))
		fm, fp = append(fm, mean(fa.delays)), append(fp, percentile(fa.delays, 99))
		sm, sp = append(sm, mean(sl.delays)), append(sp, percentile(sl.delays, 99))
	}
	load := svgchart.BarChart{Title: "Packets per second received by galaxies and stars (fast preset)", YLabel: "datagrams per second", Categories: cats,
		Series: []svgchart.BarSeries{{Name: "galaxies, all", Values: gal}, {Name: "galaxies, requests", Values: galReq},
			{Name: "stars, all", Values: star}, {Name: "stars, requests", Values: starReq}}}
	delay := svgchart.BarChart{Title: "Request delay by strategy", YLabel: "ms", Categories: cats,
		Series: []svgchart.BarSeries{{Name: "fast: mean", Values: fm}, {Name: "fast: p99", Values: fp}, {Name: "slow: mean", Values: sm}, {Name: "slow: p99", Values: sp}}}
	return section{title: "2. Strategies side by side", markdown: b.String(),
		plots:    map[string][]byte{"strategies-load.svg": load.Render(), "strategies-delay.svg": delay.Render()},
		findings: r.findings(), notes: r.notes(), evicted: r.sum(func(x *strategyRun) uint64 { return x.evicted }),
		throttled: r.sum(func(x *strategyRun) uint64 { return x.throttled })}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// find returns the run of the strategy named name.
func find(runs []strategyRun, name string) *strategyRun {
	for i := range runs {
		if runs[i].strategy.Name == name {
			return &runs[i]
		}
	}
	return &strategyRun{window: 1}
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return f(a/b, 1) + "×"
}

func (r *strategiesResult) findings() []string {
	d, g := find(r.fast, strategyDesign().Name), find(r.fast, strategyToday().Name)
	ds, gs := find(r.slow, strategyDesign().Name), find(r.slow, strategyToday().Name)
	single := find(r.fast, strategyName(sim.Strategy{SingleRoute: true}))
	frat := find(r.fast, strategyName(sim.Strategy{Fraternize: true}))
	perReq := func(x *strategyRun) float64 { return float64(x.msgs) / float64(max(x.requests, 1)) }
	var out []string
	fewer := "fewer"
	if d.pps(lane.Galaxy) > g.pps(lane.Galaxy) {
		fewer = "more"
	}
	keep, all := g.ppsOf(lane.Galaxy, sim.TrafficKeepalive), g.pps(lane.Galaxy)
	share := "most"
	if keep <= all/2 {
		share = "a minority"
	}
	out = append(out, fmt.Sprintf("Galaxies receive %s %s packets under the sponsorship chain than under galaxy-only relaying (%s against %s pkt/s on the same workload); stars take the load instead (%s pkt/s, against %s). "+
		"Under galaxy-only %s of the galaxies' load is keepalives, since every ship pings its galaxy every %v (%s of their %s pkt/s; %s under the chain, where ships ping their own sponsors).",
		ratio(max(g.pps(lane.Galaxy), d.pps(lane.Galaxy)), min(g.pps(lane.Galaxy), d.pps(lane.Galaxy))), fewer, f(d.pps(lane.Galaxy), 0), f(g.pps(lane.Galaxy), 0), f(d.pps(lane.Star), 0), f(g.pps(lane.Star), 0),
		share, prose(endpoint.DefaultPingInterval), f(keep, 0), f(all, 0), f(d.ppsOf(lane.Galaxy, sim.TrafficKeepalive), 0)))
	out = append(out, fmt.Sprintf("Delay, mean / p99: %s / %s ms under the chain against %s / %s ms under galaxy-only on the fast preset, %s / %s against %s / %s ms on the slow one; %s datagrams per request against %s. The chain's first requests climb up to three relays before routes tighten.",
		f(mean(d.delays), 0), f(percentile(d.delays, 99), 0), f(mean(g.delays), 0), f(percentile(g.delays, 99), 0),
		f(mean(ds.delays), 0), f(percentile(ds.delays, 99), 0), f(mean(gs.delays), 0), f(percentile(gs.delays, 99), 0),
		f(perReq(d), 2), f(perReq(g), 2)))
	singleSlow := find(r.slow, strategyName(sim.Strategy{SingleRoute: true}))
	out = append(out, fmt.Sprintf("A single route (the tightest candidate alone, no copy on the known-good route) costs %s datagrams per request against dual send's %s, and galaxies and stars receive %s and %s pkt/s of requests against %s and %s; "+
		"but a hint that cannot be reached directly (a ship behind a NAT) loses requests until its probes fail: %s of requests re-sent (dual: %s), delay mean / p99 %s / %s ms against %s / %s on the fast preset, %s / %s against %s / %s on the slow one.",
		f(perReq(single), 2), f(perReq(d), 2), f(single.ppsOf(lane.Galaxy, sim.TrafficTracked), 0), f(single.ppsOf(lane.Star, sim.TrafficTracked), 0),
		f(d.ppsOf(lane.Galaxy, sim.TrafficTracked), 0), f(d.ppsOf(lane.Star, sim.TrafficTracked), 0),
		pct(single.retried, single.requests), pct(d.retried, d.requests),
		f(mean(single.delays), 0), f(percentile(single.delays, 99), 0), f(mean(d.delays), 0), f(percentile(d.delays, 99), 0),
		f(mean(singleSlow.delays), 0), f(percentile(singleSlow.delays, 99), 0), f(mean(ds.delays), 0), f(percentile(ds.delays, 99), 0)))
	out = append(out, fmt.Sprintf("Lifting the no-fraternization rule: %s datagrams per request and %s ms mean delay, against %s and %s with the rule; it cannot change galaxy-only (galaxies have no sponsors).",
		f(perReq(frat), 2), f(mean(frat.delays), 0), f(perReq(d), 2), f(mean(d.delays), 0)))
	return out
}

// notes are the strategies runs' observations on the code under test.
func (r *strategiesResult) notes() []string {
	var full, capped, unknown uint64
	for _, runs := range [][]strategyRun{r.fast, r.slow} {
		for i := range runs {
			full += runs[i].relayDrops[relay.DropRequestersFull]
			capped += runs[i].cappedForwards
			unknown += runs[i].relayDrops[relay.DropSponseeUnknown]
		}
	}
	d := find(r.fast, strategyDesign().Name)
	return []string{fmt.Sprintf("**Keepalive pings have a name per sponsee** (fixed): an endpoint pings its sponsor at `ping/<its @p>/<message number>` (each ping a message of its own, as real mesa names each ack apart), so a relay in front of the sponsor keeps a pending entry per pinger and passes every ping's ack back, where a shared `ping` name had every sponsee's ping aggregated under one entry capped at %d requesters. Over the strategies runs relays refused %d requests for a full pending entry (%d more past the cap were forwarded to refresh an entry upstream) and dropped %d for an unknown sponsee; keepalives are %s of the %s pkt/s stars receive under the design.",
		pit.DefaultMaxRequestersPerEntry, full, capped, unknown, f(d.ppsOf(lane.Star, sim.TrafficKeepalive), 0), f(d.pps(lane.Star), 0))}
}

// sum adds v over every run.
func (r *strategiesResult) sum(v func(*strategyRun) uint64) uint64 {
	var t uint64
	for i := range r.fast {
		t += v(&r.fast[i]) + v(&r.slow[i])
	}
	return t
}
