package route

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// TestQuietAnswerHolds: a caller holding a PageAnswer (PageArrivedHeld),
// answered from it while its stamp holds, gets the answer the table would
// give and leaves its table as asking would, and a Plan planned into
// again (PlanFor) is the plan made afresh, kept or not, over a random run of pages (hop 0 and relayed, from configured, pinned,
// learned and stranger's lanes), pins set, moved back and removed,
// configured lanes and relays replaced, and requests and contacts that
// make routes. Beside it a table that always calls. Kills: a change that
// does not move the epoch (a pin, a configured lane, a new route), a
// stamp given to an answer that writes or depends on a route, and a
// memo trusted without its stamp (stale answers that differ are counted
// and must occur).
func TestQuietAnswerHolds(t *testing.T) {
	for _, wins := range []bool{true, false} {
		t.Run(fmt.Sprintf("ConfiguredWins=%v", wins), func(t *testing.T) { testQuietAnswerHolds(t, wins) })
	}
}

// newWinsTable is newTable with Config.ConfiguredWins as given (a
// relay's tables have it set).
func newWinsTable(t *testing.T, wins bool) *Table {
	t.Helper()
	rt, err := New(self, nil, Config{Seed: 1, ConfiguredWins: wins})
	if err != nil {
		t.Fatal(err)
	}
	rt.SetStatic(map[lane.Ship]lane.Key{nec: necKey})
	return rt
}

