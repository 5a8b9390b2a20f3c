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
// budgets (AmpConfig). A forward goes to all its targets or to none.
func (r *Relay) ames(b []byte, a *scry.AmesPacket, from netip.AddrPort, now time.Duration, out *Out) {
	fromKey := lane.KeyOf(from)
	fromShip := r.link.sent(from)
	if !fromShip && r.routes.IsSelf(fromKey) {
		out.drop(DropSelf)
		return
	}
	// An unrelayed packet was sent by its sender itself; its lane is
	// learned only if the packet is sent on. Never a galaxy's: galaxy
	// lanes come from configuration, and a relay forwards a galaxy's
	// packets on without an origin (none is needed), so a packet naming a
	// galaxy as its sender says nothing of where the galaxy is.
	named := !a.Relayed && !fromShip && a.Sndr.Class() != lane.Galaxy
	learn := named && r.mayLearn(a.Sndr, fromKey)
	if a.Rcvr == r.ship {
		if !r.link.present() {
			out.drop(DropOwnShipNoLane) // and learns nothing: see request
			return
		}
		if fromShip {
			out.drop(DropLoop)
			return
		}
		r.handToShip(b, KindAmes, from, fromKey, a.Sndr, named, true, legacyPing, now, out)
		return
	}
	// The fronted ship's own packets are recorded, never refused: its
	// retransmissions are its own business, and one coming back round
	// a loop arrives from another lane.
	own := fromShip && a.Sndr == r.ship
	fp, tag := r.dups.fingerprint(a), r.dups.laneTag(fromKey)
	if !own && r.dups.looped(fp, tag, now) {
		out.drop(DropDuplicate)
		return
	}
	var origin [scry.AmesOriginLen]byte
	insert, scrubbed := false, false
	if !fromShip && scry.NeedsOrigin(a) {
		ap := from
		if !r.hintOK(from) {
			// A sender on a private network is named by our public
			// lane, or not at all: answers then come back through us.
			ap, scrubbed = r.link.public, true
		}
		origin, insert = lane.EncodeShort(ap)
		insert = insert && ap.IsValid()
	}
	n := len(b)
	if insert {
		n += scry.AmesOriginLen
	}
	// Plan, admit, commit, as for a request (Relay.request).
	plan := &out.plan
	r.routes.PlanInto(plan, route.Query{Rcvr: a.Rcvr, From: fromKey, Sender: a.Sndr, Learn: learn}, now)
	if plan.N == 0 {
		if plan.Sponsee && r.link.forwardsForSponsees() {
			r.handToShip(b, KindAmes, from, fromKey, a.Sndr, named, false, legacyPing, now, out)
			return
		}
		r.dropUnrouted(out, &plan.Targets)
		return
	}
	// Admit: every target's budget and the duplicate filter (amesAdmit,
	// which counts a refusal), each lock taken alone; the targets the
	// budget asked to probe are probed, sent or not.
	adm := amesAdmit{r: r, out: out, plan: plan, fp: fp, tag: tag, own: own, n: n, now: now}
	admitted := adm.admit()
	for i := 0; i < plan.Targets.N; i++ {
		if adm.probe[i] {
			r.probe(plan.Targets.Lanes[i], now, out)
		}
	}
	if !admitted {
		return
	}
	r.routes.Commit(plan, now)
	if scrubbed {
		out.c.add(EventHintsScrubbed, 1)
	}
	if insert {
		if nb, err := scry.InsertOrigin(b, origin); err == nil {
			b = nb
			out.c.add(EventOriginsInserted, 1)
		}
	}
	r.forward(b, KindAmes, &plan.Targets, out)
}

// amesAdmit admits a planned legacy forward (Relay.ames): every target
// lane not trusted (trustedLanes) has n bytes in its amplification budget,
// and the packet was not forwarded within the duplicate window after
// coming from another lane. It takes the bytes and records the packet,
// or, refusing, takes nothing and counts why; probe marks the targets the
// budget wants probed, for the caller to probe whether or not the forward
// is sent. It is made on the stack for each legacy forward.
type amesAdmit struct {
	r     *Relay
	out   *Out
	plan  *route.Plan // the plan route.Table.PlanInto made, read for its targets
	fp    uint64      // the packet's fingerprint
	tag   uint32      // the tag of the lane it came from
	own   bool        // the fronted ship's own packet: recorded, not refused
	n     int         // bytes each target is sent
	now   time.Duration
	probe [route.MaxTargets]bool
}

// admit takes each target's bytes and records the packet, reporting
// whether the forward may go; refusing, it gives back what it took.
func (a *amesAdmit) admit() bool {
	t := &a.plan.Targets
	for i := 0; i < t.N; i++ {
		a.probe[i] = false
		if a.r.trusted.has(t.Lanes[i], a.r.link.key) {
			continue
		}
		ok, probe := a.r.amp.Spend(t.Lanes[i], a.n, a.now)
		a.probe[i] = probe
		if ok {
			continue
		}
		a.refund(i)
		a.out.c.add(EventAmpThrottled, 1)
		a.out.drop(DropLegacyThrottled)
		return false
	}
	if !a.r.dups.add(a.fp, a.tag, a.now) && !a.own {
		// Another reader forwarded it from another lane since ames looked.
		a.refund(t.N)
		a.out.drop(DropDuplicate)
		return false
	}
	return true
}

// refund gives back what admit took from the first k targets.
func (a *amesAdmit) refund(k int) {
	t := &a.plan.Targets
	for i := 0; i < k; i++ {
		if !a.r.trusted.has(t.Lanes[i], a.r.link.key) {
			a.r.amp.Refund(t.Lanes[i], a.n, a.now)
		}
	}
}
