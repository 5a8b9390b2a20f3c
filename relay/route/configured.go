package route

import (
	"maps"
	"math/bits"

	"github.com/urbit-relay/relay/lane"
)

// configured is the operator's lanes, owned by the table: one immutable
// snapshot, replaced whole (SetStatic, SetStaticLane, SetRelays) and never
// written in place, so that Configured reads it without the table's lock.
// Besides the maps it keeps two open-addressing indexes of the same facts
// (ships, lanes), which the per-datagram paths read: a probe of a few
// words under a seeded hash, against a Go map's hashing of a 16- or
// 18-byte key, which profiles put at a fifth of the route table's share of
// a round trip.
type configured struct {
	static map[lane.Ship]lane.Key // galaxy (and operator-pinned) lanes
	relays map[lane.Ship]lane.Key // configured relays: lanes known to forward
	ships  []confShip             // every ship of static and relays; nil when none
	lanes  []confLane             // every lane of static and relays; nil when none
	seed   uint64
	// seedHi0 is lane.Mix64(seed): the ship hash's first round for a
	// ship whose high word is 0, as every galaxy, star, planet and moon's
	// is (a comet's is not), computed once.
	seedHi0 uint64
}

// confShip is one ship's configured lanes, a slot of configured.ships.
type confShip struct {
	ship          lane.Ship
	static, relay lane.Key
	hasStatic     bool // static holds ship (its lane is static)
	hasRelay      bool // relays holds ship (its lane is relay)
	used          bool // the slot holds a ship
}

// confLane is a slot of configured.lanes.
type confLane struct {
	lane lane.Key
	used bool
}

// newConfigured returns the snapshot of static and relays, which it
// keeps (the caller's copies, never written again; either may be nil),
// indexed under seed.
func newConfigured(static, relays map[lane.Ship]lane.Key, seed uint64) *configured {
	c := &configured{static: static, relays: relays, seed: seed, seedHi0: lane.Mix64(seed)}
	n := len(static) + len(relays)
	if n == 0 {
		return c
	}
	// At most half full: a miss (most lookups) ends at an empty slot
	// within a probe or two.
	size := 2 << bits.Len(uint(n))
	c.ships = make([]confShip, size)
	c.lanes = make([]confLane, size)
	for s, k := range static {
		e := c.shipSlot(s)
		e.ship, e.used, e.static, e.hasStatic = s, true, k, true
		c.addLane(k)
	}
	for s, k := range relays {
		e := c.shipSlot(s)
		e.ship, e.used, e.relay, e.hasRelay = s, true, k, true
		c.addLane(k)
	}
	return c
}

// shipSlot returns s's slot in ships, or the empty slot where s would go.
// ships must not be nil.
func (c *configured) shipSlot(s lane.Ship) *confShip {
	mask := uint64(len(c.ships) - 1)
	for i := c.shipHash(s) & mask; ; i = (i + 1) & mask {
		if e := &c.ships[i]; !e.used || e.ship == s {
			return e
		}
	}
}

// shipHash is the seeded hash of s that places it in ships:
// Mix64(s.Lo ^ Mix64(s.Hi ^ seed)), the inner round precomputed when s.Hi
// is 0.
func (c *configured) shipHash(s lane.Ship) uint64 {
	h := c.seedHi0
	if s.Hi != 0 {
		h = lane.Mix64(s.Hi ^ c.seed)
	}
	return lane.Mix64(s.Lo ^ h)
}

// ship returns s's configured lanes, nil when s has none.
func (c *configured) ship(s lane.Ship) *confShip {
	if c.ships == nil {
		return nil
	}
	if e := c.shipSlot(s); e.used {
		return e
	}
	return nil
}

// isOwn reports whether *k is s's static or relay lane (e, s's
// configured lanes, may be nil: none), read in place (see PageArrived).
func (e *confShip) isOwn(k *lane.Key) bool {
	return e != nil && (e.hasStatic && e.static == *k || e.hasRelay && e.relay == *k)
}

// laneSlot returns k's slot in lanes, or the empty slot where k would go.
func (c *configured) laneSlot(k lane.Key) *confLane {
	mask := uint64(len(c.lanes) - 1)
	for i := lane.Mix64(k.Hash()^c.seed) & mask; ; i = (i + 1) & mask {
		if e := &c.lanes[i]; !e.used || e.lane == k {
			return e
		}
	}
}

func (c *configured) addLane(k lane.Key) {
	e := c.laneSlot(k)
	e.lane, e.used = k, true
}

// hasLane reports whether k is a lane of static or relays.
func (c *configured) hasLane(k lane.Key) bool {
	return c.lanes != nil && c.laneSlot(k).used
}

// SetStatic replaces the operator-configured lanes (galaxies from --galaxy or
// DNS, pinned ships). They are always considered known-good.
func (r *Table) SetStatic(lanes map[lane.Ship]lane.Key) {
	m := maps.Clone(lanes)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conf.Store(newConfigured(m, r.conf.Load().relays, r.srcSeed))
	r.quiet.Add(1)
}

