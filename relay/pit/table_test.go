package pit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

func laneN(i int) lane.Key {
	return lane.Key{IP: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}, Port: uint16(i)}
}

// mustNew returns a table for cfg, with no per-source entry cap unless cfg
// sets one: these tests exercise one rule at a time, and the default cap
// (MaxEntries/DefaultSourceDivisor: TestDefaultSourceCap) would bind first
// in their small tables.
func mustNew(t testing.TB, cfg Config) *Table {
	t.Helper()
	tb, err := New(noSourceCap(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func wantAdd(t *testing.T, tb *Table, key uint64, r lane.Key, now time.Duration, want Verdict) {
	t.Helper()
	if v, evicted := tb.Add(key, r, now); v != want || evicted {
		t.Fatalf("Add(%d, %v) at %v = %v, evicted %v; want %v", key, r.Port, now, v, evicted, want)
	}
}

func TestAddNewForwards(t *testing.T) {
	tb := mustNew(t, Config{})
	wantAdd(t, tb, 1, laneN(1), 0, VerdictForwardNew)
	if !VerdictForwardNew.Forward() {
		t.Error("VerdictForwardNew.Forward() = false")
	}
	wantAdd(t, tb, 2, laneN(1), 0, VerdictForwardNew)
	if tb.Len() != 2 {
		t.Errorf("Len = %d, want 2", tb.Len())
	}
	if st := tb.Stats(); st.Added != 2 || st.Entries != 2 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestRetransmitForwardsAgain(t *testing.T) {
	tb := mustNew(t, Config{SuppressWindow: time.Second})
	wantAdd(t, tb, 7, laneN(1), 0, VerdictForwardNew)
	// A retransmission is forwarded even inside the suppression window...
	wantAdd(t, tb, 7, laneN(1), 100*time.Millisecond, VerdictForwardRetransmit)
	if !VerdictForwardRetransmit.Forward() {
		t.Error("VerdictForwardRetransmit.Forward() = false")
	}
	// ...and restarts the window: a newcomer 1.05 s after the first forward
	// but 0.95 s after the retransmission is aggregated.
	wantAdd(t, tb, 7, laneN(2), 1050*time.Millisecond, VerdictAggregated)
	if st := tb.Stats(); st.Retransmits != 1 || st.Aggregated != 1 || st.Entries != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestAggregateWithinWindowForwardAfter(t *testing.T) {
	const w = 500 * time.Millisecond
	tb := mustNew(t, Config{SuppressWindow: w})
	wantAdd(t, tb, 9, laneN(1), 0, VerdictForwardNew)
	wantAdd(t, tb, 9, laneN(2), w-time.Millisecond, VerdictAggregated)
	if VerdictAggregated.Forward() {
		t.Error("VerdictAggregated.Forward() = true")
	}
	wantAdd(t, tb, 9, laneN(3), w, VerdictForwardJoined)
	if !VerdictForwardJoined.Forward() {
		t.Error("VerdictForwardJoined.Forward() = false")
	}
	// The joined forward restarted the window.
	wantAdd(t, tb, 9, laneN(4), 2*w-time.Millisecond, VerdictAggregated)
	wantAdd(t, tb, 9, laneN(5), 2*w, VerdictForwardJoined)
	dst, ok := tb.Take(9, nil, 2*w)
	if want := []lane.Key{laneN(1), laneN(2), laneN(3), laneN(4), laneN(5)}; !ok || !slices.Equal(dst, want) {
		t.Errorf("Take = %v %v, want %v", dst, ok, want)
	}
}

func TestSubMillisecondWindowNeverSuppresses(t *testing.T) {
	tb := mustNew(t, Config{SuppressWindow: time.Nanosecond})
	wantAdd(t, tb, 1, laneN(1), 0, VerdictForwardNew)
	wantAdd(t, tb, 1, laneN(2), 0, VerdictForwardJoined)
}

func TestTakeReturnsAllDistinctAndDeletes(t *testing.T) {
	tb := mustNew(t, Config{MaxRequestersPerEntry: 10})
	var want []lane.Key
	for i := range 10 {
		tb.Add(42, laneN(i), time.Duration(i)*time.Millisecond)
		tb.Add(42, laneN(i), time.Duration(i)*time.Millisecond) // repeat: not listed twice
		want = append(want, laneN(i))
	}
	prefix := []lane.Key{laneN(99)}
	dst, ok := tb.Take(42, prefix, time.Second)
	if !ok || !slices.Equal(dst, append(prefix, want...)) {
		t.Fatalf("Take = %v %v, want prefix then %v", dst, ok, want)
	}
	if dst, ok := tb.Take(42, nil, time.Second); ok || dst != nil {
		t.Errorf("second Take = %v %v, want nil false", dst, ok)
	}
	if tb.Len() != 0 {
		t.Errorf("Len = %d after Take", tb.Len())
	}
	if dst, ok := tb.Take(43, prefix, time.Second); ok || !slices.Equal(dst, prefix) {
		t.Errorf("Take of absent key = %v %v, want dst unchanged, false", dst, ok)
	}
	checkInvariants(t, tb)
}

func TestTakeAfterExpiry(t *testing.T) {
	const ttl, tick = 30 * time.Second, 100 * time.Millisecond
	tb := mustNew(t, Config{TTL: ttl, Tick: tick})
	start := 1234 * time.Millisecond // mid-tick: expiry rounds up to 31.3 s
	tb.Add(1, laneN(1), start)
	tb.Add(2, laneN(1), start)
	if _, ok := tb.Take(1, nil, start+ttl); !ok {
		t.Error("Take at exactly now+TTL (before the tick boundary) failed")
	}
	if _, ok := tb.Take(2, nil, 31300*time.Millisecond); ok {
		t.Error("Take at the rounded expiry succeeded")
	}
	if st := tb.Stats(); st.Expired != 1 || st.Taken != 1 || st.Entries != 0 {
		t.Errorf("Stats = %+v, want the expired entry deleted by Take", st)
	}
}

func TestBumpKeepsAlive(t *testing.T) {
	const ttl = 10 * time.Second
	tb := mustNew(t, Config{TTL: ttl, Tick: 100 * time.Millisecond})
	tb.Add(1, laneN(1), 0)
	tb.Add(2, laneN(1), 0)
	tb.Add(3, laneN(1), 0)
	tb.Add(1, laneN(1), 8*time.Second) // retransmission bump
	tb.Add(2, laneN(2), 8*time.Second) // join bump
	for now := time.Duration(0); now <= 17*time.Second; now += 100 * time.Millisecond {
		n := tb.Expire(now)
		if now == ttl && n != 1 {
			t.Fatalf("Expire at %v removed %d, want only the unbumped entry", now, n)
		}
		if now < 18*time.Second && now != ttl && n != 0 {
			t.Fatalf("Expire at %v removed %d, want 0", now, n)
		}
	}
	for _, k := range []uint64{1, 2} {
		if _, ok := tb.Take(k, nil, 17900*time.Millisecond); !ok {
			t.Errorf("bumped entry %d gone before its bumped expiry", k)
		}
	}
	if _, ok := tb.Take(3, nil, 0); ok {
		t.Error("unbumped entry survived its expiry")
	}
	checkInvariants(t, tb)
}

func TestExpireRemovesExactlyTheExpired(t *testing.T) {
	tb := mustNew(t, Config{TTL: time.Second, Tick: 10 * time.Millisecond, Shards: 4})
	for i := range 1000 {
		tb.Add(uint64(i), laneN(i), time.Duration(i)*time.Millisecond)
	}
	// Entry i expires at tick ceil((i ms + 1 s)/10 ms).
	for now := time.Duration(0); now <= 2*time.Second; now += 7 * time.Millisecond {
		tb.Expire(now)
		nowTick := int(now / (10 * time.Millisecond))
		want := 0
		for i := range 1000 {
			if (i+1000+9)/10 > nowTick {
				want++
			}
		}
		if got := tb.Len(); got != want {
			t.Fatalf("at %v Len = %d, want %d", now, got, want)
		}
	}
	tb.Expire(2 * time.Second)
	if n := tb.Expire(2*time.Second + 9*time.Millisecond); n != 0 {
		t.Errorf("repeated Expire in the same tick removed %d", n)
	}
	checkInvariants(t, tb)
}

func TestExpireAfterLongIdle(t *testing.T) {
	tb := mustNew(t, Config{TTL: time.Second, Tick: 100 * time.Millisecond, Shards: 1})
	for i := range 100 {
		tb.Add(uint64(i), laneN(i), time.Duration(i)*time.Second/10)
	}
	// Far more than a wheel turn later: everything goes, each bucket once.
	if n := tb.Expire(time.Hour); n != 100 {
		t.Errorf("Expire after idle removed %d, want 100", n)
	}
	tb.Add(1, laneN(1), time.Hour)
	if n := tb.Expire(time.Hour + 500*time.Millisecond); n != 0 {
		t.Errorf("Expire removed %d fresh entries", n)
	}
	checkInvariants(t, tb)
}

func TestRequesterCap(t *testing.T) {
	tb := mustNew(t, Config{MaxRequestersPerEntry: 4, SuppressWindow: time.Second})
	for i := range 4 {
		tb.Add(5, laneN(i), 0)
	}
	wantAdd(t, tb, 5, laneN(4), 0, VerdictRequesterCapped)
	if VerdictRequesterCapped.Forward() {
		t.Error("VerdictRequesterCapped.Forward() = true")
	}
	// A known requester is still a retransmission.
	wantAdd(t, tb, 5, laneN(2), 0, VerdictForwardRetransmit)
	// Past the suppression window a capped request is forwarded, to
	// refresh the entry upstream, once per window; it still does not bump
	// the entry.
	tb.Add(6, laneN(0), 20*time.Second)
	wantAdd(t, tb, 5, laneN(5), 20*time.Second, VerdictCappedForward)
	wantAdd(t, tb, 5, laneN(6), 20*time.Second, VerdictRequesterCapped)
	wantAdd(t, tb, 5, laneN(6), 21*time.Second, VerdictCappedForward)
	if !VerdictCappedForward.Forward() {
		t.Error("VerdictCappedForward.Forward() = false")
	}
	if _, ok := tb.Take(5, nil, 30*time.Second); ok {
		t.Error("capped requester bumped the entry's expiry")
	}
	if st := tb.Stats(); st.RequesterCapped != 4 {
		t.Errorf("RequesterCapped = %d, want 4", st.RequesterCapped)
	}
}

func TestOverflowPoolCap(t *testing.T) {
	// One shard, 3 overflow slots: one chunk.
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 10, MaxRequestersPerEntry: 10, MaxOverflowRequesters: 3})
	for i := range 4 {
		wantAdd(t, tb, 1, laneN(i), 0, []Verdict{VerdictForwardNew, VerdictAggregated, VerdictAggregated, VerdictAggregated}[i])
	}
	wantAdd(t, tb, 2, laneN(0), 0, VerdictForwardNew)
	wantAdd(t, tb, 2, laneN(1), 0, VerdictRequesterCapped) // pool used up by entry 1
	tb.Take(1, nil, 0)
	wantAdd(t, tb, 2, laneN(1), 0, VerdictAggregated) // chunk returned
	checkInvariants(t, tb)
}

func TestFullShedsOldest(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 4, TTL: 10 * time.Second, Tick: 100 * time.Millisecond})
	for i := range 4 {
		tb.Add(uint64(i), laneN(i), time.Duration(i)*time.Second)
	}
	// Entry 0 is the oldest by creation, but bumped: entry 1 is nearest expiry.
	tb.Add(0, laneN(0), 4*time.Second)
	v, evicted := tb.Add(100, laneN(9), 5*time.Second)
	if v != VerdictForwardNew || !evicted {
		t.Fatalf("Add to full table = %v, evicted %v; want forward-new, evicted", v, evicted)
	}
	for k, want := range map[uint64]bool{0: true, 1: false, 2: true, 3: true, 100: true} {
		if got := present(tb, k); got != want {
			t.Errorf("entry %d present %v, want %v", k, got, want)
		}
	}
	v, evicted = tb.Add(101, laneN(9), 5*time.Second)
	if v != VerdictForwardNew || !evicted || present(tb, 2) {
		t.Errorf("second eviction: %v %v, entry 2 present %v; want entry 2 shed", v, evicted, present(tb, 2))
	}
	// Once entries have expired, a full shard expires instead of evicting.
	v, evicted = tb.Add(102, laneN(9), 13500*time.Millisecond)
	if v != VerdictForwardNew || evicted {
		t.Errorf("Add after expiry = %v, evicted %v; want no eviction", v, evicted)
	}
	if st := tb.Stats(); st.Evicted != 2 || st.Expired != 1 || st.Entries != 4 {
		t.Errorf("Stats = %+v", st)
	}
	checkInvariants(t, tb)
}

func TestFullRefuseNew(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 3, MaxOverflowRequesters: 3, FullPolicy: RefuseNew})
	for i := range 3 {
		tb.Add(uint64(i), laneN(i), 0)
	}
	wantAdd(t, tb, 10, laneN(1), 0, VerdictRefused)
	if VerdictRefused.Forward() {
		t.Error("VerdictRefused.Forward() = true")
	}
	// Existing entries still take requesters.
	wantAdd(t, tb, 1, laneN(7), 0, VerdictAggregated)
	tb.Take(0, nil, 0)
	wantAdd(t, tb, 10, laneN(1), 0, VerdictForwardNew)
	if st := tb.Stats(); st.Refused != 1 || st.Evicted != 0 || st.Entries != 3 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestFloodStaysWithinCaps floods a small table with random names,
