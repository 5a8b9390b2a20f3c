package relay_test

import (
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
	"github.com/urbit-relay/relay/scry"
)

// TestHonestDownloadEndToEnd is TestHonestBulkDownload over sockets, the
// same test on the in-memory network and on real UDP: a relay.Server with
// the default config fronting ~marzod at 127.1.0.1, the ship's process at
// 127.2.0.1 answering every peek with a 1.4 KB page, and a requester at
// 127.3.0.1 (each in a /16 of its own, so the budget sees three networks)
// fetching 2,000 fragments with 32 in flight, asking again after 1 s. The
// requester does not answer STUN (a bare client, not vere), so the budget
// alone must let it through: every fragment at the first ask.
func TestHonestDownloadEndToEnd(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := transporttest.NewMemNetwork()
			mem.SetDelay(time.Millisecond)
			testHonestDownload(t, netw{mem: mem})
		})
	})
	t.Run("udp", func(t *testing.T) {
		transporttest.CheckGoroutineLeaks(t)
		testHonestDownload(t, netw{})
	})
}

// listenAt opens a socket at ip on a port the network picks.
func (n netw) listenAt(t testing.TB, ip string) transport.Conn {
	t.Helper()
	c, err := n.listenAddr(netip.AddrPortFrom(netip.MustParseAddr(ip), 0))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testHonestDownload(t *testing.T, n netw) {
	const frags, window = 2000, 32
	relayConn := n.listenAt(t, "127.1.0.1")
	pubConn := n.listenAt(t, "127.2.0.1")
	reqConn := n.listenAt(t, "127.3.0.1")
	r, err := relay.New(relay.Config{
		Ship: ship(t, "~marzod"), ShipLane: pubConn.LocalAddr(), Self: []netip.AddrPort{relayConn.LocalAddr()},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := relay.NewServer(r, []transport.Conn{relayConn}, relay.ServerConfig{})
	srv.Start()
	// Closed at the end, or when the test fails, so every goroutine ends.
	stop := func() { srv.Close(); pubConn.Close(); reqConn.Close() }
	defer stop()
	pubDone := make(chan struct{})
	go func() { // the ship: a page for every peek, to where it came from
		defer close(pubDone)
		readPackets(pubConn, scry.TypePeek, func(p *scry.Packet, from netip.AddrPort) {
			pg := scry.NewPage(p.Name, scry.Data{Total: frags * 1400, AuthKind: scry.AuthSign,
				Auth: make([]byte, 64), Frag: make([]byte, 1300)})
			b := pg.Append(nil)
			pubConn.WriteBatch([]transport.Message{{Buf: b, N: len(b), Addr: from}})
		})
	}()
	pages := make(chan int, 4*window)
	reqDone := make(chan struct{})
	go func() { // the requester's socket: each page's fragment number
		defer close(reqDone)
		defer close(pages)
		readPackets(reqConn, scry.TypePage, func(p *scry.Packet, _ netip.AddrPort) {
			if i, err := strconv.Atoi(string(p.Name.Path[len("big/"):])); err == nil {
				pages <- i
			}
		})
	}()
	ask := func(i int) {
		pk := scry.NewPeek(name(t, "~marzod", fmt.Sprintf("big/%d", i)))
		b := pk.Append(nil)
		reqConn.WriteBatch([]transport.Message{{Buf: b, N: len(b), Addr: relayConn.LocalAddr()}})
	}
	start := time.Now()
	sentAt := map[int]time.Time{}
	retried := map[int]bool{}
	next, done := 0, 0
	for ; next < window; next++ {
		ask(next)
		sentAt[next] = time.Now()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	deadline := time.After(60 * time.Second)
	for done < frags {
		select {
		case i := <-pages:
			if _, ok := sentAt[i]; !ok {
				continue // a duplicate
			}
			delete(sentAt, i)
			done++
			if next < frags {
				ask(next)
				sentAt[next] = time.Now()
				next++
			}
		case <-tick.C:
			for i, at := range sentAt {
				if time.Since(at) >= time.Second {
					retried[i] = true
					ask(i)
					sentAt[i] = time.Now()
				}
			}
		case <-deadline:
			t.Fatalf("%d of %d fragments after 60 s", done, frags)
		}
	}
	tick.Stop()
	took := time.Since(start)
	stop()
	<-pubDone
	<-reqDone
	sn := r.Counters().Snapshot()
	t.Logf("%d fragments through the relay, window %d: %d asked again, all in %v; throttled %d, probes %d",
		frags, window, len(retried), took.Round(time.Millisecond), sn.Events[relay.EventAmpThrottled], sn.Events[relay.EventProbesSent])
	if len(retried) != 0 || sn.Events[relay.EventAmpThrottled] != 0 {
		t.Errorf("%d fragments asked again, %d pages throttled: want every one at the first ask", len(retried), sn.Events[relay.EventAmpThrottled])
	}
}

// readPackets reads c until it is closed, calling each for every mesa
// packet of type typ, with the lane it came from.
func readPackets(c transport.Conn, typ scry.Type, each func(p *scry.Packet, from netip.AddrPort)) {
	msgs := make([]transport.Message, 16)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 2048)
	}
	for {
		k, err := c.ReadBatch(msgs)
		if err != nil {
			return
		}
		for _, m := range msgs[:k] {
			var p scry.Packet
			if p.Parse(m.Buf[:m.N]) == nil && p.Header.Type == typ {
				each(&p, m.Addr)
			}
		}
	}
}
