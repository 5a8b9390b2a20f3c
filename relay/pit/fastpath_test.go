package pit

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// TestTicksAgree pins that the multiply behind ticks and nowTick (the
// Add and Take paths) gives exactly what the divisions tick and
// expiryTick give, for ticks and TTLs of every shape (a tick a power of
// two or not, a TTL a whole number of ticks or not, the largest allowed)
// and readings at, around and between tick boundaries, near ticksMax,
// past it and negative.
func TestTicksAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 30))
	type shape struct{ tick, ttl time.Duration }
	shapes := []shape{
		{DefaultTick, DefaultTTL},
		{MinTick, MinTick},
		{MinTick, MinTick * MaxTTLTicks},
		{100 * time.Millisecond, 3 * time.Minute},
		{time.Second, 1500 * time.Millisecond},
		{1 << 20, 1<<20*7 + 1},   // a tick a power of two (ns), a ragged TTL
		{1<<20 + 1, 1<<21 + 1},   // just above a power of two
		{1<<30 - 1, 1<<30*3 - 2}, // just below one
		{7 * time.Millisecond, 7*time.Millisecond*MaxTTLTicks - 1},
		{time.Hour, time.Hour * MaxTTLTicks},
	}
	for range 40 {
		tick := MinTick + time.Duration(rng.Int64N(int64(10*time.Second)))
		ttl := tick + time.Duration(rng.Int64N(int64(tick)*1000))
		shapes = append(shapes, shape{tick, ttl})
	}
	for _, sh := range shapes {
		tb := mustNew(t, Config{Tick: sh.tick, TTL: sh.ttl, MaxEntries: 16})
		check := func(now time.Duration) {
			t.Helper()
			wantNow, wantExp := tb.tick(now), tb.expiryTick(now)
			gotNow, gotExp := tb.ticks(now)
			if gotNow != wantNow || gotExp != wantExp {
				t.Fatalf("tick %d ns, TTL %d ns, now %d: ticks = (%d, %d), want (%d, %d)",
					sh.tick, sh.ttl, now, gotNow, gotExp, wantNow, wantExp)
			}
			if got := tb.nowTick(now); got != wantNow {
				t.Fatalf("tick %d ns, now %d: nowTick = %d, want %d", sh.tick, now, got, wantNow)
			}
		}
		tk := int64(sh.tick)
		edges := []int64{0, 1, tk - 1, tk, tk + 1, tb.ticksMax - 1, tb.ticksMax, tb.ticksMax + 1,
			math.MaxInt64, math.MaxInt64 - 1, -1, -tk, -tk - 1, math.MinInt64}
		// Tick boundaries across the whole range, where the remainder and
		// the TTL's remainder meet: q*tick + {-1, 0, 1} and
		// q*tick - ttlRem + {0, 1}.
		for _, q := range []int64{1, 2, 3, 1000, 1 << 20, math.MaxInt64/tk - 1, math.MaxInt64 / tk} {
			for _, d := range []int64{-1, 0, 1, -tb.ttlRem, 1 - tb.ttlRem, tk - tb.ttlRem} {
				edges = append(edges, q*tk+d)
			}
		}
		for _, n := range edges {
			check(time.Duration(n))
		}
		for range 2000 {
			check(time.Duration(rng.Int64()))                         // anywhere in [0, 2^63)
			check(time.Duration(rng.Int64N(int64(1000 * time.Hour)))) // a relay's uptime
			check(time.Duration(rng.Int64N(1 << 40)))
		}
	}
}

// TestTakeWithRoomIsAppend pins that TakeHeld gives the same slice and
// marks whether dst has room for the first requester (copied in place) or
// not (append), after a prefix the caller keeps, for entries of one
// requester and of several.
func TestTakeWithRoomIsAppend(t *testing.T) {
	prefix := []lane.Key{laneN(90), laneN(91)}
	for _, nreq := range []int{1, 2, 4, 7} {
		var got [2][]lane.Key
		var held [2]Held
		for w, room := range []bool{false, true} {
			tb := mustNew(t, Config{Shards: 1, MaxEntries: 16})
			for j := range nreq {
				tb.Add(5, laneN(j+1), time.Second)
			}
			dst := append([]lane.Key(nil), prefix...)
			dst = dst[:len(dst):len(dst)] // no room: Take appends
			if room {
				dst = append(make([]lane.Key, 0, 64), prefix...)
			}
			reqs, ok := tb.TakeHeld(5, dst, &held[w], time.Second)
			if !ok {
				t.Fatalf("%d requesters, room %v: TakeHeld found nothing", nreq, room)
			}
			got[w] = reqs
		}
		if !slices.Equal(got[0], got[1]) || held[0] != held[1] {
			t.Errorf("%d requesters: TakeHeld without room = %v (held %d), with room = %v (held %d)",
				nreq, got[0], held[0].n, got[1], held[1].n)
		}
		if len(got[1]) != len(prefix)+nreq || !slices.Equal(got[1][:len(prefix)], prefix) || got[1][len(prefix)] != laneN(1) {
			t.Errorf("%d requesters: TakeHeld = %v, want %v then laneN(1..%d)", nreq, got[1], prefix, nreq)
		}
	}
}
