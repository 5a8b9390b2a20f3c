package transport

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"
)

// testReadTimeout bounds how long a test waits for datagrams that should
// already be there; on expiry the conn is closed so the test fails
// instead of hanging.
const testReadTimeout = 5 * time.Second

// testDatagramCap is the read buffer size used by tests: larger than any
// datagram they send, so N == testDatagramCap would mean truncation.
const testDatagramCap = 2048

var loopback4 = netip.MustParseAddrPort("127.0.0.1:0")

// listenUDP opens a real socket closed at cleanup.
func listenUDP(t testing.TB, addr netip.AddrPort, opts Options) Conn {
	t.Helper()
	c, err := ListenUDP(addr, opts)
	if err != nil {
		t.Fatalf("ListenUDP(%v): %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newReadMsgs returns n read messages with testDatagramCap buffers.
func newReadMsgs(n, size int) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, size)
	}
	return msgs
}

// readN reads exactly n datagrams from c, in as many ReadBatch calls as it
// takes, and returns them with the size of each call's result. It closes c
// and fails the test if they do not arrive within testReadTimeout.
func readN(t testing.TB, c Conn, n int) (got []Message, batches []int) {
	t.Helper()
	timer := time.AfterFunc(testReadTimeout, func() { c.Close() })
	defer timer.Stop()
	msgs := newReadMsgs(n, testDatagramCap)
	for len(got) < n {
		k, err := c.ReadBatch(msgs[len(got):])
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d datagrams: %v", len(got), n, err)
		}
		if k <= 0 || k > n-len(got) {
			t.Fatalf("ReadBatch returned %d with %d slots", k, n-len(got))
		}
		batches = append(batches, k)
		got = msgs[:len(got)+k]
	}
	return got, batches
}

// payload returns a distinct datagram body for index i.
func payload(i int) []byte {
	return []byte{'p', byte(i >> 8), byte(i), 0xAA, byte(i * 7)}
}

// writeAll sends msgs with one WriteBatch and fails unless all were sent.
func writeAll(t testing.TB, c Conn, msgs []Message) {
	t.Helper()
	n, err := c.WriteBatch(msgs)
	if err != nil || n != len(msgs) {
		t.Fatalf("WriteBatch = %d, %v; want %d, nil", n, err, len(msgs))
	}
}

// msgsTo builds count write messages with payload(i) for dst.
func msgsTo(dst netip.AddrPort, count int) []Message {
	msgs := make([]Message, count)
	for i := range msgs {
		b := payload(i)
		msgs[i] = Message{Buf: b, N: len(b), Addr: dst}
	}
	return msgs
}

func isClosedErr(err error) bool { return errors.Is(err, net.ErrClosed) }

// blockedPollInterval is how often waitReaderBlocked re-reads goroutine
// stacks.
const blockedPollInterval = time.Millisecond

// waitReaderBlocked waits until some goroutine is parked (not running or
// runnable) inside a ReadBatch of this package or of transporttest's
// fakes, so a test can act on a reader that is really blocked rather than
// sleeping and hoping.
func waitReaderBlocked(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(testReadTimeout)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
			header, _, _ := strings.Cut(string(g), "\n")
			parked := !strings.Contains(header, "[running") && !strings.Contains(header, "[runnable")
			ours := bytes.Contains(g, []byte("transport.(*")) || bytes.Contains(g, []byte("transporttest.(*"))
			if parked && ours && bytes.Contains(g, []byte(").ReadBatch(")) {
				return
			}
		}
		time.Sleep(blockedPollInterval)
	}
	t.Fatal("no goroutine blocked in ReadBatch")
}
