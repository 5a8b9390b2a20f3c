package relay_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// Issue 28's loop row: four forged legacy packets teach three relays, with
// nothing configured that could loop, a planet's lane at the next relay,
// and a fourth, for the planet, enters the cycle forged from the last
// relay's lane, so that every lap comes back from the lane its first copy
// came from and looked like a retransmission: 161k-230k datagrams in 3 s,
// and the loop never ended. Two rules end it now, each shown alone:
//
//   - no relay learns a ship's lane at a lane configured as another ship's
//     (Relay.mayLearn): relays fronting galaxies know each other's lanes,
//     so the first three packets teach nothing and the fourth finds no
//     route;
//   - the duplicate filter forwards a same-lane copy at most once sooner
//     than DupMinResend after the last, and DupMaxCopies in all while its
//     record lives (DupConfig): where the relays' lanes are configured
//     nowhere (relays fronting stars), the cycle is learned, and the loop
//     ends on its second lap (fast laps) or within DupMaxCopies laps
//     (laps slower than DupMinResend).

// loopNet is a discrete-event network of relay cores: a datagram sent to
// a core's lane is handed to it after hop, as heard from the sender's
// lane; one sent anywhere else leaves the network. Sources can be forged
// (inject). It counts every datagram sent, injections included.
type loopNet struct {
	t     *testing.T
	hop   time.Duration
	now   time.Duration
	lanes []netip.AddrPort
	cores []*relay.Relay
	out   *relay.Reader
	queue []loopDatagram // in time order: each hop is the same delay
	sent  int
}

type loopDatagram struct {
	at       time.Duration
	from, to netip.AddrPort
	b        []byte
}

// newLoopNet makes three relays at 10.0.0.1-3:13337 fronting ships[i],
// each knowing the galaxy ~wes at 10.0.0.50:13337 and, with knowEachOther,
// the others' lanes as the galaxies they front.
func newLoopNet(t *testing.T, ships []string, knowEachOther bool, hop time.Duration) *loopNet {
	n := &loopNet{t: t, hop: hop, out: relay.NewReader(64)}
	for i := range ships {
		n.lanes = append(n.lanes, netip.MustParseAddrPort(fmt.Sprintf("10.0.0.%d:13337", i+1)))
	}
	for i := range ships {
		gal := map[lane.Ship]netip.AddrPort{ship(t, "~wes"): netip.MustParseAddrPort("10.0.0.50:13337")}
		if knowEachOther {
			for j, s := range ships {
				gal[ship(t, s)] = n.lanes[j]
			}
		}
		r, err := relay.New(relay.Config{HintNets: loopbackNets, Ship: ship(t, ships[i]),
			Self: []netip.AddrPort{n.lanes[i]}, Galaxies: gal})
		if err != nil {
			t.Fatal(err)
		}
		n.cores = append(n.cores, r)
	}
	return n
}

// inject sends b to lane to as from at the current time.
func (n *loopNet) inject(from, to netip.AddrPort, b []byte) {
	n.sent++
	n.queue = append(n.queue, loopDatagram{at: n.now + n.hop, from: from, to: to, b: append([]byte(nil), b...)})
}

// run delivers datagrams until the queue is empty or until is reached.
func (n *loopNet) run(until time.Duration) {
	for len(n.queue) > 0 && n.queue[0].at <= until {
		d := n.queue[0]
		n.queue = n.queue[1:]
		n.now = d.at
		i := slices.Index(n.lanes, d.to)
		if i < 0 {
			continue // left the network
		}
		buf := make([]byte, len(d.b), len(d.b)+relay.GrowRoom)
		copy(buf, d.b)
		n.out.Reset()
		n.cores[i].Handle(buf, d.from, n.now, n.out)
		for _, m := range n.out.Sends {
			n.inject(n.lanes[i], m.Addr, m.Buf[:m.N])
		}
	}
	n.now = max(n.now, until)
}

