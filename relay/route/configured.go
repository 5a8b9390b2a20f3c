package route

import (
	"maps"

	"github.com/urbit-relay/relay/lane"
)

// configured is the operator's lanes, owned by the table: one immutable
// snapshot, replaced whole (SetStatic, SetStaticLane, SetRelays) and never
// written in place, so that Configured reads it without the table's lock.
type configured struct {
	static map[lane.Ship]lane.Key // galaxy (and operator-pinned) lanes
	relays map[lane.Ship]lane.Key // configured relays: lanes known to forward
	lanes  map[lane.Key]struct{}  // every lane of static and relays
}

// newConfigured returns the snapshot of static and relays, which it
// keeps (the caller's copies, never written again; either may be nil).
func newConfigured(static, relays map[lane.Ship]lane.Key) *configured {
	c := &configured{static: static, relays: relays, lanes: make(map[lane.Key]struct{}, len(static)+len(relays))}
	for _, m := range [...]map[lane.Ship]lane.Key{static, relays} {
		for _, k := range m {
			c.lanes[k] = struct{}{}
		}
	}
	return c
}

// SetStatic replaces the operator-configured lanes (galaxies from --galaxy or
// DNS, pinned ships). They are always considered known-good.
func (r *Table) SetStatic(lanes map[lane.Ship]lane.Key) {
	m := maps.Clone(lanes)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conf.Store(newConfigured(m, r.conf.Load().relays))
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
	r.conf.Store(newConfigured(m, cf.relays))
}

// SetRelays replaces the configured relays: ships whose lanes forward
// requests for the ships below them (relays of our own, or any the operator
// trusts), known-good as sponsors from the start. A configured relay's lane
// is also its lane for requests to the ship itself.
func (r *Table) SetRelays(relays map[lane.Ship]lane.Key) {
	m := maps.Clone(relays)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conf.Store(newConfigured(r.conf.Load().static, m))
}

// Configured reports whether k is a lane the operator configured (SetStatic,
// SetStaticLane, SetRelays): the relay trusts such lanes (they learn no
// ship's lane by claiming it, and the amplification budget does not count
// them). It takes no lock and allocates nothing: the relay asks it of
// datagrams.
func (r *Table) Configured(k lane.Key) bool {
	_, ok := r.conf.Load().lanes[k]
	return ok
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
	cf := r.conf.Load()
	if _, ok := cf.static[s]; ok {
		return true
	}
	_, ok := cf.relays[s]
	return ok
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
	if !k.IsValid() || r.IsSelf(k) {
		return
	}
	p, _ := r.pins.Peek(s)
	if p.lane == k {
		return
	}
	r.changes++
	r.pins.Add(s, pin{lane: k, prev: p.lane})
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
	default:
		r.changes++
		r.pins.Add(s, pin{lane: p.prev, prev: p.prev})
		r.table.Remove(s)
	}
}

// pinnedLocked returns s's pinned lane (Pin). Most relays pin nothing
// (only a fronting relay does), so an empty table is not hashed into:
// this is on every request's and page's path.
func (r *Table) pinnedLocked(s lane.Ship) (lane.Key, bool) {
	if r.pins.Len() == 0 {
		return lane.Key{}, false
	}
	p, ok := r.pins.Peek(s)
	return p.lane, ok
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
	r.pins.Remove(s)
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
		if k, ok := cf.static[s]; ok {
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
