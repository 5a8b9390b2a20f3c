package pit

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/urbit-relay/relay/lane"
)

// nilIdx marks the end of a list (wheel bucket, free list, chunk list).
const nilIdx = ^uint32(0)

// entry is one pending request: 56 bytes, no pointers. A slab slot is live
// when nreq > 0 and free otherwise.
type entry struct {
	hash   uint64   // mix(key); mix is a bijection, so equal hashes mean equal keys
	expiry uint32   // tick at which the entry expires (modulo 2^32)
	sched  uint32   // tick of the wheel bucket the entry is linked in; sched <= expiry but for clock skew
	fwdMs  uint32   // millisecond (modulo 2^32) of the last upstream forward
	next   uint32   // next entry in the wheel bucket, or in the free list
	prev   uint32   // previous entry in the wheel bucket; nilIdx at the head
	chunk  uint32   // first overflow chunk, or nilIdx
	first  lane.Key // the first requester
	nreq   uint8    // requesters: first plus nreq-1 in the chunk list
	src    uint16   // sourceSlot(first), when the shard counts entries by source
}

// chunk holds overflow requesters of one entry: 60 bytes, no pointers.
type chunk struct {
	lanes [lanesPerChunk]lane.Key
	src   uint16 // sourceSlot(lanes[0]), the source charged, when chunks are
	next  uint32 // next chunk of the same entry, or in the free list
}

// The source slots fit entry.src and chunk.src, kept in the structs'
// padding so that freeing an entry or chunk needs no hash.
const _ = uint16(SourceSlotsPerShard - 1)

// sourceCount is one per-source counter slot.
type sourceCount struct {
	// entries counts the live entries whose first requester hashes here.
	entries uint32
	// chunks counts the overflow chunks in use whose first lane (the
	// requester that opened the chunk) hashes here.
	chunks uint32
}

// shard is an independently locked part of the table.
type shard struct {
	p params // static after New

	mu sync.Mutex

	// entries is the entry slab; it grows by doubling up to p.entryCap.
	// Guarded by mu.
	entries []entry
	// freeEntry heads the list of free slots in entries, linked by next.
	// Guarded by mu.
	freeEntry uint32
	// n is the number of live entries. Guarded by mu.
	n int

	// slots is the key index: open addressing with linear probing, a power
	// of two long, kept at most 3/4 full. A slot is 0 when empty, else
	// tag<<24 | (entry slot + 1), the tag being the hash's top byte.
	// Guarded by mu.
	slots []uint32
	// slotsView is slots for Prefetch, which takes no lock: a pointer to
	// an immutable copy of the slice header, replaced whenever slots is.
	slotsView atomic.Pointer[[]uint32]

	// chunks is the overflow requester slab; it grows by doubling up to
	// p.chunkCap. Guarded by mu.
	chunks []chunk
	// freeChunk heads the list of free chunks, linked by next. Guarded by mu.
	freeChunk uint32
	// nChunks is the number of chunks in use. Guarded by mu.
	nChunks int

	// heads are the timer wheel's buckets: heads[t&p.wheelMask] is the first
	// entry scheduled at tick t, linked by next/prev. Guarded by mu.
	heads []uint32
	// tails are the buckets' last entries. Guarded by mu.
	tails []uint32
	// done is the last tick the wheel has processed: every linked entry has
	// sched > done (modulo 2^32). Guarded by mu.
	done uint32
	// low is a lower bound on the sched of every linked entry, low > done:
	// the buckets of ticks done+1 .. low-1 are empty. Guarded by mu.
	low uint32
	// started is false until the first operation sets done. Guarded by mu.
	started bool

	// sources are the per-source counters (SourceSlotsPerShard slots, by
	// sourceSlot); nil when no per-source rule is on. Their entries are
	// kept only if p.countEntries, their chunks only if p.chunkShare > 0
	// (otherwise they stay 0), so that a rule's cost is paid only when it
	// is on. Guarded by mu.
	sources []sourceCount

	// c are the shard's counters, written with mu held, read anywhere.
	c counters

	_ [cacheLinePad]byte
}

