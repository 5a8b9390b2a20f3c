package transporttest

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urbit-relay/relay/relay/transport"
)

var (
	memA = netip.MustParseAddrPort("10.0.0.1:1000")
	memB = netip.MustParseAddrPort("10.0.0.2:2000")
	memC = netip.MustParseAddrPort("10.0.0.3:3000")
)

// memTrio returns a network with conns at memA, memB and memC.
func memTrio(t testing.TB) (*MemNetwork, transport.Conn, transport.Conn, transport.Conn) {
	t.Helper()
	n := NewMemNetwork()
	t.Cleanup(func() { n.Close() })
	return n, listen(t, n, memA),
		listen(t, n, memB),
		listen(t, n, memC)
}

// drain reads every datagram queued at c without blocking (MemNetwork
// deliveries without delay are queued by the time WriteBatch returns).
func drain(t testing.TB, c transport.Conn) []transport.Message {
	t.Helper()
	mc := c.(*memConn)
	var out []transport.Message
	for len(mc.queue) > 0 {
		msgs := newReadMsgs(len(mc.queue), testDatagramCap)
		n, err := c.ReadBatch(msgs)
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
		out = append(out, msgs[:n]...)
	}
	return out
}

func TestMemListen(t *testing.T) {
	n := NewMemNetwork()
	defer n.Close()
	a, err := n.Listen(memA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen(memA); err == nil {
		t.Error("second Listen on a taken address succeeded")
	}
	if _, err := n.Listen(netip.MustParseAddrPort("[::ffff:10.0.0.1]:1000")); err == nil {
		t.Error("Listen on the IPv4-mapped form of a taken address succeeded")
	}
	for _, bad := range []string{"0.0.0.0:1", "[::]:1"} {
		if _, err := n.Listen(netip.MustParseAddrPort(bad)); err == nil {
			t.Errorf("Listen(%s) succeeded, want an error for an unspecified address", bad)
		}
	}
	e1, err1 := n.Listen(netip.MustParseAddrPort("10.0.0.1:0"))
	e2, err2 := n.Listen(netip.MustParseAddrPort("10.0.0.1:0"))
	if err1 != nil || err2 != nil {
		t.Fatalf("ephemeral Listen: %v, %v", err1, err2)
	}
	if p1, p2 := e1.LocalAddr().Port(), e2.LocalAddr().Port(); p1 < memEphemeralFirst || p1 == p2 {
		t.Errorf("ephemeral ports %d, %d: want distinct ports from %d", p1, p2, memEphemeralFirst)
	}
	a.Close()
	if _, err := n.Listen(memA); err != nil {
		t.Errorf("Listen after Close of the previous owner: %v", err)
	}
	n.Close()
	if _, err := n.Listen(memB); !isClosedErr(err) {
		t.Errorf("Listen on closed network = %v, want net.ErrClosed", err)
	}
	if _, err := e1.ReadBatch(newReadMsgs(1, 1)); !isClosedErr(err) {
		t.Errorf("ReadBatch on conn of closed network = %v, want net.ErrClosed", err)
	}
}

// TestMemConnHasNoKernelBuffers: a Conn that is no kernel socket reports no
// granted buffers (moved from transport's TestGrantedBuffers).
func TestMemConnHasNoKernelBuffers(t *testing.T) {
	m, err := NewMemNetwork().Listen(netip.MustParseAddrPort("10.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, _, ok := transport.GrantedBuffers(m); ok {
		t.Error("an in-memory Conn reports kernel buffers")
	}
}

func TestMemLossFunc(t *testing.T) {
	n, a, b, _ := memTrio(t)
	n.SetLossFunc(func(from, to netip.AddrPort, p []byte) bool {
		return from == memA && p[2]%2 == 1 // drop odd-numbered datagrams from A
	})
	writeAll(t, a, msgsTo(memB, 10))
	writeAll(t, b, msgsTo(memA, 10))
	got := drain(t, b)
	if len(got) != 5 {
		t.Fatalf("B got %d datagrams, want the 5 even ones", len(got))
	}
	for i, m := range got {
		if m.Buf[2] != byte(2*i) {
			t.Errorf("datagram %d is payload %d, want %d", i, m.Buf[2], 2*i)
		}
	}
	if got := len(drain(t, a)); got != 10 {
		t.Errorf("A got %d datagrams from B, want all 10", got)
	}
	want := MemStats{Sent: 10, Delivered: 5, DroppedLoss: 5}
	if s := n.LinkStats(memA, memB); s != want {
		t.Errorf("LinkStats(A→B) = %+v, want %+v", s, want)
	}
	if s := n.Stats(); s.Sent != 20 || s.Delivered != 15 || s.DroppedLoss != 5 {
		t.Errorf("Stats = %+v, want 20 sent, 15 delivered, 5 lost", s)
	}
	n.SetLossFunc(nil)
	writeAll(t, a, msgsTo(memB, 2))
	if got := len(drain(t, b)); got != 2 {
		t.Errorf("after SetLossFunc(nil) B got %d, want 2", got)
	}
}

// lossPattern sends count datagrams A→B on a fresh network with the given
// seed and loss rate and returns which arrived.
func lossPattern(t *testing.T, seed uint64, rate float64, count int) []bool {
	t.Helper()
	n, a, b, _ := memTrio(t)
	n.SetSeed(seed)
	n.SetLossRate(rate)
	writeAll(t, a, msgsTo(memB, count))
	arrived := make([]bool, count)
	for _, m := range drain(t, b) {
		arrived[int(m.Buf[1])<<8|int(m.Buf[2])] = true
	}
	return arrived
}

func TestMemLossRateDeterministic(t *testing.T) {
	const (
		count = 1000
		rate  = 0.3
	)
	p1 := lossPattern(t, 42, rate, count)
	p2 := lossPattern(t, 42, rate, count)
	p3 := lossPattern(t, 43, rate, count)
	same, lost := true, 0
	for i := range p1 {
		same = same && p1[i] == p2[i]
		if !p1[i] {
			lost++
		}
	}
	if !same {
		t.Error("same seed gave different loss patterns")
	}
	differs := false
	for i := range p1 {
		differs = differs || p1[i] != p3[i]
	}
	if !differs {
		t.Error("different seeds gave identical loss patterns")
	}
	// 1000 draws at p=0.3: mean 300, sd ≈ 14.5; ±100 is ~7 sd.
	if lost < 200 || lost > 400 {
		t.Errorf("lost %d of %d at rate %v", lost, count, rate)
	}
}

func TestMemLinkLossRate(t *testing.T) {
	n, a, b, _ := memTrio(t)
	n.SetLinkLossRate(memA, memB, 1)
	writeAll(t, a, msgsTo(memB, 5))
	writeAll(t, b, msgsTo(memA, 5))
	if got := len(drain(t, b)); got != 0 {
		t.Errorf("A→B at loss 1 delivered %d", got)
	}
	if got := len(drain(t, a)); got != 5 {
		t.Errorf("B→A (no loss) delivered %d, want 5", got)
	}
	n.SetLinkLossRate(memA, memB, -1) // back to the network's rate (0)
	writeAll(t, a, msgsTo(memB, 5))
	if got := len(drain(t, b)); got != 5 {
		t.Errorf("A→B after reset delivered %d, want 5", got)
	}
}

func TestMemFirewall(t *testing.T) {
	n, a, b, c := memTrio(t)
	n.SetFirewall(memB, true)
	writeAll(t, a, msgsTo(memB, 1))
	if got := len(drain(t, b)); got != 0 {
		t.Fatalf("unsolicited A→B through B's firewall: %d delivered", got)
	}
	if s := n.LinkStats(memA, memB); s.DroppedFirewall != 1 {
		t.Errorf("LinkStats(A→B) = %+v, want 1 firewall drop", s)
	}
	// B reaches out to A, which opens a pinhole for A only.
	writeAll(t, b, msgsTo(memA, 1))
	if got := len(drain(t, a)); got != 1 {
		t.Fatalf("outbound B→A delivered %d, want 1", got)
	}
	writeAll(t, a, msgsTo(memB, 1))
	if got := len(drain(t, b)); got != 1 {
		t.Errorf("A→B after B→A delivered %d, want 1", got)
	}
	writeAll(t, c, msgsTo(memB, 1))
	if got := len(drain(t, b)); got != 0 {
		t.Errorf("C→B (no pinhole for C) delivered %d, want 0", got)
	}
	// A pinhole is per address and port.
	a2 := listen(t, n, netip.MustParseAddrPort("10.0.0.1:1001"))
	writeAll(t, a2, msgsTo(memB, 1))
	if got := len(drain(t, b)); got != 0 {
		t.Errorf("A's other port → B delivered %d, want 0", got)
	}
	n.SetFirewall(memB, false)
	writeAll(t, c, msgsTo(memB, 1))
	if got := len(drain(t, b)); got != 1 {
		t.Errorf("C→B with firewall off delivered %d, want 1", got)
	}
}

func TestMemPinholeLifetime(t *testing.T) {
	const lifetime = 30 * time.Second
	synctest.Test(t, func(t *testing.T) {
		n, a, b, _ := memTrio(t)
		n.SetFirewall(memB, true)
		n.SetPinholeLifetime(lifetime)
		writeAll(t, b, msgsTo(memA, 1))
		drain(t, a)
		time.Sleep(lifetime - time.Nanosecond)
		writeAll(t, a, msgsTo(memB, 1))
		if got := len(drain(t, b)); got != 1 {
			t.Errorf("A→B just inside the pinhole lifetime delivered %d, want 1", got)
		}
		time.Sleep(time.Nanosecond)
		writeAll(t, a, msgsTo(memB, 1))
		if got := len(drain(t, b)); got != 0 {
			t.Errorf("A→B after the pinhole expired delivered %d, want 0", got)
		}
	})
}

func TestMemQueueFull(t *testing.T) {
	const queueLen = 4
	n := NewMemNetwork()
	defer n.Close()
	n.SetQueueLen(queueLen)
	a := listen(t, n, memA)
	b := listen(t, n, memB)
	// The sender is never blocked by a full queue.
	writeAll(t, a, msgsTo(memB, 10))
	if d := b.(transport.DropCounter).Drops(); d != 10-queueLen {
		t.Errorf("Drops = %d, want %d", d, 10-queueLen)
	}
	if s := n.LinkStats(memA, memB); s.Delivered != queueLen || s.DroppedQueueFull != 10-queueLen {
		t.Errorf("LinkStats = %+v, want %d delivered, %d queue-full", s, queueLen, 10-queueLen)
	}
	got := drain(t, b)
	if len(got) != queueLen || got[queueLen-1].Buf[2] != queueLen-1 {
		t.Errorf("queued %d datagrams, want the first %d", len(got), queueLen)
	}
}

func TestMemNoListener(t *testing.T) {
	n, a, _, _ := memTrio(t)
	nobody := netip.MustParseAddrPort("10.0.0.9:9")
	writeAll(t, a, msgsTo(nobody, 3))
	if s := n.LinkStats(memA, nobody); s.DroppedNoListener != 3 {
		t.Errorf("LinkStats = %+v, want 3 no-listener drops", s)
	}
}

// TestMemDelay checks that delayed datagrams arrive exactly when due, in
// order per link, and that Close discards those still in flight.
func TestMemDelay(t *testing.T) {
	const delay = 50 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		n, a, b, c := memTrio(t)
		n.SetDelay(delay)
		n.SetLinkDelay(memC, memB, 2*delay)

		start := time.Now()
		arrivals := make(chan time.Time, 8)
		readDone := make(chan error, 1)
		go func() {
			msgs := newReadMsgs(1, testDatagramCap)
			for {
				if _, err := b.ReadBatch(msgs); err != nil {
					readDone <- err
					return
				}
				arrivals <- time.Now()
			}
		}()
		writeAll(t, a, msgsTo(memB, 1))
		writeAll(t, c, msgsTo(memB, 1))
		synctest.Wait()
		if len(arrivals) != 0 {
			t.Fatal("delayed datagram arrived at once")
		}
		time.Sleep(delay - time.Nanosecond)
		synctest.Wait()
		if len(arrivals) != 0 {
			t.Fatal("datagram arrived before its delay")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if len(arrivals) != 1 {
			t.Fatalf("%d datagrams after the A→B delay, want 1", len(arrivals))
		}
		if got := (<-arrivals).Sub(start); got != delay {
			t.Errorf("A→B took %v, want %v", got, delay)
		}
		time.Sleep(delay)
		synctest.Wait()
		if got := (<-arrivals).Sub(start); got != 2*delay {
			t.Errorf("C→B (own link delay) took %v, want %v", got, 2*delay)
		}
		if s := n.Stats(); s.Sent != 2 || s.Delivered != 2 {
			t.Errorf("Stats = %+v, want 2 sent and delivered", s)
		}

		// FIFO per link: shortening a link's delay does not let a later
		// datagram overtake an earlier one.
		n.SetLinkDelay(memA, memB, 10*delay)
		writeAll(t, a, []transport.Message{{Buf: []byte{1}, N: 1, Addr: memB}})
		n.SetLinkDelay(memA, memB, delay)
		writeAll(t, a, []transport.Message{{Buf: []byte{2}, N: 1, Addr: memB}})
		time.Sleep(2 * delay)
		synctest.Wait()
		if len(arrivals) != 0 {
			t.Fatal("a later datagram overtook an earlier one on the same link")
		}
		time.Sleep(8 * delay)
		synctest.Wait()
		if len(arrivals) != 2 {
			t.Fatalf("%d datagrams after the long delay, want both", len(arrivals))
		}

		// In flight at Close: discarded, and the reader ends.
		writeAll(t, a, msgsTo(memB, 1))
		n.Close()
		if err := <-readDone; !isClosedErr(err) {
			t.Errorf("reader ended with %v, want net.ErrClosed", err)
		}
		time.Sleep(2 * delay)
		synctest.Wait()
		if s := n.Stats(); s.Delivered != 4 {
			t.Errorf("Stats = %+v, want the in-flight datagram not delivered", s)
		}
	})
}

func TestMemCloseLeaksNothing(t *testing.T) {
	CheckGoroutineLeaks(t)
	n, a, b, _ := memTrio(t)
	n.SetDelay(time.Hour) // a pending timer must not keep anything alive
	writeAll(t, a, msgsTo(memB, 1))
	done := make(chan error)
	go func() {
		_, err := b.ReadBatch(newReadMsgs(1, 1))
		done <- err
	}()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !isClosedErr(err) {
		t.Errorf("ReadBatch = %v, want net.ErrClosed", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second network Close = %v", err)
	}
	if _, err := a.WriteBatch(msgsTo(memB, 1)); !isClosedErr(err) {
		t.Errorf("WriteBatch after network Close = %v, want net.ErrClosed", err)
	}
}
