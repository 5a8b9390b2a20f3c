package front

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

// The netns tests' addresses. 10.99.0.0/24 exists only as far as the
// test's TUN: the namespace's only route is the device, so nothing sent to
// these addresses leaves the test.
var (
	nsShipPort = uint16(31337)
	nsDest     = netip.MustParseAddrPort("10.99.0.5:4000")
	nsRemote   = netip.MustParseAddrPort("10.99.0.7:4001")
)

// requireEnv, when set, turns the netns tests' skips into failures (as in
// relay/netnstest), for CI machines that must run them.
const requireEnv = "NETNSTEST_REQUIRE"

var nsCount atomic.Int32

// testNamespace returns a namespace name unique to this process and test,
// skipping the test unless it can create one, and deletes the namespace at
// cleanup. If precreate is set the namespace is made with `ip netns add`,
// else it is left for Setup to create.
func testNamespace(t testing.TB, precreate bool) string {
	t.Helper()
	skip := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(requireEnv) != "" {
			t.Fatalf("%s (%s is set)", msg, requireEnv)
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		skip("front's netns tests need root (network namespaces, a TUN device)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skip("front's netns tests need iproute2's `ip`: %v", err)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		skip("front's netns tests need /dev/net/tun: %v", err)
	}
	name := fmt.Sprintf("frt%d-%d", os.Getpid(), nsCount.Add(1))
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Logf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	if precreate {
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			skip("cannot create a network namespace (ip netns add): %v: %s", err, bytes.TrimSpace(out))
		}
	}
	return name
}

// shipSocket opens a UDP socket bound to 0.0.0.0:port inside namespace
// ns, as vere does, and closes it at cleanup.
func shipSocket(t testing.TB, ns string, port uint16) *net.UDPConn {
	t.Helper()
	var uc *net.UDPConn
	err := inNetns(ns, false, func(netns.NsHandle) error {
		var err error
		uc, err = net.ListenUDP("udp4", &net.UDPAddr{Port: int(port)})
		return err
	})
	if err != nil {
		t.Fatalf("socket in netns %s: %v", ns, err)
	}
	t.Cleanup(func() { uc.Close() })
	// Room for a test's whole burst (the default, ~200 KB, holds about 90
	// datagrams of 1200 B): SO_RCVBUFFORCE, as the tests run as root.
	if err := setsockopt(uc, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, shipSocketBuffer); err != nil {
		t.Fatalf("SO_RCVBUFFORCE: %v", err)
	}
	return uc
}

// setsockopt sets an integer socket option on uc.
func setsockopt(uc *net.UDPConn, level, opt, value int) error {
	rc, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, value) }); err != nil {
		return err
	}
	return serr
}

// shipSocketBuffer is the receive buffer of the tests' ship socket.
const shipSocketBuffer = 8 << 20

// watchdog closes c and uc after testTimeout, so that a blocked ReadBatch
// or socket read ends the test instead of hanging it.
func watchdog(t testing.TB, c *Conn, uc *net.UDPConn) {
	timer := time.AfterFunc(testTimeout, func() { c.Close(); uc.Close() })
	t.Cleanup(func() { timer.Stop() })
	if err := uc.SetReadDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatal(err)
	}
}

