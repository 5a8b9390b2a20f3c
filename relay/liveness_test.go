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

// marnec is a star under ~nec, the sponsor of planetUnderNec.
var (
	marnec     = lane.Ship{Lo: 0x0101}
	marnecLane = netip.MustParseAddrPort("203.0.113.60:13337")
)

// TestLaneAliveWhileHeard: polls for values not grown yet go unanswered by
// design; while anything else arrives from the lane (here the planet's own
// peeks, which name no sender and answer nothing), it stays proven and is
// used alone.
// Silence alone demotes it: the same polls with nothing heard put the
// galaxy beside it again.
func TestLaneAliveWhileHeard(t *testing.T) {
	for _, heard := range []bool{true, false} {
		f := newFixture(t, nil)
		provenDirectLane(t, f)
		for i := 0; i < 2*route.DefaultProvenFailures; i++ {
			s := f.handle(peekOf(planetUnderNec, fmt.Sprintf("not/yet/%d", i)), alice)
			if heard && len(s) != 1 {
				t.Fatalf("poll %d: sends %v, want the direct lane alone", i, sendsTo(s))
			}
			if heard {
				f.now += route.DefaultProbeTimeout / 2
				oneSend(t, f.handle(peek(t, "~nec", fmt.Sprintf("mine/%d", i), 0), planetLane), necLane)
			}
			f.now += route.DefaultProbeTimeout
		}
		s := f.handle(peekOf(planetUnderNec, "next"), alice)
		info, _ := f.r.Routes().Info(planetUnderNec)
		if heard && (len(s) != 1 || !info.DirectProven) {
			t.Errorf("heard from: sends %v, direct proven %v; want the direct lane alone", sendsTo(s), info.DirectProven)
		}
		if !heard && (len(s) != 2 || info.DirectProven) {
			t.Errorf("silent: sends %v, direct proven %v; want the galaxy beside it", sendsTo(s), info.DirectProven)
		}
	}
}

// marnecPing is ~marnec's ping to our star's relay, which teaches its lane.
func marnecPing(t *testing.T, f *fixture) {
	t.Helper()
	pk := scry.NewPoke(scry.Name{Ship: ship(t, "~zod"), Bloq: 13, Path: []byte("ping")},
		scry.Name{Ship: marnec, Bloq: 13, Path: []byte("ping")}, scry.Data{AuthKind: scry.AuthNone})
	f.handle(pk.Append(nil), marnecLane)
	if k, ok := f.r.Routes().DirectLane(marnec, f.now); !ok || k != lane.KeyOf(marnecLane) {
		t.Fatalf("~marnec's lane not learned")
	}
}

// TestStockStarIsNotTrustedToForward: a star's lane learned from its pings
// is tried for its planets beside the galaxy, not instead of it (stock vere
// forwards only as a galaxy); unanswered, it is set aside and the galaxy
// carries on alone.
func TestStockStarIsNotTrustedToForward(t *testing.T) {
	f := newFixture(t, nil)
	marnecPing(t, f)
	for i := 0; i < route.DefaultCandidateFailures; i++ {
		s := f.handle(peekOf(planetUnderNec, fmt.Sprintf("lost/%d", i)), alice)
		if len(s) != 2 || s[0].To != marnecLane || s[1].To != necLane {
			t.Fatalf("try %d: sends %v, want ~marnec beside ~nec", i, sendsTo(s))
		}
		f.now += route.DefaultProbeTimeout
	}
	oneSend(t, f.handle(peekOf(planetUnderNec, "after"), alice), necLane)
}

// TestStarThatForwardsIsProven: once a page for a planet below it comes
// back relayed from the star's lane, the star is known to forward and is
// used alone.
func TestStarThatForwardsIsProven(t *testing.T) {
	f := newFixture(t, nil)
	marnecPing(t, f)
	if s := f.handle(peekOf(planetUnderNec, "a"), alice); len(s) != 2 {
		t.Fatalf("sends %v, want ~marnec beside ~nec", sendsTo(s))
	}
	pg := scry.NewPage(scry.Name{Ship: planetUnderNec, Bloq: scry.DefaultBloq, Path: []byte("a")},
		scry.Data{Total: 5, AuthKind: scry.AuthNone, Frag: []byte("value")})
	pg.Header.Hops = 1
	oneSend(t, f.handle(pg.Append(nil), marnecLane), alice)
	oneSend(t, f.handle(peekOf(planetUnderNec, "b"), alice), marnecLane)
	// A hop-0 page from the star's lane for the planet would be the planet
	// itself, not the star forwarding: it proves nothing about ~marnec.
	g := newFixture(t, nil)
	marnecPing(t, g)
	g.handle(peekOf(planetUnderNec, "a"), alice)
	g.handle(pageOf(t, planetUnderNec, "a"), marnecLane)
	g.now += 3 * route.DefaultProbeTimeout
	if s := g.handle(peekOf(lane.Ship{Lo: 0x0006_0101}, "c"), alice); len(s) != 2 {
		t.Fatalf("a hop-0 page proved the star a forwarder: sends %v", sendsTo(s))
	}
}

// TestConfiguredRelayIsTrustedToForward: a star the operator configured as
// a relay is known-good for its planets from the start.
func TestConfiguredRelayIsTrustedToForward(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) {
		c.Relays = map[lane.Ship]netip.AddrPort{marnec: marnecLane}
	})
	oneSend(t, f.handle(peekOf(planetUnderNec, "a"), alice), marnecLane)
	oneSend(t, f.handle(peekOf(marnec, "own"), alice), marnecLane)
}
