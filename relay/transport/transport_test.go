package transport_test

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

func TestSendReceive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		transporttest.CheckGoroutineLeaks(t)
		a, c := pair(t, b)
		writeAll(t, a, msgsTo(c.LocalAddr(), 1))
		got, _ := readN(t, c, 1)
		if want := payload(0); !bytes.Equal(got[0].Buf[:got[0].N], want) {
			t.Errorf("payload = %x, want %x", got[0].Buf[:got[0].N], want)
		}
		if got[0].Addr != a.LocalAddr() {
			t.Errorf("Addr = %v, want sender %v", got[0].Addr, a.LocalAddr())
		}
		if !a.LocalAddr().Addr().Is4() || a.LocalAddr().Port() == 0 {
			t.Errorf("LocalAddr = %v, want 127.0.0.1 with a chosen port", a.LocalAddr())
		}
	})
}

func TestBatchRoundTrip(t *testing.T) {
	const count = 8
	forEachBackend(t, func(t *testing.T, b backend) {
		a, c := pair(t, b)
		writeAll(t, a, msgsTo(c.LocalAddr(), count))
		got, batches := readN(t, c, count)
		for i, m := range got {
			if !bytes.Equal(m.Buf[:m.N], payload(i)) || m.Addr != a.LocalAddr() {
				t.Errorf("datagram %d = %x from %v, want %x from %v", i, m.Buf[:m.N], m.Addr, payload(i), a.LocalAddr())
			}
		}
		// Loopback and MemNetwork queue the datagrams inside WriteBatch,
		// so a batching backend returns them all from one call.
		if b.batched() && len(batches) != 1 {
			t.Errorf("read %d datagrams in batches %v, want one batch", count, batches)
		}
		if !b.batched() && len(batches) != count {
			t.Errorf("portable path read batches %v, want one datagram per call", batches)
		}
		// And back the other way.
		writeAll(t, c, msgsTo(a.LocalAddr(), count))
		if back, _ := readN(t, a, count); back[count-1].Addr != c.LocalAddr() {
			t.Errorf("reply from %v, want %v", back[count-1].Addr, c.LocalAddr())
		}
	})
}

func TestWriteBufferReuse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		a, c := pair(t, b)
		buf := []byte("original")
		writeAll(t, a, []transport.Message{{Buf: buf, N: len(buf), Addr: c.LocalAddr()}})
		copy(buf, "CLOBBERD") // allowed as soon as WriteBatch returns
		got, _ := readN(t, c, 1)
		if s := string(got[0].Buf[:got[0].N]); s != "original" {
			t.Errorf("received %q, want %q", s, "original")
		}
	})
}

func TestReadTruncates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		a, c := pair(t, b)
		big := bytes.Repeat([]byte("0123456789"), 10)
		writeAll(t, a, []transport.Message{{Buf: big, N: len(big), Addr: c.LocalAddr()}})
		msgs := newReadMsgs(1, 10)
		n, err := c.ReadBatch(msgs)
		if err != nil || n != 1 {
			t.Fatalf("ReadBatch = %d, %v", n, err)
		}
		if msgs[0].N != 10 || string(msgs[0].Buf) != "0123456789" {
			t.Errorf("truncated read = %d %q, want 10 %q", msgs[0].N, msgs[0].Buf[:msgs[0].N], "0123456789")
		}
		if !msgs[0].Trunc {
			t.Error("a datagram longer than Buf read without Trunc set")
		}
		// The flag is per read: a datagram that fits, read into the same
		// message, clears it.
		writeAll(t, a, []transport.Message{{Buf: big[:10], N: 10, Addr: c.LocalAddr()}})
		if n, err := c.ReadBatch(msgs); err != nil || n != 1 {
			t.Fatalf("ReadBatch = %d, %v", n, err)
		}
		if msgs[0].N != 10 || msgs[0].Trunc {
			t.Errorf("a 10-byte datagram in a 10-byte buffer: N %d Trunc %v, want 10 false", msgs[0].N, msgs[0].Trunc)
		}
	})
}

