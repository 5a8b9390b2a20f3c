package relay_test

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/amp"
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
				c.Amp = amp.Config{Rate: amp.MaxRate, Burst: amp.MaxBurst, NetRate: amp.MaxRate, NetBurst: amp.MaxBurst, ProofLifetime: -1}
			})
			out := relay.NewReader(4)
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
			benchRoundTrips(b, f, out, req, resp1k)
		})
	}
}

// BenchmarkDecideBatch measures what a server's batch costs the decision
// core in a full table: 64 requests for names never seen (each a new
// pending entry), then their 64 pages, as a reader decides them, with and
// without prefetching the batch's table slots first (Relay.Prefetch). The
// names cycle through a ring far larger than the batch, so a name's slot is
// cold by the time it comes round again.
func BenchmarkDecideBatch(b *testing.B) {
	const batch, ring = 64, 1 << 16
	for _, pending := range []int{0, 1_000_000} {
		for _, pf := range []bool{false, true} {
			b.Run(fmt.Sprintf("pending=%d/prefetch=%v", pending, pf), func(b *testing.B) {
				f := newFixture(b, func(c *relay.Config) { c.Amp = amp.Config{Rate: -1} })
				// As a server's reader: its own counter block, counted per batch.
				out := f.r.NewReader(2 * batch)
				out.CountPerBatch()
				buf := make([]byte, 0, 1600)
				for i := 0; i < pending; i++ {
					p := scry.NewPeek(name(b, "~nec", fmt.Sprintf("fill/%d", i)))
					buf = p.Append(buf[:0])
					out.Reset()
					src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 4000)
					f.r.Handle(buf, src, f.now, out)
				}
				reqs := make([][]byte, ring)
				pages := make([][]byte, ring)
				for i := range ring {
					nm := name(b, "~nec", fmt.Sprintf("b/%d", i))
					p := scry.NewPeek(nm)
					reqs[i] = p.Append(nil)
					pg := scry.NewPage(nm, scry.Data{Total: 1024, AuthKind: scry.AuthNone, Frag: make([]byte, 1024)})
					pages[i] = pg.Append(nil)
				}
				bufs := make([][]byte, batch)
				for i := range bufs {
					bufs[i] = make([]byte, 0, 1600+relay.GrowRoom)
				}
				run := func(src [][]byte, from netip.AddrPort, base int) {
					for i := range batch {
						bufs[i] = append(bufs[i][:0], src[(base+i)%ring]...)
					}
					out.Reset()
					if pf {
						for i := range batch {
							f.r.Prefetch(bufs[i], out)
						}
					}
					for i := range batch {
						f.r.Handle(bufs[i], from, f.now, out)
					}
					out.Flush()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for n := 0; n < b.N; n++ {
					base := n * batch
					run(reqs, alice, base)
					run(pages, necLane, base)
					if len(out.Sends) != batch {
						b.Fatalf("batch %d sent %d pages", n, len(out.Sends))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*batch*b.N), "ns/datagram")
			})
		}
	}
}

// BenchmarkDecideParallel runs request/page round trips from every
// goroutine at once (b.RunParallel; -cpu sets how many), each with its own
// Reader (Relay.NewReader: its own counter block) and its own requester lane and
// names, as the readers of a relay with io.sockets N do. What is left shared
// is the route table's lock and the pending table's shards;
// `-mutexprofile` shows which one the goroutines wait on.
func BenchmarkDecideParallel(b *testing.B) {
	f := newFixture(b, func(c *relay.Config) {
		c.Amp = amp.Config{Rate: amp.MaxRate, Burst: amp.MaxBurst, NetRate: amp.MaxRate, NetBurst: amp.MaxBurst, ProofLifetime: -1}
	})
	var next atomic.Uint32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1)
		out := f.r.NewReader(4)
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(id)}), 5000)
		path := fmt.Sprintf("parallel/%d", id)
		req := peek(b, "~nec", path, 0)
		p := scry.NewPage(name(b, "~nec", path), scry.Data{Total: 1024, AuthKind: scry.AuthSign, Auth: make([]byte, 64), Frag: make([]byte, 1024)})
		pg := p.Append(nil)
		rb := make([]byte, len(req), len(req)+relay.GrowRoom)
		gb := make([]byte, len(pg), len(pg)+relay.GrowRoom)
		for pb.Next() {
			copy(rb, req)
			out.Reset()
			f.r.Handle(rb, from, f.now, out)
			copy(gb, pg)
			out.Reset()
			f.r.Handle(gb, necLane, f.now, out)
		}
	})
}

