package route

import (
	"time"

	"github.com/urbit-relay/relay/lane"
)

// path is one lane toward a receiver and what we know of it.
type path struct {
	lane lane.Key
	// cand is the standing of a hint, a base or a forwarder
	// (CandidateTransitions), written only by stepCand. The direct lane's
	// and the challenger's standing are their own states (route.state,
	// route.chalState); their cand stays CandidateNone.
	cand  CandidateState
	fails uint8         // probe timeouts since the last answer
	heard time.Duration // last answer (or, for a direct lane, last packet) from it
	// kept marks a direct lane the ship itself keeps alive by contacting
	// us (or the fronted ship pinned); unanswered requests do not fail it.
	kept bool
	// waiting is when the oldest unanswered request to this lane was sent;
	// zero when none is outstanding.
	waiting time.Duration
}

// heardSince reports whether anything arrived from p's lane at or after
// t, by the lane clock.
func (p *path) heardSince(t time.Duration, clock *laneClock) bool {
	return clock != nil && clock.heardSince(&p.lane, t)
}

// directHeardSince reports whether anything arrived from rt's direct lane
// at or after t: a keepalive held on the route (rt.alive), or anything in
// the lane clock.
func (rt *route) directHeardSince(t time.Duration, clock *laneClock) bool {
	return (rt.alive != 0 && rt.alive >= t) || rt.direct.heardSince(t, clock)
}

// proven reports whether p, a hint, a base or a forwarder, has proved
// itself (CandidateProven).
func (p *path) proven() bool { return p.cand == CandidateProven }

// offer returns a new candidate lane k (a hint, or a sponsor's lane tried
// as a forwarder), CandidateTried by CandidateTransitions' EvOffer row.
func offer(k lane.Key) path {
	p := path{lane: k}
	p.stepCand(EvOffer, AuthChain)
	return p
}

// stepCand moves candidate p on e raised by a, by CandidateTransitions; a
// candidate moved to CandidateNone is forgotten.
func (p *path) stepCand(e Event, a Authority) bool {
	to, ok := nextCandidate(p.cand, e, a)
	if !ok {
		return false
	}
	p.cand = to
	if to == CandidateNone {
		*p = path{}
	}
	return true
}

// busy reports whether a lane p, proven or not, is an unproven lane with
// a probe outstanding: it is sent nothing more until that probe is
// answered or times out.
func (p *path) busy(proven bool) bool { return !proven && p.waiting != 0 }

// valid reports whether p holds a lane, read in place (isValid).
func (p *path) valid() bool { return isValid(&p.lane) }

// route is the per-receiver state. It holds no pointers.
type route struct {
	direct path
	// state is the direct lane's standing (state.go), written only by
	// step and stepNew.
	state LaneState
	// chalState is the challenger's standing, written only by
	// stepChallenger and clearChallenger.
	chalState ChallengerState
	hint      path
	base      path
	bad       lane.Key      // the last hint dropped as dead
	badUntil  time.Duration // bad is not retried before this
	// fwd is this ship's standing as a forwarder for ships below it: its
	// direct lane, proven once a page for another ship came back from it.
	// Only then is its lane known-good for requests to its sponsees;
	// until then it is tried beside the next looser route, and dropped
	// for BadLaneHold if it never forwards (a stock star does not).
	fwd         path
	fwdBadUntil time.Duration
	// chal is the challenger: a lane heard as this ship while its direct
	// lane was working. It is sent probes beside the direct lane and
	// replaces it once it has answered (proven) and the direct lane has
	// been silent for MoveSilence, or has expired (see settle).
	chal      path
	chalSince time.Duration // when chal was first heard
	// chalAnswered is when chal last answered a probe; unanswered counts
	// the requests a heard-only direct lane (StateHeard: it never answered
	// one) left unanswered that were sent at or before that answer, which
	// chal was sent too (see settle).
	chalAnswered time.Duration
	unanswered   uint8
	// hintHold: no new hint is taken before this (a hint failed).
	hintHold time.Duration
	// src is 1 + the per-source counter slot this route was created
	// under; 0 when it was not counted.
	src uint32
	// alive is when the ship last sent a keepalive from its direct lane
	// (KeepAlive), held on the route so that no flood of other lanes
	// through the lane clock can make a ship that only STUNs look silent;
	// zero when none since the direct lane was last replaced.
	alive time.Duration
}

// directProven reports whether rt's direct lane is known-good by its
// state (heard or proven).
func (rt *route) directProven() bool { return rt.state.knownGood() }

// chalProven reports whether rt's challenger has answered.
func (rt *route) chalProven() bool { return rt.chalState == ChallengerAnswered }

