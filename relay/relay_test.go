package relay_test

import (
	"errors"
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

// Lanes of the decision tests.
var (
	selfLane   = netip.MustParseAddrPort("198.51.100.1:13338") // this relay (fronting ~marzod, a star)
	zodLane    = netip.MustParseAddrPort("198.51.100.2:13337") // galaxy ~zod, our sponsor
	necLane    = netip.MustParseAddrPort("198.51.100.3:13338") // galaxy ~nec
	shipLane   = netip.MustParseAddrPort("127.0.0.1:40000")    // ~marzod's own process
	alice      = netip.MustParseAddrPort("203.0.113.10:5000")  // a requester
	bob        = netip.MustParseAddrPort("203.0.113.11:5000")  // another requester
	sponseeLn  = netip.MustParseAddrPort("203.0.113.20:6000")  // a planet under ~marzod
	publisher2 = netip.MustParseAddrPort("203.0.113.30:7000")
)

// fixture drives a relay's decision function directly: no sockets, time
// passed in.
type fixture struct {
	t   testing.TB
	r   *relay.Relay
	out *relay.Reader
	now time.Duration
	// onSend, when set, sees every datagram decided (Batch.Sends).
	onSend func(send)
	// last is the decision of the last datagram handled.
	last *relay.Decision
}

func newFixture(t testing.TB, mod func(*relay.Config)) *fixture {
	t.Helper()
	cfg := relay.Config{
		Ship:     ship(t, "~marzod"),
		Self:     []netip.AddrPort{selfLane},
		Galaxies: map[lane.Ship]netip.AddrPort{ship(t, "~zod"): zodLane, ship(t, "~nec"): necLane},
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, r: r, out: r.NewReader(4), now: time.Second}
}

// handle runs one datagram through the relay and returns copies of what it
// decided to send.
func (f *fixture) handle(pkt []byte, from netip.AddrPort) []send {
	f.t.Helper()
	return f.decide(pkt, func(buf []byte) { f.last = f.r.Handle(buf, from, f.now, f.out) })
}

// decide runs handler on a copy of pkt with GrowRoom spare and returns
// copies of what it decided to send.
func (f *fixture) decide(pkt []byte, handler func(buf []byte)) []send {
	buf := make([]byte, len(pkt), len(pkt)+relay.GrowRoom)
	copy(buf, pkt)
	f.out.Reset()
	handler(buf)
	var sends []send
	public, ship := f.out.Split()
	for _, m := range public {
		sends = append(sends, send{Buf: append([]byte(nil), m.Buf[:m.N]...), To: m.Addr})
		if f.onSend != nil {
			f.onSend(sends[len(sends)-1])
		}
	}
	for _, m := range ship {
		sends = append(sends, send{Buf: append([]byte(nil), m.Buf[:m.N]...), To: f.r.ShipLane(), From: m.Addr})
	}
	return sends
}

// send is a copy of one datagram a relay decided to send, to To; From is
// set for one handed to the fronted ship's device (PortShip), as sent
// from From.
type send struct {
	Buf      []byte
	To, From netip.AddrPort
}

func (f *fixture) snap() relay.Snapshot { return f.r.Counters().Snapshot() }

func (f *fixture) wantDrop(d relay.Drop, n uint64) {
	f.t.Helper()
	if got := f.snap().Drops[d]; got != n {
		f.t.Errorf("drops[%v] = %d, want %d (all: %+v)", d, got, n, f.snap().Drops)
	}
}

func name(t testing.TB, s, path string) scry.Name {
	return scry.Name{Ship: ship(t, s), Bloq: scry.DefaultBloq, Path: []byte(path)}
}

func peek(t testing.TB, rcvr, path string, hops int) []byte {
	p := scry.NewPeek(name(t, rcvr, path))
	p.Header.Hops = uint8(hops)
	return p.Append(nil)
}

func poke(t testing.TB, sndr, rcvr, path string) []byte {
	p := scry.NewPoke(name(t, rcvr, path), name(t, sndr, path), scry.Data{AuthKind: scry.AuthNone, Frag: []byte("hi")})
	return p.Append(nil)
}

func page(t testing.TB, pub, path string, hops int, next netip.AddrPort) []byte {
	p := scry.NewPage(name(t, pub, path), scry.Data{Total: 5, AuthKind: scry.AuthNone, Frag: []byte("value")})
	p.Header.Hops = uint8(hops)
	if next.IsValid() && !p.SetNextHopAddr(next) {
		t.Fatal("next-hop not encodable")
	}
	return p.Append(nil)
}

func parse(t testing.TB, b []byte) scry.Packet {
	t.Helper()
	var p scry.Packet
	if err := p.Parse(b); err != nil {
		t.Fatalf("relay sent a packet that does not parse: %v", err)
	}
	return p
}

func oneSend(t *testing.T, sends []send, to netip.AddrPort) []byte {
	t.Helper()
	if len(sends) != 1 || sends[0].To != to {
		t.Fatalf("sends = %v, want one to %v", sendsTo(sends), to)
	}
	return sends[0].Buf
}

func sendsTo(s []send) []netip.AddrPort {
	var out []netip.AddrPort
	for _, x := range s {
		out = append(out, x.To)
	}
	return out
}

func TestRequestGoesUpTheChainToTheGalaxy(t *testing.T) {
	f := newFixture(t, nil)
	// ~sampel-palnet's sponsor is ~talpur, under galaxy ~pur; we know
	// neither, so nothing routes it.
	if s := f.handle(peek(t, "~sampel-palnet", "a", 0), alice); len(s) != 0 {
		t.Fatalf("sent %v with no route", sendsTo(s))
	}
	f.wantDrop(relay.DropNoRoute, 1)
	// A planet under ~nec (default sponsorship: low 16 bits) goes to ~nec.
	var pl lane.Ship
	pl.Lo = 0x0001_0101 // star ~marnec's planet
	p := scry.NewPeek(scry.Name{Ship: pl, Bloq: 13, Path: []byte("x")})
	b := oneSend(t, f.handle(p.Append(nil), alice), necLane)
	if got := parse(t, b).Header.Hops; got != 1 {
		t.Errorf("forwarded hops = %d, want 1", got)
	}
	if f.snap().Events[relay.EventForwardSends] != 1 || f.r.Pending().Len() != 1 {
		t.Errorf("forwards %d, pending %d", f.snap().Events[relay.EventForwardSends], f.r.Pending().Len())
	}
}

func TestDirectLaneBeatsSponsor(t *testing.T) {
	f := newFixture(t, nil)
	// A hop-0 poke from ~sampel-palnet teaches its direct lane.
	f.handle(poke(t, "~sampel-palnet", "~zod", "ping"), sponseeLn)
	oneSend(t, f.handle(peek(t, "~sampel-palnet", "b", 0), alice), sponseeLn)
	// A relayed poke (hop 1) teaches nothing.
	f.handle(append([]byte(nil), relayedPoke(t, "~dapnep-ronmyl", "~zod")...), bob)
	if _, ok := f.r.Routes().Info(ship(t, "~dapnep-ronmyl")); ok {
		t.Error("learned a direct lane from a relayed poke")
	}
}

func relayedPoke(t *testing.T, sndr, rcvr string) []byte {
	b := poke(t, sndr, rcvr, "r")
	scry.SetHops(b, 1)
	return b
}

func TestHopLimitAndLoops(t *testing.T) {
	f := newFixture(t, nil)
	if s := f.handle(peek(t, "~nec", "a", relay.MaxHops), alice); len(s) != 0 {
		t.Fatal("forwarded a request at the hop limit")
	}
	f.wantDrop(relay.DropHopLimit, 1)
	// The only route to ~nec is the lane the request came from.
	if s := f.handle(peek(t, "~nec", "a", 1), necLane); len(s) != 0 {
		t.Fatal("sent a request back where it came from")
	}
	f.wantDrop(relay.DropLoop, 1)
	// A request at hop 6 goes out at hop 7.
	b := oneSend(t, f.handle(peek(t, "~nec", "b", 6), alice), necLane)
	if parse(t, b).Header.Hops != 7 {
		t.Error("hop count not bumped to 7")
	}
}

func TestSponseeUnknownIsDropped(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane })
	// A planet whose default sponsor is ~marzod (low 16 bits 0x0100).
	var pl lane.Ship
	pl.Lo = 0x0005_0100
	p := scry.NewPeek(scry.Name{Ship: pl, Bloq: 13, Path: []byte("x")})
	if s := f.handle(p.Append(nil), alice); len(s) != 0 {
		t.Fatalf("sent %v for an unknown sponsee", sendsTo(s))
	}
	f.wantDrop(relay.DropSponseeUnknown, 1)
	// Once it pings, it is reachable.
	ping := scry.NewPoke(scry.Name{Ship: ship(t, "~marzod"), Bloq: 13, Path: []byte("ping")},
		scry.Name{Ship: pl, Bloq: 13, Path: []byte("ping")}, scry.Data{AuthKind: scry.AuthNone})
	oneSend(t, f.handle(ping.Append(nil), sponseeLn), shipLane) // handed to the ship, so its lane is learned
	oneSend(t, f.handle(p.Append(nil), alice), sponseeLn)
}

