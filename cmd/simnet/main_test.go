package main

import (
	"bytes"
	"fmt"
	"github.com/urbit-relay/relay/relay/route"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
)

// shortParams are the CI run's settings: -short, with ships ships.
func shortParams(ships int) params {
	return params{ships: ships, seed: 1, nat: DefaultNAT, short: true}
}

// Test network sizes: as small as keeps every category populated, so that
// the package's tests stay well under a minute under -race.
const (
	testShips       = ShortShips
	testNotifyShips = 300
	testDocShips    = 100
)

// TestTighteningLosesNothing checks the seed's claims on a short run: routes
// to public ships go direct, within one round trip per relay on the way
// (in fact after the first: a relay's next-hop names the receiver's own
// lane, docs/arvo-lanes.md L3); ships behind a NAT
// stay behind their sponsor; and no request is lost or retransmitted while
// routes tighten, without link loss. With a single route (SingleRoute: the
// tightest candidate alone) routes tighten as fast, and a dead hint (a
// sponsee behind a NAT) delays requests until its probes fail, no longer.
func TestTighteningLosesNothing(t *testing.T) {
	t.Parallel()
	design, err := tightenOnce(shortParams(testShips), strategyDesign(), 0)
	if err != nil {
		t.Fatal(err)
	}
	today, err := tightenOnce(shortParams(testShips), strategyToday(), 0)
	if err != nil {
		t.Fatal(err)
	}
	single, err := tightenOnce(shortParams(testShips), strategySingle(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range categories() {
		d := design.cats[i]
		if d.pairs == 0 {
			t.Fatalf("%s: no pairs", c.name)
		}
		if d.retried != 0 || d.lost != 0 {
			t.Errorf("design, %s: %d retransmitted, %d lost while tightening without loss; want none", c.name, d.retried, d.lost)
		}
		if g := today.cats[i]; g.retried != 0 || g.lost != 0 {
			t.Errorf("galaxy-only, %s: %d retransmitted, %d lost without loss", c.name, g.retried, g.lost)
		}
		switch {
		case c.nat && d.wentDirect != 0:
			t.Errorf("%s: %d pairs went direct to a ship behind a NAT", c.name, d.wentDirect)
		case !c.nat && d.wentDirect != d.pairs:
			t.Errorf("%s: %d of %d pairs went direct; every public receiver should", c.name, d.wentDirect, d.pairs)
		}
		// A receiver at depth d is reached directly after at most d round
		// trips (the first relayed page names its own lane), even when
		// the looser route's copy of a page wins the race: the endpoint
		// takes the next-hop from the tighter route's late duplicate.
		if !c.nat && maxOf(d.roundTrips) > float64(c.class) {
			t.Errorf("%s: %v round trips to direct on average, up to %v; want at most %d", c.name, mean(d.roundTrips), maxOf(d.roundTrips), c.class)
		}
		// Galaxy-only: the galaxy knows every lane, one round trip.
		if !c.nat && maxOf(today.cats[i].roundTrips) > 1 {
			t.Errorf("galaxy-only, %s: %v round trips to direct, want at most 1", c.name, maxOf(today.cats[i].roundTrips))
		}
		s := single.cats[i]
		if s.lost != 0 {
			t.Errorf("single route, %s: %d requests lost", c.name, s.lost)
		}
		if !c.nat {
			if s.wentDirect != s.pairs || maxOf(s.roundTrips) > float64(c.class) {
				t.Errorf("single route, %s: %d of %d pairs went direct, after up to %v round trips; want all, within %d", c.name, s.wentDirect, s.pairs, maxOf(s.roundTrips), c.class)
			}
			if s.retried != 0 {
				t.Errorf("single route, %s: %d requests re-sent to public receivers", c.name, s.retried)
			}
			continue
		}
		// The sponsor's relay hands out the NATed receiver's lane as a
		// next-hop; tried alone, it loses requests until it fails
		// CandidateFailures probes, and is then held out.
		bound := float64(route.DefaultCandidateFailures)*ms(route.DefaultProbeTimeout) + ms(time.Second)
		if d := maxOf(flatten(s.delayByK)); d > bound {
			t.Errorf("single route, %s: a request took %.0f ms; a dead hint should cost at most %.0f", c.name, d, bound)
		}
		if s.wentDirect != 0 {
			t.Errorf("single route, %s: %d pairs went direct to a ship behind a NAT", c.name, s.wentDirect)
		}
	}
}

// TestStrategiesMoveLoadOffGalaxies checks that galaxy-only relaying puts
// more packets on galaxies than the sponsorship chain, on the same workload,
// and that no strategy loses requests without link loss.
func TestStrategiesMoveLoadOffGalaxies(t *testing.T) {
	t.Parallel()
	p := shortParams(testShips)
	d, err := strategyOnce(p, strategyDesign(), sim.Fast())
	if err != nil {
		t.Fatal(err)
	}
	g, err := strategyOnce(p, strategyToday(), sim.Fast())
	if err != nil {
		t.Fatal(err)
	}
	if d.requests != g.requests || d.requests == 0 {
		t.Fatalf("requests: design %d, galaxy-only %d; the workload must be the same", d.requests, g.requests)
	}
	if d.pps(lane.Galaxy) >= g.pps(lane.Galaxy) {
		t.Errorf("galaxies carry %.1f pkt/s under the chain, %.1f under galaxy-only; want fewer under the chain", d.pps(lane.Galaxy), g.pps(lane.Galaxy))
	}
	if d.ppsOf(lane.Galaxy, sim.TrafficTracked) >= g.ppsOf(lane.Galaxy, sim.TrafficTracked) {
		t.Errorf("request traffic at galaxies: %.1f pkt/s under the chain, %.1f under galaxy-only", d.ppsOf(lane.Galaxy, sim.TrafficTracked), g.ppsOf(lane.Galaxy, sim.TrafficTracked))
	}
	if d.lost != 0 || g.lost != 0 {
		t.Errorf("lost: design %d, galaxy-only %d; want none without loss", d.lost, g.lost)
	}
	// Determinism: the same seed, the same run.
	again, err := strategyOnce(p, strategyDesign(), sim.Fast())
	if err != nil {
		t.Fatal(err)
	}
	if again.msgs != d.msgs || again.classLoad != d.classLoad || len(again.delays) != len(d.delays) {
		t.Errorf("a second run of the same seed differs: %d/%d datagrams", again.msgs, d.msgs)
	}
	for i := range d.delays {
		if d.delays[i] != again.delays[i] {
			t.Fatalf("delay %d differs between runs: %v, %v", i, d.delays[i], again.delays[i])
		}
	}
}

// TestNotificationsBeatPolling checks that subscribers of a publisher running
// the notification protocol get values sooner, and for less idle traffic,
// than subscribers polling every second; and that polls left unanswered (the
// value not grown yet) do not cost the publisher its lane at its sponsor's
// relay, which would drop requests as sponsee_unknown until its next ping.
func TestNotificationsBeatPolling(t *testing.T) {
	t.Parallel()
	p := shortParams(testNotifyShips)
	note, err := pollOnce(p, followMode{name: "n", interval: endpoint.DefaultRetryInterval, subscribe: true, signed: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	poll, err := pollOnce(p, followMode{name: "p", interval: endpoint.DefaultRetryInterval}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if note.undelivered != 0 || poll.undelivered != 0 {
		t.Errorf("undelivered: notifications %d, polling %d", note.undelivered, poll.undelivered)
	}
	if delivered := len(note.firstDelay) + len(note.laterDelay); note.notified != delivered {
		t.Errorf("%d of %d values came by notification", note.notified, delivered)
	}
	if mean(note.laterDelay) >= mean(poll.laterDelay) {
		t.Errorf("delivery: notifications %.0f ms, polling %.0f ms", mean(note.laterDelay), mean(poll.laterDelay))
	}
	if note.idleLater >= poll.idleLater {
		t.Errorf("idle datagrams per subscriber per minute: notifications %.1f, polling %.1f", note.idleLater, poll.idleLater)
	}
	if note.sponseeUnknown != 0 || poll.sponseeUnknown != 0 {
		t.Errorf("sponsee_unknown drops: notifications %d, polling %d; a relay must keep the lane its sponsee pings from", note.sponseeUnknown, poll.sponseeUnknown)
	}
}

// TestChurnRecovers checks that a ship whose lane changes is reachable again
// within a ping interval and that a galaxy restart does not disturb the
// design's tightened routes.
func TestChurnRecovers(t *testing.T) {
	t.Parallel()
	p := shortParams(testShips)
	sc := scenarios()
	const slack = 5                 // seconds beyond the ping interval: probe timeouts and round trips
	for _, i := range []int{0, 1} { // NAT rebinding, address change
		r, err := churnOnce(p, sc[i], strategyDesign())
		if err != nil {
			t.Fatal(err)
		}
		if r.rcvrs == 0 || r.worst() > endpoint.DefaultPingInterval.Seconds()+slack {
			t.Errorf("%s: %d receivers, worst recovery %.1f s; want within a ping interval", sc[i].name, r.rcvrs, r.worst())
		}
		if r.lost != 0 || r.lostPre != 0 {
			t.Errorf("%s: %d requests lost (%d before the churn)", sc[i].name, r.lost, r.lostPre)
		}
	}
	r, err := churnOnce(p, sc[3], strategyDesign()) // galaxy relay restart
	if err != nil {
		t.Fatal(err)
	}
	if r.rcvrs == 0 || r.worst() > 3 {
		t.Errorf("galaxy restart under the design: worst recovery %.1f s; tightened routes should not notice", r.worst())
	}
}

// TestDownload checks the bulk download on a short run: every fragment
// arrives in every variant; from a publisher behind a NAT every page comes
// through a relay, from a public one (after the first round trips) almost
// every page comes straight from it; without the amplification budget no
// page is refused and every fragment is answered at the first ask; and a
// stop-and-wait download from a public publisher, whose pages are one at a
// time, is answered at the first ask with the budget on too.
func TestDownload(t *testing.T) {
	t.Parallel()
	p := shortParams(testShips)
	p.fragments = 200
	r, err := runDownload(p)
	if err != nil {
		t.Fatal(err)
	}
	for wi, w := range downloadWindows() {
		for vi, v := range dlVariants() {
			d := r.run(wi, vi)
			name := fmt.Sprintf("window %d, %s", w, v.name)
			if d.pairs == 0 || d.got != d.pairs*p.fragments || d.unfinished() != 0 {
				t.Errorf("%s: %d of %d fragments over %d downloads, %d unfinished", name, d.got, d.pairs*p.fragments, d.pairs, d.unfinished())
			}
			if v.nat && d.direct != 0 {
				t.Errorf("%s: %d pages came straight from a publisher behind a NAT", name, d.direct)
			}
			if !v.nat && d.direct <= d.viaRelay {
				t.Errorf("%s: %d pages direct, %d through relays; the route should tighten to the publisher", name, d.direct, d.viaRelay)
			}
			if v.budgetOff && (d.throttled != 0 || d.firstTry != d.got) {
				t.Errorf("%s: %d pages refused, %d of %d fragments at the first try", name, d.throttled, d.firstTry, d.got)
			}
			if d.firstTry < d.got && d.throttled == 0 {
				t.Errorf("%s: %d fragments re-sent without loss or a refused page", name, d.got-d.firstTry)
			}
		}
		if w == 1 {
			if d := r.run(wi, dlDirect); d.firstTry != d.got {
				t.Errorf("window 1, direct: %d of %d fragments at the first try", d.firstTry, d.got)
			}
		}
	}
}

// TestRunWritesDocument runs the command end to end on a tiny network and
// checks that it writes the document and every plot it links.
func TestRunWritesDocument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-short", "-ships", strconv.Itoa(testDocShips), "-out", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	doc, err := os.ReadFile(filepath.Join(dir, "simulation.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"## Headline findings", "## 1. Tightening", "## 2. Strategies", "## 3. Notifications", "## 4. Churn", "## 5. Bulk download", "## The model"} {
		if !bytes.Contains(doc, []byte(title)) {
			t.Errorf("document lacks %q", title)
		}
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if i := strings.Index(line, "](simulation/"); i >= 0 {
			name := line[i+2 : strings.Index(line[i:], ")")+i]
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("the document links %s: %v", name, err)
			}
		}
	}
	if err := run([]string{"-experiment", "nonsense", "-out", dir}, &stdout, &stderr); err == nil {
		t.Error("an unknown experiment was accepted")
	}
}

// TestStockExperiment checks the stock experiment's claims on a short run:
// with stock arvo requesters today's network loses nothing and answers
// public receivers directly after one round trip; relays at galaxies and
// stars leave the galaxies' load where it was (stock arvo asks the galaxy
// and STUNs it), where the endpoint moves the load to stars (the short run
// is short, and star relays keep their stock sponsees' lanes anyway, pinned by the star's acks: see
// sim.TestStockNetwork); the proposed
// arvo changes take the requests off the galaxies and lose nothing.
func TestStockExperiment(t *testing.T) {
	t.Parallel()
	r, err := runStock(shortParams(testShips))
	if err != nil {
		t.Fatal(err)
	}
	today := &r.load[depToday]
	if today.lost != 0 || today.requests == 0 {
		t.Errorf("today, stock arvo: %d of %d requests lost", today.lost, today.requests)
	}
	for _, c := range []int{catStar, catPlanet, catMoon} {
		tr := r.tighten[depToday].cats[c]
		if tr.pairs > 0 && (tr.wentDirect != tr.pairs || maxOf(tr.roundTrips) != 1) {
			t.Errorf("today, stock arvo, %s: %d of %d pairs direct, round trips %v; want all after one", categories()[c].name, tr.wentDirect, tr.pairs, tr.roundTrips)
		}
	}
	cs, ce, cp := &r.load[depChainStock], &r.load[depChainEndpoint], &r.load[depChainProposed]
	if cs.pps(lane.Galaxy) < 2*ce.pps(lane.Galaxy) {
		t.Errorf("relays at galaxies and stars: galaxies %.1f pkt/s with stock arvo, %.1f with the endpoint; want stock arvo's at least twice", cs.pps(lane.Galaxy), ce.pps(lane.Galaxy))
	}
	if cp.lost != 0 || cp.unknown() != 0 || cp.ppsOf(lane.Galaxy, sim.TrafficTracked) >= cs.ppsOf(lane.Galaxy, sim.TrafficTracked) {
		t.Errorf("proposal: %d lost, %d sponsee unknown, %.1f request pkt/s at galaxies (stock arvo %.1f)", cp.lost, cp.unknown(), cp.ppsOf(lane.Galaxy, sim.TrafficTracked), cs.ppsOf(lane.Galaxy, sim.TrafficTracked))
	}
	if r.idle[depChainStock].stock.LateRelayed == 0 {
		t.Error("idle pairs: no relayed copy raced a direct one")
	}
}
