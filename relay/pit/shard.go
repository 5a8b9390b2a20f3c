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
	// src is sourceSlot(first) (when the shard counts entries by source)
	// in its low srcSlotBits bits, and the first requester's flags
	// (flagDelivered, flagReceives) above them.
	src uint16
	// most is one more than the requesters of the entry's largest source
	// among those not shown to receive (flagReceives clear), once the
	// entry has been full (nreq == maxReq) and a newcomer asked; 0 until
	// then. It spares a full entry's refusals of one-shot newcomers a
	// count by source.
	most uint16
}

// A requester's flags: one byte per requester (the entry's first in the
// high bits of entry.src, the others in chunk.flags).
const (
	// flagDelivered: the requester was sent a page from a contested lane
	// (Restore) and has not asked again since; a further contested page
	// is not sent to it (Held.Delivered).
	flagDelivered uint8 = 1 << 0
	// flagReceives: the requester was shown to receive at its lane
	// (AddProven): it is never displaced by a newcomer not shown to.
	flagReceives uint8 = 1 << 1

	srcSlotBits = 12
	srcSlotMask = 1<<srcSlotBits - 1
	// srcFlagsMask covers the first's flags in entry.src.
	srcFlagsMask = 3 << srcSlotBits
	// srcAnyProven, in entry.src, is set once any of the entry's
	// requesters has had flagReceives: while it is clear, the scan of a
	// full entry's requesters counts them by source without reading
	// their flags (every one is one-shot).
	srcAnyProven = 1 << 15
)

// slot returns e's source slot (entry.src without the flags).
func (e *entry) slot() uint32 { return uint32(e.src & srcSlotMask) }

// firstFlags returns the flags of e's first requester.
func (e *entry) firstFlags() uint8 { return uint8(e.src & srcFlagsMask >> srcSlotBits) }

// setFirstFlags sets the flags of e's first requester.
func (e *entry) setFirstFlags(f uint8) {
	e.src = e.src&^srcFlagsMask | uint16(f)<<srcSlotBits
	e.note(f)
}

// note records in e that one of its requesters has flags f.
func (e *entry) note(f uint8) {
	if f&flagReceives != 0 {
		e.src |= srcAnyProven
	}
}

// chunk holds overflow requesters of one entry: 64 bytes (one cache
// line), no pointers.
type chunk struct {
	lanes [lanesPerChunk]lane.Key
	src   uint16               // sourceSlot(lanes[0]), the source charged, when chunks are
	flags [lanesPerChunk]uint8 // the lanes' flags (flagDelivered, flagReceives)
	next  uint32               // next chunk of the same entry, or in the free list
}

// The source slots fit entry.src's low srcSlotBits bits and chunk.src,
// kept in the structs' padding so that freeing an entry or chunk needs no
// hash.
const _ = uint16(srcSlotMask - (SourceSlotsPerShard - 1))

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
	// nU and lastU are the same for its requesters not shown to receive
	// (flagReceives clear); lastU counts only positions after the first
	// (0: none), since the first is never displaced.
	nU, lastU uint16
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
func (s *shard) sourceSlot(r *lane.Key) uint32 {
	return uint32(s.sourceHash(srcWords(r)) & (SourceSlotsPerShard - 1))
}

// sourceHash is the seeded hash of a source's words: seeded, so that an
// attacker cannot choose addresses that collide.
// It is mix(mix(a ^ seed) ^ b), the inner round precomputed (seedA0) for
// a == 0, every IPv4 source's first word.
func (s *shard) sourceHash(a, b uint64) uint64 {
	h := s.p.seedA0
	if a != 0 {
		h = mix(a ^ s.p.seed)
	}
	return mix(h ^ b)
}

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

