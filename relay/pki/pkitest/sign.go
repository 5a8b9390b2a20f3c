// Package pkitest signs pages as a publishing ship signs them, for tests
// and simulations: ships sign their own pages, and the relay only checks
// them (relay/pki). Only tests import it (relay/route's TestInternalSplit
// checks that no other package does).
//
// It shares no code with relay/pki: every hash is lukechampine.com/blake3's
// (the tree's inner nodes by its guts package), so pki's tests check the
// verifier's own BLAKE3 against pages made apart from it, and pki's tests
// may import this package.
package pkitest

import (
	"crypto/ed25519"
	"errors"

	"lukechampine.com/blake3"
	"lukechampine.com/blake3/guts"

	"github.com/urbit-relay/relay/scry"
)

// ErrPageTooLong is NewSignedPage's error for a message whose first page
// would not fit a datagram.
var ErrPageTooLong = errors.New("pkitest: signed page longer than a mesa datagram")

// NewSignedPage returns the first page of message msg published at name,
// signed with priv as ames.hoon's +peek-publ signs it (the publisher's
// side of pki's Verify): for a message of one leaf (at most 1024 bytes) the
// page holds msg, else the Merkle proof (Proof). The signed bytes are
// "/" @p "//1/" path, then the root, BLAKE3(msg) (zuse's +root:lss); see
// relay/pki's package comment. name must be an init name of bloq 13 (Init
// and Bloq are set here). The packet aliases name.Path and msg.
func NewSignedPage(priv ed25519.PrivateKey, name scry.Name, msg []byte) (scry.Packet, error) {
	name.Init, name.Bloq, name.Frag = true, scry.DefaultBloq, 0
	data := scry.Data{Total: uint64(len(msg)), AuthKind: scry.AuthSign, Frag: msg}
	if len(msg) > guts.ChunkSize {
		data.Frag = Proof(msg)
	}
	if len(name.Path) > scry.MesaMaxPacket {
		return scry.Packet{}, ErrPageTooLong
	}
	signed := name.Ship.AppendPatp([]byte("/"))
	signed = append(signed, "//1"...)
	if len(name.Path) > 0 {
		signed = append(append(signed, '/'), name.Path...)
	}
	root := blake3.Sum256(msg)
	data.Auth = ed25519.Sign(priv, append(signed, root[:]...))
	p := scry.NewPage(name, data)
	if p.Size() > scry.MesaMaxPacket {
		return scry.Packet{}, ErrPageTooLong
	}
	return p, nil
}

// Proof is the proof zuse's +build:lss makes for msg (two or more leaves of
// 1024 bytes): leaf 0, then the subtrees [2^(i-1), 2^i) cut at the end,
// each a chaining value (no ROOT flag) computed by guts. relay/pki's
// TestUrbitLssVectors pins the shape to tests/lib/lss.hoon, and its
// TestMesaRootIsBlake3 the fold's result to BLAKE3(msg).
func Proof(msg []byte) []byte {
	leaves := uint64((len(msg) + guts.ChunkSize - 1) / guts.ChunkSize)
	proof := appendCV(nil, subtree(msg[:guts.ChunkSize], 0))
	for lo := uint64(1); lo < leaves; lo *= 2 {
		hi := min(2*lo, leaves)
		proof = appendCV(proof, subtree(msg[lo*guts.ChunkSize:min(uint64(len(msg)), hi*guts.ChunkSize)], lo))
	}
	return proof
}

// subtree is the chaining value of the leaves of msg from leaf first,
// split left-heavy as BLAKE3 splits.
func subtree(msg []byte, first uint64) [8]uint32 {
	if len(msg) <= guts.ChunkSize {
		return guts.ChainingValue(guts.CompressChunk(msg, &guts.IV, first, 0))
	}
	leaves := (len(msg) + guts.ChunkSize - 1) / guts.ChunkSize
	mid := 1
	for mid*2 < leaves {
		mid *= 2
	}
	l := subtree(msg[:mid*guts.ChunkSize], first)
	r := subtree(msg[mid*guts.ChunkSize:], first+uint64(mid))
	return guts.ChainingValue(guts.ParentNode(l, r, &guts.IV, 0))
}

// appendCV appends a chaining value's 32 bytes, its words little-endian.
func appendCV(dst []byte, cv [8]uint32) []byte {
	for _, w := range cv {
		dst = append(dst, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	return dst
}