// step moves rt's direct lane on e raised by a, by Transitions, and
// reports whether the table has that row for that authority (without one
// nothing changes).
func (rt *route) step(e Event, a Authority) bool {
	to, ok := next(rt.state, e, a)
	if ok {
		rt.state = to
	}
	return ok
}

// stepNew starts rt's direct lane, just replaced, from StateUnknown on e
// raised by a (replacing the lane is not a row: state.go).
func (rt *route) stepNew(e Event, a Authority) {
	rt.state = StateUnknown
	rt.step(e, a)
}

// replaceDirect makes k rt's direct lane, from StateUnknown on e raised
// by a.
func (rt *route) replaceDirect(k lane.Key, e Event, a Authority) {
	rt.direct = path{lane: k}
	rt.alive = 0
	rt.stepNew(e, a)
}

// stepChallenger moves rt's challenger on e raised by a, by
// ChallengerTransitions; a challenger moved to ChallengerNone is
// forgotten.
func (rt *route) stepChallenger(e Event, a Authority) bool {
	to, ok := nextChallenger(rt.chalState, e, a)
	if !ok {
		return false
	}
	rt.chalState = to
	if to == ChallengerNone {
		rt.chal = path{}
	}
	return true
}

// clearChallenger empties the challenger slot (its lane became the direct
// lane, or is replaced by a newer claim): not a row, as replacing a
// direct lane is not.
func (rt *route) clearChallenger() {
	rt.chal, rt.chalState = path{}, ChallengerNone
}

// hear is the route's half of Table.heardLocked: rt's ship was heard at
// lane k at now, on e raised by a (EvContact: its own contact, kept;
// EvAnswer or EvSigned: a hop-0 page from a lane the request went to).
// k renews the direct lane when it is that lane, or replaces a direct
// lane that is not fresh (a challenger or a hint at k gives way to it: the
// lane is the ship's own now). When the direct lane is fresh and k differs
// it changes nothing and reports challenge: k may only claim the
// challenger slot (challenge). It returns the route changes made.
func (rt *route) hear(k lane.Key, now time.Duration, e Event, a Authority, kept bool, cfg *Config, clock *laneClock) (changes uint64, challenge bool) {
	switch {
	case rt.direct.valid() && rt.direct.lane == k:
		rt.step(e, a)
	case rt.directFresh(now, cfg, clock):
		return 0, true
	default:
		changes++
		if rt.chal.lane == k {
			rt.clearChallenger()
		}
		rt.replaceDirect(k, e, a)
		// The lane is the ship's own now, not a step toward it.
		if rt.base.lane == k {
			rt.base = path{}
		}
		if rt.hint.lane == k {
			rt.hint, rt.base = rt.base, path{}
		}
	}
	rt.direct.heard = now
	rt.direct.fails = 0
	if !rt.chal.valid() {
		// Heard, so alive: its probe is closed. With a challenger the
		// probe stays open, to be judged at its timeout: being heard is
		// not answering.
		rt.direct.waiting = 0
	}
	if kept {
		rt.direct.kept = true
	}
	return changes, false
}

// challenge is the route's half of Table.challengeLocked: lane k was heard
// as rt's ship at now while its direct lane works. k claims the challenger
// slot (ChallengerClaimed), unless it is rt's last dead lane, or held out
// (held: it lost this ship's slot by leaving a probe unanswered within
// BadLaneHold; the table keeps that record), or an earlier challenger was
// heard within ChallengerHold (first come: a flood of claims cannot keep
// replacing a genuine newcomer). A claimant holds the slot only until its
// first probe: unanswered, it loses it (expireProbes), so sockets that
// never answer cannot squat it, each costing its owner one lane per
// BadLaneHold.
func (rt *route) challenge(k lane.Key, now time.Duration, kept, held bool, cfg *Config) {
	c := &rt.chal
	switch {
	case c.valid() && c.lane == k:
		c.heard = now
		c.kept = c.kept || kept
		rt.stepChallenger(EvContact, AuthWire)
	case k == rt.bad && now < rt.badUntil:
	case held:
	case c.valid() && now-c.heard < cfg.ChallengerHold:
	default:
		rt.clearChallenger()
		*c = path{lane: k, heard: now, kept: kept}
		rt.chalSince, rt.chalAnswered, rt.unanswered = now, 0, 0
		rt.stepChallenger(EvContact, AuthWire)
	}
}