func (s *shard) init(p params) {
	s.p = p
	s.freeEntry = nilIdx
	s.freeChunk = nilIdx
	if p.counted() {
		s.sources = make([]sourceCount, SourceSlotsPerShard)
	}
	s.heads = make([]uint32, p.wheelMask+1)
	s.tails = make([]uint32, p.wheelMask+1)
	for i := range s.heads {
		s.heads[i], s.tails[i] = nilIdx, nilIdx
	}
}

// mix is lane.Mix64: it spreads every key bit over the hash so that the
// shard, index position and tag, taken from different bits, are
// independent even for non-random keys.
func mix(k uint64) uint64 { return lane.Mix64(k) }

// sourceSlot returns the per-source counter slot of r's source
// (lane.Key.Source: its IPv4 address, or its IPv6 address's /64), by a
// seeded hash.
func (s *shard) sourceSlot(r lane.Key) uint32 {
	src := r.Source()
	lo := binary.LittleEndian.Uint64(src[:8])
	hi := binary.LittleEndian.Uint64(src[8:])
	return uint32(mix(mix(lo^s.p.seed)^hi) & (SourceSlotsPerShard - 1))
}

// sourceFullLocked reports whether the source hashing to slot may create
// no more entries (Config.MaxEntriesPerSource).
func (s *shard) sourceFullLocked(slot uint32) bool {
	return s.p.sourceCap > 0 && s.sources[slot].entries >= s.p.sourceCap
}

// overShareLocked reports whether the source hashing to slot holds its
// fair share of entries, and so may not take the reserve (RefuseNew).
func (s *shard) overShareLocked(slot uint32) bool {
	return s.sources[slot].entries >= s.p.fullShare
}

// expired reports whether an entry expiring at tick exp is expired at tick
// now, comparing modulo 2^32.
func expired(exp, now uint32) bool { return int32(now-exp) >= 0 }

// startLocked initialises the wheel clock on the shard's first operation.
func (s *shard) startLocked(nowTick uint32) {
	if !s.started {
		s.started = true
		s.done = nowTick - 1
		s.low = nowTick
	}
}

// addLocked implements Table.Add on this shard.
func (s *shard) addLocked(h uint64, r lane.Key, nowTick, expTick, nowMs uint32) (Verdict, bool) {
	s.startLocked(nowTick)
	pos, i, found := s.findLocked(h)
	if found {
		e := &s.entries[i]
		if expired(e.expiry, nowTick) {
			// A dead entry not yet reached by the wheel: restart it. Its
			// wheel link (sched <= old expiry < new expiry) stays valid.
			s.c.expired.Add(1)
			if s.p.countEntries {
				to := s.sourceSlot(r)
				if uint32(e.src) != to && s.sourceFullLocked(to) {
					s.unlinkLocked(i)
					s.dropLocked(pos, i)
					s.c.sourceCapped.Add(1)
					return VerdictSourceCapped, false
				}
				s.sources[e.src].entries--
				s.sources[to].entries++
				e.src = uint16(to)
			}
			s.freeChunksLocked(e)
			e.first = r
			e.nreq = 1
			e.expiry = expTick
			e.fwdMs = nowMs
			s.c.added.Add(1)
			return VerdictForwardNew, false
		}
		has, same := s.scanRequestersLocked(e, r)
		if has {
			s.bump(e, expTick)
			e.fwdMs = nowMs
			s.c.retransmits.Add(1)
			return VerdictForwardRetransmit, false
		}
		shareFull := s.p.maxReqSrc != 0 && same >= int(s.p.maxReqSrc) && e.nreq < s.p.maxReq
		if shareFull {
			s.c.entryShareCapped.Add(1)
		}
		if shareFull || e.nreq >= s.p.maxReq || !s.appendRequesterLocked(i, r) {
			s.c.requesterCapped.Add(1)
			e = &s.entries[i]
			if int32(nowMs-e.fwdMs) >= s.p.windowMs {
				e.fwdMs = nowMs
				return VerdictCappedForward, false
			}
			return VerdictRequesterCapped, false
		}
		e = &s.entries[i]
		s.bump(e, expTick)
		if int32(nowMs-e.fwdMs) < s.p.windowMs {
			s.c.aggregated.Add(1)
			return VerdictAggregated, false
		}
		e.fwdMs = nowMs
		s.c.joined.Add(1)
		return VerdictForwardJoined, false
	}

	var slot uint32
	if s.p.countEntries {
		slot = s.sourceSlot(r)
		if s.sourceFullLocked(slot) {
			s.c.sourceCapped.Add(1)
			return VerdictSourceCapped, false
		}
	}
	evicted := false
	// reserveAt < entryCap only under RefuseNew with a reserve, and then
	// s.sources is kept.
	if s.n >= s.p.reserveAt && (s.n >= s.p.entryCap || s.overShareLocked(slot)) {
		s.c.expired.Add(uint64(s.expireLocked(nowTick)))
		switch {
		case s.n >= s.p.entryCap:
			if s.p.policy == RefuseNew {
				s.c.refused.Add(1)
				return VerdictRefused, false
			}
			evicted = s.evictLocked(nowTick)
		case s.n >= s.p.reserveAt && s.overShareLocked(slot):
			s.c.refused.Add(1)
			s.c.refusedShare.Add(1)
			return VerdictRefused, false
		}
		// Removals may have moved the insertion point.
		pos, _, _ = s.findLocked(h)
	}
	if s.growIndexLocked() {
		pos, _, _ = s.findLocked(h)
	}
	i = s.allocEntryLocked()
	s.entries[i] = entry{
		hash:   h,
		expiry: expTick,
		fwdMs:  nowMs,
		chunk:  nilIdx,
		first:  r,
		nreq:   1,
		src:    uint16(slot),
	}
	s.slots[pos] = uint32(h>>56)<<24 | (i + 1)
	s.n++
	if s.p.countEntries {
		s.sources[slot].entries++
	}
	s.scheduleLocked(i, expTick)
	s.c.added.Add(1)
	return VerdictForwardNew, evicted
}

