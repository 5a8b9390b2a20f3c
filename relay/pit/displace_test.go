package pit

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// Tests of an entry's requester rule: every requester is recorded while
// the entry has room, whatever its source; a full entry is shared max-min
// fairly by source, a newcomer from a source smaller than the largest
// displacing that source's most recent requester (Config.MaxRequestersPerEntry).

// requestersOf returns the requesters of key's entry, in order, without
// taking it; nil if there is none.
func requestersOf(tb *Table, key uint64) []lane.Key {
	h := mix(key)
	s := tb.shardOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, i, ok := s.findLocked(h)
	if !ok {
		return nil
	}
	return s.requestersLocked(i)
}

// bySource counts reqs by source.
func bySource(reqs []lane.Key) map[[16]byte]int {
	n := map[[16]byte]int{}
	for _, r := range reqs {
		n[r.Source()]++
	}
	return n
}

// TestOneAddressFillsAnEntry: 200 ships behind one address (a carrier-grade
// NAT: one IP, 200 ports) waiting on one name are all recorded and all
// returned by Take, at the default config; so is a whole entry's worth
// from that address, and only past it is one refused. Before the max-min
// rule a source held at most 48 of 64.
func TestOneAddressFillsAnEntry(t *testing.T) {
	tb := mustNew(t, Config{})
	nat := laneN(1)
	var want []lane.Key
	for p := range 200 {
		r := port(nat, uint16(1000+p))
		v := VerdictAggregated
		if p == 0 {
			v = VerdictForwardNew
		}
		wantAdd(t, tb, 7, r, 0, v)
		want = append(want, r)
	}
	got, ok := tb.Take(7, nil, time.Millisecond)
	if !ok || !slices.Equal(got, want) {
		t.Fatalf("Take = %d requesters, %v; want the 200, in join order", len(got), ok)
	}
	for p := range DefaultMaxRequestersPerEntry {
		tb.Add(8, port(nat, uint16(1000+p)), 0)
	}
	wantAdd(t, tb, 8, port(nat, 999), 0, VerdictRequesterCapped)
	wantAdd(t, tb, 8, port(nat, 1000+DefaultMaxRequestersPerEntry-1), 0, VerdictForwardRetransmit)
	if got, _ := tb.Take(8, nil, 0); len(got) != DefaultMaxRequestersPerEntry {
		t.Errorf("Take = %d requesters, want %d", len(got), DefaultMaxRequestersPerEntry)
	}
	st := tb.Stats()
	if st.RequesterCapped != 1 || st.EntryShareCapped != 1 || st.Displaced != 0 {
		t.Errorf("capped %d, for the entry's share %d, displaced %d; want 1, 1, 0", st.RequesterCapped, st.EntryShareCapped, st.Displaced)
	}
	checkInvariants(t, tb)
}

