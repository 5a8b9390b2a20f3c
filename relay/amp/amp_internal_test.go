package amp

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// spendOK is spend's first result.
func spendOK(a *Budget, k lane.Key, n int, now time.Duration) bool {
	ok, _ := a.Spend(k, n, now)
	return ok
}

// drain spends k's address budget in 1,000-byte steps until refused and
// returns the bytes spent.
func drain(a *Budget, k lane.Key, now time.Duration) int {
	n := 0
	for spendOK(a, k, 1000, now) {
		n += 1000
	}
	return n
}

// TestAmpStripesKeepOneTable: striping changes which lock guards a slot,
// not which slot an address gets: the slots are one array of Slots and
// every address is tracked in the slot its hash picks in it.
func TestAmpStripesKeepOneTable(t *testing.T) {
	for _, slots := range []int{1, 8, ampStripes, 1 << 10, DefaultSlots} {
		a := newTestAmp(t, Config{Slots: slots, NetRate: -1, ProofLifetime: -1})
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
		for i := uint32(0); i < 4*uint32(slots); i++ {
			k := ampKey(i)
			a.Spend(k, 1, time.Second)
			if j := a.index(k.IP); a.slots[j].ip != k.IP {
				t.Fatalf("slots %d: address %d not in slot %d", slots, i, j)
			}
		}
	}
}

// TestAmpIndexUsesEveryByte: the slot hash mixes all 16 bytes, so the
// addresses of one /16 and of one /24 spread over the slots as random
// ones do (the old hash put every address of a /16 in one slot), and so
// do the networks of one /8.
func TestAmpIndexUsesEveryByte(t *testing.T) {
	a := newTestAmp(t, Config{})
	distinct := func(n int, addr func(i int) [16]byte, tab *Budget) int {
		seen := map[uint64]bool{}
		for i := range n {
			seen[tab.index(addr(i))] = true
		}
		return len(seen)
	}
	v4 := func(b0, b1, b2, b3 byte) [16]byte {
		return lane.KeyOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{b0, b1, b2, b3}), 1)).IP
	}
	// 1,000 random keys in 65,536 slots share about 8 slots; allow 20.
	for _, c := range []struct {
		what string
		n    int
		addr func(i int) [16]byte
		tab  *Budget
	}{
		{"a /16's addresses", 1000, func(i int) [16]byte { return v4(127, 0, byte(i>>8), byte(i)) }, a},
		{"a /24's addresses", 256, func(i int) [16]byte { return v4(198, 51, 100, byte(i)) }, a},
		{"a /8's /24s", 1000, func(i int) [16]byte { return a.network(v4(10, byte(i>>8), byte(i), 7)) }, a.net},
		{"a /48's IPv6 addresses", 1000, func(i int) [16]byte {
			return [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, byte(i >> 8), byte(i), 15: 1}
		}, a},
	} {
		if d := distinct(c.n, c.addr, c.tab); d < c.n-20 {
			t.Errorf("%s: %d addresses in %d slots", c.what, c.n, d)
		}
	}
	// The alternating pair of the old leak lands in two slots.
	if a.index(v4(127, 0, 6, 1)) == a.index(v4(127, 0, 7, 1)) && a.index(v4(127, 0, 6, 2)) == a.index(v4(127, 0, 7, 2)) {
		t.Error("127.0.6.x and 127.0.7.x share slots")
	}
}

// TestAmpChurnGainsNothing: an address whose slot another took over, and
// the one that took it over, share what the slot had: alternating between
// addresses of one slot gets one Burst, not one each time the slot
// changes hands; and two addresses of their own slots each have their own
// budget, which alternating does not reset.
func TestAmpChurnGainsNothing(t *testing.T) {
	cfg := Config{Rate: 1000, Burst: 10000, Slots: 8, NetRate: -1, ProofLifetime: -1}
	a := newTestAmp(t, cfg)
	k1 := ampKey(0)
	var k2 lane.Key
	for i := uint32(1); ; i++ {
		if k2 = ampKey(i); a.index(k2.IP) == a.index(k1.IP) {
			break
		}
	}
	now := time.Second
	got := 0
	for range 100 {
		for _, k := range []lane.Key{k1, k2} {
			if spendOK(a, k, 1000, now) {
				got += 1000
			}
		}
	}
	if got != cfg.Burst {
		t.Errorf("alternating two addresses of one slot spent %d, want one Burst %d", got, cfg.Burst)
	}
	// A second later the slot has Rate more, not a fresh Burst.
	now += time.Second
	if got := drain(a, k1, now) + drain(a, k2, now); got != cfg.Rate {
		t.Errorf("a second later the slot gave %d, want Rate %d", got, cfg.Rate)
	}
	// Addresses of their own slots: one Burst each, once.
	b := newTestAmp(t, Config{Rate: 1000, Burst: 10000, NetRate: -1, ProofLifetime: -1})
	x, y := ampKey(1), ampKey(2)
	if b.index(x.IP) == b.index(y.IP) {
		t.Skip("seeded hash put the two test addresses in one slot")
	}
	got = 0
	for range 100 {
		for _, k := range []lane.Key{x, y} {
			if spendOK(b, k, 1000, now) {
				got += 1000
			}
		}
	}
	if got != 2*cfg.Burst {
		t.Errorf("two addresses alternating spent %d, want %d", got, 2*cfg.Burst)
	}
}