// requesters and takes and checks the slabs never outgrow their caps.
func TestFloodStaysWithinCaps(t *testing.T) {
	cfg := Config{Shards: 4, MaxEntries: 2000, MaxRequestersPerEntry: 8, MaxOverflowRequesters: 600, TTL: 2 * time.Second}
	tb := mustNew(t, cfg)
	r := rand.New(rand.NewPCG(1, 2))
	now := time.Duration(0)
	var dst []lane.Key
	for i := range 200_000 {
		now += time.Duration(r.IntN(50)) * time.Microsecond
		key := r.Uint64N(5000)
		switch r.IntN(10) {
		case 0:
			dst, _ = tb.Take(key, dst[:0], now)
		case 1:
			tb.Expire(now)
		default:
			tb.Add(key, laneN(r.IntN(20)), now)
		}
		if tb.Len() > cfg.MaxEntries {
			t.Fatalf("op %d: Len %d exceeds MaxEntries", i, tb.Len())
		}
		if i%10_000 == 0 {
			checkInvariants(t, tb)
		}
	}
	checkInvariants(t, tb)
	st := tb.Stats()
	if st.Evicted == 0 || st.RequesterCapped == 0 {
		t.Errorf("flood did not reach the caps: %+v", st)
	}
	var chunks int
	for i := range tb.shards {
		chunks += cap(tb.shards[i].chunks)
	}
	if chunks*lanesPerChunk > cfg.MaxOverflowRequesters+cfg.Shards*lanesPerChunk {
		t.Errorf("%d chunks for %d overflow requesters", chunks, cfg.MaxOverflowRequesters)
	}
}

