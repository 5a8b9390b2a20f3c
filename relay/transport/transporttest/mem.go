package transporttest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urbit-relay/relay/relay/transport"
)

const (
	// DefaultMemQueueLen is the receive queue length, in datagrams, of a
	// MemNetwork conn unless SetQueueLen says otherwise: about what a
	// default Linux socket buffer holds of small datagrams.
	DefaultMemQueueLen = 1024

	// DefaultMemSeed seeds a new MemNetwork's random source, so an
	// unseeded network is still deterministic.
	DefaultMemSeed = 1

	// memEphemeralFirst and memEphemeralLast bound the ports handed out
	// for Listen on port 0 (the IANA dynamic range).
	memEphemeralFirst = 49152
	memEphemeralLast  = 65535
)

// LossFunc decides whether the datagram b, sent from from to to, is lost.
// It is called once per datagram, outside MemNetwork's lock, from the
// sending goroutine; it must not retain or modify b.
type LossFunc func(from, to netip.AddrPort, b []byte) bool

// MemStats counts datagrams on a MemNetwork or on one link of it. A
// datagram is counted in Sent when written, then in exactly one of the
// others when its fate is decided; Sent minus the others is the number
// still delayed in flight.
type MemStats struct {
	Sent              uint64
	Delivered         uint64 // placed in the receiver's queue
	DroppedLoss       uint64 // by SetLossRate/SetLinkLossRate or the LossFunc
	DroppedFirewall   uint64 // unsolicited inbound to a firewalled address
	DroppedQueueFull  uint64 // the receiver's queue was full
	DroppedNoListener uint64 // nothing listening at the destination on arrival
}

func (s *MemStats) add(o MemStats) {
	s.Sent += o.Sent
	s.Delivered += o.Delivered
	s.DroppedLoss += o.DroppedLoss
	s.DroppedFirewall += o.DroppedFirewall
	s.DroppedQueueFull += o.DroppedQueueFull
	s.DroppedNoListener += o.DroppedNoListener
}

// MemNetwork is an in-memory datagram network for tests. Conns made by
// Listen exchange datagrams through it with per-link loss, one-way delay
// and firewall behaviour that may be changed at any time from any
// goroutine.
//
// Determinism: random loss draws come from one math/rand/v2 PCG source
// seeded with DefaultMemSeed (or SetSeed), one draw per datagram written
// on a link with a non-zero loss rate, so a given sequence of writes sees
// the same losses every run. Delayed datagrams are delivered by
// time.AfterFunc timers, first in first out per link, so inside a
// testing/synctest bubble delivery happens at exactly the fake time
// due. Without delay, a datagram is in the receiver's queue when
// WriteBatch returns.
//
// Firewall: SetFirewall(a, true) models a NAT or stateful firewall in
// front of a with address-and-port-dependent filtering: a datagram from
// b to a is dropped on arrival unless a has sent to b (that exact
// address and port) before, within the pinhole lifetime if one is set.
//
// Addresses are compared exactly after unmapping; a MemNetwork has no
// notion of IP families or interfaces, and Listen needs a specific
// address (not 0.0.0.0 or ::).
type MemNetwork struct {
	lossFunc atomic.Pointer[LossFunc]

	mu              sync.Mutex
	closed          bool
	conns           map[netip.AddrPort]*memConn
	links           map[memLink]*memLinkState
	firewalled      map[netip.AddrPort]bool
	pinholes        map[memLink]time.Time // {inside, outside} → last outbound
	pinholeLifetime time.Duration         // 0: pinholes never close
	lossRate        float64               // for links without their own
	delay           time.Duration         // for links without their own
	rng             *rand.Rand
	queueLen        int
	nextPort        uint16
}

// memLink is a directed link between two endpoints.
type memLink struct{ from, to netip.AddrPort }

// memLinkState is the per-link policy, counters and delay queue, guarded
// by MemNetwork.mu.
type memLinkState struct {
	key      memLink
	ownLoss  bool
	lossRate float64
	ownDelay bool
	delay    time.Duration
	stats    MemStats

	pending  []memPacket // delayed datagrams, FIFO
	timer    *time.Timer // fires flushLink; reused
	flushing bool        // timer armed or a flush running
}

