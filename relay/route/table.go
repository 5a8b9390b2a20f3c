// Package route holds the routing rules shared by the relay's decision core
// and the ship endpoint: the route table (Table), the rubric it chooses
// lanes by (tightest known-good plus the one just tighter, plan then
// commit), the state machines of a ship's direct lane and its challenger
// (state.go), the lane clock that judges liveness by what is heard, the
// forwarder rules for sponsors, the clock (clock.go), and their constants
// (constants.go). It imports neither the relay nor the endpoint, so both
// build on it.
package route

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/urbit-relay/relay/lane"
)

// Table is what a relay or an endpoint knows about reaching ships, and the
// rubric it chooses lanes by. It is shared by the relay's decision core and
// the requester endpoint, so both tighten routes the same way.
//
// For a receiver R the candidate lanes, tightest first, are:
//
//  1. R's direct lane: where R itself was heard (a hop-0 packet naming R as
//     sender), while fresh (DirectLaneExpiry);
//  2. the hint: a lane learned from a page's next-hop field, one step tighter
//     than the lane that page came through; unproven until a page comes back
//     from it;
//  3. the base: the hint that proved itself before the current hint arrived;
//  4. the lanes of R's sponsors, up the sponsorship chain to R's galaxy: a
//     sponsor's direct lane, or for a galaxy its configured (static) lane.
//     The walk stops at the fronted ship itself: we are R's sponsor, and
//     R is reachable only through lanes we learned below us.
//
// Before them come R's configured lane, with Config.ConfiguredWins (a
// relay), and R's pinned lane (Pin); each counts as proven, so nothing
// looser is chosen. Without ConfiguredWins (an endpoint) R's configured
// lane comes after the base. While the direct lane is fresh, its
// challenger, if any, is sent requests beside the known-good lane, in
// place of the lane just tighter (see below).
//
// A request is sent on the tightest known-good lane and on the candidate
// just tighter than it, until the tighter one answers; then on that one
// alone. Choosing is separate from acting: Plan (PlanInto) reads the table
// and Commit records what was sent. A relay plans, asks its pending table or
// its budgets whether to send (the admit), and commits only what it sends,
// each call taking the table's lock alone, so that a datagram that is not
// sent (aggregated, refused, capped) changes no route; Route plans and
// commits under one lock, for a caller that sends whatever it plans (the
// endpoint).
// A lane that stays unanswered (ProbeTimeout, counted per lane; a lane heard
// from since, or one its ship keeps by contacting us, is not counted) is
// demoted after ProvenFailures if it had proved itself and dropped after
// CandidateFailures if it had not; a dropped lane is not retried for
// BadLaneHold, and after a dropped hint no new one is taken for
// FailedHintHold. Only a page coming from a lane changes that lane's
// standing, so a late duplicate through a looser route never undoes a working
// tighter one (urbit/urbit#2025).
//
// Who may steer the table (docs/reliability.md, "Who may say where a ship
// is"). The standing of the direct lane, the challenger, the hint, the
// base and a sponsor's lane as a forwarder are the state machines of
// state.go, moved by the rules of one route (route.go):
//
//   - With Config.ConfiguredWins (a relay), configured lanes (SetStatic,
//     SetRelays) win: a ship with one is routed there and nothing learned
//     about it is kept. Without it (an endpoint), a configured lane is
//     where a route starts, and routes tighten past it.
//   - A pinned lane (Pin: the fronted ship vouched for it) is next: the
//     ship is routed there alone, and nothing learned from the wire about
//     it is kept, until Unpin. The table owns the pins (with the lane each
//     replaced: RevertPin); relay/vouch.go decides them from its evidence.
//   - A lane is learned only from a datagram that is acted on (a poke or
//     legacy packet sent on or handed to the fronted ship, a page that
//     matched a pending request) or from a late copy of a page from a lane
//     its request went to (LateAnswer); the callers see to it, and Commit
//     (or Contacted) records the sender.
//   - A working direct lane (fresh: heard from, a STUN keepalive included,
//     within DirectLaneExpiry) is not replaced on the wire's word: a
//     different lane heard for the ship becomes its challenger, sent
//     probes beside the direct lane. A challenger holds its slot only by
//     answering (one unanswered probe frees it and holds the lane out for
//     BadLaneHold); once it has answered it is sent every request beside
//     the direct lane, and the requester gets both lanes' pages
//     (PageArrived's contested). It replaces the direct lane once that
//     lane has been silent for MoveSilence or expired, or, if that lane
//     has only been heard and never answered (a spoofer's, learned first),
//     once it left ProvenFailures requests unanswered that the challenger
//     answered. A lane that has answered and keeps talking is never
//     displaced from the wire: requests it does not answer count nothing.
//   - A signed page (PageObs.Signed) from a lane the request went to
//     proves that lane at once, in place of one only heard.
//   - A next-hop is taken only from a page that came through a lane the
//     request was sent on (the ship's own lanes or its sponsors'), only if
//     it names an address that may be a target (HintAllowed), and an
//     unproven candidate is sent at most one probe at a time, so a hint
//     aimed at a third party costs it at most CandidateFailures requests
//     per FailedHintHold.
//   - Routes created on behalf of one source (an IPv4 address, an IPv6
//     /56) are capped (Config.SourceDivisor), so one source cannot evict
//     everyone else's.
//
// Table is safe for concurrent use.
type Table struct {
	// Static after construction.
	self     lane.Ship
	sponsors *lane.Sponsors
	cfg      Config
	// design: cfg.Rubric is Design, whose methods the hot paths call
	// directly (planLocked, answeredConfLocked) rather than through the
	// interface.
	design bool

	mu      sync.Mutex
	table   *simplelru.LRU[lane.Ship, *route] // guarded by mu
	free    []*route                          // guarded by mu; evicted routes for reuse
	changes uint64                            // guarded by mu; route changes, for metrics
	// pins are the lanes the fronted ship vouched for (Pin), each with
	// the lane it replaced (RevertPin), at most MaxPins.
	pins *simplelru.LRU[lane.Ship, *pin] // guarded by mu
	// lanes maps a lane a ship was heard at (as its direct lane or its
	// challenger) to that ship, for KeepAlive; at most lanesCap entries.
	// Keyed by the lane clock's seeded 64-bit hash of the lane (a
	// collision is caught by KeepAlive's check against the route).
	lanes map[uint64]lane.Ship // guarded by mu

	// srcCount counts the routes created on behalf of each source address
	// (by seeded hash of the address into len(srcCount) slots); a route
	// records its slot in route.src and gives it back when evicted.
	srcCount   []uint32 // guarded by mu
	srcCap     uint32   // static; 0: no per-source cap
	srcSeed    uint64   // static
	srcRefused uint64   // guarded by mu; routes not created: source at its cap

	// clock records when anything last arrived from each lane (Arrived,
	// KeepAlive); it takes no lock (see laneClock).
	clock *laneClock
	// held records, by seeded hash of ship and lane, when a lane lost a
	// ship's challenger slot by leaving a probe unanswered: it may not
	// claim that ship's slot again for BadLaneHold (see challengeLocked).
	// It is made at the first hold: most tables (an endpoint's) never
	// need one.
	held *holdRecord // guarded by mu

	// conf holds the operator's lanes (configured.go): an immutable
	// snapshot, replaced under mu, read under mu by the table and without
	// it by Configured.
	conf atomic.Pointer[configured]

	// quiet is the table's quiet epoch (PageArrivedHeld, PlanFor): it
	// moves, under mu, whenever a route is created, a pin is set, changed
	// or removed, the configured lanes or relays are replaced, or a lane
	// becomes this process's (AddSelf), the only changes that can alter
	// what a page from, or a plan for, a configured or pinned ship with
	// no route yields. Read without the lock. It starts at a random odd
	// number below 2^63 (New), so it never wraps to 0, no stamp.
	quiet atomic.Uint64

	// cands and chain are planLocked's scratch, the candidates and the
	// sponsorship chain of the plan being made: a local array passed to
	// Config.Rubric (an interface) would be moved to the heap.
	cands [8]Candidate // guarded by mu
	chain [8]lane.Ship // guarded by mu

	// selfKeys holds the lanes that are this process, never targets: an
	// immutable slice (a handful of lanes), replaced under mu and read
	// without it, since every datagram checks it.
	selfKeys atomic.Pointer[[]lane.Key]
	// selfPorts holds the ports this process listens on at a wildcard
	// address (0.0.0.0 or [::]): any loopback address with one of them is
	// this process too. Immutable slice, like selfKeys.
	selfPorts atomic.Pointer[[]uint16]
}

