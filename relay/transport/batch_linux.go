//go:build linux

package transport

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchConn is the Linux Conn: recvmmsg/sendmmsg issued directly through
// the socket's syscall.RawConn, so that Go's poller still does the waiting
// and Close still wakes blocked calls, with all per-call state (mmsghdrs,
// iovecs, raw sockaddrs, the bound callbacks) allocated once per socket.
type batchConn struct {
	// Static after construction.
	uc    *net.UDPConn
	raw   syscall.RawConn
	local netip.AddrPort
	ipv6  bool // the socket is AF_INET6 (dual-stack or IPv6-only)

	closed atomic.Bool
	gso    atomic.Bool // WriteBatch merges runs into UDP_SEGMENT sends

	gro bool // UDP_GRO is set: reads go through readGRO

	rxMu  sync.Mutex // serialises readers; guards rx and groRx
	rx    mmsgScratch
	groRx *groScratch // with gro, allocated by the first read

	txMu sync.Mutex // serialises writers; guards tx
	tx   txScratch

	dropsMu    sync.Mutex // guards dropsLast and dropsTotal
	dropsLast  uint32     // last kernel sk_drops seen (a wrapping u32)
	dropsTotal uint64     // sk_drops extended to 64 bits
}

// mmsgScratch is the reusable argument block of one recvmmsg or sendmmsg
// call. hdrs[i] points at names[i] permanently and, as built, at iovs[i]
// (reads keep that; see txScratch for writes); each call rewrites the
// iovecs (the caller's buffers) and the name lengths.
type mmsgScratch struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for RawSockaddrInet4 too

	// Arguments to and results of the callback run by RawConn.Read/Write.
	count int                // entries of hdrs to pass
	n     int                // mmsghdrs transferred by the last system call
	errno unix.Errno         // error of the last system call, 0 if none
	fn    func(uintptr) bool // bound once: a method value allocates
}

func newMmsgScratch(batch int) mmsgScratch {
	s := mmsgScratch{
		hdrs:  make([]unix.Mmsghdr, batch),
		iovs:  make([]unix.Iovec, batch),
		names: make([]unix.RawSockaddrInet6, batch),
	}
	for i := range s.hdrs {
		h := &s.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&s.names[i]))
		h.Iov = &s.iovs[i]
		h.SetIovlen(1)
	}
	return s
}

// txScratch is the sendmmsg argument block. Unlike a read, a write may put
// several messages in one mmsghdr (a GSO run), so hdrs[i] is repointed at
// its first iovec on every call, iovs holds one entry per message (at most
// BatchSize messages per call, as without GSO), segs[i] counts the
// messages hdrs[i] carries, and cmsgs[i] is hdrs[i]'s UDP_SEGMENT control
// message when segs[i] > 1.
type txScratch struct {
	mmsgScratch
	segs  []int
	cmsgs []gsoCmsg
}

func newTxScratch(batch int) txScratch {
	s := txScratch{
		mmsgScratch: newMmsgScratch(batch),
		segs:        make([]int, batch),
		cmsgs:       make([]gsoCmsg, batch),
	}
	for i := range s.cmsgs {
		s.cmsgs[i].init()
	}
	return s
}

// newBatchConn wraps uc; useGSO asks for UDP GSO and useGRO for UDP GRO,
// each granted if the kernel supports it.
func newBatchConn(uc *net.UDPConn, batch int, useGSO, useGRO bool) (*batchConn, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var domain int
	var sockErr error
	gso, gro := false, false
	if err := raw.Control(func(fd uintptr) {
		domain, sockErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		gso = useGSO && gsoSupported(fd)
		gro = useGRO && groEnable(fd)
	}); err != nil {
		return nil, err
	}
	if sockErr != nil {
		return nil, os.NewSyscallError("getsockopt SO_DOMAIN", sockErr)
	}
	c := &batchConn{
		uc:    uc,
		raw:   raw,
		local: localAddrPort(uc),
		ipv6:  domain == unix.AF_INET6,
		gro:   gro,
		rx:    newMmsgScratch(batch),
		tx:    newTxScratch(batch),
	}
	c.gso.Store(gso)
	c.rx.fn = c.rx.recvmmsg
	c.tx.fn = c.tx.sendmmsg
	return c, nil
}

// recvmmsg runs inside RawConn.Read. Returning false means "would block":
// the poller waits for readability and calls again.
func (s *mmsgScratch) recvmmsg(fd uintptr) bool { return s.mmsg(unix.SYS_RECVMMSG, fd) }

// sendmmsg runs inside RawConn.Write; see recvmmsg.
func (s *mmsgScratch) sendmmsg(fd uintptr) bool { return s.mmsg(unix.SYS_SENDMMSG, fd) }

