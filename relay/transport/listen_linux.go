//go:build linux

package transport

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// ListenUDP opens a UDP socket bound to addr. An IPv4 (or IPv4-mapped)
// address gives an IPv4 socket; the unspecified IPv6 address ([::]) or the
// zero AddrPort gives a dual-stack socket where the host allows it; any
// other IPv6 address gives an IPv6-only socket. Port 0 picks a free port
// (see LocalAddr). On Linux the Conn moves up to opts.BatchSize datagrams
// per recvmmsg/sendmmsg system call, allocation-free, sends runs of
// datagrams to one destination with UDP GSO where the kernel supports it
// (unless opts.DisableGSO), receives with UDP GRO where the kernel supports
// it (unless opts.DisableGRO), and also implements DropCounter,
// SocketBufferSizer, GSOer and GROer.
func ListenUDP(addr netip.AddrPort, opts Options) (Conn, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	uc, err := listenSocket(addr, opts)
	if err != nil {
		return nil, err
	}
	c, err := newBatchConn(uc, opts.BatchSize, !opts.DisableGSO, !opts.DisableGRO)
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("transport: listen %v: %w", addr, err)
	}
	return c, nil
}

// reusePortControl sets SO_REUSEPORT on a socket before bind.
func reusePortControl(network, address string, c syscall.RawConn) error {
	var sockErr error
	if err := c.Control(func(fd uintptr) {
		sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	if sockErr != nil {
		return fmt.Errorf("setsockopt SO_REUSEPORT: %w", sockErr)
	}
	return nil
}

// setSocketBuffers requests the given buffer sizes, first with the
// privileged SO_*BUFFORCE options (not capped by net.core.rmem_max /
// wmem_max), then, if that is not permitted, with SetReadBuffer /
// SetWriteBuffer, which the kernel caps silently. A negative size leaves
// the default.
func setSocketBuffers(uc *net.UDPConn, recv, send int) error {
	rc, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var forceRecvErr, forceSendErr error
	if err := rc.Control(func(fd uintptr) {
		if recv > 0 {
			forceRecvErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, recv)
		}
		if send > 0 {
			forceSendErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, send)
		}
	}); err != nil {
		return err
	}
	if recv > 0 && forceRecvErr != nil {
		if err := uc.SetReadBuffer(recv); err != nil {
			return err
		}
	}
	if send > 0 && forceSendErr != nil {
		if err := uc.SetWriteBuffer(send); err != nil {
			return err
		}
	}
	return nil
}
