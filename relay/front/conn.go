package front

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/urbit-relay/relay/relay/transport"
)

// ErrPayloadTooLarge reports a write Message whose payload does not fit one
// IPv4 packet on the TUN (longer than the MTU less HeadersLen). It concerns
// that message alone, as transport's per-message errors do.
var ErrPayloadTooLarge = errors.New("front: payload larger than the TUN's MTU allows")

// Stats counts a Conn's traffic. Every packet the ship's kernel hands the
// TUN is counted once: in Received if ReadBatch returned its payload, else
// in exactly one of the skip reasons. A skipped packet is dropped; it never
// makes ReadBatch return an error.
type Stats struct {
	Received uint64 // UDP datagrams from the ship's lane, returned by ReadBatch
	Sent     uint64 // datagrams WriteBatch wrote into the TUN for the ship

	SkippedNotIPv4    uint64 // IPv6 (router solicitations, MLD reports) or another version
	SkippedNotUDP     uint64 // ICMP, IGMP, TCP, ...
	SkippedFragment   uint64 // IPv4 fragments (none at DefaultMTU)
	SkippedMalformed  uint64 // bad length or checksum (ErrShort, ErrTotalLength, ...)
	SkippedNotShip    uint64 // UDP not from the ship's lane: another socket of the ship (a DNS lookup)
	SkippedBadDest    uint64 // to an address the relay cannot send to (multicast, broadcast, port 0)
	SkippedToHost     uint64 // to the relay host itself (loopback, its listen or interface addresses, a local route), not declared (Config.HostLanes)
	SkippedReadErrors uint64 // TUN reads that failed for another reason (returned as errors too)
}

// counters is Stats as atomics.
type counters struct {
	received, sent                       atomic.Uint64
	notIPv4, notUDP, fragment, malformed atomic.Uint64
	notShip, badDest, toHost, readErrs   atomic.Uint64
}

// Conn is the relay's side of a fronted ship: a transport.Conn over a TUN
// device that is the only route of the ship's network namespace.
//
// ReadBatch returns the UDP datagrams the ship sent from its lane (LocalAddr)
// to anywhere: msgs[i].Buf[:N] is the payload and msgs[i].Addr the
// DESTINATION the ship addressed, where the relay should send it from its
// public socket. Packets that are not whole IPv4/UDP datagrams from the
// ship's lane are skipped and counted (Stats). WriteBatch delivers
// msgs[i].Buf[:N] to the ship as a UDP datagram FROM msgs[i].Addr, so the
// ship sees the true remote lane.
//
// Costs: each packet is one read(2) or write(2) of the TUN; a ReadBatch
// that finds packets queued reads them all (up to the read batch) in one
// wake-up, and a WriteBatch writes its messages in runs (see WriteBatch).
// Neither allocates.
//
// Concurrency: one reader goroutine and any number of concurrent writers,
// and Close from any goroutine, as transport.Conn requires. Concurrent
// readers are serialised. Writers are serialised by a mutex over the write
// buffers (the tun library serialises its writes anyway).
type Conn struct {
	// Static after construction.
	dev      device
	name     string           // device name, for errors
	ship     netip.AddrPort   // the ship's lane: ShipAddr:ShipPort
	maxWrite int              // largest payload WriteBatch accepts
	link     *fdLink          // the device over netlink, for Drops; nil without Open
	declared []netip.AddrPort // host lanes the ship may reach (Config.HostLanes)

	host   atomic.Pointer[[]netip.Addr] // the host's own addresses (SetHostAddrs)
	listen atomic.Pointer[[]netip.Addr] // the relay's listen addresses (SetListenAddrs)
	routes *hostRoutes                  // the kernel's word on what is local; nil without Open (tests)

	// Owned by the reader, guarded by readMu.
	readMu       sync.Mutex
	rbufs        [][]byte // tunOffset + MTU bytes each
	rsizes       []int
	rnext, rhave int // rbufs[rnext:rhave] read but not yet returned

	// Guarded by writeMu.
	writeMu sync.Mutex
	wbufs   [][]byte // tunOffset + MTU bytes each, len tunOffset
	wpkts   [][]byte // the packets of one tun Write, built in wbufs

	closed    atomic.Bool
	closeOnce sync.Once
	c         counters
}

// connConfig is what newConn needs; Setup fills it from a Config.
type connConfig struct {
	name       string
	ship       netip.AddrPort
	mtu        int
	readBatch  int
	writeBatch int
	declared   []netip.AddrPort
}

// newConn wraps dev, which delivers the packets of cfg.ship's namespace.
// The read batch is capped at dev.BatchSize(). It takes ownership of dev.
func newConn(dev device, cfg connConfig) *Conn {
	rb := max(1, min(cfg.readBatch, dev.BatchSize()))
	wb := max(1, cfg.writeBatch)
	c := &Conn{
		dev:      dev,
		name:     cfg.name,
		ship:     cfg.ship,
		maxWrite: cfg.mtu - HeadersLen,
		rbufs:    makeBufs(rb, tunOffset+cfg.mtu),
		rsizes:   make([]int, rb),
		wbufs:    makeBufs(wb, tunOffset+cfg.mtu),
		wpkts:    make([][]byte, wb),
		declared: cfg.declared,
	}
	c.SetHostAddrs(nil)
	c.SetListenAddrs()
	return c
}

