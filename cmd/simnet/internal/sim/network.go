package sim

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/internal/eventq"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

const (
	// never is a time no event is scheduled at.
	never = time.Duration(math.MaxInt64)

	// PublicPort is every host's public port (its relay's, or its ship's
	// when it runs no relay); RebindPort + n is a ship's port after its
	// n-th rebinding (Rebind). ShipPort is where a relay host's own ship
	// listens, on the host's address (relay.Config.ShipLane).
	PublicPort = 31337
	ShipPort   = 31338
	RebindPort = 40000

	// PingPath is the first segment of an endpoint's keepalive poke's path
	// (and its ack's): "ping/<@p of the pinging ship>", one name per
	// sponsee. Datagrams whose path is PingPath or starts with PingPath+"/"
	// are classed as keepalive traffic.
	PingPath = "ping"
)

// Random streams, one per use, so that adding draws to one does not shift
// another.
const (
	streamTopology uint64 = iota + 1
	streamPlace
	streamBirth
	streamAddress
)

type nodeKind uint8

const (
	nodeShip   nodeKind = iota // an endpoint core on a public lane
	nodeRelay                  // a relay core on a public lane
	nodeHosted                 // an endpoint core behind its ship's relay
)

// Traffic classes datagrams by what they carry.
type Traffic uint8

const (
	TrafficKeepalive Traffic = iota // pings to sponsors and their acks
	TrafficTracked                  // requests made through Network.Peek or Subscribe, and their pages
	TrafficNotify                   // scry notifications: subscription requests, acks, heartbeats (scry.NotifyPrefix)
	TrafficOther                    // anything else
	NumTraffic                      // the number of classes
)

// pinhole is a NAT binding: the ship sent to lane to at time at.
type pinhole struct {
	to netip.AddrPort
	at time.Duration
}

type node struct {
	kind    nodeKind
	ship    int32
	lane    netip.AddrPort
	peer    int32 // a relay's hosted core, a hosted core's relay; -1 otherwise
	rebinds int

	relay    *relay.Relay
	relayCfg relay.Config // to restart the relay
	core     *endpoint.Core
	coreCfg  endpoint.Config
	// stock is a stock ship's requester and keepalive (Strategy.Requester
	// RequesterStock), vere a stock galaxy's forwarding
	// (Strategy.VereGalaxies); nil otherwise. Both sit in front of core.
	stock *stockShip
	vere  *vereGalaxy
	// born is set once the core exists: ships boot at random times within
	// the first ping interval, so their pings are spread out.
	born     bool
	offline  bool
	wakeAt   time.Duration // the wake event pending for the core; never if none
	pinholes []pinhole     // behind a NAT: lanes sent to recently

	netIn [NumTraffic]uint64 // datagrams received over the network
}

// Counters are network-wide datagram counts.
type Counters struct {
	Sent uint64 // datagrams sent over the network (loopback excluded)
	// SentBy is Sent by traffic class.
	SentBy     [NumTraffic]uint64
	Lost       uint64 // lost to link loss
	NATDropped uint64 // dropped by a NAT: no pinhole for the sender
	Stale      uint64 // sent to a lane nobody holds any more (rebinding)
	Offline    uint64 // reached a node that was offline or not yet booted
	Delivered  uint64
}

// PathStats counts the datagrams carrying one tracked path.
type PathStats struct {
	// Msgs is how many datagrams carrying the path were sent over the
	// network: every copy of the request on every link, and every page.
	Msgs uint64
}

