package front

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// device is what a Conn needs of a TUN device: wireguard's tun.Device
// satisfies it (the tests' in-memory device), as does fileDevice.
type device interface {
	// Read reads at least one packet into bufs[i][offset:], its length
	// into sizes[i], and returns how many it read.
	Read(bufs [][]byte, sizes []int, offset int) (int, error)
	// Write writes each bufs[i][offset:] as one packet.
	Write(bufs [][]byte, offset int) (int, error)
	// BatchSize is the most packets one Read returns.
	BatchSize() int
	Close() error
}

// fileDevice is a TUN device's file as Prepare opens it (IFF_TUN |
// IFF_NO_PI | IFF_VNET_HDR: each read(2) or write(2) is one IPv4 packet after
// a virtio header, or one bare packet without IFF_VNET_HDR), read and
// written through the runtime's poller, so that it needs nothing of the
// device's namespace and no privilege: the file is all there is.
//
// Batching: one Read waits for the first packet and then reads every
// packet already queued, up to len(bufs), in one wake-up of the reader
// (one read(2) each: a TUN has no batched read, and the relay offers the
// ship's kernel checksum offload only, no segmentation offload, so it never
// hands over super-packets); one
// Write writes every packet in one callback of the poller, and, with a
// virtio header (Prepare sets IFF_VNET_HDR), each run of one flow as one
// UDP GSO super-packet (coalesce): one write(2) and one trip through the
// ship's stack for the run, as wireguard's tun does.
//
// Concurrency: one Read and one Write at a time (a Conn serialises each),
// and Close from anywhere. The poller's callbacks and their state are made
// once, so that neither call allocates.
type fileDevice struct {
	f  *os.File
	rc syscall.RawConn

	// The state of the Read in progress, and its callback.
	rbufs  [][]byte
	rsizes []int
	roff   int
	rn     int
	rerr   error
	readFn func(fd uintptr) bool

	// vnet is set when the TUN has IFF_VNET_HDR: every packet read or
	// written is preceded by a virtio_net_hdr (vnetHdrLen bytes), and a
	// Write coalesces runs of one flow into UDP GSO super-packets
	// (coalesce), unless the kernel refused one (noGSO).
	vnet  bool
	noGSO atomic.Bool

	// The state of the Write in progress, and its callback: frames are
	// what is written, each standing for counts[i] of the caller's
	// packets.
	frames  [][]byte
	counts  []int
	wn      int // frames written
	werr    error
	writeFn func(fd uintptr) bool
}

// newFileDevice wraps f, a TUN file in non-blocking mode, and takes
// ownership of it.
func newFileDevice(f *os.File) (*fileDevice, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nb bool
	rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nb = err == nil && fl&unix.O_NONBLOCK != 0
	})
	if !nb {
		// A blocking file would hold a thread in read(2), and Close
		// could not end it: serve a non-blocking duplicate instead.
		nfd, derr := -1, error(nil)
		rc.Control(func(fd uintptr) {
			if nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); derr == nil {
				derr = unix.SetNonblock(nfd, true)
			}
		})
		if derr != nil {
			if nfd >= 0 {
				unix.Close(nfd)
			}
			return nil, derr
		}
		f.Close()
		f = os.NewFile(uintptr(nfd), TUNFileName)
		if rc, err = f.SyscallConn(); err != nil {
			return nil, err
		}
	}
	d := &fileDevice{f: f, rc: rc}
	var flags uint16
	rc.Control(func(fd uintptr) {
		if ifr, err := unix.NewIfreq(""); err == nil && unix.IoctlIfreq(int(fd), unix.TUNGETIFF, ifr) == nil {
			flags = ifr.Uint16()
		}
	})
	d.vnet = flags&unix.IFF_VNET_HDR != 0
	if d.vnet {
		rc.Control(setOffload) // again: the file may come from an older setup
	}
	d.readFn, d.writeFn = d.readQueued, d.writeAll
	return d, nil
}

