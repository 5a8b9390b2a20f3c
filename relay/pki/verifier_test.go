package pki

import (
	"crypto/ed25519"
	"fmt"
	"sync"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

var (
	palnet = lane.ShipFromUint64(0x0101_0203) // a planet
	marzod = lane.ShipFromUint64(0x0100)      // a star
)

// TestSignedMessage pins the bytes signed for a page, as ames.hoon's
// +etch-binding writes them.
func TestSignedMessage(t *testing.T) {
	var root hash
	for i := range root {
		root[i] = byte(i)
	}
	got := appendSigned(nil, lane.ShipFromUint64(0), []byte("publ/1/g/x/0/hood//ping"), &root)
	want := append([]byte("/~zod//1/publ/1/g/x/0/hood//ping"), root[:]...)
	if string(got) != string(want) {
		t.Fatalf("signed %q\nwant   %q", got, want)
	}
	if got := appendSigned(nil, lane.ShipFromUint64(0), nil, &root); string(got) != "/~zod//1"+string(root[:]) {
		t.Fatalf("empty path: %q", got)
	}
}

func TestVerify(t *testing.T) {
	alice := newTestShip(t, palnet, 1)
	alice.entry.Rift = 3
	bob := newTestShip(t, marzod, 50)
	eve := newTestShip(t, palnet, 99) // alice's @p and rift, eve's key
	eve.entry.Rift = 3
	v := NewVerifier(snapshotOf(t, alice, bob))

	long := make([]byte, 5*chunkLen+7)
	for i := range long {
		long[i] = byte(i * 7)
	}
	mutate := func(b []byte, f func(*scry.Packet)) []byte {
		var p scry.Packet
		if err := p.Parse(append([]byte(nil), b...)); err != nil { // Parse aliases b
			t.Fatal(err)
		}
		f(&p)
		return p.Append(nil)
	}
	good := alice.signedPage("publ/1/g/x/0/hood//ping", []byte("hello"))
	cases := []struct {
		name string
		pkt  []byte
		want Reason
	}{
		{"one-leaf message", good, ReasonVerified},
		{"proof of a 6-leaf message", alice.signedPage("publ/1/c/x/1/kids/sys/kelvin", long), ReasonVerified},
		{"a star's", bob.signedPage("shut/2/0v1a2b", []byte{0}), ReasonVerified},
		{"another key", eve.signedPage("publ/1/g/x/0/hood//ping", []byte("hello")), ReasonBadSignature},
		{"signature flipped", mutate(good, func(p *scry.Packet) { p.Data.Auth[5] ^= 1 }), ReasonBadSignature},
		{"data changed", mutate(good, func(p *scry.Packet) { p.Data.Frag[0] ^= 1 }), ReasonBadSignature},
		{"path changed", mutate(good, func(p *scry.Packet) { p.Name.Path = []byte("publ/1/g/x/0/hood//pong") }), ReasonBadSignature},
		{"proof changed", mutate(alice.signedPage("publ/1/x", long), func(p *scry.Packet) { p.Data.Frag[40] ^= 1 }), ReasonBadSignature},
		{"unknown ship", newTestShip(t, lane.ShipFromUint64(0x0202_0304), 7).signedPage("publ/1/x", []byte("x")), ReasonUnknownShip},
		{"old rift", mutate(good, func(p *scry.Packet) { p.Name.Rift = 2 }), ReasonStaleKey},
		{"later life", alice.signedPage("publ/2/x", []byte("x")), ReasonStaleKey},
		{"life 0", alice.signedPage("publ/0/x", []byte("x")), ReasonMalformed},
		{"life not @ud", alice.signedPage("publ/1000/x", []byte("x")), ReasonMalformed},
		{"hmac", mutate(good, func(p *scry.Packet) { p.Data.AuthKind = scry.AuthHMAC; p.Data.Auth = p.Data.Auth[:16] }), ReasonNotSigned},
		{"no auth", mutate(good, func(p *scry.Packet) { p.Data.AuthKind = scry.AuthNone; p.Data.Auth = nil }), ReasonNotSigned},
		{"not first", mutate(good, func(p *scry.Packet) { p.Name.Init = false; p.Name.Frag = 0 }), ReasonNotFirst},
		{"proof too short", mutate(alice.signedPage("publ/1/x", long), func(p *scry.Packet) { p.Data.Frag = p.Data.Frag[:HashLen*3] }), ReasonMalformed},
		{"one leaf, total short", mutate(good, func(p *scry.Packet) { p.Data.Total = 4 }), ReasonMalformed},
		{"one leaf, total long", mutate(good, func(p *scry.Packet) { p.Data.Total = 6 }), ReasonBadSignature},
		{"one leaf, zeros trimmed", alice.trimmedPage("publ/1/x", []byte("ab\x00\x00")), ReasonVerified},
		{"empty message", mutate(good, func(p *scry.Packet) { p.Data.Total = 0; p.Data.Frag = nil }), ReasonMalformed},
		{"bloq 12", mutate(good, func(p *scry.Packet) { p.Name.Bloq = 12 }), ReasonMalformed},
		{"a peek", func() []byte { p := scry.NewPeek(scry.Name{Ship: palnet, Bloq: 13, Init: true}); return p.Append(nil) }(), ReasonMalformed},
		{"not mesa", []byte("hello, world"), ReasonMalformed},
	}
	var want [NumReasons]uint64
	for _, c := range cases {
		if got := v.VerifyBytes(c.pkt); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		want[c.want]++
	}
	if got := v.Counts(); got != want {
		t.Errorf("counts %v, want %v", got, want)
	}
}

// TestLifeInPath: a %publ page is checked against the life its path names,
// in +scot's @ud form.
func TestLifeInPath(t *testing.T) {
	alice := newTestShip(t, palnet, 1)
	alice.entry.Life = 1234
	v := NewVerifier(snapshotOf(t, alice))
	if r := v.VerifyBytes(alice.signedPage("publ/1.234/g/x", []byte("x"))); r != ReasonVerified {
		t.Fatalf("life 1.234: %v", r)
	}
	if r := v.VerifyBytes(alice.signedPage("publ/1.233/g/x", []byte("x"))); r != ReasonStaleKey {
		t.Fatalf("life 1.233: %v", r)
	}
}

func TestParseUD(t *testing.T) {
	good := map[string]uint32{"0": 0, "1": 1, "999": 999, "1.000": 1000, "12.345.678": 12345678, "4.294.967.295": 1<<32 - 1}
	for s, want := range good {
		if got, ok := parseUD([]byte(s)); !ok || got != want {
			t.Errorf("parseUD(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "1000", "01", "1.00", "1.0000", ".100", "1.", "1..000", "1,000", "4.294.967.296", "1234.567", "-1"} {
		if got, ok := parseUD([]byte(s)); ok {
			t.Errorf("parseUD(%q) = %d, want an error", s, got)
		}
	}
}

// TestSigned is the relay's question: a first page of the named publisher,
// signed by it.
func TestSigned(t *testing.T) {
	alice := newTestShip(t, palnet, 1)
	v := NewVerifier(snapshotOf(t, alice))
	pkt := alice.signedPage("publ/1/x", []byte("x"))
	if !v.Signed(pkt, palnet) {
		t.Fatal("alice's own page not signed")
	}
	if v.Signed(pkt, marzod) {
		t.Fatal("alice's page counts as marzod's")
	}
	var nilV *Verifier
	if nilV.Signed(pkt, palnet) {
		t.Fatal("a nil verifier verified")
	}
}

// TestReload: Store swaps the snapshot while Verify runs on other
// goroutines (go test -race checks the swap); each Verify sees one
// snapshot or the other, never a mix.
func TestReload(t *testing.T) {
	alice := newTestShip(t, palnet, 1)
	rekeyed := newTestShip(t, palnet, 2)
	rekeyed.entry.Life = 2
	old, new := snapshotOf(t, alice), snapshotOf(t, rekeyed)
	v := NewVerifier(old)
	p1 := alice.signedPage("publ/1/x", []byte("x"))
	p2 := rekeyed.signedPage("publ/2/x", []byte("x"))
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				r1, r2 := v.VerifyBytes(p1), v.VerifyBytes(p2)
				if r1 != ReasonVerified && r1 != ReasonStaleKey || r2 != ReasonVerified && r2 != ReasonStaleKey {
					t.Errorf("verdicts %v, %v", r1, r2)
					return
				}
			}
		}()
	}
	for i := 0; i < 200; i++ {
		v.Store(new)
		v.Store(old)
	}
	v.Store(new)
	wg.Wait()
	if r := v.VerifyBytes(p2); r != ReasonVerified {
		t.Fatalf("after reload, life 2 page: %v", r)
	}
	if r := v.VerifyBytes(p1); r != ReasonStaleKey {
		t.Fatalf("after reload, life 1 page: %v", r)
	}
	v.Store(nil)
	if v.Len() != 0 || v.VerifyBytes(p2) != ReasonUnknownShip {
		t.Fatal("Store(nil) did not empty the verifier")
	}
}

