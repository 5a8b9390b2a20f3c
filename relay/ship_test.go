package relay_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/relay/route"
	"net/netip"
	"os"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// The fronted ship's lane on its device (relay/front's default address).
var frontShipLane = netip.MustParseAddrPort("169.254.13.37:13338")

// sponseeOfMarzod is a planet under the fronted star ~marzod.
var sponseeOfMarzod = lane.Ship{Lo: 0x0005_0100}

func newFrontFixture(t *testing.T) *fixture {
	return newFixture(t, func(c *relay.Config) {
		c.Front = true
		c.ShipLane = frontShipLane
		c.PublicLane = selfLane
	})
}

// shipSends runs datagram b, sent by the fronted ship to lane to, through
// HandleFromShip and returns copies of what the relay sends.
func (f *fixture) shipSends(b []byte, to netip.AddrPort) []send {
	f.t.Helper()
	return f.decide(b, func(buf []byte) { f.r.HandleFromShip(buf, to, f.now, f.out) })
}

func wantToShip(t *testing.T, sends []send, from netip.AddrPort, orig []byte) {
	t.Helper()
	if len(sends) != 1 || sends[0].To != frontShipLane || sends[0].From != from {
		t.Fatalf("sends = %+v, want one to the ship from %v", sends, from)
	}
	if !bytes.Equal(sends[0].Buf, orig) {
		t.Fatalf("the ship got\n%x\nwant it unchanged\n%x", sends[0].Buf, orig)
	}
}

// TestFrontShipSeesTrueSources: in fronting mode a request for the ship
// reaches it unchanged from the requester's own lane, the relay keeps no
// pending entry for it, and the ship's answer goes to that lane unchanged.
func TestFrontShipSeesTrueSources(t *testing.T) {
	f := newFrontFixture(t)
	req := peek(t, "~marzod", "own", 0)
	wantToShip(t, f.handle(req, alice), alice, req)
	if n := f.r.Pending().Len(); n != 0 {
		t.Fatalf("pending entries %d: the ship answers the requester itself", n)
	}
	pg := page(t, "~marzod", "own", 0, netip.AddrPort{})
	oneSend(t, f.shipSends(pg, alice), alice)
	if s := f.shipSends(pg, alice); !bytes.Equal(s[0].Buf, pg) {
		t.Fatalf("the ship's page was changed on its way out")
	}
	if sn := f.snap(); sn.Events[relay.EventFromShip] != 2 || sn.Events[relay.EventFromShipSent] != 2 || sn.Events[relay.EventToShip] != 1 {
		t.Fatalf("counters: %+v", sn)
	}
}

// TestFrontShipRequestIsAnsweredToShip: the ship's own peek leaves for the
// lane it chose; the page that comes back reaches the ship as it came, from
// the publisher's lane (no hop bump, no next-hop: vere judges for itself).
func TestFrontShipRequestIsAnsweredToShip(t *testing.T) {
	f := newFrontFixture(t)
	req := peek(t, "~nec", "theirs", 0)
	if s := f.shipSends(req, necLane); len(s) != 1 || s[0].To != necLane || !bytes.Equal(s[0].Buf, req) {
		t.Fatalf("the ship's peek: %+v", s)
	}
	pg := page(t, "~nec", "theirs", 0, netip.AddrPort{})
	wantToShip(t, f.handle(pg, necLane), necLane, pg)
	// Another requester of the same name joins the ship's entry (the
	// ship's request is upstream already) and gets the relay's edited
	// page.
	f.shipSends(peek(t, "~nec", "both", 0), necLane)
	if s := f.handle(peek(t, "~nec", "both", 0), alice); len(s) != 0 {
		t.Fatalf("alice's request for a name the ship asked for was sent to %v", sendsTo(s))
	}
	pg = page(t, "~nec", "both", 0, netip.AddrPort{})
	s := f.handle(pg, necLane)
	if len(s) != 2 {
		t.Fatalf("sends %+v, want the ship and alice", s)
	}
	for _, x := range s {
		p := parse(t, x.Buf)
		switch x.To {
		case frontShipLane:
			if !bytes.Equal(x.Buf, pg) || x.From != necLane {
				t.Errorf("the ship got an edited page or a wrong source: %+v", x)
			}
		case alice:
			if next, ok := p.NextHopAddr(); !ok || next != necLane || p.Header.Hops != 1 {
				t.Errorf("alice's page: next %v %v hops %d", next, ok, p.Header.Hops)
			}
		default:
			t.Errorf("page sent to %v", x.To)
		}
	}
}

