package pki

import (
	"crypto/ed25519"
	"crypto/sha256"

	"github.com/urbit-relay/relay/lane"
)

// PassLen is the size of a networking public key as Azimuth and Jael hold
// it (Hoon's $pass from +pub:ex:crub): a tag byte and two 32-byte keys.
const PassLen = 1 + 2*ed25519.PublicKeySize

// passTag is the pass's first byte, 'b' (a private $ring starts 'B').
const passTag = 'b'

// Pass is a networking public key in the byte order of Hoon's atom
// (little-endian): byte 0 the tag 'b', bytes 1-32 the ed25519 signing
// public key, bytes 33-64 the curve25519 encryption key. zuse.hoon's
// +pub:ex:crub is (cat 3 'b' (cat 8 sgn cry)); +com:nu:crub reads sgn back
// as (end 8 (rsh 3 pass)), and mesa's +derive-symmetric-key uses the high
// half, (rsh 8 (rsh 3 pass)), for ECDH.
type Pass [PassLen]byte

// SignKey returns the signing half, the ed25519 public key a ship's pages
// are checked against. It aliases p.
func (p *Pass) SignKey() ed25519.PublicKey { return p[1 : 1+ed25519.PublicKeySize] }

// atomBytes trims b's trailing zero bytes: the bytes Hoon's (met 3 a)
// counts of the atom whose little-endian bytes are b.
func atomBytes(b []byte) []byte {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return b[:n]
}

// shax is Hoon's +shax: SHA-256 of an atom's (met 3) bytes, the digest read
// back as an atom with digest byte 0 lowest.
func shax(b []byte) [sha256.Size]byte { return sha256.Sum256(atomBytes(b)) }

// CometShip returns the comet a pass belongs to: Hoon's +fig:ex:crub,
// (shaf %bfig pass), where +shaf XORs the two halves of +shas and
// (shas sal ruz) is (shax (mix sal (shax ruz))). sift-open-packet in
// ames.hoon accepts a comet's attestation only if its @p is this value, so
// a comet's key certifies its name and needs no Azimuth entry.
func CometShip(p *Pass) lane.Ship {
	h := shax(p[:])
	for i, c := range []byte("bfig") { // the cord %bfig, low byte first
		h[i] ^= c
	}
	haz := shax(h[:])
	var s [lane.MaxShipBytes]byte
	for i := range s {
		s[i] = haz[i] ^ haz[i+lane.MaxShipBytes]
	}
	return lane.ShipFromBytesLE(s[:])
}
