package route

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// TestConfiguredIsTheTablesLanes: Configured answers from the lanes the
// table routes by (SetStatic, SetStaticLane, SetRelays), one owner: a lane
// stops being configured when the table stops routing by it.
func TestConfiguredIsTheTablesLanes(t *testing.T) {
	r := newTable(t)
	gal, rel, other := key("198.51.100.7:7"), key("198.51.100.8:8"), key("198.51.100.9:9")
	r.SetStatic(map[lane.Ship]lane.Key{nec: gal})
	r.SetRelays(map[lane.Ship]lane.Key{marnec: rel})
	for _, c := range []struct {
		k    lane.Key
		want bool
	}{{gal, true}, {rel, true}, {other, false}} {
		if got := r.Configured(c.k); got != c.want {
			t.Errorf("Configured(%v) = %v, want %v", c.k, got, c.want)
		}
	}
	r.SetStaticLane(planet, other)
	if !r.Configured(other) || !r.Configured(gal) || !r.Configured(rel) {
		t.Errorf("SetStaticLane: a lane added or kept is not configured")
	}
	r.SetStaticLane(nec, lane.Key{})
	if r.Configured(gal) {
		t.Errorf("a removed lane is still configured")
	}
	if tg := r.Select(nec, lane.Key{}, 0); tg.N > 0 && tg.Lanes[0] == gal {
		t.Errorf("the table still routes by a removed lane")
	}
	r.SetRelays(nil)
	if r.Configured(rel) || !r.Configured(other) {
		t.Errorf("SetRelays(nil): relays' lanes configured %v, static's %v", r.Configured(rel), r.Configured(other))
	}
}

// TestRevertPin: RevertPin puts a pin back on the lane its last Pin
// replaced, or unpins a ship whose pin replaced none; twice is once.
func TestRevertPin(t *testing.T) {
	r := newTable(t)
	a, b := key("203.0.113.10:10"), key("203.0.113.11:11")
	r.RevertPin(planet) // nothing pinned: nothing happens
	if _, ok := r.PinnedLane(planet); ok {
		t.Fatal("RevertPin pinned an unpinned ship")
	}
	r.Pin(planet, a)
	r.Pin(planet, b)
	r.RevertPin(planet)
	if k, ok := r.PinnedLane(planet); !ok || k != a {
		t.Fatalf("reverted to %v %v, want %v", k, ok, a)
	}
	r.RevertPin(planet)
	if k, _ := r.PinnedLane(planet); k != a {
		t.Fatalf("a second revert moved the pin to %v", k)
	}
	r.Pin(planet, b)
	if k, _ := r.PinnedLane(planet); k != b {
		t.Fatalf("pinned at %v, want %v", k, b)
	}
	r.RevertPin(planet)
	if k, _ := r.PinnedLane(planet); k != a {
		t.Fatalf("after re-pinning, reverted to %v, want %v", k, a)
	}
	m := lane.Ship{Lo: 0x0006_0101}
	r.Pin(m, a)
	r.RevertPin(m) // its pin replaced none: unpinned
	if _, ok := r.PinnedLane(m); ok {
		t.Fatal("a first pin reverted is still pinned")
	}
	if tg := r.Select(m, lane.Key{}, 0); tg.N > 0 && tg.Lanes[0] == a {
		t.Fatal("the table still routes by the reverted pin")
	}
}

// TestPinCap: past MaxPins ships the least recently pinned is unpinned,
// and the others keep theirs.
func TestPinCap(t *testing.T) {
	r := newTable(t)
	k := key("203.0.113.12:12")
	for i := 0; i <= MaxPins; i++ {
		r.Pin(lane.Ship{Lo: uint64(i)<<32 | 0x0101}, k)
	}
	if _, ok := r.PinnedLane(lane.Ship{Lo: 0x0101}); ok {
		t.Error("the oldest pin survived past MaxPins")
	}
	for _, i := range []uint64{1, MaxPins} {
		if _, ok := r.PinnedLane(lane.Ship{Lo: i<<32 | 0x0101}); !ok {
			t.Errorf("pin %d lost", i)
		}
	}
}