// TestFloodLeavesEveryOtherSource: one address on 10,000 ports floods the
// name six subscribers (each its own address) wait on, two asking before
// the entry is full, two while the flood goes on, two after it. The flood
// fills what is free; each later subscriber displaces one of its
// requesters; a second flood of fresh ports, and the displaced ports
// asking again, displace no subscriber. All six are answered.
func TestFloodLeavesEveryOtherSource(t *testing.T) {
	tb := mustNew(t, Config{})
	const key, ports = 42, 10_000
	flood := laneN(1)
	subs := []lane.Key{laneN(100), laneN(101), laneN(102), laneN(103), laneN(104), laneN(105)}
	wantAdd(t, tb, key, subs[0], 0, VerdictForwardNew)
	wantAdd(t, tb, key, subs[1], 0, VerdictAggregated)
	for p := range ports {
		tb.Add(key, port(flood, uint16(p)), 0)
		if p == ports/2 {
			wantAdd(t, tb, key, subs[2], 0, VerdictAggregated)
			wantAdd(t, tb, key, subs[3], 0, VerdictAggregated)
		}
	}
	wantAdd(t, tb, key, subs[4], 0, VerdictAggregated)
	wantAdd(t, tb, key, subs[5], 0, VerdictAggregated)
	held := DefaultMaxRequestersPerEntry - len(subs)
	st := tb.Stats()
	if st.Displaced != 4 || st.EntryShareCapped != ports-(DefaultMaxRequestersPerEntry-2) {
		t.Errorf("displaced %d, refused for the entry's share %d; want 4, %d", st.Displaced, st.EntryShareCapped, ports-(DefaultMaxRequestersPerEntry-2))
	}
	// The flood again, on all its ports: the ones it holds retransmit, the
	// rest (the displaced among them) are refused.
	for p := range ports {
		v, _ := tb.Add(key, port(flood, uint16(p)), 0)
		if v != VerdictForwardRetransmit && v != VerdictRequesterCapped {
			t.Fatalf("flood port %d again: %v", p, v)
		}
	}
	for p := range ports {
		tb.Add(key, port(flood, uint16(ports+p)), 0)
	}
	if st := tb.Stats(); st.Displaced != 4 {
		t.Errorf("the flood displaced %d subscribers", st.Displaced-4)
	}
	checkInvariants(t, tb)
	got, _ := tb.Take(key, nil, 0)
	n := bySource(got)
	for _, s := range subs {
		if n[s.Source()] != 1 {
			t.Errorf("subscriber %v holds %d places", s.AddrPort(), n[s.Source()])
		}
	}
	if len(got) != DefaultMaxRequestersPerEntry || n[flood.Source()] != held {
		t.Errorf("Take = %d requesters, the flood's %d; want %d, %d", len(got), n[flood.Source()], DefaultMaxRequestersPerEntry, held)
	}
}

// TestDisplacesTheLargestSourcesLatest pins which requester goes: the
// most recent of the largest source, among tied largest sources the one
// whose latest joined last; the newcomer takes its place in the list. A
// source is never brought below a newcomer's, so the rule stops once the
// sources are level.
func TestDisplacesTheLargestSourcesLatest(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 10, MaxRequestersPerEntry: 5, MaxOverflowRequesters: 30, MaxOverflowPerSource: -1})
	a, b, c, d := laneN(1), laneN(2), laneN(3), laneN(4)
	const key = 1
	for i, r := range []lane.Key{port(a, 1), port(a, 2), port(a, 3), b, port(a, 4)} {
		wantAdd(t, tb, key, r, 0, []Verdict{VerdictForwardNew, VerdictAggregated}[min(i, 1)])
	}
	steps := []struct {
		r    lane.Key
		v    Verdict
		want []lane.Key
	}{
		// a holds 4, c would hold 1: a's latest (a4) goes.
		{c, VerdictAggregated, []lane.Key{port(a, 1), port(a, 2), port(a, 3), b, c}},
		// a4 asks again: a would hold 4, no fewer than the largest (a, 3).
		{port(a, 4), VerdictRequesterCapped, nil},
		// d: a 3 → 2, a3 goes.
		{d, VerdictAggregated, []lane.Key{port(a, 1), port(a, 2), d, b, c}},
		// A second port of b: b would hold 2, as many as a: refused.
		{port(b, 9), VerdictRequesterCapped, nil},
		// A fifth source: a 2 → 1, a2 goes; now everyone holds one.
		{laneN(5), VerdictAggregated, []lane.Key{port(a, 1), laneN(5), d, b, c}},
		{laneN(6), VerdictRequesterCapped, nil},
		{port(b, 9), VerdictRequesterCapped, nil},
	}
	for i, st := range steps {
		wantAdd(t, tb, key, st.r, 0, st.v)
		if st.want != nil {
			if got := requestersOf(tb, key); !slices.Equal(got, st.want) {
				t.Fatalf("step %d: requesters %v, want %v", i, ports(got), ports(st.want))
			}
		}
	}
	if st := tb.Stats(); st.Displaced != 3 || st.EntryShareCapped != 4 {
		t.Errorf("displaced %d, refused %d; want 3, 4", st.Displaced, st.EntryShareCapped)
	}
	checkInvariants(t, tb)

	// Ties: x and y hold 2 each, y's latest joined last; z takes it.
	x, y, z := laneN(7), laneN(8), laneN(9)
	for _, r := range []lane.Key{port(x, 1), port(y, 1), port(x, 2), port(y, 2), laneN(10)} {
		tb.Add(2, r, 0)
	}
	wantAdd(t, tb, 2, z, 0, VerdictAggregated)
	if got, want := requestersOf(tb, 2), []lane.Key{port(x, 1), port(y, 1), port(x, 2), z, laneN(10)}; !slices.Equal(got, want) {
		t.Errorf("tie: requesters %v, want %v", ports(got), ports(want))
	}
	// x still holds 2, y and z 1: x's latest goes next.
	wantAdd(t, tb, 2, laneN(11), 0, VerdictAggregated)
	if got, want := requestersOf(tb, 2), []lane.Key{port(x, 1), port(y, 1), laneN(11), z, laneN(10)}; !slices.Equal(got, want) {
		t.Errorf("after the tie: requesters %v, want %v", ports(got), ports(want))
	}
	checkInvariants(t, tb)
}

