package relay

import (
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/pki"
	"github.com/urbit-relay/relay/relay/pki/pkitest"
	"github.com/urbit-relay/relay/scry"
)

// TestPageSigned: with no verifier nothing is signed; with one, a page
// signed by its publisher is, a page checked as another ship's or
// tampered with is not.
func TestPageSigned(t *testing.T) {
	pub := lane.ShipFromUint64(0x0101_0203)
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	p, err := pkitest.NewSignedPage(priv, scry.Name{Ship: pub, Path: []byte("publ/1/g/x/0/hood//ping")}, []byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	pkt := p.Append(nil)
	line := fmt.Sprintf("%s 1 0 62%x%x\n", pub, priv.Public().(ed25519.PublicKey), make([]byte, 32))
	snap, err := pki.ParseSnapshot([]byte(line), 0)
	if err != nil {
		t.Fatal(err)
	}

	r, err := New(Config{Ship: lane.ShipFromUint64(256)})
	if err != nil {
		t.Fatal(err)
	}
	if r.pageSigned(pkt, pub) {
		t.Fatal("signed with no verifier configured")
	}
	var none *pki.Verifier
	if r, _ = New(Config{Ship: lane.ShipFromUint64(256), PKI: none}); r.pageSigned(pkt, pub) {
		t.Fatal("signed by a nil *pki.Verifier")
	}
	v := pki.NewVerifier(snap)
	r, err = New(Config{Ship: lane.ShipFromUint64(256), PKI: v})
	if err != nil {
		t.Fatal(err)
	}
	if !r.pageSigned(pkt, pub) {
		t.Fatal("the publisher's signed page is not signed")
	}
	if r.pageSigned(pkt, lane.ShipFromUint64(0x0202_0304)) {
		t.Fatal("signed as another ship's page")
	}
	bad := append([]byte(nil), pkt...)
	bad[len(bad)-1] ^= 1
	scry.FixMug(bad)
	if r.pageSigned(bad, pub) {
		t.Fatal("a tampered page is signed")
	}
	if got := v.Counts(); got[pki.ReasonVerified] != 1 || got[pki.ReasonBadSignature] != 1 {
		t.Fatalf("verifier counts %v", got)
	}
}