// SetStaticLane sets or, with an invalid key, removes one configured lane.
func (r *Table) SetStaticLane(s lane.Ship, k lane.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cf := r.conf.Load()
	if old, ok := cf.static[s]; ok == k.IsValid() && old == k {
		return
	}
	m := make(map[lane.Ship]lane.Key, len(cf.static)+1)
	maps.Copy(m, cf.static)
	if k.IsValid() {
		m[s] = k
	} else {
		delete(m, s)
	}
	r.conf.Store(newConfigured(m, cf.relays, r.srcSeed))
	r.quiet.Add(1)
}

// SetRelays replaces the configured relays: ships whose lanes forward
// requests for the ships below them (relays of our own, or any the operator
// trusts), known-good as sponsors from the start. A configured relay's lane
// is also its lane for requests to the ship itself.
func (r *Table) SetRelays(relays map[lane.Ship]lane.Key) {
	m := maps.Clone(relays)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conf.Store(newConfigured(r.conf.Load().static, m, r.srcSeed))
	r.quiet.Add(1)
}

// Configured reports whether k is a lane the operator configured (SetStatic,
// SetStaticLane, SetRelays): the relay trusts such lanes (they learn no
// ship's lane by claiming it, and the amplification budget does not count
// them). It takes no lock and allocates nothing: the relay asks it of
// datagrams.
func (r *Table) Configured(k lane.Key) bool {
	return r.conf.Load().hasLane(k)
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
	return r.conf.Load().ship(s) != nil
}

// pin is where the fronted ship placed a ship (Pin), and the lane that
// placement replaced, for RevertPin (invalid: none).
type pin struct {
	lane, prev lane.Key
}

// Pin routes s to lane k alone until Unpin: the fronted ship vouched for
// k (relay/vouch.go decides when, from its evidence; the table owns the
// placement). Whatever was learned about s is dropped, and nothing
// learned from the wire about s is kept while the pin holds (as for a
// configured lane, which still wins). The lane it replaces is kept for
// RevertPin. An invalid lane or one of this process is ignored. Past
// MaxPins ships the least recently pinned is unpinned.
func (r *Table) Pin(s lane.Ship, k lane.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !k.IsValid() || r.IsSelf(&k) {
		return
	}
	p, ok := r.pins.Peek(s)
	if ok && p.lane == k {
		return
	}
	r.changes++
	r.quiet.Add(1)
	if ok {
		// Changed in place, and made the most recent by Add: the pin
		// is read in place on every request's and page's path
		// (pinRefLocked).
		p.prev, p.lane = p.lane, k
		r.pins.Add(s, p)
	} else {
		r.pins.Add(s, &pin{lane: k})
	}
	r.table.Remove(s)
}

// RevertPin puts s's pin back on the lane its last Pin replaced (the
// fronted ship's ack turned out to vouch for two lanes at once), or
// unpins s when that pin replaced none. Nothing changes when s is not
// pinned or is back there already.
func (r *Table) RevertPin(s lane.Ship) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pins.Peek(s)
	switch {
	case !ok || p.lane == p.prev:
	case !p.prev.IsValid():
		r.pins.Remove(s)
		r.quiet.Add(1)
	default:
		r.changes++
		r.quiet.Add(1)
		p.lane = p.prev
		r.pins.Add(s, p)
		r.table.Remove(s)
	}
}

// pinnedLocked returns s's pinned lane (Pin). Most relays pin nothing
// (only a fronting relay does), so an empty table is not hashed into:
// this is on every request's and page's path.
func (r *Table) pinnedLocked(s lane.Ship) (lane.Key, bool) {
	if k := r.pinRefLocked(s); k != nil {
		return *k, true
	}
	return lane.Key{}, false
}

// pinRefLocked is pinnedLocked's lane in place, nil when s is not pinned:
// valid while mu is held. A lane.Key returned by value is moved whole,
// and the loads of it that follow stall on that move (see PageArrived).
func (r *Table) pinRefLocked(s lane.Ship) *lane.Key {
	if r.pins.Len() == 0 {
		return nil
	}
	if p, ok := r.pins.Peek(s); ok {
		return &p.lane
	}
	return nil
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
	if r.pins.Remove(s) {
		r.quiet.Add(1)
	}
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
	cf := r.conf.Load()
	for _, s := range ships {
		// Its static lane, appended from where it is (see
		// PageArrived: a lane.Key copied stalls the loads after it).
		if e := cf.ship(s); e != nil && e.hasStatic {
			dst = append(dst, e.static)
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

// staticLane returns e's static lane (e may be nil: none).
func (e *confShip) staticLane() (lane.Key, bool) {
	if e != nil && e.hasStatic {
		return e.static, true
	}
	return lane.Key{}, false
}
