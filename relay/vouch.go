package relay

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
)

// The fronted ship is the authority for the ships it speaks for (its
// sponsees: it is in their sponsorship chain). vere learns a sponsee's lane
// only from what arvo authenticated, and never expires it; the relay, which
// cannot decrypt, takes the ship's word for it, and only two things the
// ship sends are its word:
//
//  (a) the ship's ack of the sponsee's ping: a page whose name is the
//      ping's (a poke's ack is a page for the poke's own name), sent to the
//      lane the ping came from within PingAnswerWindow (for a legacy ping,
//      a packet whose receiver is the pinger, to its lane). arvo acks only a
//      ping it could decrypt, so a forged ping is never acked;
//  (b) the ship forwarding the sponsee's traffic: a request addressed to
//      the sponsee with hops above zero, or a relayed legacy packet whose
//      receiver it is, sent to a lane; unless that lane is one a ping
//      naming the sponsee came from that the ship did not ack. vere's
//      driver takes a hop-0 poke's lane as the sender's before arvo has
//      read it (urbit/vere pkg/vere/io/mesa.c, _mesa_hear_poke:
//      _hear_peer, "XX ... should be deferred to after successful event
//      processing"), so a forged ping can point vere's own forwarding at
//      the forger; the relay does not take that for the ship's word.
//
// Nothing else vouches: not a page for the ship's own name to a lane that
// pinged (anyone may peek for one; a peek for the very name a lane pinged
// cancels that ping), nor the ship's own hop-0 requests (vere sends those
// to the sponsee's galaxy too when it has no direct lane).
//
// A vouched lane is pinned in the route table (route.Table.Pin): the
// sponsee is routed there alone, and nothing heard on the wire changes it,
// until the ship vouches for another lane. Pins do not expire (vere does not
// expire its sponsees' lanes either, and a sponsee whose STUN works need not
// ping for hours); the table holds VouchMaxShips, the least recently
// vouched unpinned first.
//
// When one ack of the ship's goes to two lanes (vere's pending-interest
// table sends a push to every lane that asked for the name, a forger's that
// pinged with the same name included), it is not telling which is the
// sponsee's: the pin goes back to where it was before (EventVouchContested).
//
// Nor is an ack of a name the ship acked for the sponsee before, sent to
// a lane it is not pinned at: mesa names every message (its ack is
// /a/x/1//flow/<bone>/ack/<dire>/~SNDR/<seq>, sealed; docs/arvo-lanes.md
// A1), so a new ping has a name never acked, while arvo acks a message it
// acked before again, from any lane (ames.hoon +sink:fo-call, "send dupe
// ack", up to 10 messages behind; A2), and vere sends that ack to the lane
// its pit took from the copy (urbit/vere mesa.c _mesa_hear_poke). Such an
// ack is a replay's, or the sponsee's re-send of a message whose ack it
// lost: it moves nothing (EventVouchContested), and the sponsee's next
// ping, a new name, does. Each vouch keeps its last VouchAckNames names.

// At a lane (ship-lane mode) the ship answers the relay, which passes its
// pages on to the requesters of the pending entry: rule (a) holds for an
// ack passed on to exactly one lane (an ack for a ping name that two lanes
// sent, aggregated on one entry, vouches for neither), and only for mesa
// pings (the ship's legacy ack goes where the relay routes it). Rule (b)
// does not apply: the ship's forwards come to the relay, which routes them.

// vouchTable holds the evidence of the fronted ship's word (with a ship
// behind): the pings handed to it and each sponsee's last acks. Where a
// sponsee is placed is the route table's (route.Table.Pin, RevertPin): one
// owner. Its methods decide under mu and return what to pin; the caller
// applies it to the route table after (no lock is held while another is
// taken), so two readers vouching at once apply two route operations in
// some order, and no two copies of a pin can disagree.
type vouchTable struct {
	mu      sync.Mutex
	pings   [PingTableSlots]pingSlot          // guarded by mu; by hash of the lane a ping came from
	vouches *simplelru.LRU[lane.Ship, *vouch] // guarded by mu; at most VouchMaxShips
}

// pingSlot is the last ping handed to the ship from lane from.
type pingSlot struct {
	from  lane.Key
	ship  lane.Ship     // the ship the ping named as its sender
	name  uint64        // key of the ping's name (its ack's name); legacyPing for a legacy packet
	at    time.Duration // when it was handed to the ship
	acked bool          // the ship acked it (or, for a legacy ping, answered it)
}

// legacyPing is the name key of a legacy packet's ping slot: a legacy ack
// is matched by its receiver, not by a name.
const legacyPing = 0