type memPacket struct {
	from netip.AddrPort
	b    []byte
	due  time.Time
}

// NewMemNetwork returns an empty network with no loss, no delay, no
// firewalls, DefaultMemQueueLen receive queues and DefaultMemSeed.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{
		conns:      make(map[netip.AddrPort]*memConn),
		links:      make(map[memLink]*memLinkState),
		firewalled: make(map[netip.AddrPort]bool),
		pinholes:   make(map[memLink]time.Time),
		rng:        rand.New(rand.NewPCG(DefaultMemSeed, 0)),
		queueLen:   DefaultMemQueueLen,
		nextPort:   memEphemeralFirst,
	}
}

// SetSeed restarts the random loss source from seed.
func (n *MemNetwork) SetSeed(seed uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.rng = rand.New(rand.NewPCG(seed, 0))
}

// SetQueueLen sets the receive queue length, in datagrams, of conns
// created by later Listen calls; lengths below 1 are taken as 1.
func (n *MemNetwork) SetQueueLen(length int) {
	length = max(length, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.queueLen = length
}

// SetLossFunc installs f as an extra loss decision applied to every
// datagram (nil removes it).
func (n *MemNetwork) SetLossFunc(f LossFunc) {
	if f == nil {
		n.lossFunc.Store(nil)
		return
	}
	n.lossFunc.Store(&f)
}

// SetLossRate sets the probability in [0, 1] that a datagram is lost on
// links without their own rate.
func (n *MemNetwork) SetLossRate(p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lossRate = p
}

// SetLinkLossRate sets the loss probability of the directed link from →
// to; a negative p reverts the link to the network's rate.
func (n *MemNetwork) SetLinkLossRate(from, to netip.AddrPort, p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ls := n.linkLocked(unmapAddrPort(from), unmapAddrPort(to))
	ls.ownLoss, ls.lossRate = p >= 0, p
}

// SetDelay sets the one-way delay of links without their own delay.
func (n *MemNetwork) SetDelay(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay = d
}

// SetLinkDelay sets the one-way delay of the directed link from → to; a
// negative d reverts the link to the network's delay. A link stays first
// in first out when its delay shrinks: a datagram never overtakes one
// sent before it on the same link.
func (n *MemNetwork) SetLinkDelay(from, to netip.AddrPort, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ls := n.linkLocked(unmapAddrPort(from), unmapAddrPort(to))
	ls.ownDelay, ls.delay = d >= 0, d
}

// SetFirewall turns the firewall in front of addr on or off (see
// MemNetwork). Pinholes opened while it was off still count once it is on.
func (n *MemNetwork) SetFirewall(addr netip.AddrPort, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	addr = unmapAddrPort(addr)
	if on {
		n.firewalled[addr] = true
	} else {
		delete(n.firewalled, addr)
	}
}

// SetPinholeLifetime makes a firewall pinhole close d after the last
// datagram that opened or refreshed it; 0 (the default) keeps pinholes
// open for ever.
func (n *MemNetwork) SetPinholeLifetime(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pinholeLifetime = d
}

// Stats returns the network-wide counters.
func (n *MemNetwork) Stats() MemStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	var s MemStats
	for _, ls := range n.links {
		s.add(ls.stats)
	}
	return s
}

// LinkStats returns the counters of the directed link from → to.
func (n *MemNetwork) LinkStats(from, to netip.AddrPort) MemStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ls := n.links[memLink{unmapAddrPort(from), unmapAddrPort(to)}]; ls != nil {
		return ls.stats
	}
	return MemStats{}
}