// forgeCycle plays issue 28's four packets: for each relay i, an
// unrelayed legacy packet from the planet ~dapnep-ronmyl to ~wes forged
// from relay i+1's lane (teaching relay i the planet "at" relay i+1), then
// one packet for the planet forged from the last relay's lane, sent to
// the first.
func (n *loopNet) forgeCycle(tag int) {
	k := len(n.lanes)
	for i := range n.lanes {
		n.inject(n.lanes[(i+1)%k], n.lanes[i], legacy(n.t, "~dapnep-ronmyl", "~wes", 100, tag+i))
	}
	n.run(n.now + time.Second)
	n.inject(n.lanes[k-1], n.lanes[0], legacy(n.t, "~sampel-palnet", "~dapnep-ronmyl", 200, tag+k))
}

func TestLegacyForgedCycleEnds(t *testing.T) {
	for _, c := range []struct {
		name          string
		ships         []string
		knowEachOther bool
		hop           time.Duration // one hop's delay: a lap is three
		maxSent       int
	}{
		// Galaxies' relays: nothing is learned at another relay's lane;
		// the four packets and the three forwards of the first three to
		// ~wes's lane, nothing more (the fourth finds no route).
		{"galaxies, fast laps", []string{"~zod", "~nec", "~bud"}, true, time.Millisecond, 4 + 3},
		// Stars' relays, whose lanes nobody configured: the cycle is
		// learned and the filter ends it. Fast laps: the injections, the
		// teaching forwards, two laps of three.
		{"stars, fast laps", []string{"~marzod", "~marnec", "~marbud"}, false, time.Millisecond, 4 + 3 + 2*3},
		// Laps of 150 ms, slower than DupMinResend: DupMaxCopies laps.
		{"stars, slow laps", []string{"~marzod", "~marnec", "~marbud"}, false, 50 * time.Millisecond, 4 + 3 + relay.DupMaxCopies*3},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newLoopNet(t, c.ships, c.knowEachOther, c.hop)
			n.forgeCycle(1)
			n.run(n.now + 3*time.Second)
			t.Logf("%s: four forged packets cost %d datagrams in 3 s (%d dropped as duplicates, %d unrouted)",
				c.name, n.sent, dropsOf(n.cores, relay.DropDuplicate), dropsOf(n.cores, relay.DropNoRoute))
			if n.sent > c.maxSent {
				t.Errorf("the forged cycle cost %d datagrams in 3 s, want at most %d", n.sent, c.maxSent)
			}
			if len(n.queue) != 0 {
				t.Errorf("%d datagrams still in flight after 3 s: the loop lives on", len(n.queue))
			}
		})
	}
}

// TestLegacyAmesRetransmissionsPass is the loop row's honest twin: every
// copy of a packet that ames's packet pump sends from one lane is
// forwarded, on the schedules ames.hoon allows. The pump re-sends the
// stored fragment (byte-identical: AES-SIV) once early when three later
// packets are acked first (+on-skipped-packet, only while its retries are
// 0) and then on each timeout, whose rto +clamp-rto keeps within 200 ms
// and 2 minutes and +on-timeout doubles; an ack of another packet may pull
// the rto back (+on-hit) between two timeouts.
func TestLegacyAmesRetransmissionsPass(t *testing.T) {
	ms := func(v ...int) (d []time.Duration) {
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	var doubling []time.Duration
	for rto, at := 200*time.Millisecond, time.Duration(0); at < 10*time.Minute; rto = min(2*rto, 2*time.Minute) {
		doubling = append(doubling, rto)
		at += rto
	}
	for _, c := range []struct {
		name string
		gaps []time.Duration // after the first copy, each from the last
	}{
		{"timeouts doubling from 200 ms for ten minutes", doubling},
		{"a fast re-send, then doubling timeouts", append(ms(30), doubling...)},
		{"an rto pulled back by other acks", ms(20, 200, 200, 400, 200, 400, 800)},
		{"a fast re-send, then the rto floor each time", ms(5, 200, 200, 200, 200, 200, 200)},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			p := legacy(t, "~dapnep-ronmyl", "~nec", 300, 1)
			forwarded := len(f.handle(p, alice))
			for _, g := range c.gaps {
				f.now += g
				forwarded += len(f.handle(p, alice))
			}
			if want := 1 + len(c.gaps); forwarded != want {
				t.Errorf("%d of %d copies forwarded (drops %+v)", forwarded, want, f.snap().Drops)
			}
		})
	}
	// Each rule's edge, so that the twin is no wider than the schedules:
	// a second copy sooner than DupMinResend, or a copy past DupMaxCopies
	// within the window, is dropped.
	f := newFixture(t, nil)
	p := legacy(t, "~dapnep-ronmyl", "~nec", 300, 2)
	for i, g := range ms(0, 10, 10) {
		f.now += g
		if got := len(f.handle(p, alice)); (i < 2) != (got == 1) {
			t.Errorf("copy %d, %v after the last: %d forwarded", i, g, got)
		}
	}
	f.now += time.Minute
	p = legacy(t, "~dapnep-ronmyl", "~nec", 300, 3)
	for i := 0; i <= relay.DupMaxCopies; i++ {
		if got := len(f.handle(p, alice)); (i < relay.DupMaxCopies) != (got == 1) {
			t.Errorf("copy %d of one packet 200 ms apart: %d forwarded", i+1, got)
		}
		f.now += 200 * time.Millisecond
	}
}

