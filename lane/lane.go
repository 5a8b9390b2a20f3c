package lane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
)

// Key is a lane in a compact, comparable, pointer-free form: the 16-byte
// address (IPv4 stored IPv4-mapped) and the port. Tables that hold many lanes
// (the relay's pending table, its route table) store Keys so the garbage
// collector has nothing to scan; APIs take and return netip.AddrPort.
// IPv6 zones are not kept.
type Key struct {
	IP   [16]byte
	Port uint16
}

// KeyOf returns the compact form of ap.
func KeyOf(ap netip.AddrPort) Key {
	return Key{IP: ap.Addr().As16(), Port: ap.Port()}
}

// Set makes k the compact form of ap (KeyOf), field by field, in place: a
// Key returned by value is moved whole, as two overlapping 16-byte halves,
// and a load of it soon after stalls on store forwarding, where one made
// in place is read as it was written.
func (k *Key) Set(ap netip.AddrPort) {
	a := ap.Addr()
	if a.Is4() {
		// The address as two 8-byte words, its 4 bytes read from As4's
		// array as one word: As16's array, written as two 8-byte words
		// and moved whole as one 16-byte word, stalled that move on
		// store forwarding (a load must lie within one earlier store).
		v4 := a.As4()
		binary.LittleEndian.PutUint64(k.IP[0:8], 0)
		binary.LittleEndian.PutUint64(k.IP[8:16], mapped4|uint64(binary.LittleEndian.Uint32(v4[:]))<<32)
	} else {
		// Copied as two 8-byte halves, as As16 writes its array.
		a16 := a.As16()
		binary.LittleEndian.PutUint64(k.IP[0:8], binary.LittleEndian.Uint64(a16[0:8]))
		binary.LittleEndian.PutUint64(k.IP[8:16], binary.LittleEndian.Uint64(a16[8:16]))
	}
	k.Port = ap.Port()
}

// mapped4 is bytes 8 to 15 of an IPv4-mapped address with its IPv4
// address zero, read little-endian: ::ffff:0.0.0.0's 0, 0, 0xff, 0xff.
const mapped4 = 0xffff0000

// AddrPort returns the lane as a netip.AddrPort, with IPv4-mapped addresses
// unmapped.
func (k Key) AddrPort() netip.AddrPort { return AddrPortOf(&k) }

// AddrPortOf is k.AddrPort, *k read in place by 4- and 8-byte words: a
// Key copied (a value receiver's copy, or As16's array) is moved as
// overlapping 16-byte words, and the loads after such a move stall on
// store forwarding. The relay's send paths call it.
func AddrPortOf(k *Key) netip.AddrPort {
	lo := binary.LittleEndian.Uint64(k.IP[8:16])
	if binary.LittleEndian.Uint64(k.IP[0:8]) == 0 && uint32(lo) == mapped4 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(k.IP[12:16])), k.Port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16(k.IP), k.Port)
}

// IsValid reports whether k is a usable lane (not the zero Key).
func (k Key) IsValid() bool { return k != Key{} }

// Is4 reports whether k is an IPv4 lane (stored IPv4-mapped).
func (k Key) Is4() bool {
	return k.IP[10] == 0xff && k.IP[11] == 0xff && [10]byte(k.IP[:10]) == [10]byte{}
}

// Source returns what stands for k's sender in per-source caps and shares:
// its IPv4 address, or the /64 of its IPv6 address (a host picks any
// address in its /64), with the rest zero; the port never counts.
func (k Key) Source() [16]byte {
	if k.Is4() {
		return k.IP
	}
	var s [16]byte
	copy(s[:8], k.IP[:8])
	return s
}

// Canon returns the canonical form of a lane: an IPv4-mapped IPv6 address
// becomes plain IPv4 and any IPv6 zone is dropped, so that the same peer
// always compares equal (and equals KeyOf(ap).AddrPort()). An invalid ap is
// returned unchanged.
func Canon(ap netip.AddrPort) netip.AddrPort {
	if !ap.IsValid() {
		return ap
	}
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}

// ShortLen is the size of the SHORT lane encoding.
const ShortLen = 6

// EncodeShort returns ap in the 6-byte SHORT form: the IPv4 address as a
// host-order u32 written little-endian (127.0.0.1 is 01 00 00 7f), then the
// port as a little-endian u16 (13337 is 19 34). IPv4-mapped addresses are
// unmapped first. ok is false, and b is zero, when ap is not IPv4 (IPv6
// cannot be carried and is never truncated) or is invalid.
func EncodeShort(ap netip.AddrPort) (b [ShortLen]byte, ok bool) {
	addr := ap.Addr().Unmap()
	if !addr.Is4() {
		return b, false
	}
	a4 := addr.As4() // network order: a4[0] is the first octet
	binary.LittleEndian.PutUint32(b[0:4], binary.BigEndian.Uint32(a4[:]))
	binary.LittleEndian.PutUint16(b[4:6], ap.Port())
	return b, true
}

