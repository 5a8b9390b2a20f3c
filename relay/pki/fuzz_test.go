package pki

import (
	"bytes"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// FuzzParseSnapshot: any input parses or fails with ErrSnapshot, never
// panics; what parses prints back (AppendLine) to a file that parses to the
// same keys.
func FuzzParseSnapshot(f *testing.F) {
	alice := newTestShip(f, palnet, 1)
	f.Add(alice.entry.AppendLine([]byte("# c\n\n")))
	f.Add([]byte("~zod 1 0 62\n"))
	f.Add([]byte("~marzod 4.294.967.295 0 zz\n~marzod"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSnapshot(data, 64)
		if err != nil {
			return
		}
		var out []byte
		for ship, k := range s.keys {
			e := Entry{Ship: ship, Life: k.life, Rift: k.rift}
			e.Pass[0] = passTag
			copy(e.Pass[1:], k.sign[:])
			if ship.Class() == lane.Comet {
				continue // its encryption key is not kept, so its pass cannot be rebuilt
			}
			out = e.AppendLine(out)
		}
		s2, err := ParseSnapshot(out, 64)
		if err != nil {
			t.Fatalf("reprinted snapshot: %v\n%s", err, out)
		}
		for ship, k := range s2.keys {
			if s.keys[ship] != k {
				t.Fatalf("%s: %+v became %+v", ship, s.keys[ship], k)
			}
		}
	})
}

// FuzzVerifyBytes: the page's signed fields, and a comet attestation's
// nouns, are read with every length checked: any datagram gets a verdict,
// never a panic; one that verifies parses as a page of a ship with a key.
func FuzzVerifyBytes(f *testing.F) {
	alice := newTestShip(f, palnet, 1)
	v := NewVerifier(snapshotOf(f, alice))
	long := bytes.Repeat([]byte("lss"), 1500)
	seeds := [][]byte{
		alice.signedPage("publ/1/g/x/0/hood//ping", []byte("hello")),
		alice.signedPage("publ/1/c/x/1/kids/sys/kelvin", long),
		alice.signedPage("shut/2/0v1a2b", []byte{0}),
	}
	c := newComet(f, 1)
	seeds = append(seeds, c.attestation(f, c.entry.Pass, c.entry.Ship, 1))
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if ship, ok := v.LearnComet(b); ok && ship.Class() != lane.Comet {
			t.Fatalf("learned %s, not a comet", ship)
		}
		r := v.VerifyBytes(b)
		if r >= NumReasons {
			t.Fatalf("verdict %d", r)
		}
		var p scry.Packet
		if r == ReasonVerified {
			if p.Parse(b) != nil {
				t.Fatal("verified a datagram that does not parse")
			}
			if _, known := v.keyOf(p.Name.Ship); !known {
				t.Fatalf("verified a page of %s, whose key it does not hold", p.Name.Ship)
			}
		}
	})
}
