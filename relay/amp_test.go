package relay_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// bigPage is a page for path near the 1472-byte limit.
func bigPage(t testing.TB, path string) []byte {
	p := scry.NewPage(name(t, "~nec", path), scry.Data{Total: 1 << 20, AuthKind: scry.AuthSign,
		Auth: make([]byte, 64), Frag: make([]byte, 1472-100-len(path))})
	return p.Append(nil)
}

// amplify plays an attacker that forges requests from victim at `rate`
// requests per second for `dur`, each answered upstream with a big page,
// and returns the bytes the attacker sent and the bytes the victim got.
func amplify(t *testing.T, f *fixture, victim netip.AddrPort, rate int, dur time.Duration) (sent, got int) {
	return amplifySpread(t, f, []netip.AddrPort{victim}, rate, dur)
}

// amplifySpread is amplify with the forged requests spread over victims,
// each forged at `rate` requests per second, in turn; got counts what
// all of them received.
func amplifySpread(t *testing.T, f *fixture, victims []netip.AddrPort, rate int, dur time.Duration) (sent, got int) {
	n := int(dur.Seconds() * float64(rate))
	step := time.Second / time.Duration(rate)
	isVictim := setOf(victims)
	for i := 0; i < n; i++ {
		for j, v := range victims {
			path := fmt.Sprintf("%x.%x", i, j) // short names: the cheapest peeks
			req := peek(t, "~nec", path, 0)
			sent += len(req)
			f.handle(req, v)
			for _, s := range f.handle(bigPage(t, path), necLane) {
				if isVictim[s.To] {
					got += len(s.Buf)
				}
			}
		}
		f.now += step
	}
	return sent, got
}

// setOf returns the set of lanes.
func setOf(lanes []netip.AddrPort) map[netip.AddrPort]bool {
	m := make(map[netip.AddrPort]bool, len(lanes))
	for _, l := range lanes {
		m[l] = true
	}
	return m
}

// addrBound and netBound are the most the default budgets let an attack
// that sent `sent` request bytes over dur from `addrs` addresses of one
// network deliver into it: per address Factor*sent+Initial+Rate*dur each,
// per network NetFactor*sent+NetInitial.
func addrBound(sent, addrs int, dur time.Duration) int {
	return relay.DefaultAmpFactor*sent + addrs*(relay.DefaultAmpInitial+relay.DefaultAmpRate*int(dur/time.Second))
}

func netBound(sent int) int { return relay.DefaultAmpNetFactor*sent + relay.DefaultAmpNetInitial }

func TestAmplificationIsBounded(t *testing.T) {
	victim := netip.MustParseAddrPort("192.0.2.66:4444")
	rates, dur := []int{10, 100, 1000, 10000}, 10*time.Second
	if raceEnabled {
		rates, dur = []int{10, 1000, 10000}, 2*time.Second
	}
	for _, rate := range rates {
		f := newFixture(t, nil)
		sent, got := amplify(t, f, victim, rate, dur)
		ratio := float64(got) / float64(sent)
		bound := float64(min(addrBound(sent, 1, dur), netBound(sent))) / float64(sent)
		t.Logf("attacker at %5d peeks/s (%6d B/s): victim gets %.1fx the attacker's bytes (bound %.1fx); throttled %d pages",
			rate, sent/int(dur/time.Second), ratio, bound, f.snap().Events[relay.EventAmpThrottled])
		if ratio > bound {
			t.Errorf("rate %d: amplification %.1f exceeds the bound %.1f", rate, ratio, bound)
		}
	}
	// Without the budget the same attack amplifies by the page/peek ratio.
	f := newFixture(t, func(c *relay.Config) { c.Amp.Factor = -1 })
	sent, got := amplify(t, f, victim, 10000, time.Second)
	if ratio := float64(got) / float64(sent); ratio < 30 {
		t.Errorf("unbounded amplification only %.1fx: the attack in this test is too weak", ratio)
	}
}

// subnet returns n addresses of 192.0.2.0/24 (IPv4) or of one IPv6 /56.
func subnet(n int, v6 bool) []netip.AddrPort {
	out := make([]netip.AddrPort, n)
	for i := range out {
		if v6 {
			// 2001:db8:0:ab00::/56: the spread goes over bits 56-63 and
			// the interface identifier.
			a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0xab, byte(i), 0, 0, 0, 0, 0, byte(i >> 8), byte(i)}
			out[i] = netip.AddrPortFrom(netip.AddrFrom16(a), 4444)
		} else {
			out[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), 4444)
		}
	}
	return out
}

// TestSubnetSpreadGainsNothing is the attack that found the per-address
// budget wanting: forged peeks from 64 addresses of one /24, 100 a second
// each, every one answered with a full page. Each address had its own
// Rate, so the /24 got 86.6x the attacker's bytes; now the /24 has one
// budget, NetFactor times the requests heard from it. The same with an
// IPv6 /56.
func TestSubnetSpreadGainsNothing(t *testing.T) {
	dur := 5 * time.Second
	if raceEnabled {
		dur = 2 * time.Second
	}
	for _, v6 := range []bool{false, true} {
		f := newFixture(t, nil)
		sent, got := amplifySpread(t, f, subnet(64, v6), 100, dur)
		ratio := float64(got) / float64(sent)
		bound := float64(netBound(sent)) / float64(sent)
		t.Logf("IPv6 %v: 64 addresses at 100 peeks/s for %v: %d B sent, %d B into the network: %.2fx (bound %.2fx)",
			v6, dur, sent, got, ratio, bound)
		if ratio > bound || ratio > 10 {
			t.Errorf("IPv6 %v: spread amplification %.2fx, bound %.2fx", v6, ratio, bound)
		}
		// Without the network budget the spread multiplies Rate.
		f = newFixture(t, func(c *relay.Config) { c.Amp.NetFactor = -1 })
		sent, got = amplifySpread(t, f, subnet(64, v6), 100, dur)
		if ratio := float64(got) / float64(sent); ratio < 30 {
			t.Errorf("IPv6 %v: per-address budget alone gives only %.1fx: the attack in this test is too weak", v6, ratio)
		}
	}
}