func testQuietAnswerHolds(t *testing.T, wins bool) {
	memoed, calling := newWinsTable(t, wins), newWinsTable(t, wins)
	rng := rand.New(rand.NewPCG(7, 11))
	pubs := []lane.Ship{nec, planet, marnec}
	froms := []lane.Key{necKey, planetKey, marnecKey, hintKey, alice, {}}
	statics := []lane.Key{necKey, planetKey, hintKey}
	var m PageAnswer
	// reused is planned into again and again (as a relay's Reader's
	// plan), and compared with a plan made afresh by the other table.
	var reused Plan
	now := time.Second
	hits, calls, staleWrong := 0, 0, 0
	kept, planned, staleKept := 0, 0, 0
	both := func(f func(rt *Table)) { f(memoed); f(calling) }
	for step := 0; step < 30000; step++ {
		now += time.Duration(rng.IntN(int(300 * time.Millisecond)))
		s := pubs[rng.IntN(len(pubs))]
		switch op := rng.IntN(40); {
		case op < 2:
			k := statics[rng.IntN(len(statics))]
			if rng.IntN(3) == 0 {
				k = lane.Key{}
			}
			both(func(rt *Table) { rt.SetStaticLane(s, k) })
		case op == 2:
			k := froms[rng.IntN(len(froms)-1)]
			both(func(rt *Table) { rt.Pin(s, k) })
		case op == 3:
			both(func(rt *Table) { rt.RevertPin(s) })
		case op == 4:
			both(func(rt *Table) { rt.Unpin(s) })
		case op == 5:
			rel := map[lane.Ship]lane.Key{}
			if rng.IntN(2) == 0 {
				rel[s] = froms[rng.IntN(len(froms)-1)]
			}
			both(func(rt *Table) { rt.SetRelays(rel) })
		case op < 8:
			sameSelect(t, step, memoed, calling, s, froms[rng.IntN(len(froms)-1)], now)
		case op == 8:
			from := froms[rng.IntN(len(froms)-1)]
			both(func(rt *Table) { rt.Contacted(s, from, now) })
		case op < 20:
			// Requests, mostly for the last receiver.
			if rng.IntN(4) != 0 && reused.q.Rcvr != (lane.Ship{}) {
				s = reused.q.Rcvr
			}
			from := froms[rng.IntN(len(froms))]
			sender := pubs[rng.IntN(len(pubs))]
			learn := rng.IntN(4) == 0
			prev := reused
			want := calling.Plan(Query{Rcvr: s, From: from, Sender: sender, Learn: learn}, now)
			if memoed.PlanFor(&reused, s, &from, sender, learn, now) {
				kept++
				if prev.quiet == 0 || prev.q.Rcvr != s {
					t.Fatalf("step %d: a plan for %v kept from one for %v, stamp %d", step, s, prev.q.Rcvr, prev.quiet)
				}
			} else {
				planned++
				if prev.quiet != 0 && prev.q.Rcvr == s && prev.quietLane != from && prev.Targets != want.Targets {
					staleKept++
				}
			}
			if reused.Targets != want.Targets || reused.q != want.q || reused.Touches() != want.Touches() {
				t.Fatalf("step %d, %v from %v: plan %+v (touches %v), made afresh %+v (touches %v)",
					step, s, from, reused, reused.Touches(), want, want.Touches())
			}
			memoed.Commit(&reused, now)
			calling.Commit(&want, now)
		case op == 20 && step > 15000 && step < 15050:
			// Once in the run: a lane configured for some ship becomes
			// this process's.
			both(func(rt *Table) { rt.AddSelf(hintKey) })
		default:
			// Pages mostly in runs from one publisher and lane, as a
			// batch brings them.
			from := froms[rng.IntN(len(froms))]
			if m.stamp != 0 && rng.IntN(4) != 0 {
				s, from = m.publisher, m.from
			}
			// Hop 0, relayed, and now and then neither or both (a
			// caller's observations the relay never makes).
			hop0, relayed := true, false
			switch rng.IntN(10) {
			case 0, 1:
				hop0, relayed = false, true
			case 2:
				hop0 = false
			case 3:
				relayed = true
			}
			o := PageObs{Publisher: s, From: from, Next: froms[rng.IntN(len(froms))],
				Hop0: hop0, Relayed: relayed, Signed: rng.IntN(3) == 0, Unverified: rng.IntN(5) == 0}
			var want lane.Key
			wantC, wantD := calling.PageArrivedInto(&o, now, &want)
			before := m
			got := garbageKey
			gotC, gotD, held := memoed.PageArrivedHeld(&o, now, &got, &m)
			sameHold := before.stamp != 0 && o.Hop0 && !o.Relayed && before.publisher == s && before.from == from
			switch {
			case held:
				hits++
				if !sameHold || m != before {
					t.Fatalf("step %d, %+v: held from %+v, now %+v", step, o, before, m)
				}
			case sameHold && before.placed != want:
				staleWrong++
			}
			if !held {
				calls++
			}
			if m != before && (!o.Hop0 || o.Relayed || gotC || gotD || m.placed != got || m.stamp == 0) {
				t.Fatalf("step %d, %+v: held %+v for an answer %v %v %v", step, o, m, gotC, got, gotD)
			}
			if got != want || gotC != wantC || gotD != wantD {
				t.Fatalf("step %d, %+v (held %v): answer %v %v %v, the table's %v %v %v",
					step, o, held, gotC, got, gotD, wantC, want, wantD)
			}
		}
		if memoed.Changes() != calling.Changes() {
			t.Fatalf("step %d: %d route changes, %d calling each time", step, memoed.Changes(), calling.Changes())
		}
		for _, p := range pubs {
			a, aok := memoed.Info(p)
			b, bok := calling.Info(p)
			if aok != bok || !reflect.DeepEqual(a, b) {
				t.Fatalf("step %d: %v's routes differ: %+v and %+v", step, p, a, b)
			}
			pa, paok := memoed.PinnedLane(p)
			pb, pbok := calling.PinnedLane(p)
			if pa != pb || paok != pbok {
				t.Fatalf("step %d: %v's pins differ: %v and %v", step, p, pa, pb)
			}
		}
	}
	t.Logf("pages: %d answers reused, %d calls, %d stale answers a stampless memo would have given", hits, calls, staleWrong)
	t.Logf("requests: %d plans kept, %d made, %d stale plans a stampless plan would have kept", kept, planned, staleKept)
	if hits < 1000 || staleWrong < 20 || kept < 500 || staleKept < 20 {
		t.Fatalf("the run does not exercise the stamps")
	}
}

