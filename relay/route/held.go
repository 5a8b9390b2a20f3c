package route

import (
	"time"

	"github.com/urbit-relay/relay/lane"
)

// holdRecord is Table.held: when each (ship, lane) pair (holdHash) last
// lost the ship's challenger slot, for BadLaneHold. It is set-associative,
// HeldWays entries a set, and a hold replaces the entry of its set held
// longest ago: two pairs whose hashes share a set are both kept. (With one
// entry a set, two squatter lanes that shared a slot forgot each other's
// hold at every loss and took the slot in turns for as long as they
// liked; TestChallengerSlotCannotBeSquatted failed in about 3 % of seeds.)
// A hold is forgotten only when HeldWays+1 pairs of one set lose within
// BadLaneHold, which an attacker who does not know the seed can only reach
// by spending many lanes, each of them a probe timeout of occupancy. It is
// written and read under the table's lock.
type holdRecord struct {
	sets []holdSet
	mask uint64
	seed uint64
}

type holdSet [HeldWays]holdEntry

// holdEntry is one hold: the pair's seeded hash (0: empty) and when it
// lost the slot.
type holdEntry struct {
	hash uint64
	at   time.Duration
}

// newHoldRecord returns a record of n entries (n a power of two, at least
// HeldWays) under seed.
func newHoldRecord(n int, seed uint64) *holdRecord {
	sets := max(n/HeldWays, 1)
	return &holdRecord{sets: make([]holdSet, sets), mask: uint64(sets - 1), seed: seed}
}

// hashOf is k's seeded hash, never 0.
func (h *holdRecord) hashOf(k lane.Key) uint64 { return lane.Mix64(k.Hash()^h.seed) | 1 }

// setOf returns the set a hash x belongs to.
func (h *holdRecord) setOf(x uint64) *holdSet { return &h.sets[(x>>32)&h.mask] }

// hold records that k lost at now: its entry if it has one, else the
// entry of its set held longest ago (an empty one first).
func (h *holdRecord) hold(k lane.Key, now time.Duration) {
	x := h.hashOf(k)
	set := h.setOf(x)
	oldest := 0
	for i := range set {
		e := &set[i]
		if e.hash == x {
			e.at = max(e.at, now)
			return
		}
		if e.hash == 0 || (set[oldest].hash != 0 && e.at < set[oldest].at) {
			oldest = i
		}
	}
	set[oldest] = holdEntry{hash: x, at: now}
}

// heldSince reports whether k lost at or after t.
func (h *holdRecord) heldSince(k lane.Key, t time.Duration) bool {
	x := h.hashOf(k)
	for _, e := range h.setOf(x) {
		if e.hash == x {
			return e.at >= t
		}
	}
	return false
}
