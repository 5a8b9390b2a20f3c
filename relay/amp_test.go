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
	n := int(dur.Seconds() * float64(rate))
	step := time.Second / time.Duration(rate)
	for i := 0; i < n; i++ {
		path := fmt.Sprintf("%x", i) // short names: the cheapest peeks
		req := peek(t, "~nec", path, 0)
		sent += len(req)
		f.handle(req, victim)
		for _, s := range f.handle(bigPage(t, path), necLane) {
			if s.To == victim {
				got += len(s.Buf)
			}
		}
		f.now += step
	}
	return sent, got
}

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
		bound := float64(relay.DefaultAmpFactor*sent+relay.DefaultAmpInitial+relay.DefaultAmpRate*int(dur/time.Second)) / float64(sent)
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

func TestHonestRequesterIsNotThrottled(t *testing.T) {
	f := newFixture(t, nil)
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
