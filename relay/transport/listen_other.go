//go:build !linux

package transport

import (
	"net"
	"net/netip"
	"syscall"
)

// ListenUDP opens a UDP socket bound to addr. An IPv4 (or IPv4-mapped)
// address gives an IPv4 socket; the unspecified IPv6 address ([::]) or the
// zero AddrPort gives a dual-stack socket where the host allows it; port 0
// picks a free port (see LocalAddr). On this platform the socket uses the
// portable one-datagram-per-call path.
func ListenUDP(addr netip.AddrPort, opts Options) (Conn, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return listenPortable(addr, opts)
}

// reusePortControl fails: only Linux's SO_REUSEPORT balances datagrams
// across sockets.
func reusePortControl(network, address string, c syscall.RawConn) error {
	return errReusePortUnsupported
}

// setSocketBuffers requests the given buffer sizes; a negative size leaves
// the default.
func setSocketBuffers(uc *net.UDPConn, recv, send int) error {
	if recv > 0 {
		if err := uc.SetReadBuffer(recv); err != nil {
			return err
		}
	}
	if send > 0 {
		if err := uc.SetWriteBuffer(send); err != nil {
			return err
		}
	}
	return nil
}