func TestConcurrent(t *testing.T) {
	tb := mustNew(t, Config{Shards: 4, MaxEntries: 4000, TTL: time.Second, Tick: 10 * time.Millisecond})
	const workers, ops = 4, 20_000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 3))
			var dst []lane.Key
			for i := range ops {
				// Each worker's clock runs a little apart from the others'.
				now := time.Duration(i)*100*time.Microsecond + time.Duration(w)*time.Millisecond
				key := r.Uint64N(3000)
				switch r.IntN(8) {
				case 0:
					dst, _ = tb.Take(key, dst[:0], now)
				case 1:
					tb.Expire(now)
				case 2:
					_ = tb.Stats()
					_ = tb.Len()
				default:
					tb.Add(key, laneN(w*10+r.IntN(10)), now)
				}
			}
		})
	}
	wg.Wait()
	checkInvariants(t, tb)
	st := tb.Stats()
	if st.Entries != tb.Len() || uint64(st.Entries) != st.Added-st.Taken-st.Expired-st.Evicted {
		t.Errorf("inconsistent stats after concurrent use: %+v, Len %d", st, tb.Len())
	}
}

func TestAllocsSteadyState(t *testing.T) {
	tb := mustNew(t, Config{Shards: 4, MaxEntries: 100_000, TTL: 2 * time.Second})
	// Warm up: grow the slabs to their working size.
	now := time.Duration(0)
	const live = 20_000
	for i := range live {
		tb.Add(uint64(i), laneN(i%7), now)
		tb.Add(uint64(i), laneN(i%7+1), now)
	}
	dst := make([]lane.Key, 0, DefaultMaxRequestersPerEntry)
	next := uint64(live)
	allocs := testing.AllocsPerRun(10_000, func() {
		now += 50 * time.Microsecond
		tb.Add(next, laneN(1), now)
		tb.Add(next, laneN(2), now)
		tb.Add(next, laneN(1), now)
		dst, _ = tb.Take(next-live, dst[:0], now)
		tb.Expire(now)
		next++
	})
	if allocs != 0 {
		t.Errorf("steady-state Add/Take/Expire allocate %v per run", allocs)
	}
	checkInvariants(t, tb)
}

