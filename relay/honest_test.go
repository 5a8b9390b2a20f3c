package relay_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// What honest users get through a relay with its defaults: each row of
// issue 20's table, decided by the core in virtual time, each party in an
// IPv4 /16 of its own. Each is the honest twin of an attack test: a
// download beside TestAmplificationIsBounded, a /24 of requesters beside
// TestSubnetSpreadGainsNothing, a one-way legacy transfer and a
// retransmission beside TestLegacyAnswersWithinBudget and
// TestLegacyLoopCostsAtMostEight, a flooding /24's neighbour beside the
// flood. docs/reliability.md ("What honest users get") has the figures.

// honestShipLane is the fronted ship's process, on loopback.
var honestShipLane = netip.MustParseAddrPort("127.0.0.1:40001")

// newHonestFixture is a relay with the default config fronting ~marzod at
// honestShipLane, whose pages the tests play.
func newHonestFixture(t testing.TB) *fixture {
	return newFixture(t, func(c *relay.Config) { c.ShipLane = honestShipLane })
}

// fragPage is fragment i of ~marzod's message `path`, a 1.4 KB page.
func fragPage(t testing.TB, path string) []byte {
	p := scry.NewPage(name(t, "~marzod", path), scry.Data{Total: 2000 * 1400, AuthKind: scry.AuthSign,
		Auth: make([]byte, 64), Frag: make([]byte, 1400-100)})
	return p.Append(nil)
}

// requester is one honest requester's view of a download through the
// relay: what it asked, what came back at the first ask.
type requester struct {
	lane         netip.AddrPort
	first, tries int
	got          int
}

// fetch plays requester q asking for `path` through f: a peek, the ship's
// page for it (the ship answers at once), and whether the page reached q.
// It reports whether q got it.
func fetch(t testing.TB, f *fixture, q *requester, path string) bool {
	q.tries++
	f.handle(peek(t, "~marzod", path, 0), q.lane)
	for _, s := range f.handle(fragPage(t, path), honestShipLane) {
		if s.To == q.lane && scry.IsMesa(s.Buf) {
			q.got++
			return true
		}
	}
	return false
}

// download plays requesters each fetching n fragments, window at a time
// (a window's peeks go out together; one round trip, rtt, later the next
// window), and an unanswered fragment asked again after `retry`, up to
// tries times. It returns how long the last fragment took.
func download(t testing.TB, f *fixture, qs []*requester, prefix string, n, window int, rtt, retry time.Duration, tries int) time.Duration {
	start := f.now
	type want struct {
		q    *requester
		frag int
		try  int
	}
	var queue []want
	for i := 0; i < n; i++ {
		for _, q := range qs {
			queue = append(queue, want{q, i, 0})
		}
	}
	for len(queue) > 0 {
		batch := min(len(queue), window*len(qs))
		var again []want
		for _, w := range queue[:batch] {
			path := fmt.Sprintf("%s/%s/%d", prefix, w.q.lane.Addr(), w.frag)
			if fetch(t, f, w.q, path) {
				if w.try == 0 {
					w.q.first++
				}
				continue
			}
			if w.try+1 < tries {
				again = append(again, want{w.q, w.frag, w.try + 1})
			}
		}
		queue = queue[batch:]
		f.now += rtt
		if len(again) > 0 {
			f.now += retry - rtt
			queue = append(again, queue...)
		}
	}
	return f.now - start
}

// TestHonestBulkDownload: one requester fetches 2,000 fragments of
// 1.4 KB pages with a window of 32 and a retry after 1 s: every page at
// the first ask, in the time the round trips take (1.6 % at the first
// ask and about 187 s for all under the old ratio budget).
func TestHonestBulkDownload(t *testing.T) {
	f := newHonestFixture(t)
	q := &requester{lane: netip.MustParseAddrPort("127.3.0.1:5000")}
	took := download(t, f, []*requester{q}, "big", 2000, 32, 1500*time.Microsecond, time.Second, 20)
	sn := f.snap()
	t.Logf("2,000 fragments, window 32: %d/2000 at the first ask, all in %v of virtual time; throttled %d, probes %d",
		q.first, took, sn.Events[relay.EventAmpThrottled], sn.Events[relay.EventProbesSent])
	if q.first != 2000 || q.got != 2000 {
		t.Errorf("%d of 2000 at the first ask, %d in all", q.first, q.got)
	}
}

