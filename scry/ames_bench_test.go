package scry

import (
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// amesBenchSizes are content lengths for the benchmarks: a small ack-sized
// packet, a typical one and one that fills a 1500-byte MTU.
var amesBenchSizes = []struct {
	name string
	n    int
}{{"64B", 64}, {"512B", 512}, {"1400B", 1400}}

// amesBenchPacket is an unrelayed planet-to-star packet with n bytes of
// content.
func amesBenchPacket(n int) []byte {
	content := make([]byte, n)
	for i := range content {
		content[i] = byte(i*7 + 1)
	}
	p := NewAmes(lane.ShipFromUint64(0x01020304), lane.ShipFromUint64(0x0102), 1, 2, content)
	return p.Append(nil)
}

func BenchmarkAmesParse(b *testing.B) {
	for _, s := range amesBenchSizes {
		b.Run(s.name, func(b *testing.B) {
			pkt := amesBenchPacket(s.n)
			var p AmesPacket
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Parse(pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAmesInsertOrigin(b *testing.B) {
	for _, s := range amesBenchSizes {
		b.Run(s.name, func(b *testing.B) {
			pkt := amesBenchPacket(s.n)
			buf := make([]byte, len(pkt), len(pkt)+AmesOriginLen)
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				buf = buf[:len(pkt)]
				copy(buf, pkt)
				if _, err := InsertOrigin(buf, amesTestOrigin); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAmesIsSTUN(b *testing.B) {
	req := amesSTUNRequest([12]byte{})
	b.ReportAllocs()
	for b.Loop() {
		if !IsSTUN(req) {
			b.Fatal("not STUN")
		}
	}
}
