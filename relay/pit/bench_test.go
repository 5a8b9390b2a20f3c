package pit

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// benchKey returns the i-th key of a benchmark stream: distinct, spread like
// the relay's seeded hash of a name.
func benchKey(stream, i uint64) uint64 { return mix(stream<<48 ^ i) }

// fillTable adds n entries with one requester each at time now.
func fillTable(tb *Table, n int, now time.Duration) {
	for i := range n {
		tb.Add(benchKey(1, uint64(i)), laneN(i), now)
	}
}

// BenchmarkAddTake measures one request's life: Add a new name, then Take
// it, with a given number of other entries in flight. MaxEntries is twice
// the largest size so no shard is full.
func BenchmarkAddTake(b *testing.B) {
	for _, live := range []int{0, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			benchAddTake(b, Config{MaxEntries: 2_000_000}, live)
		})
	}
}

// BenchmarkAggregateTake: four requesters on one name (a new entry, two
// aggregated, one retransmission), then the response, at 1M in flight.
func BenchmarkAggregateTake(b *testing.B) {
	benchAggregateTake(b, Config{MaxEntries: 2_000_000})
}

// relayBenchConfig is the table as relay.New configures it by default: a
// per-source cap of a tenth of the table (relay's
// DefaultPendingSourceDivisor), so that the per-source paths are measured
// as a relay runs them.
var relayBenchConfig = Config{MaxEntries: 2_000_000, MaxEntriesPerSource: 200_000}

// BenchmarkAddTakeRelayConfig is BenchmarkAddTake under relayBenchConfig.
func BenchmarkAddTakeRelayConfig(b *testing.B) {
	for _, live := range []int{0, 1_000_000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			benchAddTake(b, relayBenchConfig, live)
		})
	}
}

// BenchmarkAggregateTakeRelayConfig is BenchmarkAggregateTake under
// relayBenchConfig.
func BenchmarkAggregateTakeRelayConfig(b *testing.B) {
	benchAggregateTake(b, relayBenchConfig)
}

// benchAddTake runs BenchmarkAddTake's cycle on a table configured by cfg
// with live entries in flight.
func benchAddTake(b *testing.B, cfg Config, live int) {
	tb := mustNew(b, cfg)
	now := time.Second
	fillTable(tb, live, now)
	dst := make([]lane.Key, 0, DefaultMaxRequestersPerEntry)
	r := laneN(7)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		k := benchKey(2, i)
		tb.Add(k, r, now)
		dst, _ = tb.Take(k, dst[:0], now)
	}
}

// benchAggregateTake runs BenchmarkAggregateTake's cycle on a table
// configured by cfg.
func benchAggregateTake(b *testing.B, cfg Config) {
	tb := mustNew(b, cfg)
	now := time.Second
	fillTable(tb, 1_000_000, now)
	dst := make([]lane.Key, 0, DefaultMaxRequestersPerEntry)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		k := benchKey(2, i)
		tb.Add(k, laneN(1), now)
		tb.Add(k, laneN(2), now)
		tb.Add(k, laneN(3), now)
		tb.Add(k, laneN(1), now)
		dst, _ = tb.Take(k, dst[:0], now)
	}
}

// BenchmarkAddTakeParallel runs the Add+Take cycle from GOMAXPROCS
// goroutines sharing one table with 1M entries in flight.
func BenchmarkAddTakeParallel(b *testing.B) {
	tb := mustNew(b, Config{MaxEntries: 2_000_000})
	now := time.Second
	fillTable(tb, 1_000_000, now)
	var stream atomic.Uint64
	stream.Store(2)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s := stream.Add(1)
		dst := make([]lane.Key, 0, DefaultMaxRequestersPerEntry)
		r := laneN(int(s))
		for i := uint64(0); pb.Next(); i++ {
			k := benchKey(s, i)
			tb.Add(k, r, now)
			dst, _ = tb.Take(k, dst[:0], now)
		}
	})
}

