package route

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// The rules that keep the wire from steering the table (Table's comment):
// challengers, answers only from where requests went, allowed hints,
// per-source caps, configured lanes.

var (
	evilKey  = key("198.51.100.66:6666")
	otherKey = key("198.51.100.67:6667")
	movedKey = key("203.0.113.41:8001")
)

func info(t *testing.T, rt *Table, s lane.Ship) Info {
	t.Helper()
	i, _ := rt.Info(s)
	return i
}

// TestChallengerFailsWithoutAnswering: a lane heard for a ship whose direct
// lane works is a challenger, first come; it is probed at the next request,
// loses the slot when that probe goes unanswered (ChallengerFailures:
// hearing from it does not excuse it) and may not claim it again for
// BadLaneHold; the next claimant then takes the slot, and the direct lane
// carries every request meanwhile.
func TestChallengerFailsWithoutAnswering(t *testing.T) {
	rt := newTable(t)
	now := sec
	rt.Contacted(planet, planetKey, now)
	rt.Contacted(planet, evilKey, now)
	rt.Contacted(planet, otherKey, now) // a later claimant waits its turn
	if i := info(t, rt, planet); i.Direct != planetKey || i.Challenger != evilKey || i.ChallengerState != ChallengerClaimed {
		t.Fatalf("direct %v challenger %v (%v); want %v, %v", i.Direct.AddrPort(), i.Challenger.AddrPort(), i.ChallengerState, planetKey.AddrPort(), evilKey.AddrPort())
	}
	for probe := 0; probe < ChallengerFailures; probe++ {
		wantLanes(t, "probe", rt.Select(planet, alice, now), evilKey, planetKey)
		wantLanes(t, "probe outstanding", rt.Select(planet, alice, now+1), planetKey)
		rt.Contacted(planet, evilKey, now+2) // heard, not answering
		rt.Arrived(evilKey, now+2)
		now += DefaultProbeTimeout
	}
	wantLanes(t, "challenger failed", rt.Select(planet, alice, now), planetKey)
	if i := info(t, rt, planet); i.Challenger.IsValid() || i.Direct != planetKey {
		t.Fatalf("after %d unanswered probes: %+v", ChallengerFailures, i)
	}
	rt.Contacted(planet, evilKey, now)
	if i := info(t, rt, planet); i.Challenger.IsValid() {
		t.Fatal("a lane held as bad became the challenger again")
	}
	rt.Contacted(planet, otherKey, now)
	if i := info(t, rt, planet); i.Challenger != otherKey {
		t.Fatalf("challenger %v, want the next claimant %v", i.Challenger.AddrPort(), otherKey.AddrPort())
	}
	// otherKey fails too; evilKey is still held out (not only as the
	// route's last bad lane), and after BadLaneHold may claim again.
	wantLanes(t, "second probe", rt.Select(planet, alice, now), otherKey, planetKey)
	now += DefaultProbeTimeout
	rt.Select(planet, alice, now)
	rt.Contacted(planet, evilKey, now)
	if i := info(t, rt, planet); i.Challenger.IsValid() {
		t.Fatalf("a held lane claimed the slot: %+v", i)
	}
	now += DefaultBadLaneHold
	rt.Contacted(planet, planetKey, now)
	rt.Contacted(planet, evilKey, now)
	if i := info(t, rt, planet); i.Challenger != evilKey {
		t.Fatalf("after BadLaneHold the lane may claim again: %+v", i)
	}
}