// New returns an empty route table for a process fronting self (for an
// endpoint, the endpoint's own ship). sponsors may be nil for the default
// sponsorship.
func New(self lane.Ship, sponsors *lane.Sponsors, cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	if sponsors == nil {
		sponsors = &lane.Sponsors{}
	}
	var seeds [16]byte
	if cfg.Seed != 0 {
		binary.LittleEndian.PutUint64(seeds[:8], lane.Mix64(cfg.Seed))
		binary.LittleEndian.PutUint64(seeds[8:], lane.Mix64(cfg.Seed+1))
	} else if _, err := rand.Read(seeds[:]); err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	// The quiet epoch starts anywhere (never at 0, no stamp), whatever
	// the seed: a stamp of one table is then no stamp of another, for a
	// caller that plans into one Plan for several (PlanFor).
	var epoch [8]byte
	if _, err := rand.Read(epoch[:]); err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	_, design := cfg.Rubric.(Design)
	r := &Table{self: self, sponsors: sponsors, cfg: cfg, design: design,
		clock:   newLaneClock(cfg.LaneClockSlots, binary.LittleEndian.Uint64(seeds[:8])),
		srcSeed: binary.LittleEndian.Uint64(seeds[8:])}
	if cfg.SourceDivisor > 0 {
		r.srcCap = uint32(max(1, cfg.MaxRoutes/cfg.SourceDivisor))
		r.srcCount = make([]uint32, cfg.SourceSlots)
	}
	r.conf.Store(newConfigured(nil, nil, r.srcSeed))
	r.quiet.Store(binary.LittleEndian.Uint64(epoch[:])>>1 | 1)
	r.pins, _ = simplelru.NewLRU[lane.Ship, *pin](MaxPins, nil)
	r.selfKeys.Store(&[]lane.Key{})
	r.selfPorts.Store(&[]uint16{})
	t, err := simplelru.NewLRU[lane.Ship, *route](cfg.MaxRoutes, func(s lane.Ship, v *route) {
		// Called with mu held, from Add.
		for _, p := range [...]*path{&v.direct, &v.chal} {
			if h := r.clock.laneHash(&p.lane); r.lanes[h] == s {
				delete(r.lanes, h)
			}
		}
		if v.src != 0 {
			r.srcCount[v.src-1]--
		}
		if len(r.free) < routeFreeListCap {
			r.free = append(r.free, v)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	r.table = t
	return r, nil
}

// Arrived records that a datagram arrived from lane k at now: what keeps
// a lane alive. It takes no lock and allocates nothing; the relay calls it
// for every datagram it reads.
func (r *Table) Arrived(k lane.Key, now time.Duration) { r.clock.hear(&k, now) }

// KeepAlive records that lane k sent a keepalive at now (a STUN binding
// request the relay answered): a ship whose direct lane is k stays
// reachable there (its lane does not expire) however long it sends
// nothing else, as a ship that only STUNs its sponsor does. A keepalive
// keeps a lane alive and no more: it proves nothing and moves no route.
// The keepalive is held on the route of the ship whose direct lane k is
// (found through lanes, checked against the route), not only in the lane
// clock, whose slots any lane can overwrite.
func (r *Table) KeepAlive(k lane.Key, now time.Duration) {
	r.clock.hear(&k, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.lanes[r.clock.laneHash(&k)]
	if !ok {
		return
	}
	if rt, ok := r.table.Peek(s); ok && rt.direct.lane == k && now > rt.alive {
		rt.alive = now
	}
}

// indexLocked records that ship s was heard at lane k (its direct lane or
// its challenger), for KeepAlive. The index may hold lanes a ship no
// longer uses (KeepAlive checks the route); past lanesCap entries it is
// made anew from the routes' direct and challenger lanes.
func (r *Table) indexLocked(s lane.Ship, k lane.Key) {
	if r.lanes == nil {
		r.lanes = make(map[uint64]lane.Ship)
	}
	if len(r.lanes) >= r.lanesCap() {
		clear(r.lanes)
		for _, t := range r.table.Keys() {
			if rt, ok := r.table.Peek(t); ok {
				for _, p := range [...]*path{&rt.direct, &rt.chal} {
					if p.valid() {
						r.lanes[r.clock.laneHash(&p.lane)] = t
					}
				}
			}
		}
	}
	h := r.clock.laneHash(&k)
	if t, ok := r.lanes[h]; ok && t != s {
		if v, ok := r.table.Peek(t); ok && v.direct.lane == k {
			// k is another ship's direct lane: a claim naming s from
			// there (anyone can send one) does not take its keepalives.
			return
		}
	}
	r.lanes[h] = s
}

// lanesCap is how many lanes the KeepAlive index holds before it is made
// anew: twice the routes, each with a direct lane and a challenger, and a
// quarter more for lanes since given up, so that a remake frees at least
// that quarter and its cost is spread over as many inserts.
func (r *Table) lanesCap() int { return 2*r.cfg.MaxRoutes + r.cfg.MaxRoutes/4 + 1 }

// SourceRefused returns how many routes were not created because their
// source address held its share (Config.SourceDivisor).
func (r *Table) SourceRefused() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srcRefused
}

// srcSlot returns the per-source counter slot of k's source: the whole
// address for IPv4, its /RouteSourceIPv6Bits (/56) for IPv6, the networks
// the amplification budget counts by, so that the /64s of one customer's
// /56 share one share.
func (r *Table) srcSlot(k lane.Key) uint32 {
	src := k.Source()
	if !k.Is4() {
		clear(src[RouteSourceIPv6Bits/8:])
	}
	w := lane.Mix64(binary.LittleEndian.Uint64(src[:8])^r.srcSeed) ^ binary.LittleEndian.Uint64(src[8:])
	return uint32(lane.Mix64(w) & uint64(len(r.srcCount)-1))
}

// Len returns the number of ships with routing state.
func (r *Table) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table.Len()
}

// Cap returns the most ships the table keeps routes for (Config.MaxRoutes):
// past it the least recently used route is dropped. It is static.
func (r *Table) Cap() int { return r.cfg.MaxRoutes }

// Changes returns how many times a route's best lane changed.
func (r *Table) Changes() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changes
}

// getLocked returns s's route, creating it when create is set, on behalf
// of source src: a route is not created (nil) when src's address already
// holds its share of the table. An invalid src is not counted (the fronted
// ship's own word, a committed plan's sponsor).
func (r *Table) getLocked(s lane.Ship, create bool, src lane.Key) *route {
	if v, ok := r.table.Get(s); ok {
		return v
	}
	if !create {
		return nil
	}
	var slot uint32
	if src.IsValid() && r.srcCap > 0 {
		i := r.srcSlot(src)
		if r.srcCount[i] >= r.srcCap {
			r.srcRefused++
			return nil
		}
		r.srcCount[i]++
		slot = i + 1
	}
	var v *route
	if n := len(r.free); n > 0 {
		v = r.free[n-1]
		r.free = r.free[:n-1]
		*v = route{}
	} else {
		v = new(route)
	}
	v.src = slot
	r.table.Add(s, v)
	r.quiet.Add(1)
	return v
}

// Heard records that ship s answered us directly (a hop-0 page, solicited)
// from lane k. If k is a lane the request went to (see cameTheWayLocked), k
// becomes s's direct lane (or its challenger); like any lane we send
// requests to, it is dropped if requests to it go unanswered. A page from
// anywhere else teaches nothing.
func (r *Table) Heard(s lane.Ship, k lane.Key, now time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cameTheWayLocked(s, k) {
		r.heardLocked(s, k, now, false, false)
	}
}

// Provable reports whether a page for s from lane from could change s's
// route: from is a lane a request for s went to (cameTheWayLocked) and not
// s's fresh direct lane, whose standing a page only renews. Only such a
// page is worth a signature check (PageObs.Signed, Unverified): from any
// other lane PageArrived and LateAnswer credit nothing either way.
func (r *Table) Provable(s lane.Ship, from lane.Key, now time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !from.IsValid() {
		return false
	}
	if rt, ok := r.table.Peek(s); ok && rt.direct.lane == from && r.directFreshLocked(rt, now) {
		return false
	}
	return r.cameTheWayLocked(s, from)
}

// cameTheWayLocked reports whether a hop-0 page published by s that
// arrived from lane from came from a lane requests for s go to as s's own:
// one of s's own lanes (ownLaneLocked), or its challenger with a probe
// out. Never a lane that is on s's route only as a sponsor's: every
// forwarder bumps a page's hops (vere's inc_hopcount in _mesa_hear_page,
// as this relay does), so a hop-0 page from a sponsor's lane is forged or
// replayed (a signed page copied from anywhere), and says nothing of
// where s is.
func (r *Table) cameTheWayLocked(s lane.Ship, from lane.Key) bool {
	rt, _ := r.table.Peek(s)
	if rt != nil && rt.chal.valid() && rt.chal.lane == from && rt.chal.waiting != 0 {
		return true
	}
	return r.ownLaneLocked(s, rt, from)
}

// Contacted records that ship s sent us a request of its own (a hop-0 poke,
// such as the ping a ship sends its sponsor, or a legacy packet) from lane
// k. It makes k s's direct lane, kept while s keeps contacting us:
// unanswered requests do not count against it (a request for a value not
// grown yet is unanswered by design), only DirectLaneExpiry of silence.
func (r *Table) Contacted(s lane.Ship, k lane.Key, now time.Duration) { r.heard(s, k, now, true) }

func (r *Table) heard(s lane.Ship, k lane.Key, now time.Duration, kept bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heardLocked(s, k, now, kept, false)
}

// heardLocked is heard with mu held: s was heard at lane k, by its contact
// (kept: EvContact) or by a hop-0 page from a lane the request went to
// (EvAnswer, EvSigned when signed). An invalid lane, one of our own, or a
// ship with a configured or pinned lane teaches nothing. A lane other than
// a working direct lane becomes its challenger (see challengeLocked), not
// its replacement, signed or not: a signature shows who wrote a page, not
// where it was sent from, and a copy of a signed page can be replayed from
// any lane.
func (r *Table) heardLocked(s lane.Ship, k lane.Key, now time.Duration, kept, signed bool) {
	if r.configuredLocked(s) {
		return
	}
	r.heardOpenLocked(s, k, now, kept, signed)
}

// heardOpenLocked is heardLocked for a ship s open to learning: one that
// configuredLocked(s) reports false for under the same hold of mu (the
// caller asked; PageArrived asks once for this and answeredConfLocked).
func (r *Table) heardOpenLocked(s lane.Ship, k lane.Key, now time.Duration, kept, signed bool) {
	if !k.IsValid() || r.IsSelf(&k) {
		return
	}
	rt := r.getLocked(s, true, k)
	if rt == nil {
		return
	}
	if rt.direct.lane != k {
		// A new direct lane or challenger; the direct lane is indexed
		// already (from when it was one of these), so the common case,
		// a ship heard again at its lane, writes no map.
		r.indexLocked(s, k)
	}
	r.changes += r.advanceLocked(s, rt, now)
	e, a := EvAnswer, AuthChain
	switch {
	case kept:
		e, a = EvContact, AuthWire
	case signed:
		e, a = EvSigned, AuthSignature
	}
	changes, challenge := rt.hear(k, now, e, a, kept, &r.cfg, r.clock)
	r.changes += changes
	if challenge {
		r.challengeLocked(s, rt, k, now, kept)
	}
}

// challengeLocked records that lane k was heard as ship s (route rt) while
// its direct lane works: k may claim the challenger slot (route.challenge),
// unless the held record says it lost s's slot within BadLaneHold.
func (r *Table) challengeLocked(s lane.Ship, rt *route, k lane.Key, now time.Duration, kept bool) {
	rt.challenge(k, now, kept, r.heldLocked(s, k, now), &r.cfg)
}

// heldSeedMix sets the held record's seed apart from the per-source
// counters' (both drawn from srcSeed).
const heldSeedMix = 0x5bd1e9955bd1e995

// holdHash is the key of (s, k) in the held record.
func holdHash(s lane.Ship, k lane.Key) lane.Key {
	h := lane.Mix64(s.Lo ^ lane.Mix64(s.Hi^k.Hash()))
	var hk lane.Key
	binary.LittleEndian.PutUint64(hk.IP[:8], h)
	hk.Port = uint16(h >> 48)
	return hk
}

// heldLocked reports whether lane k lost s's challenger slot within
// BadLaneHold.
func (r *Table) heldLocked(s lane.Ship, k lane.Key, now time.Duration) bool {
	return r.held != nil && r.held.heldSince(holdHash(s, k), now-r.cfg.BadLaneHold)
}

func (r *Table) directFreshLocked(rt *route, now time.Duration) bool {
	return rt.directFresh(now, &r.cfg, r.clock)
}

// Answered records that a page published by s, answering a request of ours
// (solicited: it matched a pending request), arrived from lane from,
// carrying next-hop next (invalid when the page had none). The lane it came
// from proves itself if a request was sent there; next becomes the
// candidate one step tighter than from, if from is one of the lanes s is
// reached by and next may be a target (HintAllowed).
// A page that came through a relay (relayed: hops above zero) also proves
// the forwarder it came from (see route.fwd). A page nobody asked for must
// not be given here: see LateAnswer.
func (r *Table) Answered(s lane.Ship, from, next lane.Key, relayed bool, now time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answeredLocked(PageObs{Publisher: s, From: from, Next: next, Relayed: relayed}, now)
}

// PageObs is what the relay observed of one page, for the route table:
// who published it, the lane it came from, its next-hop, whether it came
// straight from the publisher or through a relay, and whether its
// signature was checked.
type PageObs struct {
	Publisher lane.Ship
	From      lane.Key
	Next      lane.Key // the page's next-hop; invalid when it has none
	// Hop0: a hop-0 page, sent by the publisher itself.
	Hop0 bool
	// Relayed: hops above zero (it came through a relay).
	Relayed bool
	// Signed: the page's signature was verified with the publisher's key
	// (authority: signature; EvSigned). A hop-0 signed page from a lane the
	// request went to proves that lane as an unsigned answer does, and no
	// more: it never displaces a working direct lane (a signature shows
	// who wrote the page, not where it was sent from: a copy of a public
	// signed page can be replayed from any lane), and a signed page from
	// a lane no request went to teaches nothing. Leave it false unless the
	// caller verified the signature (cmd/relay's --pki).
	Signed bool
	// Unverified: the caller holds the publisher's key (--pki) and this
	// hop-0 page, from a lane that is not the publisher's direct lane,
	// carries no signature that verified. With the key at hand a page
	// must be signed before it may prove a new lane: such a page credits
	// no lane (no new direct lane, no answered challenger), though it is
	// still forwarded (contested keeps the request pending for the direct
	// lane's page).
	Unverified bool
}

// mayProve reports whether page o may prove its lane: not Unverified, or
// from s's direct lane (rt may be nil), whose standing it only renews.
func (o *PageObs) mayProve(rt *route) bool {
	return !o.Unverified || (rt != nil && rt.direct.valid() && rt.direct.lane == o.From)
}

// LateAnswer records page o that matched no pending request (its request
// was answered already). If it came from a lane that request went to (one
// with a probe outstanding, or a lane of s's sponsors: the slower copy of a
// request sent on two lanes), it is taken as Answered would take it,
// next-hop included, and if o.Hop0 as Heard; from anywhere else it
// teaches nothing: no lane learned, no route created. It reports whether
// it was taken.
func (r *Table) LateAnswer(o PageObs, now time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, from := o.Publisher, o.From
	if !from.IsValid() {
		return false
	}
	rt, _ := r.table.Peek(s)
	taken := false
	if rt != nil {
		for _, p := range [...]*path{&rt.direct, &rt.hint, &rt.base, &rt.chal} {
			if p.valid() && p.lane == from && p.waiting != 0 {
				taken = true
			}
		}
	}
	if !taken && !r.onRouteLocked(s, rt, from, now) {
		return false
	}
	if !o.mayProve(rt) {
		return true
	}
	if o.Hop0 && (taken || r.ownLaneLocked(s, rt, from)) {
		r.heardLocked(s, from, now, false, o.Signed)
	}
	r.answeredLocked(o, now)
	return true
}

// PageArrived is, under one lock, what a relay learns from a solicited page
// o: if o.Hop0 (a hop-0 page), Heard(o.Publisher, o.From) (taken only
// from a lane the request went to); then Answered. contested
// reports that the page came from the publisher's challenger while its
// direct lane works: the relay then keeps the request pending, so that the
// page from the direct lane, sent the same request, reaches the requester
// too (the known-good lane's answer is never lost to a challenger's
// faster one). placed is the publisher's own lane as the table places it
// once the page is taken, for the next-hop a relay writes on the page: its
// pinned lane; else, unless disputed, for a hop-0 page that came from one
// of its own lanes (ownLaneLocked: not a challenger's, not a sponsor's),
// that lane; else its direct lane while proven and fresh; invalid
// otherwise. disputed reports that a challenger claims the publisher beside
// its working direct lane: the old lane may be stale (the ship moved) or
// the new one wrong (a squatter), so the relay names neither. It is never a
// forwarder's lane: a stock requester takes a relayed page's next-hop as
// the publisher's lane, replacing a direct lane it holds that differs
// (ames.hoon +ev-update-lane, docs/arvo-lanes.md L3), so only the
// publisher's own lane is safe to name.
func (r *Table) PageArrived(o PageObs, now time.Duration) (contested bool, placed lane.Key, disputed bool) {
	contested, disputed = r.PageArrivedInto(&o, now, &placed)
	return contested, placed, disputed
}

// PageArrivedInto is PageArrived reading o in place and writing placed
// into *placed (the zero Key when none), field by field: a lane.Key moved
// whole is stored as two overlapping 16-byte halves, and the loads of it
// that follow (a relay's next-hop) stall on them. It does not change *o.
func (r *Table) PageArrivedInto(o *PageObs, now time.Duration, placed *lane.Key) (contested, disputed bool) {
	contested, disputed, _ = r.pageArrivedQuiet(o, now, placed)
	return contested, disputed
}

// PageAnswer is a caller's hold on one quiet answer of the table to a
// page (PageArrivedHeld): a hop-0 page of publisher from lane from was
// placed at placed (the zero Key: none), neither contested nor
// disputed, and changed nothing; stamp is the table's quiet stamp for it
// (0: nothing held). The zero PageAnswer holds nothing. A relay's reader
// keeps one: a batch's pages of one publisher come in runs.
type PageAnswer struct {
	publisher lane.Ship
	from      lane.Key
	placed    lane.Key
	stamp     uint64
}

// PageArrivedHeld is PageArrivedInto for a caller holding m. If m holds
// the table's quiet answer to o (a hop-0 page, not relayed, of m's
// publisher from m's lane, m's stamp still holding), *placed is set from
// it, contested and disputed are false, and held reports that the table
// was not asked: the call would have written nothing and answered so.
// Otherwise the table is asked, under its lock, and m keeps the answer if
// it is quiet (a page with none leaves m as it was).
func (r *Table) PageArrivedHeld(o *PageObs, now time.Duration, placed *lane.Key, m *PageAnswer) (contested, disputed, held bool) {
	if o.Hop0 && !o.Relayed && m.publisher == o.Publisher && m.from == o.From && r.quietHolds(m.stamp) {
		placed.IP, placed.Port = m.placed.IP, m.placed.Port
		return false, false, true
	}
	contested, disputed, stamp := r.pageArrivedQuiet(o, now, placed)
	if stamp != 0 {
		m.publisher, m.stamp = o.Publisher, stamp
		m.from.IP, m.from.Port = o.From.IP, o.From.Port
		m.placed.IP, m.placed.Port = placed.IP, placed.Port
	}
	return contested, disputed, false
}

// pageArrivedQuiet is PageArrivedInto that also returns a quiet stamp,
// nonzero when the call wrote nothing and its answer follows from o's
// Publisher and From alone, the page being at hop 0: the publisher is
// configured (ConfiguredWins) or pinned, has no route, and the page was
// not relayed. Its answer is then false, false and placed the pin, or
// else From if From is one of the publisher's configured lanes, else
// none. While Quiet(stamp) holds, every further hop-0 page of that
// publisher from that lane gets the same answer and changes nothing, at
// any instant: only creating a route, a pin's change or new configured
// lanes could change it, and each moves the epoch; PageArrivedHeld
// reuses the answer so.
func (r *Table) pageArrivedQuiet(o *PageObs, now time.Duration, placed *lane.Key) (contested, disputed bool, quiet uint64) {
	placed.IP, placed.Port = [16]byte{}, 0
	r.mu.Lock()
	defer r.mu.Unlock()
	// from is read in place: a lane.Key copied is stored with
	// overlapping 16-byte moves, which the loads after it stall on.
	s, from := o.Publisher, &o.From
	rt, _ := r.table.Peek(s)
	if rt != nil && isValid(from) && rt.chal.valid() && rt.chal.lane == *from &&
		rt.direct.lane != *from && r.directFreshLocked(rt, now) {
		contested = true
	}
	// s's configured lanes and its pin, looked up once for the whole
	// call: only SetStatic, SetStaticLane, SetRelays, Pin, RevertPin and
	// Unpin change them, each under mu, which this call holds.
	cs := r.conf.Load().ship(s)
	pk := r.pinRefLocked(s)
	pinned := pk != nil
	// own: the page came at hop 0 from one of s's own lanes. Asked once:
	// hearing a page only ever adds from to s's lanes, so own stays true
	// after heardOpenLocked, and is asked again below only when false.
	own := o.Hop0 && ownLane(rt, from, cs, pk, pinned)
	// configuredLocked(s), from the same lookups.
	configured := pinned || r.cfg.ConfiguredWins && cs != nil
	if configured && rt == nil && o.Hop0 && !o.Relayed {
		// Nothing below writes (heardOpenLocked is not called for a
		// configured ship, answeredConfLocked returns at once), and rt
		// stays nil (it is remade only for an unconfigured ship).
		quiet = r.quiet.Load()
	}
	if o.mayProve(rt) {
		// cameTheWayLocked, with own already known.
		// (heardLocked teaches nothing of a configured ship.)
		if !configured && (own || (o.Hop0 && rt != nil && rt.chal.valid() && rt.chal.lane == *from && rt.chal.waiting != 0)) {
			r.heardOpenLocked(s, *from, now, false, o.Signed)
		}
		r.answeredConfLocked(o, now, configured)
		if rt == nil && !configured && isValid(from) {
			// heardOpenLocked or answeredConfLocked may have made it
			// (neither does for a configured ship or an invalid lane).
			rt, _ = r.table.Peek(s)
		}
	}
	if pinned {
		placed.IP, placed.Port = pk.IP, pk.Port
	} else if rt != nil && rt.chal.valid() && r.directFreshLocked(rt, now) {
		// Another lane claims the publisher beside a working direct
		// lane: either may be the stale one until the claim is settled
		// (MoveSilence, the ship's ack, a signature).
		disputed = true
	} else if own || (o.Hop0 && ownLane(rt, from, cs, pk, pinned)) {
		placed.IP, placed.Port = from.IP, from.Port
	} else if rt != nil && rt.directProven() && r.directFreshLocked(rt, now) {
		placed.IP, placed.Port = rt.direct.lane.IP, rt.direct.lane.Port
	}
	return contested, disputed, quiet
}

// quietHolds reports whether stamp, from pageArrivedQuiet, still holds:
// no route created, no pin changed, no configured lanes or relays
// replaced and no lane of this process added since. It takes no lock.
func (r *Table) quietHolds(stamp uint64) bool { return stamp != 0 && r.quiet.Load() == stamp }

func (r *Table) answeredLocked(o PageObs, now time.Duration) {
	r.answeredConfLocked(&o, now, r.configuredLocked(o.Publisher))
}

// answeredConfLocked is answeredLocked given configured, which must be
// configuredLocked(o.Publisher) as it is under the same hold of mu.
func (r *Table) answeredConfLocked(o *PageObs, now time.Duration, configured bool) {
	if o.Relayed {
		r.forwardedLocked(o.Publisher, o.From, now)
	}
	if configured || !isValid(&o.From) {
		return
	}
	s, from, next := o.Publisher, o.From, o.Next
	// A next-hop is worth a route only from a page that came the way the
	// request went, and only if it may be a target; and never for a ship
	// we sponsor from further up its chain (the seed's rule: no
	// fraternizing from a galaxy straight to a planet or moon; a relay
	// below passes us its publisher's own lane only to hand on to stock
	// requesters, see relay's nextHopFor).
	hint := next.IsValid() && next != from && r.HintAllowed(next) &&
		!r.sponsorOfLocked(s) && (r.design || r.cfg.Rubric.TakesHints())
	rt := r.getLocked(s, false, from)
	hint = hint && r.onRouteLocked(s, rt, from, now)
	if rt == nil && hint {
		rt = r.getLocked(s, true, from)
	}
	if rt == nil {
		return
	}
	e, a := EvAnswer, AuthChain
	if o.Signed && o.Hop0 {
		e, a = EvSigned, AuthSignature
	}
	r.changes += rt.answered(from, next, hint, e, a, now, &r.cfg, r.clock)
}

// sponsorOfLocked reports whether this table's ship is one of s's
// sponsors further up than s's own sponsor (its galaxy above a star's
// planet, say): the seed's no-fraternizing rule keeps such a relay
// forwarding to s's sponsor, not to s.
func (r *Table) sponsorOfLocked(s lane.Ship) bool {
	var chainBuf [8]lane.Ship
	chain := r.sponsors.AppendChain(chainBuf[:0], s)
	return len(chain) > 2 && slices.Contains(chain[2:], r.self)
}

// onRouteLocked reports whether lane from is one that requests for s are
// sent on: one of s's own lanes (rt, which may be nil), or a lane of one of
// its sponsors (configured, relay, or fresh direct lane).
func (r *Table) onRouteLocked(s lane.Ship, rt *route, from lane.Key, now time.Duration) bool {
	if r.ownLaneLocked(s, rt, from) {
		return true
	}
	if !from.IsValid() {
		return false
	}
	cf := r.conf.Load()
	var chainBuf [8]lane.Ship
	for _, sp := range r.sponsors.AppendChain(chainBuf[:0], s) {
		if sp == s {
			continue
		}
		if sp == r.self {
			break
		}
		if cf.ship(sp).isOwn(&from) {
			return true
		}
		if k, ok := r.pinnedLocked(sp); ok && k == from {
			return true
		}
		if v, ok := r.table.Peek(sp); ok && v.direct.lane == from && r.directFreshLocked(v, now) {
			return true
		}
	}
	return false
}

// ownLaneLocked reports whether lane from is one of s's own lanes that
// requests for s are sent on: its direct lane, hint or base (rt, which may
// be nil), or its configured, relay or pinned lane.
func (r *Table) ownLaneLocked(s lane.Ship, rt *route, from lane.Key) bool {
	pk := r.pinRefLocked(s)
	return ownLane(rt, &from, r.conf.Load().ship(s), pk, pk != nil)
}

// ownLane is ownLaneLocked for s given its lookups, made under the same
// hold of mu: rt its route (may be nil), cs its configured lanes
// (configured.ship: nil when none), and pk, pinned its pin
// (pinRefLocked: pk is read only when pinned). The lanes are read in place (see PageArrived).
func ownLane(rt *route, from *lane.Key, cs *confShip, pk *lane.Key, pinned bool) bool {
	if !isValid(from) {
		return false
	}
	if rt != nil && (*from == rt.direct.lane || *from == rt.hint.lane || *from == rt.base.lane) {
		return true
	}
	return cs.isOwn(from) || pinned && *pk == *from
}

// isValid is k.IsValid(), read in place (see PageArrived).
func isValid(k *lane.Key) bool { return *k != lane.Key{} }

// forwardedLocked records that a relayed page for s came back from lane
// from: if that is the lane one of s's sponsors is being tried at as a
// forwarder (its fwd path, probed), the sponsor has shown it forwards.
func (r *Table) forwardedLocked(s lane.Ship, from lane.Key, now time.Duration) {
	var chainBuf [8]lane.Ship
	for _, sp := range r.sponsors.AppendChain(chainBuf[:0], s) {
		if sp == s || sp == r.self {
			continue
		}
		v, ok := r.table.Peek(sp)
		if !ok {
			continue
		}
		if changes, ok := v.forwarded(from, now); ok {
			r.changes += changes
			return
		}
	}
}

// advanceLocked runs advance on s's route rt in place, holding out a
// challenger lane that lost its slot (heldLocked).
func (r *Table) advanceLocked(s lane.Ship, rt *route, now time.Duration) uint64 {
	changes, lost := rt.advance(now, &r.cfg, r.clock)
	if lost.IsValid() {
		if r.held == nil {
			r.held = newHoldRecord(max(MinHeldSlots, r.cfg.LaneClockSlots/HeldSlotsDivisor), r.srcSeed^heldSeedMix)
		}
		r.held.hold(holdHash(s, lost), now)
	}
	return changes
}