// Network is a simulated network. It is not safe for concurrent use; run
// several Networks in parallel instead.
type Network struct {
	cfg      Config
	ships    []Ship
	nodes    []node
	byLane   map[netip.AddrPort]int32
	byShip   map[lane.Ship]int32
	sponsors *lane.Sponsors
	galaxies map[lane.Ship]netip.AddrPort
	// peerKeys are the publishers' public keys (SetKey), shared by every
	// endpoint's configuration and not changed once a core has booted.
	peerKeys map[lane.Ship]ed25519.PublicKey
	booted   int

	pos      [][2]float64 // by ship
	acc      []float64    // access delay, by ship, relative
	accPairs float64      // E[acc_a + acc_b] over random pairs

	q        eventq.Queue[event]
	now      time.Duration
	hashSeed uint64
	digest   xxhash.Digest
	rng      *rand.Rand // for callers' draws (Rand)

	relayOut *relay.Reader
	dg       []endpoint.Datagram
	pool     [][]byte
	tracked  map[string]*PathStats
	counters Counters
	// relayDrops accumulates the drop counts of relays that were replaced
	// (RestartRelay), so totals survive restarts.
	relayDrops relay.Snapshot
}

// New builds the network cfg describes. Relays start at once; ships boot at
// random times within the first PingInterval, so a run should let that much
// time pass before measuring.
func New(cfg Config) (*Network, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	ships, err := buildShips(cfg.Ships, cfg.NATFraction, rand.New(rand.NewPCG(cfg.Seed, streamTopology)))
	if err != nil {
		return nil, err
	}
	addrs, err := hostAddrs(len(ships), rand.New(rand.NewPCG(cfg.Seed, streamAddress)))
	if err != nil {
		return nil, err
	}
	n := &Network{
		cfg: cfg, ships: ships,
		byLane:   make(map[netip.AddrPort]int32, len(ships)*2),
		byShip:   make(map[lane.Ship]int32, len(ships)),
		sponsors: &lane.Sponsors{},
		galaxies: map[lane.Ship]netip.AddrPort{},
		peerKeys: map[lane.Ship]ed25519.PublicKey{},
		hashSeed: cfg.Seed ^ 0x9e3779b97f4a7c15,
		rng:      rand.New(rand.NewPCG(cfg.Seed, ^cfg.Seed)),
		relayOut: relay.NewReader(1),
		tracked:  map[string]*PathStats{},
	}
	n.place()
	st := cfg.Strategy
	for i := range n.ships {
		s := &n.ships[i]
		n.byShip[s.ID] = int32(i)
		s.Relay = !st.VereGalaxies && (s.Class == lane.Galaxy || (!st.GalaxyOnly && s.Host))
		if st.GalaxyOnly && s.Class != lane.Galaxy && s.Class != lane.Star {
			// Directed messaging: every ship keeps its galaxy informed
			// and is reached through it.
			if err := n.sponsors.Set(s.ID, n.ships[s.Galaxy].ID); err != nil {
				return nil, err
			}
		}
		if s.Relay {
			s.front = n.addNode(nodeRelay, i, netip.AddrPortFrom(addrs[i], PublicPort))
			s.core = n.addNode(nodeHosted, i, netip.AddrPortFrom(addrs[i], ShipPort))
			n.nodes[s.front].peer, n.nodes[s.core].peer = s.core, s.front
		} else {
			s.front = n.addNode(nodeShip, i, netip.AddrPortFrom(addrs[i], PublicPort))
			s.core = s.front
			n.nodes[s.core].peer = -1
		}
		n.nodes[s.core].wakeAt = never
		n.nodes[s.front].wakeAt = never
		if s.Class == lane.Galaxy {
			n.galaxies[s.ID] = n.nodes[s.front].lane
		}
	}
	sponsees := make([]int, len(n.ships))
	for i := range n.ships {
		if sp := n.byShip[n.sponsors.Sponsor(n.ships[i].ID)]; int(sp) != i {
			sponsees[sp]++
		}
	}
	for i := range n.ships {
		if err := n.configure(i, sponsees[i]); err != nil {
			return nil, err
		}
	}
	for i := range n.nodes {
		if nd := &n.nodes[i]; nd.kind == nodeRelay {
			r, err := relay.New(nd.relayCfg)
			if err != nil {
				return nil, fmt.Errorf("sim: relay for %s: %w", n.ships[nd.ship].ID, err)
			}
			nd.relay = r
		}
	}
	births := rand.New(rand.NewPCG(cfg.Seed, streamBirth))
	for i := range n.ships {
		at := time.Duration(births.Int64N(int64(max(cfg.PingInterval, time.Millisecond))))
		if (st.VereGalaxies && n.ships[i].Class == lane.Galaxy) || (st.Requester != RequesterEndpoint && n.ships[i].Host) {
			// Infrastructure is up before the ships: a stock galaxy
			// forwards from the start, as a relay does, and a stock
			// ship's boot pings (sent once, then retried only by arvo's
			// 2 min timer) find their sponsors running.
			at = 0
		}
		id := n.ships[i].core
		n.nodes[id].wakeAt = at
		n.q.PushTie(at, uint64(id), event{kind: evWake, node: id})
	}
	return n, nil
}

