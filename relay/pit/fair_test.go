package pit

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// Tests of the per-source shares: of the overflow pool
// (Config.MaxOverflowPerSource) and of a RefuseNew shard's reserve
// (FullReserveDivisor, FullShareDivisor).

// port returns lane r on another port: the same source.
func port(r lane.Key, p uint16) lane.Key {
	r.Port = p
	return r
}

// TestOverflowShareOneSourceManyPorts: one address joining many names from
// 64 ports (64 distinct requester lanes) is held to its share of the
// overflow pool, so the subscribers of another name all get on it; with
// the share switched off the same flood leaves room for none of them.
func TestOverflowShareOneSourceManyPorts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		perSrc   int
		wantSubs int
	}{
		{"default share", 0, 6},
		{"no share", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := mustNew(t, Config{Shards: 1, MaxEntries: 1200, MaxOverflowPerSource: tc.perSrc})
			p := tb.shards[0].p
			attacker := laneN(1)
			for k := uint64(1); k <= 100; k++ {
				for pt := range uint16(64) {
					tb.Add(k, port(attacker, 1000+pt), 0)
				}
			}
			st := tb.Stats()
			if tc.perSrc == 0 {
				// The default: a tenth of the pool (300 slots), in chunks.
				if want := uint32((1200/DefaultOverflowDivisor/DefaultOverflowSourceDivisor + 2) / 3); p.chunkShare != want {
					t.Fatalf("chunk share %d, want %d", p.chunkShare, want)
				}
				if held := tb.shards[0].nChunks; held != int(p.chunkShare) {
					t.Errorf("the attacker holds %d chunks, its share is %d", held, p.chunkShare)
				}
				if st.OverflowShareCapped == 0 || st.OverflowShareCapped > st.RequesterCapped {
					t.Errorf("OverflowShareCapped %d of RequesterCapped %d", st.OverflowShareCapped, st.RequesterCapped)
				}
			} else if tb.shards[0].nChunks != p.chunkCap {
				t.Fatalf("without a share the flood holds %d of %d chunks", tb.shards[0].nChunks, p.chunkCap)
			}
			// Six subscribers, each its own address, of a held name.
			const sub = 5000
			for i := range 6 {
				tb.Add(sub, laneN(100+i), time.Millisecond)
			}
			got, ok := tb.Take(sub, nil, 2*time.Millisecond)
			if !ok || len(got) != tc.wantSubs {
				t.Errorf("Take(subscription) = %d requesters, %v; want %d", len(got), ok, tc.wantSubs)
			}
			checkInvariants(t, tb)
		})
	}
}

// TestOverflowShareChargesTheChunkOpener: a source at its share may still
// join a chunk another source opened (it costs the pool nothing) but may
// not open one; answering an entry returns its chunks' charges.
func TestOverflowShareChargesTheChunkOpener(t *testing.T) {
	// One shard, a share of 3 overflow slots: one chunk.
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 100, MaxRequestersPerEntry: 20, MaxOverflowPerSource: 3})
	a, b, c := laneN(1), laneN(2), laneN(3)
	wantAdd(t, tb, 1, laneN(9), 0, VerdictForwardNew)
	wantAdd(t, tb, 1, port(a, 1), 0, VerdictAggregated) // opens chunk 1 of entry 1: a's share
	wantAdd(t, tb, 1, port(a, 2), 0, VerdictAggregated) // fills it
	wantAdd(t, tb, 1, port(a, 3), 0, VerdictAggregated)
	wantAdd(t, tb, 1, port(a, 4), 0, VerdictRequesterCapped) // would open a second chunk
	wantAdd(t, tb, 2, laneN(8), 0, VerdictForwardNew)
	wantAdd(t, tb, 2, port(a, 5), 0, VerdictRequesterCapped) // would open entry 2's first
	wantAdd(t, tb, 2, b, 0, VerdictAggregated)               // b opens it
	wantAdd(t, tb, 2, port(a, 6), 0, VerdictAggregated)      // a joins b's chunk
	wantAdd(t, tb, 1, port(b, 7), 0, VerdictRequesterCapped) // b is at its share too
	wantAdd(t, tb, 1, c, 0, VerdictAggregated)               // c opens entry 1's second chunk
	wantAdd(t, tb, 1, port(a, 4), 0, VerdictAggregated)      // and a joins it
	if st := tb.Stats(); st.OverflowShareCapped != 3 || st.RequesterCapped != 3 {
		t.Errorf("OverflowShareCapped %d, RequesterCapped %d; want 3, 3", st.OverflowShareCapped, st.RequesterCapped)
	}
	checkInvariants(t, tb)
	// Entry 1 answered: its first chunk's charge returns to a.
	if got, _ := tb.Take(1, nil, 0); len(got) != 6 {
		t.Fatalf("Take(1) = %d requesters, want 6", len(got))
	}
	wantAdd(t, tb, 3, laneN(7), 0, VerdictForwardNew)
	wantAdd(t, tb, 3, port(a, 8), 0, VerdictAggregated)
	wantAdd(t, tb, 4, laneN(7), 0, VerdictForwardNew)
	wantAdd(t, tb, 4, port(a, 9), 0, VerdictRequesterCapped)
	checkInvariants(t, tb)
}

