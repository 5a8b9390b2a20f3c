package pit

import (
	"fmt"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// relayBenchConfig is the table as relay.New configures it by default: a
// per-source cap of a tenth of the table (relay's
// DefaultPendingSourceDivisor), so that the per-source paths are measured
// as a relay runs them.
var relayBenchConfig = Config{MaxEntries: 2_000_000, MaxEntriesPerSource: 200_000}

// BenchmarkAddTakeRelayConfig is BenchmarkAddTake under relayBenchConfig.
func BenchmarkAddTakeRelayConfig(b *testing.B) {
	for _, live := range []int{0, 1_000_000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			tb := mustNew(b, relayBenchConfig)
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
		})
	}
}

// BenchmarkAggregateTakeRelayConfig is BenchmarkAggregateTake under
// relayBenchConfig.
func BenchmarkAggregateTakeRelayConfig(b *testing.B) {
	tb := mustNew(b, relayBenchConfig)
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
