package front

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"net/netip"
	"slices"
)

// The IPv4 and UDP headers, as ParseUDP4 reads and AppendUDP4 writes them
// (RFC 791, RFC 768); multi-byte fields are big-endian:
//
//	offset  size  field
//	0       1     version (high 4 bits, 4) | IHL (low 4 bits, header length in 32-bit words, >= 5)
//	1       1     DSCP/ECN (written 0, ignored)
//	2       2     total length: header + UDP header + payload, <= len(b)
//	4       2     identification (written 0: DF packets are atomic, RFC 6864)
//	6       2     flags (bit 14 DF, bit 13 MF) | fragment offset (low 13 bits)
//	8       1     TTL (written 64)
//	9       1     protocol (17, UDP)
//	10      2     header checksum over bytes [0, IHL*4)
//	12      4     source address
//	16      4     destination address
//	20      ...   options, IHL*4-20 bytes (skipped; never written)
//
//	IHL*4+0 2     UDP source port
//	IHL*4+2 2     UDP destination port
//	IHL*4+4 2     UDP length: UDP header + payload, == total length - IHL*4
//	IHL*4+6 2     UDP checksum over the pseudo-header (source, destination,
//	              0, 17, UDP length), the UDP header and the payload; 0 means
//	              none, and a computed 0 is written as 0xffff
//
// Bytes after the total length are ignored (a TUN never has any).

// Errors from ParseUDP4, one per reason a packet is refused.
var (
	// ErrShort: b is shorter than the header it claims (20 B, IHL*4 or
	// IHL*4+8).
	ErrShort = errors.New("front: packet shorter than its headers")

	// ErrVersion: not IPv4 (an IPv6 router solicitation, say).
	ErrVersion = errors.New("front: not an IPv4 packet")

	// ErrHeaderLength: IHL below 5.
	ErrHeaderLength = errors.New("front: IPv4 header length below 20 bytes")

	// ErrTotalLength: the total length is shorter than the header or
	// longer than b.
	ErrTotalLength = errors.New("front: IPv4 total length inconsistent with the packet")

	// ErrFragment: MF set or a non-zero fragment offset.
	ErrFragment = errors.New("front: IPv4 fragment")

	// ErrProtocol: not UDP (ICMP, IGMP, TCP, ...).
	ErrProtocol = errors.New("front: not a UDP packet")

	// ErrHeaderChecksum: the IPv4 header checksum does not verify.
	ErrHeaderChecksum = errors.New("front: bad IPv4 header checksum")

	// ErrUDPLength: the UDP length is not the IP payload's length.
	ErrUDPLength = errors.New("front: UDP length inconsistent with the IPv4 total length")

	// ErrUDPChecksum: a non-zero UDP checksum does not verify.
	ErrUDPChecksum = errors.New("front: bad UDP checksum")
)

const (
	protoUDP      = 17
	flagDF        = 0x4000
	flagMF        = 0x2000
	fragOffsetMax = 0x1fff
)

// ParseUDP4 decodes one IPv4 packet carrying a whole UDP datagram. It
// returns the UDP source and destination, and payload, a sub-slice of b.
// It checks everything in the layout above and returns the first error
// found, one of the Err variables of this package; it allocates nothing.
func ParseUDP4(b []byte) (src, dst netip.AddrPort, payload []byte, err error) {
	if len(b) < IPv4HeaderLen {
		if len(b) > 0 && b[0]>>4 != 4 {
			return src, dst, nil, ErrVersion
		}
		return src, dst, nil, ErrShort
	}
	if b[0]>>4 != 4 {
		return src, dst, nil, ErrVersion
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < IPv4HeaderLen {
		return src, dst, nil, ErrHeaderLength
	}
	if len(b) < ihl {
		return src, dst, nil, ErrShort
	}
	total := int(binary.BigEndian.Uint16(b[2:]))
	if total < ihl || total > len(b) {
		return src, dst, nil, ErrTotalLength
	}
	b = b[:total]
	if ff := binary.BigEndian.Uint16(b[6:]); ff&flagMF != 0 || ff&fragOffsetMax != 0 {
		return src, dst, nil, ErrFragment
	}
	if b[9] != protoUDP {
		return src, dst, nil, ErrProtocol
	}
	if checksum(b[:ihl], 0) != 0xffff {
		return src, dst, nil, ErrHeaderChecksum
	}
	udp := b[ihl:]
	if len(udp) < UDPHeaderLen {
		return src, dst, nil, ErrShort
	}
	if int(binary.BigEndian.Uint16(udp[4:])) != len(udp) {
		return src, dst, nil, ErrUDPLength
	}
	if binary.BigEndian.Uint16(udp[6:]) != 0 && checksum(udp, pseudoHeaderSum(b[12:20], len(udp))) != 0xffff {
		return src, dst, nil, ErrUDPChecksum
	}
	src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[12:16])), binary.BigEndian.Uint16(udp[0:]))
	dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[16:20])), binary.BigEndian.Uint16(udp[2:]))
	return src, dst, udp[UDPHeaderLen:], nil
}

