package transport_test

import (
	"fmt"
	"testing"

	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

// benchPingPong bounces batches of k datagrams between two conns: each op
// is k datagrams a→b then k back b→a, so one op moves 2k datagrams and
// costs at least two write and two read calls.
func benchPingPong(b *testing.B, be backend, k int) {
	mem := transporttest.NewMemNetwork()
	defer mem.Close()
	opts := transport.Options{BatchSize: k}
	x := listenOn(b, be, mem, loopback4, opts)
	y := listenOn(b, be, mem, loopback4, opts)
	toY, toX := msgsTo(y.LocalAddr(), k), msgsTo(x.LocalAddr(), k)
	in := newReadMsgs(k, testDatagramCap)
	readAll := func(c transport.Conn) {
		for got := 0; got < k; {
			n, err := c.ReadBatch(in[got:])
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if n, err := x.WriteBatch(toY); n != k || err != nil {
			b.Fatalf("WriteBatch = %d, %v", n, err)
		}
		readAll(y)
		if n, err := y.WriteBatch(toX); n != k || err != nil {
			b.Fatalf("WriteBatch = %d, %v", n, err)
		}
		readAll(x)
	}
	b.ReportMetric(float64(2*k*b.N)/b.Elapsed().Seconds(), "pkts/s")
}

// BenchmarkLoopback is round-trip throughput over 127.0.0.1 with batches
// of 1 and 64, for the platform socket (udp) and the portable path.
func BenchmarkLoopback(b *testing.B) {
	for _, be := range []backend{udpBackend, portableBackend} {
		for _, k := range []int{1, 64} {
			b.Run(fmt.Sprintf("%v/batch=%d", be, k), func(b *testing.B) { benchPingPong(b, be, k) })
		}
	}
}

// BenchmarkMemNetwork is the same round trip over a MemNetwork.
func BenchmarkMemNetwork(b *testing.B) {
	for _, k := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", k), func(b *testing.B) { benchPingPong(b, memBackend, k) })
	}
}
