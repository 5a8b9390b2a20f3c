package pki

import (
	"encoding/binary"
	"math/bits"
)

// The BLAKE3 compression function and the tree mesa's Merkle root is made
// of. The signer is arvo: ames.hoon's +peek-publ signs (root:lss ser), and
// zuse.hoon's +root:lss is (blake3 32 msg), BLAKE3's standard 32-byte hash;
// +recover-root:verifier:lss folds a proof and sets BLAKE3's ROOT flag on
// the last parent, so a message's root is its BLAKE3 hash however it is
// sent. Leaves and proof hashes are chaining values without ROOT (a leaf
// is the chaining value of one 1024-byte chunk with its chunk counter, an
// inner node a parent's). vere's lss.c folds the same proof without ROOT
// (lss_root); that value is never signed. docs/protocol.md ("The root")
// cites both.

const (
	// chunkLen is BLAKE3's chunk and mesa's leaf: 1024 bytes, one bloq-13
	// fragment (vere's mesa_num_leaves).
	chunkLen = 1024
	// blockLen is BLAKE3's block.
	blockLen = 64
	// HashLen is a chaining value's size, and a Merkle hash's on the wire.
	HashLen = 32

	flagChunkStart = 1 << 0
	flagChunkEnd   = 1 << 1
	flagParent     = 1 << 2
	flagRoot       = 1 << 3
)

// blakeIV is BLAKE3's IV (SHA-256's); lss.c's IV array is these words as
// little-endian bytes.
var blakeIV = [8]uint32{
	0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
	0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19,
}

// blakePerm is the message word permutation applied between rounds.
var blakePerm = [16]uint8{2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8}

// hash is a 32-byte chaining value in its wire order (little-endian words).
type hash [HashLen]byte

// blakeG is BLAKE3's quarter-round on state words a, b, c, d.
func blakeG(s *[16]uint32, a, b, c, d int, x, y uint32) {
	s[a] += s[b] + x
	s[d] = bits.RotateLeft32(s[d]^s[a], -16)
	s[c] += s[d]
	s[b] = bits.RotateLeft32(s[b]^s[c], -12)
	s[a] += s[b] + y
	s[d] = bits.RotateLeft32(s[d]^s[a], -8)
	s[c] += s[d]
	s[b] = bits.RotateLeft32(s[b]^s[c], -7)
}

// compress is BLAKE3's compression function; it returns the first 8 output
// words, the new chaining value (the extended output is never needed here).
func compress(cv [8]uint32, block *[blockLen]byte, n int, counter uint64, flags uint32) [8]uint32 {
	var m [16]uint32
	for i := range m {
		m[i] = binary.LittleEndian.Uint32(block[4*i:])
	}
	s := [16]uint32{
		cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7],
		blakeIV[0], blakeIV[1], blakeIV[2], blakeIV[3],
		uint32(counter), uint32(counter >> 32), uint32(n), flags,
	}
	for r := 0; r < 7; r++ {
		blakeG(&s, 0, 4, 8, 12, m[0], m[1])
		blakeG(&s, 1, 5, 9, 13, m[2], m[3])
		blakeG(&s, 2, 6, 10, 14, m[4], m[5])
		blakeG(&s, 3, 7, 11, 15, m[6], m[7])
		blakeG(&s, 0, 5, 10, 15, m[8], m[9])
		blakeG(&s, 1, 6, 11, 12, m[10], m[11])
		blakeG(&s, 2, 7, 8, 13, m[12], m[13])
		blakeG(&s, 3, 4, 9, 14, m[14], m[15])
		if r < 6 {
			var p [16]uint32
			for i, j := range blakePerm {
				p[i] = m[j]
			}
			m = p
		}
	}
	var out [8]uint32
	for i := range out {
		out[i] = s[i] ^ s[i+8]
	}
	return out
}

// wordsToHash writes a chaining value's words as bytes.
func wordsToHash(w [8]uint32) (h hash) {
	for i, x := range w {
		binary.LittleEndian.PutUint32(h[4*i:], x)
	}
	return h
}