// TestFrontSponseeGoesToShipAndShipVouches: a request for a sponsee whose
// lane the relay does not know goes to the ship, which forwards it; its
// forward teaches the relay the lane, which the relay then uses itself and
// which a lane learned from the wire does not displace.
func TestFrontSponseeGoesToShipAndShipVouches(t *testing.T) {
	f := newFrontFixture(t)
	req := peekOf(sponseeOfMarzod, "a")
	wantToShip(t, f.handle(req, alice), alice, req)
	fwd := scry.NewPeek(scry.Name{Ship: sponseeOfMarzod, Bloq: scry.DefaultBloq, Path: []byte("a")})
	fwd.Header.Hops = 1
	oneSend(t, f.shipSends(fwd.Append(nil), sponseeLn), sponseeLn)
	pg := pageOf(t, sponseeOfMarzod, "a")
	wantToShip(t, f.handle(pg, sponseeLn), sponseeLn, pg)
	oneSend(t, f.handle(peekOf(sponseeOfMarzod, "b"), bob), sponseeLn)
	// An outsider's hop-0 poke naming the sponsee as its sender, forwarded
	// on to ~nec, does not move the lane the ship vouched for.
	pk := scry.NewPoke(scry.Name{Ship: ship(t, "~nec"), Bloq: 13, Path: []byte("x")},
		scry.Name{Ship: sponseeOfMarzod, Bloq: 13, Path: []byte("x")}, scry.Data{AuthKind: scry.AuthNone})
	oneSend(t, f.handle(pk.Append(nil), carol), necLane)
	oneSend(t, f.handle(peekOf(sponseeOfMarzod, "c"), bob), sponseeLn)
	// A sponsee silent for 5 minutes is still reached at its lane.
	f.now += 5 * 60 * 1e9
	oneSend(t, f.handle(peekOf(sponseeOfMarzod, "d"), bob), sponseeLn)
	if sn := f.snap(); sn.Events[relay.EventVouched] == 0 {
		t.Fatalf("no vouch counted: %+v", sn)
	}
}

// TestFrontPingAnswerVouches: the ship's answer to a sponsee's ping, on the
// lane the ping came from, vouches for that lane.
func TestFrontPingAnswerVouches(t *testing.T) {
	f := newFrontFixture(t)
	ping := scry.NewPoke(scry.Name{Ship: ship(t, "~marzod"), Bloq: 13, Path: []byte("ping")},
		scry.Name{Ship: sponseeOfMarzod, Bloq: 13, Path: []byte("ping")}, scry.Data{AuthKind: scry.AuthNone})
	pb := ping.Append(nil)
	wantToShip(t, f.handle(pb, sponseeLn), sponseeLn, pb)
	before := f.snap().Events[relay.EventVouched]
	oneSend(t, f.shipSends(page(t, "~marzod", "ping", 0, netip.AddrPort{}), sponseeLn), sponseeLn)
	if f.snap().Events[relay.EventVouched] != before+1 {
		t.Fatalf("the ship's ack did not vouch for the sponsee")
	}
	// Past DirectLaneExpiry (no more pings) the lane is still used.
	f.now += route.DefaultDirectLaneExpiry + 1
	oneSend(t, f.handle(peekOf(sponseeOfMarzod, "later"), bob), sponseeLn)
}

