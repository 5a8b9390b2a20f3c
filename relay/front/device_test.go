package front

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// gsoPackets builds IPv4/UDP packets from src to dst with payloads of the
// given sizes (byte i of packet k is k), each at tunOffset in an MTU-sized
// buffer, as Conn.build makes them.
func gsoPackets(src, dst netip.AddrPort, sizes ...int) [][]byte {
	var out [][]byte
	for k, n := range sizes {
		out = append(out, AppendUDP4(make([]byte, tunOffset, tunOffset+DefaultMTU), src, dst, bytes.Repeat([]byte{byte(k)}, n)))
	}
	return out
}

// TestCoalesce: a run of one flow's packets of one payload size (the last
// may be shorter) becomes one UDP GSO super-packet with a virtio header
// the kernel takes; a packet of another flow, or a longer one, ends the
// run; writeSplit gives back the same datagrams.
func TestCoalesce(t *testing.T) {
	a := netip.MustParseAddrPort("203.0.113.5:4000")
	b := netip.MustParseAddrPort("203.0.113.6:4000")
	bufs := append(gsoPackets(a, testShip, 100, 100, 40), gsoPackets(b, testShip, 100)...)
	if k := coalesce(bufs, tunOffset); k != 3 {
		t.Fatalf("coalesce = %d, want 3 (the other flow ends the run)", k)
	}
	sp := bufs[0][tunOffset:]
	h := bufs[0][tunOffset-vnetHdrLen : tunOffset]
	if len(sp) != HeadersLen+240 || binary.BigEndian.Uint16(sp[2:]) != uint16(len(sp)) ||
		binary.BigEndian.Uint16(sp[IPv4HeaderLen+4:]) != uint16(len(sp)-IPv4HeaderLen) {
		t.Fatalf("super-packet %d bytes, IP length %d, UDP length %d", len(sp), binary.BigEndian.Uint16(sp[2:]), binary.BigEndian.Uint16(sp[IPv4HeaderLen+4:]))
	}
	if ^checksum(sp[:IPv4HeaderLen], 0) != 0 {
		t.Fatal("IP header checksum wrong")
	}
	if h[0] != virtioNeedsCsum || h[1] != virtioGSOUDPL4 || binary.LittleEndian.Uint16(h[2:]) != HeadersLen ||
		binary.LittleEndian.Uint16(h[4:]) != 100 || binary.LittleEndian.Uint16(h[6:]) != IPv4HeaderLen || binary.LittleEndian.Uint16(h[8:]) != 6 {
		t.Fatalf("virtio header % x", h)
	}
	if k := coalesce(gsoPackets(a, testShip, 100, 120), tunOffset); k != 1 {
		t.Fatalf("coalesce of a longer second packet = %d, want 1", k)
	}
	if k := coalesce(gsoPackets(a, testShip, 100), tunOffset); k != 1 {
		t.Fatalf("coalesce of one packet = %d, want 1", k)
	}

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := (&fileDevice{}).writeSplit(fds[0], bufs[0][tunOffset-vnetHdrLen:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	for k, want := range []int{100, 100, 40} {
		n, err := unix.Read(fds[1], buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:vnetHdrLen], make([]byte, vnetHdrLen)) {
			t.Fatalf("datagram %d: virtio header % x, want none", k, buf[:vnetHdrLen])
		}
		src, dst, payload, err := ParseUDP4(buf[vnetHdrLen:n])
		if err != nil || src != a || dst != testShip || !bytes.Equal(payload, bytes.Repeat([]byte{byte(k)}, want)) {
			t.Fatalf("datagram %d: %v %v %d bytes %v", k, src, dst, len(payload), err)
		}
	}
}
