package front

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/urbit-relay/relay/relay/transport"
)

// testTimeout bounds every wait in this package's tests.
const testTimeout = 10 * time.Second

var testShip = netip.AddrPortFrom(DefaultShipAddr, 31337)

// newChannelConn returns a Conn over wireguard's in-memory TUN: the test
// plays the ship's kernel on ch.Outbound (packets the ship sends) and
// ch.Inbound (packets written for the ship).
func newChannelConn(t *testing.T) (*Conn, *tuntest.ChannelTUN) {
	t.Helper()
	ch := tuntest.NewChannelTUN()
	c := newConn(ch.TUN(), connConfig{
		name: "test0", ship: testShip, mtu: tuntest.DefaultMTU,
		readBatch: DefaultReadBatch, writeBatch: 4,
	})
	t.Cleanup(func() { c.Close() })
	return c, ch
}

// feed hands pkt to c as if the ship's kernel had sent it, failing the
// test if nothing reads it within testTimeout.
func feed(t *testing.T, ch *tuntest.ChannelTUN, pkt []byte) {
	t.Helper()
	select {
	case ch.Outbound <- pkt:
	case <-time.After(testTimeout):
		t.Fatal("the Conn did not read the packet")
	}
}

func TestConnReadSkipsAndCounts(t *testing.T) {
	c, ch := newChannelConn(t)
	remote := netip.MustParseAddrPort("10.99.0.5:4000")
	icmp := tuntest.Ping(remote.Addr(), DefaultShipAddr)
	frag := AppendUDP4(nil, testShip, remote, []byte("frag"))
	frag[6] |= 0x20
	fixIPChecksum(frag)
	bad := AppendUDP4(nil, testShip, remote, []byte("bad"))
	bad[len(bad)-1] ^= 1
	v6 := make([]byte, 48)
	v6[0] = 0x60
	skipped := [][]byte{
		v6,
		icmp,
		frag,
		bad,
		AppendUDP4(nil, netip.AddrPortFrom(DefaultShipAddr, 53000), remote, []byte("dns")),
		AppendUDP4(nil, testShip, netip.MustParseAddrPort("224.0.0.251:5353"), []byte("mdns")),
		AppendUDP4(nil, testShip, netip.MustParseAddrPort("255.255.255.255:4000"), []byte("bcast")),
		AppendUDP4(nil, testShip, netip.MustParseAddrPort("10.99.0.5:0"), []byte("port 0")),
	}
	go func() {
		for _, p := range skipped {
			feed(t, ch, p)
		}
		feed(t, ch, AppendUDP4(nil, testShip, remote, []byte("hello, world")))
	}()
	msgs := []transport.Message{{Buf: make([]byte, 5)}, {Buf: make([]byte, 100)}}
	n, err := c.ReadBatch(msgs)
	if err != nil || n != 1 {
		t.Fatalf("ReadBatch = %d, %v", n, err)
	}
	if got := string(msgs[0].Buf[:msgs[0].N]); got != "hello" || msgs[0].Addr != remote {
		t.Fatalf("got %q to %v, want %q (truncated) to %v", got, msgs[0].Addr, "hello", remote)
	}
	want := Stats{
		Received: 1, SkippedNotIPv4: 1, SkippedNotUDP: 1, SkippedFragment: 1,
		SkippedMalformed: 1, SkippedNotShip: 1, SkippedBadDest: 3,
	}
	if got := c.Stats(); got != want {
		t.Fatalf("Stats\n%+v\nwant\n%+v", got, want)
	}
}

func TestConnWrite(t *testing.T) {
	c, ch := newChannelConn(t)
	from := []netip.AddrPort{
		netip.MustParseAddrPort("10.99.0.7:4001"),
		netip.AddrPortFrom(netip.AddrFrom16(netip.MustParseAddr("10.99.0.8").As16()), 4002), // mapped
	}
	var msgs []transport.Message
	for i := range 10 { // more than writeBatch (4): three device writes
		msgs = append(msgs, transport.Message{Buf: []byte{byte(i), 1, 2, 3}, N: 3, Addr: from[i%2]})
	}
	got := make(chan []byte, len(msgs))
	go func() {
		for range msgs {
			got <- <-ch.Inbound
		}
	}()
	if n, err := c.WriteBatch(msgs); n != len(msgs) || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	for i := range msgs {
		var pkt []byte
		select {
		case pkt = <-got:
		case <-time.After(testTimeout):
			t.Fatal("packet not written")
		}
		src, dst, payload, err := ParseUDP4(pkt)
		wantSrc := netip.AddrPortFrom(from[i%2].Addr().Unmap(), from[i%2].Port())
		if err != nil || src != wantSrc || dst != testShip || !bytes.Equal(payload, []byte{byte(i), 1, 2}) {
			t.Fatalf("packet %d: %v → %v %x %v", i, src, dst, payload, err)
		}
	}
	if s := c.Stats(); s.Sent != uint64(len(msgs)) {
		t.Fatalf("Sent = %d", s.Sent)
	}
}