// BenchmarkDecideDefences is BenchmarkDecide's round trip (a request and
// its 1 KiB page, table otherwise empty) with each defence on or off, to
// say what each costs a datagram: the amplification budget (addresses and
// networks, never refusing: its check runs in full), the duplicate filter
// (legacy ames only: a mesa round trip never reaches it) and the
// per-source caps and shares of the pending and route tables. The route
// table's lane learning and probes have no switch.
func BenchmarkDecideDefences(b *testing.B) {
	unlimited := amp.Config{Rate: amp.MaxRate, Burst: amp.MaxBurst, NetRate: amp.MaxRate, NetBurst: amp.MaxBurst, ProofLifetime: -1}
	noShares := func(c *relay.Config) {
		c.Pending.MaxEntriesPerSource = -1
		c.Pending.MaxRequestersPerSource = -1
		c.Pending.MaxOverflowPerSource = -1
		c.Routes.SourceDivisor = -1
	}
	for _, v := range []struct {
		name string
		mod  func(*relay.Config)
	}{
		{"all", func(c *relay.Config) { c.Amp = unlimited }},
		{"amp=off", func(c *relay.Config) { c.Amp = amp.Config{Rate: -1} }},
		{"amp=address-only", func(c *relay.Config) { c.Amp = unlimited; c.Amp.NetRate = -1 }},
		{"dup=off", func(c *relay.Config) { c.Amp = unlimited; c.Dup = relay.DupConfig{Window: -1} }},
		{"shares=off", func(c *relay.Config) { c.Amp = unlimited; noShares(c) }},
		{"none", func(c *relay.Config) {
			c.Amp = amp.Config{Rate: -1}
			c.Dup = relay.DupConfig{Window: -1}
			noShares(c)
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			f := newFixture(b, v.mod)
			out := relay.NewReader(4)
			req := peek(b, "~nec", "bench/request/path", 0)
			p := scry.NewPage(name(b, "~nec", "bench/request/path"), scry.Data{Total: 1024, AuthKind: scry.AuthSign, Auth: make([]byte, 64), Frag: make([]byte, 1024)})
			resp1k := p.Append(nil)
			benchRoundTrips(b, f, out, req, resp1k)
		})
	}
}

// benchRoundTrips times b.N round trips through f: req from alice, then
// its page resp from ~nec, each of which must send one page.
func benchRoundTrips(b *testing.B, f *fixture, out *relay.Reader, req, resp []byte) {
	rb := make([]byte, len(req), len(req)+relay.GrowRoom)
	pb := make([]byte, len(resp), len(resp)+relay.GrowRoom)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		copy(rb, req)
		out.Reset()
		f.r.Handle(rb, alice, f.now, out)
		copy(pb, resp)
		out.Reset()
		f.r.Handle(pb[:len(resp)], necLane, f.now, out)
		if len(out.Sends) != 1 {
			b.Fatalf("round trip %d sent %d pages", i, len(out.Sends))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/packet")
}

// BenchmarkDecideLegacy measures a legacy ames forward to a learned lane,
// a fresh packet each op: the duplicate filter records it, the route
// table plans and commits it, and the amplification budget (never
// refusing, no probes) admits it.
func BenchmarkDecideLegacy(b *testing.B) {
	f := newFixture(b, func(c *relay.Config) {
		c.Amp = amp.Config{Rate: amp.MaxRate, Burst: amp.MaxBurst, NetRate: amp.MaxRate, NetBurst: amp.MaxBurst, ProofLifetime: -1}
	})
	carol := netip.MustParseAddrPort("198.18.7.7:6000")
	f.handle(legacy(b, "~sampel-palnet", "~nec", 50, 0), carol) // carol's lane learned
	pkt := legacy(b, "~dapnep-ronmyl", "~sampel-palnet", 200, 0)
	buf := make([]byte, 0, len(pkt)+relay.GrowRoom)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := append(buf[:0], pkt...)
		p[len(p)-200], p[len(p)-199], p[len(p)-198] = byte(i), byte(i>>8), byte(i>>16)
		fixMug(p)
		f.out.Reset()
		f.r.Handle(p, alice, f.now, f.out)
		if len(f.out.Sends) != 1 || f.out.Sends[0].Addr != carol {
			b.Fatalf("packet %d: %d sends", i, len(f.out.Sends))
		}
	}
}

