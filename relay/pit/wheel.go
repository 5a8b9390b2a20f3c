package pit

// The timer wheel: one intrusive doubly linked list per tick, in insertion
// order, over
// p.wheelMask+1 buckets, bucket t&wheelMask holding the entries scheduled at
// tick t. An entry is scheduled at its expiry tick when created; a bump only
// moves its expiry, leaving it in the earlier bucket (lazy re-scheduling).
// When the wheel reaches that bucket, the entry is deleted if expired and
// otherwise re-linked at its current expiry. Invariants (ticks compared
// modulo 2^32): every live entry is linked exactly once, at sched > done,
// and sched <= expiry unless a goroutine's clock lagged behind the wheel;
// no linked entry has sched before low (so eviction, which looks for the
// earliest entry, skips the empty buckets it has already walked).

// scheduleLocked links entry i into the bucket of tick t, or of done+1 if t
// is already processed.
func (s *shard) scheduleLocked(i uint32, t uint32) {
	if int32(t-s.done) <= 0 {
		t = s.done + 1
	}
	s.linkLocked(i, t)
}

// linkLocked appends entry i to the bucket of tick t. Buckets are kept in
// insertion order, so eviction, which takes a bucket's head, sheds the
// oldest of the entries due at the same tick, not the newest: under a
// flood that fills the table, a request that has just arrived survives
// until the entries made before it are gone.
func (s *shard) linkLocked(i uint32, t uint32) {
	if int32(t-s.low) < 0 {
		s.low = t
	}
	b := t & s.p.wheelMask
	e := &s.entries[i]
	e.sched = t
	e.next = nilIdx
	e.prev = s.tails[b]
	if e.prev != nilIdx {
		s.entries[e.prev].next = i
	} else {
		s.heads[b] = i
	}
	s.tails[b] = i
}

// unlinkLocked removes entry i from its bucket.
func (s *shard) unlinkLocked(i uint32) {
	e := &s.entries[i]
	if e.prev != nilIdx {
		s.entries[e.prev].next = e.next
	} else {
		s.heads[e.sched&s.p.wheelMask] = e.next
	}
	if e.next != nilIdx {
		s.entries[e.next].prev = e.prev
	} else {
		s.tails[e.sched&s.p.wheelMask] = e.prev
	}
}

// expireLocked advances the wheel to nowTick, deleting the entries expired at
// nowTick and re-scheduling the bumped ones it meets, and returns the number
// deleted. It visits each tick since the last call once, and at most every
// bucket once however long the gap; a nowTick at or behind the wheel is a
// no-op.
func (s *shard) expireLocked(nowTick uint32) int {
	s.startLocked(nowTick)
	gap := nowTick - s.done
	if gap == 0 || int32(gap) < 0 {
		return 0
	}
	buckets := s.p.wheelMask + 1
	steps := min(gap, buckets)
	removed := 0
	for t := nowTick - steps + 1; steps > 0; t, steps = t+1, steps-1 {
		b := t & s.p.wheelMask
		i := s.heads[b]
		s.heads[b], s.tails[b] = nilIdx, nilIdx
		for i != nilIdx {
			e := &s.entries[i]
			next := e.next
			if expired(e.expiry, nowTick) {
				s.dropLocked(s.posOfLocked(i), i)
				removed++
			} else {
				// Not yet due (bumped, or scheduled a whole wheel turn
				// ahead): link it at its expiry, which is after nowTick,
				// where done will be once the loop ends.
				s.linkLocked(i, e.expiry)
			}
			i = next
		}
	}
	s.done = nowTick
	if int32(s.low-nowTick) <= 0 {
		s.low = nowTick + 1
	}
	return removed
}

// evictLocked deletes the live entry nearest expiry and reports whether it
// was live at nowTick (false: it had expired, and is counted as such). The
// shard must hold at least one entry. It walks ticks from low upward;
// bumped entries met on the way are re-linked at their expiry (work a later
// Expire would have done), so the first entry found due at its own tick has
// the earliest expiry in the shard.
func (s *shard) evictLocked(nowTick uint32) bool {
	for t := s.low; int32(t-s.done) <= int32(s.p.wheelMask+1); t++ {
		b := t & s.p.wheelMask
		for i := s.heads[b]; i != nilIdx; {
			e := &s.entries[i]
			next := e.next
			if e.sched == t {
				if int32(e.expiry-t) <= 0 {
					s.low = t
					return s.shedLocked(i, nowTick)
				}
				s.unlinkLocked(i)
				s.scheduleLocked(i, e.expiry)
			}
			i = next
		}
	}
	// Every entry is scheduled more than a wheel turn ahead, which only a
	// clock far ahead of Expire's produces: fall back to a scan.
	victim, best := nilIdx, int32(0)
	for i := range s.entries {
		e := &s.entries[i]
		if e.nreq == 0 {
			continue
		}
		if d := int32(e.expiry - nowTick); victim == nilIdx || d < best {
			victim, best = uint32(i), d
		}
	}
	return s.shedLocked(victim, nowTick)
}

// shedLocked deletes entry i for lack of room and counts it.
func (s *shard) shedLocked(i uint32, nowTick uint32) bool {
	live := !expired(s.entries[i].expiry, nowTick)
	s.removeLocked(i)
	if live {
		s.c.evicted++
	} else {
		s.c.expired++
	}
	return live
}