// TestChallengerFollowsAMove: a challenger that answers is proven and sent
// every request beside the direct lane; it replaces a direct lane that
// went silent (the ship moved), which also leaves those requests
// unanswered, and never one that keeps talking and answering.
func TestChallengerFollowsAMove(t *testing.T) {
	for _, oldTalks := range []bool{false, true} {
		rt := newTable(t)
		now := sec
		rt.Contacted(planet, planetKey, now)
		rt.Contacted(planet, movedKey, now)
		wantLanes(t, "probe", rt.Select(planet, alice, now), movedKey, planetKey)
		rt.Answered(planet, movedKey, lane.Key{}, false, now+1)
		if i := info(t, rt, planet); !i.ChallengerProven || i.Direct != planetKey {
			t.Fatalf("after its answer: %+v", i)
		}
		for end := now + DefaultMoveSilence + sec; now < end; now += sec {
			rt.Contacted(planet, movedKey, now)
			if oldTalks {
				rt.Contacted(planet, planetKey, now)
			}
			got := rt.Select(planet, alice, now)
			promoted := !oldTalks && got.N == 1 && got.Lanes[0] == movedKey
			if got.N != 2 && !promoted {
				t.Fatalf("oldTalks %v at %v: lanes %v; want the challenger beside the direct lane", oldTalks, now, lanes(got))
			}
			rt.Answered(planet, movedKey, lane.Key{}, false, now+1) // the ship, at its new lane
			if oldTalks {
				rt.Answered(planet, planetKey, lane.Key{}, false, now+1)
			}
		}
		i := info(t, rt, planet)
		switch {
		case oldTalks && i.Direct != planetKey:
			t.Errorf("a direct lane that keeps talking was replaced by %v", i.Direct.AddrPort())
		case !oldTalks && i.Direct != movedKey:
			t.Errorf("after %v of silence the direct lane is %v, want %v", DefaultMoveSilence, i.Direct.AddrPort(), movedKey.AddrPort())
		}
	}
}

// TestChallengerBeatsAMuteDirectLane: a direct lane learned first from a
// spoofer answers nothing; the ship's own lane, challenging it, answers
// the same requests, and after ProvenFailures of them takes its place,
// though the spoofer keeps claiming (it is only heard: StateHeard). A
// direct lane that answers too keeps it (a contest: both are sent every
// request).
func TestChallengerBeatsAMuteDirectLane(t *testing.T) {
	for _, directAnswers := range []bool{false, true} {
		rt := newTable(t)
		now := sec
		rt.Contacted(planet, evilKey, now)
		rt.Contacted(planet, planetKey, now)
		for i := 0; i < 2*DefaultProvenFailures+1; i++ {
			rt.Contacted(planet, evilKey, now) // the spoofer keeps claiming
			got := rt.Select(planet, alice, now)
			for _, k := range lanes(got) {
				switch k {
				case planetKey:
					rt.Answered(planet, planetKey, lane.Key{}, false, now+1)
				case evilKey:
					if directAnswers {
						rt.Answered(planet, evilKey, lane.Key{}, false, now+1)
					}
				}
			}
			now += DefaultProbeTimeout
		}
		rt.Select(planet, alice, now)
		d := info(t, rt, planet).Direct
		if !directAnswers && d != planetKey {
			t.Errorf("the ship's answering lane did not replace a mute one: direct %v", d.AddrPort())
		}
		if i := info(t, rt, planet); directAnswers && (d != evilKey || i.Challenger != planetKey || i.ChallengerState != ChallengerAnswered) {
			t.Errorf("a direct lane that answers was replaced, or the contest ended: %+v", i)
		}
	}
}

// TestLateAnswerTeachesOnlyFromWhereTheRequestWent: a page that matched no
// pending request answers a probe on its lane, and takes a next-hop from a
// lane on the ship's route; from anywhere else it teaches nothing.
func TestLateAnswerTeachesOnlyFromWhereTheRequestWent(t *testing.T) {
	rt := newTable(t)
	if rt.LateAnswer(PageObs{Publisher: planet, From: evilKey, Next: hintKey, Relayed: true}, sec) {
		t.Fatal("a page from a lane nobody asked was taken")
	}
	if _, ok := rt.Info(planet); ok {
		t.Fatal("it created a route")
	}
	// From the galaxy the request went to, with a next-hop: taken.
	wantLanes(t, "up the chain", rt.Select(planet, alice, sec), necKey)
	if !rt.LateAnswer(PageObs{Publisher: planet, From: necKey, Next: hintKey, Relayed: true}, sec) {
		t.Fatal("the slower copy from the galaxy was not taken")
	}
	wantLanes(t, "hint", rt.Select(planet, alice, sec), hintKey, necKey)
	if !rt.LateAnswer(PageObs{Publisher: planet, From: hintKey, Hop0: true}, sec+1) {
		t.Fatal("the hint's late answer was not taken")
	}
	if i := info(t, rt, planet); i.Direct != hintKey || !i.DirectProven {
		t.Fatalf("a hop-0 late answer from the probed hint: %+v", i)
	}
}

