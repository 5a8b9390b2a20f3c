package daemon

import (
	"maps"
	"net/netip"
	"sync"
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// recordLanes is a LaneSetter that keeps the last lanes set.
type recordLanes struct {
	mu               sync.Mutex
	galaxies, pinned map[lane.Ship]netip.AddrPort // guarded by mu
	calls            int                          // guarded by mu
}

func (r *recordLanes) SetLanes(galaxies, pinned map[lane.Ship]netip.AddrPort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.galaxies, r.pinned = galaxies, pinned
	r.calls++
}

// numGalaxies returns how many galaxy lanes were set last.
func (r *recordLanes) numGalaxies() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.galaxies)
}

var (
	zod  = lane.ShipFromUint64(0)
	nec  = lane.ShipFromUint64(1)
	star = lane.ShipFromUint64(256)
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

type laneMap = map[lane.Ship]netip.AddrPort

func checkLanes(t *testing.T, step string, r *recordLanes, galaxies, pinned laneMap) {
	t.Helper()
	if !maps.Equal(r.galaxies, galaxies) || !maps.Equal(r.pinned, pinned) {
		t.Errorf("%s: relay has galaxies %v pinned %v, want %v and %v", step, r.galaxies, r.pinned, galaxies, pinned)
	}
}

// TestLanesConfiguredWin: a galaxy both configured and resolved keeps its
// configured lane; the others resolved are added; the counts reported are
// of the merged set.
func TestLanesConfiguredWin(t *testing.T) {
	var r recordLanes
	var nGalaxies, nPinned int
	s := NewLanes(&r, func(g, p int) { nGalaxies, nPinned = g, p })

	s.SetConfigured(laneMap{zod: ap("192.0.2.1:13337")}, laneMap{star: ap("192.0.2.7:4000")})
	checkLanes(t, "configured", &r, laneMap{zod: ap("192.0.2.1:13337")}, laneMap{star: ap("192.0.2.7:4000")})

	s.SetResolved(laneMap{zod: ap("198.51.100.1:13337"), nec: ap("198.51.100.2:13338")})
	checkLanes(t, "resolved", &r, laneMap{zod: ap("192.0.2.1:13337"), nec: ap("198.51.100.2:13338")}, laneMap{star: ap("192.0.2.7:4000")})
	if nGalaxies != 2 || nPinned != 1 {
		t.Errorf("counts %d galaxies %d pinned, want 2 and 1", nGalaxies, nPinned)
	}
	if r.calls != 2 {
		t.Errorf("set the relay's lanes %d times, want once a change", r.calls)
	}
}

// TestLanesReload: a reload (SIGHUP) replaces the configured lanes whole:
// a galaxy no longer configured falls back to its resolved lane, a pinned
// lane left out is gone; a DNS round replaces the resolved set whole and
// leaves the configured one alone.
func TestLanesReload(t *testing.T) {
	var r recordLanes
	s := NewLanes(&r, nil)
	s.SetConfigured(laneMap{zod: ap("192.0.2.1:13337"), nec: ap("192.0.2.2:13338")}, laneMap{star: ap("192.0.2.7:4000")})
	s.SetResolved(laneMap{zod: ap("198.51.100.1:13337")})

	s.SetConfigured(laneMap{nec: ap("192.0.2.22:13338")}, nil)
	checkLanes(t, "reload", &r, laneMap{zod: ap("198.51.100.1:13337"), nec: ap("192.0.2.22:13338")}, nil)

	s.SetResolved(laneMap{nec: ap("198.51.100.2:13338")})
	checkLanes(t, "next round", &r, laneMap{nec: ap("192.0.2.22:13338")}, nil)

	s.SetConfigured(nil, nil)
	checkLanes(t, "all unconfigured", &r, laneMap{nec: ap("198.51.100.2:13338")}, nil)
}