// BenchmarkChurnExpire is the steady state of a relay at capacity: each op
// adds a new name that is never answered while the clock advances so that
// TTL worth of adds is 1M entries, and Expire is called on every op (the
// lazy style); entries leave only by expiry. ns/op includes the amortized
// expiry work.
func BenchmarkChurnExpire(b *testing.B) {
	const inFlight = 1_000_000
	tb := mustNew(b, Config{MaxEntries: 2_000_000})
	step := DefaultTTL / inFlight
	now := time.Duration(0)
	for i := range uint64(inFlight) {
		tb.Add(benchKey(1, i), laneN(int(i)), now)
		tb.Expire(now)
		now += step
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		tb.Add(benchKey(2, i), laneN(int(i)), now)
		tb.Expire(now)
		now += step
	}
	b.StopTimer()
	if n := tb.Len(); n < inFlight*9/10 || n > inFlight*11/10 {
		b.Fatalf("%d entries in flight, want about %d", n, inFlight)
	}
}

// BenchmarkExpireTick measures one Expire call that crosses a tick with 1M
// entries in flight spread evenly over the TTL (about 1M/300 due per tick).
func BenchmarkExpireTick(b *testing.B) {
	const inFlight = 1_000_000
	tb := mustNew(b, Config{MaxEntries: 2_000_000})
	step := DefaultTTL / inFlight
	now := time.Duration(0)
	for i := range uint64(inFlight) {
		tb.Add(benchKey(1, i), laneN(int(i)), now)
		now += step
	}
	tb.Expire(now)
	added := uint64(inFlight)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		// Refill one tick's worth so the table stays at 1M.
		for range DefaultTick / step {
			tb.Add(benchKey(1, added), laneN(int(added)), now)
			added++
			now += step
		}
		b.StartTimer()
		tb.Expire(now)
	}
}

// heapAlloc returns the live heap after a full collection.
func heapAlloc() (alloc, inuse uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.HeapInuse
}

// BenchmarkMemory1M fills a default table (MaxEntries 1M, 16 shards) with
// 1M distinct names, one requester each, and reports the heap per live
// entry; with-4-requesters adds three more requesters to each entry
// (drawing on the overflow pool until it is used up). It also measures a
// Go map[uint64]uint32 as the index, the alternative to the open-addressing
// index (4 bytes per slot at <= 3/4 load).
func BenchmarkMemory1M(b *testing.B) {
	const n = 1_000_000
	report := func(b *testing.B, before, beforeInuse uint64, entries int) {
		after, afterInuse := heapAlloc()
		b.ReportMetric(float64(after-before)/float64(entries), "B/entry")
		b.ReportMetric(float64(afterInuse-beforeInuse)/float64(entries), "inuse-B/entry")
		b.ReportMetric(float64(entries), "entries")
	}
	for _, reqs := range []int{1, 4} {
		b.Run(fmt.Sprintf("pit/requesters=%d", reqs), func(b *testing.B) {
			for range b.N {
				before, beforeInuse := heapAlloc()
				tb := mustNew(b, Config{})
				for i := range n {
					k := benchKey(1, uint64(i))
					for r := range reqs {
						tb.Add(k, laneN(i+r), time.Second)
					}
				}
				report(b, before, beforeInuse, tb.Len())
				runtime.KeepAlive(tb)
			}
		})
	}
	b.Run("go-map-index", func(b *testing.B) {
		for range b.N {
			before, beforeInuse := heapAlloc()
			m := make(map[uint64]uint32)
			for i := range uint32(n) {
				m[benchKey(1, uint64(i))] = i
			}
			report(b, before, beforeInuse, len(m))
			runtime.KeepAlive(m)
		}
	})
}

