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
	"maps"
	"math/bits"
	"net/netip"
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
// is"). The direct lane's and the challenger's standing are the state
// machines of state.go; the hint, the base and a sponsor's standing as a
// forwarder are each a proven flag with a probe's time and a failure
// count, judged below (answeredLocked, expireProbes, expireFwd):
//
//   - With Config.ConfiguredWins (a relay), configured lanes (SetStatic,
//     SetRelays) win: a ship with one is routed there and nothing learned
//     about it is kept. Without it (an endpoint), a configured lane is
//     where a route starts, and routes tighten past it.
//   - A pinned lane (Pin: the fronted ship vouched for it) is next: the
//     ship is routed there alone, and nothing learned from the wire about
//     it is kept, until Unpin. The caller owns the pins (relay/vouch.go).
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

	mu      sync.Mutex
	table   *simplelru.LRU[lane.Ship, *route] // guarded by mu
	static  map[lane.Ship]lane.Key            // guarded by mu; galaxy (and operator-pinned) lanes
	free    []*route                          // guarded by mu; evicted routes for reuse
	changes uint64                            // guarded by mu; route changes, for metrics
	relays  map[lane.Ship]lane.Key            // guarded by mu; configured relays: lanes known to forward
	pinned  map[lane.Ship]lane.Key            // guarded by mu; lanes the fronted ship vouches for (Pin)
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
	held *laneClock // guarded by mu

	// sim holds the simulator's strategy switches (Simulate); zero in
	// production.
	sim SimOptions // guarded by mu

	// selfKeys holds the lanes that are this process, never targets: an
	// immutable slice (a handful of lanes), replaced under mu and read
	// without it, since every datagram checks it.
	selfKeys atomic.Pointer[[]lane.Key]
	// selfPorts holds the ports this process listens on at a wildcard
	// address (0.0.0.0 or [::]): any loopback address with one of them is
	// this process too. Immutable slice, like selfKeys.
	selfPorts atomic.Pointer[[]uint16]
}

// Config holds the route table's caps and timings. Its zero value is the
// default table: zero fields take the defaults in constants.go. Validate
// (and New) rejects negative caps and timings with a *ConfigError.
type Config struct {
	MaxRoutes int
	// LaneClockSlots sizes the record of when each lane was last heard
	// (a power of two; rounded up). Zero: DefaultLaneClockSlots for a
	// relay, EndpointLaneClockSlots for an endpoint's table.
	LaneClockSlots    int
	DirectLaneExpiry  time.Duration
	ProbeTimeout      time.Duration
	CandidateFailures int
	ProvenFailures    int
	BadLaneHold       time.Duration
	// FailedHintHold is how long after a hint was dropped as dead no new
	// hint is taken for the same ship.
	FailedHintHold time.Duration
	// ChallengerHold is how long a challenger keeps its place against a
	// newer lane without being heard.
	ChallengerHold time.Duration
	// MoveSilence is how long a direct lane must have been silent before
	// a proven challenger replaces it.
	MoveSilence time.Duration
	// SourceDivisor caps the routes created on behalf of one source
	// address at MaxRoutes/SourceDivisor; zero takes
	// DefaultRouteSourceDivisor, negative means no cap.
	SourceDivisor int
	// SourceSlots is how many per-source counters are kept (a power of
	// two; rounded up); zero takes DefaultRouteSourceSlots.
	SourceSlots int
	// HintNets are networks besides the public internet that a next-hop
	// may name (an operator's LAN, loopback in tests); see HintAllowed.
	HintNets []netip.Prefix
	// ConfiguredWins makes configured lanes (SetStatic, SetRelays) final:
	// a ship with one is routed there alone and nothing learned about it
	// is kept. A relay sets it: its operator's word outranks the wire's.
	// Off (an endpoint), a configured lane is where a route starts, and
	// routes tighten past it.
	ConfiguredWins bool
	// Seed seeds the table's hashes (the lane clock's slots, the
	// per-source counters); zero draws one from crypto/rand. The
	// simulator sets it so that runs repeat.
	Seed uint64
}