// vouch is the evidence for one sponsee: the last ack that vouched for it
// and the names of the last acks.
type vouch struct {
	acks    bool     // ackLane, ackName and ackAt are set
	ackLane lane.Key // where the last ack went (invalid: its burst was contested)
	ackName uint64   // its name key
	ackAt   time.Duration
	names   [VouchAckNames]uint64 // the name keys of the last acks that vouched (a ring; 0: none)
	nameAt  int                   // the ring's next slot
}

// ackedBefore reports whether name is one of v's last acked names.
func (v *vouch) ackedBefore(name uint64) bool {
	for _, n := range v.names {
		if n == name && n != legacyPing {
			return true
		}
	}
	return false
}

// keepName adds name to v's last acked names.
func (v *vouch) keepName(name uint64) {
	if name == legacyPing || v.ackedBefore(name) {
		return
	}
	v.names[v.nameAt] = name
	v.nameAt = (v.nameAt + 1) % VouchAckNames
}

// pinChange is what a vouch decided for the route table: pin ship to lane
// (or, with an invalid lane, unpin it), or revert its pin to the lane its
// last pin replaced, and unpin evicted when evict.
type pinChange struct {
	ship    lane.Ship
	lane    lane.Key
	set     bool // there is a change for ship
	revert  bool // the change is RevertPin
	evicted lane.Ship
	evict   bool
}

func newVouchTable() *vouchTable {
	t := &vouchTable{}
	t.vouches, _ = simplelru.NewLRU[lane.Ship, *vouch](VouchMaxShips, nil)
	return t
}

func pingSlotOf(k lane.Key) int { return int(k.Hash() % PingTableSlots) }

// pinged records that a hop-0 poke (or unrelayed legacy packet) naming s as
// its sender, with name key name (legacyPing), was handed to the ship from
// lane from.
func (t *vouchTable) pinged(from lane.Key, s lane.Ship, name uint64, now time.Duration) {
	t.mu.Lock()
	t.pings[pingSlotOf(from)] = pingSlot{from: from, ship: s, name: name, at: now}
	t.mu.Unlock()
}

// peeked records that a peek for name key name was handed to the ship from
// lane from: a ping from that lane with that name is no longer one whose
// ack is the ship's word (the page answers the peek as much as the ping).
func (t *vouchTable) peeked(from lane.Key, name uint64) {
	t.mu.Lock()
	if p := &t.pings[pingSlotOf(from)]; p.from == from && p.name == name && !p.acked {
		*p = pingSlot{}
	}
	t.mu.Unlock()
}

// pinger returns the ship whose ping from lane to was handed to the ship
// within PingAnswerWindow of now.
func (t *vouchTable) pinger(to lane.Key, now time.Duration) (lane.Ship, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := &t.pings[pingSlotOf(to)]
	return p.ship, p.from == to && p.from.IsValid() && now-p.at <= PingAnswerWindow
}

// ackOf returns the sender of the ping from lane to whose ack a page with
// name key name sent there now would be (legacyPing: a legacy packet for
// receiver rcvr), if any.
func (t *vouchTable) ackOf(to lane.Key, name uint64, rcvr lane.Ship, now time.Duration) (lane.Ship, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ackOfLocked(to, name, rcvr, now)
}

func (t *vouchTable) ackOfLocked(to lane.Key, name uint64, rcvr lane.Ship, now time.Duration) (lane.Ship, bool) {
	p := &t.pings[pingSlotOf(to)]
	if !to.IsValid() || p.from != to || p.name != name || now-p.at > PingAnswerWindow || (name == legacyPing && p.ship != rcvr) {
		return lane.Ship{}, false
	}
	return p.ship, true
}

// acked records the ship's ack of s's ping (ackOf) sent to lane to at now:
// s is vouched for at to, unless this ack and the last one are one push to
// two lanes (contested: the pin goes back to the lane it had before that
// burst, and stays there for the rest of it). They are when the last ack
// was of the same name, to another lane, within PingAnswerWindow, and
// this ack's ping reached the ship before the last ack left it (both
// pings were waiting for one answer); a ping handed over after an ack is a
// new one, answered by an ack of its own. pinned is s's pinned lane as the
// route table had it before the call (invalid: none). It returns the pin
// to apply.
func (t *vouchTable) acked(s lane.Ship, to lane.Key, name uint64, rcvr lane.Ship, pinned lane.Key, now time.Duration) (ok, contested bool, ch pinChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if got, ok := t.ackOfLocked(to, name, rcvr, now); !ok || got != s {
		return false, false, ch
	}
	v, has := t.vouches.Get(s)
	if has && v.acks && v.ackName == name && now-v.ackAt <= PingAnswerWindow && v.ackLane != to &&
		t.pings[pingSlotOf(to)].at < v.ackAt {
		// One ack, two lanes: the ship does not say which is s's. An
		// invalid ackLane marks the burst as contested already.
		if v.ackLane.IsValid() {
			t.pings[pingSlotOf(v.ackLane)].acked = false
		}
		v.ackLane = lane.Key{}
		ch = pinChange{ship: s, set: true, revert: true}
		return true, true, ch
	}
	if has && to != pinned && v.ackedBefore(name) {
		// A dupe ack (a replayed or re-sent message): not a new ping's.
		return true, true, ch
	}
	if !has {
		v, ch = t.addLocked(s)
	}
	t.pings[pingSlotOf(to)].acked = true
	v.acks, v.ackLane, v.ackName, v.ackAt = true, to, name, now
	v.keepName(name)
	ch.move(s, to)
	return true, false, ch
}