// TestAmpRateIsExact: a bucket brought up to date at every microsecond
// still refills at Rate (tokens are nanobytes: no rounding lost per call),
// and never beyond Burst however long it idles.
func TestAmpRateIsExact(t *testing.T) {
	const rate = 1 << 20
	a := newTestAmp(t, Config{Rate: rate, Burst: 64 << 10, NetRate: -1, ProofLifetime: -1})
	k := ampKey(1)
	now := time.Second
	drain(a, k, now)
	// 1,000 bytes every 953.67 µs is exactly Rate.
	sent := 0
	step := time.Duration(int64(time.Second) * 1000 / rate)
	for i := 0; i < 20000; i++ {
		now += time.Microsecond
		if now%step < time.Microsecond && spendOK(a, k, 1000, now) {
			sent += 1000
		}
		a.Spend(k, 0, now)
	}
	want := int(float64(rate) * (20000 * time.Microsecond).Seconds())
	if sent < want-2000 || sent > want+1000 {
		t.Errorf("sent %d B in 20 ms at %d B/s, want about %d", sent, rate, want)
	}
	now += time.Hour
	if got := drain(a, k, now); got != 64<<10/1000*1000 {
		t.Errorf("after an hour idle %d B, want the burst", got)
	}
}

// TestAmpNetworks: addresses of one IPv4 /24 or IPv6 /56 share one
// network budget, addresses across the boundary do not; a spend the
// network refuses takes nothing from the address; an address's light
// allowance goes past an empty network budget; and the network refills
// at NetRate.
func TestAmpNetworks(t *testing.T) {
	key := func(s string) lane.Key { return lane.KeyOf(netip.MustParseAddrPort(s)) }
	a := newTestAmp(t, Config{Rate: 1, Burst: 10000, NetRate: 100, NetBurst: 3000,
		LightRate: 10, LightBurst: 500, ProofLifetime: -1})
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
	k1, k2, k3 := key("192.0.2.1:1"), key("192.0.2.2:1"), key("192.0.3.1:1")
	now := time.Second
	if !spendOK(a, k1, 3000, now) {
		t.Fatal("first spend of the network's 3000 refused")
	}
	// The network is empty: k2 gets its light allowance, 500, no more.
	if !spendOK(a, k2, 500, now) || spendOK(a, k2, 1, now) {
		t.Fatal("light allowance not 500 past an empty network")
	}
	// k2's address budget was refunded for the refused spend: 10000-500.
	if !a.take(k2.IP, 9500*nanobytes, now) || a.take(k2.IP, nanobytes, now) {
		t.Fatal("a spend the network refused took from the address")
	}
	// Another network is untouched.
	if !spendOK(a, k3, 3000, now) {
		t.Fatal("the next /24 shares the first's budget")
	}
	// A second later the network has NetRate more, k1 its light rate.
	now += time.Second
	if !spendOK(a, k1, 100, now) {
		t.Fatal("network did not refill at NetRate")
	}
	if !spendOK(a, k1, 10, now) || spendOK(a, k1, 600, now) {
		t.Fatal("light allowance not 500 + LightRate")
	}
	// A spend the address refuses leaves the network's budget whole.
	b := newTestAmp(t, Config{Rate: 1, Burst: 10, NetRate: 1, NetBurst: 1000, ProofLifetime: -1})
	if spendOK(b, k1, 500, now) {
		t.Fatal("address spent 500 of 10")
	}
	if !b.net.take(b.network(k1.IP), 1000*nanobytes, now) {
		t.Fatal("a spend the address refused took from the network")
	}
}

