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

// Actions, with their String values, the names the log prints.
const (
	ActionDropped      Action = iota // counted under a Drop or ShipDrop (Decision.Reason)
	ActionForwarded                  // a request or legacy ames datagram sent on (EventRequestsForwarded), or the ship's datagram sent (EventFromShipSent)
	ActionAggregated                 // a request joined a pending entry, not forwarded (EventAggregated)
	ActionAnswered                   // a page matched a pending entry and went to its requesters (EventPagesMatched)
	ActionToShip                     // handed to the fronted ship (EventToShip)
	ActionSTUNAnswered               // a STUN binding request answered (EventSTUNAnswered)
	ActionLaneProven                 // the answer to the relay's probe of a lane (EventLanesProven)
	ActionUnknown                    // none of those was counted (a bug: every datagram has an outcome)
	numActions
)

var actionNames = [numActions]string{"dropped", "forwarded", "aggregated", "answered", "to_ship", "stun_answered", "lane_proven", "unknown"}

// String returns the action's name.
func (a Action) String() string { return nameOf(actionNames[:], a) }

// Decision is what the relay did with one datagram.
type Decision struct {
	// FromShip is set for a datagram the fronted ship sent (read from its
	// device); To is then the lane it addressed, From is unset.
	FromShip bool
	From, To netip.AddrPort
	Len      int  // the datagram's length as read
	Kind     Kind // as counted in In; KindOther when rejected before its kind was known, or from the ship
	Action   Action
	// Reason is the drop reason's metric label (Drop or ShipDrop's
	// String) when Action is ActionDropped, else "".
	Reason string
	// Sends are the datagrams decided for it to the public socket: views
	// into the batch's sends, valid only during Log.
	Sends []transport.Message
	// ToShip counts the datagrams for it handed to the fronted ship.
	ToShip int
}

// decisionProbe records one datagram's decision for a DecisionLog: the
// reader's counts before the decision and the lengths of its sends, so
// that afterwards the counts that moved say what the relay did. It belongs
// to one reader and allocates nothing.
type decisionProbe struct {
	before       Snapshot
	sends, ships int
	d            Decision
}

// start records the state before the datagram at from (or, fromShip, to
// that lane) of length n is decided into out.
func (p *decisionProbe) start(out *Out, fromShip bool, addr netip.AddrPort, n int) {
	p.before = Snapshot{}
	out.own.addTo(&p.before)
	p.sends, p.ships = len(out.Sends), len(out.ToShip)
	p.d = Decision{FromShip: fromShip, Len: n}
	if fromShip {
		p.d.To = addr
	} else {
		p.d.From = addr
	}
}

// finish works out the decision from what changed in out and returns it.
func (p *decisionProbe) finish(out *Out) *Decision {
	var after Snapshot
	out.own.addTo(&after)
	d := &p.d
	d.Kind, d.Action = KindOther, ActionUnknown
	for k := range after.In {
		if after.In[k] > p.before.In[k] {
			d.Kind = Kind(k)
		}
	}
	ev := func(e Event) bool { return after.Events[e] > p.before.Events[e] }
	switch {
	case ev(EventRequestsForwarded), ev(EventFromShipSent):
		d.Action = ActionForwarded
	case ev(EventAggregated):
		d.Action = ActionAggregated
	case ev(EventPagesMatched):
		d.Action = ActionAnswered
	case ev(EventToShip):
		d.Action = ActionToShip
	case ev(EventSTUNAnswered):
		d.Action = ActionSTUNAnswered
	case ev(EventLanesProven):
		d.Action = ActionLaneProven
	}
	for i := range after.Drops {
		if after.Drops[i] > p.before.Drops[i] {
			d.Action, d.Reason = ActionDropped, Drop(i).String()
		}
	}
	for i := range after.ShipDrops {
		if after.ShipDrops[i] > p.before.ShipDrops[i] {
			d.Action, d.Reason = ActionDropped, ShipDrop(i).String()
		}
	}
	d.Sends = out.Sends[p.sends:len(out.Sends):len(out.Sends)]
	d.ToShip = len(out.ToShip) - p.ships
	return d
}