// setOffload offers the ship's kernel checksum offload (TUN_F_CSUM) on
// TUN file fd, which has IFF_VNET_HDR, and no segmentation offload: the
// ship's kernel leaves its datagrams' UDP checksums to the device
// (takeVnet), so neither it nor the relay sums a page, and still hands
// over whole packets. Refused, the checksums come complete as before.
func setOffload(fd uintptr) {
	unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD, unix.TUN_F_CSUM)
}

// Read implements device.
func (d *fileDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	d.rbufs, d.rsizes, d.roff, d.rn, d.rerr = bufs, sizes, offset, 0, nil
	err := d.rc.Read(d.readFn)
	n, rerr := d.rn, d.rerr
	d.rbufs, d.rsizes = nil, nil
	if n > 0 {
		return n, nil // an error after some packets is seen again next time
	}
	if err != nil {
		return 0, err
	}
	return 0, rerr
}

// readQueued reads packets until none is queued or the buffers are full;
// it reports false, to wait for the poller, while it has read none.
func (d *fileDevice) readQueued(fd uintptr) bool {
	hdr := 0
	if d.vnet {
		hdr = vnetHdrLen // read in front of the offset, which leaves room
	}
	for d.rn < len(d.rbufs) {
		k, err := rawRead(fd, d.rbufs[d.rn][d.roff-hdr:])
		switch {
		case err == unix.EAGAIN:
			return d.rn > 0
		case err == unix.EINTR:
			continue
		case err != nil:
			d.rerr = err
			return true
		}
		k -= hdr
		if hdr > 0 && (k < 0 || !takeVnet(d.rbufs[d.rn][d.roff-hdr:d.roff], d.rbufs[d.rn][d.roff:d.roff+k])) {
			// A GSO super-packet, which a TUN offering no segmentation
			// offload is never handed: left empty, for the Conn to count
			// malformed.
			k = 0
		}
		d.rsizes[d.rn] = k
		d.rn++
	}
	return true
}