func TestSetupRelaysBothWays(t *testing.T) {
	for _, precreate := range []bool{false, true} {
		t.Run(fmt.Sprintf("precreated=%v", precreate), func(t *testing.T) {
			transporttest.CheckGoroutineLeaks(t)
			ns := testNamespace(t, precreate)
			c, err := Setup(Config{Namespace: ns, ShipPort: nsShipPort})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if _, err := os.Stat("/run/netns/" + ns); err != nil {
				t.Fatalf("namespace not under /run/netns: %v", err)
			}
			if c.LocalAddr() != netip.AddrPortFrom(DefaultShipAddr, nsShipPort) {
				t.Fatalf("LocalAddr = %v", c.LocalAddr())
			}
			uc := shipSocket(t, ns, nsShipPort)
			watchdog(t, c, uc)
			msgs := []transport.Message{{Buf: make([]byte, DefaultMTU)}, {Buf: make([]byte, DefaultMTU)}}
			for _, size := range []int{5, 4000, 60000} {
				payload := bytes.Repeat([]byte{byte(size)}, size)
				copy(payload, "hello")

				// The ship sends to nsDest: the relay reads it, addressed there.
				if _, err := uc.WriteToUDPAddrPort(payload, nsDest); err != nil {
					t.Fatalf("ship send: %v", err)
				}
				n, err := c.ReadBatch(msgs)
				if err != nil || n != 1 {
					t.Fatalf("ReadBatch = %d, %v", n, err)
				}
				if m := msgs[0]; m.Addr != nsDest || !bytes.Equal(m.Buf[:m.N], payload) {
					t.Fatalf("size %d: relay read %d bytes addressed to %v, want %d to %v", size, m.N, m.Addr, size, nsDest)
				}

				// The relay writes from nsRemote: the ship hears it from there.
				out := []transport.Message{{Buf: payload, N: size, Addr: nsRemote}}
				if n, err := c.WriteBatch(out); n != 1 || err != nil {
					t.Fatalf("WriteBatch = %d, %v", n, err)
				}
				buf := make([]byte, 65536)
				k, from, err := uc.ReadFromUDPAddrPort(buf)
				if err != nil {
					t.Fatalf("size %d: ship read: %v", size, err)
				}
				if from != nsRemote || !bytes.Equal(buf[:k], payload) {
					t.Fatalf("size %d: ship read %d bytes from %v, want %d from %v", size, k, from, size, nsRemote)
				}
			}
			s := c.Stats()
			if s.Received != 3 || s.Sent != 3 {
				t.Fatalf("Stats %+v", s)
			}
			t.Logf("stats %+v, drops %d", s, c.Drops())
		})
	}
}

// TestShipChecksumOffloaded: the device offers the ship's kernel checksum
// offload, so the ship's datagrams reach the relay with their UDP checksums
// left to the device (NEEDS_CSUM), and ReadBatch returns them whole.
func TestShipChecksumOffloaded(t *testing.T) {
	c, uc, _ := setupShip(t, Config{})
	d, ok := c.dev.(*fileDevice)
	if !ok || !d.vnet {
		t.Fatalf("device %T without a virtio header", c.dev)
	}
	payload := bytes.Repeat([]byte{7}, 1000)
	if _, err := uc.WriteToUDPAddrPort(payload, nsDest); err != nil {
		t.Fatal(err)
	}
	bufs, sizes := [][]byte{make([]byte, tunOffset+DefaultMTU)}, []int{0}
	for {
		n, err := d.Read(bufs, sizes, tunOffset)
		if err != nil || n != 1 {
			t.Fatalf("Read = %d, %v", n, err)
		}
		if _, dst, _, _ := ParseUDP4(bufs[0][tunOffset : tunOffset+sizes[0]]); dst == nsDest {
			break // not the ship's IPv6 chatter
		}
	}
	if h := bufs[0][tunOffset-vnetHdrLen:]; h[0]&virtioNeedsCsum == 0 {
		t.Fatalf("virtio header % x: the ship's kernel summed the datagram (no TUN_F_CSUM)", h[:vnetHdrLen])
	}

	if _, err := uc.WriteToUDPAddrPort(payload, nsDest); err != nil {
		t.Fatal(err)
	}
	msgs := []transport.Message{{Buf: make([]byte, 2048)}}
	for {
		n, err := c.ReadBatch(msgs)
		if err != nil || n != 1 {
			t.Fatalf("ReadBatch = %d, %v (stats %+v)", n, err, c.Stats())
		}
		if msgs[0].Addr == nsDest {
			break
		}
	}
	if !bytes.Equal(msgs[0].Buf[:msgs[0].N], payload) || c.Stats().SkippedMalformed != 0 {
		t.Fatalf("read %d bytes, stats %+v", msgs[0].N, c.Stats())
	}
}

