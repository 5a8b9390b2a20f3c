package relay

import (
	"net/netip"

	"github.com/urbit-relay/relay/relay/transport"
)

// DecisionLog receives what the relay did with datagrams, for a debug log
// (ServerConfig.Decisions). A reader asks Want before deciding each
// datagram and, for those it wants, calls Log once the datagram is decided.
// Both are called from every reader goroutine, concurrently. Want is
// called per datagram: it must be cheap, and is where the log rate-limits
// itself. Log must not retain d or its slices.
type DecisionLog interface {
	Want() bool
	Log(d *Decision)
}

// Action is what the relay did with a datagram: the outcome it was counted
// under (Snapshot.Accounted).
type Action uint8

// Actions, with their String values, the names the log prints. When a
// datagram's decision passes through more than one (a ping to the ship is
// remembered, then handed over), the first listed wins: a drop over any,
// a forward over an aggregation, and so on.
const (
	ActionDropped      Action = iota // counted under a Drop or ShipDrop (Decision.Reason)
	ActionForwarded                  // a request or legacy ames datagram sent on (EventRequestsForwarded), or the ship's datagram sent (EventFromShipSent)
	ActionAggregated                 // a request joined a pending entry, not forwarded (EventAggregated)
	ActionAnswered                   // a page matched a pending entry and went to its requesters (EventPagesMatched)
	ActionToShip                     // handed to the fronted ship (EventToShip)
	ActionSTUNAnswered               // a STUN binding request answered (EventSTUNAnswered)
	ActionLaneProven                 // the answer to the relay's probe of a lane (EventLanesProven)
	numActions
)

var actionNames = [numActions]string{"dropped", "forwarded", "aggregated", "answered", "to_ship", "stun_answered", "lane_proven"}

// String returns the action's name.
func (a Action) String() string { return nameOf(actionNames[:], a) }

// Decision is what the relay decided for one datagram: Relay.Handle and
// Relay.HandleFromShip return it, and the counters are counted by the same
// steps that record it (Reader's in, drop, shipDrop and act), so the two
// cannot disagree. It lives in the Reader it was decided into and is valid
// until the next datagram is decided there or the Reader is Reset.
type Decision struct {
	// FromShip is set for a datagram the fronted ship sent (read from its
	// device); To is then the lane it addressed, From is unset.
	FromShip bool
	From, To netip.AddrPort
	Len      int  // the datagram's length as read
	Kind     Kind // as counted in In, or, from the ship, as parsed; KindOther when rejected before its kind was known
	Action   Action
	// Reason is the drop reason's metric label (Drop or ShipDrop's
	// String) when Action is ActionDropped, else "".
	Reason string
	// Sends are the datagrams decided for it, Sends[i] leaving by
	// Ports[i]: views into Batch.Sends and Batch.Ports.
	Sends []transport.Message
	Ports []Port
	// ToShip counts those of Sends handed to the fronted ship (PortShip).
	ToShip int

	decided        bool // an Action was recorded
	sends0, ships0 int  // len(Batch.Sends), Batch.nShip before it
}

// actionRank orders the actions a decision may pass through: the lowest
// rank recorded is the decision's.
var actionRank = [numActions]uint8{
	ActionDropped: 0, ActionForwarded: 1, ActionAggregated: 2, ActionAnswered: 3,
	ActionToShip: 4, ActionSTUNAnswered: 5, ActionLaneProven: 6,
}

// begin starts the decision for a datagram of n bytes from (or, fromShip,
// addressed to) addr.
//
// It sets each field rather than assigning a Decision literal: the literal
// clears all 160-odd bytes, pointers with write barriers, for every
// datagram, where Sends and Ports are finish's to set.
func (o *Reader) begin(fromShip bool, addr netip.AddrPort, n int) {
	d := &o.d
	d.FromShip, d.Len, d.Kind, d.Action, d.decided = fromShip, n, KindOther, 0, false
	d.sends0, d.ships0 = len(o.Sends), o.nShip
	if d.Reason != "" {
		d.Reason = ""
	}
	if fromShip {
		d.From, d.To = netip.AddrPort{}, addr
	} else {
		d.From, d.To = addr, netip.AddrPort{}
	}
}

// finish completes the decision begun last and returns it.
func (o *Reader) finish() *Decision {
	d := &o.d
	d.Sends = o.Sends[d.sends0:len(o.Sends):len(o.Sends)]
	d.Ports = o.Ports[d.sends0:len(o.Ports):len(o.Ports)]
	d.ToShip = o.nShip - d.ships0
	return d
}

// in counts the datagram in hand read, of kind k and n bytes, and records
// its kind.
func (o *Reader) in(k Kind, n int) {
	o.c.countIn(k, n)
	o.d.Kind = k
}

// act records that the datagram in hand came to action a.
func (o *Reader) act(a Action) {
	if !o.d.decided || actionRank[a] < actionRank[o.d.Action] {
		o.d.Action, o.d.decided = a, true
	}
}

// drop counts the datagram in hand dropped for reason d, and records it.
func (o *Reader) drop(d Drop) {
	o.c.drop(d)
	o.act(ActionDropped)
	o.d.Reason = d.String()
}

// dropOther counts datagram b, rejected before its kind was known
// (KindOther), read and dropped for reason d.
func (o *Reader) dropOther(b []byte, d Drop) {
	o.in(KindOther, len(b))
	o.drop(d)
}

// shipDrop counts the ship's datagram in hand not sent on, for reason d,
// and records it.
func (o *Reader) shipDrop(d ShipDrop) {
	o.c.shipDrop(d)
	o.act(ActionDropped)
	o.d.Reason = d.String()
}