func TestConfigValidation(t *testing.T) {
	good := []Config{
		{},
		{Shards: 1, MaxEntries: 1},
		{MaxRequestersPerEntry: MaxRequestersLimit},
		{TTL: 3 * time.Minute},
		{Tick: MinTick, TTL: time.Second},
		{SuppressWindow: time.Nanosecond},
		{FullPolicy: RefuseNew},
	}
	for _, c := range good {
		if _, err := New(c); err != nil {
			t.Errorf("New(%+v) = %v", c, err)
		}
	}
	bad := []Config{
		{Shards: 3},
		{Shards: -1},
		{Shards: 2 * MaxShards},
		{Shards: 16, MaxEntries: 8},
		{MaxEntries: -1},
		{Shards: 1, MaxEntries: MaxEntriesPerShard + 1},
		{MaxRequestersPerEntry: MaxRequestersLimit + 1},
		{MaxRequestersPerEntry: -1},
		{MaxOverflowRequesters: -1},
		{Tick: time.Microsecond},
		{Tick: time.Second, TTL: time.Millisecond * 999},
		{Tick: time.Millisecond, TTL: time.Millisecond * (MaxTTLTicks + 1)},
		{SuppressWindow: -1},
		{SuppressWindow: MaxSuppressWindow + 1},
		{FullPolicy: 7},
	}
	for _, c := range bad {
		if _, err := New(c); !errors.Is(err, errConfig) {
			t.Errorf("New(%+v) = %v, want a config error", c, err)
		}
	}
}