// TestSetupCloseDeletesDevice checks that Close removes the device (and so
// the ship's route) and leaves the namespace, which a second Setup reuses.
func TestSetupCloseDeletesDevice(t *testing.T) {
	transporttest.CheckGoroutineLeaks(t)
	ns := testNamespace(t, false)
	c, err := Setup(Config{Namespace: ns, ShipPort: nsShipPort})
	if err != nil {
		t.Fatal(err)
	}
	nl := nsNetlink(t, ns)
	link, err := nl.LinkByName(DefaultDevice)
	if err != nil {
		t.Fatalf("device not in the namespace: %v", err)
	}
	if a := link.Attrs(); a.MTU != DefaultMTU || a.TxQLen != DefaultTxQueueLen || a.Flags&net.FlagUp == 0 {
		t.Fatalf("device MTU %d, txqueuelen %d, flags %v", a.MTU, a.TxQLen, a.Flags)
	}
	routes, err := nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var defaults int
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			defaults++
			if r.LinkIndex != link.Attrs().Index {
				t.Fatalf("default route %v not via the device", r)
			}
		}
	}
	if defaults != 1 {
		t.Fatalf("%d default routes in %v", defaults, routes)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := nl.LinkByName(DefaultDevice); err == nil {
		t.Fatal("device still there after Close")
	}
	if _, err := os.Stat("/run/netns/" + ns); err != nil {
		t.Fatalf("namespace gone after Close: %v", err)
	}
	c2, err := Setup(Config{Namespace: ns, ShipPort: nsShipPort})
	if err != nil {
		t.Fatalf("second Setup in the same namespace: %v", err)
	}
	c2.Close()
}

// TestSetupErrorNamesStep checks the one-line error for a step that fails:
// a device of the same name, not a TUN, already in the namespace.
func TestSetupErrorNamesStep(t *testing.T) {
	ns := testNamespace(t, true)
	if out, err := exec.Command("ip", "-n", ns, "link", "add", DefaultDevice, "type", "veth", "peer", "name", "peer0").CombinedOutput(); err != nil {
		t.Skipf("cannot add a veth pair: %v: %s", err, out)
	}
	c, err := Setup(Config{Namespace: ns, ShipPort: nsShipPort})
	if err == nil {
		c.Close()
		t.Fatal("Setup over an existing non-TUN device succeeded")
	}
	want := fmt.Sprintf("front: netns %s: create tun %s: ", ns, DefaultDevice)
	if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Fatalf("error %q, want it to start %q", got, want)
	}
	t.Log(err)
}

// TestConnSteadyPathAllocs measures allocations per datagram each way
// through a real TUN.
func TestConnSteadyPathAllocs(t *testing.T) {
	c, uc, _ := setupShip(t, Config{})
	payload := make([]byte, 1200)
	rmsgs := []transport.Message{{Buf: make([]byte, 2048)}}
	wmsgs := []transport.Message{{Buf: payload, N: len(payload), Addr: nsRemote}}
	buf := make([]byte, 2048)
	if n := testing.AllocsPerRun(200, func() {
		if _, err := uc.WriteToUDPAddrPort(payload, nsDest); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadBatch(rmsgs); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ship → relay: %v allocations per datagram, want 0", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		if _, err := c.WriteBatch(wmsgs); err != nil {
			t.Fatal(err)
		}
		if _, _, err := uc.ReadFromUDPAddrPort(buf); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("relay → ship: %v allocations per datagram, want 0", n)
	}
	if !errors.Is(c.Close(), nil) {
		t.Fatal("Close")
	}
}

// childEnv, set, makes the test binary run Setup in the namespace it names
// and print the error (TestSetupWithoutPrivilege's child).
const childEnv = "FRONT_TEST_SETUP_CHILD"

