package scry

import (
	"bytes"
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// benchName is a typical name: a planet's path with a fragment number.
var benchName = Name{
	Ship: lane.ShipFromUint64(0x1234_5678), Rift: 3, Bloq: DefaultBloq, Frag: 7,
	Path: []byte("c/x/4/~zod/desk/foo/bar/baz/1234567"),
}

// benchPage returns a canonical page carrying a 1 KiB fragment with a
// Merkle pair and no next-hop.
func benchPage() []byte {
	p := NewPage(benchName, Data{
		Total: 1 << 20, AuthKind: AuthPair, Auth: bytes.Repeat([]byte{0x5a}, 64),
		Frag: bytes.Repeat([]byte{0xa5}, 1024),
	})
	return p.Append(nil)
}

func BenchmarkMesaParsePage1K(b *testing.B) {
	pkt := benchPage()
	var p Packet
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Parse(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMesaParsePeek(b *testing.B) {
	pk := NewPeek(benchName)
	pkt := pk.Append(nil)
	var p Packet
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Parse(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMesaForwardEdits is the relay's per-page rewrite: hop bump, a
// SHORT next-hop added (growing the page) and the mug recomputed.
func BenchmarkMesaForwardEdits(b *testing.B) {
	orig := benchPage()
	buf := make([]byte, len(orig), len(orig)+ShortHopLen)
	copy(buf, orig)
	hop := [ShortHopLen]byte{1, 0, 0, 127, 0x19, 0x34}
	b.SetBytes(int64(len(orig)))
	b.ReportAllocs()
	for b.Loop() {
		pkt := buf[:len(orig)]
		copy(pkt[:4], orig[:4]) // back to no next-hop
		BumpHops(pkt)
		if _, err := SetNextHop(pkt, hop); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMesaAppendPage1K(b *testing.B) {
	var p Packet
	if err := p.Parse(benchPage()); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, MesaMaxPacket)
	b.SetBytes(int64(p.Size()))
	b.ReportAllocs()
	for b.Loop() {
		dst = p.Append(dst[:0])
	}
}

// BenchmarkForwardEditsResumed is BenchmarkForwardEdits' work with the
// mug resumed from the state Parse saved (EditPageNextHop), Parse included.
func BenchmarkForwardEditsResumed(b *testing.B) {
	page := benchPage()
	buf := make([]byte, len(page), len(page)+ShortHopLen)
	hop := [ShortHopLen]byte{1, 0, 0, 127, 0x19, 0x34}
	var p Packet
	b.ReportAllocs()
	b.SetBytes(int64(len(page)))
	for i := 0; i < b.N; i++ {
		buf = buf[:len(page)]
		copy(buf, page)
		if err := p.Parse(buf); err != nil {
			b.Fatal(err)
		}
		BumpHops(buf)
		if _, err := EditPageNextHop(buf, &p, hop, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMesaNameWire is the relay's look ahead at a page's name before
// it decides a batch.
func BenchmarkMesaNameWire(b *testing.B) {
	pkt := benchPage()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := NameWire(pkt); !ok {
			b.Fatal("no name")
		}
	}
}