// TestClockSkew adds with clocks behind the wheel (another goroutine's
// Expire ran with a later reading) and checks nothing is lost or corrupted.
func TestClockSkew(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 3, MaxOverflowRequesters: 3, TTL: time.Second, Tick: 100 * time.Millisecond})
	tb.Expire(10 * time.Second)
	tb.Add(1, laneN(1), 5*time.Second) // expiry 6 s: already behind the wheel
	tb.Add(2, laneN(1), 9950*time.Millisecond)
	wantAdd(t, tb, 2, laneN(2), 9*time.Second, VerdictAggregated) // older reading: must not pull expiry back
	checkInvariants(t, tb)
	if _, ok := tb.Take(2, nil, 10900*time.Millisecond); !ok {
		t.Error("an Add with an older clock shortened the entry's life")
	}
	if n := tb.Expire(10100 * time.Millisecond); n != 1 {
		t.Errorf("Expire removed %d, want the entry added behind the wheel", n)
	}
	checkInvariants(t, tb)
}

// TestEvictAfterSkewedAdd: after an eviction has walked the wheel forward,
// an Add carrying an older clock reading creates the entry nearest expiry;
// the next eviction must find it.
func TestEvictAfterSkewedAdd(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 3, TTL: time.Second, Tick: 100 * time.Millisecond})
	for i := range 3 {
		tb.Add(uint64(i), laneN(i), 10*time.Second+time.Duration(i)*100*time.Millisecond)
	}
	if _, evicted := tb.Add(10, laneN(1), 10300*time.Millisecond); !evicted || present(tb, 0) {
		t.Fatal("first eviction did not shed entry 0")
	}
	tb.Take(1, nil, 10300*time.Millisecond)
	tb.Add(11, laneN(1), 9500*time.Millisecond) // expires at 10.5 s, before all others
	checkInvariants(t, tb)
	if _, evicted := tb.Add(12, laneN(1), 10300*time.Millisecond); !evicted || present(tb, 11) {
		t.Errorf("eviction did not shed the entry nearest expiry (present: %v)", present(tb, 11))
	}
	checkInvariants(t, tb)
}

