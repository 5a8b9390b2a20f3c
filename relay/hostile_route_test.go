package relay_test

// Attacks on the route table (issue 15's rows on lane learning and hints;
// issue 21's on lane authority in ship-lane mode, Config.ShipLane), on the
// decision core with time passed in, each attack beside its honest twin,
// which must lose nothing. Each test names the row it reproduces;
// docs/reliability.md lists them with their bounds.

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

var (
	attacker = netip.MustParseAddrPort("198.51.100.66:6666") // an attacker at its own address
	victim   = netip.MustParseAddr("198.51.100.77")          // a third party hints point at
	starLn   = netip.MustParseAddrPort("203.0.113.80:13337") // ~binzod, a star under ~zod
)

// sponsee is a planet under ~marzod, the fixture's fronted star.
var sponsee = lane.Ship{Lo: 0x0005_0100}

// pokeFrom is a hop-0 poke of rcvr at path naming sndr as its sender: a
// ping, when rcvr is sndr's sponsor.
func pokeFrom(sndr, rcvr lane.Ship, path string) []byte {
	p := scry.NewPoke(scry.Name{Ship: rcvr, Bloq: scry.DefaultBloq, Path: []byte(path)},
		scry.Name{Ship: sndr, Bloq: scry.DefaultBloq, Path: []byte(path)}, scry.Data{AuthKind: scry.AuthNone})
	return p.Append(nil)
}

// hopPage is a page published by s at path with hop count hops and, when
// valid, next-hop next.
func hopPage(t testing.TB, s lane.Ship, path string, hops int, next netip.AddrPort) []byte {
	t.Helper()
	p := scry.NewPage(scry.Name{Ship: s, Bloq: scry.DefaultBloq, Path: []byte(path)},
		scry.Data{Total: 5, AuthKind: scry.AuthNone, Frag: []byte("value")})
	p.Header.Hops = uint8(hops)
	if next.IsValid() && !p.SetNextHopAddr(next) {
		t.Fatal("next-hop not encodable")
	}
	return p.Append(nil)
}

// sentTo counts the sends to lane to.
func sentTo(sends []send, to netip.AddrPort) int {
	n := 0
	for _, s := range sends {
		if s.To == to {
			n++
		}
	}
	return n
}

// peekAnswered has alice peek for the sponsee at path and, if the peek
// was sent to lane at, the sponsee answer from there 5 ms later. It
// returns what the peek was sent to and whether it reached at.
func peekAnswered(t testing.TB, f *fixture, path string, at netip.AddrPort) ([]send, bool) {
	s := f.handle(peekOf(sponsee, path), alice)
	if sentTo(s, at) == 0 {
		return s, false
	}
	f.now += 5 * time.Millisecond
	f.handle(pageOf(t, sponsee, path), at)
	return s, true
}

// divertRun drives two minutes of a sponsee's traffic while an attacker
// pokes naming it once a second: alice peeks for it every 500 ms, it
// answers every peek it gets and pings every 25 s. It returns how many of
// alice's peeks reached the sponsee and the attacker. attackerFirst makes
// the attacker's first poke arrive before the sponsee's first ping.
func divertRun(t *testing.T, attackerFirst bool, spoof func(f *fixture, i int)) (honest, diverted, peeks int) {
	t.Helper()
	f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane })
	marzod := ship(t, "~marzod")
	if attackerFirst {
		spoof(f, 0)
	}
	f.handle(pokeFrom(sponsee, marzod, "ping/0"), sponseeLn)
	start := f.now
	for i := 0; f.now-start < 2*time.Minute; i++ {
		if i%2 == 0 {
			spoof(f, i)
		}
		if i%50 == 49 {
			f.handle(pokeFrom(sponsee, marzod, fmt.Sprintf("ping/%d", i)), sponseeLn)
		}
		s, ok := peekAnswered(t, f, fmt.Sprintf("v/%d", i), sponseeLn)
		peeks++
		if ok {
			honest++
		}
		diverted += sentTo(s, attacker)
		f.now += 500*time.Millisecond - 5*time.Millisecond
	}
	return honest, diverted, peeks
}

