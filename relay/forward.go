package relay

import (
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

// fwdVia names which admit a datagram on the forward path takes.
type fwdVia uint8

const (
	// viaMesa: a mesa request (peek or poke), admitted by the pending
	// table (Relay.remember).
	viaMesa fwdVia = iota
	// viaAmes: a legacy ames packet, checked and recorded by the
	// duplicate filter (amesPrecheck) and admitted by the amplification
	// budget (amesAdmit).
	viaAmes
)

// fwd is one datagram on the forward path (Relay.forwardPath): what it
// is, and what its pre-check computes for its admit and its edit. It is
// made on the stack for each request (Relay.request) and legacy packet
// (Relay.ames); the path switches on via where the two differ, with no
// interface and nothing allocated.
type fwd struct {
	via      fwdVia
	kind     Kind // KindPeek, KindPoke or KindAmes
	b        []byte
	from     netip.AddrPort
	fromKey  lane.Key
	fromShip bool // sent by the fronted ship (ShipLane)
	rcvr     lane.Ship
	// sender is the ship the datagram names as its sender (a poke's
	// payload ship, a legacy packet's sender); named, when it was sent
	// by that ship itself (a hop-0 poke, an unrelayed legacy packet).
	sender lane.Ship
	named  bool
	// name is the pending-table key of a request's name, legacyPing for
	// a legacy packet (the vouch table's key of its ping).
	name uint64
	now  time.Duration

	// A mesa request's hop count as heard.
	hops int

	// A legacy packet's, set by its pre-check: the fronted ship's own
	// packet (recorded, never refused: dupFilter), its fingerprint and
	// the tag of its lane, its record in the duplicate filter (undone if
	// it is not sent), the origin to insert (insert) or the sender's
	// private lane scrubbed from it, and the bytes each target is sent.
	undo             dupUndo
	own              bool
	fp               uint64
	tag              uint32
	origin           [scry.AmesOriginLen]byte
	insert, scrubbed bool
	n                int
}

// forwardPath is the one way a request or a legacy packet is forwarded:
//
//  1. the self check: a datagram from a lane of this process is dropped;
//  2. whether the sender's lane may be learned (mayLearn);
//  3. for the fronted ship, handToShip;
//  4. the pre-check: a request's hop limit; a legacy packet's duplicate
//     filter, which records it as forwarded (amesPrecheck), to be undone
//     if it is not sent after all;
//  5. plan: the route table chooses the lanes, changing nothing
//     (route.Table.PlanFor);
//  6. no lanes: a sponsee's datagram goes to the ship, when it forwards
//     for its sponsees; any other is dropped (dropUnrouted);
//  7. admit: the pending table (a request) or the amplification budget
//     (a legacy packet, its record undone if refused) says whether it
//     goes;
//  8. commit what is sent to the route table (the lanes' probes, the
//     sender's lane: route.Table.Commit);
//  9. edit: a request's hop count, a legacy packet's origin;
//  10. send it on every lane planned (forward).
//
// Each step takes its table's lock alone (the package comment, "Locks").
// a is a legacy packet's parse, nil for a request: a parameter, not a
// field of f, so that f's contents (its bytes, which out keeps) leaking
// does not move the caller's parse to the heap.
func (r *Relay) forwardPath(f *fwd, a *scry.AmesPacket, out *Reader) {
	if !f.fromShip && r.routes.IsSelf(&f.fromKey) {
		out.drop(DropSelf)
		return
	}
	// The sender's lane is learned only if the datagram is sent on, and
	// never for a ship the fronted ship speaks for (vouch.go).
	learn := f.named && r.mayLearn(f.sender, f.fromKey)
	if f.rcvr == r.ship {
		if !r.link.present() {
			// Dropped, so nothing is learned from it: a relay with no
			// ship behind it knows its sponsees from configuration.
			out.drop(DropOwnShipNoLane)
			return
		}
		if f.fromShip {
			out.drop(DropLoop)
			return
		}
		// Through a device the ship answers a requester's true lane
		// itself; otherwise it answers us, and we pass the page on.
		if f.via == viaMesa && !r.link.answersItself() && !r.remember(out, f.name, &f.fromKey, f.now) {
			return
		}
		r.handToShip(f.b, f.kind, f.from, f.fromKey, f.sender, f.named, true, f.name, f.now, out)
		return
	}
	if !r.precheck(f, a, out) {
		return
	}
	// 5. Plan.
	plan := &out.plan
	if !r.routes.PlanFor(plan, f.rcvr, &f.fromKey, f.sender, learn, f.now) {
		lockTaken()
	}
	if plan.N == 0 {
		r.abandon(f)
		if plan.Sponsee && r.link.forwardsForSponsees() {
			// Our sponsee, at a lane we do not know: the ship knows its
			// sponsees and forwards for them (and its forward teaches us
			// the lane: HandleFromShip).
			r.handToShip(f.b, f.kind, f.from, f.fromKey, f.sender, f.named, false, f.name, f.now, out)
			return
		}
		r.dropUnrouted(out, &plan.Targets)
		return
	}
	// 7. Admit.
	if !r.admit(f, plan, out) {
		return
	}
	// 8. Commit what is sent (nothing to commit, and no lock, for a plan
	// of configured or pinned lanes to a receiver with no route).
	if plan.Touches() {
		lockTaken()
		r.routes.Commit(plan, f.now)
	}
	// 9. Edit, and 10. send.
	r.forward(r.edit(f, out), f.kind, &plan.Targets, out)
}

// precheck is forwardPath's step 4: whether f may go on to be planned,
// counting why not.
func (r *Relay) precheck(f *fwd, a *scry.AmesPacket, out *Reader) bool {
	if f.via == viaMesa {
		if f.hops >= MaxHops {
			out.drop(DropHopLimit)
			return false
		}
		return true
	}
	return r.amesPrecheck(f, a, out)
}

// abandon undoes what f's pre-check recorded, for f not sent after all: a
// legacy packet's record in the duplicate filter.
func (r *Relay) abandon(f *fwd) {
	if f.via == viaAmes {
		r.dups.undo(&f.undo)
	}
}

// admit is forwardPath's step 7: whether f, planned into plan, is sent.
func (r *Relay) admit(f *fwd, plan *route.Plan, out *Reader) bool {
	if f.via == viaMesa {
		// The pending table records the requester and says whether to
		// forward (its verdict counted by remember).
		return r.remember(out, f.name, &f.fromKey, f.now)
	}
	return r.amesAdmit(f, plan, out)
}

// edit is forwardPath's step 9: f's bytes as they are sent.
func (r *Relay) edit(f *fwd, out *Reader) []byte {
	if f.via == viaMesa {
		if !f.fromShip {
			scry.SetHops(f.b, f.hops+1)
		}
		return f.b
	}
	return r.amesEdit(f, out)
}
