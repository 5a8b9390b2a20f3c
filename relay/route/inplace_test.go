package route

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/urbit-relay/relay/lane"
)

// The hot paths read lanes in place (by pointer) where lane.Key's methods
// take them by value; these pin that the in-place forms are the same.

// chooseAsSpecified is Design.Choose as it was written before designPick:
// the reference the table's in-place choice must keep.
func chooseAsSpecified(cands []Candidate, chal Candidate) (to [MaxTargets]Candidate, n int) {
	good := len(cands) - 1
	for i := range cands {
		if cands[i].Proven {
			good = i
			break
		}
	}
	switch {
	case chal.Lane.IsValid():
		to[n] = chal
		n++
	case good > 0 && !cands[good-1].Busy:
		to[n] = cands[good-1]
		n++
	}
	to[n] = cands[good]
	return to, n + 1
}

// TestDesignChooseAsSpecified: Design.Choose (through designPick) and a
// table's plan, with Design and with a rubric that only embeds it (the
// interface path), choose as chooseAsSpecified does, for every list of up
// to three candidates, proven or busy or neither, with and without a
// challenger.
func TestDesignChooseAsSpecified(t *testing.T) {
	lanesOf := []lane.Key{key("203.0.113.1:1"), key("203.0.113.2:2"), key("203.0.113.3:3")}
	chalKey := key("203.0.113.4:4")
	for n := 1; n <= 3; n++ {
		for bits := 0; bits < 1<<(2*n); bits++ {
			cands := make([]Candidate, n)
			for i := range cands {
				cands[i] = Candidate{Lane: lanesOf[i], Proven: bits>>(2*i)&1 != 0, Busy: bits>>(2*i+1)&1 != 0}
			}
			for _, chal := range []Candidate{{}, {Lane: chalKey, Proven: bits&1 != 0}} {
				want, wn := chooseAsSpecified(cands, chal)
				got, gn := Design{}.Choose(cands, chal)
				if gn != wn || got != want {
					t.Fatalf("cands %+v chal %+v: Choose %+v (%d), want %+v (%d)", cands, chal, got[:gn], gn, want[:wn], wn)
				}
				good, beside := designPick(cands, &chal)
				var p Plan
				switch {
				case beside == n:
					p.setTarget(&chal)
				case beside >= 0:
					p.setTarget(&cands[beside])
				}
				p.setTarget(&cands[good])
				if p.N != wn {
					t.Fatalf("cands %+v chal %+v: designPick %d, %d: %d lanes, want %d", cands, chal, good, beside, p.N, wn)
				}
				for i := range wn {
					if p.Lanes[i] != want[i].Lane {
						t.Fatalf("cands %+v chal %+v: designPick %d, %d: lanes %v, want %+v", cands, chal, good, beside, p.Lanes[:p.N], want[:wn])
					}
				}
			}
		}
	}
}

// embedsDesign is a rubric that is not Design but chooses as it does,
// so that a table running it plans through the Rubric interface.
type embedsDesign struct{ Design }

// TestPlanByDesignAsByInterface: a table running Design (its choice made
// in place, designPick) plans as one running the same rubric through the
// interface, for a configured galaxy, a direct lane beside its galaxy,
// and a proven direct lane with a challenger.
func TestPlanByDesignAsByInterface(t *testing.T) {
	mk := func(rb Rubric) *Table {
		rt, err := New(self, nil, Config{Seed: 1, Rubric: rb})
		if err != nil {
			t.Fatal(err)
		}
		rt.SetStatic(map[lane.Ship]lane.Key{nec: necKey})
		return rt
	}
	a, b := mk(nil), mk(embedsDesign{})
	if !a.design || b.design {
		t.Fatalf("design flags %v %v", a.design, b.design)
	}
	evil := key("203.0.113.66:6666")
	steps := []func(rt *Table, now time.Duration){
		func(rt *Table, now time.Duration) {},
		func(rt *Table, now time.Duration) { rt.Contacted(planet, planetKey, now) },
		func(rt *Table, now time.Duration) { rt.Answered(planet, planetKey, lane.Key{}, false, now) },
		func(rt *Table, now time.Duration) {
			rt.PageArrived(PageObs{Publisher: planet, From: evil, Hop0: true}, now)
		},
		func(rt *Table, now time.Duration) { rt.Contacted(planet, evil, now) },
	}
	for i, step := range steps {
		now := sec + time.Duration(i)*time.Millisecond
		step(a, now)
		step(b, now)
		for _, s := range []lane.Ship{nec, marnec, planet} {
			pa, pb := a.Plan(Query{Rcvr: s, From: alice}, now), b.Plan(Query{Rcvr: s, From: alice}, now)
			if pa != pb {
				t.Fatalf("step %d, ship %v: Design plans %+v, through the interface %+v", i, s, pa, pb)
			}
			a.Commit(&pa, now)
			b.Commit(&pb, now)
		}
	}
}

