package lane

import "math/bits"

// This file is hoon.hoon's ++ob: the reversible scrambling that @p applies to
// planet and moon numbers so that neighbouring planets get unrelated names.
// Every function here is a pure function on integers and allocates nothing.

// Feistel parameters of +feis and +tail: the domain is [0, feistelK-1], split
// as feistelA*feistelB.
const (
	feistelRounds = 4
	feistelA      = 0xffff
	feistelB      = 0x10000
	feistelK      = feistelA * feistelB // 0xffff0000
)

// Bounds of the planet range that +fein scrambles.
const (
	planetLow  = 0x10000
	planetHigh = 0xffffffff
)

// obSeeds are the murmur3 seeds of +eff, one per Feistel round (hoon.hoon
// ++raku; indexed by round number minus one).
var obSeeds = [feistelRounds]uint32{0xb76d5eed, 0xee281300, 0x85bcae01, 0x4b387af7}

// fein is hoon.hoon's +fein (conceal structure, v3): planets
// 0x10000-0xffffffff become 0x10000 + feis(n - 0x10000); a moon (or any value
// below 2^64 and at least 2^32) keeps its high 32 bits and has its low 32
// bits scrambled the same way; every other value is returned unchanged.
func fein(s Ship) Ship {
	if s.Hi != 0 {
		return s
	}
	return Ship{Lo: s.Lo&^0xffffffff | uint64(fein32(uint32(s.Lo)))}
}

// fein32 applies +fein to a value below 2^32.
func fein32(n uint32) uint32 {
	if n < planetLow {
		return n
	}
	return planetLow + feis(n-planetLow)
}

// fynd is hoon.hoon's +fynd, the inverse of fein: fynd(fein(s)) == s and
// fein(fynd(s)) == s for every s.
func fynd(s Ship) Ship {
	if s.Hi != 0 {
		return s
	}
	return Ship{Lo: s.Lo&^0xffffffff | uint64(fynd32(uint32(s.Lo)))}
}

// fynd32 applies +fynd to a value below 2^32.
func fynd32(n uint32) uint32 {
	if n < planetLow {
		return n
	}
	return planetLow + tail(n-planetLow)
}

// feis is hoon.hoon's +feis: a 4-round Black-Rogaway generalised Feistel
// cipher over [0, 0xffff0000-1], with cycle walking (+fee). m must be below
// feistelK, which every caller guarantees.
func feis(m uint32) uint32 {
	c := feistelEncrypt(uint64(m))
	if c < feistelK {
		return uint32(c)
	}
	return uint32(feistelEncrypt(c))
}

// tail is hoon.hoon's +tail, the inverse of feis (+feen).
func tail(m uint32) uint32 {
	c := feistelDecrypt(uint64(m))
	if c < feistelK {
		return uint32(c)
	}
	return uint32(feistelDecrypt(c))
}

// feistelEncrypt is hoon.hoon's +fe with r = 4, a = 0xffff, b = 0x10000,
// including the legacy final permutation of urbit/arvo#1105: when the right
// half equals a, the halves are combined as arr*a + ell instead of
// ell*a + arr, because the latter collides for those inputs.
func feistelEncrypt(m uint64) uint64 {
	ell, arr := m%feistelA, m/feistelA
	for j := 1; j <= feistelRounds; j++ {
		f := uint64(feistelRound(j-1, arr))
		var tmp uint64
		if j%2 != 0 {
			tmp = (f + ell) % feistelA
		} else {
			tmp = (f + ell) % feistelB
		}
		ell, arr = arr, tmp
	}
	// feistelRounds is even, so Hoon's odd-r branch does not apply.
	if arr == feistelA {
		return arr*feistelA + ell
	}
	return ell*feistelA + arr
}

// feistelDecrypt is hoon.hoon's +fen with r = 4, a = 0xffff, b = 0x10000: the
// inverse of feistelEncrypt, with the same arvo#1105 correction undone first.
func feistelDecrypt(m uint64) uint64 {
	// r is even: ahh = m mod a, ale = m div a.
	ahh, ale := m%feistelA, m/feistelA
	ell, arr := ale, ahh
	if ale == feistelA {
		ell, arr = ahh, ale
	}
	for j := feistelRounds; j >= 1; j-- {
		f := uint64(feistelRound(j-1, ell))
		var tmp uint64
		if j%2 != 0 {
			tmp = (arr + feistelA - f%feistelA) % feistelA
		} else {
			tmp = (arr + feistelB - f%feistelB) % feistelB
		}
		ell, arr = tmp, ell
	}
	return arr*feistelA + ell
}

// feistelRound is +eff: murmur3 (x86, 32-bit) of the two little-endian low
// bytes of r, seeded by the round's seed. Hoon's operands here are always
// below 2^16; higher bits are ignored.
func feistelRound(j int, r uint64) uint32 {
	return murmur3x86_32Of2(obSeeds[j], uint16(r))
}

// murmur3x86_32Of2 is MurmurHash3_x86_32 of the 2-byte key {k & 0xff, k >> 8}
// (hoon.hoon ++muk with len = 2). With a 2-byte key there are no full
// blocks, only the tail.
func murmur3x86_32Of2(seed uint32, k uint16) uint32 {
	const (
		c1 = 0xcc9e2d51
		c2 = 0x1b873593
	)
	h := seed
	k1 := uint32(k)
	k1 *= c1
	k1 = bits.RotateLeft32(k1, 15)
	k1 *= c2
	h ^= k1
	h ^= 2 // key length
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
