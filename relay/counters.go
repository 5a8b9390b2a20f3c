package relay

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

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
	DropTooLarge                     // mesa packet over scry.MesaMaxPacket bytes (vere's receive gate), or a datagram longer than the read buffer (MaxLegacyPacket)
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
	DropDuplicate                    // a legacy ames packet this relay forwarded within DupWindow (dupfilter.go): a forwarding loop or a replay
	DropLegacyThrottled              // a legacy ames packet whose forward is over a target's amplification budget
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
	DropDuplicate:        "duplicate",
	DropLegacyThrottled:  "legacy_throttled",
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
func (d ShipDrop) String() string { return nameOf(shipDropNames[:], d) }

// ShipDrops lists every ship-side drop reason.
func ShipDrops() []ShipDrop { return all(numShipDrops) }

// String returns the reason's metric label.
func (d Drop) String() string { return nameOf(dropNames[:], d) }

// Drops lists every drop reason, for metrics registration and docs.
func Drops() []Drop { return all(numDrops) }

// nameOf returns names[v], or "unknown" for a value out of range.
func nameOf[T ~uint8](names []string, v T) string {
	if int(v) < len(names) {
		return names[v]
	}
	return "unknown"
}

// all lists the values of an enum below n.
func all[T ~uint8](n T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = T(i)
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
func (k Kind) String() string { return nameOf(kindNames[:], k) }

// Kinds lists every kind.
func Kinds() []Kind { return all(numKinds) }

// Event is one of the relay's counted events other than datagrams in and
// out by Kind and drops by reason. Every Event has a stable name (String),
// from which cmd/relay names its metric: relay_<name>_total.
type Event uint8

// Counted events. Their String values are stable metric names.
const (
	EventRequestsForwarded      Event = iota // request and legacy ames datagrams forwarded, once each whatever the targets
	EventForwardSends                        // datagrams sent for forwarded requests: one on two routes counts twice
	EventDualSends                           // requests sent on two routes at once
	EventAggregated                          // requests aggregated into an existing pending entry
	EventRetransmits                         // repeats from a requester already on the entry, forwarded again
	EventAnswered                            // pages sent to requesters
	EventPagesMatched                        // page datagrams that matched a pending entry
	EventAmpThrottled                        // pages, STUN responses and legacy forwards not sent to a lane over its address's or network's amplification budget
	EventSTUNAnswered                        // STUN binding requests answered
	EventCappedForwards                      // requests forwarded to refresh an entry at its requester cap, requester not recorded
	EventEvicted                             // pending entries shed to make room
	EventToShip                              // datagrams handed to the fronted ship's own lane
	EventOriginsInserted                     // legacy ames origins inserted
	EventFromShip                            // fronting mode: datagrams the ship sent
	EventFromShipSent                        // fronting mode: datagrams the ship sent that were sent on
	EventVouched                             // sponsee lanes vouched for by the ship (its ack of a ping, its forward)
	EventVouchContested                      // the ship's ack of one ping name sent to two lanes: no lane vouched
	EventVouchRefused                        // the ship forwarded a sponsee's traffic to a lane an unacked ping naming it came from
	EventHintsScrubbed                       // private next-hops and origins rewritten or removed
	EventNextHopUnencodable                  // pages whose next-hop could not be written (IPv6 lane)
	EventNextHopUnknown                      // relayed pages sent on without a next-hop: the publisher's own lane unknown here, and the page not relayed exactly once
	EventLateAnswers                         // unsolicited pages that answered a probe outstanding on their lane (counted in drops too)
	EventProbesSent                          // STUN binding requests the relay sent a lane to prove it answers (amp.Config)
	EventLanesProven                         // probes answered from their lane: the lane is exempt from the amplification budget
	EventSignatureChecks                     // page signatures checked (--pki): solicited first pages that could prove a lane
	EventSignatureChecksRefused              // page signatures not checked, over the check budget (SigChecksPerLane, SigChecksPerSecond): the page credits nothing
	numEvents
)

var eventNames = [numEvents]string{
	EventRequestsForwarded:      "requests_forwarded",
	EventForwardSends:           "forward_sends",
	EventDualSends:              "dual_sends",
	EventAggregated:             "aggregated",
	EventRetransmits:            "retransmits",
	EventAnswered:               "answered",
	EventPagesMatched:           "pages_matched",
	EventAmpThrottled:           "amp_throttled",
	EventSTUNAnswered:           "stun_answered",
	EventCappedForwards:         "capped_forwards",
	EventEvicted:                "pending_evictions",
	EventToShip:                 "to_ship",
	EventOriginsInserted:        "origins_inserted",
	EventFromShip:               "from_ship",
	EventFromShipSent:           "from_ship_sent",
	EventVouched:                "vouched_lanes",
	EventVouchContested:         "vouch_contested",
	EventVouchRefused:           "vouch_refused",
	EventHintsScrubbed:          "hints_scrubbed",
	EventNextHopUnencodable:     "next_hop_unencodable",
	EventNextHopUnknown:         "next_hop_unknown",
	EventLateAnswers:            "late_answers",
	EventProbesSent:             "lane_probes_sent",
	EventLanesProven:            "lanes_proven",
	EventSignatureChecks:        "signature_checks",
	EventSignatureChecksRefused: "signature_checks_refused",
}

// String returns the event's stable name.
func (e Event) String() string { return nameOf(eventNames[:], e) }

// Events lists every event.
func Events() []Event { return all(numEvents) }

// The counts of a counterBlock or a tally, at one flat index each: by
// Kind read and sent (datagrams and bytes), the ship's bytes sent on, by
// Drop, by ShipDrop and by Event.
const (
	idxIn        = 0
	idxOut       = idxIn + int(numKinds)
	idxInBytes   = idxOut + int(numKinds)
	idxOutBytes  = idxInBytes + int(numKinds)
	idxShipBytes = idxOutBytes + int(numKinds)
	idxDrops     = idxShipBytes + 1
	idxShipDrops = idxDrops + int(numDrops)
	idxEvents    = idxShipDrops + int(numShipDrops)
	numCounts    = idxEvents + int(numEvents)
)

// counterBlock is one goroutine's counts, as Snapshot reads them. Each
// reader of a Server has its own (made with its Reader by
// Relay.NewReader), so what its Reader adds to it (tally: each count as
// made, or a batch's at a flush) are atomic adds to cache lines no other
// core writes: atomic because a scrape reads them from another
// goroutine, uncontended because nothing else writes them. The padding
// keeps two blocks off each other's cache lines. v is indexed as the idx
// constants say.
type counterBlock struct {
	_ [cacheLine]byte
	v [numCounts]atomic.Uint64
	_ [cacheLine]byte
}

// addTo adds c's counts to s.
func (c *counterBlock) addTo(s *Snapshot) {
	for k := range numKinds {
		s.In[k] += c.v[idxIn+int(k)].Load()
		s.Out[k] += c.v[idxOut+int(k)].Load()
		s.InBytes[k] += c.v[idxInBytes+int(k)].Load()
		s.OutBytes[k] += c.v[idxOutBytes+int(k)].Load()
	}
	s.FromShipSentBytes += c.v[idxShipBytes].Load()
	for d := range numDrops {
		s.Drops[d] += c.v[idxDrops+int(d)].Load()
	}
	for d := range numShipDrops {
		s.ShipDrops[d] += c.v[idxShipDrops+int(d)].Load()
	}
	for e := range numEvents {
		s.Events[e] += c.v[idxEvents+int(e)].Load()
	}
}

// tally is the counts a Reader's decisions made and has not yet added to
// its relay's counters: plain adds, for one goroutine (the Reader's), and
// a mark for each count touched, so that flushTo costs an atomic add per
// count that changed rather than one per datagram and count. A datagram
// costs about six counts; a server's reader flushes once a batch
// (Reader.Flush), so a batch of 64 datagrams costs about a dozen atomic
// adds instead of some 380.
//
// With direct set, a tally holds nothing: each count goes straight to
// direct, one atomic add each. That is a Reader that does not count per
// batch (Reader.CountPerBatch), whose counts must show as each Handle
// returns; marking and flushing them there would cost more.
type tally struct {
	direct *counterBlock
	v      [numCounts]uint64
	dirty  [(numCounts + 63) / 64]uint64 // bit i set: v[i] was added to since the last flush
}

// bump adds n to count i.
func (t *tally) bump(i int, n uint64) {
	if t.direct != nil {
		t.direct.v[i].Add(n)
		return
	}
	t.v[i] += n
	t.dirty[i>>6] |= 1 << (i & 63)
}

// add counts n of event e.
func (t *tally) add(e Event, n uint64) { t.bump(idxEvents+int(e), n) }

// countIn counts one datagram of kind k, n bytes long, read.
func (t *tally) countIn(k Kind, n int) {
	t.bump(idxIn+int(k), 1)
	t.bump(idxInBytes+int(k), uint64(n))
}

// countOut counts n datagrams of kind k, bytes long in all, sent.
func (t *tally) countOut(k Kind, n, bytes int) {
	t.bump(idxOut+int(k), uint64(n))
	t.bump(idxOutBytes+int(k), uint64(bytes))
}

// drop counts a datagram dropped for reason d.
func (t *tally) drop(d Drop) { t.bump(idxDrops+int(d), 1) }

// shipDrop counts a datagram of the ship's dropped for reason d.
func (t *tally) shipDrop(d ShipDrop) { t.bump(idxShipDrops+int(d), 1) }

// shipBytes counts n bytes the ship sent, sent on.
func (t *tally) shipBytes(n int) { t.bump(idxShipBytes, uint64(n)) }

// flushTo adds t's counts to c and empties t.
func (t *tally) flushTo(c *counterBlock) {
	for w := range t.dirty {
		for m := t.dirty[w]; m != 0; m &= m - 1 {
			i := w<<6 | bits.TrailingZeros64(m)
			c.v[i].Add(t.v[i])
			t.v[i] = 0
		}
		t.dirty[w] = 0
	}
}

// Counters are the relay's event counts, kept in one block per goroutine
// that decides datagrams (one per Reader made by Relay.NewReader) and summed by
// Snapshot, which any goroutine may call.
type Counters struct {
	// def counts for a Reader not made by this relay's NewReader (the
	// package-level NewReader, or another relay's): shared, so contended,
	// but never lost.
	def counterBlock

	mu     sync.Mutex
	blocks []*counterBlock // guarded by mu; only ever appended to
}

// newBlock registers and returns a new counter block.
func (c *Counters) newBlock() *counterBlock {
	b := new(counterBlock)
	c.mu.Lock()
	c.blocks = append(c.blocks, b)
	c.mu.Unlock()
	return b
}

// Snapshot is a copy of the counters at one moment.
type Snapshot struct {
	In, Out [numKinds]uint64
	// InBytes and OutBytes are the bytes of the datagrams counted in In
	// and Out, by Kind: UDP payloads, as read and as sent (a page's
	// next-hop, a legacy origin and a bumped hop count included).
	InBytes, OutBytes [numKinds]uint64
	// FromShipSentBytes are the bytes of the datagrams counted in
	// EventFromShipSent (fronting mode), which Out does not count.
	FromShipSentBytes uint64
	Drops             [numDrops]uint64
	ShipDrops         [numShipDrops]uint64 // fronting mode, by ShipDrop
	// Events, by Event. Every datagram read ends in exactly one of
	// EventRequestsForwarded, EventToShip, EventAggregated,
	// EventPagesMatched, EventSTUNAnswered, EventLanesProven or a Drop
	// (see Accounted); in
	// fronting mode EventFromShip = EventFromShipSent + the sum of
	// ShipDrops.
	Events [numEvents]uint64
}

// Accounted returns how many datagrams have a recorded outcome; it equals
// TotalIn when every datagram read has been decided.
func (s *Snapshot) Accounted() uint64 {
	e := &s.Events
	return e[EventRequestsForwarded] + e[EventToShip] + e[EventAggregated] + e[EventPagesMatched] + e[EventSTUNAnswered] + e[EventLanesProven] + s.TotalDrops()
}

// Add adds o's counts to s (to total several relays).
func (s *Snapshot) Add(o *Snapshot) {
	for i := range s.In {
		s.In[i] += o.In[i]
		s.Out[i] += o.Out[i]
		s.InBytes[i] += o.InBytes[i]
		s.OutBytes[i] += o.OutBytes[i]
	}
	s.FromShipSentBytes += o.FromShipSentBytes
	for i := range s.Drops {
		s.Drops[i] += o.Drops[i]
	}
	for i := range s.ShipDrops {
		s.ShipDrops[i] += o.ShipDrops[i]
	}
	for i := range s.Events {
		s.Events[i] += o.Events[i]
	}
}

// Snapshot returns the current counts, summed over every block. Each
// count is read atomically; counts of one datagram's decision may be seen
// half made, as with any scrape of a running relay.
func (c *Counters) Snapshot() Snapshot {
	var s Snapshot
	c.def.addTo(&s)
	c.mu.Lock()
	blocks := c.blocks
	c.mu.Unlock()
	for _, b := range blocks {
		b.addTo(&s)
	}
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