// addLocked implements Table.Add (recv false) and Table.AddProven (recv
// true) on this shard. r is read in place, never kept: the requester
// lane.Key is passed by pointer down the Add path, since each copy of its
// 18 bytes through the stack is two overlapping 16-byte stores that the
// next load of it cannot forward from (a stall at every level of calls).
func (s *shard) addLocked(h uint64, r *lane.Key, recv bool, nowTick, expTick, nowMs uint32) (Verdict, bool) {
	s.startLocked(nowTick)
	var rf uint8
	if recv {
		rf = flagReceives
	}
	pos, i, found := s.findLocked(h)
	if found {
		e := &s.entries[i]
		if expired(e.expiry, nowTick) {
			// A dead entry not yet reached by the wheel: restart it. Its
			// wheel link (sched <= old expiry < new expiry) stays valid.
			s.c.expired++
			if s.p.countEntries {
				to := s.sourceSlot(r)
				if e.slot() != to && s.sourceFullLocked(to) {
					s.unlinkLocked(i)
					s.dropLocked(pos, i)
					s.c.sourceCapped++
					return VerdictSourceCapped, false
				}
				s.sources[e.slot()].entries--
				s.sources[to].entries++
				e.src = uint16(to)
			}
			s.freeChunksLocked(e)
			e.first = *r
			e.src &= srcSlotMask
			e.setFirstFlags(rf)
			e.nreq = 1
			e.most = 0
			e.expiry = expTick
			e.fwdMs = nowMs
			s.c.added++
			return VerdictForwardNew, false
		}
		full := e.nreq >= s.p.maxReq
		sc := s.scanRequestersLocked(e, r, full || s.p.maxReqSrc != 0)
		if sc.has {
			// It asks again: a contested page may be sent to it again
			// (flagDelivered cleared), and proof of receiving is kept.
			f := s.flagsAt(e, sc.c, sc.k)
			nf := f&^flagDelivered | rf
			s.setFlagsAt(e, sc.c, sc.k, nf)
			if nf&flagReceives != f&flagReceives && e.most != 0 {
				// One fewer requester not shown to receive: the cache
				// of its largest source is counted afresh.
				_, _, mostU, _ := s.tallyLocked(e, r)
				e.most = uint16(mostU.n + 1)
			}
			s.bump(e, expTick)
			e.fwdMs = nowMs
			s.c.retransmits++
			return VerdictForwardRetransmit, false
		}
		var kept bool
		switch {
		case s.p.maxReqSrc != 0 && sc.same >= int(s.p.maxReqSrc):
			s.c.entryShareCapped++
		case full:
			if kept = s.displaceLocked(e, r, rf, sc); !kept {
				s.c.entryShareCapped++
			}
		default:
			kept = s.appendRequesterLocked(i, r, rf)
		}
		e = &s.entries[i]
		if !kept {
			s.c.requesterCapped++
			if int32(nowMs-e.fwdMs) >= s.p.windowMs {
				e.fwdMs = nowMs
				return VerdictCappedForward, false
			}
			return VerdictRequesterCapped, false
		}
		s.bump(e, expTick)
		if int32(nowMs-e.fwdMs) < s.p.windowMs {
			s.c.aggregated++
			return VerdictAggregated, false
		}
		e.fwdMs = nowMs
		s.c.joined++
		return VerdictForwardJoined, false
	}

	var slot uint32
	if s.p.countEntries {
		slot = s.sourceSlot(r)
		if s.sourceFullLocked(slot) {
			s.c.sourceCapped++
			return VerdictSourceCapped, false
		}
	}
	evicted := false
	// reserveAt < entryCap only under RefuseNew with a reserve, and then
	// s.sources is kept.
	if s.n >= s.p.reserveAt && (s.n >= s.p.entryCap || s.overShareLocked(slot)) {
		s.c.expired += uint64(s.expireLocked(nowTick))
		switch {
		case s.n >= s.p.entryCap:
			if s.p.policy == RefuseNew {
				s.c.refused++
				return VerdictRefused, false
			}
			evicted = s.evictLocked(nowTick)
		case s.n >= s.p.reserveAt && s.overShareLocked(slot):
			s.c.refused++
			s.c.refusedShare++
			return VerdictRefused, false
		}
		// Removals may have moved the insertion point.
		pos, _, _ = s.findLocked(h)
	}
	s.c.added++
	s.insertLocked(pos, h, r, rf, slot, expTick, nowMs)
	return VerdictForwardNew, evicted
}