// TestHintsOnlyFromTheRoute: a page offering a next-hop teaches it only if
// it came through a lane requests for the ship go to, and only once a
// dead hint's FailedHintHold is over.
func TestHintsOnlyFromTheRoute(t *testing.T) {
	rt := newTable(t)
	rt.Answered(planet, evilKey, hintKey, true, sec)
	if _, ok := rt.Info(planet); ok {
		t.Fatal("a page through a lane off the route offered a hint")
	}
	now := sec
	rt.Answered(planet, necKey, hintKey, true, now)
	for probe := 0; probe < DefaultCandidateFailures; probe++ {
		wantLanes(t, "probe", rt.Select(planet, alice, now), hintKey, necKey)
		wantLanes(t, "one probe at a time", rt.Select(planet, alice, now+1), necKey)
		now += DefaultProbeTimeout
	}
	wantLanes(t, "dead hint", rt.Select(planet, alice, now), necKey)
	rt.Answered(planet, necKey, otherKey, true, now)
	wantLanes(t, "held after a dead hint", rt.Select(planet, alice, now), necKey)
	now += DefaultFailedHintHold
	rt.Answered(planet, necKey, otherKey, true, now)
	wantLanes(t, "after the hold", rt.Select(planet, alice, now), otherKey, necKey)
}

// TestHintAllowed: the public internet and declared networks, never port
// 0, this process, or loopback at a wildcard-listened port.
func TestHintAllowed(t *testing.T) {
	rt, err := New(self, nil, Config{HintNets: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	rt.AddSelf(key("203.0.113.1:13337"))
	rt.AddSelfPort(13337)
	for _, c := range []struct {
		k    string
		want bool
	}{
		{"203.0.113.9:4000", true},
		{"10.1.2.3:4000", true},
		{"127.0.0.1:4000", true},
		{"10.2.0.1:4000", false},
		{"192.168.1.1:4000", false},
		{"169.254.0.1:4000", false},
		{"224.0.0.1:4000", false},
		{"203.0.113.9:0", false},
		{"203.0.113.1:13337", false},
		{"127.0.0.1:13337", false},
		{"127.9.9.9:13337", false},
		{"[2001:db8::1]:4000", true},
		{"[fe80::1]:4000", false},
	} {
		if got := rt.HintAllowed(key(c.k)); got != c.want {
			t.Errorf("HintAllowed(%s) = %v, want %v", c.k, got, c.want)
		}
	}
	if rt.HintAllowed(lane.Key{}) {
		t.Error("the zero lane allowed")
	}
}

// TestRoutesPerSource: one source address (its ports alike) creates at
// most MaxRoutes/SourceDivisor routes; an evicted route gives its share
// back; another source is unaffected.
func TestRoutesPerSource(t *testing.T) {
	rt, err := New(self, nil, Config{MaxRoutes: 64, SourceDivisor: 4, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	from := func(a byte, port uint16) lane.Key {
		return lane.KeyOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, a}), port))
	}
	for i := 0; i < 100; i++ {
		rt.Contacted(lane.ShipFromUint64(uint64(0x1_0000_0000+i)), from(1, uint16(1000+i)), sec)
	}
	if n, refused := rt.Len(), rt.SourceRefused(); n != 16 || refused != 84 {
		t.Fatalf("one source: %d routes, %d refused; want 16, 84", n, refused)
	}
	// Others fill the table, evicting the first source's routes...
	for a := byte(2); a < 10; a++ {
		for i := 0; i < 16; i++ {
			rt.Contacted(lane.ShipFromUint64(uint64(a)<<40|uint64(i)), from(a, 2000), sec)
		}
	}
	// ...which gives its share back.
	before := rt.Len()
	rt.Contacted(lane.ShipFromUint64(0x2_0000_0000), from(1, 3000), sec)
	if rt.SourceRefused() != 84 {
		t.Fatalf("refused %d after the source's routes were evicted (table %d)", rt.SourceRefused(), before)
	}
	// The same seed puts a source in the same slot.
	rt2, _ := New(self, nil, Config{MaxRoutes: 64, SourceDivisor: 4, Seed: 7})
	if rt.srcSlot(from(1, 1)) != rt2.srcSlot(from(1, 9)) {
		t.Error("a seeded table's source slots differ")
	}
}

