package relay_test

import (
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

// decisionRecord is a copy of a relay.Decision, its sends as their lanes.
type decisionRecord struct {
	fromShip  bool
	addressed netip.AddrPort // Decision.To
	toShip    int
	from      netip.AddrPort
	len       int
	kind      relay.Kind
	action    relay.Action
	reason    string
	to        []netip.AddrPort // the public sends' destinations
	shipFrom  []netip.AddrPort // the sends handed to the ship (PortShip): as from
}

// TestShipKinds: the ship's datagrams are decided with the kind Handle
// would count them under.
func TestShipKinds(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) { c.Front, c.ShipLane, c.PublicLane = true, frontShipLane, selfLane })
	stun := stunRequest(1)
	for _, c := range []struct {
		b    []byte
		want relay.Kind
	}{
		{peek(t, "~zod", "k", 0), relay.KindPeek},
		{poke(t, "~marzod", "~zod", "k"), relay.KindPoke},
		{page(t, "~marzod", "k", 0, netip.AddrPort{}), relay.KindPage},
		{legacy(t, "~marzod", "~zod", 100, 1), relay.KindAmes},
		{stun, relay.KindSTUN},
		{[]byte{1, 2}, relay.KindOther},
	} {
		var d *relay.Decision
		f.decide(c.b, func(buf []byte) { d = f.r.HandleFromShip(buf, zodLane, f.now, f.out) })
		if d.Kind != c.want || !d.FromShip || d.To != zodLane {
			t.Errorf("%x: decided as %v from the ship %v to %v, want %v", c.b[:min(8, len(c.b))], d.Kind, d.FromShip, d.To, c.want)
		}
	}
}

// recordDecisions is a DecisionLog that wants the datagrams read while want
// is set and keeps what it is told.
type recordDecisions struct {
	want  atomic.Bool
	asked atomic.Int64
	mu    sync.Mutex
	got   []decisionRecord
}

func (r *recordDecisions) Want() bool {
	r.asked.Add(1)
	return r.want.Load()
}

func (r *recordDecisions) Log(d *relay.Decision) {
	rec := decisionRecord{fromShip: d.FromShip, addressed: d.To, toShip: d.ToShip, from: d.From, len: d.Len, kind: d.Kind, action: d.Action, reason: d.Reason}
	for i, m := range d.Sends {
		if d.Ports[i] == relay.PortShip {
			rec.shipFrom = append(rec.shipFrom, m.Addr)
		} else {
			rec.to = append(rec.to, m.Addr)
		}
	}
	r.mu.Lock()
	r.got = append(r.got, rec)
	r.mu.Unlock()
}

