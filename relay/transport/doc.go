// Package transport is the relay's socket layer: one interface, [Conn], over
// real UDP sockets ([ListenUDP]), and, in the transporttest subpackage, over
// an in-memory network for tests (transporttest.MemNetwork) and an in-memory
// fronted ship (transporttest.NewPipe), the test double of relay/front's TUN.
//
// # Datagrams
//
// A [Message] is one UDP datagram. It carries no framing of its own: Buf[:N]
// is the datagram payload exactly as it travels in the UDP packet, and Addr is
// the remote UDP endpoint (IP address and port). Addresses are always
// unmapped: an IPv4 peer seen on a dual-stack IPv6 socket is reported as an
// IPv4 address (1.2.3.4:5, never [::ffff:1.2.3.4]:5), and an IPv4 address may
// be written to from a dual-stack socket.
//
// # Buffer ownership
//
// Reads: the caller owns every Message.Buf. ReadBatch fills msgs[i].Buf from
// index 0, sets msgs[i].N and msgs[i].Addr for i < n, and keeps no reference
// the caller needs to care about once it returns. A datagram longer than
// len(Buf) is truncated to len(Buf), and msgs[i].Trunc is set where the Conn
// can tell (Linux sockets from the recvmmsg msg_flags, the portable socket
// from its read's flags where the platform reports MSG_TRUNC, transporttest's
// MemNetwork and pipe conns always). To catch truncation on any Conn, size Buf one byte
// larger than the largest datagram you accept and treat Trunc or
// N == len(Buf) as "too large".
//
// Writes: WriteBatch sends msgs[i].Buf[:msgs[i].N] to msgs[i].Addr. The
// caller may reuse or overwrite the buffers as soon as WriteBatch returns
// (transporttest's MemNetwork copies; real sockets hand the bytes to the kernel inside the
// call).
//
// # Errors and close
//
// ReadBatch blocks until at least one datagram is available (len(msgs) > 0)
// and returns how many entries it filled. WriteBatch sends in order; on error
// msgs[:n] were sent and msgs[n] was not. Any error other than one matching
// net.ErrClosed concerns msgs[n] alone (bad address, datagram too large,
// unreachable destination): the caller may count it, skip msgs[n] and carry
// on with msgs[n+1:].
//
// Close is idempotent and always returns nil after the first call. After
// Close, ReadBatch and WriteBatch return an error for which
// errors.Is(err, net.ErrClosed) holds, and a ReadBatch blocked at the time of
// Close returns with that error. Read loops should end on net.ErrClosed and
// nothing else: any other ReadBatch error is transient (the socket stays
// usable) and should be counted, rate-limited in logs, and retried.
//
// # Concurrency
//
// A Conn is safe for one reader goroutine and any number of concurrent
// writer goroutines, and Close may be called from any goroutine. (The real
// implementations also tolerate concurrent readers by serialising them, but
// batching then buys nothing.)
//
// # Cost
//
// On Linux, ReadBatch and WriteBatch on a socket from ListenUDP are one
// recvmmsg(2) or sendmmsg(2) system call per batch of up to
// Options.BatchSize datagrams and allocate nothing per datagram or per call.
// (golang.org/x/net/ipv4.PacketConn.ReadBatch was measured and rejected: it
// allocates a *net.UDPAddr and its net.IP for every datagram received, 2
// allocations and ~52 B per datagram; see BenchmarkXNetReadBatch.) Elsewhere
// a portable fallback reads one datagram per ReadBatch call and makes one
// system call per datagram written.
//
// On Linux 4.18 and later, WriteBatch also uses UDP generic segmentation
// offload (UDP_SEGMENT) unless Options.DisableGSO is set: each run of
// adjacent messages to the same Addr, all of one length except that the
// last may be shorter (but not empty), goes to the kernel as one mmsghdr
// whose iovecs point at the caller's buffers, with the segment length in a
// control message, so the run makes one trip through the kernel's send
// path (socket, routing, netfilter, qdisc) and is cut into datagrams by the
// NIC if it offloads UDP segmentation, else in software just before the
// driver. A run holds at most 64 datagrams (UDP_MAX_SEGMENTS on older
// kernels) and 65507 payload bytes; a run of one is an ordinary send.
// Receivers see the same separate datagrams either way. A sendmmsg call
// still carries at most BatchSize of the caller's messages, and counts and
// errors are still per caller message, as above. Measured on loopback
// (BenchmarkGSO), 64 datagrams of 1030 bytes to one or two destinations
// cost ~0.6 µs per datagram to write with GSO against ~3 µs without.
//
// If a GSO send fails, its run is resent datagram by datagram, so an error
// lands on the message it concerns, and a segment larger than the route
// MTU, which GSO refuses (EMSGSIZE) but a plain send fragments, still goes
// out; no state is kept, so every such run costs one failed send first. If
// the failure was the kernel refusing GSO itself (EIO when the device
// cannot offload checksums or the route is IPsec, EINVAL with SO_NO_CHECK,
// ENOPROTOOPT, EOPNOTSUPP) and the plain resend of the run's first
// datagram works, GSO is switched off on that Conn for good, and the
// caller never sees the error. [GSOer] reports whether a Conn currently
// uses GSO.
//
// On Linux 5.0 and later, sockets from ListenUDP also set UDP_GRO unless
// Options.DisableGRO is set: the kernel may then queue several datagrams of
// one flow as one socket buffer (a NIC's or the stack's receive offload
// merged them, or, on loopback and veth, a GSO send arrived unsplit), and
// one mmsghdr reads them all with their segment size in a control message.
// ReadBatch reads into buffers of its own (64 KiB per batch slot) and
// copies each datagram into the caller's messages, so callers see the same
// datagrams, in order, with N, Addr and Trunc as without GRO; a read that
// holds more datagrams than the call has messages leaves the rest for the
// next ReadBatch, which returns them without a system call. The kernel
// counts a dropped coalesced buffer once in [DropCounter]'s Drops, however
// many datagrams it held. The copy costs tens of nanoseconds a datagram;
// what it buys is one socket buffer, one queueing and one mmsghdr for a
// run instead of one each per datagram (BenchmarkGRO).
//
// Runs only form from adjacent messages: a batch that interleaves
// destinations gains nothing unless it is first passed through
// [GroupByAddr], which reorders it in place (allocation-free) so that each
// destination's messages are adjacent and in their original order. That
// reordering is harmless for UDP: there is no order between datagrams to
// different destinations, and each destination's own order is kept.
//
// # Testing
//
// The transporttest subpackage holds the test doubles, which only tests
// import: MemNetwork, a deterministic in-memory network implementing the same
// contract, with loss, one-way delay (synctest-friendly), NAT-style firewalls
// and bounded receive queues; NewPipe, the fronted ship; and
// CheckGoroutineLeaks for tests of packages built on Conn. Its fakes check
// writes with [CheckWrite], as the sockets here do.
//
// # Optional interfaces
//
// Implementations may also satisfy [DropCounter] (receive-queue overflow
// drops), [SocketBufferSizer] (kernel buffer sizes actually granted) and
// [GSOer] (whether writes currently use UDP GSO); check with a type
// assertion.
package transport