// TestFrontLANSponseeAnswered: a sponsee on the operator's LAN (a private
// address, no HintNets) pings the ship, which may answer it there (its
// ack), which vouches for the lane: the relay forwards requests for it
// there, and so may the ship; its pages to outsiders never name the LAN
// lane, and the same lane is refused for any other ship, or once the
// sponsee has moved (pinged and been acked elsewhere).
func TestFrontLANSponseeAnswered(t *testing.T) {
	lan := netip.MustParseAddrPort("10.77.0.5:40000")
	f := newFrontFixture(t)
	ping := scry.NewPoke(scry.Name{Ship: ship(t, "~marzod"), Bloq: 13, Path: []byte("ping")},
		scry.Name{Ship: sponseeOfMarzod, Bloq: 13, Path: []byte("ping")}, scry.Data{AuthKind: scry.AuthNone})
	pb := ping.Append(nil)
	wantToShip(t, f.handle(pb, lan), lan, pb)
	ack := page(t, "~marzod", "ping", 0, netip.AddrPort{})
	oneSend(t, f.shipSends(ack, lan), lan)
	// The relay forwards an outsider's peek for the sponsee to the LAN lane.
	oneSend(t, f.handle(peekOf(sponseeOfMarzod, "out"), bob), lan)
	// The ship's page to an outsider naming the LAN lane leaves without it.
	s := oneSend(t, f.shipSends(page(t, "~marzod", "x", 1, lan), alice), alice)
	sp := parse(t, s)
	if next, ok := sp.NextHopAddr(); ok && next == lan {
		t.Fatalf("the LAN lane left as a next-hop")
	}
	// A forward for another ship to a LAN lane is refused; so are the
	// sponsee's old lane once it pings from elsewhere, and a forward there.
	other := scry.NewPeek(scry.Name{Ship: ship(t, "~nec"), Bloq: scry.DefaultBloq, Path: []byte("v")})
	other.Header.Hops = 1
	before := f.snap().ShipDrops[relay.ShipDropTarget]
	if s := f.shipSends(other.Append(nil), netip.MustParseAddrPort("10.77.0.6:40000")); len(s) != 0 {
		t.Fatalf("a forward to a LAN lane no sponsee has was sent")
	}
	f.now += route.DefaultDirectLaneExpiry + 1
	// the sponsee's next ping, from elsewhere: a new message, a new name
	// (mesa names each message; an ack of the old name there would be a
	// dupe, which moves nothing: vouch.go)
	ping2 := scry.NewPoke(scry.Name{Ship: ship(t, "~marzod"), Bloq: 13, Path: []byte("ping2")},
		scry.Name{Ship: sponseeOfMarzod, Bloq: 13, Path: []byte("ping2")}, scry.Data{AuthKind: scry.AuthNone})
	pb2 := ping2.Append(nil)
	ack2 := page(t, "~marzod", "ping2", 0, netip.AddrPort{})
	wantToShip(t, f.handle(pb2, sponseeLn), sponseeLn, pb2)
	oneSend(t, f.shipSends(ack2, sponseeLn), sponseeLn)
	if s := f.shipSends(ack2, lan); len(s) != 0 {
		t.Fatalf("an answer to the sponsee's old LAN lane was sent after it moved")
	}
	fwd := scry.NewPeek(scry.Name{Ship: sponseeOfMarzod, Bloq: scry.DefaultBloq, Path: []byte("v")})
	fwd.Header.Hops = 1
	if s := f.shipSends(fwd.Append(nil), lan); len(s) != 0 {
		t.Fatalf("a forward to the sponsee's old LAN lane was sent after it moved")
	}
	if got := f.snap().ShipDrops[relay.ShipDropTarget] - before; got != 3 {
		t.Fatalf("bad_target drops %d, want 3", got)
	}
	// The ship's forward for the sponsee to its LAN lane is sent.
	g := newFrontFixture(t)
	wantToShip(t, g.handle(pb, lan), lan, pb)
	oneSend(t, g.shipSends(fwd.Append(nil), lan), lan)
}

// TestFrontNothingPrivateLeaves: a page the ship sends with a loopback
// next-hop leaves with the relay's public lane instead; a relayed legacy
// packet with a private origin likewise; the ship's datagrams to loopback,
// private or our own lanes are dropped.
func TestFrontNothingPrivateLeaves(t *testing.T) {
	f := newFrontFixture(t)
	pg := page(t, "~marzod", "x", 1, netip.MustParseAddrPort("127.0.0.1:13338"))
	s := oneSend(t, f.shipSends(pg, alice), alice)
	sp := parse(t, s)
	if next, ok := sp.NextHopAddr(); !ok || next != selfLane {
		t.Fatalf("next-hop %v %v, want the public lane %v", next, ok, selfLane)
	}
	a := scry.NewAmes(ship(t, "~nec"), sponseeOfMarzod, 0, 0, []byte("content"))
	ab, err := scry.InsertOrigin(a.Append(nil), mustShort(t, "10.1.2.3:4000"))
	if err != nil {
		t.Fatal(err)
	}
	s = oneSend(t, f.shipSends(ab, sponseeLn), sponseeLn)
	var got scry.AmesPacket
	if err := got.Parse(s); err != nil || got.Origin != selfLane {
		t.Fatalf("origin %v (%v), want %v", got.Origin, err, selfLane)
	}
	for _, to := range []string{"127.0.0.1:4000", "10.0.0.5:4000", "192.168.1.1:4000", "169.254.1.1:9", "203.0.113.9:0"} {
		if s := f.shipSends(pg, netip.MustParseAddrPort(to)); len(s) != 0 {
			t.Errorf("the ship's datagram to %s was sent", to)
		}
	}
	if s := f.shipSends(pg, selfLane); len(s) != 0 {
		t.Errorf("the ship's datagram to the relay itself was sent")
	}
	if sn := f.snap(); sn.ShipDrops[relay.ShipDropTarget] != 6 || sn.Events[relay.EventHintsScrubbed] != 2 {
		t.Errorf("counters: drops %v scrubbed %d", sn.ShipDrops, sn.Events[relay.EventHintsScrubbed])
	}
}