// TestDroppedPingTeachesNothing: with no ship behind the relay, a ping for
// the fronted ship is dropped, and a dropped datagram teaches no lane (an
// attacker's poke naming a sponsee must not divert its traffic).
func TestDroppedPingTeachesNothing(t *testing.T) {
	f := newFixture(t, nil)
	var pl lane.Ship
	pl.Lo = 0x0005_0100 // a planet under ~marzod
	ping := scry.NewPoke(scry.Name{Ship: ship(t, "~marzod"), Bloq: 13, Path: []byte("ping")},
		scry.Name{Ship: pl, Bloq: 13, Path: []byte("ping")}, scry.Data{AuthKind: scry.AuthNone})
	if s := f.handle(ping.Append(nil), sponseeLn); len(s) != 0 {
		t.Fatalf("sent %v", sendsTo(s))
	}
	f.wantDrop(relay.DropOwnShipNoLane, 1)
	if _, ok := f.r.Routes().Info(pl); ok {
		t.Fatal("a dropped ping created a route")
	}
	p := scry.NewPeek(scry.Name{Ship: pl, Bloq: 13, Path: []byte("x")})
	if s := f.handle(p.Append(nil), alice); len(s) != 0 {
		t.Fatalf("sent %v to a lane learned from a dropped ping", sendsTo(s))
	}
}

