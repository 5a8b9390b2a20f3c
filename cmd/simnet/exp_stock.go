package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
)

const (
	// IdleGap is the pause between a pair's requests in the stock
	// experiment's idle runs: past sim.ArvoDeadAfter, so that stock arvo
	// judges a peer with a direct lane dead and adds its galaxy back
	// (+make-lanes), and relayed copies of the answer race the direct one.
	IdleGap = 35 * time.Second
	// IdleRequests is how many requests each idle pair makes.
	IdleRequests = 5
)

// deployment is one row of the stock experiment: where relays run (or
// none) and which requester model the ships run.
type deployment struct {
	where string
	st    sim.Strategy
}

const (
	whereToday  = "today: vere galaxies forwarding one hop, no relay"
	whereGalaxy = "relays at galaxies"
	whereChain  = "relays at galaxies and stars (and planets with moons)"
)

// Rows of the stock experiment, in stockResult's slices.
const (
	depToday = iota
	depGalaxyStock
	depChainStock
	depGalaxyEndpoint
	depChainEndpoint
	depChainProposed
)

// deployments are the stock experiment's runs: today's network and the two
// relay deployments with stock ships, the same two with the project's
// endpoint, and the relays at galaxies and stars with the arvo changes of
// the proposal.
func deployments() []deployment {
	model := func(name string, rq sim.RequesterModel, st sim.Strategy) sim.Strategy {
		st.Name, st.Requester = name, rq
		return st
	}
	const stock, endpoint, proposed = "stock arvo", "endpoint (dual send)", "stock vere, arvo as proposed"
	return []deployment{
		depToday:          {whereToday, model(stock, sim.RequesterStock, sim.Strategy{VereGalaxies: true})},
		depGalaxyStock:    {whereGalaxy, model(stock, sim.RequesterStock, sim.Strategy{GalaxyOnly: true})},
		depChainStock:     {whereChain, model(stock, sim.RequesterStock, sim.Strategy{})},
		depGalaxyEndpoint: {whereGalaxy, model(endpoint, sim.RequesterEndpoint, strategyToday())},
		depChainEndpoint:  {whereChain, model(endpoint, sim.RequesterEndpoint, strategyDesign())},
		depChainProposed:  {whereChain, model(proposed, sim.RequesterProposed, sim.Strategy{})},
	}
}

type stockResult struct {
	deps    []deployment
	tighten []tightenRun  // Tightening pairs, 1 s apart
	idle    []tightenRun  // the same pairs, IdleGap apart, TightenLoss on every link
	load    []strategyRun // the Strategies workload, fast preset
}

func runStock(p params) (*stockResult, error) {
	deps := deployments()
	r := &stockResult{deps: deps, tighten: make([]tightenRun, len(deps)), idle: make([]tightenRun, len(deps)), load: make([]strategyRun, len(deps))}
	var jobs []func() error
	for i, d := range deps {
		jobs = append(jobs, func() error {
			t, err := tightenOnce(p, d.st, 0)
			r.tighten[i] = t
			return err
		}, func() error {
			s, err := strategyOnce(p, d.st, sim.Fast())
			r.load[i] = s
			return err
		})
		if d.st.Requester != sim.RequesterEndpoint {
			jobs = append(jobs, func() error {
				t, err := tightenWith(p, d.st, TightenLoss, IdleGap, IdleRequests)
				r.idle[i] = t
				return err
			})
		}
	}
	return r, parallel(p.workers, jobs)
}

// Receiver categories (categories()).
const catStar, catPlanet, catMoon = 1, 2, 4

// rtDirect formats the mean round trips to direct of run's receivers of
// category c, with the share of pairs that went direct.
func rtDirect(run tightenRun, c int) string {
	cr := run.cats[c]
	if cr.pairs == 0 {
		return "–"
	}
	return f(mean(cr.roundTrips), 1) + " (" + pct(cr.wentDirect, cr.pairs) + ")"
}

func (r *strategyRun) perRequest() float64 { return float64(r.msgs) / float64(r.requests) }

func (r *strategyRun) unknown() uint64 { return r.relayDrops[relay.DropSponseeUnknown] }

