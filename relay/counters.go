package relay

import "sync/atomic"

// Drop is why the relay dropped a datagram. Every datagram the relay reads is
// forwarded, answered, aggregated or dropped with exactly one Drop reason.
// (Before the relay answered STUN, a binding request was dropped as "stun";
// that reason is gone: a request is now answered, or dropped as
// stun_malformed, stun_throttled or from_self.)
type Drop uint8

// Drop reasons. Their String values are stable metric labels.
const (
	DropMalformedMesa    Drop = iota // mesa cookie present, but vere's parser would reject it
	DropMalformedAmes                // no mesa cookie, and not a well-formed legacy ames packet
	DropTooLarge                     // mesa packet over 1472 bytes (vere's receive gate)
	DropSTUNMalformed                // a STUN binding request (scry.IsSTUN) whose frame is malformed (scry.STUNRequest.Parse)
	DropReservedType                 // mesa type 0, which carries no request or response
	DropHopLimit                     // request arrived with MaxHops hops: a forwarding loop
	DropLoop                         // the only route leads back to the lane it came from
	DropNoRoute                      // no lane known for the receiver nor any of its sponsors
	DropSponseeUnknown               // receiver is under the fronted ship, and its lane is not known
	DropOwnShipNoLane                // addressed to the fronted ship, and no --ship-lane is set
	DropUnsolicited                  // a page that no pending request asked for
	DropRequestersFull               // a new requester on an entry already at its requester cap
	DropPendingFull                  // pending table full and its policy refuses new entries
	DropSelf                         // a packet from one of this process's own lanes (for STUN, also one from a lane no answer can go to)
	DropPendingPerSource             // the source IP already holds its share of the pending table
	DropShipUnsafe                   // would crash vere's drivers if handed to the ship (4-9 bytes, relayed bit set)
	DropSTUNThrottled                // a STUN request whose answer is over its source's amplification budget
	numDrops
)

var dropNames = [numDrops]string{
	DropMalformedMesa:    "malformed_mesa",
	DropMalformedAmes:    "malformed_ames",
	DropTooLarge:         "too_large",
	DropSTUNMalformed:    "stun_malformed",
	DropReservedType:     "reserved_type",
	DropHopLimit:         "hop_limit",
	DropLoop:             "loop",
	DropNoRoute:          "no_route",
	DropSponseeUnknown:   "sponsee_unknown",
	DropOwnShipNoLane:    "own_ship_no_lane",
	DropUnsolicited:      "unsolicited_page",
	DropRequestersFull:   "requesters_full",
	DropPendingFull:      "pending_full",
	DropSelf:             "from_self",
	DropPendingPerSource: "pending_per_source",
	DropSTUNThrottled:    "stun_throttled",
	DropShipUnsafe:       "ship_unsafe",
}

// ShipDrop is why the relay dropped a datagram the fronted ship sent
// (fronting mode, Relay.HandleFromShip).
type ShipDrop uint8

// Ship-side drop reasons. Their String values are stable metric labels.
const (
	ShipDropTarget      ShipDrop = iota // addressed to this relay, port 0, or a network not declared routable
	ShipDropPrivateHint                 // a private origin, and no public lane to rewrite it to
	numShipDrops
)

var shipDropNames = [numShipDrops]string{
	ShipDropTarget:      "bad_target",
	ShipDropPrivateHint: "private_hint",
}

// String returns the reason's metric label.
func (d ShipDrop) String() string {
	if d < numShipDrops {
		return shipDropNames[d]
	}
	return "unknown"
}

// ShipDrops lists every ship-side drop reason.
func ShipDrops() []ShipDrop {
	out := make([]ShipDrop, numShipDrops)
	for i := range out {
		out[i] = ShipDrop(i)
	}
	return out
}

// String returns the reason's metric label.
func (d Drop) String() string {
	if d < numDrops {
		return dropNames[d]
	}
	return "unknown"
}

// Drops lists every drop reason, for metrics registration and docs.
func Drops() []Drop {
	out := make([]Drop, numDrops)
	for i := range out {
		out[i] = Drop(i)
	}
	return out
}

// Kind is the class of a datagram the relay read.
type Kind uint8

// Datagram kinds, as metric labels by String.
const (
	KindPeek Kind = iota
	KindPoke
	KindPage
	KindAmes  // legacy ames (and fine) packet
	KindSTUN  // well-formed STUN binding request in, binding response out
	KindOther // rejected before its kind was known
	numKinds
)

var kindNames = [numKinds]string{"peek", "poke", "page", "ames", "stun", "other"}

