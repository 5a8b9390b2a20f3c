package lane

import "net/netip"

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

// AddrPort returns the lane as a netip.AddrPort, with IPv4-mapped addresses
// unmapped.
func (k Key) AddrPort() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(k.IP).Unmap(), k.Port)
}

// IsValid reports whether k is a usable lane (not the zero Key).
func (k Key) IsValid() bool { return k != Key{} }