func TestPageFollowsPendingEntryAndRewritesNext(t *testing.T) {
	f := newFixture(t, nil)
	if s := f.handle(page(t, "~nec", "a", 0, netip.AddrPort{}), necLane); len(s) != 0 {
		t.Fatal("sent an unsolicited page")
	}
	f.wantDrop(relay.DropUnsolicited, 1)

	oneSend(t, f.handle(peek(t, "~nec", "a", 0), alice), necLane)
	b := oneSend(t, f.handle(page(t, "~nec", "a", 0, netip.AddrPort{}), necLane), alice)
	p := parse(t, b)
	if p.Header.Hops != 1 {
		t.Errorf("page hops %d, want 1", p.Header.Hops)
	}
	if next, ok := p.NextHopAddr(); !ok || next != necLane {
		t.Errorf("next-hop %v %v, want %v", next, ok, necLane)
	}
	// The entry is gone: a duplicate page is unsolicited.
	if s := f.handle(page(t, "~nec", "a", 0, netip.AddrPort{}), necLane); len(s) != 0 {
		t.Fatal("answered twice")
	}
	f.wantDrop(relay.DropUnsolicited, 2)
}

// TestPageToOurSponsorNamesOnlyThePublisher: our sponsor ~zod and a
// stranger ask for the same names. A page whose next-hop names the
// publisher's own lane goes to both with it (the sponsor passes it on to
// a stock requester, who stores it as the publisher's lane: ames.hoon
// +ev-update-lane, docs/arvo-lanes.md L3); a page whose next-hop could only
// name the forwarder it came through goes to the stranger with it (the
// seed's step) and to our sponsor with none (the seed's rule against
// fraternizing).
func TestPageToOurSponsorNamesOnlyThePublisher(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pub      lane.Ship
		hops     int
		sponsorN bool // the sponsor's copy carries the next-hop
	}{
		{"publisher's own lane", ship(t, "~nec"), 0, true},
		{"forwarder's lane", planetUnderNec, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			p := scry.NewPeek(scry.Name{Ship: tc.pub, Bloq: scry.DefaultBloq, Path: []byte("a")})
			p.Header.Hops = 1
			f.handle(p.Append(nil), zodLane)
			f.now += 5 * time.Second // past the suppression window, so alice's is forwarded too
			f.handle(peekOf(tc.pub, "a"), alice)
			sends := f.handle(hopPage(t, tc.pub, "a", tc.hops, netip.AddrPort{}), necLane)
			if len(sends) != 2 {
				t.Fatalf("sends %v", sendsTo(sends))
			}
			for _, s := range sends {
				p := parse(t, s.Buf)
				next, has := p.NextHopAddr()
				switch s.To {
				case zodLane:
					if has != tc.sponsorN || (has && next != necLane) {
						t.Errorf("page to our sponsor has next-hop %v %v, want %v", next, has, tc.sponsorN)
					}
				case alice:
					if !has || next != necLane {
						t.Errorf("page to alice has next-hop %v %v", next, has)
					}
				default:
					t.Errorf("page sent to %v", s.To)
				}
				if int(p.Header.Hops) != tc.hops+1 {
					t.Errorf("hops %d", p.Header.Hops)
				}
			}
		})
	}
}

