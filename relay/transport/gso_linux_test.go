//go:build linux

package transport

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// requireGSO returns c's batchConn, skipping the test if the kernel lacks
// UDP GSO.
func requireGSO(t testing.TB, c Conn) *batchConn {
	t.Helper()
	bc := c.(*batchConn)
	if !bc.GSO() {
		t.Skip("kernel without UDP_SEGMENT")
	}
	return bc
}

// sizedPayload is a datagram of size bytes that identifies its
// destination (tag) and position (seq) in every byte.
func sizedPayload(tag byte, seq, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = tag ^ byte(seq) ^ byte(seq>>8)<<3 ^ byte(i*31)
	}
	if size >= 3 {
		b[0], b[1], b[2] = tag, byte(seq>>8), byte(seq)
	}
	return b
}

// gsoBatch is a batch exercising every run rule, to up to 3 destinations:
// runs of equal sizes, a shorter last segment, a longer message that
// breaks a run, an empty datagram, single messages, runs longer than
// maxGSOSegments and runs over maxGSOPayload. It returns the messages and,
// per destination, the payloads that destination must receive in order.
func gsoBatch(dsts []netip.AddrPort) (msgs []Message, want map[netip.AddrPort][][]byte) {
	want = make(map[netip.AddrPort][][]byte)
	seq := 0
	add := func(d, count, size int) {
		dst := dsts[d%len(dsts)]
		for range count {
			b := sizedPayload(byte(d), seq, size)
			seq++
			msgs = append(msgs, Message{Buf: b, N: len(b), Addr: dst})
			want[dst] = append(want[dst], b)
		}
	}
	add(0, 5, 100)  // run of 5 ...
	add(0, 1, 60)   // ... with a shorter last segment
	add(0, 2, 60)   // a new run after the short one
	add(1, 3, 100)  // run
	add(1, 1, 150)  // longer: breaks the run
	add(1, 1, 150)  //
	add(2, 1, 33)   // single
	add(0, 1, 33)   // single
	add(0, 2, 50)   //
	add(0, 1, 0)    // empty datagram: never a segment
	add(0, 2, 50)   //
	add(1, 70, 200) // longer than maxGSOSegments
	add(2, 40, 1600)
	add(2, 50, 1400) // over maxGSOPayload in one run
	add(1, 1, 10)
	return msgs, want
}

// checkReceived reads what each receiver in rx got from batch (plus the
// sentinel sent after it) and compares it with want byte for byte.
func checkReceived(t *testing.T, tx Conn, rx map[netip.AddrPort]Conn, want map[netip.AddrPort][][]byte) {
	t.Helper()
	sentinel := []byte("end of batch")
	for dst, r := range rx {
		writeAll(t, tx, []Message{{Buf: sentinel, N: len(sentinel), Addr: dst}})
		exp := append(slices.Clone(want[dst]), sentinel)
		got, _ := readN(t, r, len(exp))
		for i, m := range got {
			if m.N == testDatagramCap {
				t.Fatalf("%v: datagram %d truncated (merged?)", dst, i)
			}
			if !bytes.Equal(m.Buf[:m.N], exp[i]) {
				t.Fatalf("%v: datagram %d: %d bytes %.8x..., want %d bytes %.8x...",
					dst, i, m.N, m.Buf[:min(m.N, 8)], len(exp[i]), exp[i][:min(len(exp[i]), 8)])
			}
			if m.Addr.Port() != tx.LocalAddr().Port() {
				t.Errorf("%v: datagram %d from %v", dst, i, m.Addr)
			}
		}
	}
}