// TestSpoofedPokeCannotDivertAShip is the row "one hop-0 poke naming a
// ship, from an attacker": repeated once a second for two minutes, it got
// ~97 % of the honest peeks. The attacker's lane claims the challenger
// slot, loses it on its first unanswered probe (ChallengerFailures) and is
// held out for BadLaneHold; a ship that keeps talking keeps its lane. With the
// attacker first, the ship's own lane challenges it, answers, and is sent
// everything from then on.
func TestSpoofedPokeCannotDivertAShip(t *testing.T) {
	spoof := func(f *fixture, i int) {
		f.handle(pokeFrom(sponsee, ship(t, "~marzod"), fmt.Sprintf("evil/%d", i)), attacker)
	}
	// Attacker first, its lane is sent each peek beside the ship's until
	// it has left ProvenFailures probes unanswered that the ship answered
	// (a probe timeout each, at a peek per 500 ms); then, a challenger, it
	// is probed ChallengerFailures times at most.
	firstBound := route.DefaultProvenFailures*int(route.DefaultProbeTimeout/(500*time.Millisecond)) + 2 + route.ChallengerFailures
	for _, first := range []bool{false, true} {
		honest, diverted, peeks := divertRun(t, first, spoof)
		t.Logf("attacker first %v: %d of %d peeks reached the ship, %d the attacker", first, honest, peeks, diverted)
		switch {
		case !first && (honest != peeks || diverted > route.ChallengerFailures):
			t.Errorf("ship first: %d of %d peeks reached the ship, %d the attacker; want all, at most %d probes",
				honest, peeks, diverted, route.ChallengerFailures)
		case first && (honest < peeks-1 || diverted > firstBound):
			t.Errorf("attacker first: %d of %d peeks reached the ship, %d the attacker; want all but the first, at most %d",
				honest, peeks, diverted, firstBound)
		}
	}
}

// TestSpoofedLegacyPacketCannotDivertAShip is the row "one 15-byte legacy
// ames packet naming a ship as sender": 30/30 diverted. It is a challenge
// like a poke's.
func TestSpoofedLegacyPacketCannotDivertAShip(t *testing.T) {
	spoof := func(f *fixture, i int) {
		a := scry.NewAmes(sponsee, ship(t, "~nec"), 1, 2, []byte{byte(i), byte(i >> 8)})
		f.handle(a.Append(nil), attacker)
	}
	honest, diverted, peeks := divertRun(t, false, spoof)
	t.Logf("%d of %d peeks reached the ship, %d the attacker", honest, peeks, diverted)
	if honest != peeks || diverted > route.ChallengerFailures {
		t.Errorf("%d of %d peeks reached the ship, %d the attacker; want all, at most %d probes",
			honest, peeks, diverted, route.ChallengerFailures)
	}
}

// TestSpoofedPokeCannotDivertAConfiguredGalaxy is the row "the same,
// naming a configured galaxy": 30/30 diverted, a learned lane beating the
// --galaxy lane. A configured lane always wins, and nothing is learned for
// a ship that has one.
func TestSpoofedPokeCannotDivertAConfiguredGalaxy(t *testing.T) {
	f := newFixture(t, nil)
	nec := ship(t, "~nec")
	for i := 0; i < 30; i++ {
		f.handle(pokeFrom(nec, ship(t, "~zod"), fmt.Sprintf("evil/%d", i)), attacker)
		a := scry.NewAmes(nec, ship(t, "~zod"), 1, 2, []byte{byte(i)})
		f.handle(a.Append(nil), attacker)
		oneSend(t, f.handle(peek(t, "~nec", fmt.Sprintf("v/%d", i), 0), alice), necLane)
		f.now += time.Second
	}
	if info, ok := f.r.Routes().Info(nec); ok {
		t.Errorf("learned a route for a configured galaxy: %+v", info)
	}
}

