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

// Batched mugs. One Mug is a serial chain: each 4-byte block's mix waits
// for the previous block's (two multiplies, a rotate and an add per block,
// ~4 cycles of latency), so a 1 KiB body costs ~400 ns whatever the core's
// width. Hashing four bodies in one loop runs four independent chains side
// by side, and the core overlaps them: the same work in about the time of
// one. The results are bit-for-bit Mug's (TestMugsEqualSerial).

// mugLanes is how many bodies mugBlocks4 hashes at once: four chains of
// one multiply-bound dependency each keep a 3-4 wide core busy, and their
// states, pointers and constants still fit amd64's and arm64's registers.
const mugLanes = 4

// mugInterleaveMin is the shortest prefix (in bytes) worth hashing beside
// others: below it the grouping costs more than the overlap saves (a peek's
// name is ~100 bytes; a page's body ~1 KiB).
const mugInterleaveMin = 128

// murmurBlocks4 mixes the first n bytes (n a multiple of 4, at most each
// slice's length) of b0..b3 into states h, as four murmurBlocks would. It
// reads 16 bytes of each body per step through array pointers, so that the
// loop carries one bounds check per body per four blocks.
func murmurBlocks4(h *[mugLanes]uint32, b0, b1, b2, b3 []byte, n int) {
	if n <= 0 {
		return
	}
	b0, b1, b2, b3 = b0[:n], b1[:n], b2[:n], b3[:n]
	h0, h1, h2, h3 := h[0], h[1], h[2], h[3]
	le := binary.LittleEndian
	i := 0
	for ; i+16 <= n; i += 16 {
		a0, a1, a2, a3 := (*[16]byte)(b0[i:]), (*[16]byte)(b1[i:]), (*[16]byte)(b2[i:]), (*[16]byte)(b3[i:])
		h0 = murmurMix(h0, le.Uint32(a0[0:4]))
		h1 = murmurMix(h1, le.Uint32(a1[0:4]))
		h2 = murmurMix(h2, le.Uint32(a2[0:4]))
		h3 = murmurMix(h3, le.Uint32(a3[0:4]))
		h0 = murmurMix(h0, le.Uint32(a0[4:8]))
		h1 = murmurMix(h1, le.Uint32(a1[4:8]))
		h2 = murmurMix(h2, le.Uint32(a2[4:8]))
		h3 = murmurMix(h3, le.Uint32(a3[4:8]))
		h0 = murmurMix(h0, le.Uint32(a0[8:12]))
		h1 = murmurMix(h1, le.Uint32(a1[8:12]))
		h2 = murmurMix(h2, le.Uint32(a2[8:12]))
		h3 = murmurMix(h3, le.Uint32(a3[8:12]))
		h0 = murmurMix(h0, le.Uint32(a0[12:16]))
		h1 = murmurMix(h1, le.Uint32(a1[12:16]))
		h2 = murmurMix(h2, le.Uint32(a2[12:16]))
		h3 = murmurMix(h3, le.Uint32(a3[12:16]))
	}
	h[0] = murmurBlocks(h0, b0[i:])
	h[1] = murmurBlocks(h1, b1[i:])
	h[2] = murmurBlocks(h2, b2[i:])
	h[3] = murmurBlocks(h3, b3[i:])
}

// murmurMix mixes one 4-byte block k into state h (MurmurHash3's body
// step).
func murmurMix(h, k uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	k *= c1
	k = bits.RotateLeft32(k, 15)
	k *= c2
	h ^= k
	h = bits.RotateLeft32(h, 13)
	return h*5 + 0xe6546b64
}

// MugPrefix is MurmurHash3's running state, with Mug's first seed, after
// the first N bytes of a body (N a multiple of 4): what a Mug of that body
// resumes from instead of hashing those bytes again. The zero MugPrefix
// stands for nothing hashed.
type MugPrefix struct {
	N     int
	State uint32
}

// MugPrefixes sets out[i] to the MugPrefix of bodies[i][:ns[i]] for every
// i (ns[i] is rounded down to a multiple of 4 and clipped to the body),
// hashing the long ones four at a time (murmurBlocks4). out and ns must be
// at least as long as bodies. It allocates nothing.
func MugPrefixes(bodies [][]byte, ns []int, out []MugPrefix) {
	var group [mugLanes]int // indices of long prefixes waiting for a group
	g := 0
	for i, b := range bodies {
		n := min(ns[i], len(b)) &^ 3
		out[i] = MugPrefix{N: n, State: mugSeed}
		if n < mugInterleaveMin {
			out[i].State = murmurBlocks(mugSeed, b[:n])
			continue
		}
		group[g] = i
		g++
		if g == mugLanes {
			mugPrefixGroup(bodies, out, &group)
			g = 0
		}
	}
	for _, i := range group[:g] {
		out[i].State = murmurBlocks(mugSeed, bodies[i][:out[i].N])
	}
}

// mugPrefixGroup hashes the four prefixes out[idx[j]].N of bodies[idx[j]]:
// their common length together, each rest alone.
func mugPrefixGroup(bodies [][]byte, out []MugPrefix, idx *[mugLanes]int) {
	b0, b1, b2, b3 := bodies[idx[0]], bodies[idx[1]], bodies[idx[2]], bodies[idx[3]]
	n := min(out[idx[0]].N, out[idx[1]].N, out[idx[2]].N, out[idx[3]].N)
	h := [mugLanes]uint32{mugSeed, mugSeed, mugSeed, mugSeed}
	murmurBlocks4(&h, b0, b1, b2, b3, n)
	for j, i := range idx {
		out[i].State = murmurBlocks(h[j], bodies[i][n:out[i].N])
	}
}

// Mug returns the Mug of body given p, the MugPrefix of one of its
// prefixes: only the bytes after p.N are hashed. p must have been computed
// from these very bytes (a stale prefix gives a wrong mug); a p longer than
// body is ignored and body is hashed whole.
func (p MugPrefix) Mug(body []byte) uint32 {
	if p.N == 0 || p.N > len(body) || p.N < 0 || p.N&3 != 0 {
		return Mug(body)
	}
	return mugResume(p.State, p.N, body)
}

// stateAt returns the running state after body[:n] (n a multiple of 4, at
// most len(body)), resuming from p when p.N <= n. The zero MugPrefix
// stands for nothing hashed.
func (p MugPrefix) stateAt(body []byte, n int) uint32 {
	if p.N == 0 || p.N > n || p.N < 0 || p.N&3 != 0 {
		return mugPrefix(body[:n])
	}
	return murmurBlocks(p.State, body[p.N:n])
}

// Mugs sets out[i] = Mug(bodies[i]) for every i, hashing four bodies at a
// time; out must be at least as long as bodies. ns is scratch of the same
// length (it holds the prefix lengths), prefixes likewise. It allocates
// nothing.
func Mugs(bodies [][]byte, out []uint32, ns []int, prefixes []MugPrefix) {
	for i, b := range bodies {
		ns[i] = len(b)
	}
	MugPrefixes(bodies, ns, prefixes)
	for i, b := range bodies {
		out[i] = prefixes[i].Mug(b)
	}
}