func (r *stockResult) section() section {
	var b strings.Builder
	b.WriteString("What deploying the relay buys the network as it is, whose ships run stock arvo and vere. Every row names the **requester model** its figures assume: *stock arvo* is `sim.RequesterStock`, the rules of stock arvo and vere listed below, each cited; *endpoint* is the project's `endpoint.Core` (dual send, a ping to its own sponsor every 25 s), the model of every other section of this file; *stock vere, arvo as proposed* is the proposal below. " +
		"*Today* has no relay anywhere: galaxies forward as stock vere does (`sim.Strategy.VereGalaxies`). Load, delay, loss and datagrams come from the *Strategies* workload (fast preset, no link loss); *round trips to direct* from the *Tightening* pairs (10 requests 1 s apart, public receivers; in brackets the share of pairs that went direct). " +
		"*Sponsee unknown* counts requests relays dropped because the receiver was their sponsee and its lane unknown.\n\n")
	t := table{head: []string{"deployment", "requester model", "galaxies pkt/s (requests + keepalive)", "stars pkt/s (requests + keepalive)", "delay mean / p99", "round trips to direct: star / planet / moon", "requests lost", "sponsee unknown", "datagrams/request"}}
	for i, d := range r.deps {
		l, tr := &r.load[i], r.tighten[i]
		t.add(d.where, "**"+d.st.Name+"**",
			fmt.Sprintf("%s (%s + %s)", f(l.pps(lane.Galaxy), 0), f(l.ppsOf(lane.Galaxy, sim.TrafficTracked), 0), f(l.ppsOf(lane.Galaxy, sim.TrafficKeepalive), 0)),
			fmt.Sprintf("%s (%s + %s)", f(l.pps(lane.Star), 0), f(l.ppsOf(lane.Star, sim.TrafficTracked), 0), f(l.ppsOf(lane.Star, sim.TrafficKeepalive), 0)),
			f(mean(l.delays), 0)+" / "+f(percentile(l.delays, 99), 0)+" ms",
			rtDirect(tr, catStar)+" / "+rtDirect(tr, catPlanet)+" / "+rtDirect(tr, catMoon),
			fmt.Sprintf("%d of %d", l.lost, l.requests), fmt.Sprint(l.unknown()), f(l.perRequest(), 2))
	}
	b.WriteString(t.String())

	fmt.Fprintf(&b, "\n**Next-hops and stock arvo.** Stock arvo stores a page's next-hop as the peer's lane (`+ev-update-lane`), and over a direct lane it holds it keeps the direct one only if the next-hop is that same lane: any other next-hop replaces it (\"otherwise accept and update indirect route\"). "+
		"So a relay writes as next-hop only the publisher's own lane (`relay.nextHopFor`): where its route table places the publisher (pinned, the lane a hop-0 page came from, or proven and fresh), else the next-hop a relayed page carries (the forwarder below heard the page at hop 0 and named that lane, as vere's `_mesa_hear_page` does), and a forwarder's lane only for a relayed page that carries none (the publisher's lane unknown below: private); a star relay gives the galaxy relay above it the publisher's lane to hand on. "+
		"A stock requester receives such a page while it holds a direct lane only when it has also asked the galaxy: when the peer was silent for %v (`+make-lanes`: is-peer-dead), or its lane is indirect. vere hands arvo only the first copy of an answer (`_mesa_hear_page` deletes the request with it), so the relayed copy un-tightens the requester only when it beats the direct one, which in these runs it does only if the direct copy is lost. "+
		"The pairs below ask %d times, %v apart (past %v, so every request after the first goes to the direct lane and the galaxy), with %.0f %% loss on every link: *late relayed copies* are the relayed copies vere dropped, *would un-tighten* those of them whose next-hop differs from the direct lane arvo then held, *un-tightened* the pages that did replace a direct lane; *second copies* every copy vere dropped (relayed or not), the second answer that a request arvo sent to two lanes brings back.\n\n",
		prose(sim.ArvoDeadAfter), IdleRequests, prose(IdleGap), prose(sim.ArvoDeadAfter), 100*TightenLoss)
	nt := table{head: []string{"deployment", "requester model", "requests", "second copies", "late relayed copies", "would un-tighten", "un-tightened", "lost"}}
	for i, d := range r.deps {
		if d.st.Requester == sim.RequesterEndpoint {
			continue
		}
		ir := r.idle[i]
		lost := 0
		for _, c := range ir.cats {
			lost += c.lost
		}
		nt.add(d.where, d.st.Name, fmt.Sprint(totalRequests(ir)), fmt.Sprint(ir.stock.LateCopies), fmt.Sprint(ir.stock.LateRelayed), fmt.Sprint(ir.stock.LateWouldUntighten), fmt.Sprint(ir.stock.Untightened), fmt.Sprint(lost))
	}
	b.WriteString(nt.String())
	fmt.Fprintf(&b, "\n**The copies arvo sends to two lanes.** A request `+make-lanes` sends to `[lane, galaxy]` reaches the publisher twice, once straight and once through the galaxy (and the star's relay), and the publisher answers each (vere's `_mesa_hear_peek` answers every peek); the requester's vere hands arvo the first answer and drops the other (*second copies*). The two copies meet only at the publisher: a relay sees the galaxy's copy alone, and a mesa request names no requester beyond its lane, so a relay cannot tell the second copy of one ship's request from another ship's request for the same name, which it must answer. What a relay does aggregate is every copy that does reach it: vere's re-sends of one request (every 1 s, 9 times) and other ships' requests for the same name join one pending entry and are forwarded once per suppression window. With relays at galaxies and stars the requesters drop %d second copies in %d requests, against %d today: the relays add none. Only arvo sends them (and they are what makes a dead direct lane cost nothing); no change proposed below removes them.\n",
		r.idle[depChainStock].stock.LateCopies, totalRequests(r.idle[depChainStock]), r.idle[depToday].stock.LateCopies)
	b.WriteString("\n" + stockRules)
	b.WriteString("\n" + r.proposal())
	return section{title: "0. Stock arvo requesters", markdown: b.String(), findings: r.findings(), stock: true}
}