// place gives each ship a position and an access delay.
func (n *Network) place() {
	rng := rand.New(rand.NewPCG(n.cfg.Seed, streamPlace))
	n.pos = make([][2]float64, len(n.ships))
	n.acc = make([]float64, len(n.ships))
	sum := 0.0
	for i := range n.ships {
		n.pos[i] = [2]float64{rng.Float64(), rng.Float64()}
		a := rng.ExpFloat64()
		if n.ships[i].Host {
			a *= RelayAccessFactor
		}
		n.acc[i] = a
		sum += a
	}
	n.accPairs = 2 * sum / float64(len(n.ships))
}

func (n *Network) addNode(k nodeKind, ship int, ap netip.AddrPort) int32 {
	id := int32(len(n.nodes))
	n.nodes = append(n.nodes, node{kind: k, ship: int32(ship), lane: ap})
	n.byLane[ap] = id
	return id
}

// configure builds ship i's relay and core configurations, for a relay
// with sponsees ships pinging it. New starts the relays once all are
// configured; a core is made when its ship boots.
func (n *Network) configure(i, sponsees int) error {
	s := &n.ships[i]
	st := n.cfg.Strategy
	sponsor := n.shipOf(n.sponsors.Sponsor(s.ID))
	// The endpoint knows its galaxy and its sponsor's public lane; the
	// lanes of other galaxies are looked up when first needed (Peek), as a
	// ship resolves galaxies by DNS.
	lanes := map[lane.Ship]netip.AddrPort{
		n.ships[s.Galaxy].ID: n.nodes[n.ships[s.Galaxy].front].lane,
		sponsor.ID:           n.nodes[sponsor.front].lane,
	}
	core := &n.nodes[s.core]
	core.coreCfg = endpoint.Config{
		Ship: s.ID, Sponsors: n.sponsors, Lanes: lanes,
		RetryInterval: n.cfg.RetryInterval, PingInterval: n.cfg.PingInterval,
		Routes: n.routes(n.cfg.Seed ^ uint64(s.core)), PeerKeys: n.peerKeys,
		// Session ids and heartbeat counters, reproducibly; never 0
		// (which would draw from crypto/rand).
		Seed: mix(n.cfg.Seed^uint64(s.core)) | 1,
	}
	if st.Requester != RequesterEndpoint && !s.Relay && s.Class != lane.Galaxy {
		core.coreCfg.PingInterval = -1 // stockShip keeps it reachable
	}
	if !s.Relay {
		return nil
	}
	// A relay's operator pins the lanes of the relays next to it in the
	// tree: its sponsor's (galaxies are known anyway) and its sponsees'.
	pinned := map[lane.Ship]netip.AddrPort{}
	if sponsor.Relay && sponsor.Class != lane.Galaxy && sponsor.ID != s.ID {
		pinned[sponsor.ID] = n.nodes[sponsor.front].lane
	}
	rl := &n.nodes[s.front]
	rl.relayCfg = relay.Config{
		Ship: s.ID, ShipLane: core.lane, Self: []netip.AddrPort{rl.lane},
		Galaxies: n.galaxies, Pinned: pinned, Sponsors: n.sponsors,
		Pending:  pit.Config{Seed: mix(n.cfg.Seed^uint64(s.front)<<40) | 1},
		Routes:   n.routes(n.cfg.Seed ^ uint64(s.front)<<20),
		Withheld: withheld(st),
	}
	n.sizeTables(&rl.relayCfg, sponsees, n.cfg.ProductionTables)
	if s.Class != lane.Galaxy && sponsor.Relay && sponsor.ID != s.ID {
		// The sponsor's relay pins this relay as a sponsee. Sponsors come
		// first in n.ships, so theirs is configured already.
		n.nodes[sponsor.front].relayCfg.Pinned[s.ID] = rl.lane
	}
	return nil
}