// TestEvictFallbackFarAheadClock: entries scheduled more than a wheel turn
// ahead of the wheel (a goroutine's clock far ahead of the evicting one's)
// are still found, by the scan fallback, and the earliest is shed.
func TestEvictFallbackFarAheadClock(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 2, TTL: time.Second, Tick: 100 * time.Millisecond})
	tb.Expire(0)
	tb.Add(1, laneN(1), 101*time.Second)
	tb.Add(2, laneN(1), 100*time.Second)
	v, evicted := tb.Add(3, laneN(1), 0)
	if v != VerdictForwardNew || !evicted || present(tb, 2) || !present(tb, 1) {
		t.Errorf("Add = %v, evicted %v; present 1: %v, 2: %v; want entry 2 shed", v, evicted, present(tb, 1), present(tb, 2))
	}
	checkInvariants(t, tb)
}

// TestNamesDistinct: verdict and policy names are used as metric labels.
func TestNamesDistinct(t *testing.T) {
	seen := map[string]bool{}
	for v := VerdictForwardNew; v <= VerdictRefused; v++ {
		name := v.String()
		if seen[name] || name == fmt.Sprintf("Verdict(%d)", uint8(v)) {
			t.Errorf("verdict %d has name %q", v, name)
		}
		seen[name] = true
	}
	if Verdict(0).String() != "Verdict(0)" || Verdict(0).Forward() {
		t.Error("the zero Verdict looks valid")
	}
	if ShedOldest.String() == RefuseNew.String() {
		t.Error("policies share a name")
	}
}

// TestEvictionShedsTheOldestOfATick: entries due in the same tick are shed
// in the order they were made, so a flood that fills the table pushes out
// the entries before a new one, not the new one.
func TestEvictionShedsTheOldestOfATick(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 4})
	for k := uint64(1); k <= 4; k++ {
		wantAdd(t, tb, k, laneN(int(k)), 0, VerdictForwardNew)
	}
	for k := uint64(5); k <= 6; k++ {
		if v, evicted := tb.Add(k, laneN(int(k)), 0); v != VerdictForwardNew || !evicted {
			t.Fatalf("Add(%d) = %v, evicted %v", k, v, evicted)
		}
	}
	for k, want := range map[uint64]bool{1: false, 2: false, 3: true, 4: true, 5: true, 6: true} {
		if _, ok := tb.Take(k, nil, 0); ok != want {
			t.Errorf("entry %d present %v, want %v", k, ok, want)
		}
	}
}

// TestPrefetch checks that Prefetch is safe on an empty table, while the
// index grows under concurrent Adds and Takes (run with -race), changes
// nothing, and allocates nothing.
func TestPrefetch(t *testing.T) {
	tb := mustNew(t, Config{MaxEntries: 1 << 16})
	tb.Prefetch(1) // no index yet
	var wg sync.WaitGroup
	const n = 20000
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range n {
			tb.Add(uint64(i), laneN(i), 0)
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 4 * n {
			tb.Prefetch(uint64(i % n))
		}
	}()
	wg.Wait()
	if got := tb.Len(); got != n {
		t.Fatalf("Len = %d after %d Adds, want %d", got, n, n)
	}
	before := tb.Stats()
	if a := testing.AllocsPerRun(100, func() { tb.Prefetch(7) }); a != 0 {
		t.Errorf("Prefetch allocates %v times", a)
	}
	if tb.Stats() != before || tb.Len() != n {
		t.Error("Prefetch changed the table")
	}
	reqs, ok := tb.Take(7, nil, 0)
	if !ok || len(reqs) != 1 || reqs[0] != laneN(7) {
		t.Fatalf("Take after Prefetch = %v, %v", reqs, ok)
	}
}

