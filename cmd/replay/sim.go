package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/internal/eventq"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

// simFragment is the fragment size of the simulated publishers' values:
// 1 KiB, a fragment at bloq 13.
const simFragment = 1024

// node is a simulated lane: a ship, or an attacker.
type node interface {
	hear(s *sim, b []byte)
}

// sim is a discrete-event network of ships around one relay, in virtual
// time. The relay is the real decision core and every ship a real
// endpoint.Core; what the relay receives and sends is recorded, as relay
// run --capture would record it.
type sim struct {
	rng       *rand.Rand
	now       time.Duration
	queue     eventq.Queue[func()] // events of the same time run in the order scheduled, so a run is deterministic
	relay     *relay.Relay
	out       *relay.Reader
	relayLane netip.AddrPort
	relayShip lane.Ship
	epoch     time.Time
	nodes     map[netip.AddrPort]node
	delay     map[netip.AddrPort]time.Duration // one-way delay between a lane and the relay
	// lossIn is the chance a lossy datagram to the relay is lost (and so
	// not recorded); lossOut, that one the relay sends is lost after it
	// was recorded.
	lossIn, lossOut float64
	// pingEnd is when the publishers stop pinging (their pings due later
	// are not sent); horizon is when the simulation stops: ships' timers
	// due later do not run.
	pingEnd, horizon time.Duration
	// offRelay counts datagrams a ship addressed to a lane other than the
	// relay's, which the simulation drops: fixtures' ships talk only to
	// the relay.
	offRelay int
	records  []capture.Record
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
		relay: r, out: relay.NewReader(1), relayLane: relayLane, relayShip: relayShip,
		epoch: epoch, nodes: map[netip.AddrPort]node{}, delay: map[netip.AddrPort]time.Duration{},
		pingEnd: never, horizon: never,
	}, nil
}

// never is a time that does not come.
const never = time.Duration(math.MaxInt64)

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

// ship is a simulated ship: an endpoint.Core at a lane, whose only route
// is the relay (its Lanes name the relay for the relay's ship, every
// publisher's sponsor, and it takes no next-hop hints), so fixtures'
// requesters always go through the relay. The simulation runs the Core's
// timers in virtual time.
type ship struct {
	core   *endpoint.Core
	lane   netip.AddrPort
	wake   time.Duration // the Tick queued; never if none
	out    []endpoint.Datagram
	nextID uint64 // legacy messages sent
}

// noHints is the route rubric as specified but for next-hops, which it
// never takes (route.Rubric).
type noHints struct{ route.Design }

func (noHints) TakesHints() bool { return false }

// newShip makes the ship cfg at lane ap, d (one way) from the relay. It
// does not ping until start.
func (s *sim) newShip(cfg endpoint.Config, ap netip.AddrPort, d time.Duration) (*ship, error) {
	seed := s.rng.Uint64() | 1
	cfg.Seed = seed
	// Every ship reaches every other through the relay: hints would
	// tighten its routes past the relay the fixture is recorded at.
	cfg.Routes = route.Config{Seed: seed, SourceSlots: 1, Rubric: noHints{}}
	cfg.Lanes = map[lane.Ship]netip.AddrPort{s.relayShip: s.relayLane}
	c, err := endpoint.NewCore(cfg, ap)
	if err != nil {
		return nil, err
	}
	sh := &ship{core: c, lane: ap, wake: never}
	s.add(ap, d, sh)
	return sh, nil
}

func (sh *ship) hear(s *sim, b []byte) {
	sh.out = sh.core.Handle(b, s.relayLane, s.now, sh.out[:0])
	s.emit(sh)
}

// start runs sh's timers from at: a publisher's first ping goes then.
func (s *sim) start(sh *ship, at time.Duration) {
	s.at(at, func() { s.tick(sh) })
}

// do runs a call into sh's Core (a request, a growth) and sends what it
// decided. A call's error is ErrTooManyRequests, which a simulated ship
// never reaches.
func (s *sim) do(sh *ship, call func(now time.Duration, out []endpoint.Datagram) ([]endpoint.Datagram, error)) {
	sh.out, _ = call(s.now, sh.out[:0])
	s.emit(sh)
}

func (s *sim) tick(sh *ship) {
	sh.out = sh.core.Tick(s.now, sh.out[:0])
	s.emit(sh)
}

// emit sends what sh's Core decided and queues its next Tick. Pings are
// never lost (a fixture whose publisher the relay never learned would
// test nothing) and stop at pingEnd; the rest may be.
func (s *sim) emit(sh *ship) {
	for _, d := range sh.out {
		if d.To != s.relayLane {
			s.offRelay++
			continue
		}
		ping := s.isPing(d.Buf)
		if ping && s.now >= s.pingEnd {
			continue
		}
		s.sendToRelay(sh.lane, append([]byte(nil), d.Buf...), !ping)
	}
	clear(sh.out)
	d := sh.core.NextDeadline()
	if d >= sh.wake || d > s.horizon {
		return
	}
	sh.wake = d
	s.at(d, func() {
		if sh.wake != d {
			return // superseded by an earlier wake
		}
		sh.wake = never
		s.tick(sh)
	})
}

// isPing reports whether b is addressed to the relay's ship, which is
// what a publisher's ping to its sponsor is (mesa or legacy).
func (s *sim) isPing(b []byte) bool {
	var p scry.Packet
	if p.Parse(b) == nil {
		return p.Header.Type == scry.TypePoke && p.Name.Ship == s.relayShip
	}
	var a scry.AmesPacket
	return a.Parse(b) == nil && a.Rcvr == s.relayShip
}

// silent is a lane that sends scripted datagrams and ignores what it
// hears: an attacker, or a spoofed address.
type silent struct{}

func (silent) hear(*sim, []byte) {}

// loopbackNets declares loopback a network that next-hops may name: every
// lane here is on 127.0.0.1.
var loopbackNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