func makeBufs(n, size int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	return bufs
}

// ReadBatch implements transport.Conn: it blocks until the ship has sent
// at least one datagram from its lane and fills msgs[i] with the payload
// (truncated to len(Buf)) and the destination the ship addressed.
func (c *Conn) ReadBatch(msgs []transport.Message) (int, error) {
	if c.closed.Load() {
		return 0, c.closedErr("read")
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	c.readMu.Lock()
	defer c.readMu.Unlock()
	n := 0
	for n == 0 {
		if c.rnext == c.rhave {
			if err := c.fill(); err != nil {
				return 0, err
			}
		}
		for ; c.rnext < c.rhave && n < len(msgs); c.rnext++ {
			pkt := c.rbufs[c.rnext][tunOffset : tunOffset+c.rsizes[c.rnext]]
			src, dst, payload, err := ParseUDP4(pkt)
			switch {
			case err != nil:
				c.skip(err)
			case src != c.ship:
				c.c.notShip.Add(1)
			case !sendable(dst):
				c.c.badDest.Add(1)
			case c.toHost(dst):
				c.c.toHost.Add(1)
			default:
				m := &msgs[n]
				m.N = copy(m.Buf, payload)
				m.Addr = dst
				n++
			}
		}
	}
	c.c.received.Add(uint64(n))
	return n, nil
}

// fill reads the next packets from the TUN into rbufs.
func (c *Conn) fill() error {
	c.rnext, c.rhave = 0, 0
	k, err := c.dev.Read(c.rbufs, c.rsizes, tunOffset)
	switch {
	case err == nil:
	case c.closed.Load() || errors.Is(err, os.ErrClosed):
		return c.closedErr("read")
	default:
		c.c.readErrs.Add(1)
		return fmt.Errorf("front: read %s: %w", c.name, err)
	}
	c.rhave = max(0, min(k, len(c.rbufs)))
	return nil
}

// skip counts a packet ParseUDP4 refused.
func (c *Conn) skip(err error) {
	switch err {
	case ErrVersion:
		c.c.notIPv4.Add(1)
	case ErrProtocol:
		c.c.notUDP.Add(1)
	case ErrFragment:
		c.c.fragment.Add(1)
	default:
		c.c.malformed.Add(1)
	}
}

// sendable reports whether the relay can send a datagram to ap from its
// public socket: an IPv4 unicast address and a non-zero port.
func sendable(ap netip.AddrPort) bool {
	a := ap.Addr()
	return ap.Port() != 0 && !a.IsUnspecified() && !a.IsMulticast() && a != broadcast4
}

var broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// toHost reports whether the ship may not reach dst because it is the
// relay host itself, and dst is not a lane the operator declared
// (Config.HostLanes): loopback, one of the relay's listen addresses
// (SetListenAddrs) or the addresses SetHostAddrs gave, or an address the
// host's kernel delivers locally (hostRoutes: a local route such as an
// AnyIP range has no interface address behind it). Sent on, such a
// datagram would reach the host's own services (a 0.0.0.0 listener) from
// the relay's lane, from inside a namespace meant to reach the world only.
func (c *Conn) toHost(dst netip.AddrPort) bool {
	a := dst.Addr()
	if !a.IsLoopback() && !slices.Contains(*c.listen.Load(), a) && !slices.Contains(*c.host.Load(), a) &&
		(c.routes == nil || !c.routes.local(a)) {
		return false
	}
	return !slices.Contains(c.declared, dst)
}

// SetListenAddrs sets the addresses the relay's own sockets listen on,
// which ReadBatch refuses the ship unless declared whatever the kernel's
// routes say (a relay may listen on an address not local yet, with
// IP_FREEBIND). A wildcard address adds nothing: every local address is
// refused already. Safe from any goroutine.
func (c *Conn) SetListenAddrs(addrs ...netip.Addr) {
	own := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if a = a.Unmap().WithZone(""); a.IsValid() && !a.IsUnspecified() {
			own = append(own, a)
		}
	}
	c.listen.Store(&own)
}

// SetHostAddrs replaces the relay host's own addresses, which ReadBatch
// refuses the ship unless declared (Config.HostLanes; loopback is refused
// always). The relay calls it at start and every HostAddrsRefresh, as
// addresses come and go. Safe from any goroutine.
func (c *Conn) SetHostAddrs(addrs []netip.Addr) {
	own := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		own = append(own, a.Unmap().WithZone(""))
	}
	c.host.Store(&own)
}