// TestConfiguredIndexAgreesWithMaps: the snapshot's open-addressing
// indexes answer every question as its maps do, for ships and lanes in
// the snapshot and for others, at every size (each power of two the index
// grows through, so that probes wrap and collide), whatever the seed.
func TestConfiguredIndexAgreesWithMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randKey := func() lane.Key {
		var k lane.Key
		k.IP[10], k.IP[11] = 0xff, 0xff
		binary.BigEndian.PutUint32(k.IP[12:], rng.Uint32()%512) // small: lanes repeat
		k.Port = uint16(rng.IntN(4))
		return k
	}
	randShip := func() lane.Ship { return lane.Ship{Hi: uint64(rng.IntN(2)), Lo: uint64(rng.IntN(600))} }
	for _, n := range []int{0, 1, 2, 3, 7, 8, 31, 64, 300} {
		for seed := range uint64(4) {
			static, relays := map[lane.Ship]lane.Key{}, map[lane.Ship]lane.Key{}
			for range n {
				static[randShip()] = randKey()
				if rng.IntN(3) == 0 {
					relays[randShip()] = randKey()
				}
			}
			c := newConfigured(static, relays, seed*0x9e3779b97f4a7c15)
			lanes := map[lane.Key]bool{}
			for _, m := range []map[lane.Ship]lane.Key{static, relays} {
				for _, k := range m {
					lanes[k] = true
				}
			}
			for range 2000 {
				s, k := randShip(), randKey()
				ks, okS := static[s]
				kr, okR := relays[s]
				if gk, gok := c.ship(s).staticLane(); gok != okS || gk != ks {
					t.Fatalf("n=%d: static lane of %v = %v %v, map %v %v", n, s, gk, gok, ks, okS)
				}
				var gk lane.Key
				e := c.ship(s)
				gok := e != nil && e.hasRelay
				if gok {
					gk = e.relay
				}
				if gok != okR || gk != kr {
					t.Fatalf("n=%d: relay lane of %v = %v %v, map %v %v", n, s, gk, gok, kr, okR)
				}
				if (c.ship(s) != nil) != (okS || okR) {
					t.Fatalf("n=%d: ship(%v) present %v, maps %v %v", n, s, c.ship(s) != nil, okS, okR)
				}
				for _, q := range []lane.Key{k, ks, kr} {
					if got, want := c.ship(s).isOwn(&q), okS && ks == q || okR && kr == q; got != want {
						t.Fatalf("n=%d: isOwn(%v, %v) = %v, want %v", n, s, q, got, want)
					}
				}
				if c.hasLane(k) != lanes[k] {
					t.Fatalf("n=%d: hasLane(%v) = %v, want %v", n, k, c.hasLane(k), lanes[k])
				}
			}
			for k := range lanes {
				if !c.hasLane(k) {
					t.Fatalf("n=%d: configured lane %v not indexed", n, k)
				}
			}
		}
	}
}

// TestCommitSkippedOnlyWhenNothingChanges: a plan that does not Touch the
// table is one whose full commit (commitLocked) changes nothing: no route
// made, no change counted, no lane waiting; and a plan to a ship with a
// route, a plan through a sponsor tried as a forwarder, or one that learns
// a sender, Touches it.
func TestCommitSkippedOnlyWhenNothingChanges(t *testing.T) {
	now := 10 * sec
	rt := newTable(t)
	rt.Contacted(marnec, marnecKey, now) // a route: ~marnec's direct lane
	plan := func(q Query) *Plan {
		var p Plan
		rt.PlanInto(&p, q, now)
		if p.N == 0 {
			t.Fatalf("%+v: no targets", q)
		}
		return &p
	}
	// To ~nec's configured lane, no route, nothing learned: untouched,
	// and the full commit indeed changes nothing.
	p := plan(Query{Rcvr: nec, From: alice})
	if p.Touches() {
		t.Fatalf("a plan to a configured lane touches the table")
	}
	before, n := rt.Changes(), rt.table.Len()
	rt.mu.Lock()
	rt.commitLocked(p, now)
	rt.mu.Unlock()
	if rt.Changes() != before || rt.table.Len() != n {
		t.Fatalf("the skipped commit would have changed the table: changes %d -> %d, routes %d -> %d", before, rt.Changes(), n, rt.table.Len())
	}
	// The same plan learning its sender touches it.
	if !plan(Query{Rcvr: nec, From: alice, Sender: planet, Learn: true}).Touches() {
		t.Fatalf("a plan that learns its sender does not touch the table")
	}
	// To ~marnec, which has a route: its lane starts waiting.
	p = plan(Query{Rcvr: marnec, From: alice})
	if !p.Touches() {
		t.Fatalf("a plan to a routed ship does not touch the table")
	}
	rt.Commit(p, now)
	if r, _ := rt.table.Peek(marnec); r.direct.waiting == 0 {
		t.Fatalf("the commit of a routed ship's plan left its lane not waiting")
	}
	// To ~marnec's planet, through ~marnec tried as a forwarder.
	p = plan(Query{Rcvr: planet, From: alice})
	if !p.Touches() {
		t.Fatalf("a plan through a sponsor tried as a forwarder does not touch the table: %+v", p)
	}
}

// TestShipHashIsTwoSeededRounds: shipHash, whose first round is
// precomputed for a ship whose high word is 0, is Mix64(s.Lo ^ Mix64(s.Hi
// ^ seed)) for every ship, comets and the rest, under random seeds.
func TestShipHashIsTwoSeededRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 31))
	for range 200 {
		seed := rng.Uint64()
		c := newConfigured(map[lane.Ship]lane.Key{{Lo: 1}: {Port: 1}}, nil, seed)
		for i := range 50 {
			s := lane.Ship{Lo: rng.Uint64(), Hi: rng.Uint64()}
			if i%2 == 0 {
				s.Hi = 0
			}
			if got, want := c.shipHash(s), lane.Mix64(s.Lo^lane.Mix64(s.Hi^seed)); got != want {
				t.Fatalf("seed %#x: shipHash(%v) = %#x, want %#x", seed, s, got, want)
			}
		}
	}
}