// TestPageArrivedIntoIsPageArrived: PageArrivedInto, given a placed Key
// that holds garbage, answers as PageArrived does, and leaves its table as
// PageArrived leaves another, over a random run of requests, pins and
// pages (hop 0 and relayed, from the publisher's lanes, a sponsor's and a
// stranger's, with and without a next-hop and a signature).
func TestPageArrivedIntoIsPageArrived(t *testing.T) {
	byValue, inPlace := newTable(t), newTable(t)
	rng := rand.New(rand.NewPCG(3, 5))
	froms := []lane.Key{planetKey, marnecKey, hintKey, necKey, alice, {}}
	nexts := []lane.Key{{}, hintKey, planetKey}
	garbage := key("192.0.2.99:9")
	now := time.Second
	placedSeen := 0
	for step := 0; step < 3000; step++ {
		now += time.Duration(rng.IntN(int(2 * time.Second)))
		switch op := rng.IntN(10); {
		case op < 3:
			sameSelect(t, step, byValue, inPlace, planet, froms[rng.IntN(len(froms)-1)], now)
		case op == 3:
			k := froms[rng.IntN(3)]
			byValue.Pin(planet, k)
			inPlace.Pin(planet, k)
		case op == 4:
			byValue.Unpin(planet)
			inPlace.Unpin(planet)
		default:
			hop0 := rng.IntN(2) == 0
			o := PageObs{Publisher: planet, From: froms[rng.IntN(len(froms))], Next: nexts[rng.IntN(len(nexts))],
				Hop0: hop0, Relayed: !hop0, Signed: hop0 && rng.IntN(3) == 0}
			want := o
			contested, placed, disputed := byValue.PageArrived(o, now)
			got := garbage
			gotContested, gotDisputed := inPlace.PageArrivedInto(&o, now, &got)
			if gotContested != contested || got != placed || gotDisputed != disputed {
				t.Fatalf("step %d, %+v: PageArrivedInto %v %v %v, PageArrived %v %v %v",
					step, o, gotContested, got, gotDisputed, contested, placed, disputed)
			}
			if o != want {
				t.Fatalf("step %d: PageArrivedInto changed its observation: %+v, was %+v", step, o, want)
			}
			// PageArrived is PageArrivedInto underneath: what it places
			// is checked against the table itself too. A pinned ship is
			// placed at its pin; otherwise a lane placed is one the run
			// used, whole (never garbage, never a lane torn in two).
			if pk, ok := inPlace.PinnedLane(planet); ok && got != pk {
				t.Fatalf("step %d, %+v: placed %v, pinned at %v", step, o, got, pk)
			}
			if got != (lane.Key{}) {
				placedSeen++
				if !slices.Contains(froms, got) {
					t.Fatalf("step %d, %+v: placed %v, a lane the run never used", step, o, got)
				}
			}
		}
		a, aok := byValue.Info(planet)
		b, bok := inPlace.Info(planet)
		if aok != bok || !reflect.DeepEqual(a, b) {
			t.Fatalf("step %d: the tables differ: %+v and %+v", step, a, b)
		}
	}
	if placedSeen < 100 {
		t.Fatalf("a lane placed in only %d pages: the run does not exercise placement", placedSeen)
	}
}

// TestPlanForIsPlanInto: PlanFor, into a Plan whose every byte is
// garbage, makes the plan PlanInto makes into a zero Plan, for receivers
// routed, pinned, configured and unknown, from lanes on their routes and
// off them, with and without a sender to learn (kills: a field of the
// plan not made anew, the query's port or sender dropped).
func TestPlanForIsPlanInto(t *testing.T) {
	rt := newTable(t)
	now := time.Second
	// A route for planet, learned from a hop-0 page on a lane a request
	// went to, and a pin for marnec.
	rt.Select(planet, alice, now)
	rt.PageArrived(PageObs{Publisher: planet, From: planetKey, Hop0: true}, now)
	rt.Pin(marnec, marnecKey)
	rcvrs := []lane.Ship{planet, marnec, nec, self, {Lo: 0x1234_5678}}
	froms := []lane.Key{alice, planetKey, marnecKey, necKey, hintKey, {}}
	senders := []lane.Ship{{}, planet, {Lo: 0x0006_0101}}
	for _, rcvr := range rcvrs {
		for _, from := range froms {
			for _, sender := range senders {
				for _, learn := range []bool{false, true} {
					var want Plan
					rt.PlanInto(&want, Query{Rcvr: rcvr, From: from, Sender: sender, Learn: learn}, now)
					var got Plan
					raw := unsafe.Slice((*byte)(unsafe.Pointer(&got)), unsafe.Sizeof(got))
					for i := range raw {
						raw[i] = 1
					}
					rt.PlanFor(&got, rcvr, &from, sender, learn, now)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("rcvr %v from %v sender %v learn %v: PlanFor %+v, PlanInto %+v", rcvr, from, sender, learn, got, want)
					}
				}
			}
		}
	}
}
