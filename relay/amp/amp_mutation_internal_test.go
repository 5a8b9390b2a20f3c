package amp

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// The budget's rules that the mutation run left without a killing test
// (docs/mutation.md, "relay/: the budget's probes"), on the tables
// themselves.

// TestSpendRefusedAsksProbe: a spend refused by its address's bucket, or
// by its network's with no light allowance left, asks for a probe of the
// lane, below ProbeAfter; with probing disabled it asks for none. Killed
// mutants: `a.proofs != nil` negated in either of spend's refusals.
func TestSpendRefusedAsksProbe(t *testing.T) {
	now := time.Second
	for _, c := range []struct {
		what  string
		cfg   Config
		probe bool
	}{
		{"address", Config{Rate: 1, Burst: 2000, NetRate: -1, ProbeAfter: 1 << 30}, true},
		{"network", Config{Rate: 1, Burst: 1 << 20, NetRate: 1, NetBurst: 2000, LightRate: 1, LightBurst: 1, ProbeAfter: 1 << 30}, true},
		{"address, probing disabled", Config{Rate: 1, Burst: 2000, NetRate: -1, ProofLifetime: -1}, false},
		{"network, probing disabled", Config{Rate: 1, Burst: 1 << 20, NetRate: 1, NetBurst: 2000, LightRate: 1, LightBurst: 1, ProofLifetime: -1}, false},
	} {
		a := newTestAmp(t, c.cfg)
		k := ampKey(1)
		for i := 0; i < 2; i++ {
			if ok, probe := a.Spend(k, 1000, now); !ok || probe {
				t.Fatalf("%s: spend %d within the budget: ok %v probe %v, want sent, no probe", c.what, i, ok, probe)
			}
		}
		if ok, probe := a.Spend(k, 1000, now); ok || probe != c.probe {
			t.Errorf("%s: spend past the budget: ok %v probe %v, want refused, probe %v", c.what, ok, probe, c.probe)
		}
	}
}

// TestProofStartBoundaries: a lane is probed again exactly ProbeInterval
// after its last probe, not before; another lane takes the slot exactly
// when the proof it holds ends, not before. Both of start's looks agree
// on each boundary. Killed mutants: the boundaries of either look (`>=`
// and `<=` in the first, `<` and `>` in the re-check).
func TestProofStartBoundaries(t *testing.T) {
	a := newTestAmp(t, Config{Rate: 1, Burst: 10000, NetRate: -1, ProofSlots: 1})
	p := a.proofs
	k, other := ampKey(1), ampKey(2) // one slot: they share it
	t0 := 10 * time.Second
	if _, ok := p.start(k, t0); !ok {
		t.Fatal("first probe not started")
	}
	if _, ok := p.start(k, t0+DefaultProbeInterval-1); ok {
		t.Fatal("probed again within ProbeInterval")
	}
	if _, ok := p.start(k, t0+DefaultProbeInterval); !ok {
		t.Fatal("not probed again at ProbeInterval")
	}
	t1 := t0 + 2*DefaultProbeInterval
	tx, ok := p.start(other, t1)
	if !ok {
		t.Fatal("other lane's probe not started after k's interval")
	}
	until, ok := p.answer(other, tx, t1)
	if !ok || until != t1+DefaultProofLifetime {
		t.Fatalf("other's answer: ok %v until %v, want proven until %v", ok, until, t1+DefaultProofLifetime)
	}
	if _, ok := p.start(k, until-1); ok {
		t.Fatal("k took the slot of a live proof")
	}
	if _, ok := p.start(k, until); !ok {
		t.Fatal("k not probed when the slot's proof ended")
	}
}

