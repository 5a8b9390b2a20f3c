package relay_test

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

// forger is an attacker's address: it pings naming the sponsee, and
// answers what it is sent.
var forger = netip.MustParseAddrPort("203.0.113.66:7000")

// sponseePing is a hop-0 ping from the sponsee of ~marzod to ~marzod; its
// ack is a page for the same name (sponseeAck).
func sponseePing(t *testing.T) []byte { return sponseePingNamed(t, "ping") }

func sponseeAck(t *testing.T) []byte { return page(t, "~marzod", "ping", 0, netip.AddrPort{}) }

// sponseePingNamed is sponseePing with the name path.
func sponseePingNamed(t *testing.T, path string) []byte {
	t.Helper()
	p := scry.NewPoke(scry.Name{Ship: ship(t, "~marzod"), Bloq: 13, Path: []byte(path)},
		scry.Name{Ship: sponseeOfMarzod, Bloq: 13, Path: []byte(path)}, scry.Data{AuthKind: scry.AuthNone})
	return p.Append(nil)
}

// pingSeq numbers the sponsee's pings in pinnedAt: mesa names each
// message (docs/arvo-lanes.md A1), so each ping has a name of its own.
var pingSeq atomic.Int32

// pinnedAt pings from lane at (a new message: a name never used before)
// and has the ship ack it there: the sponsee is vouched for at that lane.
func (f *fixture) pinnedAt(t *testing.T, at netip.AddrPort) {
	t.Helper()
	name := fmt.Sprintf("ping/%d", pingSeq.Add(1))
	pb := sponseePingNamed(t, name)
	wantToShip(t, f.handle(pb, at), at, pb)
	oneSend(t, f.shipSends(page(t, "~marzod", name, 0, netip.AddrPort{}), at), at)
}

// TestFrontReplayedAckMovesNothing: arvo acks a message it acked before
// again, from any lane (ames.hoon +sink:fo-call, "send dupe ack"), and
// vere sends that ack to the lane its pit took from the copy. So a
// replay of the sponsee's acked ping from a forger's lane, acked there
// seconds later, vouches nothing: the sponsee stays where it was. The twin:
// its next ping (a new name) from a new lane moves it.
func TestFrontReplayedAckMovesNothing(t *testing.T) {
	f := newFrontFixture(t)
	pb := sponseePingNamed(t, "flow/0/ack/7")
	ack := page(t, "~marzod", "flow/0/ack/7", 0, netip.AddrPort{})
	wantToShip(t, f.handle(pb, sponseeLn), sponseeLn, pb)
	oneSend(t, f.shipSends(ack, sponseeLn), sponseeLn)
	f.now += 3e9 // past PingAnswerWindow: not one burst
	wantToShip(t, f.handle(pb, forger), forger, pb)
	oneSend(t, f.shipSends(ack, forger), forger) // the dupe ack reaches the forger
	f.reachedAt(t, "replayed", sponseeLn)
	if sn := f.snap(); sn.Events[relay.EventVouchContested] != 1 || sn.Events[relay.EventVouched] != 1 {
		t.Fatalf("vouched %d, contested %d; want 1 and 1", sn.Events[relay.EventVouched], sn.Events[relay.EventVouchContested])
	}
	rebound := netip.MustParseAddrPort("203.0.113.20:6001")
	f.now += 25e9
	f.pinnedAt(t, rebound)
	f.reachedAt(t, "next ping", rebound)
}

// reachedAt checks that a peek for the sponsee from bob goes to lane want.
func (f *fixture) reachedAt(t *testing.T, what string, want netip.AddrPort) {
	t.Helper()
	f.now += 1e6
	path := what + string(rune('a'+int(f.now/1e6)%26))
	s := f.handle(peekOf(sponseeOfMarzod, path), bob)
	if len(s) != 1 || s[0].To != want {
		t.Fatalf("%s: the peek for the sponsee went to %v, want %v", what, sendsTo(s), want)
	}
}

// TestFrontOwnPageVouchesNothing (issue 21, first fronting row): a forged
// ping naming the sponsee, then the forger's peek for a page of the ship's
// own (its public page, or the very name of the ping, whose page answers
// the peek as much as the ping), answered by the ship at the forger's
// lane, vouches nothing: peeks for the sponsee still go to its lane. The
// honest twin: the ship's ack of a ping alone from a new lane (the
// sponsee's, after a NAT rebinding) moves it there.
func TestFrontOwnPageVouchesNothing(t *testing.T) {
	for _, path := range []string{"hello", "ping"} {
		f := newFrontFixture(t)
		f.pinnedAt(t, sponseeLn)
		pb := sponseePing(t)
		wantToShip(t, f.handle(pb, forger), forger, pb)
		own := peek(t, "~marzod", path, 0)
		wantToShip(t, f.handle(own, forger), forger, own)
		oneSend(t, f.shipSends(page(t, "~marzod", path, 0, netip.AddrPort{}), forger), forger)
		f.reachedAt(t, "forged, then "+path, sponseeLn)

		rebound := netip.MustParseAddrPort("203.0.113.20:6001")
		f.now += 25e9
		f.pinnedAt(t, rebound)
		f.reachedAt(t, "rebound", rebound)
	}
}

