//go:build linux

package transport

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// listenUDPOrSkip is listenUDP that skips the test where the address
// family is unavailable (no IPv6 on the host or in the sandbox).
func listenUDPOrSkip(t testing.TB, addr netip.AddrPort) Conn {
	t.Helper()
	c, err := ListenUDP(addr, Options{})
	if err != nil {
		t.Skipf("IPv6 unavailable: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestBatchAllocs proves the Linux batch path allocates nothing per
// datagram or per call in steady state, for IPv4 and dual-stack sockets.
func TestBatchAllocs(t *testing.T) {
	run := func(t *testing.T, a, b Conn, dst netip.AddrPort) {
		const k = DefaultBatchSize
		out := msgsTo(dst, k)
		in := newReadMsgs(k, testDatagramCap)
		allocs := testing.AllocsPerRun(50, func() {
			if n, err := a.WriteBatch(out); n != k || err != nil {
				t.Fatalf("WriteBatch = %d, %v", n, err)
			}
			for got := 0; got < k; {
				n, err := b.ReadBatch(in[got:])
				if err != nil {
					t.Fatalf("ReadBatch: %v", err)
				}
				got += n
			}
		})
		if allocs != 0 {
			t.Errorf("%v allocations per %d-datagram write+read, want 0", allocs, k)
		}
		from := in[k-1].Addr
		if from.Addr() != netip.MustParseAddr("127.0.0.1") || from.Port() != a.LocalAddr().Port() {
			t.Errorf("last datagram from %v, want 127.0.0.1:%d", from, a.LocalAddr().Port())
		}
	}
	t.Run("ipv4", func(t *testing.T) {
		a, b := listenUDP(t, loopback4, Options{}), listenUDP(t, loopback4, Options{})
		run(t, a, b, b.LocalAddr())
	})
	t.Run("dualstack", func(t *testing.T) {
		a := listenUDPOrSkip(t, netip.MustParseAddrPort("[::]:0"))
		b := listenUDPOrSkip(t, netip.MustParseAddrPort("[::]:0"))
		// IPv4 destination through a dual-stack socket: the mapped path.
		run(t, a, b, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.LocalAddr().Port()))
	})
}

func TestDualStackUnmapsIPv4(t *testing.T) {
	dual := listenUDPOrSkip(t, netip.MustParseAddrPort("[::]:0"))
	if !dual.LocalAddr().Addr().Is6() || !dual.LocalAddr().Addr().IsUnspecified() {
		t.Fatalf("dual-stack LocalAddr = %v, want [::]:port", dual.LocalAddr())
	}
	v4 := listenUDP(t, loopback4, Options{})
	dualV4 := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), dual.LocalAddr().Port())
	writeAll(t, v4, msgsTo(dualV4, 1))
	got, _ := readN(t, dual, 1)
	if got[0].Addr != v4.LocalAddr() {
		t.Fatalf("dual-stack socket saw sender %v, want unmapped %v", got[0].Addr, v4.LocalAddr())
	}
	// Reply to the unmapped IPv4 address from the IPv6 socket.
	writeAll(t, dual, msgsTo(got[0].Addr, 1))
	if back, _ := readN(t, v4, 1); back[0].Addr != dualV4 {
		t.Errorf("reply from %v, want %v", back[0].Addr, dualV4)
	}
	// An IPv4-mapped destination works the same.
	writeAll(t, dual, msgsTo(netip.AddrPortFrom(netip.AddrFrom16(v4.LocalAddr().Addr().As16()), v4.LocalAddr().Port()), 1))
	readN(t, v4, 1)
}