// TestLegacyDupCountEndsWithTheWindow: a packet refused for too many
// copies is forwarded again once the window has passed since its last
// forward (a refused copy renews nothing): the sender's doubling re-sends
// get through after at most one window.
func TestLegacyDupCountEndsWithTheWindow(t *testing.T) {
	f := newFixture(t, nil)
	p := legacy(t, "~dapnep-ronmyl", "~nec", 300, 4)
	for i := 0; i < relay.DupMaxCopies; i++ {
		f.handle(p, alice)
		f.now += 200 * time.Millisecond
	}
	last := f.now - 200*time.Millisecond
	for f.now < last+relay.DefaultDupWindow {
		if len(f.handle(p, alice)) != 0 {
			t.Fatalf("a copy past DupMaxCopies forwarded %v after the last forward", f.now-last)
		}
		f.now += 500 * time.Millisecond
	}
	if len(f.handle(p, alice)) != 1 {
		t.Errorf("a copy %v after the last forward (the window is %v) dropped", f.now-last, relay.DefaultDupWindow)
	}
}

// TestSTUNFreshnessSurvivesAClockFlood is issue 28's row "a flood of tiny
// unsolicited pages from forged random lanes, then one poke naming a
// planet that only STUNs": 0/20 honest peeks reached the planet, since the
// lane clock's 65,536 slots are overwritten by any lane and a STUN-only
// lane's freshness lived only there. Now a keepalive is held on the route
// of the ship whose direct lane sent it (route.Table.KeepAlive). The twin:
// a planet silent for three minutes still expires (its lane held by
// nothing), flood or not.
func TestSTUNFreshnessSurvivesAClockFlood(t *testing.T) {
	const flood = 400_000 // distinct lanes: every clock slot overwritten but for 1 in 450
	tiny := pageValue(lane.Ship{Lo: 0x0009_0100}, "x", "")
	stunOnlyRows(t, fmt.Sprintf(", after %d forged lanes", flood), func(f *fixture) {
		for i := 0; i < flood; i++ {
			from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), uint16(1024+i>>16))
			f.handle(tiny, from)
		}
	})
}

