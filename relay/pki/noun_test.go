package pki

import (
	"bytes"
	"math/bits"
	"testing"
)

// The writing half of jam, for the tests: Hoon's +jam and +mat.

// bitWriter appends bits to an atom.
type bitWriter struct {
	b []byte
	n uint64
}

func (w *bitWriter) put(x uint) {
	if w.n%8 == 0 {
		w.b = append(w.b, 0)
	}
	w.b[w.n/8] |= byte(x&1) << (w.n % 8)
	w.n++
}

// putBits appends the low n bits of atom a.
func (w *bitWriter) putBits(a []byte, n uint64) {
	for k := uint64(0); k < n; k++ {
		var x uint
		if k/8 < uint64(len(a)) {
			x = uint(a[k/8] >> (k % 8))
		}
		w.put(x)
	}
}

// bitLen is Hoon's (met 0 a).
func bitLen(a []byte) uint64 {
	a = atomBytes(a)
	if len(a) == 0 {
		return 0
	}
	return uint64(8*len(a) - bits.LeadingZeros8(a[len(a)-1]))
}

func u64Bytes(v uint64) []byte {
	var b [8]byte
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return atomBytes(b[:])
}

// mat appends (mat a).
func (w *bitWriter) mat(a []byte) {
	b := bitLen(a)
	if b == 0 {
		w.put(1)
		return
	}
	c := uint64(bits.Len64(b))
	for k := uint64(0); k < c; k++ {
		w.put(0)
	}
	w.put(1)
	w.putBits(u64Bytes(b), c-1)
	w.putBits(a, b)
}

// jam returns noun n jammed (Hoon's +jam), as atom bytes: a ref for a
// repeated cell, and for a repeated atom when the ref is shorter.
func jam(n *noun) []byte {
	var w bitWriter
	var seen []jamEntry
	w.jam(n, &seen)
	return atomBytes(w.b)
}

// jamEntry is a noun jam has written and where it began.
type jamEntry struct {
	n   *noun
	pos uint64
}

func (w *bitWriter) jam(n *noun, seen *[]jamEntry) {
	for _, e := range *seen {
		if !e.n.equal(n) {
			continue
		}
		if !n.cell && bitLen(n.atom) <= uint64(bits.Len64(e.pos)) {
			w.put(0)
			w.mat(n.atom)
			return
		}
		w.put(1)
		w.put(1)
		w.mat(u64Bytes(e.pos))
		return
	}
	*seen = append(*seen, jamEntry{n, w.n})
	if !n.cell {
		w.put(0)
		w.mat(n.atom)
		return
	}
	w.put(1)
	w.put(0)
	w.jam(n.head, seen)
	w.jam(n.tail, seen)
}

// TestJamVectors: jam as hoon.hoon's doc examples give it, and cue back.
func TestJamVectors(t *testing.T) {
	one, two := atomNoun([]byte{1}), atomNoun([]byte{2})
	cases := []struct {
		n    *noun
		want uint64
	}{
		{atomNoun(nil), 2},
		{one, 12},
		{two, 72},
		{atomNoun([]byte{19}), 2480},
		{cellNoun(one, atomNoun([]byte{1})), 817},
	}
	for _, c := range cases {
		got := jam(c.n)
		if v, _ := uintOf(got); v != c.want {
			t.Errorf("jam = %d, want %d", v, c.want)
		}
		back, err := cue(got)
		if err != nil || !back.equal(c.n) {
			t.Errorf("cue(jam) of %d: %v", c.want, err)
		}
	}
}

// TestCueRefs: a repeated cell is written as a ref and read back shared; a
// ref to a position nothing began at is an error.
func TestCueRefs(t *testing.T) {
	big := atomNoun(bytes.Repeat([]byte{0xab}, 40))
	pair := cellNoun(big, atomNoun([]byte("proof")))
	n := cellNoun(pair, cellNoun(pair, big))
	b := jam(n)
	if len(b) > 60 {
		t.Fatalf("jam of a twice-repeated 40-byte atom is %d bytes: no refs written", len(b))
	}
	back, err := cue(b)
	if err != nil || !back.equal(n) {
		t.Fatalf("cue: %v", err)
	}
	var w bitWriter
	w.put(1)
	w.put(1)
	w.mat([]byte{5}) // a ref to bit 5, where no noun began
	if _, err := cue(w.b); err == nil {
		t.Fatal("a dangling ref was read")
	}
}

func TestCueCaps(t *testing.T) {
	deep := atomNoun(nil)
	for i := 0; i < MaxCueDepth+1; i++ {
		deep = cellNoun(atomNoun([]byte{1}), deep)
	}
	if _, err := cue(jam(deep)); err == nil {
		t.Fatal("nesting past MaxCueDepth was read")
	}
	if _, err := cue(jam(atomNoun(bytes.Repeat([]byte{1}, MaxCueBits/8)))); err == nil {
		t.Fatal("an input past MaxCueBits was read")
	}
	for _, b := range [][]byte{nil, {0x01}, {0x04}, {0xff, 0xff}} {
		if _, err := cue(b); err == nil {
			t.Errorf("cue(%x) succeeded", b)
		}
	}
}

// FuzzCue: cue never panics, and what it reads jams and cues back to the
// same noun.
func FuzzCue(f *testing.F) {
	f.Add([]byte{2})
	f.Add(jam(cellNoun(atomNoun([]byte("message")), cellNoun(atomNoun([]byte("proof")), atomNoun([]byte{9, 9})))))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := cue(b)
		if err != nil {
			return
		}
		back, err := cue(jam(n))
		if err != nil || !back.equal(n) {
			t.Fatalf("cue(jam(cue(%x))) = %v", b, err)
		}
	})
}