// SimOptions are strategy switches for comparing routing strategies in
// the simulator (cmd/simnet), set with Table.Simulate; they are no part of
// a relay's or endpoint's configuration. All off is the design as
// specified.
type SimOptions struct {
	// SingleRoute sends each request on one lane only: the tightest
	// candidate, proven or not (the rubric without its safety net: a dead
	// tighter lane loses requests until its probes fail).
	SingleRoute bool
	// NoHints ignores next-hop fields: routes never tighten past what is
	// heard directly and what the sponsorship chain offers.
	NoHints bool
	// GalaxyOnly walks the sponsorship chain straight to the galaxy,
	// skipping intermediate sponsors, as directed messaging does today.
	GalaxyOnly bool
}

// Simulate sets the simulator's strategy switches. Only cmd/simnet (and
// tests comparing strategies) call it; a relay or endpoint never does.
func (r *Table) Simulate(o SimOptions) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sim = o
}

// ConfigError is a Config field that Validate (and New) rejects.
type ConfigError struct {
	Field string // the Config field, such as "MaxRoutes"
	Value any    // its value
	Want  string // what is wanted, such as "a positive whole number"
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("routes: Config.%s %v: want %s", e.Field, e.Value, e.Want)
}

// Validate reports the first field of c that New would reject, as a
// *ConfigError: a negative cap or timing (zero takes the default; a
// negative SourceDivisor is no per-source cap). Nil if New accepts c.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxRoutes", c.MaxRoutes}, {"LaneClockSlots", c.LaneClockSlots}, {"CandidateFailures", c.CandidateFailures},
		{"ProvenFailures", c.ProvenFailures}, {"SourceSlots", c.SourceSlots}} {
		if f.v < 0 {
			return &ConfigError{Field: f.name, Value: f.v, Want: "a positive whole number"}
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"DirectLaneExpiry", c.DirectLaneExpiry}, {"ProbeTimeout", c.ProbeTimeout},
		{"BadLaneHold", c.BadLaneHold}, {"FailedHintHold", c.FailedHintHold}, {"ChallengerHold", c.ChallengerHold},
		{"MoveSilence", c.MoveSilence}} {
		if f.v < 0 {
			return &ConfigError{Field: f.name, Value: f.v, Want: `a positive duration such as "2m"`}
		}
	}
	return nil
}