// parkedOn waits until n goroutines are parked on mu (their stacks show
// its lock's slow path called with mu's address). It polls the
// goroutines' states, yielding between looks: no sleep.
func parkedOn(t *testing.T, mu *sync.Mutex, n int) {
	t.Helper()
	frame := []byte(fmt.Sprintf("(*Mutex).lockSlow(%p)", mu))
	buf := make([]byte, 1<<20)
	for range 1_000_000 {
		got := 0
		for _, g := range bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n")) {
			if bytes.Contains(g, []byte("[sync.Mutex.Lock")) && bytes.Contains(g, frame) {
				got++
			}
		}
		if got >= n {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%d goroutines never parked on the lock", n)
}

type startResult struct {
	tx [12]byte
	ok bool
}

// goStart runs p.start(k, now) in a new goroutine, its result on the
// channel returned.
func goStart(p *proofTable, k lane.Key, now time.Duration) <-chan startResult {
	c := make(chan startResult, 1)
	go func() {
		tx, ok := p.start(k, now)
		c <- startResult{tx, ok}
	}()
	return c
}

// TestProofStartRecheck: start looks at the lane's slot, draws the id with
// the slot unlocked, and looks again before writing. What happens between
// the two looks is made to happen here: the test holds the id generator's
// lock, so each start has passed its first look and waits for the
// generator (parkedOn) while the slot changes. Two readers starting the
// same lane's probe at once send one probe, and the id recorded is that
// probe's; a lane whose start waited while another lane's probe in the
// slot was answered does not take the slot from the proof. Killed
// mutants: the re-check's conditions negated or its arithmetic changed
// (each of `s.probed != 0`, `now-s.probed < t.interval`, `s.lane != k`,
// `s.until > now`).
func TestProofStartRecheck(t *testing.T) {
	cfg := Config{Rate: 1, Burst: 10000, NetRate: -1, ProofSlots: 1}
	t0 := 10 * time.Second

	t.Run("same lane", func(t *testing.T) {
		p := newTestAmp(t, cfg).proofs
		k := ampKey(1)
		p.rngMu.Lock()
		c1, c2 := goStart(p, k, t0), goStart(p, k, t0)
		parkedOn(t, &p.rngMu, 2)
		p.rngMu.Unlock()
		r1, r2 := <-c1, <-c2
		if r1.ok == r2.ok {
			t.Fatalf("two readers starting one lane's probe at once: started %v and %v, want one", r1.ok, r2.ok)
		}
		won := r1
		if r2.ok {
			won = r2
		}
		if _, ok := p.answer(k, won.tx, t0); !ok {
			t.Fatal("the answer to the probe started was not taken: another id overwrote it")
		}
	})

	t.Run("another lane proven meanwhile", func(t *testing.T) {
		p := newTestAmp(t, cfg).proofs
		k, other := ampKey(1), ampKey(2) // one slot
		tx, ok := p.start(other, t0)
		if !ok {
			t.Fatal("other's probe not started")
		}
		// ProbeInterval later, other's probe no longer holds the slot
		// and it is not proven yet: k passes the first look.
		now := t0 + DefaultProbeInterval
		p.rngMu.Lock()
		c := goStart(p, k, now)
		parkedOn(t, &p.rngMu, 1)
		if _, ok := p.answer(other, tx, now); !ok {
			p.rngMu.Unlock()
			t.Fatal("other's answer not taken")
		}
		p.rngMu.Unlock()
		if r := <-c; r.ok {
			t.Fatal("k's probe took the slot of a lane proven while it drew its id")
		}
		if ok, _ := p.proven(other, now); !ok {
			t.Fatal("other's proof lost")
		}
	})
}

// TestAmpRefundGivesBack: a refund (amesAdmit's, for a legacy forward
// refused at a later target or by the duplicate filter) gives the bytes
// back to the address's bucket and to its network's, so that the next
// send has them, and never above the burst; a disabled budget takes
// refunds as it takes spends. Killed mutants: refund's nil checks negated,
// its arithmetic and add's changed.
func TestAmpRefundGivesBack(t *testing.T) {
	now := time.Second
	k := ampKey(1)
	neighbour := ampKey(2) // another address of k's /24

	a := newTestAmp(t, Config{Rate: 1, Burst: 4000, NetRate: -1, ProofLifetime: -1})
	if !spendOK(a, k, 3000, now) || spendOK(a, k, 3000, now) {
		t.Fatal("address: want the first 3,000 bytes sent and the next refused")
	}
	a.Refund(k, 3000, now)
	if !spendOK(a, k, 3000, now) {
		t.Fatal("address: the refunded bytes not given back")
	}
	a.Refund(k, 3000, now)
	a.Refund(k, 3000, now) // once more than was spent
	if got := drain(a, k, now); got != 4000 {
		t.Fatalf("address: %d B after refunds past the burst, want the burst, 4000", got)
	}

	a = newTestAmp(t, Config{Rate: 1, Burst: 1 << 20, NetRate: 1, NetBurst: 4000,
		LightRate: 1, LightBurst: 1, ProofLifetime: -1})
	if !spendOK(a, k, 3000, now) || spendOK(a, neighbour, 3000, now) {
		t.Fatal("network: want the first 3,000 bytes sent and the neighbour's refused")
	}
	a.Refund(k, 3000, now)
	if !spendOK(a, neighbour, 3000, now) {
		t.Fatal("network: the refunded bytes not given back to the network")
	}

	var off *Budget // Rate < 0: no budget
	off.Refund(k, 3000, now)
}