// TestMovedPlanetFollowedWhateverTheSquatters is issue 28's row "after a
// planet's NAT rebinding, 50 sockets that never read send pokes naming
// it": 0/44 honest peeks reached its new lane in the 10 s after the move
// (one challenger slot, one probe per claimant). The fronted ship is the
// authority: at a lane too (ship-lane mode) its ack of the planet's ping,
// which arvo sends only for a ping it could decrypt, passed on to the lane
// the ping came from, vouches for that lane (vouch.go), whatever the
// forged pokes do. Here the planet pings from its new lane right after
// the move (vere's %ping sends one on every change of its STUN address)
// and every 25 s; 50 squatters send 10 pokes a second each, naming it;
// the ship acks only the planet's pings. Twin: no squatters.
func TestMovedPlanetFollowedWhateverTheSquatters(t *testing.T) {
	for _, squatters := range []int{0, 50} {
		f := laneFixture(t)
		marzod := ship(t, "~marzod")
		reached, peeks, firstIn := 0, 0, time.Duration(-1)
		start := f.now
		for i := 0; f.now-start < 10*time.Second; i++ {
			for j := 0; j < squatters; j++ { // 10 pokes/s each at 20 rounds/s: one every other round
				if (i+j)%2 == 0 {
					sq := netip.AddrPortFrom(attacker.Addr(), uint16(7000+j))
					f.handle(pokeFrom(sponsee, marzod, fmt.Sprintf("sq/%d/%d", i, j)), sq)
				}
			}
			if i%500 == 0 { // the planet pings from its new lane; the ship acks
				ping := fmt.Sprintf("moved/%d", i)
				f.handle(pokeFrom(sponsee, marzod, ping), movedLn)
				f.now += time.Millisecond
				if sentTo(f.handle(pageValue(marzod, ping, ""), shipLane), movedLn) != 1 {
					t.Fatal("the ship's ack did not reach the pinging lane")
				}
			}
			if _, ok := peekAnswered(t, f, fmt.Sprintf("v/%d", i), movedLn); ok {
				reached++
				if firstIn < 0 {
					firstIn = f.now - start
				}
			}
			peeks++
			f.now += 50 * time.Millisecond
		}
		t.Logf("%d squatters: %d/%d peeks in the 10 s after the move reached P's new lane (the first at %v)",
			squatters, reached, peeks, firstIn)
		if reached != peeks {
			t.Errorf("%d squatters: %d/%d peeks reached P's new lane, want all", squatters, reached, peeks)
		}
	}
}

// TestShipLaneVouchNeedsOneLane: at a lane, the ship's word is taken only
// where it is unambiguous. A ping name copied by a forger from its own
// lane puts both lanes on the ack's pending entry: the ack passed on to
// both vouches for neither (contested), and the sponsee stays where it
// was. A ping followed by a peek for the ping's own name from the same
// lane is not a ping whose ack is the ship's word (anyone may peek).
func TestShipLaneVouchNeedsOneLane(t *testing.T) {
	for _, attackerFirst := range []bool{false, true} {
		f := laneFixture(t)
		marzod := ship(t, "~marzod")
		first, second := movedLn, attacker // the attacker copies the name
		if attackerFirst {
			first, second = attacker, movedLn
		}
		f.handle(pokeFrom(sponsee, marzod, "moved/1"), first)
		f.handle(pokeFrom(sponsee, marzod, "moved/1"), second)
		f.now += time.Millisecond
		acks := f.handle(pageValue(marzod, "moved/1", ""), shipLane)
		if sentTo(acks, movedLn) != 1 || sentTo(acks, attacker) != 1 {
			t.Fatalf("the ack went to %v, want both pinging lanes", sendsTo(acks))
		}
		if n := f.snap().Events[relay.EventVouchContested]; n != 1 {
			t.Errorf("vouch_contested %d, want 1", n)
		}
		f.now += time.Millisecond
		// The known lane keeps its place (the attacker's lane, heard, is
		// at most a challenger, probed by the wire's rules).
		if s := f.handle(peekOf(sponsee, "after"), alice); sentTo(s, sponseeLn) != 1 {
			t.Errorf("attacker first %v: after a contested ack the sponsee's peek went to %v, want its known lane", attackerFirst, sendsTo(s))
		}
		if n := f.snap().Events[relay.EventVouched]; n != 0 {
			t.Errorf("attacker first %v: %d lanes vouched for by an ack sent to two", attackerFirst, n)
		}
	}
	// The own-page trick: ping, then peek the ping's name, from one lane.
	marzod := ship(t, "~marzod")
	g := laneFixture(t)
	g.handle(pokeFrom(sponsee, marzod, "trick"), attacker)
	g.handle(peekOf(marzod, "trick"), attacker)
	g.now += time.Millisecond
	g.handle(pageValue(marzod, "trick", ""), shipLane)
	if n := g.snap().Events[relay.EventVouched]; n != 0 {
		t.Errorf("a page answering the attacker's own peek vouched %d times", n)
	}
	g.now += time.Millisecond
	if s := g.handle(peekOf(sponsee, "after"), alice); sentTo(s, sponseeLn) != 1 {
		t.Errorf("after the trick the sponsee's peek went to %v", sendsTo(s))
	}
}