// insertLocked creates an entry for h at index position pos (from
// findLocked, a miss) with first requester r (flags f, source slot slot),
// expiring at expTick, last forwarded at nowMs. The caller has made room.
func (s *shard) insertLocked(pos int, h uint64, r *lane.Key, f uint8, slot, expTick, nowMs uint32) uint32 {
	if s.indexFullLocked() {
		s.growIndexLocked()
		pos, _, _ = s.findLocked(h)
	}
	i := s.allocEntryLocked()
	// Every field is written in place (sched, next and prev by
	// scheduleLocked below): a composite literal is built on the stack
	// and copied, and that copy's loads stall on the literal's stores.
	e := &s.entries[i]
	e.hash = h
	e.expiry = expTick
	e.fwdMs = nowMs
	e.chunk = nilIdx
	e.first = *r
	e.nreq = 1
	e.src = uint16(slot) | uint16(f)<<srcSlotBits
	e.note(f)
	e.most = 0
	s.slots[pos] = uint32(h>>56)<<24 | (i + 1)
	s.n++
	if s.p.countEntries {
		s.sources[slot].entries++
	}
	s.scheduleLocked(i, expTick)
	return i
}

// bump moves e's expiry to expTick unless it is already later (an Add
// carrying an older clock reading from another goroutine).
func (s *shard) bump(e *entry, expTick uint32) {
	if int32(expTick-e.expiry) > 0 {
		e.expiry = expTick
	}
}

// takeLocked implements Table.TakeHeld on this shard (held may be nil).
func (s *shard) takeLocked(h uint64, dst []lane.Key, held *Held, nowTick uint32) ([]lane.Key, bool) {
	s.startLocked(nowTick)
	pos, i, found := s.findLocked(h)
	if !found {
		return dst, false
	}
	e := &s.entries[i]
	if expired(e.expiry, nowTick) {
		s.unlinkLocked(i)
		s.dropLocked(pos, i)
		s.c.expired++
		return dst, false
	}
	s.c.taken++
	base := len(dst)
	if len(dst) < cap(dst) {
		// Copied straight from the slab: append would copy e.first
		// through the stack first, and stall reading it back.
		dst = dst[:base+1]
		dst[base] = e.first
	} else {
		dst = append(dst, e.first)
	}
	left := int(e.nreq) - 1
	if held != nil {
		held.flags[0] = e.firstFlags()
		held.n = int(e.nreq)
		held.expiry, held.fwdMs, held.base = e.expiry, e.fwdMs, base
	}
	for c, k := e.chunk, 1; left > 0; c = s.chunks[c].next {
		n := min(left, lanesPerChunk)
		dst = append(dst, s.chunks[c].lanes[:n]...)
		if held != nil {
			copy(held.flags[k:], s.chunks[c].flags[:n])
		}
		k += n
		left -= n
	}
	s.unlinkLocked(i)
	s.dropLocked(pos, i)
	return dst, true
}

// scan is what scanRequestersLocked found: whether the newcomer is one of
// the entry's requesters, where (chunk c, nilIdx for the first, lane k),
// and, when counted, how many of the entry's requesters are of its source
// (same) and how many of those are not shown to receive (sameU).
type scan struct {
	has         bool
	c           uint32
	k           int
	same, sameU int
}

// scanRequestersLocked looks for r among e's requesters and, if count,
// counts those of r's source (lane.Key.Source). It is the linear scan
// every Add of a live name pays; the count is asked for only when a rule
// needs it (a full entry, or MaxRequestersPerSource).
func (s *shard) scanRequestersLocked(e *entry, r *lane.Key, count bool) scan {
	// Ports first: they tell lanes apart sooner than addresses do (an
	// IPv4 address's first 10 bytes are those of every other).
	if e.first.Port == r.Port && e.first.IP == r.IP {
		return scan{has: true, c: nilIdx}
	}
	var m sourceMatch
	same := 0
	if count {
		m = sourceMatchOf(r)
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
				return scan{has: true, c: c, k: k}
			}
			if count && m.has(l) {
				same++
			}
		}
		left -= n
	}
	sc := scan{same: same, sameU: same}
	if count && e.src&srcAnyProven != 0 {
		// Some requester may be proven: those of r's source are not
		// one-shot. A second pass, so that the first stays as lean as
		// before the flags (an entry with a proven requester is rare).
		sc.sameU -= s.provenOfLocked(e, &m)
	}
	return sc
}

// provenOfLocked counts e's requesters matched by m that have
// flagReceives.
func (s *shard) provenOfLocked(e *entry, m *sourceMatch) int {
	n := 0
	if e.firstFlags()&flagReceives != 0 && m.has(&e.first) {
		n++
	}
	left := int(e.nreq) - 1
	for c := e.chunk; left > 0; c = s.chunks[c].next {
		ch := &s.chunks[c]
		for k := range min(left, lanesPerChunk) {
			if ch.flags[k]&flagReceives != 0 && m.has(&ch.lanes[k]) {
				n++
			}
		}
		left -= lanesPerChunk
	}
	return n
}

