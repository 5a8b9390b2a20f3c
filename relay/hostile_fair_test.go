package relay_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/pit"
)

// Fair shares under floods: the pending table's requester-overflow pool and
// its RefuseNew policy give each source (an IP address, any port; an IPv6
// /64) a share, so one source cannot starve the others. These tests replay
// the two attack rows found against `relay run` on loopback, through the
// decision core with synthetic from-addresses and time passed in.

// fairTable is the table size of both rows: pending.max-entries 20000.
const fairTable = 20_000

// fairSeed is the pending table's source-hash seed in TestFairRefuseWhenFull.
const fairSeed = 1

// attackerAddr is the one address the floods below come from.
var attackerAddr = netip.MustParseAddr("192.0.2.66")

// honestLane returns the lane of the i-th honest requester, each its own
// address.
func honestLane(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(100 + i)}), 31337)
}

// TestFairOverflowHeldSubscription: 38,400 peeks from one address over 64
// ports in one second (600 names, each joined from all 64 ports) used up
// the overflow pool of a 20,000-entry table, and a held subscription then
// reached 1 of its 6 subscribers. With the per-source share of the pool,
// all 6 get the page.
func TestFairOverflowHeldSubscription(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) {
		c.Pending.MaxEntries = fairTable
		c.Pending.Seed = fairSeed
	})
	const names, ports = 600, 64
	step := time.Second / (names * ports)
	for n := range names {
		pkt := peek(t, "~nec", fmt.Sprintf("flood/%d", n), 0)
		for p := range ports {
			f.handle(pkt, netip.AddrPortFrom(attackerAddr, uint16(40000+p)))
			f.now += step
		}
	}
	st := f.r.Pending().Stats()
	// The publisher holds the subscription: its six subscribers ask, and
	// the page comes seconds later (within the TTL, the flood still live).
	const subs = 6
	path := "notify/held/sub"
	for i := range subs {
		f.handle(peek(t, "~nec", path, 0), honestLane(i))
		f.now += 10 * time.Millisecond
	}
	f.now += 5 * time.Second
	f.r.Expire(f.now)
	got := map[netip.AddrPort]int{}
	for _, s := range f.handle(page(t, "~nec", path, 0, netip.AddrPort{}), necLane) {
		got[s.To]++
	}
	reached := 0
	for i := range subs {
		if got[honestLane(i)] == 1 {
			reached++
		}
	}
	t.Logf("after %d peeks from one address over %d ports in 1 s: the held subscription reached %d of %d subscribers; pool share refusals %d, requesters refused %d",
		names*ports, ports, reached, subs, st.OverflowShareCapped, st.RequesterCapped)
	if reached != subs {
		t.Errorf("the page reached %d of %d subscribers (sent to %v)", reached, subs, got)
	}
	if st.OverflowShareCapped == 0 {
		t.Error("the flood never met its share of the pool; the test does not reproduce the attack")
	}
}

// TestFairEntryShareHeldSubscription is the same row with the flood aimed
// at the subscription's own name: one address on more ports than an entry
// holds requesters (640 of 512) joining the entry the six subscribers wait
// on would take all its requester slots. A full entry is shared max-min
// fairly by source, so each subscriber, its source smaller than the
// flood's, takes the place of one of the flood's requesters.
func TestFairEntryShareHeldSubscription(t *testing.T) {
	// At the default table size, whose overflow pool is large enough that
	// its per-source share does not bind first.
	f := newFixture(t, func(c *relay.Config) { c.Pending.Seed = fairSeed })
	const ports, rounds = 640, 60 // 38,400 peeks in 1 s
	path := "notify/held/sub"
	pkt := peek(t, "~nec", path, 0)
	step := time.Second / (ports * rounds)
	for r := range rounds {
		for p := range ports {
			f.handle(pkt, netip.AddrPortFrom(attackerAddr, uint16(40000+p)))
			f.now += step
		}
		if r == 0 {
			// The subscribers ask while the flood goes on.
			for i := range 6 {
				f.handle(pkt, honestLane(i))
			}
		}
	}
	st := f.r.Pending().Stats()
	got := map[netip.AddrPort]int{}
	for _, s := range f.handle(page(t, "~nec", path, 0, netip.AddrPort{}), necLane) {
		got[s.To]++
	}
	reached := 0
	for i := range 6 {
		if got[honestLane(i)] == 1 {
			reached++
		}
	}
	t.Logf("38,400 peeks for the subscription's name from one address over %d ports: %d of 6 subscribers reached, %d requesters refused for the entry share", ports, reached, st.EntryShareCapped)
	if reached != 6 {
		t.Errorf("the page reached %d of 6 subscribers", reached)
	}
	if st.EntryShareCapped == 0 {
		t.Error("the flood never met its share of the entry; the test does not reproduce the attack")
	}
}