func (n *Network) shipOf(id lane.Ship) *Ship { return &n.ships[n.byShip[id]] }

// Ships returns the network's ships: galaxies, then stars, planets and
// moons. The slice must not be modified.
func (n *Network) Ships() []Ship { return n.ships }

// Now returns the virtual time.
func (n *Network) Now() time.Duration { return n.now }

// Rand returns a random source for callers (workloads) that is part of the
// network's determinism: draws made in the same order give the same values
// for the same seed.
func (n *Network) Rand() *rand.Rand { return n.rng }

// Counters returns the network-wide datagram counts.
func (n *Network) Counters() Counters { return n.counters }

// At schedules fn to run at t (or now, if t has passed).
func (n *Network) At(t time.Duration, fn func()) {
	t = max(t, n.now)
	n.q.PushTie(t, uint64(t), event{kind: evCall, fn: fn})
}

// RunUntil processes events up to and including time t, then sets the clock
// to t.
func (n *Network) RunUntil(t time.Duration) {
	for n.q.Due(t) {
		at, ev := n.q.Pop()
		n.now = at
		switch ev.kind {
		case evDeliver:
			n.deliver(&ev)
		case evWake:
			n.wake(&ev)
		case evCall:
			ev.fn()
		}
	}
	n.now = max(n.now, t)
}

func (n *Network) deliver(ev *event) {
	nd := &n.nodes[ev.node]
	defer n.release(ev.buf)
	if ev.net {
		switch {
		case nd.lane != ev.to:
			n.counters.Stale++
			return
		case nd.offline || (nd.kind != nodeRelay && !nd.born):
			n.counters.Offline++
			return
		case nd.kind == nodeShip && n.ships[nd.ship].NAT && !n.pinholeOpen(nd, ev.from):
			n.counters.NATDropped++
			return
		}
		n.counters.Delivered++
		nd.netIn[ev.cls]++
	} else if nd.offline || (nd.kind != nodeRelay && !nd.born) {
		return
	}
	switch nd.kind {
	case nodeRelay:
		r := nd.relay
		r.Expire(n.now)
		n.relayOut.Reset()
		r.Handle(ev.buf, ev.from, n.now, n.relayOut)
		for _, s := range n.relayOut.Sends {
			if s.Addr == nd.relayCfg.ShipLane {
				n.loopback(nd.peer, nd.lane, s.Buf)
			} else {
				n.send(ev.node, nd.lane, s.Addr, s.Buf)
			}
		}
	default:
		handled := false
		n.dg = n.dg[:0]
		switch {
		case nd.vere != nil:
			n.dg, handled = nd.vere.handle(ev.buf, ev.from, n.now, n.dg)
		case nd.stock != nil:
			n.dg, handled = nd.stock.handle(ev.buf, ev.from, n.now, n.dg)
		}
		if !handled {
			n.dg = nd.core.Handle(ev.buf, ev.from, n.now, n.dg)
		}
		n.emit(ev.node, n.dg)
		n.reschedule(ev.node)
	}
}

