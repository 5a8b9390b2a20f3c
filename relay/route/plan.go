package route

import (
	"slices"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// Candidate is one lane considered by a plan, for a Rubric to choose
// from.
type Candidate struct {
	Lane   lane.Key
	Proven bool // known-good: proven, configured, pinned, or a heard direct lane
	Busy   bool // an unproven lane with a probe outstanding (path.busy)
	// fwd names the sponsor whose standing as a forwarder this lane is
	// tried for (its route's fwd path), when fwdOK.
	fwd   lane.Ship
	fwdOK bool
}

// Targets is a plan's choice: up to MaxTargets lanes, tightest first.
type Targets struct {
	Lanes [MaxTargets]lane.Key
	N     int
	// Looped is set when a candidate was skipped because it is the lane the
	// request came from.
	Looped bool
	// Sponsee is set when the walk reached the fronted ship itself: the
	// receiver is below us and no lane below us is known.
	Sponsee bool
}

// Query is what one datagram asks of the route table: where a datagram for
// Rcvr, heard from lane From, goes. When Learn is set, the datagram also
// names its sender (a hop-0 poke's payload ship, an unrelayed legacy
// packet's sender): if it is sent, Sender is recorded as contacting us from
// From (see Contacted).
type Query struct {
	Rcvr   lane.Ship
	From   lane.Key
	Sender lane.Ship
	Learn  bool
}

// Plan is a route decision not yet acted on: the lanes a datagram would be
// sent on, made without changing the table. Commit applies what sending it
// changes (the probes of the lanes it goes to, a sender's lane); a plan that
// is not sent is simply dropped, and the table is as if it never was made.
type Plan struct {
	Targets
	q Query
	// fwd[i] is the sponsor tried as a forwarder on Lanes[i], if fwdOK[i].
	fwd   [MaxTargets]lane.Ship
	fwdOK [MaxTargets]bool
	// routed: the receiver had a route when the plan was made.
	routed bool
	// quiet is the table's quiet stamp for the plan (see PlanFor), 0
	// for none; quietLane its one lane.
	quiet     uint64
	quietLane lane.Key
}

// Touches reports whether committing p would change the table: the
// receiver had a route when p was made (its lanes' probes), a lane of p
// tries a sponsor as a forwarder, or p's query names a sender to learn.
// A plan whose lanes are all configured or pinned, for a receiver with no
// route, touches nothing, and Commit returns without the table's lock. A
// route another reader makes for the receiver between plan and commit is
// then left as if this commit had come first.
func (p *Plan) Touches() bool {
	if p.q.Learn || p.routed && p.N > 0 {
		return true
	}
	for i := 0; i < p.N; i++ {
		if p.fwdOK[i] {
			return true
		}
	}
	return false
}

// Route plans q into p and commits the plan, under one lock: for callers
// that send whatever they plan (the endpoint). It reports whether the plan
// has targets. A relay, which must ask its pending table and its budgets
// before it sends, plans (PlanInto) and commits (Commit) as two steps.
func (r *Table) Route(p *Plan, q Query, now time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.planLocked(p, &q, now)
	if p.N == 0 {
		return false
	}
	r.commitLocked(p, now)
	return true
}

// Plan returns the plan for q at now without changing anything.
func (r *Table) Plan(q Query, now time.Duration) Plan {
	var p Plan
	r.PlanInto(&p, q, now)
	return p
}

// PlanInto makes the plan for q at now in p, changing nothing in the
// table; p is the caller's (a relay keeps one per reader), so nothing is
// copied or allocated. A plan committed later (Commit) is applied to the
// table as it is then: a route that changed in between keeps its changes,
// and only the plan's lanes that are still the route's paths wait for an
// answer.
func (r *Table) PlanInto(p *Plan, q Query, now time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.planLocked(p, &q, now)
}

// PlanFor is PlanInto for the query {Rcvr: rcvr, From: *from, Sender:
// sender, Learn: learn}, written into p field by field, *from read in
// place: a relay's request path, whose lane was itself written field by
// field (a lane.Key moved whole, into a Query and again into the plan,
// stalls the loads that follow on store forwarding).
//
// A plan for a receiver with no route whose configured or pinned lane
// ends the walk (the first proven candidate does) is that lane alone,
// whatever the request's lane (unless it is that lane: Looped) and
// whenever it is made, until a route is created, a pin or the configured
// lanes change, or the lane becomes this process's, each of which moves
// the table's quiet epoch (PageArrivedHeld). Such a plan carries the
// epoch as its stamp, and planned again into the same p for the same
// receiver, from another lane, while the stamp holds, it is kept as it
// is (its query set anew) without the table's lock: kept reports that it
// was.
func (r *Table) PlanFor(p *Plan, rcvr lane.Ship, from *lane.Key, sender lane.Ship, learn bool, now time.Duration) (kept bool) {
	if p.quiet != 0 && p.q.Rcvr == rcvr && p.quietLane != *from && r.quiet.Load() == p.quiet {
		p.setQuery(rcvr, from, sender, learn)
		// The targets as stamped, should a caller have changed them.
		p.Lanes[0].IP, p.Lanes[0].Port = p.quietLane.IP, p.quietLane.Port
		p.N, p.Looped, p.Sponsee = 1, false, false
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p.setQuery(rcvr, from, sender, learn)
	r.planQueryLocked(p, now)
	return false
}

// setQuery makes p's query {Rcvr: rcvr, From: *from, Sender: sender,
// Learn: learn}, field by field, *from read in place.
func (p *Plan) setQuery(rcvr lane.Ship, from *lane.Key, sender lane.Ship, learn bool) {
	p.q.Rcvr, p.q.Sender, p.q.Learn = rcvr, sender, learn
	p.q.From.IP, p.q.From.Port = from.IP, from.Port
}

// Commit records that p, made at or before now, was sent: each of its
// target lanes that is a path of the receiver's route starts waiting for an
// answer, and a sender named by its query is recorded as contacting us.
// Committing a plan with no targets records only the sender.
func (r *Table) Commit(p *Plan, now time.Duration) {
	if !p.Touches() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commitLocked(p, now)
}

// Select plans a request for receiver s heard from lane from and commits
// it: for callers that always send what they plan (the endpoint). It never
// returns from, nor a lane of this process.
func (r *Table) Select(s lane.Ship, from lane.Key, now time.Duration) Targets {
	var p Plan
	r.Route(&p, Query{Rcvr: s, From: from}, now)
	return p.Targets
}

func (r *Table) commitLocked(p *Plan, now time.Duration) {
	if p.N > 0 {
		if rt := r.getLocked(p.q.Rcvr, false, lane.Key{}); rt != nil {
			r.changes += r.advanceLocked(p.q.Rcvr, rt, now)
			rt.sent(p.Lanes[:p.N], now)
		}
		for i := 0; i < p.N; i++ {
			if !p.fwdOK[i] {
				continue
			}
			sp := r.getLocked(p.fwd[i], true, p.q.From)
			if sp == nil {
				continue
			}
			r.changes += sp.tryForwarder(p.Lanes[i], now, &r.cfg)
		}
	}
	if p.q.Learn {
		r.heardLocked(p.q.Sender, p.q.From, now, true, false)
	}
}

// planLocked chooses the lanes for q at now into p (planQueryLocked).
func (r *Table) planLocked(p *Plan, qp *Query, now time.Duration) {
	p.setQuery(qp.Rcvr, &qp.From, qp.Sender, qp.Learn)
	r.planQueryLocked(p, now)
}

// planQueryLocked chooses the lanes for p's query at now, every other
// field of p made anew. It reads the table only: the receiver's route is
// judged as expiry would leave it at now, on a copy.
func (r *Table) planQueryLocked(p *Plan, now time.Duration) {
	// Field by field, p.q kept: a Plan made as a literal is built in a
	// temporary and copied whole, and the copy stalls on the temporary's
	// stores.
	p.Targets = Targets{}
	p.fwd, p.fwdOK, p.routed, p.quiet = [MaxTargets]lane.Ship{}, [MaxTargets]bool{}, false, 0
	p.quietLane.IP, p.quietLane.Port = [16]byte{}, 0
	// q is read in place from p (see PageArrived: a copied lane.Key
	// stalls the loads after it).
	q := &p.q
	t := &p.Targets
	cands := &r.cands
	n := 0
	// done is set once a proven Candidate is in: looser candidates are
	// never chosen (the rubric takes the tightest proven one and the one
	// just tighter), so the walk stops there.
	done := false
	selfKeys := *r.selfKeys.Load()
	// admits reports whether the candidate lane *k is taken, as the n-th:
	// the walk is not done, k is a lane, not this process's, not the one
	// the request came from (that sets Looped), and not taken already.
	// Lanes are read in place here and in addLane (see PageArrived).
	admits := func(k *lane.Key) bool {
		if done || !isValid(k) || n == len(cands) {
			return false
		}
		for i := range selfKeys {
			if selfKeys[i] == *k {
				return false
			}
		}
		if *k == q.From {
			t.Looped = true
			return false
		}
		for i := 0; i < n; i++ {
			if cands[i].Lane == *k {
				return false
			}
		}
		return true
	}
	// add offers candidate c; addLane offers lane *k as a candidate
	// that tries no sponsor as a forwarder, without building one first.
	add := func(c Candidate) {
		if admits(&c.Lane) {
			cands[n] = c
			n++
			done = c.Proven
		}
	}
	addLane := func(k *lane.Key, proven, busy bool) {
		if admits(k) {
			c := &cands[n]
			c.Lane, c.Proven, c.Busy, c.fwd, c.fwdOK = *k, proven, busy, lane.Ship{}, false
			n++
			done = proven
		}
	}
	var fallback Candidate
	s := q.Rcvr
	// A configured lane wins over anything learned (ConfiguredWins), or
	// comes after the ship's learned lanes.
	cf := r.conf.Load()
	configured := func() {
		if e := cf.ship(s); e != nil {
			if e.hasStatic {
				addLane(&e.static, true, false)
			} else if e.hasRelay {
				addLane(&e.relay, true, false)
			}
		}
	}
	if s != r.self && r.cfg.ConfiguredWins {
		configured()
	}
	if k := r.pinRefLocked(s); k != nil {
		addLane(k, true, false)
	}
	// chal is the challenger to probe beside the plan's known-good lane.
	var chal Candidate
	v, routed := r.table.Peek(s)
	p.routed = routed
	// quiet: a configured or pinned lane ended the walk already, and
	// there is no route; nothing below adds to the plan (see PlanFor).
	// The epoch is read under mu, so no move of it is missed.
	var quiet uint64
	if done && !routed {
		quiet = r.quiet.Load()
	}
	if routed && !done {
		rt := v
		if v.probesDue(now, &r.cfg) || v.settleDue(now, &r.cfg, r.clock) || v.expiryDue(now, &r.cfg, r.clock) {
			// Judge the route as the tick will leave it, on a copy.
			c := *v
			c.advance(now, &r.cfg, r.clock)
			rt = &c
		}
		if r.directFreshLocked(rt, now) {
			proven := rt.directProven()
			addLane(&rt.direct.lane, proven, rt.direct.busy(proven))
			if c := &rt.chal; c.valid() && (rt.chalProven() || c.waiting == 0) && c.lane != q.From && !slices.Contains(selfKeys, c.lane) {
				chal = Candidate{Lane: c.lane, Proven: rt.chalProven()}
			}
		}
		addLane(&rt.hint.lane, rt.hint.proven(), rt.hint.busy(rt.hint.proven()))
		addLane(&rt.base.lane, rt.base.proven(), rt.base.busy(rt.base.proven()))
	}
	if s != r.self && !done {
		if !r.cfg.ConfiguredWins {
			configured()
		}
		var chain []lane.Ship
		if r.design {
			chain = Design{}.Sponsors(r.chain[:0], r.sponsors, s, r.self)
		} else {
			chain = r.cfg.Rubric.Sponsors(r.chain[:0], r.sponsors, s, r.self)
		}
		for _, sp := range chain {
			if done {
				break
			}
			if sp == s {
				continue
			}
			if sp == r.self {
				t.Sponsee = n == 0
				break
			}
			if c, held := r.addSponsorLocked(sp, now, add); held && !fallback.Lane.IsValid() {
				fallback = c
			}
		}
	}
	if n == 0 && fallback.Lane.IsValid() {
		// Every way left is a sponsor set aside for not forwarding: try
		// it rather than nothing.
		add(fallback)
		t.Sponsee = false
	}
	if n == 0 {
		return
	}
	if r.design {
		// Design.Choose, without copying the candidates out and back.
		// (if, not switch: mutation testing sees a case's condition as
		// uncovered.)
		good, beside := designPick(cands[:n], &chal)
		if beside == n {
			p.setTarget(&chal)
		} else if beside >= 0 {
			p.setTarget(&cands[beside])
		}
		p.setTarget(&cands[good])
		if quiet != 0 && p.N == 1 && !t.Looped {
			p.quiet = quiet
			p.quietLane.IP, p.quietLane.Port = p.Lanes[0].IP, p.Lanes[0].Port
		}
		return
	}
	to, m := r.cfg.Rubric.Choose(cands[:n], chal)
	for i := range m {
		p.setTarget(&to[i])
	}
}

// setTarget appends *c to p's targets.
func (p *Plan) setTarget(c *Candidate) {
	p.Lanes[p.N], p.fwd[p.N], p.fwdOK[p.N] = c.Lane, c.fwd, c.fwdOK
	p.N++
}

// addSponsorLocked offers sponsor sp's lane to add as a way to the ships
// below it, or returns it as held when the sponsor is set aside for not
// forwarding (the plan's last resort). A galaxy's configured lane and a configured relay are
// known-good: stock vere forwards as a galaxy for its own sponsees, and a
// relay forwards by definition. Any other sponsor lane (a star's, learned
// from its pings or pinned) is known-good only once a page for a ship
// below it has come back from it (see route.fwd); until then it is tried
// beside the next looser route, and after CandidateFailures unanswered
// tries it is left alone for BadLaneHold.
func (r *Table) addSponsorLocked(sp lane.Ship, now time.Duration, add func(Candidate)) (c Candidate, held bool) {
	e := r.conf.Load().ship(sp)
	if e != nil && e.hasRelay {
		add(Candidate{Lane: e.relay, Proven: true})
		return c, false
	}
	k, static := e.staticLane()
	if !static {
		k, static = r.pinnedLocked(sp) // the ship vouched for it: as if configured
	}
	if static && sp.Class() == lane.Galaxy {
		add(Candidate{Lane: k, Proven: true})
		return c, false
	}
	v, has := r.table.Peek(sp)
	if !static {
		if !has || !r.directFreshLocked(v, now) {
			return c, false
		}
		k = v.direct.lane
	}
	c = Candidate{Lane: k, fwd: sp, fwdOK: true}
	if has {
		fw, badUntil := v.fwd, v.fwdBadUntil
		if fw.waiting != 0 && now-fw.waiting >= r.cfg.ProbeTimeout {
			c := *v
			c.expireFwd(now, &r.cfg)
			fw, badUntil = c.fwd, c.fwdBadUntil
		}
		if now < badUntil {
			return c, true
		}
		if fw.lane == k {
			c.Proven = fw.proven()
		}
	}
	add(c)
	return c, false
}