// TestSpoofedPokeCannotDivertAStarsPlanets is the row "the same, naming a
// star": every peek for the star's planets diverted. The star's lane is
// its sponsees' way; the attacker only challenges it.
func TestSpoofedPokeCannotDivertAStarsPlanets(t *testing.T) {
	f := newFixture(t, nil)
	star := lane.Ship{Lo: 0x0200} // ~binzod, under ~zod
	planet := lane.Ship{Lo: 0x0007_0200}
	// The star is heard: its poke of ~nec goes through us.
	oneSend(t, f.handle(pokeFrom(star, ship(t, "~nec"), "hello"), starLn), necLane)
	for i := 0; i < 30; i++ {
		f.handle(pokeFrom(star, ship(t, "~nec"), fmt.Sprintf("evil/%d", i)), attacker)
		path := fmt.Sprintf("v/%d", i)
		s := f.handle(peekOf(planet, path), alice)
		if sentTo(s, attacker) != 0 || sentTo(s, starLn) != 1 {
			t.Fatalf("peek %d for the star's planet sent to %v; want the star's lane (and its galaxy), never %v", i, sendsTo(s), attacker)
		}
		// The star forwards: its planet's page comes back through it.
		f.now += 5 * time.Millisecond
		f.handle(hopPage(t, planet, path, 1, netip.AddrPort{}), starLn)
		f.now += time.Second
	}
}

// TestSelfNextHopOnWildcardListen is the row "a solicited page with
// next-hop 127.0.0.1:<own port>, relay on 0.0.0.0": 38 of 1,595 honest
// requests answered, no recovery. A socket at a wildcard address makes
// every loopback address with its port (and every interface address) a
// lane of the relay, which no next-hop can name, even with loopback
// declared a hint network.
func TestSelfNextHopOnWildcardListen(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) {
		c.HintNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("192.0.2.0/24")}
	})
	f.r.AddListener(netip.MustParseAddrPort("0.0.0.0:13337"), []netip.Addr{netip.MustParseAddr("192.0.2.5")})
	selfs := []netip.AddrPort{
		netip.MustParseAddrPort("127.0.0.1:13337"), netip.MustParseAddrPort("127.0.0.2:13337"),
		netip.MustParseAddrPort("192.0.2.5:13337"),
	}
	for i, self := range selfs {
		path := fmt.Sprintf("v/%d", i)
		oneSend(t, f.handle(peekOf(planetUnderNec, path), alice), necLane)
		oneSend(t, f.handle(hopPage(t, planetUnderNec, path, 1, self), necLane), alice)
		s := f.handle(peekOf(planetUnderNec, path+"/next"), alice)
		if sentTo(s, self) != 0 {
			t.Fatalf("a next-hop naming this relay (%v) became a target: %v", self, sendsTo(s))
		}
		if info, _ := f.r.Routes().Info(planetUnderNec); info.Hint.IsValid() {
			t.Fatalf("hint %v taken from %v", info.Hint.AddrPort(), self)
		}
	}
	// A lane on loopback at another port is not the relay: declared, it is
	// taken.
	other := netip.MustParseAddrPort("127.0.0.1:14000")
	oneSend(t, f.handle(peekOf(planetUnderNec, "w"), alice), necLane)
	oneSend(t, f.handle(hopPage(t, planetUnderNec, "w", 1, other), necLane), alice)
	if s := f.handle(peekOf(planetUnderNec, "w/next"), alice); sentTo(s, other) != 1 {
		t.Fatalf("a declared loopback hint at another port was not tried: %v", sendsTo(s))
	}
}

