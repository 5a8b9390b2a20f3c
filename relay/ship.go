package relay

import (
	"net/netip"
	"sync"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

// The fronted ship, as the core sees it: a lane (shipLink), reached one of
// two ways. Everything the core does differently for the two is asked of
// the shipLink here; nothing else in the package tests a mode.
//
// Through a device (Config.Front, fronting mode): the ship's own process
// (vere) sits behind a device the relay owns (package relay/front: a TUN
// device that is the only route of the ship's network namespace), so that
// it behaves exactly as if it stood on the relay's public lane:
//
//   - Every datagram for the ship is handed to it unchanged, with its true
//     source (PortShip), so that vere's own lane learning, next-hops,
//     origins and forwarding see the real network. The relay keeps no
//     pending entry for requests to the ship: vere answers the requester's
//     true lane itself, through the relay (HandleFromShip).
//   - Every datagram the ship sends, wherever it is addressed, is decided by
//     HandleFromShip and leaves through the public socket, unchanged but for
//     a private next-hop or origin (scrubbed, see scrubHint); a request the
//     ship sends is recorded in the pending table under the ship's lane, so
//     that its answer, arriving at the public socket, reaches the ship.
//   - Requests and legacy packets for the ship's sponsees whose lanes the
//     relay does not know go to the ship, which forwards them itself from
//     its own (authenticated) knowledge of its sponsees.
//   - The ship is the authority on its sponsees' lanes: its ack of a
//     sponsee's ping, on the lane the ping came from, and its forwards of a
//     sponsee's traffic vouch for a lane (vouch.go), which is pinned in the
//     route table (route.Table.Pin): nothing heard on the wire moves it.
//
// At a lane (Config.ShipLane alone): the ship's process listens on a port
// the relay sends to from its public socket; it answers the relay, which
// records requesters in the pending table and passes the pages on, and
// what it sends arrives at the public socket from its lane. The ship's
// ack of a sponsee's (mesa) ping, passed on to the one lane that ping came
// from, vouches for that lane here too (vouch.go, rule (a)); the wire's
// rules place the sponsees it has not vouched for.

// shipLink is how the core reaches the fronted ship's process. It is set
// by New; the tables it holds are safe for concurrent use.
type shipLink struct {
	lane   netip.AddrPort // the ship's lane (on the device, or its port); invalid: none
	key    lane.Key       // lane's key
	device bool           // reached through a device the relay owns (fronting mode)
	public netip.AddrPort // the relay's public lane, what private hints become
	vouch  *vouchTable    // with a ship: its word on its sponsees' lanes (nil without one: 200 KiB)
	stuns  stunTable      // through a device: the ship's STUN transactions
}

// init sets l up for the ship's lane, the way it is reached and the
// relay's public lane.
func (l *shipLink) init(ship netip.AddrPort, device bool, public netip.AddrPort) {
	l.lane, l.device, l.public = lane.Canon(ship), device, lane.Canon(public)
	if device || l.lane.IsValid() {
		l.vouch = newVouchTable()
	}
	if l.lane.IsValid() {
		l.key = lane.KeyOf(l.lane)
	}
}

// present reports whether there is a ship process to hand datagrams to.
func (l *shipLink) present() bool { return l.lane.IsValid() }

// sent reports whether a datagram heard on the public socket from lane
// from was sent by the ship's process.
func (l *shipLink) sent(from netip.AddrPort) bool { return l.lane.IsValid() && from == l.lane }

// answersItself reports whether the ship answers a requester's true lane
// itself (through a device), so that the relay records no pending entry
// for a request handed to it.
func (l *shipLink) answersItself() bool { return l.device }

// forwardsForSponsees reports whether requests for the ship's sponsees at
// lanes the relay does not know are handed to the ship, which knows them
// (through a device; at a lane the ship would see them from the relay).
func (l *shipLink) forwardsForSponsees() bool { return l.device }

// takesPagesAsTheyCame reports whether requester q is the ship taking its
// pages unchanged, from where they came (through a device).
func (l *shipLink) takesPagesAsTheyCame(q lane.Key) bool { return l.device && q == l.key }

// mustNotLearnBypasses reports whether requester q is the ship at a lane,
// which gets pages with no next-hop: it must not learn lanes that bypass
// the relay it sits behind.
func (l *shipLink) mustNotLearnBypasses(q *lane.Key) bool {
	return !l.device && l.lane.IsValid() && *q == l.key
}

// takesSTUN reports whether the ship's own STUN requests go out through
// the relay (through a device), so that their responses are looked for.
func (l *shipLink) takesSTUN() bool { return l.device }

// takeSTUN reports whether a STUN response with id tx answers the ship's
// own request (through a device), and takes it.
func (l *shipLink) takeSTUN(tx [12]byte, now time.Duration) bool {
	return l.device && l.stuns.take(tx, now)
}

// stunTable holds the transaction ids of the STUN requests the ship sent
// (a fronted star or planet STUNs its galaxy), so that only their responses
// are handed to it.
type stunTable struct {
	mu    sync.Mutex
	slots [ShipSTUNSlots]stunSlot // guarded by mu
	next  int                     // guarded by mu
}

type stunSlot struct {
	tx [12]byte
	at time.Duration
}

func (t *stunTable) put(tx [12]byte, now time.Duration) {
	t.mu.Lock()
	lockTaken()
	t.slots[t.next] = stunSlot{tx: tx, at: now}
	t.next = (t.next + 1) % len(t.slots)
	t.mu.Unlock()
}

// take reports whether tx is a transaction the ship started within
// ShipSTUNWindow, and forgets it.
func (t *stunTable) take(tx [12]byte, now time.Duration) bool {
	t.mu.Lock()
	lockTaken()
	defer t.mu.Unlock()
	for i := range t.slots {
		if s := &t.slots[i]; s.at != 0 && s.tx == tx && now-s.at <= ShipSTUNWindow {
			*s = stunSlot{}
			return true
		}
	}
	return false
}

// shipSafe reports whether b may be handed to the ship's process: vere's
// legacy ames driver reads far past a datagram of 4-9 bytes whose relayed
// bit is set (bit 31 = 0; shared/reference/ames, "Crash on 4-9 byte
// datagrams") and dies. Everything the relay hands the ship has already
// been parsed; this is the last guard, at the one place such sends are made.
func shipSafe(b []byte) bool {
	return len(b) >= scry.AmesHeaderLen+scry.AmesOriginLen || len(b) < scry.AmesHeaderLen || b[3]&0x80 != 0
}

// toShip hands b, heard from lane from, to the fronted ship's process, and
// reports whether it did.
func (r *Relay) toShip(b []byte, k Kind, from netip.AddrPort, out *Reader) bool {
	if !shipSafe(b) {
		out.drop(DropShipUnsafe)
		return false
	}
	out.c.add(EventToShip, 1)
	out.act(ActionToShip)
	out.c.countOut(k, 1, len(b))
	if r.link.device {
		out.addShip(b, from)
		return true
	}
	out.add(b, r.link.lane)
	return true
}

// handToShip hands b to the ship (toShip) and then, only if it was handed
// over and b names sender as having sent it itself (named: a hop-0 poke,
// an unrelayed legacy packet), records sender as contacting us from
// fromKey, unless the fronted ship speaks for it (mayLearn). A named packet
// addressed to the ship itself (ping), in front mode, is recorded as a
// ping whose ack on that lane vouches for the sender (vouchTable.pinged),
// name being the key of its name (legacyPing for a legacy packet); a peek
// for a name pinged from its lane cancels that ping (vouchTable.peeked).
func (r *Relay) handToShip(b []byte, k Kind, from netip.AddrPort, fromKey lane.Key, sender lane.Ship, named, ping bool, name uint64, now time.Duration, out *Reader) {
	if !r.toShip(b, k, from, out) {
		return
	}
	if ping && k == KindPeek {
		r.link.vouch.peeked(fromKey, name)
	}
	if !named {
		return
	}
	if r.mayLearn(sender, fromKey) {
		lockTaken()
		r.routes.Contacted(sender, fromKey, now)
	}
	if ping && (r.link.device || k == KindPoke) {
		// At a lane, only a mesa ping: the ship's legacy ack goes where
		// the relay routes it, not to the lane the ping came from.
		r.link.vouch.pinged(fromKey, sender, name, now)
	}
}

// mayLearn reports whether s's lane may be learned from a datagram heard
// from lane from that names s as its sender: not when the ship is reached
// through a device and speaks for s (its word alone places s: vouch.go),
// and never at a lane configured as another's (trustedLane: a galaxy's,
// a pinned ship's, a relay's, the ship's own). A configured lane is its
// ship's, and a relay's lane is many ships' way but none's place: a packet
// from it naming another sender is forged or forwarded, and a relay that
// took it for the sender's lane would forward that sender's traffic to the
// other relay, which may send it back (a learned loop).
func (r *Relay) mayLearn(s lane.Ship, from lane.Key) bool {
	return (!r.link.device || !r.speaksFor(s)) && !r.trustedLane(from)
}

// HandleFromShip decides datagram b, which the fronted ship's process sent
// to lane to (fronting mode only: it came through the ship's device, not the
// public socket), and appends what to send to out, as Handle does. The ship
// speaks for itself: what it sends goes to to, unchanged but for a private
// next-hop or origin, which is scrubbed. It is dropped only when to is not a
// lane the ship may send to (shipMayReach: this process, port 0, or a
// network not declared routable that is no sponsee's lane: vere learned a
// lane it should not have).
//
// It returns what it decided, as Handle does; the decision's Kind is the
// datagram's as parsed (the ship's datagrams are not counted in In).
func (r *Relay) HandleFromShip(b []byte, to netip.AddrPort, now time.Duration, out *Reader) *Decision {
	r.bind(out)
	out.takePrefetched(b)
	to = lane.Canon(to)
	out.begin(true, to, len(b))
	out.d.Kind = shipKind(b)
	r.fromShip(b, to, now, out)
	return out.finish()
}

// shipKind returns the kind of the ship's datagram b, as Handle would
// count it.
func shipKind(b []byte) Kind {
	switch {
	case scry.IsMesa(b):
		if h, ok := scry.HeaderOf(b); ok {
			switch h.Type {
			case scry.TypePeek:
				return KindPeek
			case scry.TypePoke:
				return KindPoke
			case scry.TypePage:
				return KindPage
			}
		}
		return KindOther
	case scry.IsSTUN(b):
		return KindSTUN
	case len(b) >= scry.AmesHeaderLen:
		return KindAmes
	}
	return KindOther
}

// fromShip is HandleFromShip's decision, for a bound out with its decision
// begun.
func (r *Relay) fromShip(b []byte, to netip.AddrPort, now time.Duration, out *Reader) {
	out.c.add(EventFromShip, 1)
	toKey := lane.KeyOf(to)
	if !r.link.device || r.routes.IsSelf(&toKey) || !r.shipMayReach(b, to, toKey, now) {
		out.shipDrop(ShipDropTarget)
		return
	}
	switch {
	case scry.IsMesa(b):
		// The ship's bytes are vere's: read only what the decision needs
		// (the header and the name), and parse in full only a page that
		// carries a next-hop, which may need scrubbing.
		typ, nameWire, ok := scry.NameWire(b)
		h, _ := scry.HeaderOf(b)
		if !ok {
			break // vere's peers judge what vere's parser wrote
		}
		switch typ {
		case scry.TypePeek, scry.TypePoke:
			// Its answer comes back to the public socket, for the ship.
			r.remember(out, r.nameKey(nameWire, out), &r.link.key, now)
			if rcvr, ok := scry.NameShip(nameWire); ok && rcvr != r.ship && h.Hops > 0 {
				// The ship forwards a request: it knows the receiver there.
				r.vouchForward(&out.c, rcvr, toKey)
			}
		case scry.TypePage:
			// An ack of a ping from toKey: a page for the ping's name.
			r.vouchAck(&out.c, toKey, r.nameKey(nameWire, out), lane.Ship{}, now)
			if h.NextHop == scry.NextHopNone {
				break
			}
			var p scry.Packet
			if p.Parse(b) != nil {
				break
			}
			if ap, has := p.NextHopAddr(); has && !r.hintOK(ap) {
				b = r.scrubNextHop(&out.c, b, &p)
			}
		}
	default:
		var req scry.STUNRequest
		if req.Parse(b) == nil {
			// The ship STUNs its galaxy: let the answer through to it.
			r.link.stuns.put(req.TxID, now)
			break
		}
		var a scry.AmesPacket
		if a.Parse(b) != nil {
			break
		}
		if a.Relayed {
			if !r.hintOK(a.Origin) && !r.scrubOrigin(&out.c, b) {
				out.shipDrop(ShipDropPrivateHint)
				return
			}
			if a.Rcvr != r.ship {
				r.vouchForward(&out.c, a.Rcvr, toKey)
			}
		} else {
			r.vouchAck(&out.c, toKey, legacyPing, a.Rcvr, now)
		}
	}
	out.c.add(EventFromShipSent, 1)
	out.act(ActionForwarded)
	out.c.shipBytes(len(b))
	out.add(b, to)
}

// shipMayReach reports whether the ship may send b to lane to: a lane the
// relay may send to (hintOK), or, whatever its network, one the relay
// itself forwards to for a sponsee of the ship (sponseeLane). That is the
// one rule for a lane on the operator's LAN: a sponsee's ping came from
// there within PingAnswerWindow (vouchTable.pinger), so the ship may answer
// it there; or the relay routes the receiver b names (a request or legacy
// packet the ship forwards) there, as it does a sponsee's vouched lane, so
// the ship may forward to it there. What leaves is scrubbed as
// anything else: such a lane never becomes a next-hop or an origin.
func (r *Relay) shipMayReach(b []byte, to netip.AddrPort, toKey lane.Key, now time.Duration) bool {
	if r.hintOK(to) {
		return true
	}
	if to.Port() == 0 || !to.Addr().Is4() {
		return false
	}
	if s, ok := r.link.vouch.pinger(toKey, now); ok && r.speaksFor(s) {
		return true // its answer to a sponsee's ping, there
	}
	s, ok := receiverOf(b)
	return ok && r.sponseeLane(s, toKey, now)
}

// sponseeLane reports whether s is a sponsee of the ship (the ship is in
// its sponsorship chain) and k is a lane the relay would send a request
// for s to now (route.Table.Plan, changing nothing).
func (r *Relay) sponseeLane(s lane.Ship, k lane.Key, now time.Duration) bool {
	if !r.speaksFor(s) {
		return false
	}
	lockTaken()
	p := r.routes.Plan(route.Query{Rcvr: s}, now)
	for _, l := range p.Lanes[:p.N] {
		if l == k {
			return true
		}
	}
	return false
}

// receiverOf returns the ship a request or legacy packet b is for.
func receiverOf(b []byte) (lane.Ship, bool) {
	if scry.IsMesa(b) {
		typ, nameWire, ok := scry.NameWire(b)
		if !ok || typ == scry.TypePage {
			return lane.Ship{}, false
		}
		return scry.NameShip(nameWire)
	}
	var a scry.AmesPacket
	if a.Parse(b) != nil {
		return lane.Ship{}, false
	}
	return a.Rcvr, true
}

// scrubNextHop replaces a page's next-hop that names a lane the relay will
// not point anyone at with the relay's public lane, or removes it when no
// public lane is known.
func (r *Relay) scrubNextHop(c *tally, b []byte, p *scry.Packet) []byte {
	c.add(EventHintsScrubbed, 1)
	hop, ok := lane.EncodeShort(r.link.public)
	nb, err := scry.EditPageNextHop(b, p, hop, ok && r.link.public.IsValid())
	if err != nil {
		return b
	}
	return nb
}

// scrubOrigin rewrites, in place, the origin of relayed legacy packet b to
// the relay's public lane (the origin's 6 bytes are not mugged). It reports
// false, changing nothing, when no public lane is known: the packet must
// then not be sent.
func (r *Relay) scrubOrigin(c *tally, b []byte) bool {
	o, ok := lane.EncodeShort(r.link.public)
	if !ok || !r.link.public.IsValid() || len(b) < scry.AmesHeaderLen+scry.AmesOriginLen {
		return false
	}
	c.add(EventHintsScrubbed, 1)
	copy(b[scry.AmesHeaderLen:], o[:])
	return true
}

// hintOK reports whether lane ap may be sent to or named to others as a
// next-hop or origin (route.Table.TargetAllowed, with Config.HintNets).
func (r *Relay) hintOK(ap netip.AddrPort) bool { return r.routes.TargetAllowed(ap) }
