//go:build linux

package transport

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDP generic segmentation offload (UDP_SEGMENT, Linux >= 4.18): one
// sendmsg carries several datagrams to one destination as one buffer plus
// a segment size, and the kernel (or the NIC) cuts it into datagrams of
// that size, the last possibly shorter. WriteBatch turns each run of
// adjacent equal-sized messages to one address into such a send; see the
// package comment, "Cost".

const (
	// maxGSOSegments is the most datagrams WriteBatch merges into one GSO
	// send: UDP_MAX_SEGMENTS, 64 before Linux 5.x raised it to 128.
	maxGSOSegments = 64

	// maxGSOPayload is the most payload bytes (all segments together) of
	// one GSO send: the largest IPv4 UDP payload, 65535 - 20 (IP header)
	// - 8 (UDP header). IPv6 would allow 65527, but a dual-stack socket
	// sends to IPv4 peers through the IPv4 path, so the smaller limit
	// serves every socket.
	maxGSOPayload = 65507
)

// gsoCmsg is one SOL_UDP/UDP_SEGMENT control message, laid out as
// CMSG_SPACE(sizeof(uint16)) bytes: the header, then the segment size.
type gsoCmsg struct {
	hdr  unix.Cmsghdr
	size uint16 // at offset CMSG_LEN(0) = sizeof(Cmsghdr) on every arch
	_    [cmsgPad]byte
}

// cmsgPad rounds gsoCmsg up to the cmsg alignment (that of Cmsghdr.Len).
const cmsgPad = unsafe.Sizeof(unix.Cmsghdr{}.Len) - 2

// gsoCmsgLen is the msg_controllen of a GSO send.
var gsoCmsgLen = unix.CmsgSpace(2)

// init prepares c as a UDP_SEGMENT control message; only size changes per
// send.
func (c *gsoCmsg) init() {
	c.hdr.Level = unix.SOL_UDP
	c.hdr.Type = unix.UDP_SEGMENT
	c.hdr.SetLen(unix.CmsgLen(2))
}

// gsoSupported reports whether the kernel knows UDP_SEGMENT on socket fd.
// The probe matters: a kernel older than 4.18 ignores an unknown SOL_UDP
// control message and would send a merged run as one big datagram.
func gsoSupported(fd uintptr) bool {
	_, err := unix.GetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT)
	return err == nil
}

// gsoRefusal reports whether errno, returned for a GSO send, may mean the
// kernel refuses GSO on this socket or route rather than that the datagram
// itself is bad: EIO (the device cannot checksum-offload, or an IPsec
// route), EINVAL (checksums disabled with SO_NO_CHECK, too many segments),
// ENOPROTOOPT and EOPNOTSUPP. Because EINVAL also has per-destination
// causes (a loopback-bound socket sending off-host), WriteBatch confirms a
// refusal by resending the first datagram of the run without GSO before it
// disables GSO.
func gsoRefusal(errno unix.Errno) bool {
	switch errno {
	case unix.EIO, unix.EINVAL, unix.ENOPROTOOPT, unix.EOPNOTSUPP:
		return true
	}
	return false
}

// gsoRun returns how many leading msgs one GSO send can carry: msgs[0]
// (already validated) and the following messages to the same address with
// the same length, the last of which may be shorter but not empty, within
// maxGSOSegments and maxGSOPayload. 1 means msgs[0] goes out alone.
func gsoRun(msgs []Message) int {
	first := &msgs[0]
	size := first.N
	if size <= 0 {
		return 1 // an empty datagram cannot be a segment
	}
	total := size
	n := 1
	for n < len(msgs) && n < maxGSOSegments {
		m := &msgs[n]
		if m.Addr != first.Addr || m.N <= 0 || m.N > size || m.N > len(m.Buf) || total+m.N > maxGSOPayload {
			break
		}
		total += m.N
		n++
		if m.N < size {
			break // a short segment ends the run
		}
	}
	return n
}

// GSO implements GSOer: whether WriteBatch currently merges runs of
// datagrams into UDP_SEGMENT sends. It is false when Options.DisableGSO was
// set, when the kernel lacks UDP_SEGMENT, and after the kernel refused a
// GSO send on this Conn.
func (c *batchConn) GSO() bool { return c.gso.Load() }
