package relay_test

import (
	"fmt"
	"github.com/urbit-relay/relay/relay/route"
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// planetUnderNec is a planet whose chain is star 0x0101, galaxy ~nec.
var planetUnderNec = lane.Ship{Lo: 0x0005_0101}

var (
	planetLane = netip.MustParseAddrPort("203.0.113.40:8000")
	carol      = netip.MustParseAddrPort("203.0.113.50:9000") // a flooding source
)

func peekOf(s lane.Ship, path string) []byte {
	p := scry.NewPeek(scry.Name{Ship: s, Bloq: scry.DefaultBloq, Path: []byte(path)})
	return p.Append(nil)
}

func pageOf(t testing.TB, s lane.Ship, path string) []byte { return pageValue(s, path, "value") }

// pageValue is a one-fragment page at path published by s, holding value.
func pageValue(s lane.Ship, path, value string) []byte {
	p := scry.NewPage(scry.Name{Ship: s, Bloq: scry.DefaultBloq, Path: []byte(path)},
		scry.Data{Total: uint64(len(value)), AuthKind: scry.AuthNone, Frag: []byte(value)})
	return p.Append(nil)
}

// provenDirectLane makes planetLane the proven direct lane of planetUnderNec
// the way a relay learns one: alice's peek goes up to ~nec, whose page names
// the planet's lane as next-hop; the next peek probes that lane beside ~nec,
// and the planet answers there at hop 0.
func provenDirectLane(t *testing.T, f *fixture) {
	t.Helper()
	oneSend(t, f.handle(peekOf(planetUnderNec, "first"), alice), necLane)
	hinted := scry.NewPage(scry.Name{Ship: planetUnderNec, Bloq: scry.DefaultBloq, Path: []byte("first")},
		scry.Data{Total: 5, AuthKind: scry.AuthNone, Frag: []byte("value")})
	hinted.Header.Hops = 1
	if !hinted.SetNextHopAddr(planetLane) {
		t.Fatal("next-hop not encodable")
	}
	oneSend(t, f.handle(hinted.Append(nil), necLane), alice)
	if got := sendsTo(f.handle(peekOf(planetUnderNec, "second"), alice)); len(got) != 2 || got[0] != planetLane || got[1] != necLane {
		t.Fatalf("second peek sent to %v, want [%v %v]", got, planetLane, necLane)
	}
	oneSend(t, f.handle(pageOf(t, planetUnderNec, "second"), planetLane), alice)
	info, ok := f.r.Routes().Info(planetUnderNec)
	if !ok || info.Direct != lane.KeyOf(planetLane) || !info.DirectProven {
		t.Fatalf("direct lane not proven: %+v", info)
	}
}

// TestRefusedRequestsDoNotProbeRoutes is the regression test for requests
// that the pending table refuses (0 datagrams out) still marking the lanes
// they would have gone to as waiting: eight of them, a probe timeout apart,
// used to demote and then delete a planet's proven direct lane, sending
// honest traffic back to the galaxy.
func TestRefusedRequestsDoNotProbeRoutes(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) {
		c.Pending.MaxEntries = 100
		c.Pending.Shards = 1
	})
	provenDirectLane(t, f)
	share := 100 / relay.DefaultPendingSourceDivisor
	for i := 0; i < share; i++ {
		f.handle(peek(t, "~nec", fmt.Sprintf("fill/%d", i), 0), carol)
	}
	for i := 0; i < 8; i++ {
		if s := f.handle(peekOf(planetUnderNec, fmt.Sprintf("refused/%d", i)), carol); len(s) != 0 {
			t.Fatalf("a refused request was sent to %v", sendsTo(s))
		}
		f.now += route.DefaultProbeTimeout
	}
	f.wantDrop(relay.DropPendingPerSource, 8)
	info, _ := f.r.Routes().Info(planetUnderNec)
	if info.Direct != lane.KeyOf(planetLane) || !info.DirectProven {
		t.Fatalf("refused requests changed the route: %+v", info)
	}
	oneSend(t, f.handle(peekOf(planetUnderNec, "honest"), bob), planetLane)
}

