package route

import (
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// The route table's rules tested on the table itself (the relay's tests
// exercise them through its decision core), so that mutation testing of
// this package sees them.

var (
	nec       = lane.Ship{Lo: 1}           // a galaxy
	marnec    = lane.Ship{Lo: 0x0101}      // a star under ~nec
	planet    = lane.Ship{Lo: 0x0005_0101} // a planet under ~marnec
	self      = lane.Ship{Lo: 0x0100}      // the fronted star, under ~zod
	necKey    = key("198.51.100.3:13338")
	marnecKey = key("203.0.113.60:13337")
	planetKey = key("203.0.113.40:8000")
	alice     = key("203.0.113.10:5000")
	hintKey   = key("203.0.113.70:7000")
)

func key(s string) lane.Key { return lane.KeyOf(netip.MustParseAddrPort(s)) }

func newTable(t *testing.T) *Table {
	t.Helper()
	// Seeded, so that which lanes share a slot of the lane clock and the
	// held record is the same every run.
	rt, err := New(self, nil, Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rt.SetStatic(map[lane.Ship]lane.Key{nec: necKey})
	return rt
}

func lanes(t Targets) []lane.Key { return t.Lanes[:t.N] }

func wantLanes(t *testing.T, what string, got Targets, want ...lane.Key) {
	t.Helper()
	if got.N != len(want) {
		t.Fatalf("%s: lanes %v, want %v", what, lanes(got), want)
	}
	for i := range want {
		if got.Lanes[i] != want[i] {
			t.Fatalf("%s: lanes %v, want %v", what, lanes(got), want)
		}
	}
}

const sec = time.Second

// TestGalaxyThenDirect: with nothing known the galaxy carries the request;
// a proven direct lane is then used alone.
func TestGalaxyThenDirect(t *testing.T) {
	rt := newTable(t)
	wantLanes(t, "nothing known", rt.Select(planet, alice, sec), necKey)
	rt.heard(planet, planetKey, sec, false) // the planet answered from its lane
	wantLanes(t, "direct proven", rt.Select(planet, alice, sec), planetKey)
	// The direct lane expires after DirectLaneExpiry of silence.
	wantLanes(t, "expired", rt.Select(planet, alice, sec+DefaultDirectLaneExpiry), necKey)
}

// TestNeverBackWhereItCame: a candidate that is the lane the request came
// from is skipped and marked Looped; our own lanes are never targets.
func TestNeverBackWhereItCame(t *testing.T) {
	rt := newTable(t)
	got := rt.Select(planet, necKey, sec)
	if got.N != 0 || !got.Looped {
		t.Fatalf("from the galaxy: %v looped %v", lanes(got), got.Looped)
	}
	rt.AddSelf(necKey)
	if got := rt.Select(planet, alice, sec); got.N != 0 || got.Looped {
		t.Fatalf("our own lane chosen: %v", lanes(got))
	}
	if !rt.IsSelf(&necKey) || rt.IsSelf(&alice) {
		t.Fatal("IsSelf wrong")
	}
}

// TestSponsee: a receiver below the fronted ship whose lane is unknown has
// no route, and says so.
func TestSponsee(t *testing.T) {
	rt := newTable(t)
	sponsee := lane.Ship{Lo: 0x0005_0100}
	if got := rt.Select(sponsee, alice, sec); got.N != 0 || !got.Sponsee {
		t.Fatalf("sponsee: %v sponsee %v", lanes(got), got.Sponsee)
	}
	rt.Contacted(sponsee, planetKey, sec)
	wantLanes(t, "pinged", rt.Select(sponsee, alice, sec), planetKey)
}

// TestHintTightensAndFailsBack: a next-hop from the galaxy's answer is tried
// beside the galaxy until it answers; a silent hint is dropped after
// CandidateFailures probes and not taken back for BadLaneHold.
func TestHintTightensAndFailsBack(t *testing.T) {
	rt := newTable(t)
	now := sec
	rt.Select(planet, alice, now)
	rt.Answered(planet, necKey, hintKey, true, now)
	wantLanes(t, "hint on probation", rt.Select(planet, alice, now), hintKey, necKey)
	for i := 0; i < DefaultCandidateFailures; i++ {
		now += DefaultProbeTimeout
		rt.Select(planet, alice, now)
	}
	wantLanes(t, "hint dropped", rt.Select(planet, alice, now), necKey)
	rt.Answered(planet, necKey, hintKey, true, now)
	wantLanes(t, "held", rt.Select(planet, alice, now), necKey)
	now += DefaultBadLaneHold
	rt.Answered(planet, necKey, hintKey, true, now)
	wantLanes(t, "tried again after the hold", rt.Select(planet, alice, now), hintKey, necKey)
	// An answer through the hint proves it: then it is used alone.
	rt.Answered(planet, hintKey, lane.Key{}, true, now)
	wantLanes(t, "hint proven", rt.Select(planet, alice, now), hintKey)
}

// TestNoHintsForShipsWeSponsorFromAbove is the seed's rule against
// fraternizing: a galaxy's relay is handed its descendant planet's own lane
// as next-hop by the star's relay (to pass on to stock requesters, who
// store it as the planet's lane), but keeps forwarding the planet's
// requests to the star, not to the planet. Twin: the planet of another
// galaxy tightens on the same next-hop.
func TestNoHintsForShipsWeSponsorFromAbove(t *testing.T) {
	rt, err := New(nec, nil, Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rt.SetStatic(map[lane.Ship]lane.Key{marnec: marnecKey})
	now := sec
	wantLanes(t, "through the star", rt.Select(planet, alice, now), marnecKey)
	rt.Answered(planet, marnecKey, planetKey, true, now)
	wantLanes(t, "our descendant, after its star's next-hop", rt.Select(planet, alice, now), marnecKey)

	other := lane.Ship{Lo: 0x0005_0102} // a planet under ~marbud, under ~bud
	budKey := key("198.51.100.9:13338")
	rt.SetStatic(map[lane.Ship]lane.Key{marnec: marnecKey, lane.Ship{Lo: 2}: budKey})
	wantLanes(t, "another galaxy's planet", rt.Select(other, alice, now), budKey)
	rt.Answered(other, budKey, hintKey, true, now)
	wantLanes(t, "another galaxy's planet, after the next-hop", rt.Select(other, alice, now), hintKey, budKey)
}

// TestPlanCommit: a plan changes nothing; committing it starts probes, and
// a committed probe unanswered for ProvenFailures timeouts, with the lane
// silent, demotes it; a lane heard from meanwhile is kept.
func TestPlanCommit(t *testing.T) {
	for _, heard := range []bool{false, true} {
		rt := newTable(t)
		rt.heard(planet, planetKey, sec, false) // the planet answered from its lane
		now := sec
		q := Query{Rcvr: planet, From: alice}
		for i := 0; i < 5; i++ {
			rt.Plan(q, now)
			now += DefaultProbeTimeout
		}
		if info, _ := rt.Info(planet); !info.DirectProven {
			t.Fatal("plans demoted the lane")
		}
		for i := 0; i < DefaultProvenFailures; i++ {
			p := rt.Plan(q, now)
			rt.Commit(&p, now)
			if heard {
				rt.Arrived(planetKey, now+DefaultProbeTimeout/2)
			}
			now += DefaultProbeTimeout
		}
		p := rt.Plan(q, now)
		if heard {
			wantLanes(t, "heard", p.Targets, planetKey)
		} else {
			wantLanes(t, "silent", p.Targets, planetKey, necKey)
		}
	}
}

// TestRouteAdmission: a plan not committed (the relay's pending table or
// budget refused it) changes nothing: no probe, no learned sender; one
// committed does.
func TestRouteAdmission(t *testing.T) {
	rt := newTable(t)
	rt.heard(planet, planetKey, sec, false) // the planet answered from its lane
	now := sec
	var p Plan
	for i := 0; i < 4*DefaultProvenFailures; i++ {
		if rt.PlanInto(&p, Query{Rcvr: planet, From: alice, Sender: marnec, Learn: true}, now); p.N == 0 {
			t.Fatal("no plan")
		}
		now += DefaultProbeTimeout
	}
	if info, _ := rt.Info(planet); !info.DirectProven {
		t.Fatal("refused plans demoted the lane")
	}
	if _, ok := rt.DirectLane(marnec, now); ok {
		t.Fatal("a refused plan taught its sender's lane")
	}
	if !rt.Route(&p, Query{Rcvr: planet, From: alice, Sender: marnec, Learn: true}, now) {
		t.Fatal("admitted plan not committed")
	}
	if k, ok := rt.DirectLane(marnec, now); !ok || k != alice {
		t.Fatal("an admitted plan did not teach its sender's lane")
	}
}

// TestForwarders: a star's lane is tried for its planets beside the galaxy
// until a relayed page comes back from it; a configured relay is trusted at
// once; a star that never forwards is set aside, but stays the last resort.
func TestForwarders(t *testing.T) {
	rt := newTable(t)
	rt.Contacted(marnec, marnecKey, sec)
	wantLanes(t, "unproven star", rt.Select(planet, alice, sec), marnecKey, necKey)
	rt.Answered(planet, marnecKey, lane.Key{}, false, sec) // hop 0: not a forward
	wantLanes(t, "hop-0 page", rt.Select(planet, alice, sec), marnecKey, necKey)
	rt.Answered(planet, marnecKey, lane.Key{}, true, sec)
	wantLanes(t, "forwarded", rt.Select(planet, alice, sec), marnecKey)

	rt = newTable(t)
	rt.SetRelays(map[lane.Ship]lane.Key{marnec: marnecKey})
	wantLanes(t, "configured relay", rt.Select(planet, alice, sec), marnecKey)

	rt = newTable(t)
	rt.SetStatic(nil)
	rt.Contacted(marnec, marnecKey, sec)
	now := sec
	for i := 0; i < DefaultCandidateFailures; i++ {
		wantLanes(t, "only the star", rt.Select(planet, alice, now), marnecKey)
		now += DefaultProbeTimeout
	}
	wantLanes(t, "last resort", rt.Select(planet, alice, now), marnecKey)
	rt.SetStatic(map[lane.Ship]lane.Key{nec: necKey})
	wantLanes(t, "set aside", rt.Select(planet, alice, now), necKey)
}

// TestPinned: a pinned lane (the ship vouched for it) is the ship's route
// past the wire's expiry, lanes learned from the wire or pages do not move
// it, and after Unpin the ship is routed as any other.
func TestPinned(t *testing.T) {
	rt := newTable(t)
	rt.Contacted(planet, hintKey, 0)
	rt.Pin(planet, planetKey)
	if _, ok := rt.Info(planet); ok {
		t.Fatal("the learned route was kept beside the pin")
	}
	rt.Contacted(planet, alice, 2*sec)
	rt.Answered(planet, alice, hintKey, false, 2*sec)
	later := sec + 10*DefaultDirectLaneExpiry
	wantLanes(t, "pinned", rt.Select(planet, necKey, later), planetKey)
	for i := 0; i < 2*DefaultCandidateFailures; i++ { // unanswered requests fail nothing
		later += DefaultProbeTimeout
		wantLanes(t, "pinned, unanswered", rt.Select(planet, necKey, later), planetKey)
	}
	if _, ok := rt.Info(planet); ok {
		t.Fatal("a route was learned for a pinned ship")
	}
	rt.Unpin(planet)
	rt.Contacted(planet, alice, later)
	wantLanes(t, "unpinned", rt.Select(planet, necKey, later), alice)
}

// TestPinnedSponsor: a pinned lane is on the route for its ship's pages and
// its sponsees' (LateAnswer takes them from there, not from elsewhere), a
// pinned star is its planets' sponsor lane, AppendLanesOf names it, a pin
// to an invalid or own lane is ignored, and a pin that moves counts as a
// change.
func TestPinnedSponsor(t *testing.T) {
	rt := newTable(t)
	rt.AddSelf(hintKey)
	before := rt.Changes()
	rt.Pin(marnec, lane.Key{})
	rt.Pin(marnec, hintKey)
	if rt.Changes() != before {
		t.Fatal("a pin to an invalid or own lane was taken")
	}
	rt.Pin(marnec, marnecKey)
	rt.Pin(marnec, marnecKey)
	if rt.Changes() != before+1 {
		t.Fatalf("changes %d, want %d", rt.Changes(), before+1)
	}
	if !rt.LateAnswer(PageObs{Publisher: marnec, From: marnecKey, Hop0: true}, sec) || rt.LateAnswer(PageObs{Publisher: marnec, From: alice, Hop0: true}, sec) {
		t.Fatal("a page for the pinned star was judged by the wrong lane")
	}
	if !rt.LateAnswer(PageObs{Publisher: planet, From: marnecKey, Relayed: true}, sec) || rt.LateAnswer(PageObs{Publisher: planet, From: alice, Relayed: true}, sec) {
		t.Fatal("a page for the pinned star's planet was judged by the wrong lane")
	}
	got := rt.Select(planet, alice, sec)
	if got.N == 0 || got.Lanes[0] != marnecKey {
		t.Fatalf("the planet's plan %v; want the pinned star's lane first", got.Lanes[:got.N])
	}
	if l := rt.AppendLanesOf(nil, []lane.Ship{marnec}); len(l) != 1 || l[0] != marnecKey {
		t.Fatalf("AppendLanesOf = %v, want the pinned lane", l)
	}
}