// flagsAt returns the flags of e's requester in chunk c (nilIdx: the
// first) at lane k.
func (s *shard) flagsAt(e *entry, c uint32, k int) uint8 {
	if c == nilIdx {
		return e.firstFlags()
	}
	return s.chunks[c].flags[k]
}

// setFlagsAt sets the flags of e's requester in chunk c (nilIdx: the
// first) at lane k.
func (s *shard) setFlagsAt(e *entry, c uint32, k int, f uint8) {
	if c == nilIdx {
		e.setFirstFlags(f)
		return
	}
	s.chunks[c].flags[k] = f
	e.note(f)
}

// displaceLocked applies the full entry's rule to newcomer r (flags rf,
// its source's counts in sc). The requesters shown to receive
// (flagReceives) come first: a newcomer not shown to receive competes
// only with the entry's others not shown to (the one-shot pool), by the
// max-min rule below, and never displaces one shown to; a newcomer shown
// to receive takes the place of a one-shot requester while the entry
// holds any (other than its first), from the source holding the most of
// them, and otherwise competes with all by the max-min rule.
//
// The max-min rule: if r's source, counting r, would still hold fewer
// requesters of the pool than the pool's largest source, r takes the
// place of the largest source's most recent requester in the pool, and
// displaceLocked reports true; otherwise it changes nothing and reports
// false. The most recent is the one displaced because it has waited
// least, while the source's earlier requesters, whose requests have been
// refreshing the entry, keep their places; under a flood it is the port
// the flood added last. Among sources tied for largest, the one whose
// latest requester joined last loses it. The displaced requester's chunk
// stays charged to whoever opened it (a displacement costs the pool
// nothing), so the overflow share is not consulted. A displaced
// requester that asks again is a newcomer whose source now holds as many
// as the largest less one: refused, so displacements do not chase each
// other (each one lowers the sum of the squares of the sources' counts in
// the pool by at least 2).
func (s *shard) displaceLocked(e *entry, r *lane.Key, rf uint8, sc scan) bool {
	if rf&flagReceives == 0 && e.most != 0 && sc.sameU+1 >= int(e.most)-1 {
		return false // the common refusal of a flood, from the cache
	}
	all, any, mostU, atMostU := s.tallyLocked(e, r)
	var victim, from int // join position, and its source's one-shot count
	switch {
	case rf&flagReceives == 0:
		if sc.sameU+1 >= mostU.n {
			e.most = uint16(mostU.n + 1)
			return false
		}
		// mostU.n >= 2, so the latest is not the entry's first.
		victim, from = mostU.last, mostU.n
	case any.last > 0:
		victim, from = any.last, any.n
	default:
		if sc.same+1 >= all.n {
			e.most = uint16(mostU.n + 1)
			return false
		}
		victim, from = all.last, 0
	}
	k := victim - 1
	c := e.chunk
	for range k / lanesPerChunk {
		c = s.chunks[c].next
	}
	s.chunks[c].lanes[k%lanesPerChunk] = *r
	s.chunks[c].flags[k%lanesPerChunk] = rf
	e.note(rf)
	// The one-shot pool lost one of a source holding from (0: none) and,
	// if r is one-shot, gained one of a source now holding sameU+1, less
	// than mostU.n.
	if from == mostU.n && atMostU == 1 {
		mostU.n--
	}
	e.most = uint16(mostU.n + 1)
	s.c.displaced++
	return true
}

// tallied is one source's count on an entry and the join position of its
// latest requester counted.
type tallied struct{ n, last int }

