package main

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// Legacy ames traffic in the simulation: a ship sends a message (an
// ames-class packet whose opaque content starts with an 8-byte message
// number) or a fine request (a wail) to a publisher through the relay;
// the publisher answers through the relay with an ack (content: the same
// message number and a few bytes) or a purr carrying the fragment. The
// sender retransmits every simRetry until answered.

const (
	amesMsgIDLen  = 8
	amesMaxTries  = 5
	amesAckMinLen = 24 // ack content after the message number
	amesAckMaxLen = 40
)

// amesContent returns opaque content of n bytes (n >= amesMsgIDLen+1)
// starting with id. Its last byte is never zero: vere's forwarding drops
// trailing zeros, which no packet made by Arvo has.
func amesContent(s *sim, id uint64, n int) []byte {
	b := s.bytes(n)
	binary.LittleEndian.PutUint64(b, id)
	if b[n-1] == 0 {
		b[n-1] = 1
	}
	return b
}

type amesRequest struct {
	wire  []byte
	tries int
}

// amesShip is a ship that speaks only legacy ames.
type amesShip struct {
	ship    lane.Ship
	lane    netip.AddrPort
	tick    uint8
	nextID  uint64
	pending map[string]*amesRequest // message number or fine path+fragment → request
}

func newAmesShip(ship lane.Ship, ap netip.AddrPort, tick uint8) *amesShip {
	return &amesShip{ship: ship, lane: ap, tick: tick, pending: map[string]*amesRequest{}}
}

// message sends a message of n content bytes to rcvr.
func (a *amesShip) message(s *sim, rcvr lane.Ship, rcvrTick uint8, n int) {
	a.nextID++
	id := a.nextID<<16 | uint64(s.rng.Uint32()&0xffff)
	c := amesContent(s, id, n)
	p := scry.NewAmes(a.ship, rcvr, a.tick, rcvrTick, c)
	a.start(s, string(c[:amesMsgIDLen]), p.Append(nil))
}

// wail asks rcvr for fragment frag of path.
func (a *amesShip) wail(s *sim, rcvr lane.Ship, rcvrTick uint8, path string, frag uint32) {
	w := scry.AmesWail{Frag: frag, Path: []byte(path)}
	p := scry.NewAmesFine(a.ship, rcvr, a.tick, rcvrTick, true, w.Append(nil))
	a.start(s, fineKey(path, frag), p.Append(nil))
}

func fineKey(path string, frag uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], frag)
	return path + string(b[:])
}

func (a *amesShip) start(s *sim, key string, wire []byte) {
	if _, ok := a.pending[key]; ok {
		return
	}
	r := &amesRequest{wire: wire}
	a.pending[key] = r
	a.transmit(s, key, r)
}

func (a *amesShip) transmit(s *sim, key string, r *amesRequest) {
	r.tries++
	s.sendToRelay(a.lane, r.wire, true)
	s.after(simRetry, func() {
		if a.pending[key] != r {
			return
		}
		if r.tries >= amesMaxTries {
			delete(a.pending, key)
			return
		}
		a.transmit(s, key, r)
	})
}

func (a *amesShip) hear(s *sim, b []byte) {
	var p scry.AmesPacket
	if p.Parse(b) != nil || p.Rcvr != a.ship {
		return
	}
	switch p.Class() {
	case scry.AmesClassAmes:
		if len(p.Content) >= amesMsgIDLen {
			delete(a.pending, string(p.Content[:amesMsgIDLen]))
		}
	case scry.AmesClassPurr:
		var pr scry.AmesPurr
		if pr.Parse(p.Content) == nil {
			delete(a.pending, fineKey(string(pr.Path), pr.Frag))
		}
	}
}

// amesPublisher answers messages with acks and wails with purrs, through
// the relay, after a think time; it pings its sponsor with a legacy packet.
type amesPublisher struct {
	amesShip
	values map[string]*value
	paths  []string
	think  func(s *sim) time.Duration
}

func (p *amesPublisher) hear(s *sim, b []byte) {
	var in scry.AmesPacket
	if in.Parse(b) != nil || in.Rcvr != p.ship {
		return
	}
	var out scry.AmesPacket
	switch in.Class() {
	case scry.AmesClassAmes:
		if len(in.Content) < amesMsgIDLen {
			return
		}
		id := binary.LittleEndian.Uint64(in.Content)
		out = scry.NewAmes(p.ship, in.Sndr, p.tick, in.SndrTick, amesContent(s, id, amesMsgIDLen+s.between(amesAckMinLen, amesAckMaxLen)))
	case scry.AmesClassWail:
		var w scry.AmesWail
		if w.Parse(in.Content) != nil {
			return
		}
		v := p.values[string(w.Path)]
		if v == nil || int(w.Frag) >= v.frags() {
			return
		}
		pr := scry.AmesPurr{Frag: w.Frag, Path: w.Path, Sig: v.sig, Num: uint32(v.frags()), Data: v.frag(int(w.Frag))}
		out = scry.NewAmesFine(p.ship, in.Sndr, p.tick, in.SndrTick, false, pr.Append(nil))
	default:
		return
	}
	wire := out.Append(nil)
	s.after(p.think(s), func() { s.sendToRelay(p.lane, wire, true) })
}

// startPings pings the sponsor with a small legacy message every
// simPingInterval; never lost (see publisher.startPings).
func (p *amesPublisher) startPings(s *sim, at, end time.Duration) {
	for t := at; t < end; t += simPingInterval {
		c := amesContent(s, 0, amesMsgIDLen+8)
		ping := scry.NewAmes(p.ship, p.ship.Sponsor(), p.tick, 1, c)
		wire := ping.Append(nil)
		s.at(t, func() { s.sendToRelay(p.lane, wire, false) })
	}
}