// TestIndexSlots checks the index size the server's prefetch rule reads
// (relay.PrefetchMinIndexSlots): none before the first entry, at least 4/3
// of the entries while they grow (the index is kept at most 3/4 full),
// never shrinking as they are taken, and safe to read without a lock while
// another goroutine adds (run with -race), as Len and Stats are, under the
// shards' locks.
func TestIndexSlots(t *testing.T) {
	const shards, n = 4, 30000
	tb := mustNew(t, Config{MaxEntries: 1 << 16, Shards: shards})
	if got := tb.IndexSlots(); got != 0 {
		t.Fatalf("IndexSlots = %d on an empty table, want 0", got)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			tb.Add(uint64(i)*0x9e3779b97f4a7c15, laneN(i), 0)
		}
	}()
	prev := 0
	for {
		select {
		case <-done:
		default:
			got := tb.IndexSlots()
			if got < prev {
				t.Fatalf("IndexSlots fell from %d to %d while entries were added", prev, got)
			}
			prev = got
			if l, st := tb.Len(), tb.Stats(); l > n || st.Added > n || st.Entries > n {
				t.Fatalf("while adding %d: Len %d, Stats %+v", n, l, st)
			}
			continue
		}
		break
	}
	high := tb.IndexSlots()
	if high*3 < tb.Len()*4 {
		t.Fatalf("IndexSlots = %d for %d entries: more than 3/4 full", high, tb.Len())
	}
	if high > 8*n/3+shards*initialIndexSlots {
		t.Fatalf("IndexSlots = %d for %d entries: more than twice the load factor needs", high, n)
	}
	for i := range n {
		tb.Take(uint64(i)*0x9e3779b97f4a7c15, nil, 0)
	}
	if tb.Len() != 0 || tb.IndexSlots() != high {
		t.Fatalf("after taking every entry: Len %d, IndexSlots %d, want 0 and %d (it never shrinks)", tb.Len(), tb.IndexSlots(), high)
	}
}

// TestCap: Cap is each shard's whole share of MaxEntries times the shards,
// and a table refusing new names fills to exactly Cap.
func TestCap(t *testing.T) {
	tb := mustNew(t, Config{Shards: 4, MaxEntries: 10, MaxOverflowRequesters: 4, FullPolicy: RefuseNew})
	if tb.Cap() != 8 {
		t.Fatalf("Cap() = %d, want 8 (4 shards of 10/4)", tb.Cap())
	}
	for i := range 1000 {
		tb.Add(uint64(i)*0x9e3779b97f4a7c15, laneN(i), 0)
	}
	if tb.Len() != tb.Cap() {
		t.Errorf("full table holds %d, Cap() %d", tb.Len(), tb.Cap())
	}
	if def := mustNew(t, Config{}); def.Cap() != DefaultMaxEntries {
		t.Errorf("default Cap() = %d, want %d", def.Cap(), DefaultMaxEntries)
	}
}

// noSourceCap returns cfg with a zero MaxEntriesPerSource made no cap.
func noSourceCap(cfg Config) Config {
	if cfg.MaxEntriesPerSource == 0 {
		cfg.MaxEntriesPerSource = -1
	}
	return cfg
}

// TestDefaultSourceCap: a zero MaxEntriesPerSource is MaxEntries/
// DefaultSourceDivisor (at least 1), a negative one no cap.
func TestDefaultSourceCap(t *testing.T) {
	src := netip.MustParseAddr("192.0.2.1")
	fill := func(cfg Config) int {
		tb, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for k := range uint64(cfg.MaxEntries) {
			tb.Add(k+1, lane.KeyOf(netip.AddrPortFrom(src, uint16(k+1))), 0)
		}
		return tb.Len()
	}
	if n := fill(Config{Shards: 1, MaxEntries: 100}); n != 100/DefaultSourceDivisor {
		t.Errorf("default cap: one source holds %d entries, want %d", n, 100/DefaultSourceDivisor)
	}
	if n := fill(Config{Shards: 1, MaxEntries: 5}); n != 1 {
		t.Errorf("default cap of a tiny table: one source holds %d entries, want 1", n)
	}
	if n := fill(Config{Shards: 1, MaxEntries: 100, MaxEntriesPerSource: -1}); n != 100 {
		t.Errorf("no cap: one source holds %d entries, want 100", n)
	}
}