func TestConnWriteRefuses(t *testing.T) {
	c, ch := newChannelConn(t)
	ok := netip.MustParseAddrPort("10.99.0.7:4001")
	tests := []struct {
		name string
		m    transport.Message
		want error
	}{
		{"zero addr", transport.Message{Buf: []byte("x"), N: 1}, transport.ErrInvalidAddr},
		{"port 0", transport.Message{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort("10.99.0.7:0")}, transport.ErrInvalidAddr},
		{"ipv6", transport.Message{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort("[2001:db8::1]:1")}, transport.ErrInvalidAddr},
		{"loopback", transport.Message{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort("127.0.0.1:1")}, transport.ErrInvalidAddr},
		{"multicast", transport.Message{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort("224.0.0.1:1")}, transport.ErrInvalidAddr},
		{"ship itself", transport.Message{Buf: []byte("x"), N: 1, Addr: netip.AddrPortFrom(DefaultShipAddr, 1)}, transport.ErrInvalidAddr},
		{"N > len", transport.Message{Buf: []byte("x"), N: 2, Addr: ok}, transport.ErrInvalidMessage},
		{"N < 0", transport.Message{Buf: []byte("x"), N: -1, Addr: ok}, transport.ErrInvalidMessage},
		{"too large", transport.Message{Buf: make([]byte, tuntest.DefaultMTU), N: tuntest.DefaultMTU - HeadersLen + 1, Addr: ok}, ErrPayloadTooLarge},
	}
	got := make(chan []byte, len(tests))
	go func() {
		for range tests {
			got <- <-ch.Inbound
		}
	}()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The bad message sits between two good ones: the first is
			// written, the error names index 1.
			msgs := []transport.Message{{Buf: []byte("ok"), N: 2, Addr: ok}, tt.m, {Buf: []byte("after"), N: 5, Addr: ok}}
			n, err := c.WriteBatch(msgs)
			if n != 1 || !errors.Is(err, tt.want) {
				t.Fatalf("WriteBatch = %d, %v; want 1, %v", n, err, tt.want)
			}
			select {
			case pkt := <-got:
				if _, _, p, _ := ParseUDP4(pkt); string(p) != "ok" {
					t.Fatalf("wrote %q, want the message before the bad one", p)
				}
			case <-time.After(testTimeout):
				t.Fatal("the good message was not written")
			}
		})
	}
}

func TestConnClose(t *testing.T) {
	c, _ := newChannelConn(t)
	errc := make(chan error, 1)
	go func() {
		_, err := c.ReadBatch([]transport.Message{{Buf: make([]byte, 10)}})
		errc <- err
	}()
	// Close unblocks the read, whether it has started yet or not.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("blocked ReadBatch: %v, want net.ErrClosed", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("ReadBatch still blocked after Close")
	}
	if _, err := c.ReadBatch([]transport.Message{{Buf: make([]byte, 10)}}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadBatch after Close: %v", err)
	}
	msg := []transport.Message{{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort("10.99.0.7:4001")}}
	if n, err := c.WriteBatch(msg); n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WriteBatch after Close: %d, %v", n, err)
	}
	if c.Drops() != 0 {
		t.Fatal("Drops after Close")
	}
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	got, err := Config{ShipPort: 1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Namespace: DefaultNamespace, Device: DefaultDevice, ShipAddr: DefaultShipAddr, ShipPort: 1,
		MTU: DefaultMTU, ReadBatch: DefaultReadBatch, WriteBatch: DefaultWriteBatch, TxQueueLen: DefaultTxQueueLen,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults\n%+v\nwant\n%+v", got, want)
	}
	for name, cfg := range map[string]Config{
		"no port":        {},
		"path namespace": {ShipPort: 1, Namespace: "../x"},
		"long device":    {ShipPort: 1, Device: "sixteen-bytes-xx"},
		"ipv6 ship":      {ShipPort: 1, ShipAddr: netip.MustParseAddr("2001:db8::1")},
		"loopback ship":  {ShipPort: 1, ShipAddr: netip.MustParseAddr("127.0.0.2")},
		"small MTU":      {ShipPort: 1, MTU: MinMTU - 1},
		"large MTU":      {ShipPort: 1, MTU: MaxMTU + 1},
		"negative batch": {ShipPort: 1, ReadBatch: -1},
		"host lane v6":   {ShipPort: 1, HostLanes: []netip.AddrPort{netip.MustParseAddrPort("[2001:db8::1]:53")}},
		"host lane port": {ShipPort: 1, HostLanes: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:0")}},
	} {
		if _, err := Setup(cfg); err == nil {
			t.Errorf("%s: Setup(%+v) succeeded", name, cfg)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestConnRefusesHost: datagrams from the ship to the relay host's own
// addresses or to loopback are skipped and counted, unless the operator
// declared the lane; the rest of the world is reached.
func TestConnRefusesHost(t *testing.T) {
	ch := tuntest.NewChannelTUN()
	declared := netip.MustParseAddrPort("192.0.2.1:5353")
	c := newConn(ch.TUN(), connConfig{name: "test0", ship: testShip, mtu: tuntest.DefaultMTU,
		readBatch: DefaultReadBatch, writeBatch: 4, declared: []netip.AddrPort{declared}})
	t.Cleanup(func() { c.Close() })
	c.SetHostAddrs([]netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("::ffff:198.51.100.9")})
	world := netip.MustParseAddrPort("203.0.113.5:4000")
	go func() {
		for _, to := range []string{"192.0.2.1:4000", "198.51.100.9:13337", "127.0.0.1:9", "127.0.0.53:53", "192.0.2.1:5353", "203.0.113.5:4000"} {
			feed(t, ch, AppendUDP4(nil, testShip, netip.MustParseAddrPort(to), []byte(to)))
		}
	}()
	var got []netip.AddrPort
	for len(got) < 2 {
		msgs := []transport.Message{{Buf: make([]byte, 64)}}
		n, err := c.ReadBatch(msgs)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs[:n] {
			got = append(got, m.Addr)
		}
	}
	if got[0] != declared || got[1] != world {
		t.Fatalf("read datagrams to %v; want the declared host lane %v and the world %v", got, declared, world)
	}
	if st := c.Stats(); st.SkippedToHost != 4 || st.Received != 2 {
		t.Fatalf("stats %+v; want 4 refused to the host, 2 received", st)
	}
}