// totalRequests is the requests of all of run's pairs.
func totalRequests(run tightenRun) int {
	n := 0
	for _, c := range run.cats {
		n += c.requests
	}
	return n
}

// stockLimits is what the stock model leaves out (the document's limits).
const stockLimits = "The stock model (*0. Stock arvo requesters*) makes peeks only, one fragment each: no %plea flows and their acks, no multi-fragment messages; ping acks are not read; vere's STUN client is taken to succeed at once when the galaxy answers (no STUN_TRYING back-off); relay hosts (galaxies, stars and planets that relay) keep the endpoint's pings in every model, and in the runs without relays stars and planets with moons are stock ships. Hosts (galaxies, stars, planets with moons) boot at once in the stock runs, so that boot pings find their sponsors up; ships know their sponsors' lanes and resolve galaxies, as in the endpoint runs."

// stockRules lists the rules sim.RequesterStock models, each with its
// source.
const stockRules = `**The rules modelled** (` + "`cmd/simnet/internal/sim/stock.go`" + `; urbit/urbit ` + "`pkg/arvo/sys/vane/ames.hoon`" + ` at 000ecc3f8426, ` + "`pkg/arvo/app/ping.hoon`" + `; urbit/vere 859fd5c65c ` + "`pkg/vere/io/mesa.c`, `io/ames.c`" + `):

| rule | source | what the model does |
|---|---|---|
| a page sets the peer's lane | ` + "`+ev-update-lane`" + ` (from ` + "`hear-page`" + ` with the page's hop and next-hop; from ` + "`hear-poke`" + ` with no next-hop) | hop 0: the lane it came from, direct; relayed without next-hop: unchanged; relayed with a next-hop: ` + "`[hop next]`" + `, but over a direct lane only if the next-hop differs from it; a galaxy's lane never changes |
| the lanes of a request | ` + "`+make-lanes`, `+get-sponsor`" + ` ("XX only galaxy") | no lane: the peer's galaxy; indirect lane: the lane and the galaxy; direct lane: the lane alone, and the galaxy too once the peer is dead |
| a peer is dead | ` + "`is-peer-dead`" + ` in ` + "`+make-lanes`" + `; last contact set by ` + "`+ev-update-qos %live`" + ` on every page and poke heard | not a galaxy, and ` + "`%dead`" + ` or 30 s since the last contact (as docs/arvo-lanes.md L8 reads ` + "`+is-peer-dead`" + `; the same test as ` + "`+is-route-dead`" + `) |
| re-sends | ` + "`_mesa_ef_send`, `_mesa_resend_timer_cb`" + ` | vere sends a %push to its lanes, then every 1 s, 9 times, to the same lanes; a %push for a name still pending is dropped; then vere forgets the request |
| arvo's re-push | ` + "`+sy-wake`" + ` on ` + "`/mesa/retry`" + `, ` + "`+sy-prod`" + ` | every 2 min (phase per ship) every pending request is pushed again with fresh ` + "`make-lanes`" + ` |
| one copy reaches arvo | ` + "`_mesa_hear_page`" + ` ("early deletion") | the first page for a pending name is handed to arvo (` + "`%heer`" + `) and the request deleted; later copies are dropped |
| keepalive | ` + "`io/ames.c _stun_timer_cb`" + ` (STUN_KEEPALIVE, 25 s); ` + "`app/ping.hoon`" + ` (` + "`%nat`" + ` every 25 s until ` + "`+sy-stun`" + ` stops it; ` + "`%once`" + ` on a new lane) | a STUN request to the galaxy every 25 s; pings (pokes, each re-sent until acked as any %plea is) to every ship of the sponsorship chain every 25 s until the first STUN answer, then only when STUN shows a new lane |
| a stock galaxy forwards | ` + "`_mesa_forward_request`, `_mesa_add_lane_to_pit`, `_mesa_hear_page`, `_mesa_add_hop`" + `; lanes from ` + "`hear-poke`" + ` and ` + "`%nail`" + ` | a peek for a ship under it goes to the lane learned from that ship's pings (dropped if none), every copy; the page goes back to every requester with the hop count raised and the lane it came from as next-hop; pending entries last 20 s |

Publishing is the endpoint's in every model: a stock ship answers a peek with a hop-0 page to the lane the peek came from, as ` + "`_mesa_hear_peek`" + ` does. The rules agree one by one with docs/arvo-lanes.md (L1-L8, P1-P3, R1-R3, K1-K2, F1), written apart for vtool's stub kernel. Arms are cited by name; docs/arvo-lanes.md gives each one's line at 000ecc3f. vere's functions are cited as they are in ` + "`../shared/vere/src`" + `.
`