// bump moves e's expiry to expTick unless it is already later (an Add
// carrying an older clock reading from another goroutine).
func (s *shard) bump(e *entry, expTick uint32) {
	if int32(expTick-e.expiry) > 0 {
		e.expiry = expTick
	}
}

// takeLocked implements Table.Take on this shard.
func (s *shard) takeLocked(h uint64, dst []lane.Key, nowTick uint32) ([]lane.Key, bool) {
	s.startLocked(nowTick)
	pos, i, found := s.findLocked(h)
	if !found {
		return dst, false
	}
	e := &s.entries[i]
	if expired(e.expiry, nowTick) {
		s.unlinkLocked(i)
		s.dropLocked(pos, i)
		s.c.expired.Add(1)
		return dst, false
	}
	dst = append(dst, e.first)
	left := int(e.nreq) - 1
	for c := e.chunk; left > 0; c = s.chunks[c].next {
		n := min(left, lanesPerChunk)
		dst = append(dst, s.chunks[c].lanes[:n]...)
		left -= n
	}
	s.unlinkLocked(i)
	s.dropLocked(pos, i)
	s.c.taken.Add(1)
	return dst, true
}

// scanRequestersLocked reports whether r is one of e's requesters and, when
// the table caps requesters per source (maxReqSrc), how many of them are
// r's source (lane.Key.Source).
func (s *shard) scanRequestersLocked(e *entry, r lane.Key) (has bool, same int) {
	count := s.p.maxReqSrc != 0
	var src [16]byte
	if count {
		src = r.Source()
	}
	look := func(k lane.Key) bool {
		if k == r {
			return true
		}
		if count && k.Source() == src {
			same++
		}
		return false
	}
	if look(e.first) {
		return true, same
	}
	left := int(e.nreq) - 1
	for c := e.chunk; left > 0; c = s.chunks[c].next {
		ch := &s.chunks[c]
		n := min(left, lanesPerChunk)
		for k := range n {
			if look(ch.lanes[k]) {
				return true, same
			}
		}
		left -= n
	}
	return false, same
}