// TestHintAtThirdPartyIsBounded is the row "next-hop pointing at a third
// party (port rotated every 6.5 s)": 1,365 requests delivered to the victim
// over 30 s for 2.6 KB sent. A hint is probed one request at a time, dropped
// after CandidateFailures, and after a dead hint the route takes no new one
// for FailedHintHold; loopback and private hints are never targets.
func TestHintAtThirdPartyIsBounded(t *testing.T) {
	f := newFixture(t, nil)
	toVictim, honest, peeks := 0, 0, 0
	start := f.now
	for i := 0; f.now-start < 30*time.Second; i++ {
		port := uint16(20000 + int((f.now-start)/(6500*time.Millisecond)))
		hint := netip.AddrPortFrom(victim, port)
		path := fmt.Sprintf("v/%d", i)
		s := f.handle(peekOf(planetUnderNec, path), alice)
		peeks++
		for _, x := range s {
			if x.To.Addr() == victim {
				toVictim++
			}
		}
		if sentTo(s, necLane) == 1 {
			honest++
			f.handle(hopPage(t, planetUnderNec, path, 1, hint), necLane)
		}
		f.now += 22 * time.Millisecond
	}
	t.Logf("%d peeks, %d reached the publisher's galaxy, %d sent to the victim", peeks, honest, toVictim)
	if honest != peeks {
		t.Errorf("%d of %d peeks went the known-good way", honest, peeks)
	}
	if toVictim > route.DefaultCandidateFailures {
		t.Errorf("%d requests sent to the third party in 30 s; want at most %d", toVictim, route.DefaultCandidateFailures)
	}
	// Without a declared network, loopback and private next-hops are never
	// targets.
	f = newFixture(t, nil)
	for i, bad := range []netip.AddrPort{
		netip.MustParseAddrPort("127.0.0.53:5353"), netip.MustParseAddrPort("10.1.2.3:5353"),
		netip.MustParseAddrPort("169.254.1.1:5353"), netip.MustParseAddrPort("224.0.0.251:5353"),
		netip.MustParseAddrPort("255.255.255.255:5353"), netip.MustParseAddrPort("203.0.113.9:0"),
	} {
		path := fmt.Sprintf("p/%d", i)
		oneSend(t, f.handle(peekOf(planetUnderNec, path), alice), necLane)
		f.handle(hopPage(t, planetUnderNec, path, 1, bad), necLane)
		if s := f.handle(peekOf(planetUnderNec, path+"/next"), alice); sentTo(s, bad) != 0 {
			t.Errorf("next-hop %v became a target", bad)
		}
	}
}

// TestPagesFromElsewhereTeachNothing: an unsolicited page never proves or
// teaches a lane, and a solicited one teaches only from a lane the request
// went to (an attacker that knows a pending name cannot plant its lane).
func TestPagesFromElsewhereTeachNothing(t *testing.T) {
	f := newFixture(t, nil)
	if s := f.handle(hopPage(t, planetUnderNec, "nobody/asked", 0, attacker), attacker); len(s) != 0 {
		t.Fatalf("unsolicited page sent on: %v", sendsTo(s))
	}
	if info, ok := f.r.Routes().Info(planetUnderNec); ok {
		t.Fatalf("an unsolicited page created a route: %+v", info)
	}
	oneSend(t, f.handle(peekOf(planetUnderNec, "asked"), alice), necLane)
	oneSend(t, f.handle(hopPage(t, planetUnderNec, "asked", 0, attacker), attacker), alice) // the relay cannot tell
	if info, ok := f.r.Routes().Info(planetUnderNec); ok {
		t.Fatalf("a page from a lane the request never went to taught %+v", info)
	}
	oneSend(t, f.handle(peekOf(planetUnderNec, "again"), alice), necLane)
}

// TestOneSourceCannotFillTheRouteTable is the row "1.15 M hop-0 pokes naming
// distinct ships from one source": RSS 14 to 365 MiB and the real sponsee's
// lane evicted. One address creates at most MaxRoutes/SourceDivisor routes;
// the table's memory is bounded by MaxRoutes*route.RouteBytes
// (TestRouteMemoryBound).
func TestOneSourceCannotFillTheRouteTable(t *testing.T) {
	const maxRoutes = 4096
	f := routeCapFixture(t, maxRoutes)
	zod := ship(t, "~zod")
	for i := 0; i < 8*maxRoutes; i++ {
		src := netip.AddrPortFrom(attacker.Addr(), uint16(1024+i%60000))
		f.handle(pokeFrom(lane.ShipFromUint64(uint64(0x1_0000_0000+i)), zod, fmt.Sprintf("x/%d", i)), src)
	}
	share := maxRoutes / route.DefaultRouteSourceDivisor
	if n := f.r.Routes().Len(); n > share+1 {
		t.Errorf("one source holds %d routes; want at most its share, %d (and the sponsee's)", n, share)
	}
	if f.r.Routes().SourceRefused() == 0 {
		t.Error("no route refused")
	}
	if k, ok := f.r.Routes().DirectLane(sponsee, f.now); !ok || k.AddrPort() != sponseeLn {
		t.Fatalf("the sponsee's lane was evicted")
	}
}

