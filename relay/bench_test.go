package relay_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// BenchmarkDecide measures the decision function alone: one request decided
// and forwarded, then its response decided and sent back, per op, with the
// pending table holding `pending` other entries.
func BenchmarkDecide(b *testing.B) {
	for _, pending := range []int{0, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			// A budget no benchmark can exhaust: the amplification check
			// runs, and never refuses.
			f := newFixture(b, func(c *relay.Config) {
				c.Amp = relay.AmpConfig{Factor: 64, Rate: 1 << 30, Burst: 1 << 40, Initial: 1 << 40}
			})
			out := relay.NewOut(4)
			buf := make([]byte, 0, 1600)
			// Fill the table with live entries: distinct names from
			// distinct requesters (one source may hold only a tenth).
			for i := 0; i < pending; i++ {
				p := scry.NewPeek(name(b, "~nec", fmt.Sprintf("fill/%d", i)))
				buf = p.Append(buf[:0])
				out.Reset()
				src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 4000)
				f.r.Handle(buf, src, f.now, out)
			}
			if n := f.r.Pending().Len(); n < pending*9/10 {
				b.Fatalf("filled %d of %d entries", n, pending)
			}
			req := peek(b, "~nec", "bench/request/path", 0)
			resp1k := make([]byte, 0, 1600)
			{
				p := scry.NewPage(name(b, "~nec", "bench/request/path"), scry.Data{Total: 1024, AuthKind: scry.AuthSign, Auth: make([]byte, 64), Frag: make([]byte, 1024)})
				resp1k = p.Append(resp1k)
			}
			rb := make([]byte, len(req), len(req)+relay.GrowRoom)
			pb := make([]byte, len(resp1k), len(resp1k)+relay.GrowRoom)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				copy(rb, req)
				out.Reset()
				f.r.Handle(rb, alice, f.now, out)
				copy(pb, resp1k)
				out.Reset()
				f.r.Handle(pb[:len(resp1k)], necLane, f.now, out)
				if len(out.Sends) != 1 {
					b.Fatalf("round trip %d sent %d pages", i, len(out.Sends))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/packet")
		})
	}
}
