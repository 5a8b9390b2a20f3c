package relay_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
)

// TestCountPerBatchHoldsUntilFlush: a Reader that counts per batch adds
// nothing to the relay's counters until Flush (or Reset), then exactly
// what a Reader that flushes per datagram adds; one that does not counts
// each datagram as Handle returns. A per-batch Reader used by a second
// relay first hands the first relay what it holds.
func TestCountPerBatchHoldsUntilFlush(t *testing.T) {
	perDatagram := newFixture(t, nil)
	perBatch := newFixture(t, nil)
	perBatch.out.CountPerBatch()
	// decide hands f's relay one datagram, as a server's batch does: no
	// Reset between datagrams.
	decide := func(f *fixture, p []byte) {
		buf := append(make([]byte, 0, len(p)+relay.GrowRoom), p...)
		f.r.Handle(buf, alice, f.now, f.out)
	}
	pkts := [][]byte{peek(t, "~zod", "a", 0), peek(t, "~nec", "b", 0), []byte("hello")}
	for _, p := range pkts {
		decide(perDatagram, p)
		decide(perBatch, p)
		if sn := perBatch.snap(); sn.TotalIn() != 0 {
			t.Fatalf("per-batch reader: %d datagrams counted before a flush", sn.TotalIn())
		}
	}
	if sn := perDatagram.snap(); sn.TotalIn() != 3 || sn.Accounted() != 3 || sn.Events[relay.EventRequestsForwarded] != 2 {
		t.Fatalf("per-datagram reader: in %d, accounted %d, forwarded %d; want 3, 3, 2",
			sn.TotalIn(), sn.Accounted(), sn.Events[relay.EventRequestsForwarded])
	}
	perBatch.out.Flush()
	if got, want := perBatch.snap(), perDatagram.snap(); got != want {
		t.Errorf("after Flush\n got %+v\nwant %+v", got, want)
	}
	perBatch.out.Flush()
	if got, want := perBatch.snap(), perDatagram.snap(); got != want {
		t.Errorf("a second Flush added more\n got %+v\nwant %+v", got, want)
	}

	// Reset flushes too.
	decide(perBatch, peek(t, "~zod", "c", 0))
	perBatch.out.Reset()
	if sn := perBatch.snap(); sn.TotalIn() != 4 {
		t.Errorf("after Reset: %d datagrams counted, want 4", sn.TotalIn())
	}

	// Another relay deciding into the Reader: what the Reader held for the
	// first goes to the first.
	other := newFixture(t, nil)
	decide(perBatch, peek(t, "~zod", "d", 0))
	other.out = perBatch.out
	decide(other, peek(t, "~zod", "e", 0))
	if sn := perBatch.snap(); sn.TotalIn() != 5 {
		t.Errorf("first relay: %d datagrams counted once another decided into its Reader, want 5", sn.TotalIn())
	}
	perBatch.out.Flush()
	if sn := other.snap(); sn.TotalIn() != 1 {
		t.Errorf("second relay: %d datagrams counted, want 1", sn.TotalIn())
	}
	if sn := perBatch.snap(); sn.TotalIn() != 5 {
		t.Errorf("first relay: %d datagrams counted after the second's flush, want 5", sn.TotalIn())
	}
}

// TestServerCountsBeforeSending: a server's reader counts per batch, and
// flushes before it sends: once a forwarded request has arrived, the
// relay's counters show it, with no wait (over real UDP on 127.0.0.1).
func TestServerCountsBeforeSending(t *testing.T) {
	n := netw{}
	relayConn, galaxy, asker := n.listen(t), n.listen(t), n.listen(t)
	r, err := relay.New(relay.Config{HintNets: loopbackNets,
		Ship: ship(t, "~marzod"), Self: []netip.AddrPort{relayConn.LocalAddr()},
		Galaxies: map[lane.Ship]netip.AddrPort{ship(t, "~zod"): galaxy.LocalAddr()},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := relay.NewServer(r, []transport.Conn{relayConn}, relay.ServerConfig{})
	srv.Start()
	defer srv.Close()
	timer := time.AfterFunc(20*time.Second, func() { galaxy.Close() })
	defer timer.Stop()
	for i, path := range []string{"first", "second", "third"} {
		p := peek(t, "~zod", path, 0)
		if _, err := asker.WriteBatch([]transport.Message{{Buf: p, N: len(p), Addr: relayConn.LocalAddr()}}); err != nil {
			t.Fatal(err)
		}
		receive(t, galaxy)
		sn := r.Counters().Snapshot()
		if want := uint64(i + 1); sn.In[relay.KindPeek] != want || sn.Events[relay.EventRequestsForwarded] != want || sn.Out[relay.KindPeek] != want {
			t.Fatalf("after the galaxy got request %d: in %d, forwarded %d, out %d", i+1,
				sn.In[relay.KindPeek], sn.Events[relay.EventRequestsForwarded], sn.Out[relay.KindPeek])
		}
	}
}