// routeCapFixture is a ship-lane relay of maxRoutes routes, with no
// per-source cap on pending entries, whose sponsee pinged from sponseeLn.
func routeCapFixture(t *testing.T, maxRoutes int) *fixture {
	t.Helper()
	f := newFixture(t, func(c *relay.Config) {
		c.ShipLane = shipLane
		c.Routes.MaxRoutes = maxRoutes
		c.Pending = pit.Config{MaxEntries: 1 << 16, MaxEntriesPerSource: -1}
	})
	f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "ping"), sponseeLn)
	return f
}

var (
	// movedLn is the sponsee's lane after its NAT rebound.
	movedLn = netip.MustParseAddrPort("203.0.113.21:6001")
	// accomplice asks on the attacker's behalf, from elsewhere.
	accomplice = netip.MustParseAddrPort("198.51.100.68:6868")
)

// forgedPage is a page at path published (so it claims) by s, with
// another value than pageOf's: the attacker's answer.
func forgedPage(t testing.TB, s lane.Ship, path string) []byte { return pageValue(s, path, "forge") }

// laneFixture is a ship-lane relay whose sponsee pinged from sponseeLn and
// answered one peek there (its lane proven).
func laneFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane })
	f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "ping/0"), sponseeLn)
	if sentTo(f.handle(peekOf(sponsee, "warm"), alice), sponseeLn) != 1 {
		t.Fatal("the sponsee's lane was not used")
	}
	f.now += 5 * time.Millisecond
	f.handle(pageOf(t, sponsee, "warm"), sponseeLn)
	if i, _ := f.r.Routes().Info(sponsee); i.State != route.StateProven {
		t.Fatalf("sponsee's lane %v, want proven", i.State)
	}
	return f
}

// TestKnownGoodPageBeatsAFasterChallenger is the row "one poke naming P
// from the attacker's own address, and one answered probe": the attacker,
// a challenger that answers at its own address, is sent each request beside
// P's lane and answers first; P's page, 20 ms later, was dropped as
// unsolicited (0/40 real pages). The request stays pending when the first
// page came from the challenger, so P's page reaches alice too. Twin: with
// no attacker, alice gets exactly one page a peek.
func TestKnownGoodPageBeatsAFasterChallenger(t *testing.T) {
	for _, attack := range []bool{false, true} {
		f := laneFixture(t)
		const peeks = 40
		real, forged, extra := 0, 0, 0
		for i := 0; i < peeks; i++ {
			if attack && i%10 == 0 {
				f.handle(pokeFrom(sponsee, ship(t, "~marzod"), fmt.Sprintf("evil/%d", i)), attacker)
			}
			path := fmt.Sprintf("v/%d", i)
			s := f.handle(peekOf(sponsee, path), alice)
			if sentTo(s, sponseeLn) != 1 {
				t.Fatalf("attack %v: peek %d not sent to the known-good lane", attack, i)
			}
			if sentTo(s, attacker) > 0 {
				f.now += 2 * time.Millisecond
				forged += sentTo(f.handle(forgedPage(t, sponsee, path), attacker), alice)
			}
			f.now += 20 * time.Millisecond
			real += sentTo(f.handle(pageOf(t, sponsee, path), sponseeLn), alice)
			// Any further copy reaches nobody.
			extra += sentTo(f.handle(pageOf(t, sponsee, path), sponseeLn), alice)
			f.now += 500 * time.Millisecond
		}
		t.Logf("attack %v: %d/%d real pages reached alice, %d forged, %d extra copies", attack, real, peeks, forged, extra)
		if real != peeks || extra != 0 {
			t.Errorf("attack %v: %d/%d real pages reached alice (%d extra copies); want all, once", attack, real, peeks, extra)
		}
		if !attack && forged != 0 {
			t.Errorf("no attack, yet %d forged pages", forged)
		}
	}
}