// TestGSODelivery sends gsoBatch from sockets with and without GSO, with
// the default and a small batch size, to IPv4 and dual-stack receivers:
// every receiver must get exactly its datagrams, in order.
func TestGSODelivery(t *testing.T) {
	for _, tc := range []struct {
		name string
		bind string // sender and receivers
		dst  string // address receivers are reached at ("" = their own)
	}{
		{"ipv4", "127.0.0.1:0", ""},
		{"dualstack-to-v4", "[::]:0", "127.0.0.1"},
		{"ipv6", "[::1]:0", ""},
	} {
		for _, noGSO := range []bool{false, true} {
			for _, batch := range []int{DefaultBatchSize, 7} {
				name := fmt.Sprintf("%s/gso=%v/batch=%d", tc.name, !noGSO, batch)
				t.Run(name, func(t *testing.T) {
					bind := netip.MustParseAddrPort(tc.bind)
					tx, err := ListenUDP(bind, Options{BatchSize: batch, DisableGSO: noGSO})
					if err != nil {
						t.Skipf("listen %v: %v", bind, err)
					}
					t.Cleanup(func() { tx.Close() })
					if got := tx.(GSOer).GSO(); noGSO && got {
						t.Fatal("GSO() = true with DisableGSO")
					} else if !noGSO {
						requireGSO(t, tx)
					}
					rx := make(map[netip.AddrPort]Conn)
					var dsts []netip.AddrPort
					for range 3 {
						r := listenUDP(t, bind, Options{})
						dst := r.LocalAddr()
						if tc.dst != "" {
							dst = netip.AddrPortFrom(netip.MustParseAddr(tc.dst), dst.Port())
						}
						rx[dst] = r
						dsts = append(dsts, dst)
					}
					msgs, want := gsoBatch(dsts)
					gsoSends := countGSOSends(tx.(*batchConn))
					writeAll(t, tx, msgs)
					if got := tx.(GSOer).GSO(); got == noGSO {
						t.Errorf("GSO() = %v after the batch, want %v", got, !noGSO)
					}
					if (*gsoSends > 0) == noGSO {
						t.Errorf("%d GSO sends with DisableGSO %v", *gsoSends, noGSO)
					}
					checkReceived(t, tx, rx, want)
				})
			}
		}
	}
}

// TestPackTxRuns checks how packTx cuts a batch into mmsghdrs.
func TestPackTxRuns(t *testing.T) {
	c := requireGSO(t, listenUDP(t, loopback4, Options{}))
	a := netip.MustParseAddrPort("127.0.0.1:1")
	b := netip.MustParseAddrPort("127.0.0.1:2")
	mk := func(spec ...any) []Message { // pairs of (addr, count, size)
		var msgs []Message
		for i := 0; i < len(spec); i += 3 {
			for range spec[i+1].(int) {
				buf := make([]byte, spec[i+2].(int))
				msgs = append(msgs, Message{Buf: buf, N: len(buf), Addr: spec[i].(netip.AddrPort)})
			}
		}
		return msgs
	}
	for _, tc := range []struct {
		name     string
		msgs     []Message
		plain    int
		segs     []int // per mmsghdr
		segSizes []int // cmsg segment size per mmsghdr (0: no cmsg)
	}{
		{"run", mk(a, 4, 100), 0, []int{4}, []int{100}},
		{"short last", mk(a, 3, 100, a, 2, 50), 0, []int{4, 1}, []int{100, 0}},
		{"longer breaks", mk(a, 2, 100, a, 2, 200), 0, []int{2, 2}, []int{100, 200}},
		{"addr breaks", mk(a, 2, 100, b, 2, 100, a, 1, 100), 0, []int{2, 2, 1}, []int{100, 100, 0}},
		{"single", mk(a, 1, 100), 0, []int{1}, []int{0}},
		{"empty", mk(a, 2, 0, a, 2, 10), 0, []int{1, 1, 2}, []int{0, 0, 10}},
		{"empty last", mk(a, 2, 10, a, 1, 0), 0, []int{2, 1}, []int{10, 0}},
		{"max segments", mk(a, 64, 10), 0, []int{64}, []int{10}},
		{"payload limit", mk(a, 50, 1400), 0, []int{46, 4}, []int{1400, 1400}},
		{"payload exact", mk(a, 1, 65500, a, 1, 7), 0, []int{2}, []int{65500}},
		{"payload over", mk(a, 1, 65500, a, 1, 8), 0, []int{1, 1}, []int{0, 0}},
		{"plain prefix", mk(a, 5, 10), 2, []int{1, 1, 3}, []int{0, 0, 10}},
	} {
		h, err := c.packTx(tc.msgs, tc.plain)
		if err != nil {
			t.Errorf("%s: packTx: %v", tc.name, err)
			continue
		}
		segs := c.tx.segs[:h]
		sizes := make([]int, h)
		iov := 0
		for i := range h {
			hdr := &c.tx.hdrs[i].Hdr
			if hdr.Control != nil {
				sizes[i] = int(c.tx.cmsgs[i].size)
				if hdr.Control != (*byte)(unsafe.Pointer(&c.tx.cmsgs[i])) || int(hdr.Controllen) != unix.CmsgSpace(2) {
					t.Errorf("%s: hdr %d: bad control pointer or length %d", tc.name, i, hdr.Controllen)
				}
			}
			if hdr.Iov != &c.tx.iovs[iov] || int(hdr.Iovlen) != segs[i] {
				t.Errorf("%s: hdr %d: iov %p len %d, want %p len %d", tc.name, i, hdr.Iov, hdr.Iovlen, &c.tx.iovs[iov], segs[i])
			}
			iov += segs[i]
		}
		if !slices.Equal(segs, tc.segs) || !slices.Equal(sizes, tc.segSizes) {
			t.Errorf("%s: segs %v sizes %v, want %v %v", tc.name, segs, sizes, tc.segs, tc.segSizes)
		}
	}
	// A batch of BatchSize messages is one call however it is split.
	if h, _ := c.packTx(mk(a, 100, 10), 0); h != 1 || c.tx.segs[0] != 64 {
		t.Errorf("100 messages: %d hdrs, first of %d; want 1 of 64", h, c.tx.segs[0])
	}
}