// TestAggregatedRequestsDoNotProbeRoutes: requesters joining a pending entry
// send nothing upstream, so they must not count against the lane either.
// The lane's outstanding probe is answered (a page for another name) while
// an entry for a value not grown yet gathers requesters; those used to start
// a probe of their own, whose timeout, with one real one after it, demoted
// the lane (DefaultProvenFailures = 2).
func TestAggregatedRequestsDoNotProbeRoutes(t *testing.T) {
	f := newFixture(t, nil)
	provenDirectLane(t, f)
	oneSend(t, f.handle(peekOf(planetUnderNec, "other"), alice), planetLane)
	oneSend(t, f.handle(peekOf(planetUnderNec, "popular"), alice), planetLane)
	oneSend(t, f.handle(pageOf(t, planetUnderNec, "other"), planetLane), alice)
	for i := 0; i < 8; i++ {
		from := netip.AddrPortFrom(bob.Addr(), uint16(6000+i))
		if s := f.handle(peekOf(planetUnderNec, "popular"), from); len(s) != 0 {
			t.Fatalf("an aggregated request was sent to %v", sendsTo(s))
		}
	}
	f.now += route.DefaultProbeTimeout
	oneSend(t, f.handle(peekOf(planetUnderNec, "second"), alice), planetLane)
	f.now += route.DefaultProbeTimeout
	// One real probe has timed out: one failure, below ProvenFailures.
	oneSend(t, f.handle(peekOf(planetUnderNec, "third"), alice), planetLane)
	if info, _ := f.r.Routes().Info(planetUnderNec); !info.DirectProven {
		t.Fatalf("direct lane demoted by aggregated requests: %+v", info)
	}
}

// TestPlanChangesNothing: a plan that is not committed leaves the table as
// it was, however long its probes have been outstanding; committing it
// starts the probes of the lanes it chose.
func TestPlanChangesNothing(t *testing.T) {
	f := newFixture(t, nil)
	provenDirectLane(t, f)
	rt := f.r.Routes()
	q := route.Query{Rcvr: planetUnderNec, From: lane.KeyOf(alice)}
	before, _ := rt.Info(planetUnderNec)
	changes := rt.Changes()
	for i := 0; i < 10; i++ {
		p := rt.Plan(q, f.now)
		if p.N != 1 || p.Lanes[0] != lane.KeyOf(planetLane) {
			t.Fatalf("plan %d: %v", i, p.Lanes[:p.N])
		}
		f.now += route.DefaultProbeTimeout
	}
	if after, _ := rt.Info(planetUnderNec); after != before || rt.Changes() != changes {
		t.Fatalf("plans changed the route: %+v -> %+v", before, after)
	}
	// Committed probes that go unanswered do demote the lane.
	for i := 0; i < route.DefaultProvenFailures; i++ {
		p := rt.Plan(q, f.now)
		rt.Commit(&p, f.now)
		f.now += route.DefaultProbeTimeout
	}
	p := rt.Plan(q, f.now)
	if p.N != 2 || p.Lanes[0] != lane.KeyOf(planetLane) || p.Lanes[1] != lane.KeyOf(necLane) {
		t.Fatalf("after %d unanswered probes the plan is %v, want the direct lane beside ~nec", route.DefaultProvenFailures, p.Lanes[:p.N])
	}
}

// TestNothingLearnedFromRefusedPokes: a hop-0 poke names its sender, but a
// poke the relay does not send on teaches no lane.
func TestNothingLearnedFromRefusedPokes(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) {
		c.Pending.MaxEntries = 100
		c.Pending.Shards = 1
	})
	share := 100 / relay.DefaultPendingSourceDivisor
	for i := 0; i < share; i++ {
		f.handle(peek(t, "~nec", fmt.Sprintf("fill/%d", i), 0), carol)
	}
	victim := planetUnderNec
	pk := scry.NewPoke(scry.Name{Ship: ship(t, "~nec"), Bloq: 13, Path: []byte("x")},
		scry.Name{Ship: victim, Bloq: 13, Path: []byte("x")}, scry.Data{AuthKind: scry.AuthNone})
	if s := f.handle(pk.Append(nil), carol); len(s) != 0 {
		t.Fatalf("refused poke sent to %v", sendsTo(s))
	}
	if info, ok := f.r.Routes().Info(victim); ok && info.Direct.IsValid() {
		t.Fatalf("a refused poke taught %v for its sender", info.Direct)
	}
	// The same poke, admitted, does teach it.
	if s := f.handle(pk.Append(nil), bob); len(s) != 1 {
		t.Fatalf("admitted poke: sends %v", sendsTo(s))
	}
	if info, _ := f.r.Routes().Info(victim); info.Direct != lane.KeyOf(bob) {
		t.Fatalf("an admitted poke did not teach its sender's lane: %+v", info)
	}
}
