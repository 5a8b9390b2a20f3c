package route

import (
	"sync/atomic"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// laneClock records, for each lane, when anything last arrived from it, so
// that a lane's liveness is judged by what is heard from it (vere's rule:
// a peer heard from within the last few seconds is alive), not by whether
// each request sent to it is answered: a request for a value not grown yet
// goes unanswered by design.
//
// It is a fixed array of slots indexed by a hash of the lane, written
// without locks from every reader: a slot holds the lane's 64-bit hash and
// the time. A collision overwrites another lane's record, which can only
// make that lane look silent (its probes then count as they did before
// this clock existed); a false "heard" needs two lanes with the same 64-bit
// hash. The two words of a slot are written separately, so a reader racing
// a writer may see a new hash with an older time: it then judges by an
// older arrival, never a newer one.
type laneClock struct {
	slots []laneSlot
	mask  uint64
	// seed is mixed into every lane's hash, so that which lanes share a
	// slot cannot be worked out from outside: a lane made to look silent
	// by collisions is what lets a proven challenger displace it.
	seed uint64
}

type laneSlot struct {
	hash atomic.Uint64
	at   atomic.Int64
}

// newLaneClock returns a clock of n slots, n a power of two.
func newLaneClock(n int, seed uint64) *laneClock {
	return &laneClock{slots: make([]laneSlot, n), mask: uint64(n - 1), seed: seed}
}

// laneHash is lane *k's seeded hash, never 0: 0 marks an empty slot. The
// lane is read in place (lane.HashOf); the per-datagram paths pass lanes
// by pointer.
func (c *laneClock) laneHash(k *lane.Key) uint64 { return lane.Mix64(lane.HashOf(k)^c.seed) | 1 }

// hear records that something arrived from *k at now.
func (c *laneClock) hear(k *lane.Key, now time.Duration) {
	h := c.laneHash(k)
	s := &c.slots[h&c.mask]
	if s.hash.Load() != h {
		s.hash.Store(h)
	} else if time.Duration(s.at.Load()) >= now {
		return
	}
	s.at.Store(int64(now))
}

// heardSince reports whether something arrived from *k at or after t.
func (c *laneClock) heardSince(k *lane.Key, t time.Duration) bool {
	h := c.laneHash(k)
	s := &c.slots[h&c.mask]
	return s.hash.Load() == h && time.Duration(s.at.Load()) >= t
}