func TestAggregationAndRetransmission(t *testing.T) {
	f := newFixture(t, nil)
	oneSend(t, f.handle(peek(t, "~nec", "a", 0), alice), necLane)
	// A new requester within the suppression window: aggregated.
	if s := f.handle(peek(t, "~nec", "a", 0), bob); len(s) != 0 {
		t.Fatal("forwarded an aggregated request")
	}
	// The same requester again: a retransmission, forwarded.
	oneSend(t, f.handle(peek(t, "~nec", "a", 0), alice), necLane)
	sn := f.snap()
	if sn.Events[relay.EventAggregated] != 1 || sn.Events[relay.EventRetransmits] != 1 {
		t.Errorf("aggregated %d retransmits %d", sn.Events[relay.EventAggregated], sn.Events[relay.EventRetransmits])
	}
	got := sendsTo(f.handle(page(t, "~nec", "a", 0, netip.AddrPort{}), necLane))
	if len(got) != 2 || !(got[0] == alice && got[1] == bob || got[0] == bob && got[1] == alice) {
		t.Errorf("page went to %v, want alice and bob", got)
	}
}

func TestPendingExpiryAndBump(t *testing.T) {
	f := newFixture(t, nil)
	f.handle(peek(t, "~nec", "a", 0), alice)
	f.now += 20 * time.Second
	f.handle(peek(t, "~nec", "a", 0), alice) // bumps the expiry to 50 s
	f.now += 20 * time.Second
	f.r.Expire(f.now)
	oneSend(t, f.handle(page(t, "~nec", "a", 0, netip.AddrPort{}), necLane), alice)

	f.handle(peek(t, "~nec", "b", 0), alice)
	f.now += pit.DefaultTTL + time.Second
	f.r.Expire(f.now)
	if s := f.handle(page(t, "~nec", "b", 0, netip.AddrPort{}), necLane); len(s) != 0 {
		t.Fatal("answered an expired entry")
	}
}

func TestFullTables(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) {
		c.Pending.MaxEntries = 64
		c.Pending.Shards = 1
		c.Pending.MaxRequestersPerEntry = 2
		c.Pending.MaxEntriesPerSource = -1 // one requester fills the table here
	})
	for i := 0; i < 200; i++ {
		f.handle(peek(t, "~nec", string(rune('a'+i%26))+string(rune('a'+i/26)), 0), alice)
		f.now += time.Millisecond
	}
	if n := f.r.Pending().Len(); n > 64 {
		t.Fatalf("pending %d entries, cap 64", n)
	}
	if f.snap().Events[relay.EventEvicted] == 0 {
		t.Error("no evictions counted")
	}
	// Requesters per entry are capped.
	for i := 0; i < 5; i++ {
		f.handle(peek(t, "~nec", "cap", 0), netip.AddrPortFrom(alice.Addr(), uint16(6000+i)))
	}
	f.wantDrop(relay.DropRequestersFull, 3)
}

