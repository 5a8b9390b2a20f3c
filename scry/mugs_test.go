package scry

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// mugsOf runs Mugs over bodies and returns the mugs.
func mugsOf(bodies [][]byte) []uint32 {
	out := make([]uint32, len(bodies))
	Mugs(bodies, out, make([]int, len(bodies)), make([]MugPrefix, len(bodies)))
	return out
}

// TestMugsVectors: the batched mug gives vere's retrieve_tests.c values
// (../shared/reference/mesa/README.md), alone and grouped with long bodies
// so that the interleaved loop runs.
func TestMugsVectors(t *testing.T) {
	long := make([]byte, 1024)
	for i := range long {
		long[i] = byte(i * 31)
	}
	vec := []struct {
		in   []byte
		want uint32
	}{
		{nil, 0x79ff04e8},
		{[]byte{1}, 0x715c2a60},
		{[]byte{2}, 0x718b9468},
		{[]byte("Hello, world!"), 0x4d441035},
	}
	var bodies [][]byte
	for _, v := range vec {
		bodies = append(bodies, v.in, long)
	}
	got := mugsOf(bodies)
	for i, v := range vec {
		if got[2*i] != v.want {
			t.Errorf("Mugs(%q) = %#x, want %#x", v.in, got[2*i], v.want)
		}
	}
}

// TestMugsBodyMugVectors: for every vere-made vector, valid or not, the
// batched mug of bytes 8 onward is its body_mug (the full u3r_mug_bytes
// the vector generator recorded), hashed four at a time.
func TestMugsBodyMugVectors(t *testing.T) {
	var bodies [][]byte
	var want []uint32
	for _, r := range loadMesaRecords(t, "mesa-vectors.jsonl") {
		s, ok := r.Fields["body_mug"].(string)
		if !ok || len(r.Wire) < MesaHeaderLen {
			continue
		}
		w, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			t.Fatalf("id %d: body_mug %q: %v", r.ID, s, err)
		}
		bodies = append(bodies, r.Wire[MesaHeaderLen:])
		want = append(want, uint32(w))
	}
	if len(bodies) < 100 {
		t.Fatalf("only %d vectors with body_mug", len(bodies))
	}
	long := 0
	for i, m := range mugsOf(bodies) {
		if m != want[i] {
			t.Fatalf("vector %d: Mugs = %#x, body_mug %#x", i, m, want[i])
		}
		if len(bodies[i]) >= mugInterleaveMin {
			long++
		}
	}
	if long < 3*mugLanes {
		t.Fatalf("only %d vectors long enough to interleave", long)
	}
}

// TestMugsEqualSerial: Mugs equals Mug for every body length 0..1500 in
// every position of a group of four, beside bodies of every relation of
// length (shorter, equal, longer), and for random batches of mixed
// lengths; MugPrefixes' states resume to Mug from every prefix length.
func TestMugsEqualSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 8*1500)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	others := []int{0, 127, 128, 129, 131, 700, 1024, 1500}
	for n := 0; n <= 1500; n++ {
		for pos := 0; pos < mugLanes; pos++ {
			o := others[(n+pos)%len(others)]
			bodies := make([][]byte, mugLanes)
			for j := range bodies {
				l := o + j
				if j == pos {
					l = n
				}
				off := (n*7 + j*1500) % (len(buf) - 1500)
				bodies[j] = buf[off : off+min(l, 1500)]
			}
			for j, m := range mugsOf(bodies) {
				if want := Mug(bodies[j]); m != want {
					t.Fatalf("len %d at %d: body %d (len %d) Mugs %#x, Mug %#x", n, pos, j, len(bodies[j]), m, want)
				}
			}
		}
	}
	for trial := 0; trial < 200; trial++ {
		k := 1 + rng.IntN(70)
		bodies := make([][]byte, k)
		ns := make([]int, k)
		for j := range bodies {
			l := rng.IntN(1500)
			off := rng.IntN(len(buf) - l)
			bodies[j] = buf[off : off+l]
			ns[j] = rng.IntN(l + 8) // sometimes past the end: clipped
		}
		pre := make([]MugPrefix, k)
		MugPrefixes(bodies, ns, pre)
		for j, b := range bodies {
			n := min(ns[j], len(b)) &^ 3
			if pre[j].N != n {
				t.Fatalf("trial %d body %d: N %d, want %d", trial, j, pre[j].N, n)
			}
			if n > 0 && pre[j].State != mugPrefix(b[:n]) {
				t.Fatalf("trial %d body %d: state %#x, want %#x", trial, j, pre[j].State, mugPrefix(b[:n]))
			}
			if got, want := pre[j].Mug(b), Mug(b); got != want {
				t.Fatalf("trial %d body %d: resumed %#x, Mug %#x", trial, j, got, want)
			}
		}
	}
}

// TestMugPrefixIgnoresMisfit: a prefix longer than the body, or not
// block-aligned, is not used.
func TestMugPrefixIgnoresMisfit(t *testing.T) {
	b := []byte("0123456789abcdef")
	for _, p := range []MugPrefix{{N: 20, State: 1}, {N: 6, State: 1}, {N: -4, State: 1}, {}} {
		if got, want := p.Mug(b), Mug(b); got != want {
			t.Errorf("%+v: %#x, want %#x", p, got, want)
		}
	}
}

