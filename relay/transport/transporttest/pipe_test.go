package transporttest

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/urbit-relay/relay/relay/transport"
)

var (
	pipeShip   = netip.MustParseAddrPort("169.254.13.37:31337")
	pipeRemote = netip.MustParseAddrPort("10.99.0.7:4001")
	pipeDest   = netip.MustParseAddrPort("10.99.0.5:4000")
)

func newTestPipe(t *testing.T, queue int) (relaySide, shipSide transport.Conn) {
	t.Helper()
	r, s := NewPipe(pipeShip, queue)
	t.Cleanup(func() { r.Close(); s.Close() })
	return r, s
}

func TestPipeAddresses(t *testing.T) {
	r, s := newTestPipe(t, 0)
	if r.LocalAddr() != pipeShip || s.LocalAddr() != pipeShip {
		t.Fatalf("LocalAddr %v, %v; want %v for both", r.LocalAddr(), s.LocalAddr(), pipeShip)
	}

	// The relay writes from the remote lane: the ship hears it from there.
	writeAll(t, r, msgsTo(pipeRemote, 3))
	got, _ := readN(t, s, 3)
	for i, m := range got {
		if m.Addr != pipeRemote || !bytes.Equal(m.Buf[:m.N], payload(i)) {
			t.Fatalf("ship read %d: %x from %v", i, m.Buf[:m.N], m.Addr)
		}
	}

	// The ship writes to a destination: the relay reads where it was
	// addressed. An IPv4-mapped destination is reported unmapped.
	mapped := netip.AddrPortFrom(netip.AddrFrom16(pipeDest.Addr().As16()), pipeDest.Port())
	writeAll(t, s, msgsTo(mapped, 2))
	got, _ = readN(t, r, 2)
	for i, m := range got {
		if m.Addr != pipeDest || !bytes.Equal(m.Buf[:m.N], payload(i)) {
			t.Fatalf("relay read %d: %x to %v", i, m.Buf[:m.N], m.Addr)
		}
	}
}

func TestPipeCopiesOnWrite(t *testing.T) {
	r, s := newTestPipe(t, 0)
	buf := []byte("first")
	writeAll(t, r, []transport.Message{{Buf: buf, N: len(buf), Addr: pipeRemote}})
	copy(buf, "XXXXX")
	got, _ := readN(t, s, 1)
	if string(got[0].Buf[:got[0].N]) != "first" {
		t.Fatalf("read %q: the pipe kept the caller's buffer", got[0].Buf[:got[0].N])
	}
}

func TestPipeQueueFullDrops(t *testing.T) {
	r, s := newTestPipe(t, 4)
	writeAll(t, r, msgsTo(pipeRemote, 10))
	if d := s.(transport.DropCounter).Drops(); d != 6 {
		t.Fatalf("ship side Drops = %d, want 6", d)
	}
	if d := r.(transport.DropCounter).Drops(); d != 0 {
		t.Fatalf("relay side Drops = %d, want 0", d)
	}
	got, batches := readN(t, s, 4)
	if len(batches) != 1 || got[3].Addr != pipeRemote || !bytes.Equal(got[3].Buf[:got[3].N], payload(3)) {
		t.Fatalf("batches %v, last %x", batches, got[3].Buf[:got[3].N])
	}
}

func TestPipeWriteRefuses(t *testing.T) {
	r, _ := newTestPipe(t, 0)
	for name, tt := range map[string]struct {
		m    transport.Message
		want error
	}{
		"zero addr": {transport.Message{Buf: []byte("x"), N: 1}, transport.ErrInvalidAddr},
		"port 0":    {transport.Message{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort("10.99.0.7:0")}, transport.ErrInvalidAddr},
		"ipv6":      {transport.Message{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort("[2001:db8::1]:1")}, transport.ErrInvalidAddr},
		"N > len":   {transport.Message{Buf: []byte("x"), N: 2, Addr: pipeRemote}, transport.ErrInvalidMessage},
	} {
		msgs := []transport.Message{{Buf: []byte("ok"), N: 2, Addr: pipeRemote}, tt.m}
		if n, err := r.WriteBatch(msgs); n != 1 || !errors.Is(err, tt.want) {
			t.Errorf("%s: WriteBatch = %d, %v; want 1, %v", name, n, err, tt.want)
		}
	}
	// An IPv6 ship lane takes IPv6 and refuses IPv4.
	r6, s6 := NewPipe(netip.MustParseAddrPort("[fe80::1]:1"), 0)
	defer r6.Close()
	defer s6.Close()
	if _, err := r6.WriteBatch(msgsTo(pipeRemote, 1)); !errors.Is(err, transport.ErrInvalidAddr) {
		t.Errorf("IPv4 to an IPv6 ship: %v", err)
	}
	writeAll(t, r6, msgsTo(netip.MustParseAddrPort("[2001:db8::1]:1"), 1))
}

func TestPipeClose(t *testing.T) {
	CheckGoroutineLeaks(t)
	r, s := newTestPipe(t, 0)
	errc := make(chan error, 1)
	go func() {
		_, err := s.ReadBatch(newReadMsgs(1, testDatagramCap))
		errc <- err
	}()
	waitReaderBlocked(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := <-errc; !isClosedErr(err) {
		t.Fatalf("blocked ReadBatch after Close: %v", err)
	}
	if _, err := s.ReadBatch(newReadMsgs(1, testDatagramCap)); !isClosedErr(err) {
		t.Fatalf("ReadBatch after Close: %v", err)
	}
	if n, err := s.WriteBatch(msgsTo(pipeDest, 1)); n != 0 || !isClosedErr(err) {
		t.Fatalf("WriteBatch after Close: %d, %v", n, err)
	}
	// The other end stays open; what it writes to the closed end is lost
	// without counting as a queue drop.
	writeAll(t, r, msgsTo(pipeRemote, 2))
	if d := s.(transport.DropCounter).Drops(); d != 0 {
		t.Fatalf("Drops = %d after writes to a closed end", d)
	}
}

// TestPipeConcurrent runs writers on both ends against one reader each;
// run with -race.
func TestPipeConcurrent(t *testing.T) {
	CheckGoroutineLeaks(t)
	const writers, each = 4, 200
	r, s := newTestPipe(t, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		for _, c := range []struct {
			end transport.Conn
			to  netip.AddrPort
		}{{r, pipeRemote}, {s, pipeDest}} {
			wg.Go(func() {
				buf := make([]byte, 8)
				for i := range each {
					buf[0], buf[1] = byte(w), byte(i) // reused at once: the pipe copied it
					if n, err := c.end.WriteBatch([]transport.Message{{Buf: buf, N: len(buf), Addr: c.to}}); n != 1 || err != nil {
						t.Errorf("WriteBatch = %d, %v", n, err)
						return
					}
				}
			})
		}
	}
	var got [2][]transport.Message
	var rg sync.WaitGroup
	for i, end := range []transport.Conn{s, r} {
		rg.Go(func() { got[i], _ = readN(t, end, writers*each) })
	}
	wg.Wait()
	rg.Wait()
	for i, want := range []netip.AddrPort{pipeRemote, pipeDest} {
		seen := map[[2]byte]bool{}
		for _, m := range got[i] {
			if m.Addr != want || m.N != 8 {
				t.Fatalf("end %d: %d bytes with Addr %v", i, m.N, m.Addr)
			}
			seen[[2]byte{m.Buf[0], m.Buf[1]}] = true
		}
		if len(seen) != writers*each {
			t.Fatalf("end %d: %d distinct datagrams, want %d", i, len(seen), writers*each)
		}
	}
}
