package pit

import "sync/atomic"

// Stats is a snapshot of a Table's counters. Counters only grow; each is the
// sum over shards, read atomically shard by shard, so a snapshot taken while
// other goroutines mutate the table is consistent per counter, not across
// counters.
type Stats struct {
	// Entries is the number of live entries (Len at the time of the
	// snapshot).
	Entries int

	Added           uint64 // entries created (VerdictForwardNew)
	Retransmits     uint64 // VerdictForwardRetransmit
	Aggregated      uint64 // VerdictAggregated
	Joined          uint64 // VerdictForwardJoined
	RequesterCapped uint64 // VerdictRequesterCapped and VerdictCappedForward
	// OverflowShareCapped counts the RequesterCapped whose source held its
	// share of the overflow pool (Config.MaxOverflowPerSource).
	OverflowShareCapped uint64
	// EntryShareCapped counts the RequesterCapped whose source held its
	// share of the entry's requesters: at a full entry, a newcomer whose
	// source, counting it, would hold as many as the entry's largest (see
	// Config.MaxRequestersPerEntry); or one whose source holds
	// Config.MaxRequestersPerSource, when that is set.
	EntryShareCapped uint64
	// Displaced counts the requesters dropped from a full entry to make
	// room for a newcomer from a smaller source (each such newcomer is
	// counted as Aggregated or Joined too).
	Displaced uint64
	Refused   uint64 // VerdictRefused
	// RefusedShare counts the Refused whose source held its fair share of
	// a shard within its reserve (FullReserveDivisor, FullShareDivisor).
	RefusedShare uint64
	SourceCapped uint64 // VerdictSourceCapped
	Evicted      uint64 // live entries shed to make room (ShedOldest)
	Expired      uint64 // entries deleted because their TTL ran out
	Taken        uint64 // entries answered and deleted by Take
	// Restored counts the entries Restore put back (each counted in
	// Added too).
	Restored uint64
}

// counters are one shard's statistics. Written only with the shard's mu held;
// read by Stats and Len from any goroutine without the lock, hence atomics.
type counters struct {
	added               atomic.Uint64
	retransmits         atomic.Uint64
	aggregated          atomic.Uint64
	joined              atomic.Uint64
	requesterCapped     atomic.Uint64
	overflowShareCapped atomic.Uint64
	entryShareCapped    atomic.Uint64
	displaced           atomic.Uint64
	refused             atomic.Uint64
	refusedShare        atomic.Uint64
	sourceCapped        atomic.Uint64
	evicted             atomic.Uint64
	expired             atomic.Uint64
	taken               atomic.Uint64
	restored            atomic.Uint64
}

// live returns the shard's live entry count from its counters. The removal
// counters are loaded before added: every removal they count followed the
// addition it removes, so the result is never negative, though it may count
// an entry added and removed after the loads began.
func (c *counters) live() int {
	removed := c.taken.Load() + c.expired.Load() + c.evicted.Load()
	return int(c.added.Load() - removed)
}

// addTo adds the shard's counters to s.
func (c *counters) addTo(s *Stats) {
	s.Added += c.added.Load()
	s.Retransmits += c.retransmits.Load()
	s.Aggregated += c.aggregated.Load()
	s.Joined += c.joined.Load()
	s.RequesterCapped += c.requesterCapped.Load()
	s.OverflowShareCapped += c.overflowShareCapped.Load()
	s.EntryShareCapped += c.entryShareCapped.Load()
	s.Displaced += c.displaced.Load()
	s.Refused += c.refused.Load()
	s.RefusedShare += c.refusedShare.Load()
	s.SourceCapped += c.sourceCapped.Load()
	s.Evicted += c.evicted.Load()
	s.Expired += c.expired.Load()
	s.Taken += c.taken.Load()
	s.Restored += c.restored.Load()
}