// TestSourceIsAnAddressOrASlash64: the per-source counters take an IPv4
// address whatever the port, and an IPv6 address's /64 whatever its
// interface identifier, as one source (so all of ::/64, loopback and the
// deprecated IPv4-compatible addresses, is one); other addresses are other
// sources.
func TestSourceIsAnAddressOrASlash64(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 100, MaxEntriesPerSource: 2})
	s := &tb.shards[0]
	s.p.seed = 1 // fixed, so that the distinct sources below are known not to collide
	key := func(ap string) lane.Key { return lane.KeyOf(netip.MustParseAddrPort(ap)) }
	same := [][]string{
		{"192.0.2.1:1", "192.0.2.1:65535", "[::ffff:192.0.2.1]:7"},
		{"[2001:db8:1:2::1]:1", "[2001:db8:1:2:ffff:ffff:ffff:ffff]:2", "[2001:db8:1:2:abcd::]:3"},
	}
	distinct := []string{"192.0.2.1:1", "192.0.2.2:1", "[2001:db8:1:2::1]:1", "[2001:db8:1:3::1]:1",
		"[::1]:1", "[2001:db8::ffff:c000:201]:1"}
	for _, group := range same {
		for _, ap := range group[1:] {
			if ka, k0 := key(ap), key(group[0]); s.sourceSlot(&ka) != s.sourceSlot(&k0) {
				t.Errorf("%s and %s are counted as different sources", ap, group[0])
			}
		}
	}
	seen := map[uint32]string{}
	for _, ap := range distinct {
		k := key(ap)
		slot := s.sourceSlot(&k)
		if other, dup := seen[slot]; dup {
			t.Errorf("%s and %s are counted as one source", ap, other)
		}
		seen[slot] = ap
	}
	// And the cap holds them so: a /64 gets two entries in all.
	for i, ap := range same[1] {
		want := VerdictForwardNew
		if i == 2 {
			want = VerdictSourceCapped
		}
		wantAdd(t, tb, uint64(10+i), key(ap), 0, want)
	}
	wantAdd(t, tb, 20, key("[2001:db8:1:3::1]:1"), 0, VerdictForwardNew)
}

// TestRefuseReserveKeepsRoomForSmallSources: under RefuseNew, one source
// with no per-source cap fills a shard up to its reserve and is refused
// there; sources under the fair share take the reserve until the shard is
// full; no entry is shed on the way.
func TestRefuseReserveKeepsRoomForSmallSources(t *testing.T) {
	const entryCap = 640 // reserve 80, share 10
	// Seeded: with a random seed its 70-odd sources share one of the
	// shard's per-source slots in about 4 % of runs, and a small source
	// counted with the attacker is refused as it would be.
	tb := mustNew(t, Config{Shards: 1, MaxEntries: entryCap, FullPolicy: RefuseNew, Seed: 1})
	reserve, share := entryCap/FullReserveDivisor, entryCap/FullShareDivisor
	attacker := laneN(1)
	k := uint64(0)
	for range entryCap - reserve {
		k++
		wantAdd(t, tb, k, port(attacker, uint16(k)), 0, VerdictForwardNew)
	}
	k++
	wantAdd(t, tb, k, attacker, 0, VerdictRefused)
	// A source with share-1 entries is under the share and gets in, once.
	small := laneN(2)
	for range share {
		k++
		wantAdd(t, tb, k, small, 0, VerdictForwardNew)
	}
	k++
	wantAdd(t, tb, k, small, 0, VerdictRefused)
	// One entry each for the rest of the reserve, then the shard is full
	// for everyone.
	for i := range reserve - share {
		k++
		wantAdd(t, tb, k, laneN(100+i), 0, VerdictForwardNew)
	}
	k++
	wantAdd(t, tb, k, laneN(99), 0, VerdictRefused)
	st := tb.Stats()
	if st.Entries != entryCap || st.Evicted != 0 || st.Refused != 3 || st.RefusedShare != 2 {
		t.Errorf("Stats = %+v; want %d entries, none evicted, 3 refused of which 2 over the share", st, entryCap)
	}
	// An answered entry makes room for a small source, not the flood.
	tb.Take(1, nil, 0)
	wantAdd(t, tb, 1, attacker, 0, VerdictRefused)
	wantAdd(t, tb, 1, laneN(99), 0, VerdictForwardNew)
	checkInvariants(t, tb)
}