func (n *Network) wake(ev *event) {
	nd := &n.nodes[ev.node]
	if n.now != nd.wakeAt { // n.now is the event's time
		return // superseded by an earlier wake
	}
	nd.wakeAt = never
	if nd.offline {
		return // SetOffline reschedules on return
	}
	if !nd.born {
		n.boot(ev.node)
	}
	n.dg = nd.core.Tick(n.now, n.dg[:0])
	if nd.stock != nil {
		n.dg = nd.stock.tick(n.now, n.dg)
	}
	n.emit(ev.node, n.dg)
	n.reschedule(ev.node)
}

// boot creates node id's endpoint core.
func (n *Network) boot(id int32) {
	nd := &n.nodes[id]
	c, err := endpoint.NewCore(nd.coreCfg, nd.lane)
	if err != nil {
		// The configuration is built by configure from valid lanes.
		panic(fmt.Sprintf("sim: endpoint for %s: %v", n.ships[nd.ship].ID, err))
	}
	nd.core = c
	nd.born = true
	s := &n.ships[nd.ship]
	st := n.cfg.Strategy
	switch {
	case nd.kind != nodeShip:
	case s.Class == lane.Galaxy && st.VereGalaxies:
		nd.vere = newVereGalaxy(s.ID, n.galaxyOf)
	case s.Class != lane.Galaxy && st.Requester != RequesterEndpoint:
		phase := time.Duration(mix(n.cfg.Seed^uint64(id)<<8) % uint64(ArvoRetryInterval))
		nd.stock = newStockShip(s.ID, n.publicLane, n.galaxyOf, n.now+phase)
		nd.stock.proposed = st.Requester == RequesterProposed
	}
	n.booted++
}

// reschedule makes sure a wake is pending for node id's next deadline.
func (n *Network) reschedule(id int32) {
	nd := &n.nodes[id]
	if !nd.born || nd.offline {
		return
	}
	d := nd.core.NextDeadline()
	if nd.stock != nil {
		d = min(d, nd.stock.nextDeadline())
	}
	if d == never {
		return
	}
	d = max(d, n.now)
	if d < nd.wakeAt {
		nd.wakeAt = d
		n.q.PushTie(d, uint64(id), event{kind: evWake, node: id})
	}
}

// emit sends what node id's core decided to send.
func (n *Network) emit(id int32, dgs []endpoint.Datagram) {
	nd := &n.nodes[id]
	for i, d := range dgs {
		if nd.kind == nodeShip {
			n.send(id, nd.lane, d.To, d.Buf)
			continue
		}
		// A hosted core hands each datagram to its relay once; the relay
		// chooses the lanes.
		dup := false
		for _, e := range dgs[:i] {
			if bytes.Equal(e.Buf, d.Buf) {
				dup = true
				break
			}
		}
		if !dup {
			n.loopback(nd.peer, nd.lane, d.Buf)
		}
	}
}

// loopback hands b from lane from to node dst on the same host.
func (n *Network) loopback(dst int32, from netip.AddrPort, b []byte) {
	n.q.PushTie(n.now+LoopbackLatency, n.hash(from, n.nodes[dst].lane, b), event{
		kind: evDeliver, node: dst, from: from, to: n.nodes[dst].lane, buf: n.copyBuf(b),
	})
}

// send puts b on the network from node src (lane from) to lane to.
func (n *Network) send(src int32, from, to netip.AddrPort, b []byte) {
	cls, ps := n.classify(b)
	n.counters.Sent++
	n.counters.SentBy[cls]++
	if ps != nil {
		ps.Msgs++
	}
	sn := &n.nodes[src]
	if sn.kind == nodeShip && n.ships[sn.ship].NAT {
		n.openPinhole(sn, to)
	}
	dst, ok := n.byLane[to]
	if !ok {
		n.counters.Stale++
		return
	}
	h := n.hash(from, to, b)
	if n.cfg.Loss > 0 && unit(h) < n.cfg.Loss {
		n.counters.Lost++
		return
	}
	lat := n.linkLatency(sn.ship, n.nodes[dst].ship, unit(mix(h)))
	n.q.PushTie(n.now+lat, h, event{
		kind: evDeliver, net: true, cls: cls,
		node: dst, from: from, to: to, buf: n.copyBuf(b),
	})
}