// Listen returns a Conn bound to addr. Port 0 picks a free port in the
// dynamic range. It fails if addr is taken, is not a specific address,
// or the network is closed.
func (n *MemNetwork) Listen(addr netip.AddrPort) (transport.Conn, error) {
	addr = unmapAddrPort(addr)
	if !addr.Addr().IsValid() || addr.Addr().IsUnspecified() {
		return nil, fmt.Errorf("transport: MemNetwork listen %v: need a specific address", addr)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("transport: MemNetwork listen %v: %w", addr, net.ErrClosed)
	}
	if addr.Port() == 0 {
		port, ok := n.freePortLocked(addr.Addr())
		if !ok {
			return nil, fmt.Errorf("transport: MemNetwork listen %v: no free port", addr)
		}
		addr = netip.AddrPortFrom(addr.Addr(), port)
	} else if n.conns[addr] != nil {
		return nil, fmt.Errorf("transport: MemNetwork listen %v: %w", addr, errAddrInUse)
	}
	c := &memConn{
		net:   n,
		local: addr,
		queue: make(chan memPacket, n.queueLen),
		done:  make(chan struct{}),
	}
	n.conns[addr] = c
	return c, nil
}

var errAddrInUse = errors.New("address already in use")

// freePortLocked returns an unused port for ip, scanning the dynamic
// range from where the last scan stopped.
func (n *MemNetwork) freePortLocked(ip netip.Addr) (uint16, bool) {
	for range memEphemeralLast - memEphemeralFirst + 1 {
		port := n.nextPort
		if n.nextPort == memEphemeralLast {
			n.nextPort = memEphemeralFirst
		} else {
			n.nextPort++
		}
		if n.conns[netip.AddrPortFrom(ip, port)] == nil {
			return port, true
		}
	}
	return 0, false
}

// Close closes every conn on the network, discards delayed datagrams and
// makes later Listen calls fail. It is idempotent.
func (n *MemNetwork) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	conns := make([]*memConn, 0, len(n.conns))
	for _, c := range n.conns {
		conns = append(conns, c)
	}
	for _, ls := range n.links {
		if ls.timer != nil {
			ls.timer.Stop()
		}
		ls.pending = nil
	}
	n.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return nil
}

// linkLocked returns the state of link from → to, creating it.
func (n *MemNetwork) linkLocked(from, to netip.AddrPort) *memLinkState {
	key := memLink{from, to}
	ls := n.links[key]
	if ls == nil {
		ls = &memLinkState{key: key}
		n.links[key] = ls
	}
	return ls
}

// send carries payload from → to: it copies payload, applies loss, and
// delivers now or queues for delay.
func (n *MemNetwork) send(from, to netip.AddrPort, payload []byte) {
	b := bytes.Clone(payload)
	funcLost := false
	if f := n.lossFunc.Load(); f != nil {
		funcLost = (*f)(from, to, b)
	}

	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	now := time.Now()
	ls := n.linkLocked(from, to)
	ls.stats.Sent++
	// The datagram leaves from's firewall whatever happens to it later.
	n.pinholes[memLink{from, to}] = now

	rate := n.lossRate
	if ls.ownLoss {
		rate = ls.lossRate
	}
	if rate > 0 && n.rng.Float64() < rate || funcLost {
		ls.stats.DroppedLoss++
		n.mu.Unlock()
		return
	}
	delay := n.delay
	if ls.ownDelay {
		delay = ls.delay
	}
	if delay > 0 || len(ls.pending) > 0 {
		ls.pending = append(ls.pending, memPacket{from: from, b: b, due: now.Add(delay)})
		if !ls.flushing {
			ls.flushing = true
			n.armLocked(ls, delay)
		}
		n.mu.Unlock()
		return
	}
	n.deliverLocked(ls, memPacket{from: from, b: b}, now)
	n.mu.Unlock()
}

// armLocked schedules flushLink for ls after d.
func (n *MemNetwork) armLocked(ls *memLinkState, d time.Duration) {
	if ls.timer == nil {
		ls.timer = time.AfterFunc(d, func() { n.flushLink(ls) })
		return
	}
	ls.timer.Reset(d)
}