func TestIPv6Loopback(t *testing.T) {
	a := listenUDPOrSkip(t, netip.MustParseAddrPort("[::1]:0"))
	b := listenUDPOrSkip(t, netip.MustParseAddrPort("[::1]:0"))
	writeAll(t, a, msgsTo(b.LocalAddr(), 3))
	got, _ := readN(t, b, 3)
	for i, m := range got {
		if m.Addr != a.LocalAddr() || !bytes.Equal(m.Buf[:m.N], payload(i)) {
			t.Errorf("datagram %d = %x from %v, want %x from %v", i, m.Buf[:m.N], m.Addr, payload(i), a.LocalAddr())
		}
	}
	// An IPv6-only socket cannot reach IPv4; the kernel refuses.
	v4 := listenUDP(t, loopback4, Options{})
	if n, err := a.WriteBatch(msgsTo(v4.LocalAddr(), 1)); n != 0 || err == nil || isClosedErr(err) {
		t.Errorf("IPv6-only → IPv4 WriteBatch = %d, %v; want 0 and a send error", n, err)
	}
}

func TestIPv4SocketRejectsIPv6Destination(t *testing.T) {
	a := listenUDP(t, loopback4, Options{})
	n, err := a.WriteBatch(msgsTo(netip.MustParseAddrPort("[2001:db8::1]:9"), 1))
	if n != 0 || !errors.Is(err, ErrInvalidAddr) {
		t.Errorf("WriteBatch to IPv6 from IPv4 socket = %d, %v; want 0, ErrInvalidAddr", n, err)
	}
}

