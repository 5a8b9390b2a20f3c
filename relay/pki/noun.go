package pki

import (
	"bytes"
	"errors"
	"math/bits"
)

// Hoon's nouns and their serialization, +jam and +cue, as far as reading
// a comet's attestation needs: a noun is an atom (a natural number, held as
// its little-endian bytes without trailing zeros) or a cell of two nouns.
//
// jam writes a noun as a bit string, least significant bit first:
//
//	atom   0, then (mat atom)
//	cell   1 0, then the head, then the tail
//	ref    1 1, then (mat position): the noun that began at that bit
//
// and (mat a) is 1 for a = 0; otherwise, with b the bit length of a and c
// that of b: c zero bits, a one bit, the low c-1 bits of b, then the b bits
// of a. Hoon's +jam writes a ref for a repeated cell, and for a repeated
// atom when the ref is shorter than the atom (hoon.hoon's +jam, +mat, +cue,
// +rub).

// Caps on cue, named so a hostile input cannot make it work harder than a
// datagram's worth.
const (
	// MaxCueBits caps the input: a datagram's bits (1472 bytes).
	MaxCueBits = 1472 * 8
	// MaxCueDepth caps cell nesting; an attestation nests five deep.
	MaxCueDepth = 64
)

// errCue is cue's one error: the bits are not a noun jam writes, or exceed
// a cap.
var errCue = errors.New("pki: not a jammed noun")

type noun struct {
	cell       bool
	atom       []byte // an atom's bytes, little-endian, no trailing zeros
	head, tail *noun
}

func atomNoun(b []byte) *noun   { return &noun{atom: atomBytes(b)} }
func cellNoun(h, t *noun) *noun { return &noun{cell: true, head: h, tail: t} }

// equal reports whether two nouns are the same noun.
func (n *noun) equal(m *noun) bool {
	if n.cell != m.cell {
		return false
	}
	if !n.cell {
		return bytes.Equal(n.atom, m.atom)
	}
	return n.head.equal(m.head) && n.tail.equal(m.tail)
}

// isTerm reports whether n is the atom of the text s (a Hoon term or cord).
func (n *noun) isTerm(s string) bool { return !n.cell && string(n.atom) == s }

// bitReader reads the bits of an atom's bytes; reading past its bit length
// is an error, as in Hoon's +rub.
type bitReader struct {
	b   []byte
	len uint64 // bit length
}

func (r *bitReader) bit(i uint64) (uint, error) {
	if i >= r.len {
		return 0, errCue
	}
	return uint(r.b[i/8]>>(i%8)) & 1, nil
}

// bitsAt reads n bits at i as bytes, little-endian.
func (r *bitReader) bitsAt(i, n uint64) ([]byte, error) {
	if n > r.len || i > r.len-n {
		return nil, errCue
	}
	out := make([]byte, (n+7)/8)
	for k := uint64(0); k < n; k++ {
		j := i + k
		out[k/8] |= (r.b[j/8] >> (j % 8) & 1) << (k % 8)
	}
	return atomBytes(out), nil
}

// uintOf reads a little-endian atom of at most 8 bytes.
func uintOf(b []byte) (uint64, bool) {
	if len(b) > 8 {
		return 0, false
	}
	var v uint64
	for i, c := range b {
		v |= uint64(c) << (8 * i)
	}
	return v, true
}

// rub reads (mat a) at i: the atom and the bits it took.
func (r *bitReader) rub(i uint64) ([]byte, uint64, error) {
	c := uint64(0)
	for {
		x, err := r.bit(i + c)
		if err != nil {
			return nil, 0, err
		}
		if x == 1 {
			break
		}
		c++
	}
	if c == 0 {
		return nil, 1, nil
	}
	if c > 64 {
		return nil, 0, errCue
	}
	d := i + c + 1
	lo, err := r.bitsAt(d, c-1)
	if err != nil {
		return nil, 0, err
	}
	v, _ := uintOf(lo)
	e := v + 1<<(c-1)
	a, err := r.bitsAt(d+c-1, e)
	if err != nil {
		return nil, 0, err
	}
	return a, 2*c + e, nil
}

// cue reads the noun jammed in atom bytes b (Hoon's +cue), refusing input
// over MaxCueBits and nesting over MaxCueDepth.
func cue(b []byte) (*noun, error) {
	b = atomBytes(b)
	if len(b)*8 > MaxCueBits {
		return nil, errCue
	}
	r := bitReader{b: b}
	if len(b) > 0 {
		r.len = uint64(8*len(b) - bits.LeadingZeros8(b[len(b)-1]))
	}
	seen := map[uint64]*noun{}
	n, _, err := r.cueAt(0, 0, seen)
	return n, err
}

// cueAt reads the noun that begins at bit i, returning it and its length
// in bits; seen maps each position read so far to its noun, for refs.
func (r *bitReader) cueAt(i uint64, depth int, seen map[uint64]*noun) (*noun, uint64, error) {
	if depth > MaxCueDepth {
		return nil, 0, errCue
	}
	tag, err := r.bit(i)
	if err != nil {
		return nil, 0, err
	}
	if tag == 0 {
		a, n, err := r.rub(i + 1)
		if err != nil {
			return nil, 0, err
		}
		x := &noun{atom: a}
		seen[i] = x
		return x, n + 1, nil
	}
	ref, err := r.bit(i + 1)
	if err != nil {
		return nil, 0, err
	}
	if ref == 1 {
		a, n, err := r.rub(i + 2)
		if err != nil {
			return nil, 0, err
		}
		pos, ok := uintOf(a)
		x := seen[pos]
		if !ok || x == nil {
			return nil, 0, errCue
		}
		return x, n + 2, nil
	}
	h, hn, err := r.cueAt(i+2, depth+1, seen)
	if err != nil {
		return nil, 0, err
	}
	t, tn, err := r.cueAt(i+2+hn, depth+1, seen)
	if err != nil {
		return nil, 0, err
	}
	x := cellNoun(h, t)
	seen[i] = x
	return x, 2 + hn + tn, nil
}
