package pki

import (
	"crypto/ed25519"
	"testing"

	"lukechampine.com/blake3"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/pki/pkitest"
	"github.com/urbit-relay/relay/scry"
)

// testShip is a ship with a key the test generated.
type testShip struct {
	entry Entry
	priv  ed25519.PrivateKey
}

// newTestShip makes a key for ship from seed (deterministic), at life 1.
func newTestShip(t testing.TB, ship lane.Ship, seed byte) testShip {
	t.Helper()
	var s [ed25519.SeedSize]byte
	for i := range s {
		s[i] = seed + byte(i)
	}
	priv := ed25519.NewKeyFromSeed(s[:])
	ts := testShip{entry: Entry{Ship: ship, Life: 1}, priv: priv}
	ts.entry.Pass[0] = passTag
	copy(ts.entry.Pass[1:], priv.Public().(ed25519.PublicKey))
	for i := 33; i < PassLen; i++ {
		ts.entry.Pass[i] = seed ^ byte(i) // an encryption key the tests never use
	}
	return ts
}

// snapshotOf parses the lines of ships.
func snapshotOf(t testing.TB, ships ...testShip) *Snapshot {
	t.Helper()
	var b []byte
	for _, s := range ships {
		b = s.entry.AppendLine(b)
	}
	snap, err := ParseSnapshot(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// signedPage builds the first page of msg published by s at path, signed
// as mesa signs it, and returns the datagram.
func (s testShip) signedPage(path string, msg []byte) []byte {
	name := scry.Name{Ship: s.entry.Ship, Rift: s.entry.Rift, Path: []byte(path)}
	p, err := pkitest.NewSignedPage(s.priv, name, msg)
	if err != nil {
		panic(err)
	}
	return p.Append(nil)
}

// trimmedPage is signedPage with the fragment's trailing zero bytes left
// off the wire, as a Hoon atom's (met 3) drops them; Total still counts
// them.
func (s testShip) trimmedPage(path string, msg []byte) []byte {
	name := scry.Name{Ship: s.entry.Ship, Rift: s.entry.Rift, Path: []byte(path)}
	p, err := pkitest.NewSignedPage(s.priv, name, msg)
	if err != nil {
		panic(err)
	}
	p.Data.Frag = atomBytes(p.Data.Frag)
	return p.Append(nil)
}

// arvoPage builds the first page of msg at name as ames.hoon's +peek-publ
// and +peek-mess make it, independently of this package's hashing and
// signing: the signed bytes are "/" patp "//1/" path then BLAKE3(msg)
// (lukechampine.com/blake3), signed with crypto/ed25519; a one-leaf
// message goes whole on the page, a longer one's proof (pkitest.Proof,
// every hash by lukechampine.com/blake3/guts) instead. patp is the ship as
// Urbit writes it, given literally.
func arvoPage(t testing.TB, priv ed25519.PrivateKey, patp string, name scry.Name, msg []byte) []byte {
	t.Helper()
	root := blake3.Sum256(msg)
	signed := append([]byte("/"+patp+"//1/"+string(name.Path)), root[:]...)
	data := scry.Data{Total: uint64(len(msg)), AuthKind: scry.AuthSign, Auth: ed25519.Sign(priv, signed), Frag: msg}
	if len(msg) > chunkLen {
		data.Frag = pkitest.Proof(msg)
	}
	name.Init, name.Bloq = true, scry.DefaultBloq
	p := scry.NewPage(name, data)
	return p.Append(nil)
}
