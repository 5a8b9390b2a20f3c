package sim

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// The stock model's rules, one test each; every test fails if its rule is
// taken out of stock.go. Ships: galaxy 5, its star 773 (5 + 256·3) and
// planet 590597 (773 + 65536·9); galaxy 7, its star 519 and planet 262663.
var (
	tGal, tStar, tPlanet    = lane.ShipFromUint64(5), lane.ShipFromUint64(773), lane.ShipFromUint64(590597)
	tGal2, tStar2, tPlanet2 = lane.ShipFromUint64(7), lane.ShipFromUint64(519), lane.ShipFromUint64(262663)

	tLanes = map[lane.Ship]netip.AddrPort{
		tGal: ap("11.0.0.5:31337"), tStar: ap("12.0.0.3:31337"), tPlanet: ap("13.0.0.9:31337"),
		tGal2: ap("21.0.0.7:31337"), tStar2: ap("22.0.0.2:31337"), tPlanet2: ap("23.0.0.4:31337"),
	}
	tRelay = ap("30.0.0.1:31337") // some relay's lane, neither the planet's nor its galaxy's
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func tGalaxyOf(s lane.Ship) lane.Ship {
	for s.Class() != lane.Galaxy {
		s = s.Sponsor()
	}
	return s
}

func tLaneOf(s lane.Ship) netip.AddrPort { return tLanes[s] }

// newTestStock is planet2's stock requester (galaxy 7), booted at 0 with
// arvo's retry timer first due at retry.
func newTestStock(retry time.Duration) *stockShip {
	return newStockShip(tPlanet2, tLaneOf, tGalaxyOf, retry)
}

func targets(dgs []endpoint.Datagram) []netip.AddrPort {
	var out []netip.AddrPort
	for _, d := range dgs {
		out = append(out, d.To)
	}
	return out
}

// page is rcvr's page for path as it reaches the requester: hops, and a
// next-hop if next is valid.
func page(t *testing.T, rcvr lane.Ship, path string, hops uint8, next netip.AddrPort) []byte {
	t.Helper()
	p := scry.NewPage(scry.Name{Ship: rcvr, Bloq: scry.DefaultBloq, Path: []byte(path)}, scry.Data{Total: 1, AuthKind: scry.AuthNone, Frag: []byte("x")})
	p.Header.Hops = hops
	if next.IsValid() && !p.SetNextHopAddr(next) {
		t.Fatal("next-hop does not encode")
	}
	return p.Append(nil)
}

func TestStockUpdateLane(t *testing.T) {
	other := ap("13.0.0.99:31337")
	type held struct {
		has  bool
		hop  int
		lane netip.AddrPort
	}
	cases := []struct {
		name string
		held held
		hop  int
		next netip.AddrPort
		want held
	}{
		{"hop 0 sets the lane it came from, direct", held{}, 0, netip.AddrPort{}, held{true, 0, tRelay}},
		{"hop 0 replaces an indirect lane", held{true, 1, other}, 0, netip.AddrPort{}, held{true, 0, tRelay}},
		{"relayed without next-hop keeps nothing new", held{}, 1, netip.AddrPort{}, held{}},
		{"relayed without next-hop keeps a direct lane", held{true, 0, other}, 2, netip.AddrPort{}, held{true, 0, other}},
		{"relayed with next-hop, nothing held", held{}, 1, other, held{true, 1, other}},
		{"relayed with next-hop replaces an indirect lane", held{true, 2, tRelay}, 1, other, held{true, 1, other}},
		{"relayed with the direct lane as next-hop keeps it direct", held{true, 0, other}, 1, other, held{true, 0, other}},
		{"relayed with another next-hop un-tightens a direct lane", held{true, 0, other}, 2, tRelay, held{true, 2, tRelay}},
	}
	for _, c := range cases {
		s := newTestStock(time.Hour)
		p := s.peer(tPlanet)
		p.has, p.hop, p.lane = c.held.has, c.held.hop, c.held.lane
		s.updateLane(tPlanet, tRelay, c.hop, c.next, c.next.IsValid(), true, 0)
		if got := (held{p.has, p.hop, p.lane}); got != c.want {
			t.Errorf("%s: lane %+v, want %+v", c.name, got, c.want)
		}
	}
	// A galaxy's lane never changes.
	s := newTestStock(time.Hour)
	s.updateLane(tGal, tRelay, 0, netip.AddrPort{}, false, true, 0)
	if s.peer(tGal).has {
		t.Error("a galaxy's lane was learned from a page")
	}
	// Un-tightening is counted.
	s = newTestStock(time.Hour)
	s.updateLane(tPlanet, other, 0, netip.AddrPort{}, false, true, 0)
	s.updateLane(tPlanet, tRelay, 2, tRelay, true, true, 0)
	if s.stats.Untightened != 1 || s.stats.Retightened != 1 {
		t.Errorf("stats %+v, want one un-tightening and one direct lane learned", s.stats)
	}
}

func TestStockMakeLanes(t *testing.T) {
	direct := tLanes[tPlanet]
	cases := []struct {
		name    string
		has     bool
		hop     int
		contact time.Duration
		now     time.Duration
		want    []netip.AddrPort
	}{
		{"no lane: the peer's galaxy", false, 0, 0, 0, []netip.AddrPort{tLanes[tGal]}},
		{"indirect lane: it and the galaxy", true, 1, 0, 0, []netip.AddrPort{tRelay, tLanes[tGal]}},
		{"direct and live: the lane alone", true, 0, 0, ArvoDeadAfter - time.Millisecond, []netip.AddrPort{direct}},
		{"direct and dead: the lane and the galaxy", true, 0, 0, ArvoDeadAfter, []netip.AddrPort{direct, tLanes[tGal]}},
	}
	for _, c := range cases {
		s := newTestStock(time.Hour)
		if c.has {
			l := direct
			if c.hop > 0 {
				l = tRelay
			}
			p := s.peer(tPlanet)
			p.has, p.hop, p.lane, p.lastContact = true, c.hop, l, c.contact
		}
		if got := s.makeLanes(tPlanet, c.now); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// The galaxy is the peer's, whatever ours is; never the peer's star.
	s := newTestStock(time.Hour)
	if got := s.makeLanes(tStar, 0); !slices.Equal(got, []netip.AddrPort{tLanes[tGal]}) {
		t.Errorf("to a star of galaxy 5: %v, want galaxy 5's lane", got)
	}
	// get-sponsor gives no galaxy when we are it.
	g := newStockShip(tGal2, tLaneOf, tGalaxyOf, time.Hour)
	if got := g.makeLanes(tPlanet2, 0); len(got) != 0 {
		t.Errorf("galaxy 7 asking its own planet with no lane: %v, want none", got)
	}
}

func TestStockVereResends(t *testing.T) {
	s := newTestStock(10 * time.Minute)
	out := s.tick(0, nil) // boot: pings and STUN, not counted below
	out = s.peek(tPlanet, "v", 0, nil, out[:0])
	if got := targets(out); !slices.Equal(got, []netip.AddrPort{tLanes[tGal]}) {
		t.Fatalf("first send to %v, want the galaxy", got)
	}
	sends := 1
	for at := time.Second; at <= 20*time.Second; at += 100 * time.Millisecond {
		for _, d := range s.tick(at, nil) {
			var p scry.Packet
			if p.Parse(d.Buf) == nil && p.Header.Type == scry.TypePeek {
				sends++
			}
		}
	}
	if sends != 1+VereResends {
		t.Errorf("%d sends in 20 s, want 1 and %d re-sends", sends, VereResends)
	}
	// A second %push while vere holds the name is dropped.
	s = newTestStock(500 * time.Millisecond)
	s.tick(0, nil)
	s.peek(tPlanet, "v", 0, nil, nil)
	for _, d := range s.tick(500*time.Millisecond, nil) {
		var p scry.Packet
		if p.Parse(d.Buf) == nil && p.Header.Type == scry.TypePeek {
			t.Error("arvo's re-push went out while vere held the request")
		}
	}
}

func TestStockArvoRetry(t *testing.T) {
	s := newTestStock(ArvoRetryInterval)
	s.tick(0, nil)
	s.peek(tPlanet, "v", 0, nil, nil)
	for at := time.Second; at < ArvoRetryInterval; at += time.Second {
		s.tick(at, nil)
	}
	// vere has forgotten the request; a direct lane learned meanwhile
	// (from a ping) is used by arvo's re-push.
	s.updateLane(tPlanet, tLanes[tPlanet], 0, netip.AddrPort{}, false, false, ArvoRetryInterval-time.Second)
	s.peer(tPlanet).lastContact = ArvoRetryInterval - time.Second
	var peeks []netip.AddrPort
	for _, d := range s.tick(ArvoRetryInterval, nil) {
		var p scry.Packet
		if p.Parse(d.Buf) == nil && p.Header.Type == scry.TypePeek {
			peeks = append(peeks, d.To)
		}
	}
	if !slices.Equal(peeks, []netip.AddrPort{tLanes[tPlanet]}) {
		t.Errorf("re-push at 2 min to %v, want the direct lane", peeks)
	}
	if s.stats.ArvoRetries != 1 {
		t.Errorf("ArvoRetries %d, want 1", s.stats.ArvoRetries)
	}
}

func TestStockFirstCopyOnly(t *testing.T) {
	s := newTestStock(time.Hour)
	s.tick(0, nil)
	answers := 0
	var got endpoint.Response
	s.peek(tPlanet, "v", 0, func(r endpoint.Response) { answers++; got = r }, nil)
	// The galaxy's copy comes first, naming a relay; the direct copy
	// after it never reaches arvo.
	if _, handled := s.handle(page(t, tPlanet, "v", 2, tRelay), tLanes[tGal], time.Second, nil); !handled {
		t.Fatal("page not taken")
	}
	s.handle(page(t, tPlanet, "v", 0, netip.AddrPort{}), tLanes[tPlanet], time.Second+time.Millisecond, nil)
	if answers != 1 || got.Hops != 2 {
		t.Errorf("%d answers, hops %d; want one, from the first copy", answers, got.Hops)
	}
	if p := s.peer(tPlanet); p.hop != 2 || p.lane != tRelay {
		t.Errorf("lane %+v, want the first copy's next-hop", *p)
	}
	if s.stats.LateRelayed != 0 || s.stats.LateCopies != 1 {
		t.Errorf("LateRelayed %d, LateCopies %d for a hop-0 late copy; want 0 and 1", s.stats.LateRelayed, s.stats.LateCopies)
	}
	// A late relayed copy naming another lane than a direct one held is
	// counted as one that would have un-tightened.
	s = newTestStock(time.Hour)
	s.tick(0, nil)
	s.peek(tPlanet, "w", 0, nil, nil)
	s.handle(page(t, tPlanet, "w", 0, netip.AddrPort{}), tLanes[tPlanet], time.Second, nil)
	s.handle(page(t, tPlanet, "w", 2, tRelay), tLanes[tGal], 2*time.Second, nil)
	if s.stats.LateRelayed != 1 || s.stats.LateWouldUntighten != 1 || s.stats.LateCopies != 1 || !s.direct(tPlanet) {
		t.Errorf("stats %+v, direct %v; want the late copy counted and the lane kept", s.stats, s.direct(tPlanet))
	}
}

func TestStockKeepalive(t *testing.T) {
	s := newTestStock(time.Hour)
	kinds := func(dgs []endpoint.Datagram) (pings, stuns []netip.AddrPort) {
		for _, d := range dgs {
			if scry.IsSTUN(d.Buf) {
				stuns = append(stuns, d.To)
			} else {
				pings = append(pings, d.To)
			}
		}
		slices.SortFunc(pings, netip.AddrPort.Compare)
		return pings, stuns
	}
	chain := []netip.AddrPort{tLanes[tStar2], tLanes[tGal2]}
	slices.SortFunc(chain, netip.AddrPort.Compare)
	galaxy := []netip.AddrPort{tLanes[tGal2]}
	// Each round of pings is a new message, its ack named by its number.
	ack := func(sp lane.Ship, at time.Duration, seq int) {
		s.handle(page(t, sp, fmt.Sprintf("ping/%s/%d", tPlanet2, seq), 0, netip.AddrPort{}), tLanes[sp], at, nil)
	}
	pings, stuns := kinds(s.tick(0, nil))
	if !slices.Equal(pings, chain) || !slices.Equal(stuns, galaxy) {
		t.Fatalf("at boot pings %v, STUN %v; want the chain pinged and the galaxy STUNned", pings, stuns)
	}
	// A ping is a request: re-sent until its ack comes.
	if pings, _ := kinds(s.tick(time.Second, nil)); !slices.Equal(pings, chain) {
		t.Errorf("unacked pings re-sent to %v, want the chain", pings)
	}
	ack(tStar2, 1100*time.Millisecond, 1)
	ack(tGal2, 1100*time.Millisecond, 1)
	if pings, _ := kinds(s.tick(2*time.Second, nil)); len(pings) != 0 {
		t.Errorf("acked pings re-sent to %v", pings)
	}
	// No STUN answer yet: the %nat plan pings again.
	pings, _ = kinds(s.tick(STUNInterval, nil))
	if !slices.Equal(pings, chain) {
		t.Errorf("pings at 25 s without STUN: %v, want the chain", pings)
	}
	ack(tStar2, STUNInterval+100*time.Millisecond, 2)
	ack(tGal2, STUNInterval+100*time.Millisecond, 2)
	resp := scry.STUNResponse{Mapped: tLanes[tPlanet2]}
	s.handle(resp.Append(nil), tLanes[tGal2], STUNInterval+time.Second, nil)
	pings, stuns = kinds(s.tick(2*STUNInterval, nil))
	if len(pings) != 0 || !slices.Equal(stuns, galaxy) {
		t.Errorf("once STUN works: pings %v, STUN %v; want STUN to the galaxy alone", pings, stuns)
	}
	// STUN shows a new lane: %once pings the chain.
	resp.Mapped = ap("23.0.0.4:40001")
	out, _ := s.handle(resp.Append(nil), tLanes[tGal2], 2*STUNInterval+time.Second, nil)
	if pings, _ := kinds(out); !slices.Equal(pings, chain) {
		t.Errorf("after a new lane: pings %v, want the chain", pings)
	}
}

func TestStockProposed(t *testing.T) {
	s := newTestStock(time.Hour)
	s.proposed = true
	if got := s.makeLanes(tPlanet, 0); !slices.Equal(got, []netip.AddrPort{tLanes[tStar]}) {
		t.Errorf("proposal, no lane: %v, want the peer's sponsor", got)
	}
	p := s.peer(tPlanet)
	p.has, p.hop, p.lane, p.lastContact = true, 0, tLanes[tPlanet], 0
	s.updateLane(tPlanet, tRelay, 2, tRelay, true, true, ArvoDeadAfter-time.Second)
	if !s.direct(tPlanet) {
		t.Error("proposal: a live direct lane was replaced by a relay's next-hop")
	}
	s.updateLane(tPlanet, tRelay, 2, tRelay, true, true, ArvoDeadAfter)
	if s.direct(tPlanet) {
		t.Error("proposal: a dead peer's direct lane was kept")
	}
	// Once STUN works, it pings its own sponsor every 25 s.
	s.tick(0, nil)
	for _, sp := range []lane.Ship{tStar2, tGal2} {
		s.handle(page(t, sp, "ping/"+tPlanet2.String()+"/1", 0, netip.AddrPort{}), tLanes[sp], 100*time.Millisecond, nil)
	}
	resp := scry.STUNResponse{Mapped: tLanes[tPlanet2]}
	s.handle(resp.Append(nil), tLanes[tGal2], time.Second, nil)
	var pings []netip.AddrPort
	for _, d := range s.tick(STUNInterval, nil) {
		if !scry.IsSTUN(d.Buf) {
			pings = append(pings, d.To)
		}
	}
	if !slices.Equal(pings, []netip.AddrPort{tLanes[tStar2]}) {
		t.Errorf("proposal pings %v, want our sponsor's lane", pings)
	}
}

func TestVereGalaxyForwards(t *testing.T) {
	g := newVereGalaxy(tGal, tGalaxyOf)
	requester := ap("40.0.0.1:31337")
	peek := func(rcvr lane.Ship, path string) []byte {
		p := scry.NewPeek(scry.Name{Ship: rcvr, Bloq: scry.DefaultBloq, Path: []byte(path)})
		return p.Append(nil)
	}
	// Unknown lane: dropped.
	if out, handled := g.handle(peek(tPlanet, "a"), requester, 0, nil); !handled || len(out) != 0 {
		t.Errorf("peek for a sponsee of unknown lane: %d sends, handled %v; want dropped", len(out), handled)
	}
	// The planet's hop-0 ping teaches its lane (and goes on to the core).
	if _, handled := g.handle(endpoint.PingWire(tPlanet, tGal, 1), tLanes[tPlanet], 0, nil); handled {
		t.Error("a ping was kept from the galaxy's core")
	}
	out, _ := g.handle(peek(tPlanet, "a"), requester, time.Second, nil)
	if len(out) != 1 || out[0].To != tLanes[tPlanet] {
		t.Fatalf("forwarded to %v, want the planet's lane", targets(out))
	}
	var fw scry.Packet
	if fw.Parse(out[0].Buf) != nil || fw.Header.Hops != 1 {
		t.Errorf("forwarded peek hops %d, want 1", fw.Header.Hops)
	}
	// Another galaxy's ship: not forwarded, even with a lane.
	g.handle(endpoint.PingWire(tPlanet2, tGal, 1), tLanes[tPlanet2], 0, nil)
	if out, _ := g.handle(peek(tPlanet2, "b"), requester, time.Second, nil); len(out) != 0 {
		t.Error("forwarded a peek for another galaxy's ship")
	}
	// The page goes back with the hop raised and the planet's lane as
	// next-hop, to every requester of the entry.
	other := ap("41.0.0.1:31337")
	g.handle(peek(tPlanet, "a"), other, 2*time.Second, nil)
	out, _ = g.handle(page(t, tPlanet, "a", 0, netip.AddrPort{}), tLanes[tPlanet], 2*time.Second, nil)
	if got := targets(out); !slices.Equal(got, []netip.AddrPort{requester, other}) {
		t.Fatalf("page to %v, want both requesters", got)
	}
	var pg scry.Packet
	if pg.Parse(out[0].Buf) != nil || pg.Header.Hops != 1 {
		t.Fatalf("page hops %d, want 1", pg.Header.Hops)
	}
	if next, ok := pg.NextHopAddr(); !ok || lane.Canon(next) != tLanes[tPlanet] {
		t.Errorf("next-hop %v, want the lane the page came from", next)
	}
	// A pending entry lasts VerePitExpiry.
	g.handle(peek(tPlanet, "c"), requester, 0, nil)
	if out, _ := g.handle(page(t, tPlanet, "c", 0, netip.AddrPort{}), tLanes[tPlanet], VerePitExpiry+time.Second, nil); len(out) != 0 {
		t.Error("a page went back on an expired entry")
	}
}

// TestStockNetwork runs stock ships on a small network: today's stock
// galaxies answer and tighten in one round trip; relays at stars, which
// stock ships inform only by their boot pings, still know their sponsees
// minutes later, since the star behind each relay acked those pings and
// so pinned their lanes (relay/vouch.go, at a lane): no request is
// dropped for an unknown sponsee (before the relay took the ship's ack as
// its word at a lane, the pings' lanes expired after two minutes and such
// requests were dropped).
func TestStockNetwork(t *testing.T) {
	for _, c := range []struct {
		st      Strategy
		unknown bool
	}{
		{Strategy{VereGalaxies: true, Requester: RequesterStock}, false},
		{Strategy{Requester: RequesterStock}, false},
		{Strategy{Requester: RequesterProposed}, false},
	} {
		n, err := New(Config{Seed: 3, Ships: 600, NATFraction: 0.3, Strategy: c.st})
		if err != nil {
			t.Fatal(err)
		}
		n.RunUntil(30 * time.Second)
		ships := n.Ships()
		var rq, rcvrs, late []int
		for i := range ships {
			if !ships[i].Host && !ships[i].NAT && ships[i].Class == lane.Planet {
				switch {
				case len(rq) < 20:
					rq = append(rq, i)
				case len(rcvrs) < 20:
					rcvrs = append(rcvrs, i)
				case len(late) < 20:
					late = append(late, i)
				}
			}
		}
		answered, direct := 0, 0
		for k := range rq {
			for j := range 2 {
				path := string(rune('a'+j)) + "/" + ships[rcvrs[k]].ID.String()
				n.Publish(rcvrs[k], path, []byte("v"))
				at := 30*time.Second + time.Duration(j)*3*time.Second + time.Duration(k)*10*time.Millisecond
				n.At(at, func() {
					if err := n.Peek(rq[k], rcvrs[k], path, RequestTimeoutTest, func(r Result) {
						if !r.Lost {
							answered++
						}
					}); err != nil {
						t.Error(err)
					}
				})
			}
		}
		n.RunUntil(3 * time.Minute)
		for k := range rq {
			if n.Direct(rq[k], rcvrs[k]) {
				direct++
			}
		}
		if answered != 2*len(rq) || direct != len(rq) {
			t.Errorf("%+v: %d of %d answered, %d of %d direct after a round trip", c.st, answered, 2*len(rq), direct, len(rq))
		}
		for k := range rq {
			path := "late/" + ships[late[k]].ID.String()
			n.Publish(late[k], path, []byte("v"))
			n.Peek(rq[k], late[k], path, RequestTimeoutTest, func(Result) {})
		}
		// Minutes after boot, past the wire's two-minute expiry of the
		// lanes relays at stars learned from their sponsees' boot pings:
		// ask receivers nobody asked before.
		n.RunUntil(4 * time.Minute)
		unknown := n.RelayTotals().Drops[relay.DropSponseeUnknown]
		t.Logf("%+v: sponsee unknown %d, stock %+v", c.st, unknown, n.StockStats())
		if (unknown > 0) != c.unknown {
			t.Errorf("%+v: relays dropped %d requests for an unknown sponsee", c.st, unknown)
		}
	}
}

// RequestTimeoutTest is the tests' request timeout.
const RequestTimeoutTest = 30 * time.Second