// quietStamp returns the stamp of a hop-0 page of s from lane from, and
// fails if there is none.
func quietStamp(t *testing.T, rt *Table, s lane.Ship, from lane.Key) uint64 {
	t.Helper()
	o := PageObs{Publisher: s, From: from, Hop0: true}
	_, _, stamp := rt.pageArrivedQuiet(&o, sec, new(lane.Key))
	if stamp == 0 || !rt.quietHolds(stamp) {
		t.Fatalf("a hop-0 page of %v from %v: stamp %d, holding %v", s, from, stamp, rt.quietHolds(stamp))
	}
	return stamp
}

// TestQuietEpochMoves: every change that can alter a quiet answer or a
// kept plan moves the epoch (the stamp stops holding), and what changes
// nothing leaves it. Each case starts from a table where ~nec is
// configured and planet pinned, neither with a route, and a page of each
// has a stamp.
func TestQuietEpochMoves(t *testing.T) {
	cases := []struct {
		name  string
		op    func(rt *Table)
		moves bool
	}{
		{"SetStatic", func(rt *Table) { rt.SetStatic(map[lane.Ship]lane.Key{nec: hintKey}) }, true},
		{"SetStaticLane, a new lane", func(rt *Table) { rt.SetStaticLane(nec, hintKey) }, true},
		{"SetStaticLane, removed", func(rt *Table) { rt.SetStaticLane(nec, lane.Key{}) }, true},
		{"SetStaticLane, the same lane", func(rt *Table) { rt.SetStaticLane(nec, necKey) }, false},
		{"SetRelays", func(rt *Table) { rt.SetRelays(map[lane.Ship]lane.Key{marnec: marnecKey}) }, true},
		{"Pin, a new lane", func(rt *Table) { rt.Pin(planet, hintKey) }, true},
		{"Pin, the same lane", func(rt *Table) { rt.Pin(planet, planetKey) }, false},
		{"Pin, another ship", func(rt *Table) { rt.Pin(marnec, marnecKey) }, true},
		{"RevertPin, to none", func(rt *Table) { rt.RevertPin(planet) }, true},
		{"RevertPin, to the lane before", func(rt *Table) { rt.Pin(planet, hintKey); rt.RevertPin(planet) }, true},
		{"RevertPin, not pinned", func(rt *Table) { rt.RevertPin(marnec) }, false},
		{"Unpin", func(rt *Table) { rt.Unpin(planet) }, true},
		{"Unpin, not pinned", func(rt *Table) { rt.Unpin(marnec) }, false},
		{"AddSelf, a new lane", func(rt *Table) { rt.AddSelf(hintKey) }, true},
		{"AddSelf, known", func(rt *Table) { rt.AddSelf(hintKey); rt.AddSelf(hintKey) }, true},
		{"a route made (a contact)", func(rt *Table) { rt.Contacted(marnec, marnecKey, sec) }, true},
		{"a configured ship's contact (teaches nothing)", func(rt *Table) { rt.Contacted(nec, hintKey, sec) }, false},
		{"a page of each again", func(rt *Table) {
			for _, o := range []PageObs{{Publisher: nec, From: necKey, Hop0: true}, {Publisher: planet, From: planetKey, Hop0: true}} {
				rt.PageArrivedInto(&o, sec, new(lane.Key))
			}
		}, false},
		{"a plan for each, committed", func(rt *Table) {
			for _, s := range []lane.Ship{nec, planet} {
				p := rt.Plan(Query{Rcvr: s, From: alice}, sec)
				rt.Commit(&p, sec)
			}
		}, false},
	}
	for _, c := range cases {
		rt := newWinsTable(t, true)
		rt.Pin(planet, planetKey)
		necStamp, planetStamp := quietStamp(t, rt, nec, necKey), quietStamp(t, rt, planet, planetKey)
		if necStamp != planetStamp {
			t.Fatalf("%s: stamps %d and %d with nothing changed between", c.name, necStamp, planetStamp)
		}
		c.op(rt)
		if held := rt.quietHolds(necStamp); held == c.moves {
			t.Errorf("%s: the stamp holds %v, want %v", c.name, held, !c.moves)
		}
	}
}