// ports lists the lanes' sources' last byte and ports, for messages.
func ports(reqs []lane.Key) [][2]int {
	out := make([][2]int, len(reqs))
	for i, r := range reqs {
		out[i] = [2]int{int(r.IP[15]), int(r.Port)}
	}
	return out
}

// TestDisplacementIsMaxMinFair drives one entry with random sources of
// random demand (each a number of ports) asking in random order until
// nothing changes, and checks after every Add that a newcomer to an entry
// with room is kept, that a displacement takes from a source holding the
// most and leaves it holding at least what the newcomer's source now
// holds, and at the end that the shares are max-min fair: no source holds
// more than one more than any source still wanting more.
func TestDisplacementIsMaxMinFair(t *testing.T) {
	var displaced uint64
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 11))
		const entryCap = 24
		tb := mustNew(t, Config{Shards: 1, MaxEntries: 8, MaxRequestersPerEntry: entryCap,
			MaxOverflowRequesters: 100, MaxOverflowPerSource: -1})
		demand := make([]int, 2+r.IntN(9))
		total := 0
		for i := range demand {
			demand[i] = 1 + r.IntN([]int{2, 6, 40}[r.IntN(3)])
			total += demand[i]
		}
		src := func(i int) lane.Key { return laneN(1000 + i) }
		type ask struct{ s, p int }
		var asks []ask
		for s, d := range demand {
			for p := range d {
				asks = append(asks, ask{s, p})
			}
		}
		const key = 5
		for round := 0; ; round++ {
			if round > 2*total {
				t.Fatalf("seed %d: no fixed point after %d rounds", seed, round)
			}
			r.Shuffle(len(asks), func(i, j int) { asks[i], asks[j] = asks[j], asks[i] })
			changed := false
			for _, a := range asks {
				l := port(src(a.s), uint16(1+a.p))
				before := requestersOf(tb, key)
				displacedBefore := tb.Stats().Displaced
				v, _ := tb.Add(key, l, 0)
				after := requestersOf(tb, key)
				nb, na := bySource(before), bySource(after)
				switch {
				case slices.Contains(before, l):
					if v != VerdictForwardRetransmit {
						t.Fatalf("seed %d: a known requester got %v", seed, v)
					}
				case len(before) < entryCap:
					if v != VerdictAggregated && v != VerdictForwardNew || len(after) != len(before)+1 {
						t.Fatalf("seed %d: a newcomer to an entry with room got %v", seed, v)
					}
					changed = true
				case v == VerdictAggregated:
					if tb.Stats().Displaced != displacedBefore+1 || len(after) != entryCap {
						t.Fatalf("seed %d: kept at a full entry without a displacement", seed)
					}
					var loser [16]byte
					for s, n := range nb {
						if na[s] < n {
							loser = s
						}
					}
					most := slices.Max(slices.Collect(mapValues(nb)))
					if nb[loser] != most || na[loser] < na[l.Source()] {
						t.Fatalf("seed %d: took from a source holding %d (the most %d), leaving %d against the newcomer's %d",
							seed, nb[loser], most, na[loser], na[l.Source()])
					}
					changed = true
				default:
					if v != VerdictRequesterCapped || !slices.Equal(before, after) {
						t.Fatalf("seed %d: a refused newcomer got %v and changed the entry", seed, v)
					}
				}
			}
			if !changed {
				break
			}
		}
		n := bySource(requestersOf(tb, key))
		for s, d := range demand {
			held := n[src(s).Source()]
			if held > d {
				t.Fatalf("seed %d: source %d holds %d of its %d ports", seed, s, held, d)
			}
			if held == d {
				continue
			}
			for o := range demand {
				if n[src(o).Source()] > held+1 {
					t.Errorf("seed %d: source %d wants %d and holds %d while source %d holds %d",
						seed, s, d, held, o, n[src(o).Source()])
				}
			}
		}
		if total >= entryCap && len(requestersOf(tb, key)) != entryCap {
			t.Errorf("seed %d: demand %d, the entry holds %d of %d", seed, total, len(requestersOf(tb, key)), entryCap)
		}
		checkInvariants(t, tb)
		displaced += tb.Stats().Displaced
	}
	if displaced == 0 {
		t.Error("no run displaced anyone; the test is too weak")
	}
}

