package pit

// Stats is a snapshot of a Table's counters. Counters only grow; each is the
// sum over shards, each shard's read under its lock, so a snapshot taken
// while other goroutines mutate the table is consistent within a shard, not
// across shards.
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

// counters are one shard's statistics, guarded by the shard's mu: written
// by the operation that counts, read by Stats and Len under the lock. They
// are plain words, not atomics: every Add and Take counts one, and an
// atomic add is a locked instruction, which waits for the stores before it
// to drain (about 5 ns a datagram at the rates cmd/bench drives).
type counters struct {
	added               uint64
	retransmits         uint64
	aggregated          uint64
	joined              uint64
	requesterCapped     uint64
	overflowShareCapped uint64
	entryShareCapped    uint64
	displaced           uint64
	refused             uint64
	refusedShare        uint64
	sourceCapped        uint64
	evicted             uint64
	expired             uint64
	taken               uint64
	restored            uint64
}

// live returns the shard's live entry count from its counters (its mu
// held).
func (c *counters) live() int {
	removed := c.taken + c.expired + c.evicted
	return int(c.added - removed)
}

// addTo adds the shard's counters to s.
func (c *counters) addTo(s *Stats) {
	s.Added += c.added
	s.Retransmits += c.retransmits
	s.Aggregated += c.aggregated
	s.Joined += c.joined
	s.RequesterCapped += c.requesterCapped
	s.OverflowShareCapped += c.overflowShareCapped
	s.EntryShareCapped += c.entryShareCapped
	s.Displaced += c.displaced
	s.Refused += c.refused
	s.RefusedShare += c.refusedShare
	s.SourceCapped += c.sourceCapped
	s.Evicted += c.evicted
	s.Expired += c.expired
	s.Taken += c.taken
	s.Restored += c.restored
}
