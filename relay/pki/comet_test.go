package pki

import (
	"crypto/ed25519"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// newComet returns a test ship that is a comet: the first seed from seed
// on whose pass hashes to 2^64 or above.
func newComet(t testing.TB, seed byte) testShip {
	for ; ; seed++ {
		c := newTestShip(t, lane.Ship{}, seed)
		c.entry.Ship = CometShip(&c.entry.Pass)
		if c.entry.Ship.Class() == lane.Comet {
			return c
		}
	}
}

// attestation builds comet c's attestation page for rcvr as ames.hoon's
// +peek-pawn and +peek-publ make it, with pass and sndr as given, and
// +al-take-proof reads it: one leaf, signed over
// (root:lss tob.data^dat.data), BLAKE3 of the message.
func (c testShip) attestation(t testing.TB, pass Pass, sndr lane.Ship, sndrLife byte) []byte {
	t.Helper()
	rcvr := lane.ShipFromUint64(0)
	open := cellNoun(atomNoun(pass[:]), cellNoun(atomNoun(sndr.AppendLE(nil, 16)),
		cellNoun(atomNoun([]byte{sndrLife}), cellNoun(atomNoun(rcvr.AppendLE(nil, 16)), atomNoun([]byte{1})))))
	signed := jam(open)
	sig := ed25519.Sign(c.priv, signed) // sign:as:crub: (jam [(sigh msg) msg])
	inner := jam(cellNoun(atomNoun(sig), atomNoun(signed)))
	msg := jam(cellNoun(atomNoun([]byte("message")), cellNoun(atomNoun([]byte("proof")), atomNoun(inner))))
	// The page is made as arvo makes it (arvoPage: BLAKE3 and ed25519 from
	// outside this package), the comet's @p as lane renders it.
	return arvoPage(t, c.priv, c.entry.Ship.String(), scry.Name{Ship: c.entry.Ship, Path: []byte(cometProofPath + "~zod/1")}, msg)
}

// TestLearnComet: a comet's attestation teaches the verifier its key, and
// then its pages verify; an attestation that does not hold together
// teaches nothing.
func TestLearnComet(t *testing.T) {
	c := newComet(t, 1)
	other := newComet(t, c.entry.Pass[1]+1)
	if other.entry.Ship == c.entry.Ship {
		t.Fatal("two seeds made one comet")
	}
	v := NewVerifier(nil)
	page := c.signedPage("publ/1/g/x/0/hood//ping", []byte("hi"))
	if r := v.VerifyBytes(page); r != ReasonUnknownShip {
		t.Fatalf("before the attestation: %v", r)
	}
	bad := map[string][]byte{
		"another comet's pass": c.attestation(t, other.entry.Pass, c.entry.Ship, 1),
		"sndr not the comet":   c.attestation(t, c.entry.Pass, other.entry.Ship, 1),
		"sndr-life 2":          c.attestation(t, c.entry.Pass, c.entry.Ship, 2),
		"signed by another":    testShip{entry: c.entry, priv: other.priv}.attestation(t, c.entry.Pass, c.entry.Ship, 1),
		"not an attestation":   page,
		"a planet's page":      newTestShip(t, palnet, 1).signedPage(cometProofPath+"~zod/1", []byte{2}),
		"not mesa":             []byte("hello"),
	}
	for name, pkt := range bad {
		if _, ok := v.LearnComet(pkt); ok {
			t.Errorf("%s: learned", name)
		}
	}
	ship, ok := v.LearnComet(c.attestation(t, c.entry.Pass, c.entry.Ship, 1))
	if !ok || ship != c.entry.Ship {
		t.Fatalf("LearnComet = %s, %v; want %s", ship, ok, c.entry.Ship)
	}
	if r := v.VerifyBytes(page); r != ReasonVerified {
		t.Fatalf("after the attestation: %v", r)
	}
}

// TestSignedLearnsComet: the relay's one question, Signed, learns a comet
// from its attestation and says the attestation is signed.
func TestSignedLearnsComet(t *testing.T) {
	c := newComet(t, 9)
	v := NewVerifier(nil)
	if !v.Signed(c.attestation(t, c.entry.Pass, c.entry.Ship, 1), c.entry.Ship) {
		t.Fatal("a comet's attestation is not signed")
	}
	if !v.Signed(c.signedPage("publ/1/x", []byte("x")), c.entry.Ship) {
		t.Fatal("the comet's later page is not signed")
	}
}
