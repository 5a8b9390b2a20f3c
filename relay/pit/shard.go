package pit

import (
	"encoding/binary"
	"math/bits"
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
	nreq   uint16   // requesters: first plus nreq-1 in the chunk list
	src    uint16   // sourceSlot(first), when the shard counts entries by source
	// most is the requesters of the entry's largest source, once the entry
	// has been full (nreq == maxReq) and a newcomer asked; 0 until then.
	// It spares a full entry's refusals a count by source.
	most uint16
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

// tallySlot counts one source's requesters on the entry being tallied:
// 24 bytes.
type tallySlot struct {
	a, b uint64 // the source's words (srcWords)
	gen  uint32 // the tally that filled the slot
	n    uint16 // its requesters
	last uint16 // the join position (0 the entry's first) of its latest
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

	// tally counts one entry's requesters by source for the displacement
	// rule (tallyLocked): open addressing by a seeded hash of the source
	// (seeded, so that no one can line sources up on one probe chain),
	// tallySlotsPerRequester*maxReq slots rounded up to a power of two,
	// allocated on first use.
	// A slot is in use when its gen is tallyGen, so a count clears
	// nothing; tallyUsed lists the slots it filled. Guarded by mu.
	tally     []tallySlot
	tallyUsed []uint32
	tallyGen  uint32

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
	return uint32(s.sourceHash(srcWords(&r)) & (SourceSlotsPerShard - 1))
}

// sourceHash is the seeded hash of a source's words: seeded, so that an
// attacker cannot choose addresses that collide.
func (s *shard) sourceHash(a, b uint64) uint64 { return mix(mix(a^s.p.seed) ^ b) }

// srcWords returns lane.Key.Source of k as two little-endian words, without
// building the array: (0, the mapped address's low word) for IPv4, (the
// /64, 0) for IPv6. Distinct sources give distinct words, since an IPv4
// source's b holds the mapping's 0xffff and an IPv6 source's b is 0. It is
// Source's rule in the form the scans compare (TestSrcWordsIsSource pins
// that the two agree): comparing Source arrays per requester measured 3 to
// 4 times slower at a full entry. It takes a pointer so that the scans
// read the slab in place: a copy of the key on the stack, read back in
// parts, measured about twice as slow.
func srcWords(k *lane.Key) (a, b uint64) {
	a = binary.LittleEndian.Uint64(k.IP[:8])
	if a == 0 && binary.LittleEndian.Uint32(k.IP[8:12]) == 0xffff0000 {
		return 0, binary.LittleEndian.Uint64(k.IP[8:])
	}
	return a, 0
}

// sourceMatch matches the lanes of one source, for the scans: the
// lane's first word must be a and, for an IPv4 source, its second word b
// (mask all ones); an IPv6 source's second word is not looked at (mask
// 0), but for a /64 of zeros (::/64), whose first word an IPv4 lane
// shares, the lane must not be IPv4 (v6zero).
type sourceMatch struct {
	a, b, mask uint64
	v6zero     bool
}

func sourceMatchOf(r *lane.Key) sourceMatch {
	a, b := srcWords(r)
	if b != 0 {
		return sourceMatch{a: a, b: b, mask: ^uint64(0)}
	}
	return sourceMatch{a: a, v6zero: a == 0}
}

// has reports whether k is of m's source.
func (m *sourceMatch) has(k *lane.Key) bool {
	if binary.LittleEndian.Uint64(k.IP[:8]) != m.a {
		return false
	}
	if m.v6zero {
		return binary.LittleEndian.Uint32(k.IP[8:12]) != 0xffff0000
	}
	return binary.LittleEndian.Uint64(k.IP[8:])&m.mask == m.b
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
			e.most = 0
			e.expiry = expTick
			e.fwdMs = nowMs
			s.c.added.Add(1)
			return VerdictForwardNew, false
		}
		full := e.nreq >= s.p.maxReq
		has, same := s.scanRequestersLocked(e, r, full || s.p.maxReqSrc != 0)
		if has {
			s.bump(e, expTick)
			e.fwdMs = nowMs
			s.c.retransmits.Add(1)
			return VerdictForwardRetransmit, false
		}
		var kept bool
		switch {
		case s.p.maxReqSrc != 0 && same >= int(s.p.maxReqSrc):
			s.c.entryShareCapped.Add(1)
		case full:
			if kept = s.displaceLocked(e, r, same); !kept {
				s.c.entryShareCapped.Add(1)
			}
		default:
			kept = s.appendRequesterLocked(i, r)
		}
		e = &s.entries[i]
		if !kept {
			s.c.requesterCapped.Add(1)
			if int32(nowMs-e.fwdMs) >= s.p.windowMs {
				e.fwdMs = nowMs
				return VerdictCappedForward, false
			}
			return VerdictRequesterCapped, false
		}
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

// scanRequestersLocked reports whether r is one of e's requesters and, if
// count, how many of them are r's source (lane.Key.Source). It is the
// linear scan every Add of a live name pays; the count is asked for only
// when a rule needs it (a full entry, or MaxRequestersPerSource).
func (s *shard) scanRequestersLocked(e *entry, r lane.Key, count bool) (has bool, same int) {
	// Ports first: they tell lanes apart sooner than addresses do (an
	// IPv4 address's first 10 bytes are those of every other).
	if e.first.Port == r.Port && e.first.IP == r.IP {
		return true, 0
	}
	var m sourceMatch
	if count {
		m = sourceMatchOf(&r)
		if m.has(&e.first) {
			same++
		}
	}
	left := int(e.nreq) - 1
	for c := e.chunk; left > 0; c = s.chunks[c].next {
		ch := &s.chunks[c]
		n := min(left, lanesPerChunk)
		for k := range ch.lanes[:n] {
			l := &ch.lanes[k]
			if l.Port == r.Port && l.IP == r.IP {
				return true, same
			}
			if count && m.has(l) {
				same++
			}
		}
		left -= n
	}
	return false, same
}

// displaceLocked applies the full entry's max-min rule to newcomer r,
// whose source holds same of e's requesters: if that source, counting r,
// would still hold fewer than e's largest source, r takes the place of
// the largest source's most recent requester and displaceLocked reports
// true; otherwise it changes nothing and reports false. The most recent
// is the one displaced because it has waited least, while the source's
// earlier requesters, whose requests have been refreshing the entry, keep
// their places; under a flood it is the port the flood added last. Among
// sources tied for largest, the one whose latest requester joined last
// loses it. The displaced requester's chunk stays charged to
// whoever opened it (a displacement costs the pool nothing), so the
// overflow share is not consulted. A displaced requester that asks again
// is a newcomer whose source now holds as many as the largest less one:
// refused, so displacements do not chase each other (each one lowers the
// sum of the squares of the sources' counts by at least 2).
func (s *shard) displaceLocked(e *entry, r lane.Key, same int) bool {
	tallied := false
	var most, atMost, victim int
	if e.most == 0 {
		most, atMost, victim = s.tallyLocked(e)
		e.most = uint16(most)
		tallied = true
	}
	if same+1 >= int(e.most) {
		return false
	}
	if !tallied {
		most, atMost, victim = s.tallyLocked(e)
	}
	// victim > 0: the largest source holds at least 2 (same+1 < most), and
	// its latest requester is not the entry's first.
	k := victim - 1
	c := e.chunk
	for range k / lanesPerChunk {
		c = s.chunks[c].next
	}
	s.chunks[c].lanes[k%lanesPerChunk] = r
	if atMost == 1 {
		// r's source now holds at most most-1, as does the one that lost.
		e.most--
	}
	s.c.displaced.Add(1)
	return true
}

// tallyLocked counts e's requesters by source and returns the largest
// source's count, how many sources hold that many, and the join position
// (0 is e.first) of the latest requester of any of them.
func (s *shard) tallyLocked(e *entry) (most, atMost, victim int) {
	if s.tally == nil {
		s.tally = make([]tallySlot, 1<<bits.Len(uint(tallySlotsPerRequester*s.p.maxReq-1)))
		s.tallyUsed = make([]uint32, 0, s.p.maxReq)
	}
	s.tallyGen++
	if s.tallyGen == 0 {
		clear(s.tally)
		s.tallyGen = 1
	}
	gen, mask := s.tallyGen, uint64(len(s.tally)-1)
	used := s.tallyUsed[:0]
	count := func(k *lane.Key, pos int) {
		a, b := srcWords(k)
		i := s.sourceHash(a, b) & mask
		for {
			t := &s.tally[i]
			if t.gen != gen {
				*t = tallySlot{a: a, b: b, gen: gen}
				used = append(used, uint32(i))
			}
			if t.a == a && t.b == b {
				t.n++
				t.last = uint16(pos)
				return
			}
			i = (i + 1) & mask
		}
	}
	count(&e.first, 0)
	pos, left := 1, int(e.nreq)-1
	for c := e.chunk; left > 0; c = s.chunks[c].next {
		ch := &s.chunks[c]
		n := min(left, lanesPerChunk)
		for k := range ch.lanes[:n] {
			count(&ch.lanes[k], pos)
			pos++
		}
		left -= n
	}
	for _, i := range used {
		t := &s.tally[i]
		switch n := int(t.n); {
		case n > most:
			most, atMost, victim = n, 1, int(t.last)
		case n == most:
			atMost++
			victim = max(victim, int(t.last))
		}
	}
	s.tallyUsed = used[:0]
	return most, atMost, victim
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