// rawRead is read(2) of a non-blocking file, raw (no entersyscall or
// exitsyscall), as relay/transport's recvmmsg: the call never waits, it
// copies one packet. Through the runtime's Syscall each call woke the
// runtime's sysmon thread (entersyscall), a futex wake and a context
// switch per packet: perf put a fifth of the fronted relay's CPU in sysmon.
// The price is that the goroutine cannot be preempted during one call.
func rawRead(fd uintptr, b []byte) (int, error) {
	n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// rawWrite is write(2) of a non-blocking file, raw, as rawRead: a write
// into the TUN never waits (a full queue drops, EAGAIN at most), it
// carries one packet or one UDP GSO super-packet through the ship's stack.
func rawWrite(fd uintptr, b []byte) (int, error) {
	n, _, errno := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// takeVnet reads the virtio header h in front of packet pkt, read from the
// TUN, and reports whether pkt is one whole packet (no GSO). A UDP packet
// whose checksum the ship's kernel left to the device (NEEDS_CSUM: the TUN
// offers TUN_F_CSUM) gets a zero UDP checksum, "none" (RFC 768), so that
// ParseUDP4 takes it unverified: the field holds only the pseudo-header's
// sum, and the data never left the host's memory. Any other partial
// checksum is left as it is, for ParseUDP4 to refuse.
func takeVnet(h, pkt []byte) bool {
	if h[1] != virtioGSONone {
		return false
	}
	if h[0]&virtioNeedsCsum != 0 && len(pkt) >= HeadersLen && pkt[9] == protoUDP {
		start, off := int(binary.LittleEndian.Uint16(h[6:])), int(binary.LittleEndian.Uint16(h[8:]))
		if ihl := int(pkt[0]&0x0f) * 4; start == ihl && off == udpChecksumOffset && ihl+UDPHeaderLen <= len(pkt) {
			pkt[ihl+off], pkt[ihl+off+1] = 0, 0
		}
	}
	return true
}

// Write implements device. With a virtio header (vnet), each run of
// consecutive packets of one flow (the same addresses and ports) whose
// payloads are of one size (the last may be shorter) is written as one
// UDP GSO super-packet (coalesce), which the ship's kernel splits back
// into the same datagrams, in order: one trip through its stack for the
// run. Write may rewrite bufs (the first packet of a run grows into the
// super-packet, in its buffer's spare capacity); the caller's next Write
// builds them anew.
func (d *fileDevice) Write(bufs [][]byte, offset int) (int, error) {
	d.frames, d.counts = d.frames[:0], d.counts[:0]
	for i := 0; i < len(bufs); {
		if !d.vnet {
			d.frames, d.counts = append(d.frames, bufs[i][offset:]), append(d.counts, 1)
			i++
			continue
		}
		k := 1
		if !d.noGSO.Load() {
			k = coalesce(bufs[i:], offset)
		}
		if k == 1 {
			clear(bufs[i][offset-vnetHdrLen : offset]) // no GSO, checksums complete
		}
		d.frames, d.counts = append(d.frames, bufs[i][offset-vnetHdrLen:]), append(d.counts, k)
		i += k
	}
	d.wn, d.werr = 0, nil
	err := d.rc.Write(d.writeFn)
	if err == nil {
		err = d.werr
	}
	n := 0
	for _, c := range d.counts[:d.wn] {
		n += c
	}
	clear(d.frames) // drop the views of the caller's buffers
	return n, err
}

// writeAll writes every frame, waiting for the poller if the device
// would block. A super-packet the kernel refuses (EINVAL: a kernel
// before 6.2 takes no UDP GSO from a TUN) turns GSO off for good and is
// written again as its packets, one by one.
func (d *fileDevice) writeAll(fd uintptr) bool {
	for d.wn < len(d.frames) {
		_, err := rawWrite(fd, d.frames[d.wn])
		switch {
		case err == unix.EAGAIN:
			return false
		case err == unix.EINTR:
			continue
		case err == unix.EINVAL && d.counts[d.wn] > 1:
			d.noGSO.Store(true)
			if err := d.writeSplit(int(fd), d.frames[d.wn]); err != nil {
				d.werr = err
				return true
			}
		case err != nil:
			d.werr = err
			return true
		}
		d.wn++
	}
	return true
}

// writeSplit writes super-packet frame (a virtio header and a UDP GSO
// packet, as coalesce built it) as the datagrams it stands for.
func (d *fileDevice) writeSplit(fd int, frame []byte) error {
	seg := int(binary.LittleEndian.Uint16(frame[4:]))
	ip := frame[vnetHdrLen:]
	var pkt [vnetHdrLen + MaxMTU]byte
	for payload := ip[HeadersLen:]; len(payload) > 0; {
		n := min(seg, len(payload))
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(ip[20:]))
		dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[16:20])), binary.BigEndian.Uint16(ip[22:]))
		b := AppendUDP4(pkt[:vnetHdrLen], src, dst, payload[:n])
		for {
			if _, err := rawWrite(uintptr(fd), b); err != unix.EINTR {
				if err != nil {
					return err
				}
				break
			}
		}
		payload = payload[n:]
	}
	return nil
}