// flushLink delivers the datagrams of ls that are due, in order, and
// re-arms the timer for the rest.
func (n *MemNetwork) flushLink(ls *memLinkState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		ls.flushing = false
		return
	}
	now := time.Now()
	i := 0
	for ; i < len(ls.pending) && !ls.pending[i].due.After(now); i++ {
		n.deliverLocked(ls, ls.pending[i], now)
		ls.pending[i] = memPacket{}
	}
	ls.pending = ls.pending[i:]
	if len(ls.pending) == 0 {
		ls.pending = nil
		ls.flushing = false
		return
	}
	n.armLocked(ls, ls.pending[0].due.Sub(now))
}

// deliverLocked puts p into the queue of the conn at ls.key.to, or counts
// why it could not.
func (n *MemNetwork) deliverLocked(ls *memLinkState, p memPacket, now time.Time) {
	to := ls.key.to
	c := n.conns[to]
	switch {
	case c == nil:
		ls.stats.DroppedNoListener++
	case n.firewalled[to] && !n.pinholeOpenLocked(memLink{to, p.from}, now):
		ls.stats.DroppedFirewall++
	default:
		select {
		case c.queue <- p:
			ls.stats.Delivered++
		default:
			ls.stats.DroppedQueueFull++
			c.drops.Add(1)
		}
	}
}

// pinholeOpenLocked reports whether hole.from (behind a firewall) has sent
// to hole.to recently enough to let hole.to's datagrams in.
func (n *MemNetwork) pinholeOpenLocked(hole memLink, now time.Time) bool {
	last, ok := n.pinholes[hole]
	return ok && (n.pinholeLifetime == 0 || now.Sub(last) < n.pinholeLifetime)
}

func unmapAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// memConn is a Conn on a MemNetwork.
type memConn struct {
	net   *MemNetwork
	local netip.AddrPort
	queue chan memPacket // bounded receive queue; never closed
	done  chan struct{}  // closed by Close
	once  sync.Once
	drops atomic.Uint64
}

func (c *memConn) isClosed() bool { return isDone(c.done) }

// isDone reports whether done is closed.
func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func (c *memConn) ReadBatch(msgs []transport.Message) (int, error) {
	return readQueue(c.done, c.queue, msgs)
}

// readQueue is ReadBatch over a bounded queue of datagrams, for a conn
// whose Close closes done: it blocks for the first datagram, then takes
// what is queued without blocking.
func readQueue(done <-chan struct{}, queue <-chan memPacket, msgs []transport.Message) (int, error) {
	if isDone(done) {
		return 0, net.ErrClosed
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	select {
	case <-done:
		return 0, net.ErrClosed
	case p := <-queue:
		fill(&msgs[0], p)
	}
	for i := 1; i < len(msgs); i++ {
		select {
		case p := <-queue:
			fill(&msgs[i], p)
		default:
			return i, nil
		}
	}
	return len(msgs), nil
}

// fill reads p into m as a socket would: truncated to len(m.Buf), with
// Trunc set when it was.
func fill(m *transport.Message, p memPacket) {
	m.N = copy(m.Buf, p.b)
	m.Trunc = m.N < len(p.b)
	m.Addr = p.from
}

func (c *memConn) WriteBatch(msgs []transport.Message) (int, error) {
	for i := range msgs {
		if c.isClosed() {
			return i, net.ErrClosed
		}
		m := &msgs[i]
		if err := transport.CheckWrite(m); err != nil {
			return i, err
		}
		c.net.send(c.local, unmapAddrPort(m.Addr), m.Buf[:m.N])
	}
	return len(msgs), nil
}

func (c *memConn) LocalAddr() netip.AddrPort { return c.local }

// Drops implements transport.DropCounter: datagrams dropped because this conn's
// queue was full.
func (c *memConn) Drops() uint64 { return c.drops.Load() }

func (c *memConn) Close() error {
	c.once.Do(func() {
		c.net.mu.Lock()
		if c.net.conns[c.local] == c {
			delete(c.net.conns, c.local)
		}
		c.net.mu.Unlock()
		close(c.done)
	})
	return nil
}