func TestOwnShip(t *testing.T) {
	f := newFixture(t, nil)
	f.handle(peek(t, "~marzod", "a", 0), alice)
	f.wantDrop(relay.DropOwnShipNoLane, 1)

	f = newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane })
	in := peek(t, "~marzod", "a", 0)
	b := oneSend(t, f.handle(in, alice), shipLane)
	if string(b) != string(in) {
		t.Error("datagram for the fronted ship was altered")
	}
	// Its answer goes out as if from the ship itself: hop 0, no next-hop.
	out := oneSend(t, f.handle(page(t, "~marzod", "a", 0, netip.AddrPort{}), shipLane), alice)
	p := parse(t, out)
	if _, has := p.NextHopAddr(); has || p.Header.Hops != 0 {
		t.Errorf("page from the ship: hops %d next %v", p.Header.Hops, has)
	}
	// The ship's own requests go out unbumped.
	b = oneSend(t, f.handle(peek(t, "~nec", "q", 0), shipLane), necLane)
	if parse(t, b).Header.Hops != 0 {
		t.Error("request from the fronted ship was bumped")
	}
}

func TestDualSendUntilTighterRouteAnswers(t *testing.T) {
	f := newFixture(t, nil)
	pub := "~sampel-palnet"
	f.handle(poke(t, "~talpur", "~zod", "ping"), publisher2) // the sponsor's direct lane
	oneSend(t, f.handle(peek(t, pub, "1", 0), alice), publisher2)
	// The page through ~talpur names the lane past it.
	tight := netip.MustParseAddrPort("203.0.113.99:9999")
	f.handle(page(t, pub, "1", 1, tight), publisher2)
	// Next request: the tight candidate and the known-good route at once.
	got := sendsTo(f.handle(peek(t, pub, "2", 0), alice))
	if len(got) != 2 || got[0] != tight || got[1] != publisher2 {
		t.Fatalf("sent to %v, want [%v %v]", got, tight, publisher2)
	}
	// A late duplicate through the looser route changes nothing...
	f.handle(page(t, pub, "2", 1, tight), publisher2)
	// ...the tight lane's answer proves it; from then on it alone is used.
	f.handle(page(t, pub, "2", 0, netip.AddrPort{}), tight)
	got = sendsTo(f.handle(peek(t, pub, "3", 0), alice))
	if len(got) != 1 || got[0] != tight {
		t.Fatalf("after proof sent to %v, want [%v]", got, tight)
	}
}

func TestLegacyAmesForwarding(t *testing.T) {
	f := newFixture(t, nil)
	// From a planet, not relayed: origin inserted.
	a := scry.NewAmes(ship(t, "~sampel-palnet"), ship(t, "~nec"), 1, 2, []byte{1, 2, 3})
	in := a.Append(nil)
	b := oneSend(t, f.handle(in, alice), necLane)
	var got scry.AmesPacket
	if err := got.Parse(b); err != nil {
		t.Fatal(err)
	}
	if !got.Relayed || got.Origin != alice || len(b) != len(in)+6 {
		t.Errorf("relayed %v origin %v len %d", got.Relayed, got.Origin, len(b))
	}
	// From a galaxy: forwarded as is.
	g := scry.NewAmes(ship(t, "~zod"), ship(t, "~nec"), 1, 2, []byte{1, 2, 3})
	in = g.Append(nil)
	if b := oneSend(t, f.handle(in, alice), necLane); string(b) != string(in) {
		t.Error("galaxy's packet altered")
	}
	// Already relayed: forwarded as is.
	p := scry.NewAmes(ship(t, "~sampel-palnet"), ship(t, "~nec"), 1, 2, []byte{9})
	pb := p.Append(make([]byte, 0, 64))
	pb, err := scry.InsertOrigin(pb, [6]byte{1, 2, 3, 4, 0x39, 0x30})
	if err != nil {
		t.Fatal(err)
	}
	if b := oneSend(t, f.handle(pb, alice), necLane); string(b) != string(pb) {
		t.Error("relayed packet altered")
	}
	if f.snap().Events[relay.EventOriginsInserted] != 1 {
		t.Errorf("origins inserted %d", f.snap().Events[relay.EventOriginsInserted])
	}
}