// TestAmplificationWorstCase searches the attacks this test can construct
// against the default budget (rates from one peek a second to 10,000,
// spread over 1 to 256 addresses of one /24, for 10 s) for the largest
// ratio of bytes into the /24 to the attacker's bytes in its name, and
// holds it to 10x. The one-off NetInitial is the only term beyond
// NetFactor, so the ratio is highest for the smallest attack: the bound
// NetFactor + NetInitial/sent is 10x at sent = NetInitial/2 (11,776 B), so
// the test holds attacks of at least that to 10x, and every attack to
// NetFactor*sent + NetInitial bytes (a smaller one gets under 118 KB).
func TestAmplificationWorstCase(t *testing.T) {
	dur := 10 * time.Second
	rates, spreads := []int{1, 10, 100, 1000}, []int{1, 8, 64, 256}
	if raceEnabled {
		dur, rates, spreads = 2*time.Second, []int{1, 100}, []int{1, 64}
	}
	worst, worstAt := 0.0, ""
	for _, rate := range rates {
		for _, spread := range spreads {
			if rate*spread > 20000 {
				continue // the 10,000/s row covers it (TestAmplificationIsBounded)
			}
			f := newFixture(t, nil)
			sent, got := amplifySpread(t, f, subnet(spread, false), rate, dur)
			if got > netBound(sent) {
				t.Errorf("rate %d spread %d: %d B into the /24, over NetFactor*%d+NetInitial", rate, spread, got, sent)
			}
			if sent < relay.DefaultAmpNetInitial/2 {
				continue
			}
			if r := float64(got) / float64(sent); r > worst {
				worst, worstAt = r, fmt.Sprintf("%d addresses at %d peeks/s (%d B/s)", spread, rate, sent/int(dur/time.Second))
			}
		}
	}
	t.Logf("worst case: %.2fx, %s for %v", worst, worstAt, dur)
	if worst > 10 {
		t.Errorf("worst amplification %.2fx > 10x (%s)", worst, worstAt)
	}
}

// TestHonestRequesterIsNotThrottled: under the per-address budget alone an
// honest requester is never throttled: Rate covers 100 full pages a second.
func TestHonestRequesterIsNotThrottled(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) { c.Amp.NetFactor = -1 })
	// 100 full pages a second for 10 s, each asked for by one peek.
	for i := 0; i < 1000; i++ {
		path := fmt.Sprintf("honest/requester/path/%d", i)
		f.handle(peek(t, "~nec", path, 0), alice)
		if s := f.handle(bigPage(t, path), necLane); len(s) != 1 {
			t.Fatalf("page %d not delivered (throttled %d)", i, f.snap().Events[relay.EventAmpThrottled])
		}
		f.now += 10 * time.Millisecond
	}
}

// TestHonestRequesterUnderNetworkBudget measures what the network budget
// costs one honest requester fetching full pages through the relay at the
// default settings, asking again for each page withheld (as mesa
// retransmits an unanswered peek), and holds it to what AmpConfig says:
// the first NetInitial bytes free, then NetFactor bytes of pages per byte
// of peeks, so a page of P bytes takes P/(NetFactor*peek) peeks.
func TestHonestRequesterUnderNetworkBudget(t *testing.T) {
	f := newFixture(t, nil)
	const pages = 1000
	var peeks, first, peekBytes, pageBytes int
	for i := 0; i < pages; i++ {
		path := fmt.Sprintf("honest/requester/path/%d", i)
		pg := bigPage(t, path)
		for try := 0; ; try++ {
			if try == 100 {
				t.Fatalf("page %d withheld after 100 peeks", i)
			}
			req := peek(t, "~nec", path, 0)
			peeks++
			peekBytes += len(req)
			f.handle(req, alice)
			f.now += 10 * time.Millisecond
			if s := f.handle(pg, necLane); len(s) == 1 {
				pageBytes += len(pg)
				if try == 0 {
					first++
				}
				break
			}
		}
	}
	share := float64(pages-first) / pages
	perPage := float64(peeks) / pages
	// Pages beyond the free ones, each costing about ceil(P/(8*peek)) peeks.
	peek1 := float64(peekBytes) / float64(peeks)
	want := float64(len(bigPage(t, "honest/requester/path/500"))) / (relay.DefaultAmpNetFactor * peek1)
	t.Logf("%d pages of %d B with %.0f-byte peeks: %.0f%% withheld at the first ask, %.2f peeks a page (pages/peek bytes %.1fx, predicted %.2f peeks a page)",
		pages, pageBytes/pages, peek1, 100*share, perPage, float64(pageBytes)/float64(peekBytes), want)
	if float64(pageBytes) > float64(relay.DefaultAmpNetFactor*peekBytes+relay.DefaultAmpNetInitial) {
		t.Errorf("the requester's network got %d B for %d B of peeks: over the network budget", pageBytes, peekBytes)
	}
	if perPage > want+1 || perPage < want-1 {
		t.Errorf("%.2f peeks a page, predicted %.2f", perPage, want)
	}
}