// TestGSOCmsgLayout pins gsoCmsg to CMSG_SPACE(2) with the data at
// CMSG_LEN(0).
func TestGSOCmsgLayout(t *testing.T) {
	var m gsoCmsg
	if off := unsafe.Offsetof(m.size); int(off) != unix.CmsgLen(0) {
		t.Errorf("segment size at offset %d, want %d", off, unix.CmsgLen(0))
	}
	if size := unsafe.Sizeof(m); int(size) != unix.CmsgSpace(2) {
		t.Errorf("gsoCmsg is %d bytes, want %d", size, unix.CmsgSpace(2))
	}
}

// TestGSOWriteErrors checks WriteBatch's contract when a bad message sits
// in or next to GSO runs: the messages before it are sent, the error
// concerns it, the caller carries on with msgs[n+1:], and GSO stays on.
func TestGSOWriteErrors(t *testing.T) {
	tx := listenUDP(t, loopback4, Options{})
	requireGSO(t, tx)
	rx := listenUDP(t, loopback4, Options{})
	ok := func(seq int) Message {
		b := sizedPayload(1, seq, 100)
		return Message{Buf: b, N: len(b), Addr: rx.LocalAddr()}
	}
	huge := make([]byte, 70000)
	for _, tc := range []struct {
		name string
		bad  Message
		want func(error) bool
		runs bool // the bad message is repeated, making a GSO run of its own
	}{
		{"oversize", Message{Buf: huge, N: len(huge), Addr: rx.LocalAddr()},
			func(err error) bool { return errors.Is(err, unix.EMSGSIZE) }, false},
		{"zero addr", Message{Buf: huge[:100], N: 100},
			func(err error) bool { return errors.Is(err, ErrInvalidAddr) }, false},
		{"N past Buf", Message{Buf: huge[:10], N: 11, Addr: rx.LocalAddr()},
			func(err error) bool { return errors.Is(err, ErrInvalidMessage) }, false},
		// The kernel refuses this destination for plain and GSO sends
		// alike (EINVAL, one of the errors that can also mean "GSO
		// refused", for an off-host destination from a loopback-bound
		// socket; ENETUNREACH on a host without routes), so the error
		// belongs to the message and must not disable GSO.
		{"off-host run", Message{Buf: huge[:100], N: 100, Addr: netip.MustParseAddrPort("192.0.2.9:9")},
			func(err error) bool { return err != nil && !isClosedErr(err) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := 1
			if tc.runs {
				bad = 3
			}
			var msgs []Message
			for i := range 3 {
				msgs = append(msgs, ok(i))
			}
			for range bad {
				msgs = append(msgs, tc.bad)
			}
			for i := range 3 {
				msgs = append(msgs, ok(3+i))
			}
			rest := msgs
			for i := range bad {
				// The first call sends the 3 good messages before the bad
				// one, later calls start on a bad one.
				wantN := 0
				if i == 0 {
					wantN = 3
				}
				n, err := tx.WriteBatch(rest)
				if i == 0 {
					t.Logf("error: %v", err)
				}
				if n != wantN || !tc.want(err) {
					t.Fatalf("WriteBatch #%d = %d, %v; want %d and the bad message's error", i, n, err, wantN)
				}
				rest = rest[n+1:]
			}
			writeAll(t, tx, rest)
			got, _ := readN(t, rx, 6)
			for i, m := range got {
				if want := ok(i); !bytes.Equal(m.Buf[:m.N], want.Buf) {
					t.Errorf("datagram %d = %.4x..., want %.4x...", i, m.Buf[:min(m.N, 4)], want.Buf[:4])
				}
			}
			if !tx.(GSOer).GSO() {
				t.Error("a per-message error disabled GSO")
			}
		})
	}
}