func TestMalformedInputIsCounted(t *testing.T) {
	f := newFixture(t, nil)
	good := peek(t, "~nec", "a", 0)
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff // body corrupt: bad mug
	f.handle(bad, alice)
	f.wantDrop(relay.DropMalformedMesa, 1)
	f.handle([]byte{0, 0, 0, 0}, alice) // crashes vere; we drop it
	f.handle([]byte{1, 2, 3}, alice)
	f.wantDrop(relay.DropMalformedAmes, 2)
	big := make([]byte, 1500)
	copy(big, good)
	f.handle(big, alice)
	f.wantDrop(relay.DropTooLarge, 1)
	sn := f.snap()
	if sn.TotalIn() != 4 || sn.TotalDrops() != 4 {
		t.Errorf("in %d drops %d", sn.TotalIn(), sn.TotalDrops())
	}
}

func TestHandleAllocatesNothing(t *testing.T) {
	f := newFixture(t, nil)
	req := peek(t, "~nec", "steady/state/path", 0)
	resp := page(t, "~nec", "steady/state/path", 0, netip.AddrPort{})
	rb := make([]byte, len(req), len(req)+relay.GrowRoom)
	pb := make([]byte, len(resp), len(resp)+relay.GrowRoom)
	cycle := func() {
		copy(rb, req)
		f.out.Reset()
		f.r.Handle(rb[:len(req)], alice, f.now, f.out)
		copy(pb, resp)
		f.out.Reset()
		f.r.Handle(pb[:len(resp)], necLane, f.now, f.out)
	}
	cycle()
	if n := testing.AllocsPerRun(1000, cycle); n != 0 {
		t.Fatalf("request+response cycle allocates %v times", n)
	}
	if f.snap().Events[relay.EventAnswered] < 1000 {
		t.Fatalf("answered %d", f.snap().Events[relay.EventAnswered])
	}
}

func TestStrategySwitches(t *testing.T) {
	pub := "~sampel-palnet"
	tight := netip.MustParseAddrPort("203.0.113.99:9999")
	setup := func(f *fixture) {
		f.handle(poke(t, "~talpur", "~zod", "ping"), publisher2)
		f.handle(peek(t, pub, "1", 0), alice)
		f.handle(page(t, pub, "1", 1, tight), publisher2)
	}
	// The simulator's strategies are route rubrics (route.Config.Rubric)
	// and a Withheld rule; these are test doubles of cmd/simnet's.
	single := newFixture(t, func(c *relay.Config) { c.Routes.Rubric = singleRoute{route.Design{}} })
	setup(single)
	if got := sendsTo(single.handle(peek(t, pub, "2", 0), alice)); len(got) != 1 || got[0] != tight {
		t.Errorf("SingleRoute sent to %v, want only the tightest candidate %v", got, tight)
	}
	noHints := newFixture(t, func(c *relay.Config) { c.Routes.Rubric = noHintsRubric{route.Design{}} })
	setup(noHints)
	if got := sendsTo(noHints.handle(peek(t, pub, "2", 0), alice)); len(got) != 1 || got[0] != publisher2 {
		t.Errorf("NoHints sent to %v, want only %v", got, publisher2)
	}
	galaxyOnly := newFixture(t, func(c *relay.Config) {
		c.Galaxies[ship(t, "~pur")] = necLane
		c.Routes.Rubric = galaxyOnlyRubric{route.Design{}}
	})
	galaxyOnly.handle(poke(t, "~talpur", "~zod", "ping"), publisher2)
	if got := sendsTo(galaxyOnly.handle(peek(t, pub, "1", 0), alice)); len(got) != 1 || got[0] != necLane {
		t.Errorf("GalaxyOnly sent to %v, want the galaxy's lane %v", got, necLane)
	}
	frat := newFixture(t, func(c *relay.Config) { c.Withheld = func([]lane.Ship) []lane.Ship { return nil } })
	frat.handle(peek(t, "~nec", "a", 1), zodLane)
	b := oneSend(t, frat.handle(page(t, "~nec", "a", 0, netip.AddrPort{}), necLane), zodLane)
	fp := parse(t, b)
	if next, ok := fp.NextHopAddr(); !ok || next != necLane {
		t.Errorf("Withheld none: page to our sponsor has next-hop %v %v", next, ok)
	}
}