// String returns the kind's metric label.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Kinds lists every kind.
func Kinds() []Kind {
	out := make([]Kind, numKinds)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// Counters are the relay's event counts. They are atomics: the decision core
// writes them, any goroutine may read a Snapshot.
type Counters struct {
	in        [numKinds]atomic.Uint64
	out       [numKinds]atomic.Uint64
	drops     [numDrops]atomic.Uint64
	forwards  atomic.Uint64 // requests forwarded upstream (each target counts)
	dual      atomic.Uint64 // requests sent on two routes at once
	aggr      atomic.Uint64 // requests aggregated into an existing entry
	retrans   atomic.Uint64 // repeats from a requester already on the entry, forwarded again
	answered  atomic.Uint64 // pages sent to requesters
	evicted   atomic.Uint64 // pending entries shed to make room
	toShip    atomic.Uint64 // datagrams handed to the fronted ship's own lane
	origins   atomic.Uint64 // legacy ames origins inserted
	noShort   atomic.Uint64 // pages whose next-hop could not be written (IPv6 lane)
	throttled atomic.Uint64 // pages (and STUN responses) not sent to a requester over its amplification budget
	reqFwd    atomic.Uint64 // request and ames datagrams forwarded (once each, whatever the targets)
	cappedFwd atomic.Uint64 // requests forwarded to refresh an entry at its requester cap, requester not recorded
	pageHit   atomic.Uint64 // page datagrams that matched a pending entry

	// Fronting mode: datagrams the ship sent (each sent on or dropped with
	// one ShipDrop reason), ship-vouched lanes, scrubbed hints.
	fromShip     atomic.Uint64
	fromShipSent atomic.Uint64
	shipDrops    [numShipDrops]atomic.Uint64
	vouched      atomic.Uint64 // sponsee lanes vouched for by the ship's own sends
	scrubbed     atomic.Uint64 // private next-hops and origins rewritten or removed
	stunAns      atomic.Uint64 // STUN binding requests answered
}

// Snapshot is a copy of the counters at one moment.
type Snapshot struct {
	In, Out            [numKinds]uint64
	Drops              [numDrops]uint64
	Forwards           uint64
	DualSends          uint64
	Aggregated         uint64
	Retransmits        uint64
	Answered           uint64
	Evicted            uint64
	ToShip             uint64
	OriginsInserted    uint64
	NextHopUnencodable uint64
	AmpThrottled       uint64
	CappedForwards     uint64
	// Outcomes: every datagram read ends in exactly one of Forwarded,
	// ToShip, Aggregated, PagesMatched, STUNAnswered or a Drop (see
	// Accounted).
	Forwarded    uint64
	PagesMatched uint64
	// Fronting mode: FromShip = FromShipSent + the sum of ShipDrops.
	FromShip      uint64
	FromShipSent  uint64
	ShipDrops     [numShipDrops]uint64
	Vouched       uint64
	HintsScrubbed uint64
	STUNAnswered  uint64
}

// Accounted returns how many datagrams have a recorded outcome; it equals
// TotalIn when every datagram read has been decided.
func (s *Snapshot) Accounted() uint64 {
	return s.Forwarded + s.ToShip + s.Aggregated + s.PagesMatched + s.STUNAnswered + s.TotalDrops()
}

// Snapshot returns the current counts.
func (c *Counters) Snapshot() Snapshot {
	var s Snapshot
	for i := range c.in {
		s.In[i] = c.in[i].Load()
		s.Out[i] = c.out[i].Load()
	}
	for i := range c.drops {
		s.Drops[i] = c.drops[i].Load()
	}
	s.Forwards = c.forwards.Load()
	s.DualSends = c.dual.Load()
	s.Aggregated = c.aggr.Load()
	s.Retransmits = c.retrans.Load()
	s.Answered = c.answered.Load()
	s.Evicted = c.evicted.Load()
	s.ToShip = c.toShip.Load()
	s.OriginsInserted = c.origins.Load()
	s.NextHopUnencodable = c.noShort.Load()
	s.AmpThrottled = c.throttled.Load()
	s.CappedForwards = c.cappedFwd.Load()
	s.Forwarded = c.reqFwd.Load()
	s.PagesMatched = c.pageHit.Load()
	s.FromShip = c.fromShip.Load()
	s.FromShipSent = c.fromShipSent.Load()
	for i := range c.shipDrops {
		s.ShipDrops[i] = c.shipDrops[i].Load()
	}
	s.Vouched = c.vouched.Load()
	s.HintsScrubbed = c.scrubbed.Load()
	s.STUNAnswered = c.stunAns.Load()
	return s
}

// TotalIn returns the datagrams read, of every kind.
func (s *Snapshot) TotalIn() uint64 {
	var n uint64
	for _, v := range s.In {
		n += v
	}
	return n
}

// TotalDrops returns the datagrams dropped, for every reason.
func (s *Snapshot) TotalDrops() uint64 {
	var n uint64
	for _, v := range s.Drops {
		n += v
	}
	return n
}