// countGSOSends makes c count the GSO mmsghdrs the kernel accepts; it
// returns a pointer to the count.
func countGSOSends(c *batchConn) *int {
	sends := 0
	s := &c.tx
	real := s.fn
	s.fn = func(fd uintptr) bool {
		done := real(fd)
		if done && s.errno == 0 {
			for i := range s.n {
				if s.hdrs[i].Hdr.Control != nil {
					sends++
				}
			}
		}
		return done
	}
	return &sends
}

// faultGSO makes c's sendmmsg behave as if the kernel failed every GSO
// mmsghdr with errno: mmsghdrs before the first GSO one are really sent,
// as the kernel would, then the call reports what it sent or the error.
// It returns a pointer to the count of faulted calls.
func faultGSO(c *batchConn, errno unix.Errno) *int {
	faults := 0
	s := &c.tx
	real := s.fn
	s.fn = func(fd uintptr) bool {
		j := 0
		for j < s.count && s.hdrs[j].Hdr.Control == nil {
			j++
		}
		switch {
		case j == s.count:
			return real(fd)
		case j == 0:
			faults++
			s.n, s.errno = 0, errno
			return true
		}
		count := s.count
		s.count = j
		defer func() { s.count = count }()
		return real(fd)
	}
	return &faults
}

// TestGSOFallback checks that a kernel refusing GSO costs the caller
// nothing: every datagram arrives, WriteBatch reports full success, and
// GSO is off afterwards (and the next batch makes no GSO attempt). A
// failure that is not a refusal (EMSGSIZE, as for a segment over the
// route MTU) is resent plain without disabling GSO.
func TestGSOFallback(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, c *batchConn) *int // returns fault counter, or nil
		wantGSO bool
	}{
		{"SO_NO_CHECK", func(t *testing.T, c *batchConn) *int {
			// A real refusal: the kernel rejects GSO (EINVAL) on a socket
			// that sends without UDP checksums, and sends plain datagrams.
			var err error
			if cerr := c.raw.Control(func(fd uintptr) {
				err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1)
			}); cerr != nil || err != nil {
				t.Skipf("SO_NO_CHECK: %v %v", cerr, err)
			}
			return nil
		}, false},
		{"EIO", func(t *testing.T, c *batchConn) *int { return faultGSO(c, unix.EIO) }, false},
		{"EOPNOTSUPP", func(t *testing.T, c *batchConn) *int { return faultGSO(c, unix.EOPNOTSUPP) }, false},
		{"ENOPROTOOPT", func(t *testing.T, c *batchConn) *int { return faultGSO(c, unix.ENOPROTOOPT) }, false},
		{"EMSGSIZE", func(t *testing.T, c *batchConn) *int { return faultGSO(c, unix.EMSGSIZE) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := listenUDP(t, loopback4, Options{})
			c := requireGSO(t, tx)
			faults := tc.setup(t, c)
			rx := make(map[netip.AddrPort]Conn)
			var dsts []netip.AddrPort
			for range 2 {
				r := listenUDP(t, loopback4, Options{})
				rx[r.LocalAddr()] = r
				dsts = append(dsts, r.LocalAddr())
			}
			msgs, want := gsoBatch(dsts)
			// A plain message first, so the failing GSO mmsghdr is not
			// the first of its call.
			first := Message{Buf: []byte("plain"), N: 5, Addr: dsts[1]}
			msgs = append([]Message{first}, msgs...)
			want[dsts[1]] = append([][]byte{first.Buf}, want[dsts[1]]...)
			writeAll(t, tx, msgs)
			if c.GSO() != tc.wantGSO {
				t.Fatalf("GSO() = %v after the batch, want %v", c.GSO(), tc.wantGSO)
			}
			checkReceived(t, tx, rx, want)
			if faults == nil {
				return
			}
			if *faults == 0 {
				t.Fatal("no GSO send was attempted")
			}
			before := *faults
			msgs, want = gsoBatch(dsts)
			writeAll(t, tx, msgs)
			checkReceived(t, tx, rx, want)
			if again := *faults - before; tc.wantGSO != (again > 0) {
				t.Errorf("%d GSO attempts in the second batch, want any: %v", again, tc.wantGSO)
			}
		})
	}
}