// answered is the route's half of Table.answeredLocked: a page answering
// a request of ours came from lane from at now (e raised by a: EvAnswer,
// or EvSigned for a signed hop-0 page), carrying next-hop next. A lane's
// standing changes only on an answer to a request we sent it (or one it
// had already earned), so spoofed pages cannot promote it. hint is the
// table's word that next may become the hint: the page came the way the
// request went, next may be a target, and the ship is not one we sponsor
// from above. It returns the route changes made.
func (rt *route) answered(from, next lane.Key, hint bool, e Event, a Authority, now time.Duration, cfg *Config, clock *laneClock) (changes uint64) {
	switch from {
	case rt.direct.lane:
		if rt.direct.waiting != 0 || rt.directProven() {
			rt.direct.answer(now)
			rt.step(e, a)
		}
		return 0 // nothing is tighter than direct
	case rt.chal.lane:
		if rt.chal.waiting != 0 || rt.chalProven() {
			rt.chal.answer(now)
			rt.chalAnswered = now
			rt.stepChallenger(e, a)
			changes += rt.settle(now, cfg, clock)
		}
		return changes // a challenger offers no next step until it is direct
	case rt.hint.lane:
		if rt.hint.waiting != 0 || rt.hint.proven() {
			rt.hint.prove(now)
		}
	case rt.base.lane:
		if rt.base.waiting != 0 || rt.base.proven() {
			rt.base.prove(now)
		}
	}
	if !hint || next == rt.direct.lane || next == rt.hint.lane || next == rt.base.lane ||
		next == rt.chal.lane || now < rt.hintHold ||
		(next == rt.bad && now < rt.badUntil) {
		return 0
	}
	switch {
	case from == rt.hint.lane && rt.hint.valid() && rt.hint.proven():
		// The hint proved itself and offers the next step.
		rt.base = rt.hint
		rt.hint = offer(next)
	case from == rt.base.lane && rt.base.valid() && !rt.hint.proven():
		// Replace an unproven hint with the newer one.
		rt.hint = offer(next)
	case !rt.hint.valid() && !rt.base.valid():
		// The page came up the sponsorship chain: start tightening.
		rt.hint = offer(next)
	default:
		// A page through a lane looser than what we are trying (a late
		// duplicate, say) must not undo a tighter route (#2025).
		return 0
	}
	return 1
}

// forwarded is the route's half of Table.forwardedLocked, for a sponsor's
// route rt: a relayed page for a ship below it came back from lane from at
// now. If from is rt's lane as a forwarder and it was tried (a try
// outstanding) or had proved itself, it has shown it forwards: ok, and
// changes is 1 when that is news.
func (rt *route) forwarded(from lane.Key, now time.Duration) (changes uint64, ok bool) {
	p := &rt.fwd
	if p.lane != from || (p.waiting == 0 && !p.proven()) {
		return 0, false
	}
	if !p.proven() {
		changes = 1
	}
	p.prove(now)
	return changes, true
}

// tryForwarder records that a request for a ship below rt's ship was sent
// to lane k at now, trying it as a forwarder (its fwd path): an expired
// try is judged first (expireFwd), a new lane starts unproven, and the try
// waits for a page back. It returns the route changes made.
func (rt *route) tryForwarder(k lane.Key, now time.Duration, cfg *Config) (changes uint64) {
	changes = rt.expireFwd(now, cfg)
	if rt.fwd.lane != k {
		rt.fwd = offer(k)
	}
	if rt.fwd.waiting == 0 {
		rt.fwd.waiting = now
	}
	return changes
}

// sent records that a request was sent on lanes at now: each of them that
// is a path of rt with no probe outstanding starts waiting for an answer.
func (rt *route) sent(lanes []lane.Key, now time.Duration) {
	for _, k := range lanes {
		for _, q := range [...]*path{&rt.direct, &rt.hint, &rt.base, &rt.chal} {
			if q.valid() && q.lane == k && q.waiting == 0 {
				q.waiting = now
			}
		}
	}
}

// directFresh reports whether rt's direct lane is usable at now: it is in
// a live state and was heard within its expiry, by the route (contact or
// answer) or by the lane clock (anything arriving from it, a keepalive
// included). A pinned ship has no route here (Pin).
func (rt *route) directFresh(now time.Duration, cfg *Config, clock *laneClock) bool {
	if !rt.direct.valid() || rt.state == StateUnknown || rt.state == StateExpired {
		return false
	}
	return now-rt.direct.heard < cfg.DirectLaneExpiry || rt.directHeardSince(now-cfg.DirectLaneExpiry+1, clock)
}

// answer closes p's probe: a page came back from its lane at now.
func (p *path) answer(now time.Duration) {
	p.fails = 0
	p.waiting = 0
	p.heard = now
}