func TestBatchSizeChunking(t *testing.T) {
	const (
		batch = 4
		count = 11
	)
	a := listenUDP(t, loopback4, Options{BatchSize: batch})
	b := listenUDP(t, loopback4, Options{BatchSize: batch})
	writeAll(t, a, msgsTo(b.LocalAddr(), count)) // three sendmmsg calls
	got, batches := readN(t, b, count)
	for i, m := range got {
		if !bytes.Equal(m.Buf[:m.N], payload(i)) {
			t.Errorf("datagram %d = %x, want %x", i, m.Buf[:m.N], payload(i))
		}
	}
	for _, k := range batches {
		if k > batch {
			t.Errorf("ReadBatch returned %d > BatchSize %d (batches %v)", k, batch, batches)
		}
	}
	if len(batches) != 3 {
		t.Errorf("batches %v, want 4+4+3", batches)
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, size := range []int{-1, MaxBatchSize + 1} {
		if c, err := ListenUDP(loopback4, Options{BatchSize: size}); err == nil {
			c.Close()
			t.Errorf("ListenUDP with BatchSize %d succeeded", size)
		}
	}
}

func readSysctl(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/core/" + name)
	if err != nil {
		t.Skipf("cannot read %s: %v", name, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func TestSocketBufferSizes(t *testing.T) {
	rmemMax, wmemMax := readSysctl(t, "rmem_max"), readSysctl(t, "wmem_max")
	rmemDefault, wmemDefault := readSysctl(t, "rmem_default"), readSysctl(t, "wmem_default")
	const req = 1 << 20
	cases := []struct {
		name           string
		recv, send     int
		recvLo, recvHi int // accepted range of SO_RCVBUF as reported
		sendLo, sendHi int
	}{
		// Granted in full with CAP_NET_ADMIN (SO_*BUFFORCE), else capped
		// at the sysctl; Linux reports double the grant either way.
		{"requested", req, req / 2, 2 * min(req, rmemMax), 2 * req, 2 * min(req/2, wmemMax), req},
		{"default", 0, 0, 2 * min(DefaultSocketBufferBytes, rmemMax), 2 * DefaultSocketBufferBytes,
			2 * min(DefaultSocketBufferBytes, wmemMax), 2 * DefaultSocketBufferBytes},
		{"os default", -1, -1, rmemDefault, rmemDefault, wmemDefault, wmemDefault},
	}
	for _, tc := range cases {
		c := listenUDP(t, loopback4, Options{ReadBufferBytes: tc.recv, WriteBufferBytes: tc.send})
		recv, send, err := c.(SocketBufferSizer).SocketBufferSizes()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		t.Logf("%s: SO_RCVBUF %d, SO_SNDBUF %d", tc.name, recv, send)
		if recv < tc.recvLo || recv > tc.recvHi || send < tc.sendLo || send > tc.sendHi {
			t.Errorf("%s: SO_RCVBUF %d, SO_SNDBUF %d; want [%d, %d] and [%d, %d]",
				tc.name, recv, send, tc.recvLo, tc.recvHi, tc.sendLo, tc.sendHi)
		}
	}
}

// TestGrantedBuffers: the grant is the request (with CAP_NET_ADMIN) or the
// sysctl cap, in the request's units: half what getsockopt reports. (A Conn
// that is no kernel socket has none: transporttest's
// TestMemConnHasNoKernelBuffers.)
func TestGrantedBuffers(t *testing.T) {
	rmemMax, wmemMax := readSysctl(t, "rmem_max"), readSysctl(t, "wmem_max")
	const req = 1 << 20
	c := listenUDP(t, loopback4, Options{ReadBufferBytes: req, WriteBufferBytes: req / 2})
	recv, send, ok := GrantedBuffers(c)
	rawRecv, rawSend, err := c.(SocketBufferSizer).SocketBufferSizes()
	if !ok || err != nil {
		t.Fatalf("GrantedBuffers ok %v, SocketBufferSizes %v", ok, err)
	}
	if recv != rawRecv/2 || send != rawSend/2 {
		t.Errorf("granted %d/%d, reported %d/%d: not half", recv, send, rawRecv, rawSend)
	}
	if recv < min(req, rmemMax) || recv > req || send < min(req/2, wmemMax) || send > req/2 {
		t.Errorf("granted %d/%d for %d/%d asked (rmem_max %d, wmem_max %d)", recv, send, req, req/2, rmemMax, wmemMax)
	}
}

func TestReusePort(t *testing.T) {
	first := listenUDP(t, loopback4, Options{ReusePort: true})
	addr := first.LocalAddr()
	second := listenUDP(t, addr, Options{ReusePort: true})
	if second.LocalAddr() != addr {
		t.Fatalf("second socket at %v, want %v", second.LocalAddr(), addr)
	}
	if c, err := ListenUDP(addr, Options{}); err == nil {
		c.Close()
		t.Error("a socket without SO_REUSEPORT bound a port held with it")
	}
	// Datagrams to the shared address reach one of the two sockets.
	sender := listenUDP(t, loopback4, Options{})
	writeAll(t, sender, msgsTo(addr, 1))
	received := make(chan struct{}, 2)
	for _, c := range []Conn{first, second} {
		go func() {
			if _, err := c.ReadBatch(newReadMsgs(1, testDatagramCap)); err == nil {
				received <- struct{}{}
			}
		}()
	}
	<-received
	first.Close()
	second.Close()
}

// TestKernelDrops overflows a tiny receive buffer and checks that Drops
// accounts exactly for what could not be read. Without GRO: the kernel
// counts dropped socket buffers, and a coalesced one holds many datagrams
// (TestKernelDropsGRO).
func TestKernelDrops(t *testing.T) {
	const sent = 500
	rx := listenUDP(t, loopback4, Options{ReadBufferBytes: 1, DisableGRO: true}) // kernel minimum
	tx := listenUDP(t, loopback4, Options{})
	if d := rx.(DropCounter).Drops(); d != 0 {
		t.Fatalf("fresh socket Drops = %d", d)
	}
	for i := 0; i < sent; i += DefaultBatchSize {
		writeAll(t, tx, msgsTo(rx.LocalAddr(), min(DefaultBatchSize, sent-i)))
	}
	drops := rx.(DropCounter).Drops()
	if drops == 0 || drops >= sent {
		t.Fatalf("Drops = %d after %d datagrams into a minimal buffer", drops, sent)
	}
	t.Logf("%d of %d dropped", drops, sent)
	// Exactly the rest are queued (readN fails rather than hangs if
	// fewer are).
	readN(t, rx, sent-int(drops))
	if d := rx.(DropCounter).Drops(); d != drops {
		t.Errorf("Drops changed from %d to %d with no traffic", drops, d)
	}
	rx.Close()
	if d := rx.(DropCounter).Drops(); d != drops {
		t.Errorf("Drops after Close = %d, want last value %d", d, drops)
	}
}

// TestKernelDropsGRO: with GRO a drop is still seen, though a dropped
// coalesced read counts once for all its datagrams.
func TestKernelDropsGRO(t *testing.T) {
	const sent = 500
	rx := listenUDP(t, loopback4, Options{ReadBufferBytes: 1})
	requireGRO(t, rx)
	tx := requireGSO(t, listenUDP(t, loopback4, Options{}))
	for i := 0; i < sent; i += DefaultBatchSize {
		writeAll(t, tx, msgsTo(rx.LocalAddr(), min(DefaultBatchSize, sent-i)))
	}
	drops := rx.(DropCounter).Drops()
	if drops == 0 || drops >= sent {
		t.Fatalf("Drops = %d after %d datagrams into a minimal buffer", drops, sent)
	}
	t.Logf("%d dropped reads", drops)
}

// BenchmarkXNetReadBatch measures golang.org/x/net/ipv4's batch path, the
// alternative this package rejected: compare its allocs/op with
// BenchmarkLoopback/udp/batch=64 (0).
func BenchmarkXNetReadBatch(b *testing.B) {
	const k = DefaultBatchSize
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer rx.Close()
	tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Close()
	prx, ptx := ipv4.NewPacketConn(rx), ipv4.NewPacketConn(tx)
	dst := rx.LocalAddr().(*net.UDPAddr)
	out := make([]ipv4.Message, k)
	in := make([]ipv4.Message, k)
	for i := range k {
		out[i] = ipv4.Message{Buffers: [][]byte{payload(i)}, Addr: dst} // reused *UDPAddr
		in[i] = ipv4.Message{Buffers: [][]byte{make([]byte, testDatagramCap)}}
	}
	b.ReportAllocs()
	for b.Loop() {
		if n, err := ptx.WriteBatch(out, 0); n != k || err != nil {
			b.Fatalf("WriteBatch = %d, %v", n, err)
		}
		for got := 0; got < k; {
			n, err := prx.ReadBatch(in[got:], 0)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
	b.ReportMetric(float64(k*b.N)/b.Elapsed().Seconds(), "pkts/s")
}

// FuzzSockaddrRoundTrip checks that putSockaddr and parseSockaddr are
// inverse up to unmapping, for IPv4 and IPv6 sockets, and that an IPv4
// socket refuses exactly the destinations it cannot reach.
func FuzzSockaddrRoundTrip(f *testing.F) {
	f.Add(netip.MustParseAddr("127.0.0.1").AsSlice(), uint16(1), uint32(0), false)
	f.Add(netip.MustParseAddr("::ffff:10.1.2.3").AsSlice(), uint16(65535), uint32(0), true)
	f.Add(netip.MustParseAddr("2001:db8::1").AsSlice(), uint16(13337), uint32(0), true)
	f.Add(netip.MustParseAddr("fe80::1").AsSlice(), uint16(4000), uint32(2), true)
	f.Add(netip.MustParseAddr("fe80::1").AsSlice(), uint16(4000), uint32(2), false)
	f.Fuzz(func(t *testing.T, ipBytes []byte, port uint16, scope uint32, socketV6 bool) {
		ip, ok := netip.AddrFromSlice(ipBytes)
		if !ok {
			return
		}
		if scope != 0 && ip.Is6() {
			ip = ip.WithZone(strconv.FormatUint(uint64(scope), 10))
		}
		in := netip.AddrPortFrom(ip, port)
		c := &batchConn{ipv6: socketV6}
		var sa unix.RawSockaddrInet6
		namelen, ok := c.putSockaddr(&sa, in)
		reachable := socketV6 || ip.Unmap().Is4()
		if ok != reachable {
			t.Fatalf("putSockaddr(%v) on ipv6=%v socket: ok=%v, want %v", in, socketV6, ok, reachable)
		}
		if !ok {
			return
		}
		wantLen := uint32(unix.SizeofSockaddrInet4)
		if socketV6 {
			wantLen = unix.SizeofSockaddrInet6
		}
		if namelen != wantLen {
			t.Errorf("namelen %d, want %d", namelen, wantLen)
		}
		if out, want := parseSockaddr(&sa), netip.AddrPortFrom(in.Addr().Unmap(), in.Port()); out != want {
			t.Errorf("round trip %v → %v, want %v", in, out, want)
		}
	})
}