// WriteBatch implements transport.Conn: it delivers each msgs[i].Buf[:N]
// to the ship's lane as a datagram from msgs[i].Addr. Addr must be an IPv4
// unicast address with a non-zero port that the ship's kernel accepts as a
// source: not loopback (the kernel drops "martian" sources arriving on a
// device), not the ship's own address; otherwise the error is
// transport.ErrInvalidAddr. Each run of up to DefaultWriteBatch messages is
// one device Write, in one wake-up of the poller; the ship reads the
// datagrams in order. If the device refuses a write (it is down, say), the
// error is reported at the first message of that run, and some of the
// run's messages may have been delivered.
func (c *Conn) WriteBatch(msgs []transport.Message) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	for start := 0; start < len(msgs); {
		if c.closed.Load() {
			return start, c.closedErr("write")
		}
		k, err := c.build(msgs[start:])
		if k > 0 {
			if werr := c.write(k); werr != nil {
				return start, werr
			}
			c.c.sent.Add(uint64(k))
		}
		if err != nil {
			return start + k, err
		}
		start += k
	}
	return len(msgs), nil
}

// build encodes into wpkts the first messages of msgs, at most
// len(wbufs), and returns how many; err concerns msgs[k], which was not
// built.
func (c *Conn) build(msgs []transport.Message) (int, error) {
	k := 0
	for ; k < len(msgs) && k < len(c.wbufs); k++ {
		m := &msgs[k]
		if m.N < 0 || m.N > len(m.Buf) {
			return k, transport.ErrInvalidMessage
		}
		from := netip.AddrPortFrom(m.Addr.Addr().Unmap(), m.Addr.Port())
		if !c.validSource(from) {
			return k, transport.ErrInvalidAddr
		}
		if m.N > c.maxWrite {
			return k, fmt.Errorf("front: write %s: %d bytes: %w", c.name, m.N, ErrPayloadTooLarge)
		}
		c.wpkts[k] = AppendUDP4(c.wbufs[k][:tunOffset], from, c.ship, m.Buf[:m.N])
	}
	return k, nil
}

// validSource reports whether the ship's kernel will take a datagram from
// ap arriving on the TUN.
func (c *Conn) validSource(ap netip.AddrPort) bool {
	a := ap.Addr()
	return ap.IsValid() && a.Is4() && sendable(ap) && !a.IsLoopback() && a != c.ship.Addr()
}

// write hands wpkts[:k] to the device.
func (c *Conn) write(k int) error {
	_, err := c.dev.Write(c.wpkts[:k], tunOffset)
	clear(c.wpkts[:k]) // drop the library's view of the buffers
	switch {
	case err == nil:
		return nil
	case c.closed.Load() || errors.Is(err, os.ErrClosed):
		return c.closedErr("write")
	default:
		return fmt.Errorf("front: write %s: %w", c.name, err)
	}
}

func (c *Conn) closedErr(op string) error {
	return fmt.Errorf("front: %s %s: %w", op, c.name, net.ErrClosed)
}

// LocalAddr returns the ship's lane inside its namespace (ShipAddr:ShipPort):
// the source of every datagram ReadBatch returns and the destination of
// every datagram WriteBatch writes.
func (c *Conn) LocalAddr() netip.AddrPort { return c.ship }

// Name returns the TUN device's name.
func (c *Conn) Name() string { return c.name }

// Stats returns a snapshot of the counters; cheap, safe from any goroutine.
func (c *Conn) Stats() Stats {
	return Stats{
		Received:          c.c.received.Load(),
		Sent:              c.c.sent.Load(),
		SkippedNotIPv4:    c.c.notIPv4.Load(),
		SkippedNotUDP:     c.c.notUDP.Load(),
		SkippedFragment:   c.c.fragment.Load(),
		SkippedMalformed:  c.c.malformed.Load(),
		SkippedNotShip:    c.c.notShip.Load(),
		SkippedBadDest:    c.c.badDest.Load(),
		SkippedToHost:     c.c.toHost.Load(),
		SkippedReadErrors: c.c.readErrs.Load(),
	}
}

// Drops implements transport.DropCounter: packets the ship's kernel
// dropped because the TUN's queue (DefaultTxQueueLen) was full, i.e. the
// relay read too slowly. It asks the kernel over netlink (the device's
// tx_dropped), so call it from a metrics scrape, not per packet; 0 if the
// kernel cannot be asked (after Close).
func (c *Conn) Drops() uint64 {
	if c.link == nil || c.closed.Load() {
		return 0
	}
	return c.link.txDropped()
}

// Close closes the TUN, which deletes the device and with it the ship's
// address and route (the ship's sends fail with "network unreachable"
// until a new Setup); the namespace stays. It unblocks a ReadBatch in
// progress, waits for the tun library's goroutines to end, and is
// idempotent.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		if cerr := c.dev.Close(); cerr != nil {
			err = fmt.Errorf("front: close %s: %w", c.name, cerr)
		}
		if c.link != nil {
			c.link.close()
		}
		if c.routes != nil {
			c.routes.close()
		}
	})
	return err
}

var (
	_ transport.Conn        = (*Conn)(nil)
	_ transport.DropCounter = (*Conn)(nil)
)