// prove is answer for a hint, a base or a forwarder: a page came back
// from it the way its request went (EvAnswer, AuthChain).
func (p *path) prove(now time.Duration) {
	p.answer(now)
	p.stepCand(EvAnswer, AuthChain)
}

// probesDue reports whether any of rt's probes has been outstanding for
// ProbeTimeout, so that expireProbes would change something.
func (rt *route) probesDue(now time.Duration, cfg *Config) bool {
	due := func(p *path) bool { return p.waiting != 0 && now-p.waiting >= cfg.ProbeTimeout }
	return due(&rt.direct) || due(&rt.hint) || due(&rt.base) || due(&rt.chal)
}

// settleDue reports whether settle might change rt at now: it has a
// challenger that has gone quiet, or whose direct lane has expired or
// may have gone silent.
func (rt *route) settleDue(now time.Duration, cfg *Config, clock *laneClock) bool {
	c := &rt.chal
	return c.valid() && (now-c.heard >= cfg.DirectLaneExpiry || !rt.directFresh(now, cfg, clock) || rt.chalProven())
}

// expiryDue reports whether rt's direct lane is in a live state but no
// longer fresh: the tick would expire it (EvSilence).
func (rt *route) expiryDue(now time.Duration, cfg *Config, clock *laneClock) bool {
	return rt.direct.valid() && rt.state != StateExpired && rt.state != StateUnknown && !rt.directFresh(now, cfg, clock)
}

// advance is the tick for one route: every timed transition due at now,
// in order (probes judged, a silent lane expired, the challenger settled).
// It returns how many route changes that made and the challenger lane
// that lost its slot, if one did, for the caller to hold out. It touches
// rt only, so a plan can run it on a copy.
func (rt *route) advance(now time.Duration, cfg *Config, clock *laneClock) (changes uint64, lost lane.Key) {
	changes, lost = rt.expireProbes(now, cfg, clock)
	if rt.expiryDue(now, cfg, clock) {
		rt.step(EvSilence, AuthTick)
	}
	changes += rt.settle(now, cfg, clock)
	return changes, lost
}

// moveIn makes rt's challenger its direct lane, from StateUnknown
// (EvMove: it answered and the direct lane went silent or expired; a
// claimed challenger that never answered moves into an expired lane's
// place as heard, EvContact).
func (rt *route) moveIn() uint64 {
	c := rt.chal
	e, a := EvMove, AuthChain
	if !rt.chalProven() {
		e, a = EvContact, AuthWire
	}
	rt.stepChallenger(EvMove, AuthTick)
	rt.clearChallenger()
	rt.direct = path{lane: c.lane, heard: c.heard, kept: c.kept, waiting: c.waiting}
	rt.alive = 0
	rt.stepNew(e, a)
	return 1
}

// settle decides rt's challenger: one not heard for DirectLaneExpiry is
// forgotten; otherwise it moves in (moveIn) when the direct lane has
// expired, or once it has answered a probe (it receives) and either
// nothing has been heard from the direct lane for MoveSilence (the ship
// moved) or the direct lane, only heard (StateHeard: it never answered a
// request), left ProvenFailures requests unanswered that the challenger
// answered (a spoofer's lane, learned first). A direct lane that has
// answered and keeps talking (pings, pages, STUN) keeps its place however
// the challenger answers, and both are sent traffic meanwhile
// (the requester gets both pages: PageArrived's contested). It returns
// how many route changes that made. It touches rt only, so a plan can run
// it on a copy.
func (rt *route) settle(now time.Duration, cfg *Config, clock *laneClock) uint64 {
	c := &rt.chal
	if !c.valid() {
		return 0
	}
	if now-c.heard >= cfg.DirectLaneExpiry {
		rt.stepChallenger(EvSilence, AuthTick)
		return 0
	}
	if rt.directFresh(now, cfg, clock) && (!rt.chalProven() || rt.state != StateHeard || int(rt.unanswered) < cfg.ProvenFailures) {
		if !rt.chalProven() || now-rt.chalSince < cfg.MoveSilence ||
			rt.directHeardSince(now-cfg.MoveSilence, clock) || now-rt.direct.heard < cfg.MoveSilence {
			return 0
		}
	}
	return rt.moveIn()
}