// mmsg issues recvmmsg or sendmmsg (trap) on s.hdrs[:s.count], retrying on
// EINTR, and records the count and error in s; false means EAGAIN.
//
// The call is raw (no entersyscall/exitsyscall): the socket is non-blocking,
// so the call never waits, it only works, for at most one batch. Through the
// runtime's Syscall6 a batch that takes longer than sysmon's 20 µs tick
// (64 loopback datagrams take ~200 µs) has its P retaken and handed to a
// fresh M, and the reader then queues for a P on return: measured, that cost
// the relay 25-35% of its throughput at GOMAXPROCS=1 (BENCHMARKS.md, "Where
// the time goes"). The price is that this goroutine cannot be preempted or
// stopped for GC during one batch.
func (s *mmsgScratch) mmsg(trap, fd uintptr) bool {
	for {
		n, _, errno := unix.RawSyscall6(trap, fd,
			uintptr(unsafe.Pointer(&s.hdrs[0])), uintptr(s.count), 0, 0, 0)
		switch errno {
		case 0:
			s.n, s.errno = int(n), 0
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			s.n, s.errno = 0, errno
			return true
		}
	}
}

// setIov points iov at b (a nil base for an empty b).
func setIov(iov *unix.Iovec, b []byte) {
	if len(b) == 0 {
		iov.Base = nil
		iov.SetLen(0)
		return
	}
	iov.Base = &b[0]
	iov.SetLen(len(b))
}

func (c *batchConn) ReadBatch(msgs []Message) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	c.rxMu.Lock()
	defer c.rxMu.Unlock()
	if c.gro {
		return c.readGRO(msgs)
	}
	s := &c.rx
	k := min(len(msgs), len(s.hdrs))
	for i := range k {
		setIov(&s.iovs[i], msgs[i].Buf)
		h := &s.hdrs[i]
		h.Hdr.Namelen = unix.SizeofSockaddrInet6
		h.Hdr.Flags = 0
		h.Len = 0
	}
	s.count = k
	if err := c.raw.Read(s.fn); err != nil {
		return 0, err
	}
	if s.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", s.errno)
	}
	for i := range s.n {
		msgs[i].N = int(s.hdrs[i].Len)
		msgs[i].Trunc = s.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0
		msgs[i].Addr = parseSockaddr(&s.names[i])
	}
	return s.n, nil
}

// WriteBatch sends msgs with as few sendmmsg calls as BatchSize allows.
// With GSO on, each run of adjacent messages that gsoRun accepts becomes
// one mmsghdr with one iovec per message (no copy) and a UDP_SEGMENT
// control message; the kernel's per-mmsghdr count is translated back to
// messages through txScratch.segs, so the contract (msgs[:n] sent, the
// error concerns msgs[n]) holds in terms of the caller's messages.
//
// A failed GSO send is resent one datagram per mmsghdr: per-datagram
// errors (EMSGSIZE, EACCES, unreachable) then surface on the message they
// belong to, and a segment larger than the route MTU (which GSO refuses
// with EMSGSIZE but a plain send fragments) still goes out. If the error
// was one gsoRefusal accepts and the run's first datagram then goes out
// plain, the kernel refused GSO itself: GSO is disabled on this Conn for
// good and the caller never sees the error.
func (c *batchConn) WriteBatch(msgs []Message) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	c.txMu.Lock()
	defer c.txMu.Unlock()
	s := &c.tx
	sent := 0
	// msgs[:plainUntil] must not be merged (a GSO send of them failed);
	// suspect is that failure's errno if it may mean GSO was refused,
	// to be confirmed by msgs[sent] going out plain.
	plainUntil, suspect := 0, unix.Errno(0)
	for sent < len(msgs) {
		h, packErr := c.packTx(msgs[sent:], max(plainUntil-sent, 0))
		if h == 0 {
			return sent, packErr
		}
		s.count = h
		if err := c.raw.Write(s.fn); err != nil {
			return sent, err
		}
		if s.errno != 0 {
			if s.segs[0] > 1 {
				plainUntil = sent + s.segs[0]
				suspect = 0
				if gsoRefusal(s.errno) {
					suspect = s.errno
				}
				continue
			}
			return sent, os.NewSyscallError("sendmmsg", s.errno)
		}
		if s.n <= 0 {
			return sent, io.ErrShortWrite // sendmmsg with vlen > 0 never returns 0
		}
		if suspect != 0 {
			// The run's first datagram went out plain after its GSO send
			// failed: the kernel refuses GSO here.
			c.gso.Store(false)
			suspect = 0
		}
		for _, segs := range s.segs[:s.n] {
			sent += segs
		}
		// If s.n < h the kernel stopped at msgs[sent] and dropped that
		// message's error; the next iteration retries it and reports it.
		if s.n == h && packErr != nil {
			return sent, packErr
		}
	}
	return sent, nil
}