// proposal is the section's proposal for arvo, with its measured gain.
func (r *stockResult) proposal() string {
	st, pr, ep := &r.load[depChainStock], &r.load[depChainProposed], &r.load[depChainEndpoint]
	pi, si := r.idle[depChainProposed], r.idle[depChainStock]
	var b strings.Builder
	b.WriteString("**Proposal: three changes in arvo.** With stock ships, relays at stars cannot take the galaxies' load: `+make-lanes` asks the galaxy and never the star (`+get-sponsor`: \"XX only galaxy\"), and once STUN works a ship pings nobody, so a star relay knows its sponsees' lanes only from their boot pings (the star behind it acks them, which pins the lanes: relay/vouch.go) and holds no pinhole to those behind a NAT. Three changes, all in arvo, run as `sim.RequesterProposed`:\n\n")
	b.WriteString("1. `+get-sponsor` returns the peer's own sponsor (the head of its `saxo`), not its galaxy, so a request goes to the relay nearest the peer;\n")
	b.WriteString("2. `app/ping.hoon` keeps pinging our own sponsor every 25 s when STUN works (`%off` pings nobody today), so a relay there knows our lane and keeps our pinhole;\n")
	b.WriteString("3. `+ev-update-lane` keeps a direct lane over a relayed next-hop while the peer is live (not `is-peer-dead`), and takes the next-hop only once it is dead.\n\n")
	fmt.Fprintf(&b, "Measured with relays at galaxies and stars: galaxies receive %s requests pkt/s (stock arvo: %s; endpoint: %s) and %s pkt/s in all (%s; %s), requests lost %d (%d; %d), relays' sponsee-unknown drops %d (%d), %s datagrams per request (%s; %s); in the idle pairs %d relayed copies would have un-tightened a direct lane (stock arvo: %d). "+
		"The galaxies' keepalive load stays (%s pkt/s): it is vere's STUN to the galaxy (`io/ames.c`: the galaxy's lane), which only a change in vere moves.\n",
		f(pr.ppsOf(lane.Galaxy, sim.TrafficTracked), 0), f(st.ppsOf(lane.Galaxy, sim.TrafficTracked), 0), f(ep.ppsOf(lane.Galaxy, sim.TrafficTracked), 0),
		f(pr.pps(lane.Galaxy), 0), f(st.pps(lane.Galaxy), 0), f(ep.pps(lane.Galaxy), 0),
		pr.lost, st.lost, ep.lost, pr.unknown(), st.unknown(), f(pr.perRequest(), 2), f(st.perRequest(), 2), f(ep.perRequest(), 2),
		pi.stock.LateWouldUntighten, si.stock.LateWouldUntighten, f(pr.ppsOf(lane.Galaxy, sim.TrafficKeepalive), 0))
	return b.String()
}