// BenchmarkIndexChurn compares the open-addressing index with a Go map as
// the key index under insert+delete churn at 1M keys (one shard, so the
// index is as large as it gets).
func BenchmarkIndexChurn(b *testing.B) {
	const n = 1_000_000
	b.Run("open-addressing", func(b *testing.B) {
		tb := mustNew(b, Config{Shards: 1, MaxEntries: 2 * n})
		fillTable(tb, n, time.Second)
		s := &tb.shards[0]
		b.ReportAllocs()
		b.ResetTimer()
		for i := range uint64(b.N) {
			h := benchKey(2, i)
			s.growIndexLocked()
			pos, _, _ := s.findLocked(h)
			idx := s.allocEntryLocked()
			s.entries[idx] = entry{hash: h, nreq: 1, chunk: nilIdx}
			s.slots[pos] = uint32(h>>56)<<24 | (idx + 1)
			s.n++
			pos, idx, _ = s.findLocked(h)
			s.deleteSlotLocked(pos)
			s.entries[idx].nreq = 0
			s.entries[idx].next = s.freeEntry
			s.freeEntry = idx
			s.n--
		}
	})
	b.Run("go-map", func(b *testing.B) {
		m := make(map[uint64]uint32)
		for i := range uint32(n) {
			m[benchKey(1, uint64(i))] = i
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range uint64(b.N) {
			h := benchKey(2, i)
			m[h] = uint32(i)
			_ = m[h]
			delete(m, h)
		}
	})
}

// BenchmarkRandomMix is a mixed workload at 1M in flight: 70% Add (names
// repeat, so some aggregate or retransmit), 25% Take, 5% Expire, with time
// advancing.
func BenchmarkRandomMix(b *testing.B) {
	tb := mustNew(b, Config{})
	r := rand.New(rand.NewPCG(1, 1))
	now := time.Duration(0)
	const names = 1_500_000
	for i := range 1_000_000 {
		tb.Add(benchKey(1, r.Uint64N(names)), laneN(i%64), now)
	}
	dst := make([]lane.Key, 0, DefaultMaxRequestersPerEntry)
	op := func() {
		now += 10 * time.Microsecond
		k := benchKey(1, r.Uint64N(names))
		switch x := r.IntN(100); {
		case x < 70:
			tb.Add(k, laneN(x), now)
		case x < 95:
			dst, _ = tb.Take(k, dst[:0], now)
		default:
			tb.Expire(now)
		}
	}
	// Warm up until the overflow pool has grown to its working size.
	for range 5_000_000 {
		op()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		op()
	}
}

// BenchmarkEvictFlood: a full default table (1M) filled at one instant, then
// a flood of new names, each shedding the oldest entry.
func BenchmarkEvictFlood(b *testing.B) {
	tb := mustNew(b, Config{})
	now := time.Second
	fillTable(tb, 1_100_000, now)
	tb.Expire(now)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		tb.Add(benchKey(2, i), laneN(int(i)), now)
	}
	b.StopTimer()
	if st := tb.Stats(); st.Evicted < uint64(b.N) {
		b.Fatalf("evicted %d in %d adds", st.Evicted, b.N)
	}
}

// BenchmarkJoinOneEntry: n requesters, each its own source, join one name
// and the response takes them; ns/op is per Add (the de-duplication scan
// grows with the requesters already on the entry, so the mean is about half
// a full entry's scan).
func BenchmarkJoinOneEntry(b *testing.B) {
	for _, n := range []int{64, 200, 255, 512} {
		b.Run(fmt.Sprintf("requesters=%d", n), func(b *testing.B) {
			tb := mustNew(b, Config{MaxEntries: 1 << 16, MaxRequestersPerEntry: n, MaxRequestersPerSource: -1})
			dst := make([]lane.Key, 0, n)
			now := time.Second
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; {
				k := benchKey(3, uint64(i))
				for j := 0; j < n && i < b.N; j++ {
					tb.Add(k, laneN(j), now)
					i++
				}
				dst, _ = tb.Take(k, dst[:0], now)
			}
		})
	}
}

// BenchmarkFloodFullEntry: the worst Add of a flood, a new port of the
// entry's largest source arriving at a full entry (at the default cap and
// at MaxRequestersLimit); refused, after a scan of every requester. (The
// overflow share is off, which at this small table would bind first.)
func BenchmarkFloodFullEntry(b *testing.B) {
	for _, n := range []int{DefaultMaxRequestersPerEntry, MaxRequestersLimit} {
		b.Run(fmt.Sprintf("requesters=%d", n), func(b *testing.B) {
			tb := mustNew(b, Config{Shards: 1, MaxEntries: 1 << 16, MaxRequestersPerEntry: n, MaxOverflowPerSource: -1})
			now := time.Second
			const k = 1
			flood := laneN(1)
			tb.Add(k, laneN(2), now)
			for p := 0; p < 1<<16-1; p++ {
				tb.Add(k, port(flood, uint16(p)), now)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tb.Add(k, port(flood, uint16(i)), now)
			}
		})
	}
}