// singleRoute, noHintsRubric and galaxyOnlyRubric are test doubles of the
// simulator's strategies (cmd/simnet/internal/sim/strategy.go).
type singleRoute struct{ route.Design }

func (singleRoute) Choose(cands []route.Candidate, _ route.Candidate) (to [route.MaxTargets]route.Candidate, n int) {
	to[0] = cands[0]
	return to, 1
}

type noHintsRubric struct{ route.Design }

func (noHintsRubric) TakesHints() bool { return false }

type galaxyOnlyRubric struct{ route.Design }

func (g galaxyOnlyRubric) Sponsors(dst []lane.Ship, sp *lane.Sponsors, s, self lane.Ship) []lane.Ship {
	chain := g.Design.Sponsors(dst, sp, s, self)
	out := chain[:0]
	for _, c := range chain {
		if c == s || c == self || c.Class() == lane.Galaxy {
			out = append(out, c)
		}
	}
	return out
}

func TestOneSourceCannotFillThePendingTable(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) {
		c.Pending.MaxEntries = 1000
		c.Pending.Shards = 1
	})
	for i := 0; i < 500; i++ {
		f.handle(peek(t, "~nec", fmt.Sprintf("flood/%d", i), 0), netip.AddrPortFrom(alice.Addr(), uint16(1000+i)))
	}
	if n := f.r.Pending().Len(); n != 1000/relay.DefaultPendingSourceDivisor {
		t.Errorf("one source holds %d entries; want its share, %d", n, 1000/relay.DefaultPendingSourceDivisor)
	}
	f.wantDrop(relay.DropPendingPerSource, 500-1000/relay.DefaultPendingSourceDivisor)
	// Another requester is still served.
	oneSend(t, f.handle(peek(t, "~nec", "legit", 0), bob), necLane)
}

// TestSponseeLaneSurvivesUnansweredRequests: a lane the ship keeps alive by
// pinging is not dropped because requests to it go unanswered (a peek for a
// value not grown yet), only after DirectLaneExpiry of silence.
func TestSponseeLaneSurvivesUnansweredRequests(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane })
	var pl lane.Ship
	pl.Lo = 0x0005_0100 // a planet under ~marzod
	ping := scry.NewPoke(scry.Name{Ship: ship(t, "~marzod"), Bloq: 13, Path: []byte("ping")},
		scry.Name{Ship: pl, Bloq: 13, Path: []byte("ping")}, scry.Data{AuthKind: scry.AuthNone})
	f.handle(ping.Append(nil), sponseeLn)
	for i := 0; i < 40; i++ { // 20 s of unanswered polls
		p := scry.NewPeek(scry.Name{Ship: pl, Bloq: 13, Path: []byte(fmt.Sprintf("not/yet/%d", i))})
		oneSend(t, f.handle(p.Append(nil), alice), sponseeLn)
		f.now += 500 * time.Millisecond
	}
	f.now += route.DefaultDirectLaneExpiry
	p := scry.NewPeek(scry.Name{Ship: pl, Bloq: 13, Path: []byte("after/silence")})
	if s := f.handle(p.Append(nil), alice); len(s) != 0 {
		t.Fatalf("sent to %v after the sponsee fell silent", sendsTo(s))
	}
	f.wantDrop(relay.DropSponseeUnknown, 1)
}

// TestCountersPerOut: each Reader a relay makes counts in a block of its own,
// a Reader made elsewhere counts in the relay's default block, and Snapshot
// sums them all, from any goroutine.
func TestCountersPerOut(t *testing.T) {
	f := newFixture(t, nil)
	other, err := relay.New(relay.Config{Ship: ship(t, "~marzod")})
	if err != nil {
		t.Fatal(err)
	}
	outs := []*relay.Reader{f.r.NewReader(1), f.r.NewReader(1), relay.NewReader(1), other.NewReader(1)}
	done := make(chan struct{})
	for i, out := range outs {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := 0; j <= i; j++ {
				out.Reset()
				f.r.Handle([]byte("hello"), alice, f.now, out)
			}
		}()
	}
	for range outs {
		<-done
	}
	sn := f.snap()
	if want := uint64(1 + 2 + 3 + 4); sn.Drops[relay.DropMalformedAmes] != want || sn.TotalIn() != want || sn.Accounted() != want {
		t.Errorf("malformed %d, in %d, accounted %d; want %d", sn.Drops[relay.DropMalformedAmes], sn.TotalIn(), sn.Accounted(), want)
	}
	if sn := other.Counters().Snapshot(); sn.TotalIn() != 0 {
		t.Errorf("another relay's Reader counted %d datagrams in its own relay", sn.TotalIn())
	}
}