// TestQuietStampOnlyWhenQuiet: a page gets a stamp only at hop 0, not
// relayed, from a configured or pinned publisher with no route; a plan
// only when a configured or pinned lane ends the walk, the receiver has
// no route and the request did not come from a lane skipped for it
// (Looped).
func TestQuietStampOnlyWhenQuiet(t *testing.T) {
	rt := newWinsTable(t, true)
	page := func(o PageObs) uint64 {
		_, _, stamp := rt.pageArrivedQuiet(&o, sec, new(lane.Key))
		return stamp
	}
	plan := func(s lane.Ship, from lane.Key) Plan {
		var p Plan
		rt.PlanFor(&p, s, &from, lane.Ship{}, false, sec)
		return p
	}
	if page(PageObs{Publisher: nec, From: necKey, Hop0: true}) == 0 || plan(nec, alice).quiet == 0 {
		t.Fatal("~nec, configured, no route: no stamp")
	}
	for _, o := range []PageObs{
		{Publisher: nec, From: necKey, Relayed: true},
		{Publisher: nec, From: necKey, Hop0: true, Relayed: true},
		{Publisher: nec, From: necKey},
	} {
		if s := page(o); s != 0 {
			t.Errorf("%+v: stamp %d, want none", o, s)
		}
	}
	// planet, heard, then configured: it has a route.
	rt.Contacted(planet, planetKey, sec)
	rt.SetStaticLane(planet, hintKey)
	if s := page(PageObs{Publisher: planet, From: hintKey, Hop0: true}); s != 0 {
		t.Errorf("a configured publisher with a route: stamp %d", s)
	}
	if p := plan(planet, alice); p.quiet != 0 || lanes(p.Targets)[0] != hintKey {
		t.Errorf("a configured receiver with a route: plan %v, stamp %d", lanes(p.Targets), p.quiet)
	}
	// marnec: no route, not configured: its plan is its sponsor's lane.
	if p := plan(marnec, alice); p.quiet != 0 || p.N == 0 {
		t.Errorf("an unconfigured receiver: plan %v, stamp %d", lanes(p.Targets), p.quiet)
	}
	// marnec configured at hintKey and pinned at marnecKey: from hintKey
	// the configured lane is skipped (Looped) and the pin taken; from any
	// other lane the configured lane is taken.
	rt.SetStaticLane(marnec, hintKey)
	rt.Pin(marnec, marnecKey)
	var p Plan
	from := hintKey
	rt.PlanFor(&p, marnec, &from, lane.Ship{}, false, sec)
	if !p.Looped || p.quiet != 0 || lanes(p.Targets)[0] != marnecKey {
		t.Fatalf("from the configured lane: plan %v, looped %v, stamp %d", lanes(p.Targets), p.Looped, p.quiet)
	}
	from = alice
	if kept := rt.PlanFor(&p, marnec, &from, lane.Ship{}, false, sec); kept || p.N != 1 || p.Lanes[0] != hintKey || p.Looped {
		t.Fatalf("then from alice: plan %v (kept %v, looped %v), want the configured lane", lanes(p.Targets), kept, p.Looped)
	}
	// That plan has a stamp and is kept for another lane, its targets
	// as stamped even when its holder changed them.
	p.N, p.Lanes[0], p.Looped, p.Sponsee = 0, alice, true, true
	from = planetKey
	if kept := rt.PlanFor(&p, marnec, &from, lane.Ship{}, false, sec); !kept || p.N != 1 || p.Lanes[0] != hintKey || p.Looped || p.Sponsee || p.q.From != planetKey {
		t.Fatalf("kept: plan %+v (kept %v)", p, kept)
	}
	// Not for the lane it goes to.
	from = hintKey
	if kept := rt.PlanFor(&p, marnec, &from, lane.Ship{}, false, sec); kept || !p.Looped {
		t.Fatalf("from its own lane: kept %v, looped %v", kept, p.Looped)
	}
}

// sameSelect selects for s from lane from at now in both tables and
// fails at step if they choose differently.
func sameSelect(t *testing.T, step int, a, b *Table, s lane.Ship, from lane.Key, now time.Duration) {
	t.Helper()
	if sa, sb := a.Select(s, from, now), b.Select(s, from, now); sa != sb {
		t.Fatalf("step %d: the tables differ: Select %+v and %+v", step, sa, sb)
	}
}

// garbageKey is what a placed Key holds before a call that must write it.
var garbageKey = lane.Key{IP: [16]byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, Port: 9}