// chunkCV is the chaining value of one chunk of at most chunkLen bytes at
// chunk index counter, with extra flags (flagRoot, or 0) on its last block:
// vere's _leaf_hash when extra is 0. An empty chunk is one empty block.
func chunkCV(chunk []byte, counter uint64, extra uint32) hash {
	cv := blakeIV
	flags := uint32(flagChunkStart)
	for {
		var block [blockLen]byte
		n := copy(block[:], chunk)
		chunk = chunk[n:]
		if len(chunk) == 0 {
			return wordsToHash(compress(cv, &block, n, counter, flags|flagChunkEnd|extra))
		}
		cv = compress(cv, &block, n, counter, flags)
		flags = 0
	}
}

// parentCV is the chaining value of a parent node (vere's _parent_hash
// when extra is 0).
func parentCV(l, r *hash, extra uint32) hash {
	var block [blockLen]byte
	copy(block[:HashLen], l[:])
	copy(block[HashLen:], r[:])
	return wordsToHash(compress(blakeIV, &block, blockLen, 0, flagParent|extra))
}

// leafRoot is the Merkle root of a one-leaf message: BLAKE3(msg), the
// chunk at index 0 with ROOT on its last block (zuse's +root:lss, which
// ames.hoon's +peek-publ signs and +hear-page and +al-take-proof check as
// (root:lss tob.data^dat.data)).
func leafRoot(msg []byte) hash { return chunkCV(msg, 0, flagRoot) }

// proofLen is the number of hashes in the proof a message of leaves leaves
// starts with (vere's lss_proof_size: 1 + the bit length of leaves-1).
func proofLen(leaves uint64) int { return 1 + bits.Len64(leaves-1) }

// proofRoot folds a proof into the Merkle root as zuse's
// +recover-root:verifier:lss does: proof[0] and proof[1] are leaves 0 and
// 1, proof[i] (i >= 2) the subtree right of everything before it, so root
// = parent(...parent(parent(p0, p1), p2)..., pn) with ROOT on the last
// parent only. That is BLAKE3(msg): BLAKE3's tree splits the same way.
// proof is a whole number of HashLen-byte hashes, at least two.
func proofRoot(proof []byte) hash {
	var root hash
	copy(root[:], proof)
	for i := HashLen; i+HashLen <= len(proof); i += HashLen {
		var r hash
		copy(r[:], proof[i:])
		extra := uint32(0)
		if i+2*HashLen > len(proof) {
			extra = flagRoot
		}
		root = parentCV(&root, &r, extra)
	}
	return root
}

// subtreeCV is vere's _subtree_root (with extra 0): the chaining value of the leaves of
// msg starting at leaf index first, split left-heavy (the left side the
// largest power of two of leaves below the count), extra on the top node.
func subtreeCV(msg []byte, first uint64, extra uint32) hash {
	if len(msg) <= chunkLen {
		return chunkCV(msg, first, extra)
	}
	leaves := (len(msg) + chunkLen - 1) / chunkLen
	mid := 1
	for mid*2 < leaves {
		mid *= 2
	}
	l := subtreeCV(msg[:mid*chunkLen], first, 0)
	r := subtreeCV(msg[mid*chunkLen:], first+uint64(mid), 0)
	return parentCV(&l, &r, extra)
}

// appendProof appends the proof a publisher sends for msg, a message of
// two or more leaves (zuse's +build:lss, vere's lss_builder_finalize, the
// same hashes): leaf 0, then for i >= 1 the subtree of leaves
// [2^(i-1), 2^i) cut at the message's end, all without ROOT.
func appendProof(proof, msg []byte) []byte {
	leaves := uint64((len(msg) + chunkLen - 1) / chunkLen)
	l0 := chunkCV(msg[:min(len(msg), chunkLen)], 0, 0)
	proof = append(proof, l0[:]...)
	for lo := uint64(1); lo < leaves; lo *= 2 {
		hi := min(2*lo, leaves)
		h := subtreeCV(msg[lo*chunkLen:min(uint64(len(msg)), hi*chunkLen)], lo, 0)
		proof = append(proof, h[:]...)
	}
	return proof
}