// appendRequesterLocked adds r to entry i's requesters, taking a chunk from
// the pool when the last one is full and charging it to r's source. It
// reports false, changing nothing, when the pool is exhausted or r's
// source holds its share of it (Config.MaxOverflowPerSource; counted).
func (s *shard) appendRequesterLocked(i uint32, r lane.Key) bool {
	e := &s.entries[i]
	k := int(e.nreq) - 1 // overflow requesters already held
	if k%lanesPerChunk == 0 {
		var slot uint32
		if s.p.chunkShare > 0 {
			slot = s.sourceSlot(r)
			if s.sources[slot].chunks >= s.p.chunkShare {
				s.c.overflowShareCapped.Add(1)
				return false
			}
		}
		c, ok := s.allocChunkLocked()
		if !ok {
			return false
		}
		s.chunks[c].lanes[0] = r
		s.chunks[c].src = uint16(slot)
		s.chunks[c].next = nilIdx
		if s.p.chunkShare > 0 {
			s.sources[slot].chunks++
		}
		if k == 0 {
			e.chunk = c
		} else {
			tail := e.chunk
			for range k/lanesPerChunk - 1 {
				tail = s.chunks[tail].next
			}
			s.chunks[tail].next = c
		}
		e.nreq++
		return true
	}
	c := e.chunk
	for range k / lanesPerChunk {
		c = s.chunks[c].next
	}
	s.chunks[c].lanes[k%lanesPerChunk] = r
	e.nreq++
	return true
}

// freeChunksLocked returns e's overflow chunks to the pool, and their
// charges to the sources that opened them, and leaves e with no overflow
// requesters.
func (s *shard) freeChunksLocked(e *entry) {
	if e.chunk == nilIdx {
		return
	}
	tail := e.chunk
	for {
		s.nChunks--
		if s.p.chunkShare > 0 {
			s.sources[s.chunks[tail].src].chunks--
		}
		if s.chunks[tail].next == nilIdx {
			break
		}
		tail = s.chunks[tail].next
	}
	s.chunks[tail].next = s.freeChunk
	s.freeChunk = e.chunk
	e.chunk = nilIdx
}

func (s *shard) allocChunkLocked() (uint32, bool) {
	if s.freeChunk != nilIdx {
		c := s.freeChunk
		s.freeChunk = s.chunks[c].next
		s.nChunks++
		return c, true
	}
	if len(s.chunks) == cap(s.chunks) {
		if len(s.chunks) >= s.p.chunkCap {
			return 0, false
		}
		grown := make([]chunk, len(s.chunks), min(max(2*cap(s.chunks), initialChunkSlots), s.p.chunkCap))
		copy(grown, s.chunks)
		s.chunks = grown
	}
	c := uint32(len(s.chunks))
	s.chunks = s.chunks[:c+1]
	s.nChunks++
	return c, true
}

// allocEntryLocked returns a free slab slot. The caller has ensured
// s.n < s.p.entryCap, so a slot exists or the slab can grow.
func (s *shard) allocEntryLocked() uint32 {
	if s.freeEntry != nilIdx {
		i := s.freeEntry
		s.freeEntry = s.entries[i].next
		return i
	}
	if len(s.entries) == cap(s.entries) {
		grown := make([]entry, len(s.entries), min(max(2*cap(s.entries), initialEntrySlots), s.p.entryCap))
		copy(grown, s.entries)
		s.entries = grown
	}
	i := uint32(len(s.entries))
	s.entries = s.entries[:i+1]
	return i
}

// dropLocked deletes live entry i, found at index position pos, from the
// index and frees its slot and chunks. The caller has unlinked it from the
// wheel.
func (s *shard) dropLocked(pos int, i uint32) {
	s.deleteSlotLocked(pos)
	e := &s.entries[i]
	s.freeChunksLocked(e)
	if s.p.countEntries {
		s.sources[e.src].entries--
	}
	e.nreq = 0
	e.next = s.freeEntry
	s.freeEntry = i
	s.n--
}

// removeLocked deletes live entry i: wheel, index, slab.
func (s *shard) removeLocked(i uint32) {
	s.unlinkLocked(i)
	s.dropLocked(s.posOfLocked(i), i)
}