// TestConfiguredWins: with ConfiguredWins (a relay), a configured lane is
// the ship's only route and nothing learned about the ship is kept;
// without it (an endpoint), learned lanes come first.
func TestConfiguredWins(t *testing.T) {
	for _, wins := range []bool{true, false} {
		rt, err := New(self, nil, Config{ConfiguredWins: wins})
		if err != nil {
			t.Fatal(err)
		}
		rt.SetStatic(map[lane.Ship]lane.Key{nec: necKey})
		rt.Contacted(nec, evilKey, sec)
		rt.Pin(nec, evilKey)
		got := rt.Select(nec, alice, sec)
		if wins {
			wantLanes(t, "configured", got, necKey)
			if _, ok := rt.Info(nec); ok {
				t.Error("a route was kept for a configured ship")
			}
		} else {
			wantLanes(t, "learned first", got, evilKey)
		}
	}
}

// TestSignedPageProvesALane: a hop-0 page whose signature was checked
// (PageObs.Signed), from a challenger a probe went to, proves it as an
// unsigned answer does and no more: it does not displace a working direct
// lane, heard or proven (a signed page can be replayed from any lane), and
// a signed page from a lane no request went to teaches nothing. With the
// publisher's key at hand, an unverified page (PageObs.Unverified) from the
// challenger credits nothing: the challenger stays claimed, and loses its
// slot on its probe's timeout; from the direct lane it still counts.
func TestSignedPageProvesALane(t *testing.T) {
	for _, c := range []struct {
		name                      string
		signed, unverified, prove bool
		from                      lane.Key
		want                      lane.Key
		state                     LaneState
		chal                      ChallengerState
	}{
		{"signed over heard", true, false, false, movedKey, planetKey, StateHeard, ChallengerAnswered},
		{"unsigned over heard", false, false, false, movedKey, planetKey, StateHeard, ChallengerAnswered},
		{"unverified over heard", false, true, false, movedKey, planetKey, StateHeard, ChallengerClaimed},
		{"signed over proven", true, false, true, movedKey, planetKey, StateProven, ChallengerAnswered},
		{"signed from elsewhere", true, false, false, otherKey, planetKey, StateHeard, ChallengerClaimed},
		{"unverified from the direct lane", false, true, false, planetKey, planetKey, StateProven, ChallengerClaimed},
	} {
		rt := newTable(t)
		rt.Contacted(planet, planetKey, sec)
		if c.prove {
			rt.Select(planet, alice, sec)
			rt.Answered(planet, planetKey, lane.Key{}, false, sec)
		}
		rt.Contacted(planet, movedKey, sec)
		wantLanes(t, c.name, rt.Select(planet, alice, sec+1), movedKey, planetKey)
		o := PageObs{Publisher: planet, From: c.from, Hop0: true, Signed: c.signed, Unverified: c.unverified}
		if contested, _, _ := rt.PageArrived(o, sec+2); contested != (c.from == movedKey) {
			t.Errorf("%s: contested %v", c.name, contested)
		}
		if i := info(t, rt, planet); i.Direct != c.want || i.State != c.state || i.ChallengerState != c.chal {
			t.Errorf("%s: direct %v %v, challenger %v; want %v %v, %v", c.name, i.Direct.AddrPort(), i.State, i.ChallengerState,
				c.want.AddrPort(), c.state, c.chal)
		}
	}
	// A late copy (LateAnswer) from the challenger, unverified, is taken
	// (it came from a lane the request went to) but credits nothing; the
	// same copy with no key at hand answers the challenger's probe.
	for _, unverified := range []bool{true, false} {
		rt := newTable(t)
		rt.Contacted(planet, planetKey, sec)
		rt.Contacted(planet, movedKey, sec)
		rt.Select(planet, alice, sec+1)
		if !rt.LateAnswer(PageObs{Publisher: planet, From: movedKey, Hop0: true, Unverified: unverified}, sec+2) {
			t.Errorf("late copy (unverified %v) from the challenger not taken", unverified)
		}
		want := ChallengerAnswered
		if unverified {
			want = ChallengerClaimed
		}
		if i := info(t, rt, planet); i.ChallengerState != want {
			t.Errorf("late copy, unverified %v: challenger %v, want %v", unverified, i.ChallengerState, want)
		}
	}
	// Provable: only a page that could change the route is worth a
	// signature check: from a lane a request went to, not the fresh
	// direct lane.
	{
		rt := newTable(t)
		rt.Contacted(planet, planetKey, sec)
		rt.Contacted(planet, movedKey, sec)
		if rt.Provable(planet, movedKey, sec) {
			t.Error("provable from a challenger no request went to yet")
		}
		rt.Select(planet, alice, sec+1)
		if !rt.Provable(planet, movedKey, sec+1) || rt.Provable(planet, planetKey, sec+1) ||
			rt.Provable(planet, otherKey, sec+1) || rt.Provable(planet, lane.Key{}, sec+1) {
			t.Error("provable: want the probed challenger only, not the direct lane, a lane no request went to, or none")
		}
	}
	// Pinned: nothing from the wire, signed or not, moves it.
	rt := newTable(t)
	rt.Pin(planet, planetKey)
	rt.Contacted(planet, movedKey, sec)
	rt.PageArrived(PageObs{Publisher: planet, From: movedKey, Hop0: true, Signed: true}, sec)
	wantLanes(t, "pinned", rt.Select(planet, alice, sec+1), planetKey)
}

