package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Message is one datagram. For reads, Buf is the caller's buffer
// (len(Buf) = capacity to fill) and N and Addr are set by ReadBatch; for
// writes, Buf[:N] is sent to Addr. See the package comment for ownership.
type Message struct {
	Buf  []byte
	N    int
	Addr netip.AddrPort
	// Trunc is set by ReadBatch when the datagram was longer than
	// len(Buf) and Buf[:N] holds only its first bytes (MSG_TRUNC on
	// Linux). A Conn that cannot tell leaves it false; see the package
	// comment for the length convention that still catches those.
	// WriteBatch ignores it.
	Trunc bool
}

// Conn is one UDP socket as the relay sees it. ReadBatch blocks until at
// least one datagram is read and returns how many msgs were filled;
// WriteBatch sends msgs in order and returns how many were sent. After
// Close, both return an error matching net.ErrClosed; Close is idempotent.
// The caller may reuse buffers as soon as WriteBatch returns. Safe for one
// reader goroutine and concurrent writers.
type Conn interface {
	ReadBatch(msgs []Message) (int, error)
	WriteBatch(msgs []Message) (int, error)
	LocalAddr() netip.AddrPort
	Close() error
}

// DropCounter is implemented by a Conn that can report datagrams discarded
// because its receive queue was full (the kernel socket receive buffer for
// real sockets, the bounded queue for transporttest's MemNetwork conns).
type DropCounter interface {
	// Drops returns the number of inbound datagrams dropped so far for lack
	// of receive-queue space. It is monotonic and cheap enough to call from
	// a metrics scrape, but not per packet.
	Drops() uint64
}

// SocketBufferSizer is implemented by a Conn backed by a kernel socket whose
// buffer sizes can be queried.
type SocketBufferSizer interface {
	// SocketBufferSizes returns SO_RCVBUF and SO_SNDBUF as the kernel
	// reports them. Linux reports twice the byte count granted (it reserves
	// the other half for bookkeeping) and caps unprivileged requests at
	// net.core.rmem_max / wmem_max.
	SocketBufferSizes() (recv, send int, err error)
}

// GrantedBuffers returns the receive and send buffer sizes c's socket was
// granted, in the units Options.ReadBufferBytes and WriteBufferBytes ask
// in, so comparable with the request and with net.core.rmem_max /
// wmem_max: half what SocketBufferSizes reports, since Linux (the only
// platform whose Conns implement it) reports twice its grant. ok is false
// when c is not such a socket or the query failed.
func GrantedBuffers(c Conn) (recv, send int, ok bool) {
	s, isSizer := c.(SocketBufferSizer)
	if !isSizer {
		return 0, 0, false
	}
	r, w, err := s.SocketBufferSizes()
	if err != nil {
		return 0, 0, false
	}
	return r / 2, w / 2, true
}

// GSOer is implemented by a Conn that can send with UDP generic
// segmentation offload (Linux sockets from ListenUDP). Tests and
// benchmarks use it to tell which send path a Conn takes.
type GSOer interface {
	// GSO reports whether WriteBatch currently merges runs of adjacent,
	// equal-sized datagrams to one destination into single UDP_SEGMENT
	// sends. False if Options.DisableGSO was set, if the kernel lacks
	// UDP_SEGMENT (before Linux 4.18), or once the kernel has refused a
	// GSO send on this Conn (GSO then stays off for its lifetime).
	GSO() bool
}

// GROer is implemented by a Conn that can receive with UDP generic receive
// offload (Linux sockets from ListenUDP).
type GROer interface {
	// GRO reports whether the socket has UDP_GRO set: false if
	// Options.DisableGRO was set or the kernel lacks it (before 5.0).
	GRO() bool
}

const (
	// DefaultBatchSize is the number of datagrams moved per system call
	// when Options.BatchSize is 0. 64 amortises the syscall cost well
	// (wireguard-go and quic-go use 64 and 128) while keeping a batch of
	// 64 × 1500 B buffers under 100 KiB.
	DefaultBatchSize = 64

	// MaxBatchSize is the largest accepted Options.BatchSize: Linux caps
	// recvmmsg/sendmmsg vlen at UIO_MAXIOV (1024).
	MaxBatchSize = 1024

	// DefaultSocketBufferBytes is the SO_RCVBUF/SO_SNDBUF requested when
	// Options.ReadBufferBytes/WriteBufferBytes are 0. The Linux default
	// (212992 B) holds ~150 full-size datagrams, well under a few
	// milliseconds of relay traffic; 4 MiB absorbs scheduling hiccups.
	DefaultSocketBufferBytes = 4 << 20
)

