package amp

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// Spend's lock-free look (provenLockFree) must answer exactly what its
// locked path (spendLocked) answers, and leave every slot as the locked
// path leaves it.

// twinBudgets returns two budgets of cfg with the same seeds: a is used
// through Spend, b through spendReference.
func twinBudgets(t *testing.T, cfg Config) (a, b *Budget) {
	t.Helper()
	a, b = newTestAmp(t, cfg), newTestAmp(t, cfg)
	b.seed, b.mix0 = a.seed, a.mix0
	if a.net != nil {
		b.net.seed, b.net.mix0 = a.net.seed, a.net.mix0
	}
	b.proofs.seed, b.proofs.mix0 = a.proofs.seed, a.proofs.mix0
	return a, b
}

// sameState fails unless a and b hold the same slots.
func sameState(t *testing.T, step int, a, b *Budget) {
	t.Helper()
	for i := range a.slots {
		sa, sb := &a.slots[i], &b.slots[i]
		if sa.ip != sb.ip || sa.proven.Load() != sb.proven.Load() || sa.last.Load() != sb.last.Load() ||
			sa.tokens != sb.tokens || sa.light != sb.light {
			t.Fatalf("step %d: address slot %d: %v proven %v last %v tokens %d light %d, reference %v %v %v %d %d",
				step, i, sa.ip, sa.proven.Load(), sa.last.Load(), sa.tokens, sa.light,
				sb.ip, sb.proven.Load(), sb.last.Load(), sb.tokens, sb.light)
		}
	}
	for i := range a.net.slots {
		sa, sb := &a.net.slots[i], &b.net.slots[i]
		if sa.ip != sb.ip || sa.tokens != sb.tokens || sa.last.Load() != sb.last.Load() {
			t.Fatalf("step %d: network slot %d differs", step, i)
		}
	}
	for i := range a.proofs.slots {
		sa, sb := &a.proofs.slots[i], &b.proofs.slots[i]
		if sa.ip0.Load() != sb.ip0.Load() || sa.ip1.Load() != sb.ip1.Load() || sa.port.Load() != sb.port.Load() ||
			sa.until.Load() != sb.until.Load() || sa.probed != sb.probed || (sa.tx == [12]byte{}) != (sb.tx == [12]byte{}) {
			t.Fatalf("step %d: proof slot %d differs", step, i)
		}
	}
}