// TestKeepAliveKeepsTheLane: a lane that only sends keepalives (STUN) does
// not expire; one that sends nothing does, and any lane heard then takes
// its place.
func TestKeepAliveKeepsTheLane(t *testing.T) {
	for _, keep := range []bool{false, true} {
		rt := newTable(t)
		rt.Contacted(planet, planetKey, sec)
		now := sec
		for end := now + 2*DefaultDirectLaneExpiry; now < end; now += 25 * sec {
			if keep {
				rt.KeepAlive(planetKey, now)
			}
		}
		rt.Contacted(planet, evilKey, now)
		i := info(t, rt, planet)
		switch {
		case keep && (i.Direct != planetKey || i.State != StateHeard || i.Challenger != evilKey):
			t.Errorf("kept alive: %+v", i)
		case !keep && i.Direct != evilKey:
			t.Errorf("silent for %v, the lane did not expire: %+v", 2*DefaultDirectLaneExpiry, i)
		}
	}
}

// TestRouteShareIsPerSlash56: the IPv6 /64s of one /56 share one source's
// route share; another /56 has its own.
func TestRouteShareIsPerSlash56(t *testing.T) {
	rt, err := New(self, nil, Config{MaxRoutes: 64, SourceDivisor: 16, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	src := func(b6, b7 byte) lane.Key {
		return lane.KeyOf(netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x56, b6, b7, 15: 1}), 4000))
	}
	for i := 0; i < 16; i++ {
		rt.Contacted(lane.ShipFromUint64(uint64(0x1_0000_0000+i)), src(0, byte(i)), sec)
	}
	if n := rt.Len(); n != 4 {
		t.Errorf("16 /64s of one /56 hold %d routes; want its share, 4", n)
	}
	rt.Contacted(lane.ShipFromUint64(0x2_0000_0000), src(1, 0), sec)
	if n := rt.Len(); n != 5 {
		t.Errorf("another /56 was refused: %d routes", n)
	}
}