// tallyLocked counts e's requesters by source and returns: all, the
// largest source's count and the latest requester among the sources
// holding that many; any, among the sources other than r's with a
// one-shot requester (flagReceives clear) after the first, the largest
// one-shot count and the latest such requester among the sources holding
// it (a proven newcomer does not displace its own source's); mostU, the
// largest source's one-shot count and the latest one-shot requester after
// the first among the sources holding that many (0 if none); and how many
// sources hold mostU.n one-shot requesters.
func (s *shard) tallyLocked(e *entry, r *lane.Key) (all, any, mostU tallied, atMostU int) {
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
	count := func(k *lane.Key, f uint8, pos int) {
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
				if f&flagReceives == 0 {
					t.nU++
					if pos > 0 {
						t.lastU = uint16(pos)
					}
				}
				return
			}
			i = (i + 1) & mask
		}
	}
	count(&e.first, e.firstFlags(), 0)
	pos, left := 1, int(e.nreq)-1
	for c := e.chunk; left > 0; c = s.chunks[c].next {
		ch := &s.chunks[c]
		n := min(left, lanesPerChunk)
		for k := range ch.lanes[:n] {
			count(&ch.lanes[k], ch.flags[k], pos)
			pos++
		}
		left -= n
	}
	// better reports whether (n, last) beats t: more, or as many and later.
	better := func(t *tallied, n, last int) bool { return n > t.n || n == t.n && last > t.last }
	ra, rb := srcWords(r)
	for _, i := range used {
		t := &s.tally[i]
		n, nU := int(t.n), int(t.nU)
		if better(&all, n, int(t.last)) {
			all = tallied{n, int(t.last)}
		}
		if t.lastU > 0 && (t.a != ra || t.b != rb) && better(&any, nU, int(t.lastU)) {
			any = tallied{nU, int(t.lastU)}
		}
		switch {
		case nU > mostU.n:
			mostU, atMostU = tallied{nU, int(t.lastU)}, 1
		case nU == mostU.n && nU > 0:
			atMostU++
			mostU.last = max(mostU.last, int(t.lastU))
		}
	}
	s.tallyUsed = used[:0]
	return all, any, mostU, atMostU
}

// appendRequesterLocked adds r (flags f) to entry i's requesters, taking a
// chunk from the pool when the last one is full and charging it to r's
// source. It reports false, changing nothing, when the pool is exhausted
// or r's source holds its share of it (Config.MaxOverflowPerSource;
// counted).
func (s *shard) appendRequesterLocked(i uint32, r *lane.Key, f uint8) bool {
	e := &s.entries[i]
	k := int(e.nreq) - 1 // overflow requesters already held
	if k%lanesPerChunk == 0 {
		var slot uint32
		if s.p.chunkShare > 0 {
			slot = s.sourceSlot(r)
			if s.sources[slot].chunks >= s.p.chunkShare {
				s.c.overflowShareCapped++
				return false
			}
		}
		c, ok := s.allocChunkLocked()
		if !ok {
			return false
		}
		s.chunks[c] = chunk{src: uint16(slot), next: nilIdx}
		s.chunks[c].lanes[0] = *r
		s.chunks[c].flags[0] = f
		e.note(f)
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
	s.chunks[c].lanes[k%lanesPerChunk] = *r
	s.chunks[c].flags[k%lanesPerChunk] = f
	e.note(f)
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
		s.sources[e.slot()].entries--
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

// restoreLocked implements Table.Restore on this shard.
func (s *shard) restoreLocked(h uint64, reqs []lane.Key, held *Held, nowTick uint32) int {
	s.startLocked(nowTick)
	if len(reqs) == 0 || expired(held.expiry, nowTick) {
		return 0
	}
	pos, i, found := s.findLocked(h)
	if found && expired(s.entries[i].expiry, nowTick) {
		s.unlinkLocked(i)
		s.dropLocked(pos, i)
		s.c.expired++
		pos, _, found = s.findLocked(h)
	}
	from := 0
	if !found {
		var slot uint32
		if s.p.countEntries {
			slot = s.sourceSlot(&reqs[0])
			if s.sourceFullLocked(slot) {
				return 0
			}
		}
		if s.n >= s.p.entryCap {
			return 0
		}
		i = s.insertLocked(pos, h, &reqs[0], held.flags[0]|flagDelivered, slot, held.expiry, held.fwdMs)
		s.c.added++
		s.c.restored++
		from = 1
	}
	e := &s.entries[i]
	s.bump(e, held.expiry)
	for j := from; j < len(reqs); j++ {
		if e.nreq >= s.p.maxReq {
			break
		}
		if found && s.scanRequestersLocked(e, &reqs[j], false).has {
			continue // it asked again meanwhile: its own ask stands
		}
		if s.appendRequesterLocked(i, &reqs[j], held.flags[j]|flagDelivered) {
			e = &s.entries[i]
		}
	}
	return int(e.nreq)
}