// mapValues yields m's values.
func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// TestDisplacedOpenerKeepsItsCharge: a chunk stays charged to the source
// that opened it when its opener is displaced, so the displacing source
// is charged nothing and the displaced one cannot open another chunk on
// the strength of it; answering the entry returns the charge.
func TestDisplacedOpenerKeepsItsCharge(t *testing.T) {
	// A share of 6 overflow lanes: two chunks.
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 100, MaxRequestersPerEntry: 5, MaxOverflowPerSource: 6})
	a, b := laneN(1), laneN(2)
	wantAdd(t, tb, 1, laneN(9), 0, VerdictForwardNew)
	for p := range uint16(4) {
		wantAdd(t, tb, 1, port(a, 1+p), 0, VerdictAggregated) // a1 and a4 open the chunks
	}
	wantAdd(t, tb, 1, b, 0, VerdictAggregated) // displaces a4, the second chunk's opener
	if got, want := requestersOf(tb, 1), []lane.Key{laneN(9), port(a, 1), port(a, 2), port(a, 3), b}; !slices.Equal(got, want) {
		t.Fatalf("requesters %v, want %v", ports(got), ports(want))
	}
	wantAdd(t, tb, 2, laneN(8), 0, VerdictForwardNew)
	wantAdd(t, tb, 2, port(a, 5), 0, VerdictRequesterCapped) // a still holds its two chunks
	wantAdd(t, tb, 2, port(b, 5), 0, VerdictAggregated)      // b was charged nothing
	if st := tb.Stats(); st.OverflowShareCapped != 1 || st.Displaced != 1 {
		t.Errorf("OverflowShareCapped %d, Displaced %d; want 1, 1", st.OverflowShareCapped, st.Displaced)
	}
	checkInvariants(t, tb)
	tb.Take(1, nil, 0)
	wantAdd(t, tb, 3, laneN(7), 0, VerdictForwardNew)
	wantAdd(t, tb, 3, port(a, 6), 0, VerdictAggregated) // its charges returned
	checkInvariants(t, tb)
}

// TestFixedSourceCapStillBinds: MaxRequestersPerSource, when set, refuses
// a source at it even while the entry has room, and a displacement never
// takes a source past it.
func TestFixedSourceCapStillBinds(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 10, MaxRequestersPerEntry: 4, MaxRequestersPerSource: 2})
	a, b, c := laneN(1), laneN(2), laneN(3)
	wantAdd(t, tb, 1, port(a, 1), 0, VerdictForwardNew)
	wantAdd(t, tb, 1, port(a, 2), 0, VerdictAggregated)
	wantAdd(t, tb, 1, port(a, 3), 0, VerdictRequesterCapped) // room, but a is at 2
	wantAdd(t, tb, 1, port(b, 1), 0, VerdictAggregated)
	wantAdd(t, tb, 1, port(b, 2), 0, VerdictAggregated) // full: a 2, b 2
	wantAdd(t, tb, 1, c, 0, VerdictAggregated)          // c displaces b2 (b's latest joined last)
	wantAdd(t, tb, 1, port(c, 2), 0, VerdictRequesterCapped)
	if st := tb.Stats(); st.EntryShareCapped != 2 || st.Displaced != 1 {
		t.Errorf("EntryShareCapped %d, Displaced %d; want 2, 1", st.EntryShareCapped, st.Displaced)
	}
	checkInvariants(t, tb)
}