func (r *stockResult) findings() []string {
	row := func(i int) string {
		l, tr := &r.load[i], r.tighten[i]
		return fmt.Sprintf("galaxies receive %s pkt/s (%s of requests), stars %s; delay %s / %s ms mean / p99; public stars, planets and moons answer directly after %s, %s and %s round trips; %d of %d requests lost; %s datagrams per request",
			f(l.pps(lane.Galaxy), 0), f(l.ppsOf(lane.Galaxy, sim.TrafficTracked), 0), f(l.pps(lane.Star), 0), f(mean(l.delays), 0), f(percentile(l.delays, 99), 0),
			f(mean(tr.cats[catStar].roundTrips), 1), f(mean(tr.cats[catPlanet].roundTrips), 1), f(mean(tr.cats[catMoon].roundTrips), 1),
			l.lost, l.requests, f(l.perRequest(), 2))
	}
	cs, ce := &r.load[depChainStock], &r.load[depChainEndpoint]
	idle := r.idle[depChainStock]
	return []string{
		"**Today** (stock vere galaxies forwarding one hop, no relay), **stock arvo** requesters: " + row(depToday) + ".",
		"**Relays at galaxies**, **stock arvo**: " + row(depGalaxyStock) + ". A relay at a galaxy forwards as vere's galaxy does for stock ships and writes the same next-hop, so it buys nothing measurable here (**endpoint**: " + row(depGalaxyEndpoint) + ").",
		fmt.Sprintf("**Relays at galaxies and stars**, **stock arvo**: %s. Galaxies are not lighter (%s pkt/s against %s with the **endpoint**, whose routes climb the chain): stock arvo sends every request not yet direct to the peer's galaxy, never to a star (`+make-lanes`, `+get-sponsor`: \"only galaxy\"), and stock vere STUNs its galaxy every 25 s while pinging nobody once STUN works, so a star relay knows its sponsees only from their boot pings, which the star behind it acked and so pinned (relay/vouch.go; %d requests dropped for an unknown sponsee, %d lost). Routes still tighten in about one round trip, not one relay per round trip: the galaxy's page names the receiver, whose pings reached the galaxy relay at boot.",
			row(depChainStock), f(cs.pps(lane.Galaxy), 0), f(ce.pps(lane.Galaxy), 0), cs.unknown(), cs.lost),
		fmt.Sprintf("**Next-hop finding** (stock arvo, relays at galaxies and stars): stock arvo replaces a direct lane with any next-hop that differs from it (`+ev-update-lane`, ames.hoon line 9099 at 000ecc3f), so a relay's next-hop names only the publisher's own lane, never a relay's (a star relay hands its galaxy relay the publisher's lane to pass on). With requests %v apart (the galaxy asked again) and %.0f %% loss, %d of %d late relayed copies named a lane other than the direct one held, and %d un-tightened its requester (vere hands arvo the first copy only); before this rule, when a galaxy relay named the star relay the page came through (the seed's step), 13 of 1127 would have and 1 did. The seed's one-relay-per-round-trip step is given up for it: a requester of a ship behind a NAT is told the ship's own lane, which it cannot reach, and keeps its galaxy beside it (stock arvo asks the galaxy anyway, `+make-lanes`); the proposal below moves that load to the sponsor. What the step was worth to the project's own endpoint (seed 1, 10000 ships, measured before the rule at 70a1b65 and after): galaxies under the chain 71 → 106 pkt/s, datagrams per request 3.68 → 3.81, requests to ships behind a NAT arriving after 1.0 → 2.0 (planets) and 3.0 (moons) hops, a galaxy's one-minute outage 0 → 657 requests lost, a 2000-fragment download from a ship behind a NAT 14.9 → 21.4 s. Change 3 of the proposal (a live direct lane kept over a next-hop) would make a relay's lane harmless to a requester again, and the relay could then name the relay nearest a ship behind a NAT, winning these back.",
			prose(IdleGap), 100*TightenLoss, idle.stock.LateWouldUntighten, idle.stock.LateRelayed, idle.stock.Untightened),
		"**Proposal**, three changes in arvo (requests to the peer's sponsor, pings to our own sponsor, a live direct lane kept), relays at galaxies and stars: " + row(depChainProposed) + ". See *0. Stock arvo requesters*.",
	}
}