// TestParseWithPrefixEqualsParse: over every vere vector, valid, malformed
// and quirky, ParseWithPrefix with batched prefixes returns what Parse
// returns and fills the same Packet (the saved hash state included, so a
// later EditPageNextHop is the same too).
func TestParseWithPrefixEqualsParse(t *testing.T) {
	var wires [][]byte
	for _, file := range []string{"mesa-vectors.jsonl", "mesa-malformed.jsonl", "mesa-quirks.jsonl"} {
		for _, r := range loadMesaRecords(t, file) {
			wires = append(wires, r.Wire)
		}
	}
	bodies := make([][]byte, len(wires))
	ns := make([]int, len(wires))
	for i, w := range wires {
		if len(w) >= MesaHeaderLen {
			bodies[i] = w[MesaHeaderLen:]
		}
		ns[i] = MesaMugPrefixLen(w)
	}
	pre := make([]MugPrefix, len(wires))
	MugPrefixes(bodies, ns, pre)
	used := 0
	for i, w := range wires {
		var p, q Packet
		errP := p.Parse(w)
		errQ := q.ParseWithPrefix(w, pre[i])
		if errP != errQ || fmt.Sprint(p) != fmt.Sprint(q) {
			t.Fatalf("wire %d (%d bytes, prefix %+v): Parse %v, ParseWithPrefix %v, packets equal %v",
				i, len(w), pre[i], errP, errQ, fmt.Sprint(p) == fmt.Sprint(q))
		}
		if errP == nil && pre[i].N > 0 {
			used++
		}
	}
	if used < 100 {
		t.Fatalf("only %d accepted vectors used a prefix", used)
	}
}

// TestParseWithPrefixStale: the prefix is trusted, so a caller's stale one
// (computed before the bytes changed) breaks the mug check; this pins the
// contract that ParseWithPrefix's caller must tie the prefix to the bytes.
func TestParseWithPrefixStale(t *testing.T) {
	var page []byte
	for _, r := range loadMesaRecords(t, "mesa-vectors.jsonl") {
		var p Packet
		if p.Parse(r.Wire) == nil && p.Header.Type == TypePage && len(r.Wire) > 200 {
			page = r.Wire
			break
		}
	}
	if page == nil {
		t.Fatal("no long page among the vectors")
	}
	b := append([]byte(nil), page...)
	pre := make([]MugPrefix, 1)
	MugPrefixes([][]byte{b[MesaHeaderLen:]}, []int{MesaMugPrefixLen(b)}, pre)
	b[MesaHeaderLen+40] ^= 1 // corrupt a hashed byte after the prefix was taken
	var p Packet
	if err := p.Parse(b); err != ErrMesaBadMug {
		t.Fatalf("Parse of the corrupted page: %v, want bad mug", err)
	}
	if err := p.ParseWithPrefix(b, pre[0]); err != nil {
		t.Fatalf("ParseWithPrefix with the stale prefix: %v (the contract says it is trusted)", err)
	}
}

func TestMugsAllocateNothing(t *testing.T) {
	bodies := make([][]byte, 64)
	for i := range bodies {
		bodies[i] = make([]byte, 100+i*20)
	}
	out, ns, pre := make([]uint32, 64), make([]int, 64), make([]MugPrefix, 64)
	if n := testing.AllocsPerRun(20, func() { Mugs(bodies, out, ns, pre) }); n != 0 {
		t.Fatalf("Mugs allocates %v times", n)
	}
}

func FuzzMugs(f *testing.F) {
	f.Add([]byte("Hello, world!"), uint16(3), uint16(5), uint16(7))
	f.Add(make([]byte, 4000), uint16(1024), uint16(1024), uint16(1030))
	f.Fuzz(func(t *testing.T, b []byte, a, c, d uint16) {
		cut := func(x uint16) int { return int(x) % (len(b) + 1) }
		i, j, k := cut(a), cut(c), cut(d)
		bodies := [][]byte{b, b[i:], b[:j], b[k:], b[min(i, j):max(i, j)]}
		for n, m := range mugsOf(bodies) {
			if want := Mug(bodies[n]); m != want {
				t.Fatalf("body %d (len %d): Mugs %#x, Mug %#x", n, len(bodies[n]), m, want)
			}
		}
	})
}

// benchBodies returns k bodies of n bytes each.
func benchBodies(k, n int) [][]byte {
	bodies := make([][]byte, k)
	for i := range bodies {
		bodies[i] = make([]byte, n)
		for j := 0; j+4 <= n; j += 4 {
			binary.LittleEndian.PutUint32(bodies[i][j:], uint32(i*n+j))
		}
	}
	return bodies
}

// BenchmarkMugBatch compares a batch of 64 page bodies mugged one by one
// (Mug) with the same batch mugged four at a time (Mugs); ns/op is per
// batch, and ns/body is reported.
func BenchmarkMugBatch(b *testing.B) {
	for _, n := range []int{139, 1024, 1400} {
		bodies := benchBodies(64, n)
		out, ns, pre := make([]uint32, 64), make([]int, 64), make([]MugPrefix, 64)
		b.Run(fmt.Sprintf("serial/%dB", n), func(b *testing.B) {
			b.SetBytes(int64(64 * n))
			for b.Loop() {
				for i, body := range bodies {
					out[i] = Mug(body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/body")
		})
		b.Run(fmt.Sprintf("interleaved/%dB", n), func(b *testing.B) {
			b.SetBytes(int64(64 * n))
			for b.Loop() {
				Mugs(bodies, out, ns, pre)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/body")
		})
	}
}
