package relay_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// countingVerifier holds a key for every ship, answers ok for every page
// and counts the checks.
type countingVerifier struct {
	ok    bool
	calls int
}

func (v *countingVerifier) Knows(lane.Ship) bool { return true }

func (v *countingVerifier) Signed(pkt []byte, publisher lane.Ship) bool {
	v.calls++
	return v.ok
}

// initName is sponsee's name at path for a message's first page.
func initName(path string) scry.Name {
	return scry.Name{Ship: sponsee, Bloq: scry.DefaultBloq, Init: true, Path: []byte(path)}
}

// initPeek asks for initName(path).
func initPeek(path string) []byte {
	p := scry.NewPeek(initName(path))
	return p.Append(nil)
}

// signedPage is sponsee's first page at path, hop 0, carrying a (dummy)
// signature: the only page a verifier is asked about.
func signedPage(path string) []byte {
	p := scry.NewPage(initName(path),
		scry.Data{Total: 5, AuthKind: scry.AuthSign, Auth: make([]byte, 64), Frag: []byte("value")})
	return p.Append(nil)
}

// TestSignedPageProvesANewLane checks the --pki hook in the decision. The
// sponsee is heard at one lane and a second lane claims its challenger
// slot; a requester's peek goes to both, and the second lane answers with a
// signed first page. Verified, it is credited as any answer is (an
// answered challenger, sent the next peek beside the heard lane) and no
// more (a signature does not displace a working lane: a signed page can be
// replayed); with the publisher's key at hand but no signature that
// verifies, it credits nothing (the next peek goes to the heard lane
// alone); with no verifier, an unsigned answer is credited as before. Only
// a page that could prove a lane is checked: never one from the direct
// lane, an unsigned one, or a relayed one (a check costs some 70 µs).
func TestSignedPageProvesANewLane(t *testing.T) {
	heard := netip.MustParseAddrPort("203.0.113.20:6000")
	moved := netip.MustParseAddrPort("203.0.113.21:6001")
	for _, c := range []struct {
		name     string
		v        *countingVerifier // nil: no --pki
		credited bool
	}{
		{"verified", &countingVerifier{ok: true}, true},
		{"unverified", &countingVerifier{ok: false}, false},
		{"no verifier", nil, true},
	} {
		f := newFixture(t, func(cfg *relay.Config) {
			cfg.ShipLane = shipLane
			if c.v != nil {
				cfg.PKI = c.v
			}
		})
		f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "ping"), heard) // Heard at heard
		f.now += time.Second
		f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "ping"), moved) // a claim on the challenger slot
		f.now += time.Millisecond
		sends := f.handle(initPeek("/x/1"), alice)
		if sentTo(sends, heard) != 1 || sentTo(sends, moved) != 1 {
			t.Fatalf("%s: the peek went to %v; want the heard lane and the challenger", c.name, sendsTo(sends))
		}
		f.now += time.Millisecond
		page := signedPage("/x/1")
		if c.v == nil { // the same first page, unsigned
			p := scry.NewPage(initName("/x/1"), scry.Data{Total: 5, AuthKind: scry.AuthNone, Frag: []byte("value")})
			page = p.Append(nil)
		}
		if got := sentTo(f.handle(page, moved), alice); got != 1 {
			t.Fatalf("%s: the page reached alice %d times, want 1", c.name, got)
		}
		if c.v != nil && c.v.calls != 1 {
			t.Fatalf("%s: verifier asked %d times about a signed page from a new lane, want 1", c.name, c.v.calls)
		}
		f.now += time.Millisecond
		sends = f.handle(initPeek("/x/2"), alice)
		if sentTo(sends, heard) != 1 || sentTo(sends, moved) != map[bool]int{true: 1, false: 0}[c.credited] {
			t.Errorf("%s: the next peek went to %v; want the heard lane, and the challenger only if credited (%v)",
				c.name, sendsTo(sends), c.credited)
		}
		if c.v == nil {
			continue
		}
		// Nothing else is checked: a page from the direct lane, an
		// unsigned page, a relayed one.
		calls := c.v.calls
		f.now += time.Millisecond
		f.handle(signedPage("/x/2"), heard)
		f.handle(peekOf(sponsee, "/x/3"), alice)
		f.handle(pageOf(t, sponsee, "/x/3"), moved)
		relayed := signedPage("/x/4")
		f.handle(initPeek("/x/4"), alice)
		scry.SetHops(relayed, 1)
		f.handle(relayed, moved)
		if c.v.calls != calls {
			t.Errorf("%s: verifier asked %d more times, want none (direct lane, unsigned, relayed)", c.name, c.v.calls-calls)
		}
	}
}
