package endpoint

import (
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/internal/eventq"
	"github.com/urbit-relay/relay/relay"
)

// simNet is a virtual-time network for Cores and relay cores with no
// goroutines: one event queue of deliveries, timers and scheduled actions,
// run in time order. Every datagram is copied on send. Loss is drawn from a
// seeded source, so a run is reproducible.
type simNet struct {
	now    time.Duration
	events eventq.Queue[event]
	nodes  map[netip.AddrPort]*simNode
	rng    *rand.Rand

	// Loss is the probability a datagram is lost, on every link.
	Loss float64
	// Delay gives each datagram's one-way delay.
	Delay func(from, to netip.AddrPort) time.Duration
	// Firewalled lanes accept datagrams only from lanes they have sent to.
	firewalled map[netip.AddrPort]bool
	pinholes   map[[2]netip.AddrPort]bool
	// Tap, if set, sees every datagram sent (before loss).
	Tap func(from, to netip.AddrPort, b []byte)

	sent, lost, blocked, unroutable uint64
}

type simNode struct {
	addr  netip.AddrPort
	core  *Core
	relay *relay.Relay
	out   *relay.Reader
	sched time.Duration // time of the queued tick event; never if none
}

func newSimNet(seed uint64) *simNet {
	return &simNet{
		nodes:      map[netip.AddrPort]*simNode{},
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e37)),
		Delay:      func(_, _ netip.AddrPort) time.Duration { return 10 * time.Millisecond },
		firewalled: map[netip.AddrPort]bool{},
		pinholes:   map[[2]netip.AddrPort]bool{},
	}
}

func (n *simNet) addCore(addr netip.AddrPort, c *Core) *simNode {
	nd := &simNode{addr: addr, core: c, sched: never}
	n.nodes[addr] = nd
	n.schedule(nd)
	return nd
}

func (n *simNet) addRelay(addr netip.AddrPort, r *relay.Relay) *simNode {
	nd := &simNode{addr: addr, relay: r, out: relay.NewReader(1), sched: never}
	n.nodes[addr] = nd
	return nd
}

// remove takes a node off the network (a crash): datagrams to it are lost.
func (n *simNet) remove(addr netip.AddrPort) { delete(n.nodes, addr) }

func (n *simNet) firewall(addr netip.AddrPort) { n.firewalled[addr] = true }

// send puts datagrams a node decided to send on the wire.
func (n *simNet) send(from netip.AddrPort, ds []Datagram) {
	for _, d := range ds {
		n.sendOne(from, d.To, d.Buf)
	}
}

func (n *simNet) sendOne(from, to netip.AddrPort, b []byte) {
	n.sent++
	if n.Tap != nil {
		n.Tap(from, to, b)
	}
	n.pinholes[[2]netip.AddrPort{from, to}] = true
	if n.Loss > 0 && n.rng.Float64() < n.Loss {
		n.lost++
		return
	}
	buf := make([]byte, len(b), len(b)+relay.GrowRoom)
	copy(buf, b)
	n.events.Push(n.now+n.Delay(from, to), event{kind: evDeliver, from: from, to: to, buf: buf})
}

// at schedules f at time t.
func (n *simNet) at(t time.Duration, f func()) { n.events.Push(t, event{kind: evAction, f: f}) }

// schedule queues a tick for nd's core at its next deadline, if earlier
// than the one queued.
func (n *simNet) schedule(nd *simNode) {
	if nd.core == nil {
		return
	}
	d := max(nd.core.NextDeadline(), n.now)
	if d < nd.sched {
		nd.sched = d
		n.events.Push(d, event{kind: evTick, to: nd.addr, node: nd})
	}
}

// run processes events up to and including time until.
func (n *simNet) run(until time.Duration) {
	for n.events.Due(until) {
		at, e := n.events.Pop()
		n.now = at
		switch e.kind {
		case evAction:
			e.f()
		case evTick:
			nd := e.node
			if nd.sched != at || n.nodes[nd.addr] != nd {
				continue
			}
			nd.sched = never
			n.send(nd.addr, nd.core.Tick(n.now, nil))
			n.schedule(nd)
		case evDeliver:
			nd := n.nodes[e.to]
			if nd == nil {
				n.unroutable++
				continue
			}
			if n.firewalled[e.to] && !n.pinholes[[2]netip.AddrPort{e.to, e.from}] {
				n.blocked++
				continue
			}
			n.deliver(nd, e.from, e.buf)
		}
	}
	n.now = until
}

func (n *simNet) deliver(nd *simNode, from netip.AddrPort, b []byte) {
	if nd.relay != nil {
		nd.relay.Expire(n.now)
		nd.out.Reset()
		nd.relay.Handle(b, from, n.now, nd.out)
		for _, s := range nd.out.Sends {
			n.sendOne(nd.addr, s.Addr, s.Buf)
		}
		return
	}
	n.send(nd.addr, nd.core.Handle(b, from, n.now, nil))
	n.schedule(nd)
}

// do runs f against node nd's core now and sends what it returns.
func (n *simNet) do(nd *simNode, f func(now time.Duration) []Datagram) {
	n.send(nd.addr, f(n.now))
	n.schedule(nd)
}

const (
	evDeliver uint8 = iota
	evTick
	evAction
)

// event is one entry of simNet.events, queued at its time; events of the
// same time run in the order scheduled.
type event struct {
	kind     uint8
	from, to netip.AddrPort
	buf      []byte
	node     *simNode
	f        func()
}