// TestSetupWithoutPrivilege runs Setup in a child with every capability
// dropped (setpriv --bounding-set -all) and checks that the error says
// what is needed.
func TestSetupWithoutPrivilege(t *testing.T) {
	if ns := os.Getenv(childEnv); ns != "" {
		_, err := Setup(Config{Namespace: ns, ShipPort: nsShipPort})
		fmt.Printf("ERR %v\n", err)
		return
	}
	ns := testNamespace(t, true)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("no setpriv (util-linux) to drop capabilities: %v", err)
	}
	cmd := exec.Command(setpriv, "--bounding-set", "-all", "--inh-caps", "-all", "--",
		os.Args[0], "-test.run", "^TestSetupWithoutPrivilege$", "-test.count", "1")
	cmd.Env = append(os.Environ(), childEnv+"="+ns)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	want := fmt.Sprintf("ERR front: netns %s: enter netns: operation not permitted (needs CAP_NET_ADMIN and CAP_SYS_ADMIN)", ns)
	if !bytes.Contains(out, []byte(want)) {
		t.Fatalf("child printed\n%s\nwant a line\n%s", out, want)
	}
}

// prepareChildEnv, set, makes the test binary run Prepare for the
// namespace it names and print the error (TestPrepareUnderIPNetnsExec's
// child).
const prepareChildEnv = "FRONT_TEST_PREPARE_CHILD"

// TestPrepareUnderIPNetnsExec runs Prepare in a child started under `ip
// netns exec` (a mount namespace of its own, a slave of the host's): for a
// namespace that does not exist it refuses, with a one-line error saying
// what to run instead, and creates nothing; for one the host made first it
// works.
func TestPrepareUnderIPNetnsExec(t *testing.T) {
	if ns := os.Getenv(prepareChildEnv); ns != "" {
		files, err := Prepare(Config{Namespace: ns, ShipPort: nsShipPort})
		if files != nil {
			files.Close()
		}
		fmt.Printf("ERR %v\n", err)
		return
	}
	outer := testNamespace(t, true)
	child := func(ns string) string {
		t.Helper()
		cmd := exec.Command("ip", "netns", "exec", outer, os.Args[0], "-test.run", "^TestPrepareUnderIPNetnsExec$", "-test.count", "1")
		cmd.Env = append(os.Environ(), prepareChildEnv+"="+ns)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v: %s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if e, ok := strings.CutPrefix(l, "ERR "); ok {
				return e
			}
		}
		t.Fatalf("child printed no ERR line:\n%s", out)
		return ""
	}
	absent := testNamespace(t, false)
	msg := child(absent)
	if !strings.Contains(msg, ErrHiddenNetns.Error()) || !strings.Contains(msg, "relay front setup") || !strings.Contains(msg, "ip netns add "+absent) {
		t.Errorf("Prepare of an absent namespace under ip netns exec: %q; want it refused, saying what to run instead", msg)
	}
	if _, err := os.Stat(filepath.Join(NetnsDir, absent)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s/%s: %v; want nothing created", NetnsDir, absent, err)
	}
	if msg := child(testNamespace(t, true)); msg != "<nil>" {
		t.Errorf("Prepare of a namespace the host made, under ip netns exec: %s; want it to work", msg)
	}
	t.Logf("refused: %s", msg)
}

func TestOpErr(t *testing.T) {
	err := opErr("urbit", "create tun urbit0", syscall.EPERM)
	if got, want := err.Error(), "front: netns urbit: create tun urbit0: operation not permitted (needs CAP_NET_ADMIN and CAP_SYS_ADMIN)"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if !errors.Is(err, syscall.EPERM) {
		t.Fatal("cause not wrapped")
	}
	if got := opErr("urbit", "x", syscall.EEXIST).Error(); got != "front: netns urbit: x: file exists" {
		t.Fatalf("got %q", got)
	}
}

// nsNetlink returns a netlink handle in namespace ns, closed at cleanup.
func nsNetlink(t testing.TB, ns string) *netlink.Handle {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	return nl
}

