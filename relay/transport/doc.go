// Package transport is the relay's socket layer: one interface, [Conn], over
// real UDP sockets ([ListenUDP]) and over an in-memory network for tests
// ([MemNetwork]).
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
// len(Buf) is truncated to len(Buf); size Buf one byte larger than the largest
// datagram you accept and treat N == len(Buf) as "too large".
//
// Writes: WriteBatch sends msgs[i].Buf[:msgs[i].N] to msgs[i].Addr. The
// caller may reuse or overwrite the buffers as soon as WriteBatch returns
// (MemNetwork copies; real sockets hand the bytes to the kernel inside the
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
// # Testing
//
// [MemNetwork] is a deterministic in-memory network implementing the same
// contract, with loss, one-way delay (synctest-friendly), NAT-style
// firewalls and bounded receive queues. The transporttest subpackage holds
// CheckGoroutineLeaks for tests of packages built on Conn.
//
// # Optional interfaces
//
// Implementations may also satisfy [DropCounter] (receive-queue overflow
// drops) and [SocketBufferSizer] (kernel buffer sizes actually granted);
// check with a type assertion.
package transport