// TestAddComet: a comet learned from its key verifies its pages without a
// snapshot line; the table is capped and refuses, not evicts, when full.
func TestAddComet(t *testing.T) {
	v := NewVerifier(nil)
	v.maxComets = 2
	var comets []testShip
	for seed := byte(1); len(comets) < 3; seed++ {
		c := newTestShip(t, lane.Ship{}, seed)
		c.entry.Ship = CometShip(&c.entry.Pass)
		if c.entry.Ship.Class() != lane.Comet {
			continue
		}
		comets = append(comets, c)
	}
	for i, c := range comets[:2] {
		if ship, ok := v.AddComet(&c.entry.Pass); !ok || ship != c.entry.Ship {
			t.Fatalf("comet %d: AddComet = %s, %v", i, ship, ok)
		}
		if r := v.VerifyBytes(c.signedPage("publ/1/x", []byte("x"))); r != ReasonVerified {
			t.Fatalf("comet %d's page: %v", i, r)
		}
	}
	if _, ok := v.AddComet(&comets[2].entry.Pass); ok {
		t.Fatal("a third comet fit in a table of two")
	}
	if _, ok := v.AddComet(&comets[0].entry.Pass); !ok {
		t.Fatal("re-adding a known comet was refused")
	}
	if r := v.VerifyBytes(comets[2].signedPage("publ/1/x", []byte("x"))); r != ReasonUnknownShip {
		t.Fatalf("refused comet's page: %v", r)
	}
	bad := comets[0].entry.Pass
	bad[0] = 'B' // a private key's tag
	if _, ok := v.AddComet(&bad); ok {
		t.Fatal("a pass without the 'b' tag was taken")
	}
}

// TestVerifyAllocs: a verification allocates nothing beyond what ed25519
// itself does.
func TestVerifyAllocs(t *testing.T) {
	alice := newTestShip(t, palnet, 1)
	v := NewVerifier(snapshotOf(t, alice))
	var p scry.Packet
	if err := p.Parse(alice.signedPage("publ/1/x", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, ed25519.SignatureSize)
	base := testing.AllocsPerRun(50, func() { ed25519.Verify(alice.entry.Pass.SignKey(), []byte("x"), sig) })
	if n := testing.AllocsPerRun(50, func() { v.Verify(&p) }); n > base {
		t.Fatalf("Verify allocates %v times, ed25519.Verify %v", n, base)
	}
}

func ExampleVerifier_VerifyBytes() {
	v := NewVerifier(nil)
	fmt.Println(v.VerifyBytes([]byte("not a mesa packet")))
	// Output: malformed
}