// TestHonestSlash24OfRequesters: 20 requesters of one /24, 200
// fragments each, at once: every page at the first ask (15-17 % under the
// ratio budget).
func TestHonestSlash24OfRequesters(t *testing.T) {
	f := newHonestFixture(t)
	var qs []*requester
	for i := range 20 {
		qs = append(qs, &requester{lane: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 4, 0, byte(i + 1)}), 5000)})
	}
	download(t, f, qs, "slash24", 200, 32, 1500*time.Microsecond, time.Second, 20)
	for _, q := range qs {
		if q.first != 200 {
			t.Errorf("%v: %d of 200 at the first ask", q.lane, q.first)
		}
	}
	t.Logf("20 requesters of 127.4.0.0/24 x 200 fragments: throttled %d", f.snap().Events[relay.EventAmpThrottled])
}

// TestHonestShipsBehindOneNAT: 200 ships behind one address (a
// carrier-grade NAT: one IP, a port each), 5 requests each for distinct
// names, at once: every answer at the first ask (29-30 % before).
func TestHonestShipsBehindOneNAT(t *testing.T) {
	f := newHonestFixture(t)
	var qs []*requester
	for i := range 200 {
		qs = append(qs, &requester{lane: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 5, 0, 1}), uint16(20000+i))})
	}
	// All 1,000 requests in flight before the first answer.
	for _, q := range qs {
		for i := range 5 {
			f.handle(peek(t, "~marzod", fmt.Sprintf("nat/%d/%d", q.lane.Port(), i), 0), q.lane)
		}
	}
	got := map[netip.AddrPort]int{}
	for _, q := range qs {
		for i := range 5 {
			for _, s := range f.handle(fragPage(t, fmt.Sprintf("nat/%d/%d", q.lane.Port(), i)), honestShipLane) {
				if scry.IsMesa(s.Buf) { // not the relay's probes
					got[s.To]++
				}
			}
		}
	}
	for _, q := range qs {
		if got[q.lane] != 5 {
			t.Errorf("%v: %d of 5 answers", q.lane, got[q.lane])
		}
	}
}

// TestHonestNeighbourOfAFlood: 16 hosts of one /24 flood 20,000 peeks a
// second from their own addresses (each answered with a full page) for
// 3 s; a neighbour in that /24 asks 25 names meanwhile and gets all 25
// within 3 tries, as a host of another /24 does (15 of 25 before): its
// light allowance goes past its network's spent budget.
func TestHonestNeighbourOfAFlood(t *testing.T) {
	f := newHonestFixture(t)
	var flooders []netip.AddrPort
	for i := range 16 {
		flooders = append(flooders, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 6, 0, byte(10 + i)}), 7000))
	}
	neighbour := &requester{lane: netip.MustParseAddrPort("127.6.0.200:5000")}
	elsewhere := &requester{lane: netip.MustParseAddrPort("127.7.0.1:5000")}
	flooded := 0
	const rate, secs = 20000, 3
	step := time.Second / rate
	asked := map[*requester]int{}
	for i := 0; i < rate*secs; i++ {
		path := fmt.Sprintf("flood/%d", i)
		from := flooders[i%len(flooders)]
		f.handle(peek(t, "~marzod", path, 0), from)
		for _, s := range f.handle(fragPage(t, path), honestShipLane) {
			if s.To == from {
				flooded++
			}
		}
		// From 1 s on, once the /24's budget is spent, one ask every
		// 40 ms each: 25 names, each asked up to 3 times.
		if i >= rate && i%(rate/25) == 0 {
			for _, q := range []*requester{neighbour, elsewhere} {
				n := asked[q]
				if n >= 25 {
					continue
				}
				for try := 0; try < 3; try++ {
					if fetch(t, f, q, fmt.Sprintf("asks/%v/%d", q.lane.Addr(), n)) {
						break
					}
				}
				asked[q]++
			}
		}
		f.now += step
	}
	t.Logf("flood into 127.6.0.0/24: %d of %d pages delivered (%.0f KB/s); neighbour %d/25 in %d asks, a host elsewhere %d/25",
		flooded, rate*secs, float64(flooded)*1.4/secs, neighbour.got, neighbour.tries, elsewhere.got)
	if neighbour.got != 25 || elsewhere.got != 25 {
		t.Errorf("neighbour %d/25, elsewhere %d/25", neighbour.got, elsewhere.got)
	}
	// The flood itself is held to the network's budget and the flooders'
	// light allowances.
	if max := netBound(len(flooders)+1, secs*time.Second) / 1400; flooded > max {
		t.Errorf("flood delivered %d pages, over the /24's bound %d", flooded, max)
	}
}

