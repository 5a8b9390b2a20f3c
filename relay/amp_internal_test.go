package relay

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// TestAmpStripesKeepOneTable: striping changes which lock guards a slot,
// not which slot an address gets: the slots are one array of Slots, every
// address is tracked in the slot its hash picks in it, and an address
// whose slot another takes starts over from Initial.
func TestAmpStripesKeepOneTable(t *testing.T) {
	for _, slots := range []int{1, 8, ampStripes, 1 << 10, DefaultAmpSlots} {
		a := newTestAmp(t, AmpConfig{Slots: slots, Initial: 100, Factor: 1, Rate: 1, NetFactor: -1})
		// Stripe i guards the i'th run of Slots/ampStripes slots (one
		// each if there are fewer slots than stripes).
		if per := max(slots/ampStripes, 1); 1<<a.shift != per || len(a.slots) != slots {
			t.Fatalf("slots %d: %d slots, %d a stripe, want %d", slots, len(a.slots), 1<<a.shift, per)
		}
		for i := range a.slots {
			if want := &a.stripes[i/max(slots/ampStripes, 1)].mu; a.stripe(uint64(i)) != want {
				t.Fatalf("slots %d: slot %d under the wrong lock", slots, i)
			}
		}
		// Every address lands in slot index(ip) of the whole array.
		for i := uint32(0); i < 4*uint32(slots); i++ {
			k := ampKey(i)
			a.credit(k, 1, time.Second)
			if j := a.index(k.IP); a.slots[j].ip != k.IP {
				t.Fatalf("slots %d: address %d not in slot %d", slots, i, j)
			}
		}
		// Two addresses of one slot evict each other; the evicted one
		// starts over from Initial.
		k1 := ampKey(0)
		var k2 lane.Key
		for i := uint32(1); ; i++ {
			if k2 = ampKey(i); a.index(k2.IP) == a.index(k1.IP) {
				break
			}
		}
		a.credit(k2, 1, 2*time.Second)  // k1 is out, whatever the loop left
		a.credit(k1, 50, 2*time.Second) // k1 starts over: 100 + 50
		if !a.spend(k1, 150, 2*time.Second) || a.spend(k1, 1, 2*time.Second) {
			t.Fatalf("slots %d: budget not 150", slots)
		}
		a.credit(k2, 1, 2*time.Second)
		if !a.spend(k1, 100, 2*time.Second) || a.spend(k1, 1, 2*time.Second) {
			t.Fatalf("slots %d: evicted address did not start over from Initial", slots)
		}
	}
}

// TestAmpConcurrent runs readers on every stripe at once (go test -race):
// each budgets an address of its own and all share one; the own addresses
// end exactly as a sequential run leaves them, and the shared one never
// spends more than it was given.
func TestAmpConcurrent(t *testing.T) {
	const readers, rounds = 8, 2000
	cfg := AmpConfig{Initial: 1000, Factor: 8, Rate: 1 << 20, Burst: 1 << 30, NetFactor: -1}
	a := newTestAmp(t, cfg)
	shared := ampKey(1 << 20)
	// An address per reader, each alone in its slot and none in the
	// shared address's.
	used := map[uint64]bool{a.index(shared.IP): true}
	var own []lane.Key
	for i := uint32(0); len(own) < readers; i++ {
		k := ampKey(i)
		if j := a.index(k.IP); !used[j] {
			used[j] = true
			own = append(own, k)
		}
	}
	run := func(a *ampTable, k lane.Key) (spent int) {
		now := time.Second
		for r := 0; r < rounds; r++ {
			now += time.Millisecond // 1,048 bytes of Rate a round
			a.credit(k, 60, now)
			if a.spend(k, 1400, now) {
				spent += 1400
			}
		}
		return spent
	}
	want := run(newTestAmp(t, cfg), own[0])
	var wg sync.WaitGroup
	var sharedSpent, sharedCredit atomic.Int64
	got := make([]int, readers)
	for g := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[g] = run(a, own[g])
			for r := 0; r < rounds; r++ {
				a.credit(shared, 10, time.Second)
				sharedCredit.Add(10 * int64(cfg.Factor))
				if a.spend(shared, 100, time.Second) {
					sharedSpent.Add(100)
				}
			}
		}()
	}
	wg.Wait()
	for g, n := range got {
		if n != want {
			t.Errorf("reader %d spent %d, want %d as alone", g, n, want)
		}
	}
	if s, c := sharedSpent.Load(), sharedCredit.Load()+int64(cfg.Initial); s > c || s == 0 {
		t.Errorf("shared address spent %d of %d", s, c)
	}
}

// TestAmpNetworks: addresses of one IPv4 /24 or IPv6 /56 share one
// network budget, addresses across the boundary do not, and a spend the
// network refuses takes nothing from the address.
func TestAmpNetworks(t *testing.T) {
	key := func(s string) lane.Key { return lane.KeyOf(netip.MustParseAddrPort(s)) }
	a := newTestAmp(t, AmpConfig{Factor: 1, Rate: 1, Burst: 1 << 20, Initial: 1000,
		NetFactor: 1, NetInitial: 100, NetBurst: 1 << 20})
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"192.0.2.1:1", "192.0.2.254:2", true},
		{"192.0.2.1:1", "192.0.3.1:1", false},
		{"[2001:db8:0:ab00::1]:1", "[2001:db8:0:abff:ffff::9]:1", true},
		{"[2001:db8:0:ab00::1]:1", "[2001:db8:0:ac00::1]:1", false},
		{"[::ffff:192.0.2.1]:1", "192.0.2.9:1", true}, // mapped is IPv4
		{"[::c000:201]:1", "192.0.2.1:1", false},      // IPv4-compatible is IPv6
	} {
		na, nb := a.network(key(c.a).IP), a.network(key(c.b).IP)
		if (na == nb) != c.same {
			t.Errorf("%s and %s: same network %v, want %v", c.a, c.b, na == nb, c.same)
		}
	}
	// 192.0.2.1 and .2 share NetInitial 100: the second address's spend
	// is refused by the network and its own 1000 are left whole.
	k1, k2 := key("192.0.2.1:1"), key("192.0.2.2:1")
	now := time.Second
	if !a.spend(k1, 100, now) {
		t.Fatal("first spend of the network's 100 refused")
	}
	if a.spend(k2, 1, now) {
		t.Fatal("network spent twice over")
	}
	a.credit(k2, 200, now) // the network earns 200; k2 has 1000+200
	if !a.spend(k2, 200, now) || a.spend(k2, 1, now) {
		t.Fatal("network budget not the 200 its requests earned")
	}
	// k2's own budget was untouched by the refused spends: 1200 - 200.
	if !a.take(k2.IP, 1000, now) || a.take(k2.IP, 1, now) {
		t.Fatal("a spend the network refused took from the address")
	}
	// No time-based rate at network level: an hour later, nothing more.
	if a.spend(k1, 1, now+time.Hour) {
		t.Fatal("the network budget refilled with time")
	}
	// And the other way round: a spend the address refuses leaves the
	// network's budget whole.
	b := newTestAmp(t, AmpConfig{Factor: 1, Rate: 1, Initial: 10, NetFactor: 1, NetInitial: 1000, NetBurst: 1 << 20})
	if b.spend(k1, 500, now) {
		t.Fatal("address spent 500 of 10")
	}
	if !b.net.take(b.network(k1.IP), 1000, now) {
		t.Fatal("a spend the address refused took from the network")
	}
}
