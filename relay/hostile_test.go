package relay_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

// TestForwardingLoopCostIsBounded: three relays misconfigured so that each
// believes the next one is the way to ~sampel-palnet. One injected request
// must cost a bounded number of packets: the pending table aggregates it
// when it comes round again, and the hop limit stops it in any case.
func TestForwardingLoopCostIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		mem.SetDelay(time.Millisecond)
		target := ship(t, "~sampel-palnet")
		var conns []transport.Conn
		for i := 0; i < 3; i++ {
			c, err := mem.Listen(netip.MustParseAddrPort(fmt.Sprintf("10.0.0.%d:13337", i+1)))
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		relays := []string{"~zod", "~nec", "~bud"}
		var cores []*relay.Relay
		for i, c := range conns {
			next := conns[(i+1)%3].LocalAddr()
			r, err := relay.New(relay.Config{HintNets: loopbackNets,
				Ship: ship(t, relays[i]), Self: []netip.AddrPort{c.LocalAddr()},
				Pinned: map[lane.Ship]netip.AddrPort{target: next},
			})
			if err != nil {
				t.Fatal(err)
			}
			cores = append(cores, r)
			srv := relay.NewServer(r, []transport.Conn{c}, relay.ServerConfig{})
			srv.Start()
			defer srv.Close()
		}
		attacker, err := mem.Listen(netip.MustParseAddrPort("10.0.0.99:5000"))
		if err != nil {
			t.Fatal(err)
		}
		defer attacker.Close()
		req := peek(t, "~sampel-palnet", "loop", 0)
		if _, err := attacker.WriteBatch([]transport.Message{{Buf: req, N: len(req), Addr: conns[0].LocalAddr()}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // let it go round as long as it can
		synctest.Wait()
		st := mem.Stats()
		t.Logf("one injected request cost %d datagrams in a three-relay loop", st.Sent-1)
		if st.Sent-1 > 3 {
			t.Errorf("loop cost %d datagrams; the pending table should stop it after one round", st.Sent-1)
		}
		// The hop limit bounds a loop with no help from the pending
		// table: a fresh request one hop short of MaxHops is forwarded
		// once, and the next relay drops it at MaxHops.
		req = peek(t, "~sampel-palnet", "loop/hops", relay.MaxHops-1)
		if _, err := attacker.WriteBatch([]transport.Message{{Buf: req, N: len(req), Addr: conns[0].LocalAddr()}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		var hopDrops uint64
		for _, r := range cores {
			hopDrops += r.Counters().Snapshot().Drops[relay.DropHopLimit]
		}
		if sent := mem.Stats().Sent - st.Sent; sent != 2 || hopDrops != 1 {
			t.Errorf("request at hop %d: %d datagrams sent (want 2: it and one forward), %d dropped at the hop limit (want 1)", relay.MaxHops-1, sent, hopDrops)
		}
	})
}

// TestFloodLeavesRoomForHonestRequesters floods one relay with requests for
// random names from random spoofed sources while honest requesters keep
// asking, their answers arriving `lag` flood packets later; memory stays
// under the caps, and honest requests are answered while the flood has not
// pushed them out of the table (it holds maxPending entries, shedding the
// oldest).
func TestFloodLeavesRoomForHonestRequesters(t *testing.T) {
	flood, maxPending := 200_000, 50_000
	if raceEnabled {
		flood, maxPending = 40_000, 10_000
	}
	for _, lag := range []int{100, maxPending / 5, maxPending * 4 / 5, maxPending * 6 / 5} {
		f := newFixture(t, func(c *relay.Config) { c.Pending.MaxEntries = maxPending })
		rng := rand.New(rand.NewPCG(1, 2))
		honest := []netip.AddrPort{alice, bob}
		type want struct {
			who  netip.AddrPort
			path string
		}
		due := map[int]want{}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		asked, answered := 0, 0
		var ip [4]byte
		for i := 0; i < flood+lag; i++ {
			binary.LittleEndian.PutUint32(ip[:], rng.Uint32())
			src := netip.AddrPortFrom(netip.AddrFrom4(ip), uint16(rng.Uint32()))
			f.handle(peek(t, "~nec", fmt.Sprintf("junk/%x", rng.Uint64()), 0), src)
			f.now += time.Microsecond
			if i%100 == 0 && i < flood {
				w := want{honest[(i/100)%2], fmt.Sprintf("honest/%d", i)}
				f.handle(peek(t, "~nec", w.path, 0), w.who)
				due[i+lag] = w
				asked++
			}
			if w, ok := due[i]; ok {
				for _, s := range f.handle(page(t, "~nec", w.path, 0, netip.AddrPort{}), necLane) {
					if s.To == w.who {
						answered++
					}
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if n := f.r.Pending().Len(); n > maxPending {
			t.Fatalf("pending %d > cap %d", n, maxPending)
		}
		grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		frac := float64(answered) / float64(asked)
		t.Logf("flood of %d spoofed requests, answers %d packets later: honest answered %.1f%% (%d/%d), pending %d (cap %d), heap %+d KiB",
			flood, lag, 100*frac, answered, asked, f.r.Pending().Len(), maxPending, grown/1024)
		if lag < maxPending*9/10 && answered != asked {
			t.Errorf("lag %d < table size: honest answered %d of %d", lag, answered, asked)
		}
		if grown > 64<<20 {
			t.Errorf("heap grew by %d MiB under the flood", grown>>20)
		}
	}
}

// TestPagesNeverReachLanesThatDidNotAsk: unsolicited pages of every shape,
// including ones naming a pending request but sent before it existed, are
// dropped; the relay is not a reflector.
func TestPagesNeverReachLanesThatDidNotAsk(t *testing.T) {
	f := newFixture(t, nil)
	for i := 0; i < 100; i++ {
		s := f.handle(page(t, "~nec", fmt.Sprintf("x/%d", i), i%7, alice), netip.AddrPortFrom(bob.Addr(), uint16(i+1)))
		if len(s) != 0 {
			t.Fatalf("unsolicited page %d sent to %v", i, s[0].To)
		}
	}
	f.wantDrop(relay.DropUnsolicited, 100)
}