// BenchmarkDecideServer decides as a server's reader does, in the shape
// and configuration cmd/bench measures (a galaxy's relay, ~zod, with no
// sponsors; 16 requesters asking one planet at a pinned lane; every
// defence on in its default configuration): batches of 64 peeks from the
// requesters, then the 64 pages answering them, each batch's mugs hashed
// first (Reader.MugBatch) and counted per batch. The requesters' lanes
// are proven first, as requesters answering the relay's STUN probe are.
// ns/datagram is the decision's cost per datagram read, copying each
// datagram into its read buffer included.
func BenchmarkDecideServer(b *testing.B) {
	const batch, ring, requesters = 64, 1 << 14, 16
	for _, size := range []int{139, 1024} {
		b.Run(fmt.Sprintf("page=%d", size), func(b *testing.B) {
			pub := netip.MustParseAddrPort("198.51.100.20:13337")
			f := newFixture(b, func(c *relay.Config) {
				c.Ship = ship(b, "~zod")
				c.Pinned = map[lane.Ship]netip.AddrPort{ship(b, "~sampel-palnet"): pub}
			})
			out := f.r.NewReader(2 * batch)
			out.CountPerBatch()
			lanes := make([]netip.AddrPort, requesters)
			for i := range lanes {
				lanes[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(1 + i)}), 5000)
			}
			// A fragment of size bytes less the page's framing, so
			// that the page read is size bytes long.
			frag := size
			for frag > 0 {
				nm := name(b, "~sampel-palnet", "s/0")
				pg := scry.NewPage(nm, scry.Data{Total: 1, AuthKind: scry.AuthNone, Frag: make([]byte, frag)})
				if len(pg.Append(nil)) <= size {
					break
				}
				frag--
			}
			reqs := make([][]byte, ring)
			pages := make([][]byte, ring)
			for i := range ring {
				nm := name(b, "~sampel-palnet", fmt.Sprintf("s/%d", i))
				p := scry.NewPeek(nm)
				reqs[i] = p.Append(nil)
				pg := scry.NewPage(nm, scry.Data{Total: 1, AuthKind: scry.AuthNone, Frag: make([]byte, frag)})
				pages[i] = pg.Append(nil)
			}
			// Prove each requester's lane: its first page is refused
			// light and probed; it answers the probe.
			for i, l := range lanes {
				f.handle(reqs[i], l)
				for _, s := range f.handle(pages[i], pub) {
					var q scry.STUNRequest
					if q.Parse(s.Buf) == nil {
						r := scry.STUNResponse{TxID: q.TxID, Mapped: s.To}
						f.handle(r.Append(nil), s.To)
					}
				}
			}
			bufs := make([][]byte, batch)
			for i := range bufs {
				bufs[i] = make([]byte, 0, 1600+relay.GrowRoom)
			}
			var probes []scry.STUNResponse
			run := func(src [][]byte, base int, from func(i int) netip.AddrPort) int {
				for i := range batch {
					bufs[i] = append(bufs[i][:0], src[(base+i)%ring]...)
				}
				out.Reset()
				out.MugBatch(bufs)
				for i := range batch {
					f.r.Handle(bufs[i], from(base+i), f.now, out)
				}
				out.Flush()
				// Pages sent; probes among them are answered, as
				// cmd/bench's requesters answer them.
				pages := 0
				for _, m := range out.Sends {
					var q scry.STUNRequest
					if q.Parse(m.Buf[:m.N]) != nil {
						pages++
						continue
					}
					probes = append(probes, scry.STUNResponse{TxID: q.TxID, Mapped: m.Addr})
				}
				return pages
			}
			requester := func(i int) netip.AddrPort { return lanes[i%requesters] }
			publisher := func(int) netip.AddrPort { return pub }
			base := requesters
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				run(reqs, base, requester)
				if sent := run(pages, base, publisher); sent != batch {
					b.Fatalf("batch %d sent %d pages, want %d", n, sent, batch)
				}
				base += batch
				for _, r := range probes {
					f.handle(r.Append(nil), r.Mapped)
				}
				probes = probes[:0]
				// 64 round trips in 250 µs: about cmd/bench's rate.
				f.now += 250 * time.Microsecond
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*batch*b.N), "ns/datagram")
		})
	}
}