// expireProbes judges rt's probes outstanding for ProbeTimeout: a lane that
// anything arrived from since the probe was sent is alive (clock), and its
// probe is simply closed, answered or not (a request for a value not grown
// yet is unanswered by design); a silent one has failed, and a proven lane
// is demoted after ProvenFailures, an unproven one dropped after
// CandidateFailures. A kept direct lane (the ship contacts us from it) is
// never failed by unanswered requests: only silence expires it. A
// challenger must answer: a claimed one loses the slot on its first
// unanswered probe (ChallengerFailures), an answered one after
// ProvenFailures, and is returned as lost. It touches rt only, so a plan
// can run it on a copy.
func (rt *route) expireProbes(now time.Duration, cfg *Config, clock *laneClock) (changes uint64, lost lane.Key) {
	if d := &rt.direct; d.valid() && d.waiting != 0 && now-d.waiting >= cfg.ProbeTimeout {
		// A request sent to a lane that has only been heard (it never
		// answered one), unanswered while the challenger answered one sent
		// with it, counts against it (settle). Only requests forwarded to
		// the lane count, and a lane that has answered once is past this.
		if rt.state == StateHeard && rt.chalState == ChallengerAnswered && rt.chalAnswered >= d.waiting && rt.unanswered < 255 {
			rt.unanswered++
		}
		if d.kept {
			d.waiting = 0
		}
	}
	// Hearing from a challenger's lane does not excuse an unanswered
	// probe: anyone can send from a lane they do not receive on.
	if c := &rt.chal; c.valid() && c.waiting != 0 && now-c.waiting >= cfg.ProbeTimeout {
		c.waiting = 0
		c.fails++
		if proven := rt.chalProven(); (!proven && int(c.fails) >= ChallengerFailures) || (proven && int(c.fails) >= cfg.ProvenFailures) {
			lost = c.lane
			rt.bad, rt.badUntil = c.lane, now+cfg.BadLaneHold
			rt.stepChallenger(EvProbeLost, AuthTick)
			changes++
		}
	}
	for _, p := range [...]*path{&rt.direct, &rt.hint, &rt.base} {
		if !p.valid() || p.kept || p.waiting == 0 || now-p.waiting < cfg.ProbeTimeout {
			continue
		}
		if p.heardSince(p.waiting, clock) || (p == &rt.direct && rt.directHeardSince(p.waiting, clock)) {
			p.waiting = 0
			p.fails = 0
			continue
		}
		p.fails++
		p.waiting = 0
		proven := p.proven()
		if p == &rt.direct {
			proven = rt.directProven()
		}
		if proven && int(p.fails) >= cfg.ProvenFailures {
			p.fails = 0
			if p == &rt.direct {
				rt.step(EvProbeLost, AuthTick)
			} else {
				p.stepCand(EvProbeLost, AuthTick)
			}
			changes++
		} else if !proven && int(p.fails) >= cfg.CandidateFailures {
			// The lane is dead: forget it in every role it holds, and
			// do not take it back from next-hop hints for a while.
			dead := p.lane
			rt.bad, rt.badUntil = dead, now+cfg.BadLaneHold
			if p != &rt.direct {
				// A hint that led nowhere: take no other for a while.
				rt.hintHold = now + cfg.FailedHintHold
				p.stepCand(EvProbeLost, AuthTick)
			} else if rt.step(EvProbeLost, AuthTick) {
				rt.direct = path{}
			}
			for _, q := range [...]*path{&rt.hint, &rt.base} {
				if q.lane == dead {
					*q = path{}
				}
			}
			changes++
		}
	}
	if !rt.hint.valid() && rt.base.valid() {
		rt.hint, rt.base = rt.base, path{}
	}
	return changes, lost
}

// expireFwd judges rt's standing as a forwarder: a try outstanding for
// ProbeTimeout with no page for a ship below it back from its lane since
// (fwd.heard: hearing the ship itself, its pings, does not show that it
// forwards) is a failure; ProvenFailures demote it, CandidateFailures of an
// unproven forwarder set it aside for BadLaneHold.
func (rt *route) expireFwd(now time.Duration, cfg *Config) (changes uint64) {
	p := &rt.fwd
	if !p.valid() || p.waiting == 0 || now-p.waiting < cfg.ProbeTimeout {
		return 0
	}
	if p.heard >= p.waiting {
		p.waiting, p.fails = 0, 0
		return 0
	}
	p.fails++
	p.waiting = 0
	switch {
	case p.proven() && int(p.fails) >= cfg.ProvenFailures:
		p.stepCand(EvProbeLost, AuthTick)
		p.fails = 0
		return 1
	case !p.proven() && int(p.fails) >= cfg.CandidateFailures:
		p.stepCand(EvProbeLost, AuthTick)
		rt.fwdBadUntil = now + cfg.BadLaneHold
		return 1
	}
	return 0
}