// TestServerDecisions runs a server over the in-memory network with a
// DecisionLog: every datagram is asked about once, and each one wanted is
// told as the relay counted it: forwarded with its target, aggregated,
// dropped with its reason; one not wanted is not told.
func TestServerDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		listen := func(s string) transport.Conn {
			c, err := mem.Listen(netip.MustParseAddrPort(s))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		srvConn := listen("203.0.113.1:13337")
		zod := listen("198.51.100.2:13337")
		defer zod.Close()
		alice, bob := listen("203.0.113.10:5000"), listen("203.0.113.11:5000")
		defer alice.Close()
		defer bob.Close()
		r, err := relay.New(relay.Config{
			Ship: ship(t, "~marzod"), Self: []netip.AddrPort{srvConn.LocalAddr()},
			Galaxies: map[lane.Ship]netip.AddrPort{ship(t, "~zod"): zod.LocalAddr()},
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := &recordDecisions{}
		srv := relay.NewServer(r, []transport.Conn{srvConn}, relay.ServerConfig{Decisions: rec})
		srv.Start()
		defer srv.Close()
		send := func(from transport.Conn, b []byte) {
			t.Helper()
			if _, err := from.WriteBatch([]transport.Message{{Buf: b, N: len(b), Addr: srvConn.LocalAddr()}}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}

		rec.want.Store(true)
		req := peek(t, "~zod", "a", 0)
		send(alice, req)
		send(bob, req) // within the suppress window: aggregated
		send(alice, []byte("hello"))
		noRoute := peek(t, "~sampel-palnet", "b", 0)
		send(alice, noRoute)
		rec.want.Store(false)
		send(alice, []byte("unwanted"))

		want := []decisionRecord{
			{from: alice.LocalAddr(), len: len(req), kind: relay.KindPeek, action: relay.ActionForwarded, to: []netip.AddrPort{zod.LocalAddr()}},
			{from: bob.LocalAddr(), len: len(req), kind: relay.KindPeek, action: relay.ActionAggregated},
			{from: alice.LocalAddr(), len: 5, kind: relay.KindOther, action: relay.ActionDropped, reason: "malformed_ames"},
			{from: alice.LocalAddr(), len: len(noRoute), kind: relay.KindPeek, action: relay.ActionDropped, reason: "no_route"},
		}
		rec.mu.Lock()
		got := slices.Clone(rec.got)
		rec.mu.Unlock()
		if len(got) != len(want) {
			t.Fatalf("told %d decisions, want %d: %+v", len(got), len(want), got)
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.from != w.from || g.len != w.len || g.kind != w.kind || g.action != w.action || g.reason != w.reason || !slices.Equal(g.to, w.to) {
				t.Errorf("decision %d: %+v, want %+v", i, g, w)
			}
		}
		if n := rec.asked.Load(); n != 5 {
			t.Errorf("asked %d times for 5 datagrams", n)
		}
	})
}

// TestActionNames: every action has a name, as the log prints it.
func TestActionNames(t *testing.T) {
	for a, want := range map[relay.Action]string{
		relay.ActionDropped: "dropped", relay.ActionForwarded: "forwarded", relay.ActionAggregated: "aggregated",
		relay.ActionAnswered: "answered", relay.ActionToShip: "to_ship", relay.ActionSTUNAnswered: "stun_answered",
		relay.ActionLaneProven: "lane_proven", relay.Action(200): "unknown",
	} {
		if got := a.String(); got != want {
			t.Errorf("Action(%d) = %q, want %q", a, got, want)
		}
	}
}

// TestServerDecisionsFronting: in fronting mode a request for the ship is
// told as handed to it, and the ship's own datagrams as from the ship with
// the lane they addressed: sent on there, or dropped (bad_target) when
// that lane is the relay's own.
func TestServerDecisionsFronting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		srvConn, err := mem.Listen(netip.MustParseAddrPort("203.0.113.1:13337"))
		if err != nil {
			t.Fatal(err)
		}
		alice, err := mem.Listen(netip.MustParseAddrPort("203.0.113.10:5000"))
		if err != nil {
			t.Fatal(err)
		}
		defer alice.Close()
		relaySide, shipSide := transporttest.NewPipe(frontShipLane, 0)
		defer shipSide.Close()
		r, err := relay.New(relay.Config{
			Ship: ship(t, "~marzod"), Self: []netip.AddrPort{srvConn.LocalAddr()},
			Front: true, ShipLane: frontShipLane, PublicLane: srvConn.LocalAddr(),
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := &recordDecisions{}
		rec.want.Store(true)
		srv := relay.NewServer(r, []transport.Conn{srvConn}, relay.ServerConfig{Ship: relaySide, Decisions: rec})
		srv.Start()
		defer srv.Close()
		write := func(c transport.Conn, b []byte, to netip.AddrPort) {
			t.Helper()
			if _, err := c.WriteBatch([]transport.Message{{Buf: b, N: len(b), Addr: to}}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		req := peek(t, "~marzod", "own", 0)
		write(alice, req, srvConn.LocalAddr())
		pg := page(t, "~marzod", "own", 0, netip.AddrPort{})
		write(shipSide, pg, alice.LocalAddr())
		write(shipSide, pg, srvConn.LocalAddr())

		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.got) != 3 {
			t.Fatalf("told %d decisions, want 3: %+v", len(rec.got), rec.got)
		}
		toShip, sent, bad := rec.got[0], rec.got[1], rec.got[2]
		if toShip.action != relay.ActionToShip || toShip.from != alice.LocalAddr() || toShip.kind != relay.KindPeek || toShip.to != nil ||
			toShip.toShip != 1 || len(toShip.shipFrom) != 1 || toShip.shipFrom[0] != alice.LocalAddr() || toShip.fromShip {
			t.Errorf("request for the ship: %+v", toShip)
		}
		// The ship's datagrams are told with their real kind (they were
		// all "other" when the kind was read off the In counters, which
		// do not count them).
		if sent.action != relay.ActionForwarded || !slices.Equal(sent.to, []netip.AddrPort{alice.LocalAddr()}) || sent.from.IsValid() ||
			!sent.fromShip || sent.addressed != alice.LocalAddr() || sent.toShip != 0 || sent.kind != relay.KindPage {
			t.Errorf("the ship's page: %+v", sent)
		}
		if bad.action != relay.ActionDropped || bad.reason != "bad_target" || bad.to != nil ||
			!bad.fromShip || bad.addressed != srvConn.LocalAddr() || bad.kind != relay.KindPage {
			t.Errorf("the ship's datagram to the relay: %+v", bad)
		}
	})
}