// TestChallengerSlotCannotBeSquatted is the row "sockets that never read
// send 10 pokes/s naming P": the one challenger slot stayed taken, so P's
// new lane after a NAT rebinding was never tried (0/44). A claimant that
// leaves its probe unanswered loses the slot and may not claim it again
// for BadLaneHold, so ten sockets are spent in about as many requests and
// P's next ping takes the slot. Twin: with no squatters, P's move is
// followed from its first ping.
func TestChallengerSlotCannotBeSquatted(t *testing.T) {
	for _, squat := range []bool{false, true} {
		f := laneFixture(t)
		marzod := ship(t, "~marzod")
		reached, peeks := 0, 0
		start := f.now
		for i := 0; f.now-start < 90*time.Second; i++ {
			if squat { // 10 sockets in turn, 10 pokes a second
				for j := 0; j < 5; j++ {
					sq := netip.AddrPortFrom(attacker.Addr(), uint16(7000+(5*i+j)%10))
					f.handle(pokeFrom(sponsee, marzod, fmt.Sprintf("sq/%d/%d", i, j)), sq)
				}
			}
			if i%50 == 0 { // P pings every 25 s, from its new lane
				f.handle(pokeFrom(sponsee, marzod, fmt.Sprintf("moved/%d", i)), movedLn)
			}
			if _, ok := peekAnswered(t, f, fmt.Sprintf("v/%d", i), movedLn); ok {
				reached++
			}
			peeks++
			f.now += 500 * time.Millisecond
		}
		t.Logf("squatters %v: %d/%d peeks reached P's new lane", squat, reached, peeks)
		want := peeks - 2 // the first, before P's ping is probed
		if squat {
			// Ten squatters, each a probe timeout, before P's second ping
			// (25 s) finds the slot free.
			want = peeks - int(35*time.Second/(500*time.Millisecond))
		}
		if reached < want {
			t.Errorf("squatters %v: %d/%d peeks reached P's new lane; want at least %d", squat, reached, peeks, want)
		}
	}
}

// TestBaitCountsNothingAgainstAProvenLane is the row "bait: the attacker
// asks 10 names of P that P never answers, and answers them itself": counted
// as P failing, a live planet was replaced in about 4 s (0/25 reach it), a
// planet that only STUNs for good. A lane that has answered (proven) and is
// still heard from (pings, or STUN) fails on silence alone: the bait
// counts nothing. Twin: the same planet with no bait.
func TestBaitCountsNothingAgainstAProvenLane(t *testing.T) {
	for _, stunOnly := range []bool{false, true} {
		for _, bait := range []bool{false, true} {
			f := laneFixture(t)
			marzod := ship(t, "~marzod")
			// The attacker claims P and answers, at its own address,
			// whatever it is sent: an answered challenger.
			f.handle(pokeFrom(sponsee, marzod, "evil/0"), attacker)
			answer := func(s []send, path string) {
				if sentTo(s, attacker) > 0 {
					f.now += 2 * time.Millisecond
					f.handle(forgedPage(t, sponsee, path), attacker)
				}
			}
			if bait {
				// Its accomplice asks names P never answers.
				for i := 0; i < 10; i++ {
					path := fmt.Sprintf("bait/%d", i)
					answer(f.handle(peekOf(sponsee, path), accomplice), path)
					f.now += route.DefaultProbeTimeout
				}
			}
			reached, diverted := 0, 0
			const peeks = 25
			for i := 0; i < peeks; i++ {
				if i%10 == 0 {
					if stunOnly {
						f.handle(stunRequest(byte(i)), sponseeLn)
					} else {
						f.handle(pokeFrom(sponsee, marzod, fmt.Sprintf("ping/%d", i+1)), sponseeLn)
					}
				}
				path := fmt.Sprintf("v/%d", i)
				s := f.handle(peekOf(sponsee, path), alice)
				if sentTo(s, sponseeLn) > 0 {
					reached++
					f.now += 5 * time.Millisecond
					f.handle(pageOf(t, sponsee, path), sponseeLn)
				}
				diverted += sentTo(s, attacker)
				answer(s, path)
				f.now += time.Second
			}
			t.Logf("STUN only %v, bait %v: %d/%d reached P, %d the attacker", stunOnly, bait, reached, peeks, diverted)
			if reached != peeks {
				t.Errorf("STUN only %v, bait %v: %d/%d peeks reached P; want all", stunOnly, bait, reached, peeks)
			}
			if i, _ := f.r.Routes().Info(sponsee); i.Direct.AddrPort() != sponseeLn {
				t.Errorf("STUN only %v, bait %v: direct lane %v", stunOnly, bait, i.Direct.AddrPort())
			}
		}
	}
}