// classify returns b's traffic class and, if it carries a tracked path, that
// path's counters.
func (n *Network) classify(b []byte) (Traffic, *PathStats) {
	var p scry.Packet
	if err := p.Parse(b); err != nil {
		var resp scry.STUNResponse
		if scry.IsSTUN(b) || resp.Parse(b) == nil {
			return TrafficKeepalive, nil // vere's STUN keepalive and its answer
		}
		return TrafficOther, nil
	}
	if ps, ok := n.tracked[string(p.Name.Path)]; ok {
		return TrafficTracked, ps
	}
	if isPingPath(p.Name.Path) {
		return TrafficKeepalive, nil
	}
	if scry.IsNotifyPath(p.Name.Path) {
		return TrafficNotify, nil
	}
	return TrafficOther, nil
}

// isPingPath reports whether path names a keepalive ping: "ping" (endpoints
// before per-sponsee pings) or "ping/<ship>".
func isPingPath(path []byte) bool {
	return string(path) == PingPath ||
		len(path) > len(PingPath) && string(path[:len(PingPath)]) == PingPath && path[len(PingPath)] == '/'
}

func (n *Network) openPinhole(nd *node, to netip.AddrPort) {
	for i := range nd.pinholes {
		if nd.pinholes[i].to == to {
			nd.pinholes[i].at = n.now
			return
		}
	}
	// Reuse an expired slot before growing.
	for i := range nd.pinholes {
		if n.now-nd.pinholes[i].at > NATBindingTimeout {
			nd.pinholes[i] = pinhole{to: to, at: n.now}
			return
		}
	}
	nd.pinholes = append(nd.pinholes, pinhole{to: to, at: n.now})
}

func (n *Network) pinholeOpen(nd *node, from netip.AddrPort) bool {
	for _, p := range nd.pinholes {
		if p.to == from {
			return n.now-p.at <= NATBindingTimeout
		}
	}
	return false
}

// LinkLatency returns the one-way latency between the hosts of ships a and
// b, without jitter.
func (n *Network) LinkLatency(a, b int) time.Duration {
	return n.linkLatency(int32(a), int32(b), 0.5)
}

// linkLatency is the one-way latency between ships a and b, u a uniform
// draw for the jitter.
func (n *Network) linkLatency(a, b int32, u float64) time.Duration {
	m := n.cfg.Latency
	dx := math.Abs(n.pos[a][0] - n.pos[b][0])
	dy := math.Abs(n.pos[a][1] - n.pos[b][1])
	dx, dy = min(dx, 1-dx), min(dy, 1-dy)
	dist := math.Sqrt(dx*dx+dy*dy) / MeanTorusDistance
	acc := (n.acc[a] + n.acc[b]) / n.accPairs
	base := m.AccessShare*acc + (1-m.AccessShare)*dist
	return time.Duration(float64(m.Mean) * base * (1 + m.Jitter*(2*u-1)))
}

// hash is the datagram's random draw: a function of the seed, the lanes, the
// time and the bytes.
func (n *Network) hash(from, to netip.AddrPort, b []byte) uint64 {
	var hdr [2*18 + 8]byte
	f, t := from.Addr().As16(), to.Addr().As16()
	copy(hdr[0:16], f[:])
	binary.LittleEndian.PutUint16(hdr[16:18], from.Port())
	copy(hdr[18:34], t[:])
	binary.LittleEndian.PutUint16(hdr[34:36], to.Port())
	binary.LittleEndian.PutUint64(hdr[36:44], uint64(n.now))
	n.digest.ResetWithSeed(n.hashSeed)
	n.digest.Write(hdr[:])
	n.digest.Write(b)
	return n.digest.Sum64()
}