// TestPrivateLaneNeverBecomesNextHop: a publisher on a LAN is never named
// to a requester unless the operator declared that network. A relayed page
// naming its LAN lane reaches the requester naming the forwarder it came
// through instead; a hop-0 page from its (pinned) LAN lane reaches it with
// no next-hop, so it goes on asking us.
func TestPrivateLaneNeverBecomesNextHop(t *testing.T) {
	t.Run("hop 0", func(t *testing.T) {
		lan := netip.MustParseAddrPort("192.168.7.8:5000")
		f := newFixture(t, func(c *relay.Config) {
			c.Pinned = map[lane.Ship]netip.AddrPort{planetUnderNec: lan}
		})
		oneSend(t, f.handle(peekOf(planetUnderNec, "lan"), alice), lan)
		s := oneSend(t, f.handle(hopPage(t, planetUnderNec, "lan", 0, netip.AddrPort{}), lan), alice)
		sp := parse(t, s)
		if next, ok := sp.NextHopAddr(); ok {
			t.Errorf("a hop-0 page from a LAN lane named %v", next)
		}
	})
	lan := netip.MustParseAddrPort("192.168.7.7:5000")
	for _, declared := range []bool{false, true} {
		f := newFixture(t, func(c *relay.Config) {
			if declared {
				c.HintNets = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}
			}
		})
		// ~nec's forwarder heard the page from its publisher at a LAN
		// lane and named it.
		oneSend(t, f.handle(peekOf(planetUnderNec, "lan"), alice), necLane)
		s := oneSend(t, f.handle(hopPage(t, planetUnderNec, "lan", 1, lan), necLane), alice)
		sp := parse(t, s)
		// Undeclared, the forwarder it came through is the tightest lane
		// a requester can use.
		want := necLane
		if declared {
			want = lan
		}
		if next, ok := sp.NextHopAddr(); !ok || next != want {
			t.Errorf("declared %v: next-hop %v %v, want %v", declared, next, ok, want)
		}
	}
}

// TestFrontShipSTUN: the ship's STUN request leaves for the galaxy, and only
// the response to it is handed back to the ship.
func TestFrontShipSTUN(t *testing.T) {
	f := newFrontFixture(t)
	tx := [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	r := scry.STUNRequest{TxID: tx}
	req := r.Append(nil)
	oneSend(t, f.shipSends(req, zodLane), zodLane)
	rs := scry.STUNResponse{TxID: tx, Mapped: selfLane}
	resp := rs.Append(nil)
	wantToShip(t, f.handle(resp, zodLane), zodLane, resp)
	if s := f.handle(resp, zodLane); len(s) != 0 {
		t.Fatalf("a repeated response reached the ship: %+v", s)
	}
	rs.TxID = [12]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	other := rs.Append(nil)
	if s := f.handle(other, zodLane); len(s) != 0 {
		t.Fatalf("an unsolicited STUN response reached the ship: %+v", s)
	}
}

// TestNoVectorThatCrashesVereReachesTheShip feeds every reference vector,
// addressed as it is, to a relay in each mode and checks that nothing
// handed to the ship is of the shape that crashes vere's drivers (4-9
// bytes with the relayed bit set: shared/reference/ames).
func TestNoVectorThatCrashesVereReachesTheShip(t *testing.T) {
	for _, front := range []bool{false, true} {
		f := newFixture(t, func(c *relay.Config) {
			c.Ship = ship(t, "~nec")
			c.ShipLane = shipLane
			if front {
				c.Front, c.ShipLane = true, frontShipLane
			}
		})
		n := 0
		for _, file := range []string{"../testdata/ames/ames-vectors.jsonl", "../testdata/ames/ames-malformed.jsonl",
			"../testdata/ames/ames-quirks.jsonl", "../testdata/mesa/mesa-vectors.jsonl",
			"../testdata/mesa/mesa-malformed.jsonl", "../testdata/mesa/mesa-quirks.jsonl"} {
			fh, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var v struct{ Hex string }
				if json.Unmarshal(sc.Bytes(), &v) != nil {
					continue
				}
				b, err := hex.DecodeString(v.Hex)
				if err != nil {
					continue
				}
				n++
				for _, s := range f.handle(b, alice) {
					if s.To == f.r.ShipLane() && len(s.Buf) >= 4 && len(s.Buf) < 10 && s.Buf[3]&0x80 == 0 {
						t.Errorf("front %v: %s: a datagram that crashes vere was handed to the ship: %x", front, file, s.Buf)
					}
				}
			}
			fh.Close()
		}
		if n < 500 {
			t.Fatalf("only %d vectors read", n)
		}
	}
}