// TestHop0FromASponsorLaneProvesNothing: every forwarder bumps a page's
// hops (vere's inc_hopcount in _mesa_hear_page), so a hop-0 page from a
// lane on the publisher's route only as a sponsor's (its galaxy's
// configured lane, its star's learned lane) is a forgery or a replay of a
// signed page: it makes no direct lane, solicited (PageArrived, Heard) or
// late (LateAnswer), signed or not, and is not worth a signature check
// (Provable); from the publisher's own lanes it is (the twin).
func TestHop0FromASponsorLaneProvesNothing(t *testing.T) {
	rt := newTable(t)
	now := sec
	rt.Contacted(marnec, evilKey, now) // the star "at" the attacker: one poke
	wantLanes(t, "up the chain", rt.Select(planet, alice, now), evilKey, necKey)
	for _, from := range []lane.Key{necKey, evilKey} {
		if rt.Provable(planet, from, now) {
			t.Errorf("a hop-0 page from sponsor lane %v is worth a check", from.AddrPort())
		}
		obs := PageObs{Publisher: planet, From: from, Hop0: true, Signed: true}
		rt.PageArrived(obs, now)
		rt.LateAnswer(obs, now)
		rt.Heard(planet, from, now)
		if i, ok := rt.Info(planet); ok && i.Direct.IsValid() {
			t.Fatalf("a hop-0 page from sponsor lane %v made the planet's direct lane %v", from.AddrPort(), i.Direct.AddrPort())
		}
	}
	// The twin: the planet's own lanes. Its hint (from a relayed page
	// through the galaxy) answering at hop 0 proves it, late or not, and
	// is worth a check while it is not the fresh direct lane.
	rt = newTable(t)
	rt.Select(planet, alice, now)
	rt.Answered(planet, necKey, hintKey, true, now)
	wantLanes(t, "hint", rt.Select(planet, alice, now), hintKey, necKey)
	if !rt.Provable(planet, hintKey, now) {
		t.Error("a hop-0 page from the planet's hint is not worth a check")
	}
	rt.PageArrived(PageObs{Publisher: planet, From: hintKey, Hop0: true, Signed: true}, now)
	if i := info(t, rt, planet); i.Direct != hintKey || !i.DirectProven {
		t.Fatalf("a signed hop-0 page from the probed hint: %+v", i)
	}
	if rt.Provable(planet, hintKey, now) {
		t.Error("a page from the fresh direct lane is worth a check")
	}
	rt2 := newTable(t)
	rt2.Contacted(planet, planetKey, now)
	rt2.Heard(planet, planetKey, now)
	rt2.LateAnswer(PageObs{Publisher: planet, From: planetKey, Hop0: true}, now)
	if i := info(t, rt2, planet); i.Direct != planetKey {
		t.Fatalf("the planet's own lane: %+v", i)
	}
}