// addLocked adds an empty vouch for s, and returns it with the pin
// change evicting the oldest when the table is full.
func (t *vouchTable) addLocked(s lane.Ship) (*vouch, pinChange) {
	var ch pinChange
	if t.vouches.Len() >= VouchMaxShips {
		ch.evicted, _, ch.evict = t.vouches.GetOldest()
	}
	v := &vouch{}
	t.vouches.Add(s, v)
	return v, ch
}

// move pins s at lane to, recording the change in ch (the route table
// keeps the lane it replaces; pinning s where it is changes nothing).
func (ch *pinChange) move(s lane.Ship, to lane.Key) {
	ch.ship, ch.lane, ch.set = s, to, true
}

// forwarded decides the ship's forward of s's traffic to lane to: it pins s
// there unless a ping naming s came from to and was not acked (vere may have
// learned to from that ping alone). It reports whether s was vouched for.
func (t *vouchTable) forwarded(s lane.Ship, to lane.Key) (ok bool, ch pinChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := &t.pings[pingSlotOf(to)]; p.from == to && p.ship == s && !p.acked {
		return false, ch
	}
	if _, has := t.vouches.Get(s); !has {
		_, ch = t.addLocked(s)
	}
	ch.move(s, to)
	return true, ch
}

// apply makes the route table's pins what ch says.
func (ch pinChange) apply(routes *route.Table) {
	if ch.evict {
		routes.Unpin(ch.evicted)
	}
	switch {
	case !ch.set:
	case ch.revert:
		routes.RevertPin(ch.ship)
	case ch.lane.IsValid():
		routes.Pin(ch.ship, ch.lane)
	default:
		routes.Unpin(ch.ship)
	}
}

// speaksFor reports whether the fronted ship speaks for s: s is not the
// ship, and the ship is in s's sponsorship chain.
func (r *Relay) speaksFor(s lane.Ship) bool {
	if s == r.ship {
		return false
	}
	var buf [8]lane.Ship
	for _, sp := range r.sponsors.AppendChain(buf[:0], s) {
		if sp == r.ship && sp != s {
			return true
		}
	}
	return false
}

// vouchAck decides the ship's page (name key name) or legacy packet for
// receiver rcvr (name legacyPing) sent to lane to: an ack of the ping from
// to vouches for its sender there (rule (a) above).
func (r *Relay) vouchAck(c *tally, to lane.Key, name uint64, rcvr lane.Ship, now time.Duration) {
	s, ok := r.link.vouch.ackOf(to, name, rcvr, now)
	if !ok || !r.speaksFor(s) {
		return
	}
	pinned, _ := r.routes.PinnedLane(s)
	ok, contested, ch := r.link.vouch.acked(s, to, name, rcvr, pinned, now)
	if !ok {
		return
	}
	ch.apply(r.routes)
	if contested {
		c.add(EventVouchContested, 1)
		return
	}
	c.add(EventVouched, 1)
}

// vouchContested counts the ship's page (name key name) passed on, at a
// lane (ship-lane mode), to several requesters reqs when it acks a ping
// one of them sent: one ack to many lanes vouches for none of them, as in
// front mode (a ping name copied from another lane is aggregated on the
// pending entry, and the ship cannot say which lane's ping it read).
func (r *Relay) vouchContested(c *tally, reqs []lane.Key, name uint64, now time.Duration) {
	for _, q := range reqs {
		if s, ok := r.link.vouch.ackOf(q, name, lane.Ship{}, now); ok && r.speaksFor(s) {
			c.add(EventVouchContested, 1)
			return
		}
	}
}

// vouchForward decides the ship's forward of s's traffic to lane to (rule
// (b) above).
func (r *Relay) vouchForward(c *tally, s lane.Ship, to lane.Key) {
	if !r.speaksFor(s) {
		return
	}
	ok, ch := r.link.vouch.forwarded(s, to)
	if !ok {
		c.add(EventVouchRefused, 1)
		return
	}
	ch.apply(r.routes)
	c.add(EventVouched, 1)
}