// Short is EncodeShort(k.AddrPort()), read from *k in place: the IPv4
// address's octets (k.IP[12:16]) and the port.
func (k *Key) Short() (b [ShortLen]byte, ok bool) {
	if !k.Is4() {
		return b, false
	}
	b[0], b[1], b[2], b[3] = k.IP[15], k.IP[14], k.IP[13], k.IP[12]
	binary.LittleEndian.PutUint16(b[4:6], k.Port)
	return b, true
}

// DecodeShort returns the lane held in a 6-byte SHORT encoding (see
// EncodeShort). Every 6-byte value decodes to an IPv4 lane.
func DecodeShort(b [ShortLen]byte) netip.AddrPort {
	var a4 [4]byte
	binary.BigEndian.PutUint32(a4[:], binary.LittleEndian.Uint32(b[0:4]))
	return netip.AddrPortFrom(netip.AddrFrom4(a4), binary.LittleEndian.Uint16(b[4:6]))
}

// ErrInvalidLane is wrapped by the errors ParseLane returns.
var ErrInvalidLane = errors.New("lane: invalid lane")

// ParseLane parses "a.b.c.d:port" or "[ipv6]:port" and returns the lane in
// canonical form (see Canon). Port 0 is rejected: nothing can be reached
// there.
func ParseLane(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: %w", ErrInvalidLane, err)
	}
	if ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("%w %q: port 0", ErrInvalidLane, s)
	}
	return Canon(ap), nil
}

// nonPublic lists the address blocks, beyond what netip's predicates name,
// that are never reachable across the internet: "this network", shared
// address space (carrier-grade NAT), IETF protocol assignments, benchmarking,
// reserved space and limited broadcast (IANA special-purpose registries), and
// IPv6's discard-only and IPv4-mapped/translated prefixes. Documentation
// prefixes (TEST-NET) are left public: they are what examples and tests use
// for remote hosts.
var nonPublic = [...]netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// PublicAddr reports whether a may be the address of a remote host on the
// internet: not unspecified, loopback, private (RFC 1918, ULA), link-local,
// multicast, broadcast or otherwise reserved. A relay names and sends to
// only such addresses unless its operator declares another network.
func PublicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is4() {
		return public4(a.As4())
	}
	if !a.IsValid() || a.IsUnspecified() || a.IsLoopback() || a.IsPrivate() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsMulticast() ||
		a.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Mix64 is the 64-bit finalizer of MurmurHash3 (fmix64): a bijection that
// spreads every input bit over every output bit, so that bits taken from
// different places of the result are independent even for non-random keys
// (the relay's table indexes, shards and tags).
func Mix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// Hash returns a 64-bit hash of the lane, every bit of the address and port
// reaching every bit of the hash (IPv4 lanes differ in only 6 of the Key's
// 18 bytes, so a weaker mix puts whole subnets together). One finalizer
// round: the port goes into bits 16-31 of the address's low word, which an
// IPv4-mapped address fills with the constant 0xffff, and the high word,
// zero for IPv4, is rotated in.
func (k Key) Hash() uint64 { return HashOf(&k) }

// HashOf is k.Hash(), reading *k in place: a Key passed by value is copied
// with two overlapping 16-byte stores, and the 8-byte loads that read it
// next stall on them (a failed store-to-load forward), so the
// per-datagram paths hash lanes where they lie.
func HashOf(k *Key) uint64 {
	w := binary.LittleEndian.Uint64(k.IP[8:16]) ^ uint64(k.Port)<<16
	w ^= bits.RotateLeft64(binary.LittleEndian.Uint64(k.IP[0:8]), 29)
	return Mix64(w ^ 0x9E3779B97F4A7C15)
}

// public4 is PublicAddr for IPv4, by octets: it runs for every page the
// relay passes on.
func public4(b [4]byte) bool {
	switch {
	case b[0] == 0, b[0] == 10, b[0] == 127, b[0] >= 224: // this network, RFC 1918, loopback, multicast and reserved, broadcast
		return false
	case b[0] == 100 && b[1]&0xC0 == 64: // shared address space, 100.64/10
		return false
	case b[0] == 169 && b[1] == 254, b[0] == 192 && b[1] == 168: // link-local, RFC 1918
		return false
	case b[0] == 172 && b[1]&0xF0 == 16: // RFC 1918, 172.16/12
		return false
	case b[0] == 192 && b[1] == 0 && b[2] == 0: // IETF protocol assignments
		return false
	case b[0] == 198 && b[1]&0xFE == 18: // benchmarking, 198.18/15
		return false
	}
	return true
}
