//go:build linux

package transport

import (
	"encoding/binary"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDP generic receive offload (UDP_GRO, Linux >= 5.0): with the option set,
// the kernel may hand one read several datagrams of one flow (same source,
// same destination) as one buffer plus a segment size in a SOL_UDP/UDP_GRO
// control message: a NIC or the software GRO layer merged them on the way
// in, or (on loopback and veth) a UDP_SEGMENT send arrived unsplit. Every
// segment but the last has exactly that size. Without the option the
// kernel splits such a buffer back into datagrams before queueing them,
// one socket-buffer each. ReadBatch splits it here instead, by copying the
// segments into the caller's buffers (wireguard-go's conn does the same,
// splitCoalescedMessages), so the caller sees the same datagrams either
// way.

const (
	// groBufSize is the read buffer of each mmsghdr when GRO is on: a
	// coalesced read holds at most 64 KiB (the kernel's GRO and GSO limit,
	// and the IP length field's), and a buffer too small would truncate
	// it, losing datagrams.
	groBufSize = 1 << 16

	// groCmsgSpace is the control buffer of each mmsghdr: CMSG_SPACE(4)
	// (24 bytes on 64-bit) for the UDP_GRO message, with room to spare so
	// that another message the kernel adds cannot truncate it.
	groCmsgSpace = 64
)

// groScratch holds the GRO read buffers of a batchConn and what the last
// recvmmsg read that ReadBatch has not yet handed out: a coalesced read can
// hold more datagrams than the caller gave messages for.
type groScratch struct {
	bufs  [][]byte // one groBufSize buffer per mmsghdr
	ctrl  []byte   // groCmsgSpace bytes per mmsghdr
	sizes []int    // per mmsghdr of the last read: segment size, 0 for one datagram
	addrs []netip.AddrPort

	count int // mmsghdrs the last read filled
	next  int // the first of them not yet handed out whole
	off   int // offset of its next segment

	coalesced uint64 // reads that carried more than one datagram (tests)
}

// newGROScratch allocates the buffers for batch mmsghdrs: batch × 64 KiB in
// one allocation, of which the kernel touches only the pages reads fill.
func newGROScratch(batch int) *groScratch {
	g := &groScratch{
		bufs:  make([][]byte, batch),
		ctrl:  make([]byte, batch*groCmsgSpace),
		sizes: make([]int, batch),
		addrs: make([]netip.AddrPort, batch),
	}
	all := make([]byte, batch*groBufSize)
	for i := range g.bufs {
		g.bufs[i] = all[i*groBufSize : (i+1)*groBufSize : (i+1)*groBufSize]
	}
	return g
}

// GRO implements GROer: whether the socket has UDP_GRO set, so that a read
// may carry several datagrams, which ReadBatch splits.
func (c *batchConn) GRO() bool { return c.gro }

// groEnable sets UDP_GRO on socket fd and reports whether the kernel took
// it (Linux 5.0 and later).
func groEnable(fd uintptr) bool {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
}

// readGRO is ReadBatch on a socket with UDP_GRO: it hands out what the last
// read left, else reads up to len(msgs) mmsghdrs into the GRO buffers, then
// splits them into msgs. Called with rxMu held.
func (c *batchConn) readGRO(msgs []Message) (int, error) {
	if c.groRx == nil {
		c.groRx = newGROScratch(len(c.rx.hdrs))
	}
	s, g := &c.rx, c.groRx
	if g.next >= g.count {
		k := min(len(msgs), len(s.hdrs))
		for i := range k {
			setIov(&s.iovs[i], g.bufs[i])
			h := &s.hdrs[i]
			h.Hdr.Namelen = unix.SizeofSockaddrInet6
			h.Hdr.Control = &g.ctrl[i*groCmsgSpace]
			h.Hdr.SetControllen(groCmsgSpace)
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
		g.count, g.next, g.off = s.n, 0, 0
		for i := range s.n {
			h := &s.hdrs[i].Hdr
			g.sizes[i] = 0
			if h.Flags&unix.MSG_CTRUNC == 0 {
				g.sizes[i] = groSize(g.ctrl[i*groCmsgSpace : i*groCmsgSpace+int(h.Controllen)])
			}
			if g.sizes[i] > 0 && g.sizes[i] < int(s.hdrs[i].Len) {
				g.coalesced++
			}
			g.addrs[i] = parseSockaddr(&s.names[i])
		}
	}
	msgs = msgs[:min(len(msgs), len(s.hdrs))] // at most BatchSize per call
	n := 0
	for n < len(msgs) && g.next < g.count {
		i := g.next
		h := &s.hdrs[i]
		read := g.bufs[i][:min(int(h.Len), len(g.bufs[i]))]
		k, off, done := groSplit(msgs[n:], read, g.sizes[i], g.off)
		for j := n; j < n+k; j++ {
			msgs[j].Addr = g.addrs[i]
		}
		if done && k > 0 && h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			msgs[n+k-1].Trunc = true // the read itself was cut: its end is lost
		}
		n += k
		if done {
			g.next, g.off = g.next+1, 0
		} else {
			g.off = off
		}
	}
	return n, nil
}

// groSize returns the segment size a UDP_GRO control message in control
// reports, or 0 if control carries none (the read is one datagram). It
// walks the control messages as CMSG_NXTHDR does and never reads past
// control, whatever its bytes.
func groSize(control []byte) int {
	const hdrLen = unix.SizeofCmsghdr
	for off := 0; off+hdrLen <= len(control); {
		var h unix.Cmsghdr
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&h)), hdrLen), control[off:])
		l := int(h.Len)
		if uint64(h.Len) < hdrLen || uint64(h.Len) > uint64(len(control)-off) {
			return 0 // malformed: stop, as CMSG_NXTHDR does
		}
		if h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO {
			data := control[off+unix.CmsgLen(0) : off+l]
			switch {
			case len(data) >= 4:
				// The kernel writes an int (udp_cmsg_recv).
				return max(int(int32(binary.NativeEndian.Uint32(data))), 0)
			case len(data) >= 2:
				return int(binary.NativeEndian.Uint16(data))
			}
			return 0
		}
		off += unix.CmsgSpace(l - unix.CmsgLen(0))
	}
	return 0
}

// groSplit copies the datagrams of read, a coalesced read with segment
// size size (0 or at least len(read): one datagram), from offset off into
// dst, one per message, until dst is full or read is exhausted. It returns
// how many messages it filled, the offset of the next segment, and whether
// read is done. A segment longer than a message's Buf is cut to it and
// marked Trunc; an empty read is one empty datagram. It sets Buf's
// contents, N and Trunc, not Addr.
func groSplit(dst []Message, read []byte, size, off int) (n int, next int, done bool) {
	if size <= 0 || size >= len(read) {
		size = len(read) // one datagram (possibly empty)
		if off > 0 {
			return 0, off, true
		}
	}
	if size == 0 {
		if len(dst) == 0 {
			return 0, 0, false
		}
		dst[0].N, dst[0].Trunc = 0, false
		return 1, 0, true
	}
	for off < len(read) && n < len(dst) {
		seg := read[off:min(off+size, len(read))]
		m := &dst[n]
		m.N = copy(m.Buf, seg)
		m.Trunc = m.N < len(seg)
		off += len(seg)
		n++
	}
	return n, off, off >= len(read)
}