// TestRefuseReserveExpiresBeforeRefusing: a source over its share in the
// reserve is refused only if the shard is still that full once what has
// expired is gone.
func TestRefuseReserveExpiresBeforeRefusing(t *testing.T) {
	const entryCap = 64 // reserve 8, share 1
	tb := mustNew(t, Config{Shards: 1, MaxEntries: entryCap, FullPolicy: RefuseNew, TTL: time.Second, Tick: 100 * time.Millisecond})
	a := laneN(1)
	for k := range uint64(entryCap - entryCap/FullReserveDivisor) {
		tb.Add(k, a, time.Duration(k)*time.Millisecond)
	}
	wantAdd(t, tb, 100, a, 100*time.Millisecond, VerdictRefused)
	wantAdd(t, tb, 100, a, 2*time.Second, VerdictForwardNew)
	if st := tb.Stats(); st.Expired != entryCap-entryCap/FullReserveDivisor {
		t.Errorf("Expired = %d", st.Expired)
	}
}

// TestRefuseReserveManySourcesFillIt: the limit of the reserve. Sources
// each under the fair share (a flood from many addresses) fill the whole
// shard, and then everyone is refused, as before the reserve existed.
func TestRefuseReserveManySourcesFillIt(t *testing.T) {
	const entryCap = 640
	tb := mustNew(t, Config{Shards: 1, MaxEntries: entryCap, FullPolicy: RefuseNew})
	for k := range uint64(entryCap) {
		wantAdd(t, tb, k, laneN(1000+int(k)), 0, VerdictForwardNew)
	}
	wantAdd(t, tb, entryCap, laneN(1), 0, VerdictRefused)
	if st := tb.Stats(); st.RefusedShare != 0 {
		t.Errorf("RefusedShare = %d; a fresh source is under its share", st.RefusedShare)
	}
}

// TestShedOldestHasNoReserve: the reserve is RefuseNew's; ShedOldest lets
// any source fill its shard, as before.
func TestShedOldestHasNoReserve(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 640})
	for k := range uint64(640) {
		wantAdd(t, tb, k, port(laneN(1), uint16(k)), 0, VerdictForwardNew)
	}
	if p := tb.shards[0].p; p.reserveAt != p.entryCap {
		t.Errorf("reserve at %d of %d", p.reserveAt, p.entryCap)
	}
}

// TestFairPathsAllocateNothing: the refusals for a share, and the
// charging and uncharging of chunks, allocate nothing once the slabs have
// grown.
func TestFairPathsAllocateNothing(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 6400, FullPolicy: RefuseNew, MaxOverflowPerSource: 30})
	flood := laneN(1)
	for k := range uint64(5600) {
		tb.Add(k, port(flood, uint16(k)), 0)
	}
	for k := range uint64(100) {
		for i := range 40 {
			tb.Add(k, port(flood, uint16(1000+i)), 0)
		}
	}
	dst := make([]lane.Key, 0, DefaultMaxRequestersPerEntry)
	next := uint64(10_000)
	allocs := testing.AllocsPerRun(2000, func() {
		tb.Add(next, flood, 0)             // refused: over its share, in the reserve
		tb.Add(next, laneN(2), 0)          // a small source takes the reserve
		tb.Add(next, laneN(3), 0)          // another opens a chunk, charged to it
		tb.Add(next, port(flood, 7), 0)    // the flood joins it
		tb.Add(next, port(flood, 8), 0)    //
		tb.Add(next, port(flood, 9), 0)    // and is capped at its share
		dst, _ = tb.Take(next, dst[:0], 0) // the chunk uncharged
		next++
	})
	if allocs != 0 {
		t.Errorf("the fair paths allocate %v per run", allocs)
	}
	st := tb.Stats()
	if st.RefusedShare == 0 || st.OverflowShareCapped == 0 {
		t.Errorf("the run never reached the shares: %+v", st)
	}
	checkInvariants(t, tb)
}

// TestOverflowShareConfig: the share's default, its off switch and its
// bound.
func TestOverflowShareConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want uint32 // chunks per shard
	}{
		{Config{Shards: 1, MaxEntries: 1200}, 10},                           // 300 lanes of the pool, a tenth: 30 lanes
		{Config{Shards: 4, MaxEntries: 1200}, 3},                            // 30 lanes over 4 shards: 8 each, 3 chunks
		{Config{Shards: 1, MaxEntries: 1200, MaxOverflowPerSource: 1}, 1},   // at least one chunk
		{Config{Shards: 1, MaxEntries: 1200, MaxOverflowPerSource: -1}, 0},  // off
		{Config{Shards: 1, MaxEntries: 1200, MaxOverflowPerSource: 31}, 11}, // rounded up to whole chunks
	} {
		tb := mustNew(t, tc.cfg)
		if got := tb.shards[0].p.chunkShare; got != tc.want {
			t.Errorf("%+v: chunk share %d, want %d", tc.cfg, got, tc.want)
		}
	}
	limit := MaxEntriesPerShard * lanesPerChunk
	if _, err := New(Config{Shards: 1, MaxEntries: 1, MaxOverflowPerSource: limit - 1}); err != nil {
		t.Errorf("MaxOverflowPerSource %d: %v", limit-1, err)
	}
	if _, err := New(Config{Shards: 1, MaxEntries: 1, MaxOverflowPerSource: limit}); !errors.Is(err, errConfig) {
		t.Errorf("MaxOverflowPerSource %d: %v, want a config error", limit, err)
	}
}
