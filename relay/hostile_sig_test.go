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

// markVerifier holds a key for every ship and verifies a page whose
// signature starts with honestMark: the honest publisher's pages carry
// it, the attacker's well-formed signatures do not. It counts the checks.
type markVerifier struct{ calls int }

const honestMark = 0xa5

func (v *markVerifier) Knows(lane.Ship) bool { return true }

func (v *markVerifier) Signed(pkt []byte, publisher lane.Ship) bool {
	v.calls++
	var p scry.Packet
	return p.Parse(pkt) == nil && len(p.Data.Auth) > 0 && p.Data.Auth[0] == honestMark
}

// signedFirstPage is s's first page at path, hop 0, with a signature that
// markVerifier verifies when honest.
func signedFirstPage(s lane.Ship, path string, honest bool) []byte {
	sig := make([]byte, 64)
	if honest {
		sig[0] = honestMark
	}
	p := scry.NewPage(scry.Name{Ship: s, Bloq: scry.DefaultBloq, Init: true, Path: []byte(path)},
		scry.Data{Total: 5, AuthKind: scry.AuthSign, Auth: sig, Frag: []byte("value")})
	return p.Append(nil)
}

func firstPeek(s lane.Ship, path string) []byte {
	p := scry.NewPeek(scry.Name{Ship: s, Bloq: scry.DefaultBloq, Init: true, Path: []byte(path)})
	return p.Append(nil)
}

// Issue 28's signature-CPU row: one poke naming a star the relay never
// heard of made the attacker's lane that star's lane; from it, unsolicited
// first pages for a --pki ship with well-formed signatures cost 78k-111k
// ed25519 checks in 4 s, 69-97 % of a core. The attacker here: that poke,
// then for 4 s at 10,000 datagrams a second, unsolicited signed first
// pages of the star's planet, and peeks for the planet (forwarded to the
// star's lane, the attacker's) each answered with a signed page. Now a
// signature is checked only for a solicited page from a lane a request
// went to as the publisher's own (never a sponsor's: a hop-0 page from it
// is never honest), within SigChecksPerLane and SigChecksPerSecond.
func TestSignatureChecksAreBounded(t *testing.T) {
	v := &markVerifier{}
	f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane; c.PKI = v })
	star := lane.Ship{Lo: 0x0101}        // under ~nec, never heard of
	planet := lane.Ship{Lo: 0x0007_0101} // its planet, in the snapshot
	f.handle(pokeFrom(star, ship(t, "~nec"), "hi"), attacker)
	if info, ok := f.r.Routes().Info(star); !ok || info.Direct.AddrPort() != attacker {
		t.Fatalf("the poke did not make the attacker's lane the star's (%+v): the row's premise", info)
	}
	start := f.now
	const rate = 10_000
	sent := 0
	for i := 0; f.now-start < 4*time.Second; i++ {
		path := fmt.Sprintf("/x/%d", i)
		if i%2 == 0 {
			f.handle(signedFirstPage(planet, path, false), attacker)
			sent++
		} else {
			f.handle(firstPeek(planet, path), alice)
			f.handle(signedFirstPage(planet, path, false), attacker)
			sent += 2
		}
		f.now += time.Second / rate
	}
	s := f.snap()
	t.Logf("%d attacker datagrams in 4 s: %d signature checks (%d refused by the budget)",
		sent, v.calls, s.Events[relay.EventSignatureChecksRefused])
	if v.calls != 0 {
		t.Errorf("%d signature checks for pages from a sponsor's lane or unsolicited, want 0", v.calls)
	}
	if got := s.Events[relay.EventSignatureChecks]; got != uint64(v.calls) {
		t.Errorf("signature_checks %d, verifier asked %d times", got, v.calls)
	}
	if info, ok := f.r.Routes().Info(planet); ok && info.Direct.IsValid() {
		t.Errorf("the planet's direct lane is %v: learned from the attacker's replayed pages", info.Direct.AddrPort())
	}
}

// TestSignatureChecksPerLane: an attacker on the publisher's own route
// (its challenger, answering every probe with a signed page) gets at most
// SigLaneBurst + SigChecksPerLane a second checked, however fast it
// answers; beside it, the honest twin: the publisher, moved to a new lane,
// has its real signed page checked and credited.
func TestSignatureChecksPerLane(t *testing.T) {
	v := &markVerifier{}
	f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane; c.PKI = v })
	f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "ping"), sponseeLn)
	f.now += time.Millisecond
	f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "evil"), attacker) // the challenger slot
	start := f.now
	const rate = 1000
	for i := 0; f.now-start < 4*time.Second; i++ {
		path := fmt.Sprintf("/a/%d", i)
		f.handle(firstPeek(sponsee, path), alice)
		f.handle(signedFirstPage(sponsee, path, false), attacker)
		f.handle(signedFirstPage(sponsee, path, true), sponseeLn)
		f.now += time.Second / rate
	}
	max := relay.SigLaneBurst + 4*relay.SigChecksPerLane
	t.Logf("an answering challenger, %d pages/s for 4 s: %d checks (%d refused)",
		rate, v.calls, f.snap().Events[relay.EventSignatureChecksRefused])
	if v.calls > max || v.calls == 0 {
		t.Errorf("%d checks for the attacker's lane in 4 s, want 1..%d", v.calls, max)
	}
	// The twin: the ship moves; its new lane claims the challenger slot
	// once the attacker's lapses, and its real signed page is checked
	// and credited while the attacker's lane is still refused.
	moved := netip.MustParseAddrPort("203.0.113.21:6001")
	f.now += time.Minute
	f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "ping2"), moved)
	f.now += time.Millisecond
	sends := f.handle(firstPeek(sponsee, "/moved"), alice)
	if sentTo(sends, moved) != 1 {
		t.Fatalf("the peek went to %v, want the moved lane among them", sendsTo(sends))
	}
	calls := v.calls
	f.handle(signedFirstPage(sponsee, "/moved", true), moved)
	if v.calls != calls+1 {
		t.Fatalf("the moved ship's signed page: %d checks, want 1", v.calls-calls)
	}
	f.now += time.Millisecond
	if sends := f.handle(firstPeek(sponsee, "/after"), alice); sentTo(sends, moved) != 1 {
		t.Errorf("after its verified page the moved lane is not sent the next peek: %v", sendsTo(sends))
	}
}