// TestHonestLegacyOneWayTransfer: a one-way legacy ames transfer, 1,000
// fragments of 1 KB at 500 a second to a lane the relay learned, the
// receiver acking straight to the sender (nothing comes back through the
// relay): all 1,000 delivered at the first send (52 before).
func TestHonestLegacyOneWayTransfer(t *testing.T) {
	f := newHonestFixture(t)
	sndr, rcvr := netip.MustParseAddrPort("127.8.0.1:6000"), netip.MustParseAddrPort("127.9.0.1:6000")
	f.handle(legacy(t, "~dapnep-ronmyl", "~nec", 50, 0), sndr)
	f.handle(legacy(t, "~sampel-palnet", "~nec", 50, 0), rcvr) // the relay learns the receiver's lane
	delivered := 0
	for i := 1; i <= 1000; i++ {
		f.now += 2 * time.Millisecond
		if containsLane(f.handle(legacy(t, "~dapnep-ronmyl", "~sampel-palnet", 1000, i), sndr), rcvr) {
			delivered++
		}
	}
	if delivered != 1000 {
		t.Errorf("%d of 1000 delivered (legacy_throttled %d)", delivered, f.snap().Drops[relay.DropLegacyThrottled])
	}
}

// TestHonestLegacyRetransmission: the same legacy packet sent again after
// 300 ms and after 1 s, from its sender's lane (ames's packet pump re-sends
// the stored fragment, and AES-SIV is deterministic, so the bytes are
// identical): 3 of 3 forwarded (both copies were dropped as duplicates
// before); the same packet from another lane within the window is a
// loop's copy and dropped.
func TestHonestLegacyRetransmission(t *testing.T) {
	f := newHonestFixture(t)
	sndr := netip.MustParseAddrPort("127.10.0.1:6000")
	p := legacy(t, "~dapnep-ronmyl", "~nec", 600, 7)
	fwd := 0
	for _, after := range []time.Duration{0, 300 * time.Millisecond, 700 * time.Millisecond} {
		f.now += after
		if containsLane(f.handle(p, sndr), necLane) {
			fwd++
		}
	}
	if fwd != 3 {
		t.Errorf("%d of 3 copies forwarded", fwd)
	}
	if s := f.handle(p, netip.MustParseAddrPort("127.11.0.1:6000")); len(s) != 0 {
		t.Error("the same packet from another lane forwarded within the window")
	}
}

// TestBudgetAlternationGainsNothing: forged peeks alternating between
// 127.0.6.1 and 127.0.7.1 (one /16, two /24s) got 92x with nothing
// throttled when the slot hash saw only the first two octets (one slot,
// retaken each time with a fresh grant). Now each address is its own slot
// and each gets at most its bound.
func TestBudgetAlternationGainsNothing(t *testing.T) {
	f := newFixture(t, nil)
	victims := []netip.AddrPort{netip.MustParseAddrPort("127.0.6.1:4444"), netip.MustParseAddrPort("127.0.7.1:4444")}
	dur := 5 * time.Second
	per := map[netip.AddrPort]int{}
	f.onSend = func(s send) { per[s.To] += len(s.Buf) }
	sent, got := amplifySpread(t, f, victims, 2000, dur)
	t.Logf("alternating two /24s of a /16 at 2,000 peeks/s each for %v: %d B/s forged, %d B/s to the victims, throttled %d",
		dur, sent/5, got/5, f.snap().Events[relay.EventAmpThrottled])
	for _, v := range victims {
		if per[v] > addrBound(1, dur) {
			t.Errorf("%v got %d B, over its bound %d", v, per[v], addrBound(1, dur))
		}
	}
	if f.snap().Events[relay.EventAmpThrottled] == 0 {
		t.Error("nothing throttled")
	}
}

// TestLegacyVictimBesideAGalaxy: legacy requests forged in a victim's
// name, answered by a galaxy whose address shares the victim's /16 (46.5x
// when both shared a budget slot and the galaxy's own traffic credited
// it). Nothing a configured lane sends earns anyone budget now.
func TestLegacyVictimBesideAGalaxy(t *testing.T) {
	galaxy := netip.MustParseAddrPort("127.12.0.1:13338")
	f := newFixture(t, func(c *relay.Config) {
		c.Galaxies = map[lane.Ship]netip.AddrPort{ship(t, "~zod"): zodLane, ship(t, "~nec"): galaxy}
	})
	victim := netip.MustParseAddrPort("127.12.0.9:4444")
	dur := 5 * time.Second
	sent, got := 0, 0
	for i := 0; i < 5000; i++ {
		req := legacy(t, "~dapnep-ronmyl", "~nec", 4, i)
		sent += len(req)
		f.handle(req, victim)
		for _, s := range f.handle(legacy(t, "~nec", "~dapnep-ronmyl", 1400, i), galaxy) {
			if s.To == victim {
				got += len(s.Buf)
			}
		}
		f.now += time.Millisecond
	}
	t.Logf("forged legacy requests at 1,000/s for %v beside the galaxy: %d B/s to the victim", dur, got/5)
	if got > addrBound(1, dur) {
		t.Errorf("victim got %d B, over its bound %d", got, addrBound(1, dur))
	}
}