// TestSTUNKeepsALaneAlive is the row "an idle planet that only STUNs":
// STUN did not refresh its lane, so after the 2-minute expiry it was
// unreachable and one poke made the attacker its lane (20/20). A STUN
// request answered from the lane keeps it (route.Table.KeepAlive). Twin:
// the same planet silent, whose lane does expire, so the keepalive is what
// keeps it.
func TestSTUNKeepsALaneAlive(t *testing.T) { stunOnlyRows(t, "", nil) }

// stunOnlyRows runs the STUN-only planet's row and its silent twin: P
// (pinged once, proven) STUNs every 25 s for 3 minutes or stays silent;
// then meanwhile (if set) runs, one poke names P from the attacker, and
// alice peeks P 20 times a second apart. P STUNning must get all 20 and
// the attacker at most its probes; P silent none (its lane expired).
func stunOnlyRows(t *testing.T, what string, meanwhile func(f *fixture)) {
	t.Helper()
	for _, stun := range []bool{false, true} {
		f := laneFixture(t)
		for end := f.now + 3*time.Minute; f.now < end; f.now += 25 * time.Second {
			if stun {
				f.handle(stunRequest(byte(f.now/time.Second)), sponseeLn)
			}
		}
		if meanwhile != nil {
			meanwhile(f)
		}
		f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "evil"), attacker)
		reached, diverted := 0, 0
		for i := 0; i < 20; i++ {
			s := f.handle(peekOf(sponsee, fmt.Sprintf("v/%d", i)), alice)
			reached += sentTo(s, sponseeLn)
			diverted += sentTo(s, attacker)
			f.now += time.Second
		}
		t.Logf("STUN %v%s: %d/20 peeks reached P, %d the attacker", stun, what, reached, diverted)
		switch {
		case stun && (reached != 20 || diverted > route.ChallengerFailures):
			t.Errorf("STUNning%s: %d/20 peeks reached P, %d the attacker; want all, at most %d probes", what, reached, diverted, route.ChallengerFailures)
		case !stun && reached != 0:
			t.Errorf("silent for 3 minutes%s: %d peeks still went to P's expired lane", what, reached)
		}
	}
}