// TestSpendLockFreeMatchesLocked runs random spends, refunds, probes and
// answers on a budget small enough that addresses share slots (takeovers),
// lanes contend for proof slots and buckets run dry, through Spend and,
// on a twin, through the locked path alone; every answer and, after each
// step, every slot must agree. Steps include the refill's and the proof's
// exact boundaries, and time going back a little (readers pass their own
// clocks).
func TestSpendLockFreeMatchesLocked(t *testing.T) {
	cfg := Config{Rate: 7000, Burst: 50000, NetRate: 9000, NetBurst: 70000, LightRate: 3000, LightBurst: 5000,
		Slots: 4, NetSlots: 2, ProofSlots: 16, ProbeAfter: 2000,
		ProofLifetime: 4 * time.Second, ProbeInterval: 100 * time.Millisecond}
	var addrs []netip.Addr
	// The first two differ only in their high half, the next two only
	// in their low half.
	for _, s := range []string{"2001:db8:a::1", "2001:db8:b::1", "192.0.2.1", "192.0.2.2", "192.0.2.3",
		"198.51.100.7", "2001:db8::2", "2001:db8:1::1"} {
		addrs = append(addrs, netip.MustParseAddr(s))
	}
	var lanes []lane.Key
	for _, ip := range addrs {
		for port := uint16(1); port <= 3; port++ {
			lanes = append(lanes, lane.KeyOf(netip.AddrPortFrom(ip, port)))
		}
	}
	lockFree, frees := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		a, b := twinBudgets(t, cfg)
		rng := rand.New(rand.NewPCG(seed, 0))
		type probe struct{ a, b [12]byte }
		probes := map[lane.Key]probe{}
		freeAt := map[lane.Key]time.Duration{}
		now := time.Second

		for step := range 4000 {
			switch r := rng.IntN(100); {
			case r < 2:
				now += a.addr.fullFrom
			case r < 4:
				now += a.light.fullFrom
			case r < 6:
				now += cfg.ProofLifetime * 3 / 4
			case r < 8:
				now += cfg.ProofLifetime
			case r < 10:
				now -= time.Duration(rng.IntN(1000)) * time.Microsecond
			case r < 25:
				now += time.Duration(rng.IntN(300)) * time.Millisecond
			}
			// Half the steps on the first two addresses' lanes (so
			// that proofs accumulate), the rest anywhere.
			k := lanes[rng.IntN(len(lanes))]
			if rng.IntN(2) == 0 {
				k = lanes[rng.IntN(6)]
			}
			switch r := rng.IntN(100); {
			case r < 70:
				n := rng.IntN(3000)
				hi, lo := halves(k.IP)
				h := hashFrom(a.seed, a.mix0, hi, lo)
				if _, held := a.provenLockFree(h, k, now); held {
					lockFree++
				}

				okA, probeA, freeUntil := a.SpendFree(k, n, now)
				okB, probeB := b.spendReference(k, n, now)
				if okA != okB || probeA != probeB {
					t.Fatalf("seed %d step %d: Spend(%v, %d) = %v, %v; reference %v, %v", seed, step, k, n, okA, probeA, okB, probeB)
				}
				switch {
				case freeUntil > now:
					if !okA || probeA {
						t.Fatalf("seed %d step %d: free with Spend = %v, %v", seed, step, okA, probeA)
					}
					// Exact: free to its last nanosecond, and
					// due for renewal at freeUntil.
					if ok, renew := a.proofs.proven(k, freeUntil-1); !ok || renew {
						t.Fatalf("seed %d step %d: free until %v, but at %v proven %v, renew %v", seed, step, freeUntil, freeUntil-1, ok, renew)
					}
					if ok, renew := a.proofs.proven(k, freeUntil); !ok || !renew {
						t.Fatalf("seed %d step %d: free until %v, but then proven %v, renew %v", seed, step, freeUntil, ok, renew)
					}
					freeAt[k] = freeUntil
					frees++
				case freeUntil != 0:
					t.Fatalf("seed %d step %d: free until %v, before now %v, and not 0", seed, step, freeUntil, now)
				}
			case r < 75:
				n := rng.IntN(3000)
				a.Refund(k, n, now)
				b.Refund(k, n, now)
			case r < 87:
				txA, okA := a.Probe(k, now)
				txB, okB := b.Probe(k, now)
				if okA != okB {
					t.Fatalf("seed %d step %d: Probe %v, reference %v", seed, step, okA, okB)
				}
				if okA {
					probes[k] = probe{txA, txB}
					// Mostly answered at once, as vere does.
					if rng.IntN(4) != 0 && a.Answer(k, txA, now) != b.Answer(k, txB, now) {
						t.Fatalf("seed %d step %d: Answer differs", seed, step)
					}
				}
			case r < 97:
				p, ok := probes[k]
				if !ok {
					continue
				}
				if rng.IntN(8) == 0 {
					p.a[0] ^= 1
					p.b[0] ^= 1
				}
				if a.Answer(k, p.a, now) != b.Answer(k, p.b, now) {
					t.Fatalf("seed %d step %d: Answer differs", seed, step)
				}
			default:
				if a.Proven(k, now) != b.provenLocked(k, now) {
					t.Fatalf("seed %d step %d: Proven differs", seed, step)
				}
			}
			sameState(t, step, a, b)
			// SpendFree's promise: a lane free until T stays proven,
			// with no renewal due, at every instant before T,
			// whatever else happened meanwhile (the proof table is
			// the authority; an address slot lost to another
			// address forgets its mark, and Spend then budgets the
			// lane again); at T its renewal is due (or its proof
			// was renewed), so a caller that asks again then is
			// told to probe.
			for k, until := range freeAt {
				if now >= until {
					delete(freeAt, k)
				} else if ok, renew := a.proofs.proven(k, now); !ok || renew {
					t.Fatalf("seed %d step %d: %v was free until %v, now (%v) proven %v, renew %v", seed, step, k, until, now, ok, renew)
				}
			}
		}
	}
	if lockFree < 2000 {
		t.Fatalf("the lock-free look answered %d spends of 160,000 steps: the test does not exercise it", lockFree)
	}
	if frees < 2000 {
		t.Fatalf("SpendFree found %d spends free: the test does not exercise it", frees)
	}
	t.Logf("the lock-free look answered %d spends of 160,000 steps; %d were free", lockFree, frees)
}