// AppendUDP4 appends to dst an IPv4 packet (no options, DF set, id 0, TTL
// 64) carrying a UDP datagram from src to to with payload, both checksums
// filled in, and returns the extended slice. It allocates only if dst
// lacks HeadersLen+len(payload) bytes of spare capacity.
//
// src and to must be IPv4 addresses (IPv4-mapped IPv6 is taken as IPv4)
// and len(payload) at most MaxUDP4Payload; AppendUDP4 panics otherwise, so
// callers check (Conn.WriteBatch does, returning an error).
func AppendUDP4(dst []byte, src, to netip.AddrPort, payload []byte) []byte {
	if len(payload) > MaxUDP4Payload {
		panic("front: AppendUDP4 payload longer than MaxUDP4Payload")
	}
	s, d := src.Addr().Unmap(), to.Addr().Unmap()
	if !s.Is4() || !d.Is4() {
		panic("front: AppendUDP4 needs IPv4 addresses")
	}
	n := len(dst)
	total := HeadersLen + len(payload)
	dst = slices.Grow(dst, total)[:n+total]
	p := dst[n:]

	p[0] = 4<<4 | IPv4HeaderLen/4
	p[1] = 0
	binary.BigEndian.PutUint16(p[2:], uint16(total))
	binary.BigEndian.PutUint16(p[4:], 0)
	binary.BigEndian.PutUint16(p[6:], flagDF)
	p[8] = defaultTTL
	p[9] = protoUDP
	p[10], p[11] = 0, 0
	a4, b4 := s.As4(), d.As4()
	copy(p[12:16], a4[:])
	copy(p[16:20], b4[:])
	binary.BigEndian.PutUint16(p[10:], ^checksum(p[:IPv4HeaderLen], 0))

	udp := p[IPv4HeaderLen:]
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], to.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	udp[6], udp[7] = 0, 0
	copy(udp[UDPHeaderLen:], payload)
	sum := ^checksum(udp, pseudoHeaderSum(p[12:20], len(udp)))
	if sum == 0 {
		sum = 0xffff // 0 means "no checksum" (RFC 768)
	}
	binary.BigEndian.PutUint16(udp[6:], sum)
	return dst
}

// pseudoHeaderSum is the unfolded sum of the UDP pseudo-header: addrs (the
// 8 bytes of source and destination), the protocol and the UDP length.
func pseudoHeaderSum(addrs []byte, udpLen int) uint64 {
	return uint64(binary.BigEndian.Uint32(addrs[0:])) +
		uint64(binary.BigEndian.Uint32(addrs[4:])) +
		protoUDP + uint64(udpLen)
}

// checksum returns the 16-bit ones'-complement sum of b (RFC 1071), started
// from initial, not complemented. The sum does not depend on byte order
// (RFC 1071 §2(B)), so it adds little-endian 32-bit halves of 64-bit loads
// into two 64-bit accumulators (no carries to chain: fewer than 2^32 adds),
// folds, and swaps the bytes of the result once.
func checksum(b []byte, initial uint64) uint16 {
	var lo, hi uint64
	for len(b) >= 32 {
		v0 := binary.LittleEndian.Uint64(b[0:])
		v1 := binary.LittleEndian.Uint64(b[8:])
		v2 := binary.LittleEndian.Uint64(b[16:])
		v3 := binary.LittleEndian.Uint64(b[24:])
		lo += v0&0xffffffff + v1&0xffffffff + v2&0xffffffff + v3&0xffffffff
		hi += v0>>32 + v1>>32 + v2>>32 + v3>>32
		b = b[32:]
	}
	for len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		lo += v & 0xffffffff
		hi += v >> 32
		b = b[8:]
	}
	if len(b) >= 4 {
		lo += uint64(binary.LittleEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		lo += uint64(binary.LittleEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		lo += uint64(b[0]) // the low byte of a little-endian word
	}
	le := fold(lo + hi) // cannot overflow: each is below 2^62
	return fold(uint64(bits.ReverseBytes16(le)) + initial)
}

// fold reduces a sum of 16-bit words to 16 bits with end-around carry.
func fold(s uint64) uint16 {
	s = s>>32 + s&0xffffffff
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}