func TestWriteInvalidMessage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		a, c := pair(t, b)
		ok := payload(1)
		cases := []struct {
			name string
			bad  transport.Message
			want error
		}{
			{"N past Buf", transport.Message{Buf: ok, N: len(ok) + 1, Addr: c.LocalAddr()}, transport.ErrInvalidMessage},
			{"negative N", transport.Message{Buf: ok, N: -1, Addr: c.LocalAddr()}, transport.ErrInvalidMessage},
			{"zero Addr", transport.Message{Buf: ok, N: len(ok)}, transport.ErrInvalidAddr},
			{"port 0", transport.Message{Buf: ok, N: len(ok), Addr: netip.AddrPortFrom(c.LocalAddr().Addr(), 0)}, transport.ErrInvalidAddr},
		}
		for _, tc := range cases {
			msgs := []transport.Message{{Buf: ok, N: len(ok), Addr: c.LocalAddr()}, tc.bad, {Buf: ok, N: len(ok), Addr: c.LocalAddr()}}
			n, err := a.WriteBatch(msgs)
			if n != 1 || !errors.Is(err, tc.want) {
				t.Errorf("%s: WriteBatch = %d, %v; want 1, %v", tc.name, n, err, tc.want)
			}
			// msgs[:n] went out; the caller skips msgs[n] and carries on.
			writeAll(t, a, msgs[n+1:])
			if got, _ := readN(t, c, 2); !bytes.Equal(got[1].Buf[:got[1].N], ok) {
				t.Errorf("%s: second datagram = %x, want %x", tc.name, got[1].Buf[:got[1].N], ok)
			}
		}
	})
}

func TestEmptyBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		a, _ := pair(t, b)
		if n, err := a.ReadBatch(nil); n != 0 || err != nil {
			t.Errorf("ReadBatch(nil) = %d, %v; want 0, nil without blocking", n, err)
		}
		if n, err := a.WriteBatch(nil); n != 0 || err != nil {
			t.Errorf("WriteBatch(nil) = %d, %v; want 0, nil", n, err)
		}
	})
}

func TestCloseUnblocksRead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		transporttest.CheckGoroutineLeaks(t)
		a, c := pair(t, b)
		readErr := make(chan error, 1)
		go func() {
			_, err := a.ReadBatch(newReadMsgs(4, testDatagramCap))
			readErr <- err
		}()
		waitReaderBlocked(t)
		if err := a.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		select {
		case err := <-readErr:
			if !isClosedErr(err) {
				t.Errorf("blocked ReadBatch returned %v, want net.ErrClosed", err)
			}
		case <-time.After(testReadTimeout):
			t.Fatal("ReadBatch still blocked after Close")
		}
		if err := a.Close(); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
		if _, err := a.ReadBatch(newReadMsgs(1, 8)); !isClosedErr(err) {
			t.Errorf("ReadBatch after Close = %v, want net.ErrClosed", err)
		}
		if _, err := a.ReadBatch(nil); !isClosedErr(err) {
			t.Errorf("ReadBatch(nil) after Close = %v, want net.ErrClosed", err)
		}
		if n, err := a.WriteBatch(msgsTo(c.LocalAddr(), 1)); n != 0 || !isClosedErr(err) {
			t.Errorf("WriteBatch after Close = %d, %v; want 0, net.ErrClosed", n, err)
		}
	})
}

// TestConcurrentWritersAndClose runs several writers and one reader
// against one conn, checks every datagram arrives exactly once, then
// closes everything while the writers are still going.
func TestConcurrentWritersAndClose(t *testing.T) {
	const (
		writers   = 4
		perWriter = 50
	)
	forEachBackend(t, func(t *testing.T, b backend) {
		transporttest.CheckGoroutineLeaks(t)
		a, c := pair(t, b)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					body := []byte{byte(w), byte(i)}
					if _, err := a.WriteBatch([]transport.Message{{Buf: body, N: 2, Addr: c.LocalAddr()}}); err != nil {
						t.Errorf("writer %d: %v", w, err)
						return
					}
				}
			})
		}
		wg.Wait()
		got, _ := readN(t, c, writers*perWriter)
		seen := make(map[[2]byte]bool)
		for _, m := range got {
			k := [2]byte{m.Buf[0], m.Buf[1]}
			if m.N != 2 || seen[k] {
				t.Fatalf("bad or duplicate datagram %x", m.Buf[:m.N])
			}
			seen[k] = true
		}

		// Now close both ends under load: every call must end with
		// success or net.ErrClosed, and every goroutine must exit.
		for w := range writers {
			wg.Go(func() {
				body := []byte{byte(w)}
				for {
					_, err := a.WriteBatch([]transport.Message{{Buf: body, N: 1, Addr: c.LocalAddr()}})
					if isClosedErr(err) {
						return
					}
					if err != nil {
						t.Errorf("writer %d: %v", w, err)
						return
					}
				}
			})
		}
		readOnce := make(chan struct{})
		signalRead := sync.OnceFunc(func() { close(readOnce) })
		wg.Go(func() {
			defer signalRead()
			msgs := newReadMsgs(8, testDatagramCap)
			for {
				if _, err := c.ReadBatch(msgs); err != nil {
					if !isClosedErr(err) {
						t.Errorf("reader: %v", err)
					}
					return
				}
				signalRead()
			}
		})
		<-readOnce // traffic is flowing
		a.Close()
		c.Close()
		wg.Wait()
	})
}
