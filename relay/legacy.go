package relay

import (
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

// ames forwards a legacy ames packet statelessly. Legacy ames has no hop
// count and no pending table, so two guards stand in for them: the
// duplicate filter (DupConfig) drops a packet this relay forwarded
// already when it comes back from another lane, which ends any loop, and
// the amplification budget bounds what is forwarded to a lane the relay
// learned (the lane of a ship that named itself the sender of a packet
// heard from there, which a forged packet can name a victim): every byte
// forwarded to a lane that is neither configured (a galaxy, pinned or
// relay lane) nor the ship's own spends from its address's and network's
// budgets (amp.Config). A forward goes to all its targets or to none.
//
// It is forwardPath: the pre-check is the duplicate filter's (amesPrecheck),
// the admit the budgets' and the filter's (amesAdmit), the edit the origin
// (amesEdit).
func (r *Relay) ames(b []byte, a *scry.AmesPacket, from netip.AddrPort, fromKey lane.Key, now time.Duration, out *Reader) {
	fromShip := r.link.sent(from)
	f := fwd{via: viaAmes, kind: KindAmes, b: b, from: from, fromKey: fromKey, fromShip: fromShip,
		rcvr: a.Rcvr, sender: a.Sndr,
		// An unrelayed packet was sent by its sender itself. Never a
		// galaxy's: galaxy lanes come from configuration, and a relay
		// forwards a galaxy's packets on without an origin (none is
		// needed), so a packet naming a galaxy as its sender says
		// nothing of where the galaxy is.
		named: !a.Relayed && !fromShip && a.Sndr.Class() != lane.Galaxy,
		name:  legacyPing, now: now}
	r.forwardPath(&f, a, out)
}

// amesPrecheck is forwardPath's pre-check for a legacy packet: the
// duplicate filter drops a copy it refuses, and records any other as
// forwarded at once (dupFilter.record: the check and the record are one
// step, and one lock); forwardPath undoes the record (abandon) when the
// packet is not sent after all, so that the filter then is as if it had
// only been checked. Then the origin to insert is chosen.
//
// Recording before the plan and the budgets, not after them, takes the
// filter's lock once per forward instead of twice. What another reader
// may see differently: a copy of the packet from another lane, decided
// in the moment between this record and its undo, is dropped as a
// duplicate, where it would have been checked against the filter without
// this packet's record.
func (r *Relay) amesPrecheck(f *fwd, a *scry.AmesPacket, out *Reader) bool {
	// The fronted ship's own packets are recorded, never refused: its
	// retransmissions are its own business, and one coming back round
	// a loop arrives from another lane.
	f.own = f.fromShip && a.Sndr == r.ship
	f.fp, f.tag = r.dups.fingerprint(a), r.dups.laneTag(f.fromKey)
	ok, u := r.dups.record(f.fp, f.tag, f.now)
	if !ok && !f.own {
		out.drop(DropDuplicate)
		return false
	}
	f.undo = u
	if !f.fromShip && scry.NeedsOrigin(a) {
		ap := f.from
		if !r.hintOK(f.from) {
			// A sender on a private network is named by our public
			// lane, or not at all: answers then come back through us.
			ap, f.scrubbed = r.link.public, true
		}
		f.origin, f.insert = lane.EncodeShort(ap)
		f.insert = f.insert && ap.IsValid()
	}
	f.n = len(f.b)
	if f.insert {
		f.n += scry.AmesOriginLen
	}
	return true
}

// amesAdmit admits a planned legacy forward, recorded by the duplicate
// filter already (amesPrecheck): every target lane not trusted
// (trustedLane) has f.n bytes in its amplification budget. It takes the
// bytes, or, refusing, takes nothing, undoes the record and counts why. The targets the budget asked to
// probe are probed, sent or not; each lock is taken alone.
func (r *Relay) amesAdmit(f *fwd, plan *route.Plan, out *Reader) bool {
	var probe [route.MaxTargets]bool
	ok := r.amesTake(f, &plan.Targets, &probe, out)
	for i := 0; i < plan.Targets.N; i++ {
		if probe[i] {
			r.probe(plan.Targets.Lanes[i], f.now, out)
		}
	}
	return ok
}

// amesTake takes each target's bytes, reporting whether the forward may
// go; refusing, it gives back what it took and undoes the packet's record.
// probe marks the targets the budget wants probed.
func (r *Relay) amesTake(f *fwd, t *route.Targets, probe *[route.MaxTargets]bool, out *Reader) bool {
	for i := 0; i < t.N; i++ {
		if r.trustedLane(t.Lanes[i]) {
			continue
		}
		ok, p := r.amp.Spend(t.Lanes[i], f.n, f.now)
		probe[i] = p
		if ok {
			continue
		}
		r.amesRefund(f, t, i)
		r.abandon(f)
		out.c.add(EventAmpThrottled, 1)
		out.drop(DropLegacyThrottled)
		return false
	}
	return true
}

// amesRefund gives back what amesTake took from the first k targets.
func (r *Relay) amesRefund(f *fwd, t *route.Targets, k int) {
	for i := 0; i < k; i++ {
		if !r.trustedLane(t.Lanes[i]) {
			r.amp.Refund(t.Lanes[i], f.n, f.now)
		}
	}
}

// amesEdit is forwardPath's edit of a legacy packet: the origin inserted,
// when one is to be and it fits.
func (r *Relay) amesEdit(f *fwd, out *Reader) []byte {
	b := f.b
	if f.scrubbed {
		out.c.add(EventHintsScrubbed, 1)
	}
	if f.insert {
		if nb, err := scry.InsertOrigin(b, f.origin); err == nil {
			b = nb
			out.c.add(EventOriginsInserted, 1)
		}
	}
	return b
}