// TestAmpConcurrent runs readers on every stripe at once (go test -race):
// each budgets an address of its own and all share one; the own addresses
// end exactly as a sequential run leaves them, and the shared one never
// spends more than its burst and rate give.
func TestAmpConcurrent(t *testing.T) {
	const readers, rounds = 8, 2000
	cfg := Config{Rate: 1 << 20, Burst: 100000, NetRate: -1, ProofLifetime: -1}
	a := newTestAmp(t, cfg)
	shared := ampKey(1 << 20)
	used := map[uint64]bool{a.index(shared.IP): true}
	var own []lane.Key
	for i := uint32(0); len(own) < readers; i++ {
		k := ampKey(i)
		if j := a.index(k.IP); !used[j] {
			used[j] = true
			own = append(own, k)
		}
	}
	run := func(a *Budget, k lane.Key) (spent int) {
		now := time.Second
		for r := 0; r < rounds; r++ {
			now += time.Millisecond // 1,048 bytes of Rate a round
			if spendOK(a, k, 1400, now) {
				spent += 1400
			}
		}
		return spent
	}
	want := run(newTestAmp(t, cfg), own[0])
	var wg sync.WaitGroup
	var sharedSpent atomic.Int64
	got := make([]int, readers)
	for g := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[g] = run(a, own[g])
			for r := 0; r < rounds; r++ {
				if spendOK(a, shared, 100, time.Second) {
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
	if s := sharedSpent.Load(); s != int64(cfg.Burst) {
		t.Errorf("shared address spent %d of its %d", s, cfg.Burst)
	}
}

// TestProofs: a probe's answer from its lane with its id proves the lane,
// which then spends nothing; an answer from another lane, with another
// id, a second time, or after ProbeAnswerWindow proves nothing; a lane is
// probed at most once a ProbeInterval and only past ProbeAfter; a proof
// in its last quarter asks for renewal, and lapses after ProofLifetime; a
// lane's probe does not displace another lane's live proof.
func TestProofs(t *testing.T) {
	cfg := Config{Rate: 1, Burst: 10000, ProbeAfter: 3000, NetRate: -1, ProofSlots: 1}
	a := newTestAmp(t, cfg)
	k, other := ampKey(1), ampKey(2)
	now := time.Second
	for i := 0; i < 3; i++ {
		if ok, probe := a.Spend(k, 1000, now); !ok || probe {
			t.Fatalf("spend %d: ok %v probe %v, want a send and no probe below ProbeAfter", i, ok, probe)
		}
	}
	if ok, probe := a.Spend(k, 1000, now); !ok || !probe {
		t.Fatalf("past ProbeAfter: ok %v probe %v", ok, probe)
	}
	tx, ok := a.Probe(k, now)
	if !ok {
		t.Fatal("no probe")
	}
	if _, again := a.Probe(k, now+DefaultProbeInterval/2); again {
		t.Fatal("probed twice within ProbeInterval")
	}
	var wrong [12]byte
	copy(wrong[:], tx[:])
	wrong[11] ^= 1
	for _, c := range []struct {
		what string
		k    lane.Key
		tx   [12]byte
		at   time.Duration
	}{
		{"another lane", other, tx, now},
		{"the same address on another port", lane.Key{IP: k.IP, Port: k.Port + 1}, tx, now},
		{"another id", k, wrong, now},
		{"a zero id", k, [12]byte{}, now},
		{"too late", k, tx, now + ProbeAnswerWindow + 1},
	} {
		if a.Answer(c.k, c.tx, c.at) {
			t.Errorf("%s proved the lane", c.what)
		}
	}
	if !a.Answer(k, tx, now) {
		t.Fatal("the answer did not prove the lane")
	}
	if a.Answer(k, tx, now) {
		t.Fatal("an id taken twice")
	}
	// Proven: spends nothing, never refused, far past its burst.
	for i := 0; i < 3*cfg.Burst/1000; i++ {
		if !spendOK(a, k, 1000, now) {
			t.Fatalf("proven lane refused after %d B", i*1000)
		}
	}
	// The proven lane's sends took nothing from its address: another
	// port of it still has what the first 4,000 bytes left.
	if got := drain(a, lane.Key{IP: k.IP, Port: k.Port + 1}, now); got != cfg.Burst-4000 {
		t.Fatalf("the address had %d left after the proven lane's sends, want %d", got, cfg.Burst-4000)
	}
	// Another lane cannot take the one slot while the proof lives.
	if _, ok := a.Probe(other, now+2*DefaultProbeInterval); ok {
		t.Fatal("another lane's probe displaced a live proof")
	}
	// Last quarter: renew asked for.
	late := now + DefaultProofLifetime*7/8
	if ok, probe := a.Spend(k, 1000, late); !ok || !probe {
		t.Fatalf("last quarter: ok %v probe %v, want renewal", ok, probe)
	}
	// Lapsed: held to the budget again.
	gone := now + DefaultProofLifetime + time.Second
	a.Spend(k, 0, gone)
	if got := drain(a, k, gone); got >= cfg.Burst {
		t.Fatalf("a lapsed proof still exempt: %d spent", got)
	}
}

func TestAmpConfigDefaultsAndLimits(t *testing.T) {
	var c Config
	if err := c.fill(); err != nil {
		t.Fatal(err)
	}
	if c.Rate != DefaultRate || c.Burst != DefaultBurst || c.NetRate != DefaultNetRate ||
		c.NetBurst != DefaultNetBurst || c.LightRate != DefaultLightRate || c.LightBurst != DefaultLightBurst ||
		c.ProofLifetime != DefaultProofLifetime || c.ProbeInterval != DefaultProbeInterval || c.ProbeAfter != DefaultProbeAfter {
		t.Fatalf("zero config filled as %+v", c)
	}
	for _, bad := range []Config{
		{Rate: MaxRate + 1}, {Burst: MaxBurst + 1}, {NetRate: MaxRate + 1},
		{Slots: 3}, {NetSlots: 5}, {ProofSlots: 6}, {Net4Bits: 33}, {Burst: -1}, {ProbeAfter: -1},
	} {
		if err := bad.fill(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