func mustShort(t *testing.T, s string) [6]byte {
	b, ok := lane.EncodeShort(netip.MustParseAddrPort(s))
	if !ok {
		t.Fatal("not encodable")
	}
	return b
}

// frontRoundTrip returns a function that runs one fronting-mode round trip
// without sockets: a peek from alice handed to the ship, and the ship's
// 1 KiB page sent back to alice. It fails if either is not decided so.
func frontRoundTrip(tb testing.TB) func() {
	f := newFixture(tb, func(c *relay.Config) {
		c.Front, c.ShipLane, c.PublicLane = true, frontShipLane, selfLane
		c.Amp = amp.Config{Rate: amp.MaxRate, Burst: amp.MaxBurst, NetRate: amp.MaxRate, NetBurst: amp.MaxBurst, ProofLifetime: -1}
	})
	req := peek(tb, "~marzod", "bench/path", 0)
	p := scry.NewPage(name(tb, "~marzod", "bench/path"), scry.Data{Total: 1024, AuthKind: scry.AuthSign, Auth: make([]byte, 64), Frag: make([]byte, 1024)})
	pg := p.Append(nil)
	rb := make([]byte, len(req), len(req)+relay.GrowRoom)
	pb := make([]byte, len(pg), len(pg)+relay.GrowRoom)
	return func() {
		copy(rb, req)
		f.out.Reset()
		f.r.Handle(rb, alice, f.now, f.out)
		if public, ship := f.out.Split(); len(public) != 0 || len(ship) != 1 || ship[0].Addr != alice {
			tb.Fatalf("peek: %d sends, %d to the ship", len(public), len(ship))
		}
		copy(pb, pg)
		f.out.Reset()
		f.r.HandleFromShip(pb, alice, f.now, f.out)
		if len(f.out.Sends) != 1 || f.out.Sends[0].Addr != alice {
			tb.Fatalf("page: %d sends", len(f.out.Sends))
		}
	}
}

// TestFrontPathAllocatesNothing: a datagram to the ship and one from it
// allocate nothing.
func TestFrontPathAllocatesNothing(t *testing.T) {
	rt := frontRoundTrip(t)
	if n := testing.AllocsPerRun(1000, rt); n != 0 {
		t.Fatalf("front round trip allocates %v times", n)
	}
}

// BenchmarkFrontRoundTrip: what fronting mode costs per datagram in the
// core: a request handed to the ship and the ship's page sent on.
func BenchmarkFrontRoundTrip(b *testing.B) {
	rt := frontRoundTrip(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rt()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/datagram")
}

// TestShipLaneModePagesCarryNoNextHop: in ship-lane mode the page that
// answers the ship's own request reaches it with no next-hop, so vere is
// not taught a lane that bypasses the relay it sits behind.
func TestShipLaneModePagesCarryNoNextHop(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane })
	oneSend(t, f.handle(peek(t, "~nec", "mine", 0), shipLane), necLane)
	b := oneSend(t, f.handle(page(t, "~nec", "mine", 0, netip.AddrPort{}), necLane), shipLane)
	p := parse(t, b)
	if next, has := p.NextHopAddr(); has {
		t.Fatalf("the ship was taught next-hop %v", next)
	}
}

// TestPrivateSenderGetsPublicOrigin: a legacy packet from a sender on a
// private network is forwarded with the relay's public lane as its origin,
// or, with no public lane known, with none.
func TestPrivateSenderGetsPublicOrigin(t *testing.T) {
	lan := netip.MustParseAddrPort("192.168.7.7:5000")
	for _, public := range []netip.AddrPort{selfLane, {}} {
		f := newFixture(t, func(c *relay.Config) { c.PublicLane = public })
		a := scry.NewAmes(ship(t, "~sampel-palnet"), ship(t, "~nec"), 1, 2, []byte{1, 2, 3})
		b := oneSend(t, f.handle(a.Append(nil), lan), necLane)
		var got scry.AmesPacket
		if err := got.Parse(b); err != nil {
			t.Fatal(err)
		}
		if public.IsValid() && (!got.Relayed || got.Origin != public) {
			t.Errorf("origin %v relayed %v, want the public lane %v", got.Origin, got.Relayed, public)
		}
		if !public.IsValid() && got.Relayed {
			t.Errorf("origin %v inserted with no public lane known", got.Origin)
		}
	}
}