// mix derives a second independent draw from h (splitmix64's finaliser).
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// unit maps h to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// copyBuf copies b into a buffer with relay.GrowRoom spare capacity, as
// Relay.Handle requires.
func (n *Network) copyBuf(b []byte) []byte {
	if len(b)+relay.GrowRoom > PoolBufCap {
		return append(make([]byte, 0, len(b)+relay.GrowRoom), b...)
	}
	if k := len(n.pool); k > 0 {
		buf := n.pool[k-1]
		n.pool = n.pool[:k-1]
		return append(buf[:0], b...)
	}
	return append(make([]byte, 0, PoolBufCap), b...)
}

func (n *Network) release(b []byte) {
	if cap(b) == PoolBufCap {
		n.pool = append(n.pool, b)
	}
}

// sizeTables sets the table sizes of relay configuration c, for a relay
// with sponsees sponsees. The relay runs with production defaults (the zero
// Amp, Dup and Pending configs take relay's and pit's own), but for what one
// process holding thousands of relays needs: with production unset, tables
// sized for the simulation (relayTableSlots, PendingShards, DupSlots,
// RouteSourceSlots; config.go says why no figure depends on them). Seeds
// are set by configure.
func (n *Network) sizeTables(c *relay.Config, sponsees int, production bool) {
	c.Amp, c.Dup = amp.Config{}, relay.DupConfig{}
	c.Pending.Shards = 0
	c.Routes.LaneClockSlots, c.Routes.SourceSlots = 0, 0
	if !production {
		slots := relayTableSlots(sponsees)
		c.Amp.Slots, c.Amp.NetSlots, c.Amp.ProofSlots = slots, slots, slots
		c.Dup.Slots = DupSlots
		c.Pending.Shards = PendingShards
		c.Routes.LaneClockSlots, c.Routes.SourceSlots = slots, RouteSourceSlots
	}
	if n.cfg.NoAmpBudget {
		c.Amp = amp.Config{Rate: -1} // the budget's off switch
	}
}

// ProductionTablesOnChain gives the relays on ship i's sponsorship chain
// (its own, if it runs one, and those of its sponsors up to its galaxy)
// production's table sizes. A workload that concentrates on ship i (a
// publisher every subscriber asks) has them hear far more addresses than
// their sponsees, which the simulation's sizes are made for
// (relayTableSlots). It must be called before the network runs.
func (n *Network) ProductionTablesOnChain(i int) error {
	if n.now > 0 || n.booted > 0 {
		return fmt.Errorf("sim: ProductionTablesOnChain after the network ran")
	}
	for s := &n.ships[i]; ; {
		if s.Relay {
			nd := &n.nodes[s.front]
			n.sizeTables(&nd.relayCfg, 0, true)
			r, err := relay.New(nd.relayCfg)
			if err != nil {
				return fmt.Errorf("sim: relay for %s: %w", s.ID, err)
			}
			nd.relay = r
		}
		sp := n.shipOf(n.sponsors.Sponsor(s.ID))
		if sp == s {
			return nil // a galaxy: the chain's top
		}
		s = sp
	}
}

// routes returns the route table configuration of the network's strategy
// (its Rubric) for a relay or endpoint, its hashes seeded from v (never 0, which would
// draw from crypto/rand) so that a run repeats, and its per-source counters
// sized for the simulation (RouteSourceSlots) unless ProductionTables.
func (n *Network) routes(v uint64) route.Config {
	var c route.Config
	c.Seed = mix(v) | 1
	c.Rubric = Rubric(n.cfg.Strategy)
	if !n.cfg.ProductionTables {
		c.SourceSlots = RouteSourceSlots
	}
	return c
}
