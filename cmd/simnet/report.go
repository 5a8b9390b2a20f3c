package main

import (
	"fmt"
	"github.com/urbit-relay/relay/relay/route"
	"math/rand/v2"
	"strings"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/relay/pit"
)

// LatencySamples is how many random pairs of ships the document's latency
// figures are computed from.
const LatencySamples = 100_000

// latencySummary describes the link latencies of preset m on p's network.
func latencySummary(p params, m sim.LatencyModel) (string, error) {
	cfg := p.config(strategyDesign(), m)
	n, err := sim.New(cfg)
	if err != nil {
		return "", err
	}
	rng := rand.New(rand.NewPCG(p.seed, 0x6c6174))
	k := len(n.Ships())
	xs := make([]float64, LatencySamples)
	for i := range xs {
		a, b := rng.IntN(k), rng.IntN(k)
		xs[i] = ms(n.LinkLatency(a, b))
	}
	return fmt.Sprintf("%s: mean %s ms, median %s ms, p1 %s ms, p99 %s ms", m.Name, f(mean(xs), 0), f(percentile(xs, 50), 0),
		f(percentile(xs, 1), 0), f(percentile(xs, 99), 0)), nil
}

// document assembles docs/simulation.md from the experiments' sections.
func document(p params, secs []section) (string, error) {
	topo, err := topologySummary(p)
	if err != nil {
		return "", err
	}
	foot, err := footprint(p)
	if err != nil {
		return "", err
	}
	fast, err := latencySummary(p, sim.Fast())
	if err != nil {
		return "", err
	}
	slow, err := latencySummary(p, sim.Slow())
	if err != nil {
		return "", err
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# Simulation\n\n")
	w("`cmd/simnet` simulates an Urbit network in virtual time and measures what the relay design claims: that routes tighten, that nothing is lost on the way, that galaxies carry less, that notifications beat polling, how the network recovers from churn, and what a bulk download through relays costs under the amplification budget. " +
		"It runs the project's own decision code, not a model of it: every relay is a `relay.Relay` (`relay.New`, `Relay.Handle`) and every ship an `endpoint.Core`, exchanging real mesa datagrams. " +
		"Ships as the network has them, running stock arvo and vere, are a model: their requester and keepalive follow stock arvo's and vere's rules, cited one by one (`cmd/simnet/internal/sim/stock.go`, *0. Stock arvo requesters*), and every figure says which requester model it assumes. " +
		"This file and its plots are generated:\n\n")
	w("```sh\ngo run ./cmd/simnet -experiment all        # this file and docs/simulation/*.svg (a few minutes on 2 cores)\n" +
		"go run ./cmd/simnet -experiment churn -ships 2000 -seed 7   # one experiment: its section on stdout, its plots to -out\n" +
		"go run ./cmd/simnet -experiment download -fragments 500    # the bulk download, a smaller message\n" +
		"go test ./cmd/simnet/                      # the short version CI runs, with assertions\n```\n\n")
	w("| flag | default | meaning |\n|---|---|---|\n")
	w("| `-experiment` | `all` | `stock`, `tightening`, `strategies`, `notifications`, `churn`, `download`, or `all` (which also writes this file) |\n")
	w("| `-ships` | %d | ships in the network, galaxies included (%d with `-short`); the notifications experiment uses at least %d, to have %d subscribers |\n", DefaultShips, ShortShips, NotifyShips, NotifySubscribers)
	w("| `-seed` | 1 | the same seed gives the same results, to the datagram |\n")
	w("| `-out` | `docs` | where `simulation.md` and `simulation/*.svg` go |\n")
	w("| `-nat` | %.1f | share of planets and moons behind a NAT |\n", DefaultNAT)
	w("| `-short` | off | a small run (%d ships, fewer pairs and receivers, shorter windows), as in CI |\n", ShortShips)
	w("| `-fragments` | %d | fragments of the download experiment's message (%d with `-short`) |\n", DownloadFragments, DownloadFragmentsShort)
	w("| `-workers` | GOMAXPROCS | simulations run at once (each is single-threaded) |\n")
	w("| `-production-tables` | off | relays' tables at production's sizes (about 7 MiB a relay: use a small network), to check that the simulation's sizes change no figure |\n\n")
	w("This run: seed %d, %s.\n\n", p.seed, topo)

	w("## Headline findings\n\n")
	for _, stock := range []bool{true, false} {
		n := 0
		for _, s := range secs {
			if s.stock != stock {
				continue
			}
			if n == 0 && stock {
				w("### The network as it is: stock arvo ships\n\n")
				w("Every figure here says which requester model it assumes: **stock arvo** (ships running stock arvo and vere, `sim.RequesterStock`, the requesters the network has) or **endpoint** (the project's `endpoint.Core`); see *0. Stock arvo requesters*.\n\n")
			}
			if n == 0 && !stock {
				w("### The design with the project's endpoint\n\n")
				w("Every figure from here on assumes the **endpoint** requester model: every ship runs the project's `endpoint.Core` (dual send, a ping to its own sponsor every 25 s). Stock arvo ships behave otherwise; see above.\n\n")
			}
			for _, fd := range s.findings {
				w("* %s\n", fd)
				n++
			}
		}
		if n > 0 {
			w("\n")
		}
	}

	w("## The model\n\n")
	w("**Time.** One goroutine pops events from a priority queue ordered by time: datagram deliveries, endpoint timers (at `Core.NextDeadline`) and the workload's own steps. " +
		"A datagram's latency, jitter and loss are drawn from a hash of the seed, its lanes, its send time and its bytes, so a run depends only on the seed (ties in time are broken by the same hash). Independent runs (strategies, presets, scenarios) go in parallel, one per core.\n\n")
	w("**Ships.** Up to %d galaxies (one per %d ships in smaller networks); of the other ships %.0f %% are stars, %.0f %% moons and the rest planets, numbered so that each ship's default sponsor (`lane.Ship.Sponsor`: the low 8, 16 or 32 bits) is its parent in the tree: a star is g + 256k, a planet s + 65536j, a moon p + m·2³². "+
		"Stars are spread over galaxies and planets over stars by Zipf laws (exponents %.1f and %.1f), so a few stars sponsor thousands of planets and most a handful; moons sit %d to a planet on a few planets. "+
		"With the endpoint, every ship pings its sponsor every %v (`endpoint.DefaultPingInterval`), which is how relays learn their sponsees' lanes (a stock ship STUNs its galaxy instead, and pings its chain only until STUN works: *0. Stock arvo requesters*); relay operators also pin the lanes of the relays next to theirs in the tree (`relay.Config.Pinned`). "+
		"A ship knows its galaxy's and its sponsor's lanes and looks other galaxies up when it first needs them, as it would by DNS.\n\n",
		sim.MaxGalaxies, sim.ShipsPerGalaxy, 100*sim.StarFraction, 100*sim.MoonFraction, sim.StarSkew, sim.PlanetSkew, sim.MoonsPerSponsor, prose(endpoint.DefaultPingInterval))
	w("**Relays.** A ship that relays runs a `relay.Relay` on its public lane with its own `endpoint.Core` behind it (`relay.Config.ShipLane`), one host; the loopback between them (%v) is not network traffic. "+
		"Relays run at galaxies, stars and planets that sponsor moons (the sponsorship chain), or at galaxies only. A ship's sponsor's relay is where its pings go.\n\n", prose(sim.LoopbackLatency))
	w("**Addresses.** Every host has a public IPv4 address of its own, in a /16 of its own (drawn from the seed out of the public unicast space, as `lane.PublicAddr` defines it), its relay on port %d and, on a relay host, its ship on port %d of the same address; nothing touches a real network. "+
		"So what relays key by address or by network (the amplification budget's per-address and per-network slots, the pending table's and the route table's per-source shares) sees one host each, as in production, and relays accept next-hops and targets on the public internet only, their production default.\n\n", sim.PublicPort, sim.ShipPort)
	w("**Links.** Each ship sits on a unit torus and has an access delay (exponential; a quarter as much for relay hosts, in data centres); a link's one-way latency is a share (%.0f %%) from the two access delays and the rest from the distance, scaled to the preset's mean, with per-datagram jitter, so a detour through a relay costs what it would on the Internet. "+
		"Presets, after the overlay measurements of the seed: %s; %s. Link loss is 0 unless a table says otherwise.\n\n", 100*sim.PresetAccessShare, fast, slow)
	w("**NAT.** A share of planets and moons (`-nat`) sit behind a port-restricted NAT: a datagram reaches one only from a lane it sent to within %v. Its pings keep its sponsor's pinhole open; a requester it never sent to cannot reach it directly. Relay hosts are public.\n\n", prose(sim.NATBindingTimeout))
	w("**Counting.** *Datagrams per request* counts every datagram that carried the request's name on any link: the request on each hop, dual sends, retransmissions, duplicates and pages. *Pkt/s carried by galaxies (stars)* is what the hosts of that class received from the network, relay and ship together. A request is *lost* if it is not answered within %v (the seed's bound, and the pending entries' lifetime); endpoints re-send every %v until then.\n\n", prose(RequestTimeout), prose(endpoint.DefaultRetryInterval))
	w("%s\n\n", tablesParagraph(p, foot))
	w("### Strategies\n\n")
	w("| strategy | relays at | route choice (`route.Config`, the same in relays and endpoints) | fraternize (`relay.Config.Withheld` withholds none) |\n|---|---|---|---|\n")
	for _, st := range allStrategies() {
		where := "galaxies, stars, planets with moons"
		if st.GalaxyOnly {
			where = "galaxies"
		}
		choice := "dual send: the tightest known-good lane and the untried one just tighter"
		if st.SingleRoute {
			choice = "`SingleRoute`: the tightest candidate alone, proven or not"
		}
		if st.GalaxyOnly {
			choice += "; `GalaxyOnly`"
		}
		w("| %s | %s | %s | %v |\n", st.Name, where, choice, st.Fraternize)
	}
	w("\n**Galaxy-only** models directed messaging as Urbit runs it (UIP-0113): relays only at galaxies, one relay hop. Every ship's sponsor is overridden to its galaxy (`lane.Sponsors`) in relays and endpoints alike, so ships ping their galaxy, the galaxy learns every lane under it, and requests go requester → galaxy → receiver; the `galaxyOnly` rubric (`sim.Rubric`, `route.Config.Rubric`) is run too. "+
		"Next-hop hints stay on, as vere's galaxies always write the next-hop and Arvo takes it as a lane to try, so a public receiver is reached directly after one round trip. "+
		"Two differences from vere: a requester here sends on its galaxy and the direct lane until the direct lane answers, then on it alone until it misses two probes, where vere drops back to sending on both after 5 s without hearing the peer; and a pending entry here holds at most %d requesters (the design's cap), where vere's holds any number. "+
		"**Chain** is the design of UIP-0102 as built: relays at galaxies, stars and planets with moons, requests climbing the sponsorship chain, tightening to the receiver's own lane as soon as a relay names it (a next-hop names only the publisher's own lane: docs/arvo-lanes.md L3). "+
		"**Dual send** sends each request on the tightest known-good route and the one just tighter until the tighter answers (the seed's rubric); **single** is the simulator's `singleRoute` rubric (`route.Config.Rubric`), the optimistic alternative: each request goes on the tightest candidate alone, proven or not, so a hint is tried at once without a copy on the known-good route, and a dead one loses requests until it fails its probes and the route falls back. "+
		"**Fraternize** lifts the seed's rule that a relay gives none of its own sponsors a forwarder's lane as next-hop (the publisher's own lane they get in every strategy); it matters only where a relay's sponsor asks through it (a galaxy forwarding to its star) and the publisher's lane is unknown below, so it cannot change galaxy-only.\n\n", pit.DefaultMaxRequestersPerEntry)

	for _, s := range secs {
		w("## %s\n\n%s\n", s.title, s.markdown)
	}

	w("## Notes and limits\n\n")
	w("What the runs show about the code under test, beyond the experiments' questions:\n\n")
	for _, s := range secs {
		for _, n := range s.notes {
			w("* %s\n", n)
		}
	}
	w("* The endpoint's retry interval (%v) is shorter than a round trip through a full chain on the slow preset (three relays, eight legs of about 267 ms from a requester to a moon and back), so untightened requests there are sent twice or more; see the slow columns of *Strategies*.\n", prose(endpoint.DefaultRetryInterval))
	w("\nLimits of the model:\n\n")
	var evicted, throttled uint64
	for _, s := range secs {
		evicted += s.evicted
		throttled += s.throttled
	}
	w("* Not modelled: comets and escaped ships, galaxies moving (DNS), legacy ames traffic, CPU or bandwidth limits, and relays' own routing to each other beyond the sponsorship tree. A message larger than a packet appears only in *Bulk download*, as one request per fragment with a fixed window (no congestion control). Over the strategies and notifications runs the relays shed %d pending entries for room and refused %d pages for amplification.\n", evicted, throttled)
	w("* Relays are never NATed and never lose their lanes; planets that sponsor moons are public hosts that relay. The workload's requesters are planets and moons that do not relay (a relay host's own requests see a hop added by its relay).\n")
	w("* %s\n", stockLimits)
	w("* Relay cores take `route.DefaultProbeTimeout` (%v), `route.DefaultDirectLaneExpiry` (%v) and every other setting at its default, as `relay run` does, but for the table sizes of *Relays' tables* above.\n", prose(route.DefaultProbeTimeout), prose(route.DefaultDirectLaneExpiry))
	return b.String(), nil
}

// memory is what a network of p's size holds once built (sim.Footprint).
type memory struct {
	bytes  int64
	relays int
}

func footprint(p params) (memory, error) {
	b, r, err := sim.Footprint(p.config(strategyDesign(), sim.Fast()))
	return memory{bytes: b, relays: r}, err
}

// tablesParagraph is the model's paragraph on the relays' table sizes and
// the run's memory.
func tablesParagraph(p params, m memory) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Relays' tables.** Relays are `relay.New` on a `relay.Config` whose `amp.Config`, `DupConfig` and `pit.Config` are zero but for table sizes and seeds, so the production defaults apply (the amplification budget's off switch is used only where a table says so). "+
		"Production sizes a relay's tables for one relay per process: 16 pending-table shards; 64Ki slots each for the amplification budget's addresses and networks, the route table's lane clock and the legacy duplicate filter; 4,096 per-source counters in every route table, endpoints' too. That is about 7 MiB a relay. "+
		"The simulation used to take those sizes for all but the pending table and the per-address amplification slots: 4.3 MiB a relay, 7 GB for the 1,620 relays of a 10,000-ship network, and `-experiment all` peaked at 24.3 GB resident with one worker (two were killed for memory on a 23 GB machine). "+
		"It now sizes them for what a simulated relay holds: pending tables of production's capacity and shares in %d shard (each costs 36 KiB up front); the tables keyed by address (the amplification slots and the lane clock) of %d slots per sponsee of the relay, at least %d, so that an address rarely shares a slot with another the relay hears (one that does shares its budget with it and loses its last-heard time to it), but for the relays on the chain of a publisher an experiment concentrates on (the notifications publisher's star hears every subscriber), which keep production's sizes; %d per-source route counters (a source is refused a route only at 16,384, more routes than a simulated table holds); and %d slots of duplicate filter, which only legacy ames traffic touches. None of these changes a figure: `-short -ships 2000` gives the same tables with `-production-tables` as without. "+
		"Seeds (route and pending tables, endpoints) come from the run's seed; the amplification budget and the duplicate filter draw theirs from crypto/rand, which decides only which addresses share a slot. ",
		sim.PendingShards, sim.SlotsPerSponsee, sim.MinTableSlots, sim.RouteSourceSlots, sim.DupSlots)
	fmt.Fprintf(&b, "A network of this run's size takes %.0f MB once built, %.0f KiB a relay (the `relay.Relay` struct itself is about 200 KiB)", float64(m.bytes)/1e6, float64(m.bytes)/float64(max(m.relays, 1))/1024)
	if rss := peakRSS(); rss > 0 {
		fmt.Fprintf(&b, "; this run peaked at %.1f GB resident with %d workers", float64(rss)/1e9, p.workers)
	}
	b.WriteString(".")
	return b.String()
}
