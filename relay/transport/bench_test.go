package transport

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkGSO is the cost of WriteBatch for 64 datagrams of 1030 bytes
// over 127.0.0.1, with UDP GSO on and off: to one destination (one run),
// and to two destinations interleaved and put in order by GroupByAddr
// (two runs; the GroupByAddr call is timed with the write). Each op then
// reads the batch back, untimed, so that no datagram is dropped (a drop is
// cheaper than a delivery and would flatter the faster sender).
// ns/datagram is the time in GroupByAddr and WriteBatch over datagrams
// written. On loopback the sender's system call also carries the receive
// path up to the receiving socket, where a GSO send is cut into datagrams
// again, so the figures understate what GSO saves on a real NIC.
func BenchmarkGSO(b *testing.B) {
	const (
		k    = DefaultBatchSize
		size = 1030
	)
	for _, dests := range []int{1, 2} {
		for _, gso := range []bool{true, false} {
			b.Run(fmt.Sprintf("dests=%d/gso=%v", dests, gso), func(b *testing.B) {
				tx := listenUDP(b, loopback4, Options{DisableGSO: !gso})
				if g, ok := tx.(GSOer); !ok || g.GSO() != gso {
					b.Skip("UDP GSO unavailable")
				}
				rx := make([]Conn, dests)
				for i := range rx {
					rx[i] = listenUDP(b, loopback4, Options{})
				}
				orig := make([]Message, k)
				for i := range orig {
					orig[i] = Message{Buf: make([]byte, size), N: size, Addr: rx[i%dests].LocalAddr()}
				}
				msgs := make([]Message, k)
				in := newReadMsgs(k, testDatagramCap)
				var writing time.Duration
				b.ReportAllocs()
				for b.Loop() {
					copy(msgs, orig)
					start := time.Now()
					GroupByAddr(msgs)
					n, err := tx.WriteBatch(msgs)
					writing += time.Since(start)
					if n != k || err != nil {
						b.Fatalf("WriteBatch = %d, %v", n, err)
					}
					for _, c := range rx {
						for got := 0; got < k/dests; {
							n, err := c.ReadBatch(in[got : k/dests])
							if err != nil {
								b.Fatal(err)
							}
							got += n
						}
					}
				}
				b.ReportMetric(float64(writing.Nanoseconds())/float64(k*b.N), "ns/datagram")
				if g := tx.(GSOer).GSO(); g != gso {
					b.Fatalf("GSO() = %v after the run, want %v", g, gso)
				}
			})
		}
	}
}

// BenchmarkGRO is the cost of moving 64 datagrams of 1030 bytes, sent as
// one GSO run over 127.0.0.1, into a receiver with UDP GRO on and off:
// WriteBatch and the ReadBatch calls that take them, timed together (on
// loopback the sender's system call carries the receive path up to the
// socket queue, where without GRO the run is cut into 64 socket buffers).
// ns/datagram is the time over datagrams moved.
func BenchmarkGRO(b *testing.B) {
	const (
		k    = DefaultBatchSize
		size = 1030
	)
	for _, gro := range []bool{true, false} {
		b.Run(fmt.Sprintf("gro=%v", gro), func(b *testing.B) {
			tx := listenUDP(b, loopback4, Options{})
			rx := listenUDP(b, loopback4, Options{DisableGRO: !gro})
			if g, ok := tx.(GSOer); !ok || !g.GSO() {
				b.Skip("UDP GSO unavailable")
			}
			if g, ok := rx.(GROer); !ok || g.GRO() != gro {
				b.Skip("UDP GRO unavailable")
			}
			msgs := make([]Message, k)
			for i := range msgs {
				msgs[i] = Message{Buf: make([]byte, size), N: size, Addr: rx.LocalAddr()}
			}
			in := newReadMsgs(k, testDatagramCap)
			b.ReportAllocs()
			for b.Loop() {
				if n, err := tx.WriteBatch(msgs); n != k || err != nil {
					b.Fatalf("WriteBatch = %d, %v", n, err)
				}
				for got := 0; got < k; {
					n, err := rx.ReadBatch(in[got:])
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(k*b.N), "ns/datagram")
		})
	}
}
