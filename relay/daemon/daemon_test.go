package daemon

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// testTimeout bounds every wait on a real socket.
const testTimeout = 5 * time.Second

func testConfig() Config {
	return Config{
		Relay:  relay.Config{Ship: lane.ShipFromUint64(256)},
		Listen: ap("127.0.0.1:0"),
	}
}

// stunProbe sends a binding request to to and returns the mapped lane of
// the answer.
func stunProbe(t *testing.T, to netip.AddrPort) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(ap("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := scry.STUNRequest{TxID: [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
	if _, err := c.WriteToUDPAddrPort(q.Append(nil), to); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(testTimeout))
	buf := make([]byte, 1500)
	n, _, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("no answer to a STUN request from %v: %v", to, err)
	}
	var resp scry.STUNResponse
	if err := resp.Parse(buf[:n]); err != nil || resp.TxID != q.TxID {
		t.Fatalf("answer %x: %v, txid %x", buf[:n], err, resp.TxID)
	}
	if resp.Mapped != c.LocalAddr().(*net.UDPAddr).AddrPort() {
		t.Errorf("mapped %v, want the prober's %v", resp.Mapped, c.LocalAddr())
	}
	return resp.Mapped
}

// TestDaemonServesAndCloses: two sockets share one loopback port, each
// served once started; Close stops them (the port can be bound again) and
// is idempotent.
func TestDaemonServesAndCloses(t *testing.T) {
	cfg := testConfig()
	cfg.Sockets = 2
	cfg.Relay.Galaxies = laneMap{zod: ap("192.0.2.1:13337")}
	var galaxies, pinned int
	cfg.LanesChanged = func(g, p int) { galaxies, pinned = g, p }
	d, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Server() != nil || galaxies != 1 || pinned != 0 {
		t.Errorf("after Listen: server %v, lanes %d/%d; want none and the configured 1/0", d.Server(), galaxies, pinned)
	}
	addr := d.LocalAddr()
	if addr.Addr() != netip.MustParseAddr("127.0.0.1") || addr.Port() == 0 {
		t.Fatalf("bound %v", addr)
	}
	d.Start(relay.ServerConfig{})
	stunProbe(t, addr)
	if _, _, n := d.Server().SocketBuffers(); n != 2 {
		t.Errorf("serving %d sockets, want 2", n)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	rebind(t, addr)
}

// rebind checks that addr is free again.
func rebind(t *testing.T, addr netip.AddrPort) {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatalf("%v still bound after Close: %v", addr, err)
	}
	c.Close()
}

// TestDaemonListenErrors: a bad relay config and a taken address fail
// Listen, the bind error naming the address; Close before Start releases
// the sockets.
func TestDaemonListenErrors(t *testing.T) {
	cfg := testConfig()
	cfg.Relay.Galaxies = laneMap{star: ap("192.0.2.1:13337")}
	if _, err := Listen(cfg); err == nil || !strings.Contains(err.Error(), "not a galaxy") {
		t.Errorf("a star as a galaxy: %v", err)
	}

	d, err := Listen(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	taken := testConfig()
	taken.Listen = d.LocalAddr()
	if _, err := Listen(taken); err == nil || !strings.Contains(err.Error(), "listen "+d.LocalAddr().String()+": ") {
		t.Errorf("a taken address: %v", err)
	}
	addr := d.LocalAddr()
	if err := d.Close(); err != nil {
		t.Errorf("Close before Start: %v", err)
	}
	rebind(t, addr)
}

// TestDaemonResolvesGalaxies: with a galaxy domain the daemon resolves at
// Start, reports the round and sets the lanes; Close ends a resolver stuck
// in a lookup without waiting out DNSTimeout.
func TestDaemonResolvesGalaxies(t *testing.T) {
	cfg := testConfig()
	cfg.GalaxyDomain = "urbit.example"
	resolved := make(chan int, 1)
	asked := make(chan struct{})
	cfg.Lookup = func(ctx context.Context, _, host string) ([]netip.Addr, error) {
		switch host {
		case "zod.urbit.example":
			return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
		case "nec.urbit.example":
			select {
			case <-asked: // the second round: hang until Close
				<-ctx.Done()
				return nil, ctx.Err()
			default:
			}
		}
		return nil, context.DeadlineExceeded
	}
	cfg.GalaxyRefresh = time.Millisecond
	cfg.Resolved = func(n int) {
		select {
		case resolved <- n:
			close(asked)
		default:
		}
	}
	var galaxies int
	cfg.LanesChanged = func(g, _ int) { galaxies = g }
	d, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.Start(relay.ServerConfig{})
	select {
	case n := <-resolved:
		if n != 1 {
			t.Errorf("resolved %d galaxies, want 1", n)
		}
	case <-time.After(testTimeout):
		t.Fatal("no DNS round reported")
	}
	closed := make(chan error)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Close waited on a hanging lookup")
	}
	if galaxies != 1 {
		t.Errorf("%d galaxy lanes, want the one resolved", galaxies)
	}
}
