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

// TestTakeVnet: a packet read with a partial UDP checksum (NEEDS_CSUM, as
// the ship's kernel leaves it to a TUN offering TUN_F_CSUM) gets a zero
// checksum, which ParseUDP4 takes; a whole packet is untouched; a GSO
// super-packet is refused; a partial checksum anywhere but the UDP
// checksum's place is left for ParseUDP4 to refuse.
func TestTakeVnet(t *testing.T) {
	a := netip.MustParseAddrPort("203.0.113.5:4000")
	partial := func() []byte {
		pkt := gsoPackets(testShip, a, 100)[0][tunOffset:]
		// What the ship's kernel writes: the pseudo-header's sum only.
		binary.BigEndian.PutUint16(pkt[IPv4HeaderLen+6:], fold(pseudoHeaderSum(pkt[12:20], len(pkt)-IPv4HeaderLen)))
		return pkt
	}
	hdr := func(flags, gso byte, start, off int) []byte {
		h := make([]byte, vnetHdrLen)
		h[0], h[1] = flags, gso
		binary.LittleEndian.PutUint16(h[6:], uint16(start))
		binary.LittleEndian.PutUint16(h[8:], uint16(off))
		return h
	}

	pkt := partial()
	if _, _, _, err := ParseUDP4(pkt); err != ErrUDPChecksum {
		t.Fatalf("a partial checksum parses with %v, want ErrUDPChecksum (the test's packet is wrong)", err)
	}
	if !takeVnet(hdr(virtioNeedsCsum, virtioGSONone, IPv4HeaderLen, udpChecksumOffset), pkt) {
		t.Fatal("takeVnet refused a whole packet")
	}
	if src, dst, payload, err := ParseUDP4(pkt); err != nil || src != testShip || dst != a || len(payload) != 100 {
		t.Fatalf("after takeVnet: %v %v %d bytes %v", src, dst, len(payload), err)
	}

	whole := gsoPackets(testShip, a, 100)[0][tunOffset:]
	want := bytes.Clone(whole)
	if !takeVnet(hdr(0, virtioGSONone, 0, 0), whole) || !bytes.Equal(whole, want) {
		t.Fatal("takeVnet changed or refused a packet with a complete checksum")
	}

	if takeVnet(hdr(virtioNeedsCsum, virtioGSOUDPL4, IPv4HeaderLen, udpChecksumOffset), partial()) {
		t.Fatal("takeVnet took a GSO super-packet")
	}

	pkt = partial()
	takeVnet(hdr(virtioNeedsCsum, virtioGSONone, IPv4HeaderLen, 16), pkt) // TCP's checksum offset
	if _, _, _, err := ParseUDP4(pkt); err != ErrUDPChecksum {
		t.Fatalf("a partial checksum at another offset parses with %v, want ErrUDPChecksum", err)
	}
}
