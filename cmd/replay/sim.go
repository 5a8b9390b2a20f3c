package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/internal/eventq"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/scry"
)

// Timings of the simulated ships. They follow the endpoint package and
// today's ships: a request is retransmitted every second, a ship pings its
// sponsor every 25 s.
const (
	simRetry        = time.Second      // requester retransmission interval
	simPingInterval = 25 * time.Second // a publisher's ping to its sponsor
	simFragment     = 1024             // bytes per fragment at bloq 13
	simPingPath     = "ping"           // the endpoint package's ping name
)

// node is a simulated ship (or attacker) at one lane.
type node interface {
	hear(s *sim, b []byte)
}

// sim is a discrete-event network of ships around one relay, in virtual
// time. The relay is the real decision core; what it receives and sends is
// recorded, as relay run --capture would record it.
type sim struct {
	rng       *rand.Rand
	now       time.Duration
	queue     eventq.Queue[func()] // events of the same time run in the order scheduled, so a run is deterministic
	relay     *relay.Relay
	out       *relay.Out
	relayLane netip.AddrPort
	relayShip lane.Ship
	epoch     time.Time
	nodes     map[netip.AddrPort]node
	delay     map[netip.AddrPort]time.Duration // one-way delay between a lane and the relay
	// lossIn is the chance a lossy datagram to the relay is lost (and so
	// not recorded); lossOut, that one the relay sends is lost after it
	// was recorded.
	lossIn, lossOut float64
	records         []capture.Record
}

func newSim(seed uint64, relayShip lane.Ship, relayLane netip.AddrPort, epoch time.Time) (*sim, error) {
	// The relay's ship is at genShipLane, where nothing listens: what the
	// relay hands it is recorded, not answered. A relay learns a
	// sponsee's lane only from a ping it hands over.
	r, err := relay.New(relay.Config{HintNets: loopbackNets, Ship: relayShip, ShipLane: netip.MustParseAddrPort(genShipLane), Self: []netip.AddrPort{relayLane}})
	if err != nil {
		return nil, err
	}
	return &sim{
		rng:   rand.New(rand.NewPCG(seed, seed^0x5eed_ca11_ab1e_d00d)),
		relay: r, out: relay.NewOut(1), relayLane: relayLane, relayShip: relayShip,
		epoch: epoch, nodes: map[netip.AddrPort]node{}, delay: map[netip.AddrPort]time.Duration{},
	}, nil
}

func (s *sim) at(t time.Duration, fn func()) {
	s.queue.Push(max(t, s.now), fn)
}

func (s *sim) after(d time.Duration, fn func()) { s.at(s.now+d, fn) }

// runAll runs events until none are left.
func (s *sim) runAll() {
	for s.queue.Len() > 0 {
		at, fn := s.queue.Pop()
		s.now = at
		fn()
	}
}

// add places n at lane ap, d (one way) from the relay.
func (s *sim) add(ap netip.AddrPort, d time.Duration, n node) {
	if _, dup := s.nodes[ap]; dup {
		panic(fmt.Sprintf("sim: two nodes at %v", ap))
	}
	s.nodes[ap] = n
	s.delay[ap] = d
}

// jitter returns d varied by ±10%.
func (s *sim) jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*s.rng.Float64()))
}

// sendToRelay sends b from lane from to the relay; a lossy datagram may be
// lost on the way.
func (s *sim) sendToRelay(from netip.AddrPort, b []byte, lossy bool) {
	if lossy && s.rng.Float64() < s.lossIn {
		return
	}
	s.after(s.jitter(s.delay[from]), func() { s.relayHear(from, b) })
}

// relayHear records b, lets the relay decide, and records and delivers
// what it sends.
func (s *sim) relayHear(from netip.AddrPort, b []byte) {
	s.record(from, s.relayLane, b)
	buf := make([]byte, len(b), len(b)+relay.GrowRoom)
	copy(buf, b)
	s.relay.Expire(s.now)
	s.out.Reset()
	s.relay.Handle(buf, from, s.now, s.out)
	for _, snd := range s.out.Sends {
		c := append([]byte(nil), snd.Buf...)
		to := snd.Addr
		s.record(s.relayLane, to, c)
		if s.rng.Float64() < s.lossOut {
			continue
		}
		d, ok := s.delay[to]
		if !ok {
			continue // a lane nobody listens on
		}
		s.after(s.jitter(d), func() {
			if n := s.nodes[to]; n != nil {
				n.hear(s, c)
			}
		})
	}
}

func (s *sim) record(src, dst netip.AddrPort, b []byte) {
	s.records = append(s.records, capture.Record{Time: s.epoch.Add(s.now), Src: src, Dst: dst, Payload: b})
}

// logUniform returns a duration between lo and hi, uniform in log scale.
func (s *sim) logUniform(lo, hi time.Duration) time.Duration {
	a, b := math.Log(float64(lo)), math.Log(float64(hi))
	return time.Duration(math.Exp(a + (b-a)*s.rng.Float64()))
}

// between returns an int in [lo, hi].
func (s *sim) between(lo, hi int) int { return lo + s.rng.IntN(hi-lo+1) }

func (s *sim) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(s.rng.Uint32())
	}
	return b
}

// nameKey returns the name bytes of the mesa packet b ("" if it does not
// parse).
func nameKey(b []byte) string {
	var p scry.Packet
	if p.Parse(b) != nil {
		return ""
	}
	return string(p.NameBytes())
}

