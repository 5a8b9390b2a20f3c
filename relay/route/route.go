package route

import (
	"time"

	"github.com/urbit-relay/relay/lane"
)

// path is one lane toward a receiver and what we know of it.
type path struct {
	lane   lane.Key
	proven bool          // a page came back from this lane
	fails  uint8         // probe timeouts since the last answer
	heard  time.Duration // last answer (or, for a direct lane, last packet) from it
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
	return clock != nil && clock.heardSince(p.lane, t)
}

// directHeardSince reports whether anything arrived from rt's direct lane
// at or after t: a keepalive held on the route (rt.alive), or anything in
// the lane clock.
func (rt *route) directHeardSince(t time.Duration, clock *laneClock) bool {
	return (rt.alive != 0 && rt.alive >= t) || rt.direct.heardSince(t, clock)
}

// busy reports whether p is an unproven lane with a probe outstanding: it
// is sent nothing more until that probe is answered or times out.
func (p *path) busy() bool { return !p.proven && p.waiting != 0 }

func (p *path) valid() bool { return p.lane.IsValid() }

// route is the per-receiver state. It holds no pointers.
type route struct {
	direct path
	// state is the direct lane's standing (state.go); direct.proven is
	// state.knownGood(), kept in step by step.
	state LaneState
	// chalState is the challenger's standing; chal.proven is
	// chalState == ChallengerAnswered.
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

// step moves rt's direct lane on e, by Transitions, and reports whether
// the table has that row (without one nothing changes).
func (rt *route) step(e Event) bool {
	to, ok := next(rt.state, e)
	if ok {
		rt.state = to
		rt.direct.proven = to.knownGood()
	}
	return ok
}

// replaceDirect makes k rt's direct lane, from StateUnknown on e.
func (rt *route) replaceDirect(k lane.Key, e Event) {
	rt.direct = path{lane: k}
	rt.alive = 0
	rt.state = StateUnknown
	rt.step(e)
}

// stepChallenger moves rt's challenger on e, by ChallengerTransitions; a
// challenger moved to ChallengerNone is forgotten.
func (rt *route) stepChallenger(e Event) bool {
	to, ok := nextChallenger(rt.chalState, e)
	if !ok {
		return false
	}
	rt.chalState = to
	rt.chal.proven = to == ChallengerAnswered
	if to == ChallengerNone {
		rt.chal = path{}
	}
	return true
}

// clearChallenger empties the challenger slot (its lane became the direct
// lane, or is replaced by a newer claim).
func (rt *route) clearChallenger() {
	rt.chal, rt.chalState = path{}, ChallengerNone
}

// directFresh reports whether rt's direct lane is usable at now: it is in
// a live state and was heard within its expiry, by the route (contact or
// answer) or by the lane clock (anything arriving from it, a keepalive
// included). A pinned ship has no route here (Pin).
func directFresh(rt *route, now time.Duration, cfg *Config, clock *laneClock) bool {
	if !rt.direct.valid() || rt.state == StateUnknown || rt.state == StateExpired {
		return false
	}
	return now-rt.direct.heard < cfg.DirectLaneExpiry || rt.directHeardSince(now-cfg.DirectLaneExpiry+1, clock)
}

func (p *path) answer(now time.Duration) {
	p.proven = true
	p.fails = 0
	p.waiting = 0
	p.heard = now
}

// probesDue reports whether any of rt's probes has been outstanding for
// ProbeTimeout, so that expireProbes would change something.
func probesDue(rt *route, now time.Duration, cfg *Config) bool {
	due := func(p *path) bool { return p.waiting != 0 && now-p.waiting >= cfg.ProbeTimeout }
	return due(&rt.direct) || due(&rt.hint) || due(&rt.base) || due(&rt.chal)
}

// settleDue reports whether settle might change rt at now: it has a
// challenger that has gone quiet, or whose direct lane has expired or
// may have gone silent.
func settleDue(rt *route, now time.Duration, cfg *Config, clock *laneClock) bool {
	c := &rt.chal
	return c.valid() && (now-c.heard >= cfg.DirectLaneExpiry || !directFresh(rt, now, cfg, clock) || c.proven)
}

// expiryDue reports whether rt's direct lane is in a live state but no
// longer fresh: the tick would expire it (EvSilence).
func expiryDue(rt *route, now time.Duration, cfg *Config, clock *laneClock) bool {
	return rt.direct.valid() && rt.state != StateExpired && rt.state != StateUnknown && !directFresh(rt, now, cfg, clock)
}

// advance is the tick for one route: every timed transition due at now,
// in order (probes judged, a silent lane expired, the challenger settled).
// It returns how many route changes that made and the challenger lane
// that lost its slot, if one did, for the caller to hold out. It touches
// rt only, so a plan can run it on a copy.
func advance(rt *route, now time.Duration, cfg *Config, clock *laneClock) (changes uint64, lost lane.Key) {
	changes, lost = expireProbes(rt, now, cfg, clock)
	if expiryDue(rt, now, cfg, clock) {
		rt.step(EvSilence)
	}
	changes += settle(rt, now, cfg, clock)
	return changes, lost
}

// moveIn makes rt's challenger its direct lane, from StateUnknown on e
// (EvMove: it answered and the direct lane went silent or expired; a
// claimed challenger that never answered moves into an expired lane's
// place as heard, EvContact).
func moveIn(rt *route, e Event) uint64 {
	c := rt.chal
	if !rt.chal.proven {
		e = EvContact
	}
	rt.stepChallenger(EvMove)
	rt.clearChallenger()
	rt.direct = path{lane: c.lane, heard: c.heard, kept: c.kept, waiting: c.waiting}
	rt.alive = 0
	rt.state = StateUnknown
	rt.step(e)
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
func settle(rt *route, now time.Duration, cfg *Config, clock *laneClock) uint64 {
	c := &rt.chal
	if !c.valid() {
		return 0
	}
	if now-c.heard >= cfg.DirectLaneExpiry {
		rt.stepChallenger(EvSilence)
		return 0
	}
	if directFresh(rt, now, cfg, clock) && (!c.proven || rt.state != StateHeard || int(rt.unanswered) < cfg.ProvenFailures) {
		if !c.proven || now-rt.chalSince < cfg.MoveSilence ||
			rt.directHeardSince(now-cfg.MoveSilence, clock) || now-rt.direct.heard < cfg.MoveSilence {
			return 0
		}
	}
	return moveIn(rt, EvMove)
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
func expireProbes(rt *route, now time.Duration, cfg *Config, clock *laneClock) (changes uint64, lost lane.Key) {
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
		if (!c.proven && int(c.fails) >= ChallengerFailures) || (c.proven && int(c.fails) >= cfg.ProvenFailures) {
			lost = c.lane
			rt.bad, rt.badUntil = c.lane, now+cfg.BadLaneHold
			rt.stepChallenger(EvProbeLost)
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
		if p.proven && int(p.fails) >= cfg.ProvenFailures {
			p.fails = 0
			if p == &rt.direct {
				rt.step(EvProbeLost)
			} else {
				p.proven = false
			}
			changes++
		} else if !p.proven && int(p.fails) >= cfg.CandidateFailures {
			// The lane is dead: forget it in every role it holds, and
			// do not take it back from next-hop hints for a while.
			dead := p.lane
			rt.bad, rt.badUntil = dead, now+cfg.BadLaneHold
			if p != &rt.direct {
				// A hint that led nowhere: take no other for a while.
				rt.hintHold = now + cfg.FailedHintHold
			} else if rt.step(EvProbeLost) {
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
func expireFwd(rt *route, now time.Duration, cfg *Config) (changes uint64) {
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
	case p.proven && int(p.fails) >= cfg.ProvenFailures:
		p.proven, p.fails = false, 0
		return 1
	case !p.proven && int(p.fails) >= cfg.CandidateFailures:
		*p = path{}
		rt.fwdBadUntil = now + cfg.BadLaneHold
		return 1
	}
	return 0
}