// TestIPv6SourceShareIsPerSlash56 is the row "17 IPv6 /64s of one /56": the
// per-source route cap counted /64s, so a 4,096-route table filled from one
// /56 (P evicted, then one poke hijacked it). The share is one /56's, as
// the amplification budget counts. Twin: 17 /56s are 17 sources, each with
// its share.
func TestIPv6SourceShareIsPerSlash56(t *testing.T) {
	const maxRoutes = 4096
	share := maxRoutes / route.DefaultRouteSourceDivisor
	for _, spread := range []bool{false, true} {
		f := routeCapFixture(t, maxRoutes)
		zod := ship(t, "~zod")
		n := 0
		for net := 0; net < 17; net++ {
			a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x56, 0, byte(net)} // 17 /64s of 2001:db8:0:5600::/56
			if spread {
				a[6] = byte(net) // 17 /56s
			}
			src := netip.AddrPortFrom(netip.AddrFrom16(a), 4000)
			for i := 0; i < share; i++ {
				f.handle(pokeFrom(lane.ShipFromUint64(uint64(0x1_0000_0000+n)), zod, fmt.Sprintf("x/%d", n)), src)
				n++
			}
		}
		held := f.r.Routes().Len() - 1
		t.Logf("spread %v: %d routes from 17 /64s (share %d)", spread, held, share)
		if !spread && held > share {
			t.Errorf("one /56 holds %d routes; want at most its share, %d", held, share)
		}
		if spread && held < maxRoutes-1 {
			t.Errorf("17 /56s hold %d routes; want each its share", held)
		}
		if k, ok := f.r.Routes().DirectLane(sponsee, f.now); !spread && (!ok || k.AddrPort() != sponseeLn) {
			t.Error("the sponsee's lane was evicted by one /56")
		}
	}
}

// TestDisputedLaneNamesNeither: while a new lane claims the sponsee beside
// its working direct lane, neither may be named as next-hop: the old lane
// may be stale (the sponsee moved) or the new one wrong (a squatter), and a
// stock requester stores a next-hop as the sponsee's lane (ames.hoon
// +ev-update-lane, docs/arvo-lanes.md L3). Twins: before the claim the
// direct lane is named; once the claim is settled (the old lane silent for
// MoveSilence while the new one pings and answers) the new lane is.
func TestDisputedLaneNamesNeither(t *testing.T) {
	nextHop := func(t *testing.T, s []send) (netip.AddrPort, bool) {
		t.Helper()
		for _, x := range s {
			if x.To == alice {
				p := parse(t, x.Buf)
				return p.NextHopAddr()
			}
		}
		t.Fatalf("no page to alice: %v", sendsTo(s))
		return netip.AddrPort{}, false
	}
	answer := func(f *fixture, path string, from netip.AddrPort) []send {
		f.now += 5 * time.Millisecond
		return f.handle(pageOf(t, sponsee, path), from)
	}
	f := laneFixture(t)
	marzod := ship(t, "~marzod")
	f.handle(peekOf(sponsee, "before"), alice)
	if got, ok := nextHop(t, answer(f, "before", sponseeLn)); !ok || got != sponseeLn {
		t.Fatalf("before any claim: next-hop %v %v, want the direct lane %v", got, ok, sponseeLn)
	}
	f.handle(pokeFrom(sponsee, marzod, "ping/moved"), movedLn)
	if sentTo(f.handle(peekOf(sponsee, "during"), alice), movedLn) != 1 {
		t.Fatal("the claimed lane was not probed")
	}
	if got, ok := nextHop(t, answer(f, "during", movedLn)); ok {
		t.Errorf("a page from the claiming lane named %v", got)
	}
	f.handle(peekOf(sponsee, "during2"), alice)
	if got, ok := nextHop(t, answer(f, "during2", sponseeLn)); ok {
		t.Errorf("a page from the disputed direct lane named %v", got)
	}
	// The sponsee moved: its old lane falls silent, the new one pings
	// every 10 s and answers.
	for i := 0; time.Duration(i)*10*time.Second < 2*route.DefaultMoveSilence; i++ {
		f.now += 10 * time.Second
		f.handle(pokeFrom(sponsee, marzod, fmt.Sprintf("ping/%d", i)), movedLn)
		path := fmt.Sprintf("after/%d", i)
		if sentTo(f.handle(peekOf(sponsee, path), alice), movedLn) == 1 {
			answer(f, path, movedLn)
		}
	}
	f.handle(peekOf(sponsee, "settled"), alice)
	if got, ok := nextHop(t, answer(f, "settled", movedLn)); !ok || got != movedLn {
		i, _ := f.r.Routes().Info(sponsee)
		t.Errorf("after the move: next-hop %v %v, want the new lane %v (route %+v)", got, ok, movedLn, i)
	}
}