// deviceRxPackets returns the TUN's rx_packets counter in namespace ns:
// the packets the relay wrote, as the ship's kernel counted them.
func deviceRxPackets(t testing.TB, ns string) uint64 {
	t.Helper()
	link, err := nsNetlink(t, ns).LinkByName(DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	return link.Attrs().Statistics.RxPackets
}

// setupShip is Setup in a fresh namespace with the ship's socket open in
// it and a watchdog armed.
func setupShip(t testing.TB, cfg Config) (c *Conn, uc *net.UDPConn, ns string) {
	t.Helper()
	c, ns = setupConn(t, cfg)
	uc = shipSocket(t, ns, nsShipPort)
	watchdog(t, c, uc)
	return c, uc, ns
}

// setupConn is Setup in a fresh namespace for a ship on nsShipPort, closed
// at cleanup.
func setupConn(t testing.TB, cfg Config) (*Conn, string) {
	t.Helper()
	cfg.Namespace = testNamespace(t, false)
	cfg.ShipPort = nsShipPort
	c, err := Setup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, cfg.Namespace
}

// TestShipGSOSplit has the ship send with UDP segmentation offload: the
// TUN offers the ship's kernel no offloads, so it segments the datagram
// before the device, and ReadBatch returns the datagrams one by one, also
// across calls with room for only one.
func TestShipGSOSplit(t *testing.T) {
	c, uc, _ := setupShip(t, Config{})
	const seg, count = 1000, 5
	if err := setsockopt(uc, unix.IPPROTO_UDP, unix.UDP_SEGMENT, seg); err != nil {
		t.Skipf("no UDP_SEGMENT (Linux 4.18+): %v", err)
	}
	payload := make([]byte, seg*count)
	for i := range payload {
		payload[i] = byte(i / seg)
	}
	if _, err := uc.WriteToUDPAddrPort(payload, nsDest); err != nil {
		t.Fatal(err)
	}
	msgs := []transport.Message{{Buf: make([]byte, 2*seg)}}
	for i := range count {
		n, err := c.ReadBatch(msgs)
		if err != nil || n != 1 {
			t.Fatalf("ReadBatch %d = %d, %v", i, n, err)
		}
		if m := msgs[0]; m.Addr != nsDest || !bytes.Equal(m.Buf[:m.N], payload[i*seg:(i+1)*seg]) {
			t.Fatalf("datagram %d: %d bytes to %v", i, m.N, m.Addr)
		}
	}
}

// TestWriteBatchCoalesced writes runs of equal-sized datagrams from one
// remote, which the device coalesces into UDP GSO super-packets (unless
// the kernel refuses them: before Linux 6.2), and from alternating
// remotes, which it cannot, more than one write batch: the ship reads
// every datagram, whole, in order, from its own source.
func TestWriteBatchCoalesced(t *testing.T) {
	transporttest.CheckGoroutineLeaks(t)
	c, uc, ns := setupShip(t, Config{})
	other := netip.MustParseAddrPort("10.99.0.8:4002")
	const count = 150 // more than DefaultWriteBatch: three tun writes
	msgs := make([]transport.Message, count)
	for i := range msgs {
		b := bytes.Repeat([]byte{byte(i)}, 1200)
		from := nsRemote
		if i >= 100 && i%2 == 1 {
			from = other
		}
		msgs[i] = transport.Message{Buf: b, N: len(b), Addr: from}
	}
	before := deviceRxPackets(t, ns)
	if n, err := c.WriteBatch(msgs); n != count || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	pkts := deviceRxPackets(t, ns) - before
	t.Logf("%d datagrams entered the ship's kernel as %d packets", count, pkts)
	if gso := !c.dev.(*fileDevice).noGSO.Load(); gso && pkts >= count {
		t.Errorf("%d datagrams as %d packets: the runs of one flow were not coalesced", count, pkts)
	}
	buf := make([]byte, 65536)
	for i, m := range msgs {
		k, from, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if from != m.Addr || !bytes.Equal(buf[:k], m.Buf) {
			t.Fatalf("datagram %d: %d bytes of %d from %v, want 1200 of %d from %v", i, k, buf[0], from, i, m.Addr)
		}
	}
}

// TestConnConcurrentWriters writes from several goroutines while one
// reads; run with -race.
func TestConnConcurrentWriters(t *testing.T) {
	c, uc, _ := setupShip(t, Config{})
	const writers, each = 4, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			from := netip.AddrPortFrom(nsRemote.Addr(), uint16(5000+w))
			buf := make([]byte, 100)
			for i := range each {
				buf[0], buf[1] = byte(w), byte(i)
				if _, err := c.WriteBatch([]transport.Message{{Buf: buf, N: len(buf), Addr: from}}); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	seen := map[[2]byte]bool{}
	buf := make([]byte, 2048)
	for range writers * each {
		k, from, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("after %d: %v", len(seen), err)
		}
		if k != 100 || from != netip.AddrPortFrom(nsRemote.Addr(), uint16(5000+int(buf[0]))) {
			t.Fatalf("%d bytes from %v", k, from)
		}
		seen[[2]byte{buf[0], buf[1]}] = true
	}
	wg.Wait()
	if len(seen) != writers*each {
		t.Fatalf("%d distinct datagrams, want %d", len(seen), writers*each)
	}
}

// BenchmarkTUN measures one datagram of 1200 bytes through the real TUN
// each way, including the ship-side socket call that sends or receives it.
func BenchmarkTUN(b *testing.B) {
	payload := make([]byte, 1200)
	b.Run("ShipToRelay", func(b *testing.B) {
		c, uc, _ := setupShip(b, Config{})
		msgs := []transport.Message{{Buf: make([]byte, 2048)}}
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := uc.WriteToUDPAddrPort(payload, nsDest); err != nil {
				b.Fatal(err)
			}
			if _, err := c.ReadBatch(msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ShipToRelay/batch=32", func(b *testing.B) {
		// The ship sends 32 datagrams (not timed), then the relay reads
		// them: the relay's cost of a datagram when its reader finds many
		// queued (one read(2) each: a TUN has no batched read).
		const batch = 32
		c, uc, _ := setupShip(b, Config{})
		msgs := make([]transport.Message, batch)
		for i := range msgs {
			msgs[i].Buf = make([]byte, 2048)
		}
		b.SetBytes(int64(len(payload) * batch))
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			for range batch {
				if _, err := uc.WriteToUDPAddrPort(payload, nsDest); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			for got := 0; got < batch; {
				n, err := c.ReadBatch(msgs[got:])
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/datagram")
	})
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("RelayToShip/batch=%d", batch), func(b *testing.B) {
			c, uc, _ := setupShip(b, Config{})
			msgs := make([]transport.Message, batch)
			for i := range msgs {
				msgs[i] = transport.Message{Buf: payload, N: len(payload), Addr: nsRemote}
			}
			buf := make([]byte, 2048)
			b.SetBytes(int64(len(payload) * batch))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.WriteBatch(msgs); err != nil {
					b.Fatal(err)
				}
				for range batch {
					if _, _, err := uc.ReadFromUDPAddrPort(buf); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/datagram")
		})
	}
}

// TestDropsCountsFullQueue has the ship send more than the TUN's queue
// holds while the relay does not read: Drops reports the excess, and the
// queued datagrams are still read.
func TestDropsCountsFullQueue(t *testing.T) {
	const queue, sent = 16, 100
	c, uc, _ := setupShip(t, Config{TxQueueLen: queue})
	for i := range sent {
		if _, err := uc.WriteToUDPAddrPort([]byte{byte(i)}, nsDest); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	// The queue may also hold the ship's IPv6 chatter, so at least
	// sent-queue are dropped, and at least sent-drops of ours are queued.
	drops := c.Drops()
	if drops < sent-queue || drops > sent {
		t.Fatalf("Drops = %d after %d sent into a queue of %d", drops, sent, queue)
	}
	msgs := []transport.Message{{Buf: make([]byte, 16)}}
	for i := range sent - int(drops) {
		if n, err := c.ReadBatch(msgs); n != 1 || err != nil {
			t.Fatalf("ReadBatch %d = %d, %v", i, n, err)
		}
	}
	t.Logf("%d sent, %d dropped, %d read", sent, drops, sent-int(drops))
}
