package front

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/urbit-relay/relay/relay/transport"
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
func testNamespace(t *testing.T, precreate bool) string {
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
func shipSocket(t *testing.T, ns string, port uint16) *net.UDPConn {
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
	return uc
}

// watchdog closes c and uc after testTimeout, so that a blocked ReadBatch
// or socket read ends the test instead of hanging it.
func watchdog(t *testing.T, c *Conn, uc *net.UDPConn) {
	timer := time.AfterFunc(testTimeout, func() { c.Close(); uc.Close() })
	t.Cleanup(func() { timer.Stop() })
	if err := uc.SetReadDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatal(err)
	}
}

func TestSetupRelaysBothWays(t *testing.T) {
	for _, precreate := range []bool{false, true} {
		t.Run(fmt.Sprintf("precreated=%v", precreate), func(t *testing.T) {
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

// TestSetupCloseDeletesDevice checks that Close removes the device (and so
// the ship's route) and leaves the namespace, which a second Setup reuses.
func TestSetupCloseDeletesDevice(t *testing.T) {
	ns := testNamespace(t, false)
	c, err := Setup(Config{Namespace: ns, ShipPort: nsShipPort})
	if err != nil {
		t.Fatal(err)
	}
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
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
	ns := testNamespace(t, false)
	c, err := Setup(Config{Namespace: ns, ShipPort: nsShipPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	uc := shipSocket(t, ns, nsShipPort)
	watchdog(t, c, uc)
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
