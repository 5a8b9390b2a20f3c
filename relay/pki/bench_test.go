package pki

import (
	"testing"

	"github.com/urbit-relay/relay/scry"
)

// BenchmarkVerify is the cost of one check on a page already parsed: the
// signed message, the root (one leaf, or a proof's fold) and ed25519.
func BenchmarkVerify(b *testing.B) {
	alice := newTestShip(b, palnet, 1)
	v := NewVerifier(snapshotOf(b, alice))
	for _, c := range []struct {
		name string
		size int
	}{{"leaf-1KiB", 1000}, {"proof-1MiB", 1 << 20}} {
		var p scry.Packet
		if err := p.Parse(alice.signedPage("publ/1/g/x/0/hood//ping", make([]byte, c.size))); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if v.Verify(&p) != ReasonVerified {
					b.Fatal("not verified")
				}
			}
		})
	}
}
