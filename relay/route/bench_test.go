package route

import (
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// The route table's per-datagram calls as a relay makes them (relay's
// BenchmarkDecide measures them among the rest of the decision): a
// request's Arrived and PlanInto (and Commit when the plan touches the
// table), a page's Arrived and PageArrived. They report, they do not pass
// or fail on time; each must allocate nothing.

// newBenchTable returns a relay's table (ConfiguredWins) fronting self,
// with ~nec and ~zod configured, self's lane this process.
func newBenchTable(b *testing.B) *Table {
	b.Helper()
	rt, err := New(self, nil, Config{Seed: 1, ConfiguredWins: true})
	if err != nil {
		b.Fatal(err)
	}
	rt.SetStatic(map[lane.Ship]lane.Key{nec: necKey, {}: key("198.51.100.1:13337")})
	rt.AddSelf(key("192.0.2.1:13337"))
	return rt
}

// BenchmarkRoundTripConfigured is a request for ~nec (configured) from
// alice and ~nec's hop-0 page back, as relay's BenchmarkDecide does (a
// relay asks its sponsors' lanes only for a page whose next-hop is not
// the publisher's own lane, which this one's is).
func BenchmarkRoundTripConfigured(b *testing.B) {
	rt := newBenchTable(b)
	var p Plan
	now := sec
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rt.Arrived(alice, now)
		rt.PlanInto(&p, Query{Rcvr: nec, From: alice}, now)
		if p.N != 1 {
			b.Fatalf("plan %v", lanes(p.Targets))
		}
		rt.Commit(&p, now)
		rt.Arrived(necKey, now)
		if _, placed, _ := rt.PageArrived(PageObs{Publisher: nec, From: necKey, Hop0: true}, now); placed != necKey {
			b.Fatalf("placed %v", placed)
		}
	}
}

// BenchmarkRoundTripLearned is the same for a planet whose direct lane
// was learned from its contact (not configured): its plan is committed
// and its page proves the lane again.
func BenchmarkRoundTripLearned(b *testing.B) {
	rt := newBenchTable(b)
	var p Plan
	now := sec
	rt.Contacted(planet, planetKey, now)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rt.Arrived(alice, now)
		rt.PlanInto(&p, Query{Rcvr: planet, From: alice}, now)
		if p.N != 1 || p.Lanes[0] != planetKey {
			b.Fatalf("plan %v", lanes(p.Targets))
		}
		rt.Commit(&p, now)
		rt.Arrived(planetKey, now)
		if _, placed, _ := rt.PageArrived(PageObs{Publisher: planet, From: planetKey, Hop0: true}, now); placed != planetKey {
			b.Fatalf("placed %v", placed)
		}
	}
}
