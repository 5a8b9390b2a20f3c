package daemon

import (
	"maps"
	"net/netip"
	"sync"

	"github.com/urbit-relay/relay/lane"
)

// LaneSetter is where merged lanes go: *relay.Relay, or a fake in tests.
type LaneSetter interface {
	SetLanes(galaxies, pinned map[lane.Ship]netip.AddrPort)
}

// Lanes merges the lanes the relay is configured with: galaxies from the
// config (which win) over galaxies resolved by DNS, and pinned lanes. Each
// change replaces the relay's whole set. Its methods may be called from
// any goroutine: a reload and the resolver do.
type Lanes struct {
	// Static after construction.
	relay   LaneSetter
	changed func(galaxies, pinned int) // may be nil

	mu       sync.Mutex
	galaxies map[lane.Ship]netip.AddrPort // guarded by mu
	pinned   map[lane.Ship]netip.AddrPort // guarded by mu
	resolved map[lane.Ship]netip.AddrPort // guarded by mu
}

// NewLanes returns lanes, none yet, that set r's; changed, if not nil, is
// called under the lock with the merged counts after each change.
func NewLanes(r LaneSetter, changed func(galaxies, pinned int)) *Lanes {
	return &Lanes{relay: r, changed: changed}
}

// SetConfigured replaces the configured galaxy and pinned lanes (at start
// and on every reload). The maps are kept, not copied: the caller must not
// change them after.
func (s *Lanes) SetConfigured(galaxies, pinned map[lane.Ship]netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.galaxies, s.pinned = galaxies, pinned
	s.applyLocked()
}

// SetResolved replaces the DNS-resolved galaxy lanes (each round).
func (s *Lanes) SetResolved(resolved map[lane.Ship]netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolved = resolved
	s.applyLocked()
}

func (s *Lanes) applyLocked() {
	merged := make(map[lane.Ship]netip.AddrPort, len(s.resolved)+len(s.galaxies))
	maps.Copy(merged, s.resolved)
	maps.Copy(merged, s.galaxies)
	s.relay.SetLanes(merged, s.pinned)
	if s.changed != nil {
		s.changed(len(merged), len(s.pinned))
	}
}