// pingWire is a ship's keepalive to its sponsor, as the endpoint package
// sends it: a hop-0 poke of the sponsor whose payload names the ship.
func pingWire(ship, sponsor lane.Ship) []byte {
	// The ack name names the pinging ship, as the endpoint's does: pings
	// of different ships are different requests.
	name := scry.Name{Ship: sponsor, Bloq: scry.DefaultBloq, Path: []byte(simPingPath + "/" + ship.String())}
	payload := scry.Name{Ship: ship, Bloq: scry.DefaultBloq, Path: []byte(simPingPath)}
	p := scry.NewPoke(name, payload, scry.Data{AuthKind: scry.AuthNone})
	return p.Append(nil)
}

// mesaRequest is a request a requester waits for.
type mesaRequest struct {
	wire     []byte
	tries    int
	maxTries int
	until    time.Duration // no retransmission after this (0: none)
	onPage   func(p *scry.Packet)
}

// requester is a ship that sends mesa requests through the relay and
// retransmits them until answered. Fixtures' requesters always go through
// the relay (a real one would follow the page's next-hop and go direct).
type requester struct {
	ship    lane.Ship
	lane    netip.AddrPort
	pending map[string]*mesaRequest
}

func newRequester(ship lane.Ship, ap netip.AddrPort) *requester {
	return &requester{ship: ship, lane: ap, pending: map[string]*mesaRequest{}}
}

// request sends wire (a peek or poke) unless the same name is already
// pending, retransmitting every simRetry up to maxTries sends.
func (q *requester) request(s *sim, wire []byte, maxTries int, until time.Duration, onPage func(*scry.Packet)) {
	name := nameKey(wire)
	if _, ok := q.pending[name]; ok {
		return
	}
	r := &mesaRequest{wire: wire, maxTries: maxTries, until: until, onPage: onPage}
	q.pending[name] = r
	q.transmit(s, name, r)
}

func (q *requester) transmit(s *sim, name string, r *mesaRequest) {
	r.tries++
	s.sendToRelay(q.lane, r.wire, true)
	s.after(simRetry, func() {
		if q.pending[name] != r {
			return
		}
		if r.tries >= r.maxTries || (r.until > 0 && s.now > r.until) {
			delete(q.pending, name) // gives up
			return
		}
		q.transmit(s, name, r)
	})
}

func (q *requester) hear(s *sim, b []byte) {
	var p scry.Packet
	if p.Parse(b) != nil || p.Header.Type != scry.TypePage {
		return
	}
	name := string(p.NameBytes())
	r, ok := q.pending[name]
	if !ok {
		return // a duplicate
	}
	delete(q.pending, name)
	if r.onPage != nil {
		r.onPage(&p)
	}
}

// value is a published value, served in 1 KiB fragments.
type value struct {
	data []byte
	sig  []byte // 64 bytes: a single fragment's signature, or a Merkle pair
}

func (v *value) frags() int { return max(1, (len(v.data)+simFragment-1)/simFragment) }

func (v *value) frag(i int) []byte {
	return v.data[min(i*simFragment, len(v.data)):min((i+1)*simFragment, len(v.data))]
}

// page returns the page for name (fragment name.Frag of v).
func (v *value) page(name scry.Name) []byte {
	d := scry.Data{Total: uint64(len(v.data)), Frag: v.frag(int(name.Frag))}
	if v.frags() == 1 {
		d.AuthKind, d.Auth = scry.AuthSign, v.sig
	} else {
		d.AuthKind, d.Auth = scry.AuthPair, v.sig
	}
	p := scry.NewPage(name, d)
	return p.Append(nil)
}

// publisher is a ship under the relay that answers peeks for its values
// and acks pokes, after a think time; a value not yet grown holds the peek
// and is answered when it grows. It pings the relay's ship, its sponsor,
// so the relay learns its lane.
type publisher struct {
	ship    lane.Ship
	lane    netip.AddrPort
	rift    uint32
	values  map[string]*value
	paths   []string
	grownAt map[string]time.Duration // absent: grown from the start
	holding map[string]bool
	think   func(s *sim) time.Duration
	lossy   bool
}

func (p *publisher) hear(s *sim, b []byte) {
	var pk scry.Packet
	if pk.Parse(b) != nil || pk.Name.Ship != p.ship {
		return
	}
	switch pk.Header.Type {
	case scry.TypePeek:
		path := string(pk.Name.Path)
		v := p.values[path]
		if v == nil || pk.Name.Init || int(pk.Name.Frag) >= v.frags() {
			return
		}
		page := v.page(pk.Name)
		if g, ok := p.grownAt[path]; ok && s.now < g {
			name := string(pk.NameBytes())
			if !p.holding[name] {
				p.holding[name] = true
				s.at(g+p.think(s), func() { s.sendToRelay(p.lane, page, p.lossy) })
			}
			return
		}
		s.after(p.think(s), func() { s.sendToRelay(p.lane, page, p.lossy) })
	case scry.TypePoke:
		ack := scry.NewPage(pk.Name, scry.Data{AuthKind: scry.AuthHMAC, Auth: s.bytes(16)})
		wire := ack.Append(nil)
		s.after(p.think(s), func() { s.sendToRelay(p.lane, wire, p.lossy) })
	}
}

// startPings makes p ping its sponsor from at, every simPingInterval until
// end. Pings are never lost: a fixture whose publisher the relay never
// learned would test nothing.
func (p *publisher) startPings(s *sim, at, end time.Duration) {
	wire := pingWire(p.ship, p.ship.Sponsor())
	for t := at; t < end; t += simPingInterval {
		s.at(t, func() { s.sendToRelay(p.lane, wire, false) })
	}
}

// silent is a lane that sends scripted datagrams and ignores what it
// hears: an attacker, or a spoofed address.
type silent struct{}

func (silent) hear(*sim, []byte) {}

// loopbackNets declares loopback a network that next-hops may name: every
// lane here is on 127.0.0.1.
var loopbackNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