// packTx fills c.tx with the longest valid prefix of msgs that fits one
// sendmmsg: at most len(hdrs) mmsghdrs carrying at most len(iovs)
// messages, merging GSO runs (see gsoRun) if GSO is on, except within
// msgs[:plain]. It returns the number of mmsghdrs packed, carrying
// msgs[:k] with k = sum(segs[:h]), and, if packing stopped on an invalid
// msgs[k], its error.
func (c *batchConn) packTx(msgs []Message, plain int) (h int, err error) {
	s := &c.tx
	gso := c.gso.Load()
	k := 0
	for h < len(s.hdrs) && k < len(s.iovs) && k < len(msgs) {
		m := &msgs[k]
		if err := CheckWrite(m); err != nil {
			return h, err
		}
		namelen, ok := c.putSockaddr(&s.names[h], m.Addr)
		if !ok {
			return h, ErrInvalidAddr
		}
		segs := 1
		if gso && k >= plain {
			segs = gsoRun(msgs[k:min(len(msgs), len(s.iovs))])
		}
		for j := k; j < k+segs; j++ {
			setIov(&s.iovs[j], msgs[j].Buf[:msgs[j].N])
		}
		hdr := &s.hdrs[h]
		hdr.Hdr.Namelen = namelen
		hdr.Hdr.Iov = &s.iovs[k]
		hdr.Hdr.SetIovlen(segs)
		if segs > 1 {
			s.cmsgs[h].size = uint16(m.N)
			hdr.Hdr.Control = (*byte)(unsafe.Pointer(&s.cmsgs[h]))
			hdr.Hdr.SetControllen(gsoCmsgLen)
		} else {
			hdr.Hdr.Control = nil
			hdr.Hdr.SetControllen(0)
		}
		hdr.Len = 0
		s.segs[h] = segs
		h++
		k += segs
	}
	return h, nil
}

// putSockaddr writes ap into sa in the socket's address family and returns
// the sockaddr length, or false if the socket cannot reach ap.
func (c *batchConn) putSockaddr(sa *unix.RawSockaddrInet6, ap netip.AddrPort) (uint32, bool) {
	ip := ap.Addr()
	if !c.ipv6 {
		ip = ip.Unmap()
		if !ip.Is4() {
			return 0, false
		}
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		sa4.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:], ap.Port())
		sa4.Addr = ip.As4()
		sa4.Zero = [8]uint8{}
		return unix.SizeofSockaddrInet4, true
	}
	sa.Family = unix.AF_INET6
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
	sa.Flowinfo = 0
	sa.Addr = ip.As16() // IPv4 becomes ::ffff:a.b.c.d for a dual-stack socket
	sa.Scope_id = 0
	if zone := ip.Zone(); zone != "" {
		idx, ok := zoneIndex(zone)
		if !ok {
			return 0, false
		}
		sa.Scope_id = idx
	}
	return unix.SizeofSockaddrInet6, true
}

// parseSockaddr decodes a sockaddr filled in by recvmmsg, unmapping
// IPv4-mapped IPv6 addresses. A non-zero IPv6 scope id becomes a numeric
// zone (link-local peers only; that rare path allocates).
func parseSockaddr(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		ip := netip.AddrFrom16(sa.Addr).Unmap()
		if sa.Scope_id != 0 && ip.Is6() {
			ip = ip.WithZone(strconv.FormatUint(uint64(sa.Scope_id), 10))
		}
		return netip.AddrPortFrom(ip, port)
	default:
		return netip.AddrPort{}
	}
}

// zoneIndex resolves an IPv6 zone (numeric index or interface name) to an
// interface index.
func zoneIndex(zone string) (uint32, bool) {
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), true
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, false
	}
	return uint32(ifi.Index), true
}

func (c *batchConn) LocalAddr() netip.AddrPort { return c.local }

func (c *batchConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.uc.Close()
}

// Drops returns the kernel's count of datagrams dropped on this socket
// (sk_drops: receive buffer full, and the rarer checksum and filter drops),
// read with getsockopt(SO_MEMINFO) — one system call per Drops, nothing per
// packet. The kernel counter is 32 bits; Drops extends it to 64 provided it
// is called at least once per 2^32 drops. After Close it returns the last
// value read.
func (c *batchConn) Drops() uint64 {
	var info [unix.SK_MEMINFO_VARS]uint32
	infoLen := uint32(unsafe.Sizeof(info))
	var errno unix.Errno
	err := c.raw.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&infoLen)), 0)
	})
	c.dropsMu.Lock()
	defer c.dropsMu.Unlock()
	if err == nil && errno == 0 && infoLen >= (unix.SK_MEMINFO_DROPS+1)*4 {
		cur := info[unix.SK_MEMINFO_DROPS]
		c.dropsTotal += uint64(cur - c.dropsLast) // modular: survives wrap
		c.dropsLast = cur
	}
	return c.dropsTotal
}

// SocketBufferSizes implements SocketBufferSizer.
func (c *batchConn) SocketBufferSizes() (recv, send int, err error) {
	var recvErr, sendErr error
	if err := c.raw.Control(func(fd uintptr) {
		recv, recvErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		send, sendErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	}); err != nil {
		return 0, 0, err
	}
	if err := errors.Join(recvErr, sendErr); err != nil {
		return 0, 0, os.NewSyscallError("getsockopt", err)
	}
	return recv, send, nil
}
