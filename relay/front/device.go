package front

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

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
// IFF_NO_PI: each read(2) or write(2) is one bare IPv4 packet), read and
// written through the runtime's poller, so that it needs nothing of the
// device's namespace and no privilege: the file is all there is.
//
// Batching: one Read waits for the first packet and then reads every
// packet already queued, up to len(bufs), in one wake-up of the reader;
// one Write writes every packet in one callback of the poller. Each packet
// is still one system call: a TUN without a virtio header has no batched
// read or write, and with one the kernel would hand the relay only the
// ship's own UDP GSO super-packets, which vere does not send.
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

	// The state of the Write in progress, and its callback.
	wbufs   [][]byte
	woff    int
	wn      int
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
	d.readFn, d.writeFn = d.readQueued, d.writeAll
	return d, nil
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
	for d.rn < len(d.rbufs) {
		k, err := unix.Read(int(fd), d.rbufs[d.rn][d.roff:])
		switch {
		case err == unix.EAGAIN:
			return d.rn > 0
		case err == unix.EINTR:
			continue
		case err != nil:
			d.rerr = err
			return true
		}
		d.rsizes[d.rn] = k
		d.rn++
	}
	return true
}

// Write implements device.
func (d *fileDevice) Write(bufs [][]byte, offset int) (int, error) {
	d.wbufs, d.woff, d.wn, d.werr = bufs, offset, 0, nil
	err := d.rc.Write(d.writeFn)
	n, werr := d.wn, d.werr
	d.wbufs = nil
	if err == nil {
		err = werr
	}
	return n, err
}

// writeAll writes every packet, waiting for the poller if the device
// would block.
func (d *fileDevice) writeAll(fd uintptr) bool {
	for d.wn < len(d.wbufs) {
		_, err := unix.Write(int(fd), d.wbufs[d.wn][d.woff:])
		switch {
		case err == unix.EAGAIN:
			return false
		case err == unix.EINTR:
			continue
		case err != nil:
			d.werr = err
			return true
		}
		d.wn++
	}
	return true
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