// TestConfigErrorNamesField: Validate's errors are *ConfigError, naming
// the field, its value and what is wanted.
func TestConfigErrorNamesField(t *testing.T) {
	for _, tt := range []struct {
		cfg         Config
		field, want string
	}{
		{Config{MaxEntries: -1}, "MaxEntries", "a whole number from 16 to 268435424"},
		{Config{MaxEntries: 16*MaxEntriesPerShard + 1}, "MaxEntries", "a whole number from 16 to 268435424"},
		{Config{MaxRequestersPerEntry: -1}, "MaxRequestersPerEntry", "a whole number from 1 to 4096"},
		{Config{TTL: 99 * time.Millisecond}, "TTL", "a duration from 100ms to 1h49m13.6s"},
		{Config{TTL: DefaultTick*MaxTTLTicks + 1}, "TTL", "a duration from 100ms to 1h49m13.6s"},
		{Config{SuppressWindow: -1}, "SuppressWindow", "a duration from 0s to 1h0m0s"},
		{Config{Shards: 3}, "Shards", "a power of two from 1 to 1024"},
	} {
		err := tt.cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field || ce.Want != tt.want || !errors.Is(err, errConfig) {
			t.Errorf("%+v: %v; want a ConfigError for %s wanting %q", tt.cfg, err, tt.field, tt.want)
		}
	}
	if err := (Config{TTL: DefaultTick * MaxTTLTicks, MaxEntries: 16 * MaxEntriesPerShard}).Validate(); err != nil {
		t.Errorf("the edges: %v", err)
	}
}

// TestAddAtIsAdd: AddAt, which reads its requester in place, gives every
// verdict Add gives, in a random run of adds, proven adds and takes on
// twin tables small enough that entries fill.
func TestAddAtIsAdd(t *testing.T) {
	cfg := Config{Shards: 1, MaxEntries: 8, MaxRequestersPerEntry: 3, MaxOverflowRequesters: 2, SuppressWindow: time.Second}
	a, b := mustNew(t, cfg), mustNew(t, cfg)
	rng := rand.New(rand.NewPCG(7, 0))
	seen := map[Verdict]bool{}
	now := time.Second
	for step := range 5000 {
		key, req := uint64(rng.IntN(12)), laneN(rng.IntN(6))
		now += time.Duration(rng.IntN(300)) * time.Millisecond
		if rng.IntN(5) == 0 {
			ra, oka := a.Take(key, nil, now)
			rb, okb := b.Take(key, nil, now)
			if oka != okb || !slices.Equal(ra, rb) {
				t.Fatalf("step %d: Take differs: %v %v, %v %v", step, ra, oka, rb, okb)
			}
			continue
		}
		if rng.IntN(4) == 0 {
			// A proven requester takes an unproven one's place at a
			// full entry: AddAt's must be unproven, as Add's are.
			va, ea := a.AddProven(key, req, now)
			vb, eb := b.AddProven(key, req, now)
			if va != vb || ea != eb {
				t.Fatalf("step %d: AddProven %v %v, on the twin %v %v", step, va, ea, vb, eb)
			}
			continue
		}
		va, ea := a.Add(key, req, now)
		vb, eb := b.AddAt(key, &req, now)
		if va != vb || ea != eb {
			t.Fatalf("step %d: Add %v %v, AddAt %v %v", step, va, ea, vb, eb)
		}
		seen[va] = true
	}
	if len(seen) < 4 {
		t.Fatalf("only verdicts %v occurred", seen)
	}
	t.Logf("verdicts %v", seen)
}