// Options configures ListenUDP. The zero value is ready to use.
type Options struct {
	// BatchSize is the maximum number of datagrams per recvmmsg/sendmmsg
	// call. 0 means DefaultBatchSize; at most MaxBatchSize. A ReadBatch or
	// WriteBatch with more messages is served BatchSize at a time (reads
	// return at most BatchSize).
	BatchSize int

	// ReadBufferBytes and WriteBufferBytes are the socket receive and send
	// buffer sizes to request. 0 means DefaultSocketBufferBytes; negative
	// leaves the operating system's default. On Linux, SO_RCVBUFFORCE /
	// SO_SNDBUFFORCE are tried first (they succeed with CAP_NET_ADMIN and
	// bypass net.core.rmem_max), then SO_RCVBUF / SO_SNDBUF, which the
	// kernel silently caps. Use SocketBufferSizes to see what was granted.
	ReadBufferBytes  int
	WriteBufferBytes int

	// ReusePort sets SO_REUSEPORT before bind, so several sockets (one per
	// reader goroutine) can share one address and the kernel spreads flows
	// across them. Supported on Linux only; elsewhere ListenUDP fails.
	ReusePort bool

	// DisableGSO turns off UDP generic segmentation offload, which Linux
	// sockets otherwise use where the kernel supports it (see the package
	// comment, "Cost", and GSOer). Datagrams and the WriteBatch contract
	// are the same either way; only the number of trips through the
	// kernel's send path differs. Ignored on other platforms.
	DisableGSO bool

	// DisableGRO turns off UDP generic receive offload, which Linux
	// sockets otherwise set where the kernel supports it (5.0 and later):
	// a read may then carry several datagrams of one flow, which ReadBatch
	// splits into the caller's messages (see the package comment, "Cost",
	// and GROer). The datagrams read are the same either way. With GRO a
	// socket keeps a 64 KiB read buffer per batch slot (4 MiB at the
	// default batch, allocated by the first read; the kernel touches only
	// the pages reads fill). Ignored on other platforms.
	DisableGRO bool
}

// withDefaults validates o and fills in defaults.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.BatchSize == 0:
		o.BatchSize = DefaultBatchSize
	case o.BatchSize < 0 || o.BatchSize > MaxBatchSize:
		return o, fmt.Errorf("transport: batch size %d outside [1, %d]", o.BatchSize, MaxBatchSize)
	}
	if o.ReadBufferBytes == 0 {
		o.ReadBufferBytes = DefaultSocketBufferBytes
	}
	if o.WriteBufferBytes == 0 {
		o.WriteBufferBytes = DefaultSocketBufferBytes
	}
	return o, nil
}

var (
	// ErrInvalidMessage reports a write Message whose N is outside
	// [0, len(Buf)].
	ErrInvalidMessage = errors.New("transport: message N outside [0, len(Buf)]")

	// ErrInvalidAddr reports a write Message whose Addr is not a valid
	// address with a non-zero port, or one of an IP family the socket
	// cannot reach (an IPv6 destination on an IPv4 socket).
	ErrInvalidAddr = errors.New("transport: invalid destination address")

	// errReusePortUnsupported is returned by ListenUDP for
	// Options.ReusePort on platforms without load-balancing SO_REUSEPORT.
	errReusePortUnsupported = errors.New("transport: SO_REUSEPORT is supported only on Linux")
)

// CheckWrite validates one outbound message: ErrInvalidMessage or
// ErrInvalidAddr, as every Conn's WriteBatch reports them (the test
// networks in transporttest check writes with it too).
func CheckWrite(m *Message) error {
	if m.N < 0 || m.N > len(m.Buf) {
		return ErrInvalidMessage
	}
	if !m.Addr.IsValid() || m.Addr.Port() == 0 {
		return ErrInvalidAddr
	}
	return nil
}

// listenNetwork returns the Go network name and address string for binding
// addr: "udp4" for an IPv4 (or IPv4-mapped) address, "udp" for the
// unspecified IPv6 address or an invalid (zero) address so that the socket
// is dual-stack where the host supports it, and "udp6" for a specific IPv6
// address.
func listenNetwork(addr netip.AddrPort) (network, address string) {
	ip := addr.Addr().Unmap()
	port := strconv.Itoa(int(addr.Port()))
	switch {
	case !ip.IsValid():
		return "udp", ":" + port
	case ip.Is4():
		return "udp4", netip.AddrPortFrom(ip, addr.Port()).String()
	case ip.IsUnspecified():
		return "udp", "[::]:" + port
	default:
		return "udp6", netip.AddrPortFrom(ip, addr.Port()).String()
	}
}

// listenSocket opens a UDP socket bound to addr with opts applied (opts
// must have been through withDefaults).
func listenSocket(addr netip.AddrPort, opts Options) (*net.UDPConn, error) {
	lc := net.ListenConfig{}
	if opts.ReusePort {
		lc.Control = reusePortControl
	}
	network, address := listenNetwork(addr)
	pc, err := lc.ListenPacket(context.Background(), network, address)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", address, err)
	}
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		pc.Close()
		return nil, fmt.Errorf("transport: listen %s: got %T, want *net.UDPConn", address, pc)
	}
	if err := setSocketBuffers(uc, opts.ReadBufferBytes, opts.WriteBufferBytes); err != nil {
		uc.Close()
		return nil, fmt.Errorf("transport: listen %s: %w", address, err)
	}
	return uc, nil
}

// localAddrPort returns the unmapped local address of uc.
func localAddrPort(uc *net.UDPConn) netip.AddrPort {
	ua, ok := uc.LocalAddr().(*net.UDPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ap := ua.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