// spendReference is Spend as it was before its lock-free look, each
// table's slot found by hash16 and each proof looked up under its lock:
// the straightforward reference Spend must match.
func (a *Budget) spendReference(k lane.Key, n int, now time.Duration) (ok, probe bool) {
	need := int64(n) * nanobytes
	i := hash16(a.seed, k.IP) & uint64(len(a.slots)-1)
	mu := a.stripe(i)
	mu.Lock()
	s := a.slotLocked(i, k.IP, now)
	if time.Duration(s.proven.Load()) > now {
		mu.Unlock()
		if ok, renew := a.proofs.proven(k, now); ok {
			return true, renew
		}
		mu.Lock()
		s = a.slotLocked(i, k.IP, now)
	}
	if s.tokens < need {
		mu.Unlock()
		return false, a.proofs != nil
	}
	s.tokens -= need
	probe = a.proofs != nil && s.tokens < a.addr.burst-a.probes
	mu.Unlock()
	if a.net == nil || a.net.take(a.network(k.IP), need, now) {
		return true, probe
	}
	mu.Lock()
	s = a.slotLocked(i, k.IP, now)
	if s.light >= need {
		s.light -= need
		mu.Unlock()
		return true, probe
	}
	s.tokens = min(a.addr.burst, s.tokens+need)
	mu.Unlock()
	return false, a.proofs != nil
}

// provenLocked is Proven by the locked path alone.
func (a *Budget) provenLocked(k lane.Key, now time.Duration) bool {
	ok, _ := a.proofs.proven(k, now)
	return ok
}

// TestSpendLockFreeConcurrent runs proven lanes' spends on every reader
// while writers prove lanes and take their address's slot over (one
// address slot, two addresses), under go test -race: the look reads only
// what writers store atomically. A lane never proven is budgeted
// throughout: its spends at one instant never exceed the slot's burst.
func TestSpendLockFreeConcurrent(t *testing.T) {
	cfg := Config{Rate: 1, Burst: 100000, NetRate: -1, Slots: 1, ProofSlots: 64}
	a := newTestAmp(t, cfg)
	now := 10 * time.Second
	proven := ampKey(1)
	stranger := ampKey(2) // shares proven's address slot, never probed
	tx, ok := a.Probe(proven, now)
	if !ok || !a.Answer(proven, tx, now) {
		t.Fatal("lane not proven")
	}
	var wg sync.WaitGroup
	var strangerSpent [4]int
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				a.Spend(proven, 1000, now)
				if i%4 == 0 && spendOK(a, stranger, 100, now) {
					strangerSpent[g] += 100
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 500 {
			p := ampKey(1)
			p.Port = uint16(5000 + i%32)
			if tx, ok := a.Probe(p, now); ok {
				a.Answer(p, tx, now)
			}
		}
	}()
	wg.Wait()
	total := 0
	for _, n := range strangerSpent {
		total += n
	}
	if total > cfg.Burst {
		t.Fatalf("a lane never proven spent %d at one instant, burst %d", total, cfg.Burst)
	}
}