// TestFairRefuseWhenFull: with pending.refuse-when-full a 20,000-entry table was
// held full by a flood of 1,000 new names a second, and 0 of 200 honest
// requests were answered. The per-source cap (a tenth of the table by
// default) keeps one address from filling it; the rows here take what got
// past it: one address with the cap switched off
// (pending.max-entries-per-source -1) and ten addresses at the default cap.
// Under RefuseNew, the last eighth of each shard is kept for sources under
// 1/64 of it, so each honest request is remembered and its page delivered.
// A flood from more addresses than that, each under the share, fills the
// table by design: the last row shows it, and asserts only the caps.
func TestFairRefuseWhenFull(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perSource int // Config.Pending.MaxEntriesPerSource
		addrs     int // attacker addresses, in turn
		fair      bool
	}{
		{"one address, no per-source cap", -1, 1, true},
		{"ten addresses, default cap", 0, 10, true},
		{"20,000 addresses, each under the share (by design, not fair)", 0, fairTable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *relay.Config) {
				c.Pending.MaxEntries = fairTable
				c.Pending.FullPolicy = pit.RefuseNew
				c.Pending.MaxEntriesPerSource = tc.perSource
				// A fixed seed, so that which addresses share a counter
				// slot (1 in SourceSlotsPerShard per pair: with 100
				// honest addresses and 10 attackers, a random seed makes
				// an honest one share an attacker's slot, and its share,
				// in about one run in five) is the same in every run.
				c.Pending.Seed = fairSeed
			})
			const (
				rate     = 1000              // flood names per second
				flood    = 60 * rate         // a minute of it; full from 20 s on
				honest   = 200               // requests, one every 200 ms...
				from     = 20 * rate         // ...from the 20th second on
				every    = 200 * rate / 1000 // flood packets between them
				answerIn = 300 * time.Millisecond
			)
			type ask struct {
				who  netip.AddrPort
				path string
				at   time.Duration
			}
			var waiting []ask
			asked, forwarded, answered := 0, 0, 0
			lastExpire := f.now
			for i := 0; i < flood; i++ {
				a := byte(i % tc.addrs)
				src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, byte(2 + i%tc.addrs/256), a}), uint16(40000+i%64))
				if tc.addrs == 1 {
					src = netip.AddrPortFrom(attackerAddr, uint16(40000+i%64))
				}
				f.handle(peek(t, "~nec", fmt.Sprintf("junk/%d", i), 0), src)
				f.now += time.Second / rate
				if f.now-lastExpire >= relay.DefaultExpiryInterval {
					f.r.Expire(f.now)
					lastExpire = f.now
				}
				if i >= from && (i-from)%every == 0 && asked < honest {
					w := ask{honestLane(asked % 100), fmt.Sprintf("honest/%d", asked), f.now}
					if len(f.handle(peek(t, "~nec", w.path, 0), w.who)) == 1 {
						forwarded++
					}
					waiting = append(waiting, w)
					asked++
				}
				if i == flood-1 {
					f.now += answerIn // the last answers come after the flood
				}
				for len(waiting) > 0 && f.now-waiting[0].at >= answerIn {
					w := waiting[0]
					waiting = waiting[1:]
					for _, s := range f.handle(page(t, "~nec", w.path, 0, netip.AddrPort{}), necLane) {
						if s.To == w.who {
							answered++
						}
					}
				}
			}
			st := f.r.Pending().Stats()
			t.Logf("%d flood names/s from %d address(es), table %d (refuse when full): honest forwarded %d/%d, answered %d/%d; pending %d, refused %d (%d over their share), evicted %d",
				rate, tc.addrs, fairTable, forwarded, asked, answered, asked, st.Entries, st.Refused, st.RefusedShare, st.Evicted)
			if asked != honest {
				t.Fatalf("asked %d honest requests, want %d", asked, honest)
			}
			if st.Entries > fairTable || st.Evicted != 0 {
				t.Errorf("pending %d (cap %d), evicted %d under RefuseNew", st.Entries, fairTable, st.Evicted)
			}
			if !tc.fair {
				return
			}
			if answered != honest {
				t.Errorf("honest answered %d of %d", answered, honest)
			}
			if st.RefusedShare == 0 {
				t.Error("the flood was never refused for its share; the test does not reproduce the attack")
			}
		})
	}
}