func (c *Config) fill() {
	if c.MaxRoutes <= 0 {
		c.MaxRoutes = DefaultMaxRoutes
	}
	if c.LaneClockSlots <= 0 {
		c.LaneClockSlots = EndpointLaneClockSlots
	}
	c.LaneClockSlots = 1 << bits.Len(uint(c.LaneClockSlots-1))
	if c.DirectLaneExpiry <= 0 {
		c.DirectLaneExpiry = DefaultDirectLaneExpiry
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.CandidateFailures <= 0 {
		c.CandidateFailures = DefaultCandidateFailures
	}
	if c.ProvenFailures <= 0 {
		c.ProvenFailures = DefaultProvenFailures
	}
	if c.BadLaneHold <= 0 {
		c.BadLaneHold = DefaultBadLaneHold
	}
	if c.FailedHintHold <= 0 {
		c.FailedHintHold = DefaultFailedHintHold
	}
	if c.ChallengerHold <= 0 {
		c.ChallengerHold = DefaultChallengerHold
	}
	if c.MoveSilence <= 0 {
		c.MoveSilence = DefaultMoveSilence
	}
	if c.SourceDivisor == 0 {
		c.SourceDivisor = DefaultRouteSourceDivisor
	}
	if c.SourceSlots <= 0 {
		c.SourceSlots = DefaultRouteSourceSlots
	}
	c.SourceSlots = 1 << bits.Len(uint(c.SourceSlots-1))
}

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
	r := &Table{self: self, sponsors: sponsors, cfg: cfg, static: map[lane.Ship]lane.Key{},
		relays: map[lane.Ship]lane.Key{}, pinned: map[lane.Ship]lane.Key{},
		clock:   newLaneClock(cfg.LaneClockSlots, binary.LittleEndian.Uint64(seeds[:8])),
		srcSeed: binary.LittleEndian.Uint64(seeds[8:])}
	if cfg.SourceDivisor > 0 {
		r.srcCap = uint32(max(1, cfg.MaxRoutes/cfg.SourceDivisor))
		r.srcCount = make([]uint32, cfg.SourceSlots)
	}
	r.selfKeys.Store(&[]lane.Key{})
	r.selfPorts.Store(&[]uint16{})
	t, err := simplelru.NewLRU[lane.Ship, *route](cfg.MaxRoutes, func(s lane.Ship, v *route) {
		// Called with mu held, from Add.
		for _, p := range [...]*path{&v.direct, &v.chal} {
			if h := r.clock.laneHash(p.lane); r.lanes[h] == s {
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

// SetStatic replaces the operator-configured lanes (galaxies from --galaxy or
// DNS, pinned ships). They are always considered known-good.
func (r *Table) SetStatic(lanes map[lane.Ship]lane.Key) {
	m := cloneLanes(lanes)
	r.mu.Lock()
	r.static = m
	r.mu.Unlock()
}

// cloneLanes returns a copy of m that is never nil.
func cloneLanes(m map[lane.Ship]lane.Key) map[lane.Ship]lane.Key {
	if c := maps.Clone(m); c != nil {
		return c
	}
	return map[lane.Ship]lane.Key{}
}

// SetStaticLane sets or, with an invalid key, removes one configured lane.
func (r *Table) SetStaticLane(s lane.Ship, k lane.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !k.IsValid() {
		delete(r.static, s)
		return
	}
	if r.static[s] == k {
		return
	}
	// In place: the map is read and written only under mu, and SetStatic
	// copies what it is given, so no reference to it exists outside.
	r.static[s] = k
}

// SetRelays replaces the configured relays: ships whose lanes forward
// requests for the ships below them (relays of our own, or any the operator
// trusts), known-good as sponsors from the start. A configured relay's lane
// is also its lane for requests to the ship itself.
func (r *Table) SetRelays(relays map[lane.Ship]lane.Key) {
	m := cloneLanes(relays)
	r.mu.Lock()
	r.relays = m
	r.mu.Unlock()
}

// Arrived records that a datagram arrived from lane k at now: what keeps
// a lane alive. It takes no lock and allocates nothing; the relay calls it
// for every datagram it reads.
func (r *Table) Arrived(k lane.Key, now time.Duration) { r.clock.hear(k, now) }

// KeepAlive records that lane k sent a keepalive at now (a STUN binding
// request the relay answered): a ship whose direct lane is k stays
// reachable there (its lane does not expire) however long it sends
// nothing else, as a ship that only STUNs its sponsor does. A keepalive
// keeps a lane alive and no more: it proves nothing and moves no route.
// The keepalive is held on the route of the ship whose direct lane k is
// (found through lanes, checked against the route), not only in the lane
// clock, whose slots any lane can overwrite.
func (r *Table) KeepAlive(k lane.Key, now time.Duration) {
	r.clock.hear(k, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.lanes[r.clock.laneHash(k)]
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
						r.lanes[r.clock.laneHash(p.lane)] = t
					}
				}
			}
		}
	}
	h := r.clock.laneHash(k)
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

// AddSelf records a lane that belongs to this process (its listening
// address as seen by others). Such a lane is never chosen as a target.
func (r *Table) AddSelf(k lane.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.selfKeys.Load()
	if !slices.Contains(old, k) {
		keys := append(slices.Clip(old), k) // a copy: readers hold old
		r.selfKeys.Store(&keys)
	}
}

// AddSelfPort records a port this process listens on at a wildcard
// address: every loopback address with that port is then a lane of this
// process (the caller adds the interfaces' addresses with AddSelf).
func (r *Table) AddSelfPort(port uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.selfPorts.Load()
	if !slices.Contains(old, port) {
		ports := append(slices.Clip(old), port)
		r.selfPorts.Store(&ports)
	}
}

// HintAllowed reports whether k may become a target on the word of a
// datagram (a page's next-hop): a valid lane with a nonzero port, not this
// process, on the public internet (lane.PublicAddr: no loopback, private,
// link-local, multicast, broadcast or reserved space) or in a network the
// operator declared (Config.HintNets).
func (r *Table) HintAllowed(k lane.Key) bool {
	return k.IsValid() && !r.IsSelf(k) && r.TargetAllowed(k.AddrPort())
}

// TargetAllowed reports whether ap's address and port may be sent to or
// named to others as a next-hop or origin: a valid address with a nonzero
// port, on the public internet (lane.PublicAddr) or in a network the
// operator declared (Config.HintNets). HintAllowed adds that it is not
// this process.
func (r *Table) TargetAllowed(ap netip.AddrPort) bool {
	if !ap.IsValid() || ap.Port() == 0 {
		return false
	}
	a := ap.Addr().Unmap()
	if lane.PublicAddr(a) {
		return true
	}
	for _, p := range r.cfg.HintNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

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

// configuredLocked reports whether s has a pinned lane (Pin), or an
// operator-configured lane (a static or relay lane) and such lanes win over
// anything learned (Config.ConfiguredWins): nothing learned about s is kept.
func (r *Table) configuredLocked(s lane.Ship) bool {
	if _, ok := r.pinnedLocked(s); ok {
		return true
	}
	if !r.cfg.ConfiguredWins {
		return false
	}
	if _, ok := r.static[s]; ok {
		return true
	}
	_, ok := r.relays[s]
	return ok
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
	if !k.IsValid() || r.IsSelf(k) || r.configuredLocked(s) {
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
	ev := EvAnswer
	switch {
	case kept:
		ev = EvContact
	case signed:
		ev = EvSigned
	}
	switch {
	case rt.direct.valid() && rt.direct.lane == k:
		rt.step(ev)
	case r.directFreshLocked(rt, now):
		r.challengeLocked(s, rt, k, now, kept)
		return
	default:
		r.changes++
		if rt.chal.lane == k {
			rt.clearChallenger()
		}
		rt.replaceDirect(k, ev)
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
}

// challengeLocked records that lane k was heard as ship s (route rt) while
// its direct lane works: k claims the challenger slot (ChallengerClaimed),
// unless it is held out (it lost this ship's slot by leaving a probe
// unanswered within BadLaneHold) or an earlier challenger was heard within
// ChallengerHold (first come: a flood of claims cannot keep replacing a
// genuine newcomer). A claimant holds the slot only until its first probe:
// unanswered, it loses it (expireProbes), so sockets that never answer
// cannot squat it, each costing its owner one lane per BadLaneHold.
func (r *Table) challengeLocked(s lane.Ship, rt *route, k lane.Key, now time.Duration, kept bool) {
	c := &rt.chal
	switch {
	case c.valid() && c.lane == k:
		c.heard = now
		c.kept = c.kept || kept
		rt.stepChallenger(EvContact)
	case k == rt.bad && now < rt.badUntil:
	case r.heldLocked(s, k, now):
	case c.valid() && now-c.heard < r.cfg.ChallengerHold:
	default:
		rt.clearChallenger()
		*c = path{lane: k, heard: now, kept: kept}
		rt.chalSince, rt.chalAnswered, rt.unanswered = now, 0, 0
		rt.stepChallenger(EvContact)
	}
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
	return r.held != nil && r.held.heardSince(holdHash(s, k), now-r.cfg.BadLaneHold)
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

// Pin routes s to lane k alone until Unpin: the fronted ship vouched for
// k (relay/vouch.go decides when, and owns the pins). Whatever was learned
// about s is dropped, and nothing learned from the wire about s is kept
// while the pin holds (as for a configured lane, which still wins). An
// invalid lane or one of this process is ignored.
func (r *Table) Pin(s lane.Ship, k lane.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !k.IsValid() || r.IsSelf(k) || r.pinned[s] == k {
		return
	}
	r.changes++
	r.pinned[s] = k
	r.table.Remove(s)
}

// pinnedLocked returns s's pinned lane (Pin). Most relays pin nothing
// (only a fronting relay does), so an empty table is not hashed into:
// this is on every request's and page's path.
func (r *Table) pinnedLocked(s lane.Ship) (lane.Key, bool) {
	if len(r.pinned) == 0 {
		return lane.Key{}, false
	}
	k, ok := r.pinned[s]
	return k, ok
}

// PinnedLane returns s's pinned lane (Pin), if any.
func (r *Table) PinnedLane(s lane.Ship) (lane.Key, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pinnedLocked(s)
}

// Placed returns the lane the table places s at, for introspection: its
// pinned lane (the fronted ship's word), or else its route's direct lane,
// fresh or not; false when it has neither.
func (r *Table) Placed(s lane.Ship) (lane.Key, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.pinnedLocked(s); ok {
		return k, true
	}
	if v, ok := r.table.Peek(s); ok && v.direct.valid() {
		return v.direct.lane, true
	}
	return lane.Key{}, false
}

// Unpin removes s's pin (Pin): s is routed as any ship again.
func (r *Table) Unpin(s lane.Ship) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pinned, s)
}

// DirectLane returns s's fresh direct lane, if any.
func (r *Table) DirectLane(s lane.Ship, now time.Duration) (lane.Key, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.getLocked(s, false, lane.Key{})
	if rt == nil || !r.directFreshLocked(rt, now) {
		return lane.Key{}, false
	}
	return rt.direct.lane, true
}

func (r *Table) directFreshLocked(rt *route, now time.Duration) bool {
	return directFresh(rt, now, &r.cfg, r.clock)
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
// from a lane the request went to); then Answered; then it appends the
// known lanes of ships (AppendLanesOf) to dst and returns it. contested
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
func (r *Table) PageArrived(o PageObs, now time.Duration, ships []lane.Ship, dst []lane.Key) (_ []lane.Key, contested bool, placed lane.Key, disputed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, from := o.Publisher, o.From
	rt, _ := r.table.Peek(s)
	if rt != nil && from.IsValid() && rt.chal.valid() && rt.chal.lane == from &&
		rt.direct.lane != from && r.directFreshLocked(rt, now) {
		contested = true
	}
	if o.mayProve(rt) {
		if o.Hop0 && r.cameTheWayLocked(s, from) {
			r.heardLocked(s, from, now, false, o.Signed)
		}
		r.answeredLocked(o, now)
	}
	if rt == nil { // heardLocked may have made it
		rt, _ = r.table.Peek(s)
	}
	if k, ok := r.pinnedLocked(s); ok {
		placed = k
	} else if rt != nil && rt.chal.valid() && r.directFreshLocked(rt, now) {
		// Another lane claims the publisher beside a working direct
		// lane: either may be the stale one until the claim is settled
		// (MoveSilence, the ship's ack, a signature).
		disputed = true
	} else if o.Hop0 && r.ownLaneLocked(s, rt, from) {
		placed = from
	} else if rt != nil && rt.direct.proven && r.directFreshLocked(rt, now) {
		placed = rt.direct.lane
	}
	return r.appendLanesOfLocked(dst, ships), contested, placed, disputed
}

func (r *Table) answeredLocked(o PageObs, now time.Duration) {
	s, from, next := o.Publisher, o.From, o.Next
	if o.Relayed {
		r.forwardedLocked(s, from, now)
	}
	if !from.IsValid() || r.configuredLocked(s) {
		return
	}
	// A next-hop is worth a route only from a page that came the way the
	// request went, and only if it may be a target; and never for a ship
	// we sponsor from further up its chain (the seed's rule: no
	// fraternizing from a galaxy straight to a planet or moon; a relay
	// below passes us its publisher's own lane only to hand on to stock
	// requesters, see relay's nextHopFor).
	hint := !r.sim.NoHints && next.IsValid() && next != from && r.HintAllowed(next) &&
		!r.sponsorOfLocked(s)
	rt := r.getLocked(s, false, from)
	hint = hint && r.onRouteLocked(s, rt, from, now)
	if rt == nil && hint {
		rt = r.getLocked(s, true, from)
	}
	if rt == nil {
		return
	}
	ev := EvAnswer
	if o.Signed && o.Hop0 {
		ev = EvSigned
	}
	// A lane's standing changes only on an answer to a request we sent it
	// (or one it had already earned), so spoofed pages cannot promote it.
	switch from {
	case rt.direct.lane:
		if rt.direct.waiting != 0 || rt.direct.proven {
			rt.direct.answer(now)
			rt.step(ev)
		}
		return // nothing is tighter than direct
	case rt.chal.lane:
		if rt.chal.waiting != 0 || rt.chal.proven {
			rt.chal.answer(now)
			rt.chalAnswered = now
			rt.stepChallenger(ev)
			r.changes += settle(rt, now, &r.cfg, r.clock)
		}
		return // a challenger offers no next step until it is direct
	case rt.hint.lane:
		if rt.hint.waiting != 0 || rt.hint.proven {
			rt.hint.answer(now)
		}
	case rt.base.lane:
		if rt.base.waiting != 0 || rt.base.proven {
			rt.base.answer(now)
		}
	}
	if !hint || next == rt.direct.lane || next == rt.hint.lane || next == rt.base.lane ||
		next == rt.chal.lane || now < rt.hintHold ||
		(next == rt.bad && now < rt.badUntil) {
		return
	}
	switch {
	case from == rt.hint.lane && rt.hint.valid() && rt.hint.proven:
		// The hint proved itself and offers the next step.
		rt.base = rt.hint
		rt.hint = path{lane: next}
	case from == rt.base.lane && rt.base.valid() && !rt.hint.proven:
		// Replace an unproven hint with the newer one.
		rt.hint = path{lane: next}
	case !rt.hint.valid() && !rt.base.valid():
		// The page came up the sponsorship chain: start tightening.
		rt.hint = path{lane: next}
	default:
		// A page through a lane looser than what we are trying (a late
		// duplicate, say) must not undo a tighter route (#2025).
		return
	}
	r.changes++
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
	var chainBuf [8]lane.Ship
	for _, sp := range r.sponsors.AppendChain(chainBuf[:0], s) {
		if sp == s {
			continue
		}
		if sp == r.self {
			break
		}
		if k, ok := r.static[sp]; ok && k == from {
			return true
		}
		if k, ok := r.relays[sp]; ok && k == from {
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
	if !from.IsValid() {
		return false
	}
	if rt != nil && (from == rt.direct.lane || from == rt.hint.lane || from == rt.base.lane) {
		return true
	}
	if k, ok := r.static[s]; ok && k == from {
		return true
	}
	if k, ok := r.relays[s]; ok && k == from {
		return true
	}
	k, ok := r.pinnedLocked(s)
	return ok && k == from
}

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
		if !ok || v.fwd.lane != from || (v.fwd.waiting == 0 && !v.fwd.proven) {
			continue
		}
		if !v.fwd.proven {
			r.changes++
		}
		v.fwd.answer(now)
		return
	}
}

func (p *path) answer(now time.Duration) {
	p.proven = true
	p.fails = 0
	p.waiting = 0
	p.heard = now
}

// candidate is one lane considered by a plan.
type candidate struct {
	lane   lane.Key
	proven bool
	busy   bool // an unproven lane with a probe outstanding (path.busy)
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
}

// Route plans q into p and commits the plan, under one lock: for callers
// that send whatever they plan (the endpoint). It reports whether the plan
// has targets. A relay, which must ask its pending table and its budgets
// before it sends, plans (PlanInto) and commits (Commit) as two steps.
func (r *Table) Route(p *Plan, q Query, now time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.planLocked(p, q, now)
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
	r.planLocked(p, q, now)
}

// Commit records that p, made at or before now, was sent: each of its
// target lanes that is a path of the receiver's route starts waiting for an
// answer, and a sender named by its query is recorded as contacting us.
// Committing a plan with no targets records only the sender.
func (r *Table) Commit(p *Plan, now time.Duration) {
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
			for i := 0; i < p.N; i++ {
				for _, q := range [...]*path{&rt.direct, &rt.hint, &rt.base, &rt.chal} {
					if q.valid() && q.lane == p.Lanes[i] && q.waiting == 0 {
						q.waiting = now
					}
				}
			}
		}
		for i := 0; i < p.N; i++ {
			if !p.fwdOK[i] {
				continue
			}
			sp := r.getLocked(p.fwd[i], true, p.q.From)
			if sp == nil {
				continue
			}
			r.changes += expireFwd(sp, now, &r.cfg)
			if sp.fwd.lane != p.Lanes[i] {
				sp.fwd = path{lane: p.Lanes[i]}
			}
			if sp.fwd.waiting == 0 {
				sp.fwd.waiting = now
			}
		}
	}
	if p.q.Learn {
		r.heardLocked(p.q.Sender, p.q.From, now, true, false)
	}
}

// planLocked chooses the lanes for q at now. It reads the table only: the
// receiver's route is judged as expiry would leave it at now, on a copy.
func (r *Table) planLocked(p *Plan, q Query, now time.Duration) {
	*p = Plan{q: q}
	t := &p.Targets
	var cands [8]candidate
	n := 0
	// done is set once a proven candidate is in: looser candidates are
	// never chosen (the rubric takes the tightest proven one and the one
	// just tighter), so the walk stops there.
	done := false
	selfKeys := *r.selfKeys.Load()
	add := func(c candidate) {
		if done || !c.lane.IsValid() || slices.Contains(selfKeys, c.lane) || n == len(cands) {
			return
		}
		if c.lane == q.From {
			t.Looped = true
			return
		}
		for i := 0; i < n; i++ {
			if cands[i].lane == c.lane {
				return
			}
		}
		cands[n] = c
		n++
		done = c.proven
	}
	var fallback candidate
	s := q.Rcvr
	// A configured lane wins over anything learned (ConfiguredWins), or
	// comes after the ship's learned lanes.
	configured := func() {
		if k, ok := r.static[s]; ok {
			add(candidate{lane: k, proven: true})
			return
		}
		if len(r.relays) > 0 { // usually none: skip the lookup
			if k, ok := r.relays[s]; ok {
				add(candidate{lane: k, proven: true})
			}
		}
	}
	if s != r.self && r.cfg.ConfiguredWins {
		configured()
	}
	if k, ok := r.pinnedLocked(s); ok {
		add(candidate{lane: k, proven: true})
	}
	// chal is the challenger to probe beside the plan's known-good lane.
	var chal candidate
	if v, ok := r.table.Peek(s); ok && !done {
		rt := v
		if probesDue(v, now, &r.cfg) || settleDue(v, now, &r.cfg, r.clock) || expiryDue(v, now, &r.cfg, r.clock) {
			// Judge the route as the tick will leave it, on a copy.
			c := *v
			advance(&c, now, &r.cfg, r.clock)
			rt = &c
		}
		if r.directFreshLocked(rt, now) {
			add(candidate{lane: rt.direct.lane, proven: rt.direct.proven, busy: rt.direct.busy()})
			if c := &rt.chal; c.valid() && (c.proven || c.waiting == 0) && c.lane != q.From && !slices.Contains(selfKeys, c.lane) {
				chal = candidate{lane: c.lane, proven: c.proven}
			}
		}
		add(candidate{lane: rt.hint.lane, proven: rt.hint.proven, busy: rt.hint.busy()})
		add(candidate{lane: rt.base.lane, proven: rt.base.proven, busy: rt.base.busy()})
	}
	if s != r.self && !done {
		if !r.cfg.ConfiguredWins {
			configured()
		}
		var chainBuf [8]lane.Ship
		chain := r.sponsors.AppendChain(chainBuf[:0], s)
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
			if r.sim.GalaxyOnly && sp.Class() != lane.Galaxy {
				continue
			}
			if c, held := r.addSponsorLocked(sp, now, add); held && !fallback.lane.IsValid() {
				fallback = c
			}
		}
	}
	if n == 0 && fallback.lane.IsValid() {
		// Every way left is a sponsor set aside for not forwarding: try
		// it rather than nothing.
		add(fallback)
		t.Sponsee = false
	}
	if n == 0 {
		return
	}
	if r.sim.SingleRoute {
		p.setTarget(cands[0])
		return
	}
	// The tightest known-good candidate, or the loosest if none is.
	good := n - 1
	for i := 0; i < n; i++ {
		if cands[i].proven {
			good = i
			break
		}
	}
	switch {
	case chal.lane.IsValid():
		// The challenger is probed beside the lane that works.
		p.setTarget(chal)
	case good > 0 && !cands[good-1].busy:
		// The lane just tighter is tried, one probe at a time while it
		// is unproven.
		p.setTarget(cands[good-1])
	}
	p.setTarget(cands[good])
}

// setTarget appends c to p's targets.
func (p *Plan) setTarget(c candidate) {
	p.Lanes[p.N], p.fwd[p.N], p.fwdOK[p.N] = c.lane, c.fwd, c.fwdOK
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
func (r *Table) addSponsorLocked(sp lane.Ship, now time.Duration, add func(candidate)) (c candidate, held bool) {
	if k, ok := r.relays[sp]; ok {
		add(candidate{lane: k, proven: true})
		return c, false
	}
	k, static := r.static[sp]
	if !static {
		k, static = r.pinnedLocked(sp) // the ship vouched for it: as if configured
	}
	if static && sp.Class() == lane.Galaxy {
		add(candidate{lane: k, proven: true})
		return c, false
	}
	v, has := r.table.Peek(sp)
	if !static {
		if !has || !r.directFreshLocked(v, now) {
			return c, false
		}
		k = v.direct.lane
	}
	c = candidate{lane: k, fwd: sp, fwdOK: true}
	if has {
		fw, badUntil := v.fwd, v.fwdBadUntil
		if fw.waiting != 0 && now-fw.waiting >= r.cfg.ProbeTimeout {
			c := *v
			expireFwd(&c, now, &r.cfg)
			fw, badUntil = c.fwd, c.fwdBadUntil
		}
		if now < badUntil {
			return c, true
		}
		if fw.lane == k {
			c.proven = fw.proven
		}
	}
	add(c)
	return c, false
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

// advanceLocked runs advance on s's route rt in place, holding out a
// challenger lane that lost its slot (heldLocked).
func (r *Table) advanceLocked(s lane.Ship, rt *route, now time.Duration) uint64 {
	changes, lost := advance(rt, now, &r.cfg, r.clock)
	if lost.IsValid() {
		if r.held == nil {
			r.held = newLaneClock(max(MinHeldSlots, r.cfg.LaneClockSlots/HeldSlotsDivisor), r.srcSeed^heldSeedMix)
		}
		r.held.hear(holdHash(s, lost), now)
	}
	return changes
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

// Info is a snapshot of one ship's route, for logs, tests and tools.
type Info struct {
	Direct, Hint, Base       lane.Key
	DirectProven, HintProven bool
	BaseProven               bool
	DirectHeard              time.Duration
	// Challenger is a lane heard as the ship while its direct lane works,
	// not yet trusted (see Table); ChallengerProven once it has answered.
	Challenger       lane.Key
	ChallengerProven bool
	// Forwarder is the ship's lane as a forwarder for ships below it,
	// proven once a page for one of them came back from it.
	Forwarder       lane.Key
	ForwarderProven bool
	// State is the direct lane's state, ChallengerState the challenger's
	// (state.go).
	State           LaneState
	ChallengerState ChallengerState
}

// infoOf returns v's snapshot.
func infoOf(v *route) Info {
	return Info{
		Direct: v.direct.lane, DirectProven: v.direct.proven, DirectHeard: v.direct.heard,
		Hint: v.hint.lane, HintProven: v.hint.proven,
		Base: v.base.lane, BaseProven: v.base.proven,
		Challenger: v.chal.lane, ChallengerProven: v.chal.proven,
		Forwarder: v.fwd.lane, ForwarderProven: v.fwd.proven,
		State: v.state, ChallengerState: v.chalState,
	}
}

// Info returns a snapshot of s's route.
func (r *Table) Info(s lane.Ship) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.table.Peek(s)
	if !ok {
		return Info{}, false
	}
	return infoOf(v), true
}

// Each calls f with a snapshot of every ship's route, least recently used
// first, under the table's lock: f must not call back into the table.
func (r *Table) Each(f func(lane.Ship, Info)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.table.Keys() {
		v, _ := r.table.Peek(s)
		f(s, infoOf(v))
	}
}

// IsSelf reports whether k is a lane of this process: one added by AddSelf,
// or a loopback address with a port added by AddSelfPort. It takes no lock.
func (r *Table) IsSelf(k lane.Key) bool {
	if slices.Contains(*r.selfKeys.Load(), k) {
		return true
	}
	ports := *r.selfPorts.Load()
	return len(ports) > 0 && slices.Contains(ports, k.Port) && netip.AddrFrom16(k.IP).Unmap().IsLoopback()
}

// AppendLanesOf appends to dst the known lanes of ships: each one's static
// lane and its direct lane (fresh or not: a sponsor that has gone quiet is
// still our sponsor).
func (r *Table) AppendLanesOf(dst []lane.Key, ships []lane.Ship) []lane.Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.appendLanesOfLocked(dst, ships)
}

func (r *Table) appendLanesOfLocked(dst []lane.Key, ships []lane.Ship) []lane.Key {
	for _, s := range ships {
		if k, ok := r.static[s]; ok {
			dst = append(dst, k)
		}
		if k, ok := r.pinnedLocked(s); ok {
			dst = append(dst, k)
		}
		if v, ok := r.table.Peek(s); ok && v.direct.valid() {
			dst = append(dst, v.direct.lane)
		}
	}
	return dst
}