// TestKeepAliveHeldOnTheRoute: a keepalive is held on the route of the
// ship whose direct lane sent it, so a lane clock whose every slot other
// lanes overwrite (here one slot) cannot make a ship that only STUNs look
// silent; a keepalive from a lane that is not the ship's direct lane (its
// challenger's, an old lane's) keeps nothing; the index behind it drops
// an evicted route's lanes and, past its cap, is made anew from the
// routes, each direct lane still found.
func TestKeepAliveHeldOnTheRoute(t *testing.T) {
	rt, err := New(self, nil, Config{Seed: 1, LaneClockSlots: 1, MaxRoutes: 4})
	if err != nil {
		t.Fatal(err)
	}
	now := sec
	rt.Contacted(planet, planetKey, now)
	rt.Contacted(planet, evilKey, now) // challenger: indexed, but not the direct lane
	for end := now + 2*DefaultDirectLaneExpiry; now < end; now += 25 * sec {
		rt.KeepAlive(planetKey, now)
		rt.Arrived(otherKey, now+1) // overwrites the clock's one slot
	}
	if k, ok := rt.DirectLane(planet, now); !ok || k != planetKey {
		t.Fatalf("kept alive through a flushed clock: direct %v %v", k.AddrPort(), ok)
	}
	// A poke naming another ship from the planet's lane (anyone can send
	// one) does not take the planet's keepalives.
	rt3, _ := New(self, nil, Config{Seed: 1, LaneClockSlots: 1, SourceDivisor: -1})
	rt3.Contacted(planet, planetKey, sec)
	rt3.Contacted(marnec, planetKey, sec)
	n3 := sec
	for end := n3 + 2*DefaultDirectLaneExpiry; n3 < end; n3 += 25 * sec {
		rt3.KeepAlive(planetKey, n3)
		rt3.Arrived(otherKey, n3+1)
	}
	if k, ok := rt3.DirectLane(planet, n3); !ok || k != planetKey {
		t.Fatalf("a forged claim of the planet's lane took its keepalives: direct %v %v", k.AddrPort(), ok)
	}
	// The challenger's keepalives keep nothing: once the direct lane is
	// silent past expiry the route has no fresh direct lane... unless the
	// challenger moves in, which is settle's rule, not KeepAlive's.
	rt2, _ := New(self, nil, Config{Seed: 1, LaneClockSlots: 1})
	rt2.Contacted(planet, planetKey, sec)
	for n := sec; n < sec+2*DefaultDirectLaneExpiry; n += 25 * sec {
		rt2.KeepAlive(evilKey, n)
		rt2.Arrived(otherKey, n+1)
	}
	if _, ok := rt2.DirectLane(planet, sec+2*DefaultDirectLaneExpiry); ok {
		t.Error("another lane's keepalives kept the planet's direct lane fresh")
	}
	// Eviction drops the evicted route's lanes from the index.
	rt.mu.Lock()
	_, indexed := rt.lanes[rt.clock.laneHash(&planetKey)]
	rt.mu.Unlock()
	if !indexed {
		t.Fatal("the planet's direct lane is not indexed")
	}
	for i := 0; i < 4; i++ {
		rt.Contacted(lane.ShipFromUint64(uint64(0x1_0000_0000+i)), key(fmt.Sprintf("198.18.0.%d:1000", i+1)), now)
	}
	if _, ok := rt.Info(planet); ok {
		t.Fatal("the planet's route was not evicted")
	}
	rt.mu.Lock()
	_, indexed = rt.lanes[rt.clock.laneHash(&planetKey)]
	_, chalIndexed := rt.lanes[rt.clock.laneHash(&evilKey)]
	rt.mu.Unlock()
	if indexed || chalIndexed {
		t.Error("an evicted route's lanes are still indexed")
	}
	// Many lanes heard for one ship (challengers in turn) fill the index
	// past its cap: it is made anew, and every route's direct lane is
	// still found.
	s0 := lane.ShipFromUint64(0x1_0000_0000)
	for i := 0; i < 3*rt.lanesCap(); i++ {
		rt.Contacted(s0, key(fmt.Sprintf("198.19.%d.%d:2000", i>>8, i&255)), now+time.Duration(i)*DefaultChallengerHold)
	}
	rt.mu.Lock()
	n := len(rt.lanes)
	rt.mu.Unlock()
	if n > rt.lanesCap() {
		t.Errorf("index at %d entries, cap %d", n, rt.lanesCap())
	}
	later := now + time.Duration(3*rt.lanesCap())*DefaultChallengerHold
	for i := 1; i < 4; i++ {
		s, k := lane.ShipFromUint64(uint64(0x1_0000_0000+i)), key(fmt.Sprintf("198.18.0.%d:1000", i+1))
		for n := later; n < later+2*DefaultDirectLaneExpiry; n += 25 * sec {
			rt.KeepAlive(k, n)
		}
		if got, ok := rt.DirectLane(s, later+2*DefaultDirectLaneExpiry-sec); !ok || got != k {
			t.Errorf("ship %d: its direct lane %v not kept alive after the index was made anew (%v)", i, k.AddrPort(), got.AddrPort())
		}
	}
}
