package scry

import (
	"encoding/binary"
	"math/bits"
)

// mugSeed is the first MurmurHash3 seed of Urbit's u3r_mug_bytes.
const mugSeed = 0xcafebabe

// Mug returns Urbit's 31-bit byte mug (vere's u3r_mug_bytes): MurmurHash3
// x86_32 of b with seed 0xcafebabe, folded to 31 bits as (h>>31)^(h&0x7fffffff).
// A zero result is retried with the next seed, up to eight seeds; if all eight
// give zero the mug is 0x7fff. Mesa headers and legacy ames headers carry the
// low 20 bits of it.
func Mug(b []byte) uint32 {
	for i := uint32(0); i < 8; i++ {
		h := murmur3x86_32(b, mugSeed+i)
		if m := (h >> 31) ^ (h & 0x7fffffff); m != 0 {
			return m
		}
	}
	return 0x7fff
}

// mugPrefix returns MurmurHash3's running state, with Mug's first seed,
// after the whole 4-byte blocks of b (b's length must be a multiple of 4).
// mugResume finishes a Mug from such a state: it is Mug(b) for any b whose
// first prefixLen bytes gave state.
func mugPrefix(b []byte) uint32 { return murmurBlocks(mugSeed, b) }

// mugResume returns Mug(b) given state = mugPrefix(b[:prefixLen]).
func mugResume(state uint32, prefixLen int, b []byte) uint32 {
	rest := b[prefixLen:]
	n4 := len(rest) &^ 3
	h := murmurTail(murmurBlocks(state, rest[:n4]), rest[n4:], len(b))
	if m := (h >> 31) ^ (h & 0x7fffffff); m != 0 {
		return m
	}
	return Mug(b) // the first seed folds to zero: Mug's retries, rarely
}

// murmur3x86_32 is MurmurHash3_x86_32 as published by Austin Appleby.
func murmur3x86_32(b []byte, seed uint32) uint32 {
	n4 := len(b) &^ 3
	return murmurTail(murmurBlocks(seed, b[:n4]), b[n4:], len(b))
}

// murmurBlocks mixes the whole 4-byte blocks of b into state h.
func murmurBlocks(h uint32, b []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	for len(b) >= 4 {
		k := binary.LittleEndian.Uint32(b)
		b = b[4:]
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	return h
}

// murmurTail mixes the last 0-3 bytes b into h and finalizes the hash of an
// n-byte input.
func murmurTail(h uint32, b []byte, n int) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	var k uint32
	switch len(b) {
	case 3:
		k ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(b[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