// TestFullEntryCappedForward: a newcomer refused at a full entry past the
// suppression window is still forwarded once per window, as before; one
// that displaces is joined (and forwarded).
func TestFullEntryCappedForward(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 10, MaxRequestersPerEntry: 3, SuppressWindow: time.Second})
	a := laneN(1)
	for p := range uint16(3) {
		tb.Add(1, port(a, p), 0)
	}
	wantAdd(t, tb, 1, port(a, 9), 2*time.Second, VerdictCappedForward)
	wantAdd(t, tb, 1, port(a, 8), 2*time.Second, VerdictRequesterCapped)
	wantAdd(t, tb, 1, laneN(2), 4*time.Second, VerdictForwardJoined) // displaces a2
	wantAdd(t, tb, 1, laneN(3), 4*time.Second, VerdictAggregated)    // displaces a1
	wantAdd(t, tb, 1, laneN(4), 4*time.Second, VerdictRequesterCapped)
	wantAdd(t, tb, 1, laneN(4), 5*time.Second, VerdictCappedForward)
	checkInvariants(t, tb)
}

// TestDisplacementAllocatesNothing: once a shard has tallied an entry, the
// refusals and displacements at full entries allocate nothing.
func TestDisplacementAllocatesNothing(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 1000, MaxRequestersPerEntry: 8})
	flood := laneN(1)
	fill := func(k uint64) {
		for p := range uint16(8) {
			tb.Add(k, port(flood, p), 0)
		}
	}
	fill(0)
	tb.Add(0, laneN(2), 0) // the first tally
	dst := make([]lane.Key, 0, 8)
	next := uint64(1)
	allocs := testing.AllocsPerRun(1000, func() {
		fill(next)
		tb.Add(next, port(flood, 100), 0) // refused: tallied, the largest cached
		tb.Add(next, laneN(2), 0)         // displaces: tallied again to find whom
		tb.Add(next, laneN(3), 0)         // displaces
		dst, _ = tb.Take(next, dst[:0], 0)
		next++
	})
	if allocs != 0 {
		t.Errorf("the full-entry paths allocate %v per run", allocs)
	}
	if st := tb.Stats(); st.Displaced < 2000 || st.EntryShareCapped < 1000 {
		t.Errorf("the run never reached the rule: %+v", st)
	}
	checkInvariants(t, tb)
}

// TestSrcWordsIsSource: the words the scans compare are lane.Key.Source's,
// and sourceMatch matches exactly the lanes of the same Source, IPv4
// lanes against IPv6 ones of ::/64 included.
func TestSrcWordsIsSource(t *testing.T) {
	var keys []lane.Key
	for _, ap := range []string{"192.0.2.1:1", "[::ffff:192.0.2.1]:7", "192.0.2.2:1", "0.0.0.0:1", "0.0.0.1:2",
		"[2001:db8:1:2::1]:1", "[2001:db8:1:2:ffff:ffff:ffff:ffff]:2", "[2001:db8:1:3::1]:1", "[::1]:1", "[::]:1",
		"[::ffff:0:1]:1", "[::fffe:c000:201]:1", "[::c000:201]:1", "[0:0:0:1::ffff:c000:201]:1"} {
		k := lane.KeyOf(netip.MustParseAddrPort(ap))
		src := k.Source()
		a, b := srcWords(&k)
		if a != binary.LittleEndian.Uint64(src[:8]) || b != binary.LittleEndian.Uint64(src[8:]) {
			t.Errorf("%s: srcWords %#x %#x, Source %x", ap, a, b, src)
		}
		keys = append(keys, k)
	}
	for _, r := range keys {
		m := sourceMatchOf(&r)
		for _, k := range keys {
			if got, want := m.has(&k), r.Source() == k.Source(); got != want {
				t.Errorf("the source of %v matches %v: %v, want %v", r.AddrPort(), k.AddrPort(), got, want)
			}
		}
	}
}