// TestGSOAllocs proves GSO writes allocate nothing: 64 equal datagrams to
// one destination, and 2 destinations interleaved then grouped.
func TestGSOAllocs(t *testing.T) {
	tx := listenUDP(t, loopback4, Options{})
	requireGSO(t, tx)
	r1, r2 := listenUDP(t, loopback4, Options{}), listenUDP(t, loopback4, Options{})
	const k = DefaultBatchSize
	in := newReadMsgs(k, testDatagramCap)
	drain := func(c Conn, want int) {
		for got := 0; got < want; {
			n, err := c.ReadBatch(in[:min(k, want-got)])
			if err != nil {
				t.Fatalf("ReadBatch: %v", err)
			}
			got += n
		}
	}
	one := make([]Message, k)
	interleaved := make([]Message, k)
	two := make([]Message, k)
	for i := range k {
		b := sizedPayload(0, i, 1030)
		one[i] = Message{Buf: b, N: len(b), Addr: r1.LocalAddr()}
		interleaved[i] = one[i]
		if i%2 == 1 {
			interleaved[i].Addr = r2.LocalAddr()
		}
	}
	if allocs := testing.AllocsPerRun(50, func() {
		if n, err := tx.WriteBatch(one); n != k || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		drain(r1, k)
	}); allocs != 0 {
		t.Errorf("one destination: %v allocations per GSO write+read, want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(50, func() {
		copy(two, interleaved)
		GroupByAddr(two)
		if n, err := tx.WriteBatch(two); n != k || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		drain(r1, k/2)
		drain(r2, k/2)
	}); allocs != 0 {
		t.Errorf("two destinations: %v allocations per group+GSO write+read, want 0", allocs)
	}
	if !tx.(GSOer).GSO() {
		t.Error("GSO off after the writes")
	}
}
