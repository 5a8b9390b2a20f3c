package pit

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSourceCap(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 100, MaxEntriesPerSource: 3})
	a, b := laneN(1), laneN(2)
	aOtherPort := a
	aOtherPort.Port = 9999
	for k := uint64(1); k <= 3; k++ {
		wantAdd(t, tb, k, a, 0, VerdictForwardNew)
	}
	// A fourth name from the same IP, whatever the port, is refused...
	wantAdd(t, tb, 4, a, 0, VerdictSourceCapped)
	wantAdd(t, tb, 4, aOtherPort, 0, VerdictSourceCapped)
	// ...while another source is served, and a's own entries still take
	// repeats and new requesters.
	wantAdd(t, tb, 4, b, 0, VerdictForwardNew)
	wantAdd(t, tb, 1, a, 0, VerdictForwardRetransmit)
	wantAdd(t, tb, 1, b, 0, VerdictAggregated)
	if got := tb.Stats().SourceCapped; got != 2 {
		t.Errorf("SourceCapped = %d, want 2", got)
	}
	// Answering one of a's entries frees a place for a.
	if _, ok := tb.Take(2, nil, 0); !ok {
		t.Fatal("Take failed")
	}
	wantAdd(t, tb, 5, a, 0, VerdictForwardNew)
	wantAdd(t, tb, 6, a, 0, VerdictSourceCapped)
	// Expiry frees the rest.
	tb.Expire(DefaultTTL + time.Second)
	for k := uint64(10); k < 13; k++ {
		wantAdd(t, tb, k, a, DefaultTTL+time.Second, VerdictForwardNew)
	}
}

func TestSourceCapSurvivesRestartedEntries(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 100, MaxEntriesPerSource: 1})
	a, b := laneN(1), laneN(2)
	wantAdd(t, tb, 1, a, 0, VerdictForwardNew)
	// Key 1 expires without the wheel having run; b restarts it and takes
	// over the count, so a may create an entry again and b may not.
	later := DefaultTTL + time.Second
	wantAdd(t, tb, 1, b, later, VerdictForwardNew)
	wantAdd(t, tb, 2, a, later, VerdictForwardNew)
	wantAdd(t, tb, 3, b, later, VerdictSourceCapped)
}

func TestSourceCapFloodStaysBounded(t *testing.T) {
	const perSource = 50
	tb := mustNew(t, Config{Shards: 4, MaxEntries: 10_000, MaxEntriesPerSource: perSource})
	attacker := laneN(7)
	for k := uint64(0); k < 5000; k++ {
		tb.Add(k*0x9e3779b97f4a7c15, attacker, 0)
	}
	// Per-shard enforcement: at most ceil(perSource/shards) per shard.
	if n := tb.Len(); n > 4*((perSource+3)/4) {
		t.Fatalf("one source holds %d entries, cap %d", n, perSource)
	}
	if tb.Stats().SourceCapped == 0 {
		t.Fatal("no refusals counted")
	}
}

// TestSourceCountsUnderRandomOps checks the per-source counters against the
// live entries after random adds, takes, expiries and evictions.
func TestSourceCountsUnderRandomOps(t *testing.T) {
	tb := mustNew(t, Config{Shards: 2, MaxEntries: 64, MaxEntriesPerSource: 20, TTL: time.Second, Tick: 10 * time.Millisecond})
	rng := uint64(1)
	next := func(n uint64) uint64 {
		rng = rng*6364136223846793005 + 1442695040888963407
		return (rng >> 33) % n
	}
	now := time.Duration(0)
	for i := 0; i < 20000; i++ {
		now += time.Duration(next(20)) * time.Millisecond
		key := next(200)
		switch next(10) {
		case 0, 1:
			tb.Take(key, nil, now)
		case 2:
			tb.Expire(now)
		default:
			tb.Add(key, laneN(int(next(8))), now)
		}
		if i%97 == 0 {
			checkInvariants(t, tb)
		}
	}
	checkInvariants(t, tb)
	if tb.Stats().SourceCapped == 0 {
		t.Error("the random load never reached a source cap; the test is too weak")
	}
}

// TestSourceCapRestartFromAnotherPort: a source at its cap restarting its
// own expired entry from another port keeps its count (the entry passes
// from one of its lanes to another), so it is not refused.
func TestSourceCapRestartFromAnotherPort(t *testing.T) {
	tb := mustNew(t, Config{Shards: 1, MaxEntries: 100, MaxEntriesPerSource: 1})
	a := laneN(1)
	wantAdd(t, tb, 1, a, 0, VerdictForwardNew)
	later := DefaultTTL + time.Second
	wantAdd(t, tb, 1, port(a, 4242), later, VerdictForwardNew)
	wantAdd(t, tb, 2, a, later, VerdictSourceCapped)
	checkInvariants(t, tb)
}

// TestSourceHashIsTwoSeededRounds: sourceHash, whose first round is
// precomputed for an IPv4 source (first word 0), is mix(mix(a ^ seed) ^
// b) for every source, under random seeds; and an IPv4 source's slot
// depends on the seed (tables under two seeds place 64 IPv4 sources
// differently), so that no one can line sources up without it.
func TestSourceHashIsTwoSeededRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 23))
	for range 200 {
		seed := rng.Uint64() | 1
		tb, err := New(Config{Seed: seed, MaxEntriesPerSource: 10})
		if err != nil {
			t.Fatal(err)
		}
		s := &tb.shards[0]
		for i := range 50 {
			a, b := rng.Uint64(), rng.Uint64()
			if i%2 == 0 {
				a = 0
			}
			if got, want := s.sourceHash(a, b), mix(mix(a^seed)^b); got != want {
				t.Fatalf("seed %#x: sourceHash(%#x, %#x) = %#x, want %#x", seed, a, b, got, want)
			}
		}
	}
	slots := func(seed uint64) []uint32 {
		tb, err := New(Config{Seed: seed, MaxEntriesPerSource: 10})
		if err != nil {
			t.Fatal(err)
		}
		var out []uint32
		for i := range 64 {
			k := laneN(i + 1)
			out = append(out, tb.shards[0].sourceSlot(&k))
		}
		return out
	}
	if slices.Equal(slots(1), slots(2)) {
		t.Fatal("IPv4 sources take the same slots under two seeds")
	}
}