// TestFrontContestedAck: vere sends a push to every lane that asked for
// its name, so a forger that pinged with the sponsee's ping name just
// before the sponsee gets the ack too. One ack sent to two lanes vouches
// for neither, in either order: the sponsee stays where it was.
func TestFrontContestedAck(t *testing.T) {
	rebound := netip.MustParseAddrPort("203.0.113.20:6001")
	for _, forgerFirst := range []bool{true, false} {
		f := newFrontFixture(t)
		f.pinnedAt(t, sponseeLn)
		f.now += 25e9
		pb := sponseePing(t)
		wantToShip(t, f.handle(pb, forger), forger, pb)
		wantToShip(t, f.handle(pb, rebound), rebound, pb)
		f.now += 1e6 // arvo's turn: one ack for both pings
		order := []netip.AddrPort{rebound, forger}
		if forgerFirst {
			order = []netip.AddrPort{forger, rebound}
		}
		for _, to := range order {
			oneSend(t, f.shipSends(sponseeAck(t), to), to)
		}
		f.reachedAt(t, "contested", sponseeLn)
		if n := f.snap().Events[relay.EventVouchContested]; n != 1 {
			t.Fatalf("forger first %v: contested %d, want 1", forgerFirst, n)
		}
		// The sponsee's next ping, alone, is acked at its new lane.
		f.now += 25e9
		f.pinnedAt(t, rebound)
		f.reachedAt(t, "next ping", rebound)
	}
	// Two pings from two lanes, each acked before the next is handed over,
	// however close together, are two acks, not one contested: the last
	// lane is vouched for.
	f := newFrontFixture(t)
	f.pinnedAt(t, sponseeLn)
	f.pinnedAt(t, rebound)
	f.reachedAt(t, "acked in turn", rebound)
	if n := f.snap().Events[relay.EventVouchContested]; n != 0 {
		t.Fatalf("contested %d, want 0", n)
	}
}

// TestFrontForwardToUnackedPingLaneRefused: vere's driver takes a forged
// ping's lane as the sponsee's before arvo refuses it, so the ship's
// forward to that lane is not its word; its forward to a lane no unacked
// ping came from is.
func TestFrontForwardToUnackedPingLaneRefused(t *testing.T) {
	f := newFrontFixture(t)
	pb := sponseePing(t)
	wantToShip(t, f.handle(pb, forger), forger, pb)
	req := peekOf(sponseeOfMarzod, "a")
	wantToShip(t, f.handle(req, alice), alice, req)
	fwd := scry.NewPeek(scry.Name{Ship: sponseeOfMarzod, Bloq: scry.DefaultBloq, Path: []byte("a")})
	fwd.Header.Hops = 1
	oneSend(t, f.shipSends(fwd.Append(nil), forger), forger)
	if n := f.snap().Events[relay.EventVouchRefused]; n != 1 {
		t.Fatalf("refused %d, want 1", n)
	}
	// The forger's lane is not used; nor the wire's word of the forged
	// ping, once the ship forwards elsewhere.
	oneSend(t, f.shipSends(fwd.Append(nil), sponseeLn), sponseeLn)
	f.reachedAt(t, "forwarded", sponseeLn)
}

// TestFrontPinnedIgnoresWire (issue 21's second and third fronting rows,
// at the decision): once the ship has vouched for the sponsee's lane, the
// forger's pokes naming it, its pages for the sponsee and requests it
// sends for names the sponsee never answers change nothing, long past the
// wire's expiry. The twin: the sponsee's own ping from a new lane, acked,
// moves it.
func TestFrontPinnedIgnoresWire(t *testing.T) {
	f := newFrontFixture(t)
	f.pinnedAt(t, sponseeLn)
	pk := scry.NewPoke(scry.Name{Ship: ship(t, "~nec"), Bloq: 13, Path: []byte("x")},
		scry.Name{Ship: sponseeOfMarzod, Bloq: 13, Path: []byte("x")}, scry.Data{AuthKind: scry.AuthNone})
	for i := 0; i < 10; i++ {
		f.now += route.DefaultProbeTimeout
		f.handle(pk.Append(nil), forger)
		bait := peekOf(sponseeOfMarzod, "bait"+string(rune('a'+i)))
		oneSend(t, f.handle(bait, carol), sponseeLn)
		f.handle(pageOf(t, sponseeOfMarzod, "bait"+string(rune('a'+i))), forger)
	}
	f.now += 10 * route.DefaultDirectLaneExpiry
	f.reachedAt(t, "baited", sponseeLn)
	rebound := netip.MustParseAddrPort("203.0.113.20:6001")
	f.pinnedAt(t, rebound)
	f.reachedAt(t, "rebound", rebound)
}