// TestRelayedPageNamesThePublishersOwnLane: a stock requester takes a
// relayed page's next-hop as the publisher's lane, replacing even a
// direct lane it holds that differs (ames.hoon +ev-update-lane at
// 000ecc3f, line 9099; docs/arvo-lanes.md L3), and never moves from one
// relay to a tighter one: so the relay names the publisher's own lane,
// never a forwarder's, wherever one is known. Cases: the route table
// places the publisher (proven and fresh); the page carries the
// publisher's lane, written by the forwarder that heard it at hop 0 (as
// vere's _mesa_hear_page writes the lane it heard a page from); a hop-0
// page from a lane that is not the publisher's own (here its galaxy's: a
// forwarder bumps hops, so the page is forged or replayed) names nothing.
// Twin: a relayed page that carries none, its publisher unknown here, names
// the forwarder it came through (the seed's step): the publisher's lane
// is then unknown below too (private, or withheld from a sponsor).
func TestRelayedPageNamesThePublishersOwnLane(t *testing.T) {
	nextHopOf := func(t *testing.T, s []send) (netip.AddrPort, bool) {
		t.Helper()
		if len(s) != 1 {
			t.Fatalf("page sent %d times, want 1", len(s))
		}
		var p scry.Packet
		if err := p.Parse(s[0].Buf); err != nil {
			t.Fatal(err)
		}
		return p.NextHopAddr()
	}
	f := newFixture(t, nil)
	provenDirectLane(t, f)
	f.handle(peekOf(planetUnderNec, "third"), alice)
	f.now += time.Millisecond
	if got, _ := nextHopOf(t, f.handle(hopPage(t, planetUnderNec, "third", 1, netip.AddrPort{}), necLane)); got != planetLane {
		t.Errorf("a relayed page for a publisher proven at %v carried next-hop %v", planetLane, got)
	}
	carried := netip.MustParseAddrPort("203.0.113.41:8001")
	for _, hops := range []int{1, 2} {
		c := newFixture(t, nil)
		oneSend(t, c.handle(peekOf(planetUnderNec, "first"), alice), necLane)
		if got, _ := nextHopOf(t, c.handle(hopPage(t, planetUnderNec, "first", hops, carried), necLane)); got != carried {
			t.Errorf("a page relayed %d times carrying the publisher's lane %v: next-hop %v", hops, carried, got)
		}
	}
	h := newFixture(t, nil)
	oneSend(t, h.handle(peekOf(planetUnderNec, "first"), alice), necLane)
	if got, has := nextHopOf(t, h.handle(hopPage(t, planetUnderNec, "first", 0, netip.AddrPort{}), necLane)); has {
		t.Errorf("a hop-0 page from the publisher's galaxy's lane named %v", got)
	}
	g := newFixture(t, nil)
	oneSend(t, g.handle(peekOf(planetUnderNec, "first"), alice), necLane)
	if got, _ := nextHopOf(t, g.handle(hopPage(t, planetUnderNec, "first", 1, netip.AddrPort{}), necLane)); got != necLane {
		t.Errorf("with no lane for the publisher known anywhere, next-hop %v, want the lane the page came from %v", got, necLane)
	}
}