// TestEventNames: every event has a distinct name.
func TestEventNames(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range relay.Events() {
		if n := e.String(); n == "" || n == "unknown" || seen[n] {
			t.Errorf("event %d named %q", e, n)
		}
		seen[e.String()] = true
	}
}

// TestPrefetchedKeysReused: Handle takes the keys Prefetch computed for a
// batch instead of hashing each name again, and decides the same whether
// it does or not (datagrams out of Prefetch's order are hashed again).
func TestPrefetchedKeysReused(t *testing.T) {
	f := newFixture(t, nil)
	const batch = 4
	bufs := make([][]byte, batch)
	fill := func(mk func(i int) []byte) {
		for i := range bufs {
			p := mk(i)
			bufs[i] = append(make([]byte, 0, len(p)+relay.GrowRoom), p...)
		}
	}
	fill(func(i int) []byte { return peek(t, "~nec", fmt.Sprintf("pre/%d", i), 0) })
	f.out.Reset()
	for _, b := range bufs {
		f.r.Prefetch(b, f.out)
	}
	for _, b := range bufs {
		f.r.Handle(b, alice, f.now, f.out)
	}
	if n := f.out.PrefetchedTaken(); n != batch || f.r.Pending().Len() != batch {
		t.Fatalf("%d of %d prefetched keys taken, %d pending", n, batch, f.r.Pending().Len())
	}
	// Pages in the reverse of Prefetch's order: only the last handled,
	// Prefetch's first, takes its key; the rest are hashed again, and all
	// are answered.
	fill(func(i int) []byte { return page(t, "~nec", fmt.Sprintf("pre/%d", i), 0, netip.AddrPort{}) })
	f.out.Reset()
	for _, b := range bufs {
		f.r.Prefetch(b, f.out)
	}
	for i := batch - 1; i >= 0; i-- {
		f.r.Handle(bufs[i], necLane, f.now, f.out)
	}
	if len(f.out.Sends) != batch || f.r.Pending().Len() != 0 || f.out.PrefetchedTaken() != 1 {
		t.Fatalf("%d pages sent, %d pending, %d keys taken; want %d, 0, 1", len(f.out.Sends), f.r.Pending().Len(), f.out.PrefetchedTaken(), batch)
	}
}

// TestConfigValidate: the zero Config is valid, and Validate refuses what
// New refuses, a package's refusal as that package's typed ConfigError.
func TestConfigValidate(t *testing.T) {
	if err := (relay.Config{}).Validate(); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
	bad := []relay.Config{
		{ShipLane: netip.MustParseAddrPort("127.0.0.1:0")},
		{Front: true},
		{Galaxies: map[lane.Ship]netip.AddrPort{lane.ShipFromUint64(0x1234): zodLane}},
		{Galaxies: map[lane.Ship]netip.AddrPort{lane.ShipFromUint64(0): {}}},
		{Pending: pit.Config{MaxEntries: -5}},
		{Routes: route.Config{MaxRoutes: -5}},
	}
	for i, c := range bad {
		err := c.Validate()
		if err == nil {
			t.Errorf("config %d: valid", i)
			continue
		}
		if _, nerr := relay.New(c); nerr == nil || nerr.Error() != err.Error() {
			t.Errorf("config %d: Validate %q, New %v", i, err, nerr)
		}
	}
	var pe *pit.ConfigError
	if err := bad[4].Validate(); !errors.As(err, &pe) || pe.Field != "MaxEntries" {
		t.Errorf("pit's refusal: %v", err)
	}
	var re *route.ConfigError
	if err := bad[5].Validate(); !errors.As(err, &re) || re.Field != "MaxRoutes" {
		t.Errorf("route's refusal: %v", err)
	}
}
