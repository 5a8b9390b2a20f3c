package transport

import (
	"net"
	"net/netip"
	"sync/atomic"
)

// portableConn is the Conn used where batched system calls are not
// available: one datagram per ReadBatch (a second read could block, and Go
// offers no portable non-blocking read), one WriteToUDPAddrPort per message.
// It is compiled on every platform so that its tests also run on Linux.
type portableConn struct {
	uc     *net.UDPConn
	local  netip.AddrPort
	closed atomic.Bool
}

// listenPortable opens a portableConn; opts must have been through
// withDefaults.
func listenPortable(addr netip.AddrPort, opts Options) (*portableConn, error) {
	uc, err := listenSocket(addr, opts)
	if err != nil {
		return nil, err
	}
	return &portableConn{uc: uc, local: localAddrPort(uc)}, nil
}

func (c *portableConn) ReadBatch(msgs []Message) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	m := &msgs[0]
	// ReadMsgUDPAddrPort rather than ReadFromUDPAddrPort, for the flags:
	// a datagram longer than Buf is reported, not passed on cut.
	n, _, flags, ap, err := c.uc.ReadMsgUDPAddrPort(m.Buf, nil)
	if err != nil {
		return 0, err
	}
	m.N = n
	m.Trunc = flags&msgTrunc != 0
	m.Addr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	return 1, nil
}

func (c *portableConn) WriteBatch(msgs []Message) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	for i := range msgs {
		m := &msgs[i]
		if err := CheckWrite(m); err != nil {
			return i, err
		}
		if _, err := c.uc.WriteToUDPAddrPort(m.Buf[:m.N], m.Addr); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

func (c *portableConn) LocalAddr() netip.AddrPort { return c.local }

func (c *portableConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.uc.Close()
}
