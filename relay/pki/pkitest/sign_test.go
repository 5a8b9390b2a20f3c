package pkitest

import (
	"crypto/ed25519"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// (relay/pki's TestPageAsArvoSignsIt checks NewSignedPage's bytes against a
// page made as arvo makes it, and its other tests that pki verifies them.)

// TestNewSignedPageTooLong: a first page that cannot be a datagram is an
// error, not a packet vere would drop.
func TestNewSignedPageTooLong(t *testing.T) {
	palnet := lane.ShipFromUint64(0x0101_0203) // a planet
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	name := scry.Name{Ship: palnet, Path: make([]byte, scry.MesaMaxPacket-100)}
	if _, err := NewSignedPage(priv, name, make([]byte, 200)); err != ErrPageTooLong {
		t.Fatalf("long page: %v", err)
	}
	if _, err := NewSignedPage(priv, scry.Name{Ship: palnet, Path: []byte("publ/1/x")}, make([]byte, 1<<20)); err != nil {
		t.Fatalf("1 MiB message (a 21-hash proof): %v", err)
	}
}