// coalesce makes bufs[0] (an IPv4/UDP packet at offset, as AppendUDP4
// writes them, with its buffer's spare capacity behind it) a UDP GSO
// super-packet carrying the payloads of as many of the following packets
// as may join it, and writes its virtio header in front of offset. It
// returns how many packets the super-packet stands for (1: unchanged). A
// packet joins if it has the first one's addresses and ports and its
// payload's size (a shorter one joins and ends the run), the run stays
// within gsoMaxSegments and the super-packet within MaxMTU and the
// buffer.
func coalesce(bufs [][]byte, offset int) int {
	first := bufs[0][offset:]
	seg := len(first) - HeadersLen
	if len(bufs) < 2 || seg <= 0 {
		return 1
	}
	room := min(cap(bufs[0])-offset, MaxMTU)
	k, total := 1, len(first)
	for ; k < len(bufs) && k < gsoMaxSegments; k++ {
		p := bufs[k][offset:]
		n := len(p) - HeadersLen
		if n <= 0 || n > seg || total+n > room || !sameFlow(first, p) {
			break
		}
		total += n
		if n < seg {
			k++
			break
		}
	}
	if k == 1 {
		return 1
	}
	sp := bufs[0][:offset+total]
	at := offset + len(first)
	for _, b := range bufs[1:k] {
		at += copy(sp[at:], b[offset+HeadersLen:])
	}
	ip := sp[offset:]
	binary.BigEndian.PutUint16(ip[2:], uint16(total))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^checksum(ip[:IPv4HeaderLen], 0))
	udpLen := total - IPv4HeaderLen
	binary.BigEndian.PutUint16(ip[IPv4HeaderLen+4:], uint16(udpLen))
	// CHECKSUM_PARTIAL: the pseudo-header's sum, not complemented; the
	// kernel fixes it per segment, and takes the segments as checked.
	binary.BigEndian.PutUint16(ip[IPv4HeaderLen+6:], fold(pseudoHeaderSum(ip[12:20], udpLen)))
	h := sp[offset-vnetHdrLen : offset]
	h[0], h[1] = virtioNeedsCsum, virtioGSOUDPL4
	binary.LittleEndian.PutUint16(h[2:], HeadersLen)
	binary.LittleEndian.PutUint16(h[4:], uint16(seg))
	binary.LittleEndian.PutUint16(h[6:], IPv4HeaderLen)
	binary.LittleEndian.PutUint16(h[8:], udpChecksumOffset)
	bufs[0] = sp
	return k
}

// sameFlow reports whether IPv4/UDP packets a and b share addresses and
// ports (bytes 12 to 24: source and destination address, then ports).
func sameFlow(a, b []byte) bool {
	return string(a[12:IPv4HeaderLen+4]) == string(b[12:IPv4HeaderLen+4])
}

// BatchSize implements device: the read buffers a Conn holds bound it.
func (d *fileDevice) BatchSize() int { return DefaultReadBatch }

// Close implements device: closing the last file of a TUN that is not
// persistent deletes the device.
func (d *fileDevice) Close() error { return d.f.Close() }

// fdLink asks the kernel for the TUN's counters over a NETLINK_ROUTE socket
// made inside the ship's namespace (a socket keeps the namespace it was
// made in, so asking needs no privilege).
type fdLink struct {
	mu     sync.Mutex // one request at a time on the socket
	f      *os.File   // nil once closed; guarded by mu
	device string
	seq    uint32 // guarded by mu
}

// newFdLink wraps f, a NETLINK_ROUTE socket, and takes ownership of it.
func newFdLink(f *os.File, device string) (*fdLink, error) {
	fd := int(f.Fd()) // blocking mode from here: reads are bounded by SO_RCVTIMEO
	tv := unix.NsecToTimeval(netlinkTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("front: netlink socket: %w", err)
	}
	return &fdLink{f: f, device: device}, nil
}

// txDropped returns the device's tx_dropped counter (0 if it cannot).
func (l *fdLink) txDropped() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0
	}
	link, err := l.getLinkLocked()
	if err != nil || link.Attrs().Statistics == nil {
		return 0
	}
	return link.Attrs().Statistics.TxDropped
}

// getLinkLocked sends RTM_GETLINK for the device by name and parses the
// answer.
func (l *fdLink) getLinkLocked() (netlink.Link, error) {
	l.seq++
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_REQUEST)
	req.Seq = l.seq
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(l.device)))
	fd := int(l.f.Fd())
	if err := unix.Sendto(fd, req.Serialize(), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	buf := make([]byte, netlinkReadBytes)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != l.seq {
				continue // a late answer to an earlier request
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				return nil, errors.New("front: netlink: RTM_GETLINK refused")
			case unix.RTM_NEWLINK:
				return netlink.LinkDeserialize(nil, m.Data)
			}
		}
	}
}

func (l *fdLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
