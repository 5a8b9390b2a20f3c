package main

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/urbit-relay/relay/relay/transport"
)

// TestPaceStep: the whole requests due go out, at most the window's free
// places; a fraction is carried; nothing is carried past a full window.
func TestPaceStep(t *testing.T) {
	for _, c := range []struct {
		due, perTick float64
		room         int
		n            int
		carry        float64
	}{
		{0.5, 2.7, 10, 3, 0.2},
		{0.5, 2.7, 2, 2, 0}, // capped: the rest is dropped
		{0.5, 2.7, 3, 3, 0}, // exactly full
		{0, 0.25, 10, 0, 0.25},
		{0.9, 0.25, 0, 0, 0}, // no room
		{0.9, 5, -3, 0, 0},   // late answers put more in flight than the window
	} {
		n, carry := paceStep(c.due, c.perTick, c.room)
		if n != c.n || carry < c.carry-1e-9 || carry > c.carry+1e-9 {
			t.Errorf("paceStep(%v, %v, %d) = %d, %v; want %d, %v", c.due, c.perTick, c.room, n, carry, c.n, c.carry)
		}
	}
	// A quarter a tick with room: one request every fourth tick.
	due, sent := 0.0, 0
	for range 40 {
		var n int
		n, due = paceStep(due, 0.25, 100)
		sent += n
	}
	if sent != 10 {
		t.Errorf("40 ticks of a quarter sent %d, want 10", sent)
	}
}

// holeGen returns a load generator of two requesters and a publisher at
// base, sending to a socket that reads nothing; both are closed when t ends.
func holeGen(t *testing.T, base int) *loadGen {
	t.Helper()
	hole, err := transport.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hole.Close() })
	g, err := newLoadGen(hole.LocalAddr(), 2, 1, base, 256, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.close)
	return g
}

// TestPacedLoopWindow: against a server that answers nothing, a paced loop
// however fast puts no more than window a pair in flight (before it writes
// them off, after stall without a page).
func TestPacedLoopWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("opens sockets")
	}
	g := holeGen(t, 46100)
	g.stall = time.Minute
	g.pacedLoop(4, 1e6, 50*time.Millisecond)
	if sent := g.seq.Load(); sent != 8 {
		t.Errorf("sent %d requests with none answered, want the window: 4 a pair, 2 pairs", sent)
	}
}

// TestPacedLoopWritesOff: when no page comes for stall, what is in flight
// is counted lost and the window is filled again, as closedLoop does, so
// that requests lost to a full socket buffer do not shrink it for good.
func TestPacedLoopWritesOff(t *testing.T) {
	if testing.Short() {
		t.Skip("opens sockets")
	}
	g := holeGen(t, 46150)
	g.stall = 30 * time.Millisecond
	g.pacedLoop(4, 1e6, 150*time.Millisecond)
	lost, sent := g.lost.Load(), g.seq.Load()
	if lost < 8 || sent != lost+8 {
		t.Errorf("%d sent, %d written off: want each window of 8 written off after a stall and a full one after it", sent, lost)
	}
}

// TestPacedLoopRate: against the bare forwarder, a paced loop carries
// traffic and does not exceed its rate (an upper bound only: a slow
// machine may fall short of it, never over).
func TestPacedLoopRate(t *testing.T) {
	if testing.Short() {
		t.Skip("opens sockets")
	}
	const base = 46200
	c, err := transport.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{conns: []transport.Conn{c}, base: base, pubs: 1}
	f.start()
	defer f.close()
	g, err := newLoadGen(c.LocalAddr(), 2, 1, base, 256, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pubs sync.WaitGroup
	g.runPublishers(&pubs)
	defer func() {
		g.close()
		pubs.Wait()
	}()
	const rate = 4000
	got := g.pacedLoop(16, rate, 500*time.Millisecond)
	if got <= 0 || got > rate*1.1 {
		t.Errorf("paced at %d round trips a second, carried %.0f", rate, got)
	}
	t.Logf("paced at %d round trips a second, carried %.0f", rate, got)
}

// TestRateNeedsSlot: a held rate measured one configuration after another
// is refused, not run as a closed loop under a rate's name.
func TestRateNeedsSlot(t *testing.T) {
	if err := compareMain(benchConfig{pairs: 1, rate: 1000}, []string{"default"}, "", 1, 0); err == nil {
		t.Error("-rate without -slot was accepted")
	}
}
