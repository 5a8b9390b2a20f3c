package pit

import (
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// checkInvariants verifies every structural invariant of every shard: slab,
// free lists, index, wheel, chunk accounting, caps and counters.
func checkInvariants(tb testing.TB, t *Table) {
	tb.Helper()
	for si := range t.shards {
		s := &t.shards[si]
		s.mu.Lock()
		checkShardLocked(tb, si, s)
		s.mu.Unlock()
	}
}

func checkShardLocked(tb testing.TB, si int, s *shard) {
	tb.Helper()
	fail := func(format string, a ...any) {
		tb.Helper()
		tb.Fatalf("shard %d: "+format, append([]any{si}, a...)...)
	}
	if cap(s.entries) > s.p.entryCap {
		fail("entry slab cap %d exceeds %d", cap(s.entries), s.p.entryCap)
	}
	if cap(s.chunks) > s.p.chunkCap {
		fail("chunk slab cap %d exceeds %d", cap(s.chunks), s.p.chunkCap)
	}
	if len(s.slots) > 0 && s.n*indexLoadDen > len(s.slots)*indexLoadNum {
		fail("index over load: %d entries in %d slots", s.n, len(s.slots))
	}
	if maxSlots := indexSlotsFor(s.p.entryCap); len(s.slots) > maxSlots {
		fail("index has %d slots, more than %d needed for cap %d", len(s.slots), maxSlots, s.p.entryCap)
	}

	// Slab: live entries and the free list partition it.
	live := 0
	for i := range s.entries {
		if s.entries[i].nreq > 0 {
			live++
		}
	}
	if live != s.n {
		fail("%d live slots, n = %d", live, s.n)
	}
	// Per-source counts: each live entry is counted once, at its first
	// requester's slot; each chunk in use once, at its opener's slot,
	// which is its first lane's unless a displacement replaced it (only
	// in an entry that has been full, most != 0); no slot beyond the caps
	// that gate its increments; a count no rule needs stays 0.
	if s.sources != nil {
		want := make([]sourceCount, len(s.sources))
		for i := range s.entries {
			e := &s.entries[i]
			if e.nreq == 0 {
				continue
			}
			if s.p.countEntries {
				if e.slot() != s.sourceSlot(&e.first) {
					fail("entry %d src %d, its first requester's slot %d", i, e.slot(), s.sourceSlot(&e.first))
				}
				want[e.slot()].entries++
			}
			if s.p.chunkShare == 0 {
				continue
			}
			for c := e.chunk; c != nilIdx; c = s.chunks[c].next {
				if e.most == 0 && uint32(s.chunks[c].src) != s.sourceSlot(&s.chunks[c].lanes[0]) {
					fail("chunk %d src %d, its first lane's slot %d", c, s.chunks[c].src, s.sourceSlot(&s.chunks[c].lanes[0]))
				}
				want[s.chunks[c].src].chunks++
			}
		}
		for slot := range want {
			got := s.sources[slot]
			if want[slot] != got {
				fail("source slot %d counts %+v, live entries and chunks %+v", slot, got, want[slot])
			}
			if s.p.sourceCap > 0 && got.entries > s.p.sourceCap {
				fail("source slot %d holds %d entries, cap %d", slot, got.entries, s.p.sourceCap)
			}
			if s.p.chunkShare > 0 && got.chunks > s.p.chunkShare {
				fail("source slot %d holds %d chunks, share %d", slot, got.chunks, s.p.chunkShare)
			}
		}
	} else if s.p.counted() {
		fail("per-source rules on but no counters")
	}
	free := 0
	for i := s.freeEntry; i != nilIdx; i = s.entries[i].next {
		if s.entries[i].nreq != 0 {
			fail("live entry %d on free list", i)
		}
		free++
		if free > len(s.entries) {
			fail("free list cycles")
		}
	}
	if live+free != len(s.entries) {
		fail("live %d + free %d != slab %d", live, free, len(s.entries))
	}
	if got := s.c.live(); got != s.n {
		fail("counters say %d live, n = %d", got, s.n)
	}

	// Index: exactly the live entries, each findable from its hash.
	inIndex := 0
	for pos, v := range s.slots {
		if v == 0 {
			continue
		}
		inIndex++
		i := v&slotEntryMask - 1
		if int(i) >= len(s.entries) || s.entries[i].nreq == 0 {
			fail("index position %d points at non-live slot %d", pos, i)
		}
		if v>>slotTagShift != uint32(s.entries[i].hash>>56) {
			fail("index position %d has a wrong tag", pos)
		}
	}
	if inIndex != s.n {
		fail("index holds %d, n = %d", inIndex, s.n)
	}
	for i := range s.entries {
		e := &s.entries[i]
		if e.nreq == 0 {
			continue
		}
		if _, j, ok := s.findLocked(e.hash); !ok || j != uint32(i) {
			fail("entry %d not found by its hash", i)
		}
	}

	// Wheel: every live entry linked once, links consistent, sched > done,
	// sched >= low.
	if s.started && int32(s.low-s.done) <= 0 {
		fail("low %d not after done %d", s.low, s.done)
	}
	linked := 0
	for b, head := range s.heads {
		prev := nilIdx
		for i := head; i != nilIdx; i = s.entries[i].next {
			e := &s.entries[i]
			if e.nreq == 0 {
				fail("free entry %d in wheel bucket %d", i, b)
			}
			if e.prev != prev {
				fail("entry %d prev %d, want %d", i, e.prev, prev)
			}
			if int(e.sched&s.p.wheelMask) != b {
				fail("entry %d sched %d in bucket %d", i, e.sched, b)
			}
			if int32(e.sched-s.done) <= 0 {
				fail("entry %d sched %d not after done %d", i, e.sched, s.done)
			}
			if int32(e.sched-s.low) < 0 {
				fail("entry %d sched %d before low %d", i, e.sched, s.low)
			}
			prev = i
			linked++
			if linked > s.n {
				fail("wheel holds more than %d entries", s.n)
			}
		}
		if s.tails[b] != prev {
			fail("bucket %d tail %d, last entry %d", b, s.tails[b], prev)
		}
	}
	if linked != s.n {
		fail("wheel holds %d, n = %d", linked, s.n)
	}

	// Chunks: owned chunks plus the free list partition the chunk slab;
	// requesters distinct.
	owned := 0
	for i := range s.entries {
		e := &s.entries[i]
		if e.nreq == 0 {
			continue
		}
		if e.nreq > s.p.maxReq {
			fail("entry %d has %d requesters, cap %d", i, e.nreq, s.p.maxReq)
		}
		// The largest source's count of requesters not shown to receive,
		// once cached (plus one), is exact, and cached only at a full
		// entry; no source holds more than a fixed cap.
		reqs := s.requestersLocked(uint32(i))
		var oneShot []lane.Key
		for j, f := range s.flagsLocked(uint32(i)) {
			if f&flagReceives == 0 {
				oneShot = append(oneShot, reqs[j])
			}
			if f&^(flagReceives|flagDelivered) != 0 {
				fail("entry %d: requester %d has flags %#x", i, j, f)
			}
			if f&flagReceives != 0 && e.src&srcAnyProven == 0 {
				fail("entry %d: requester %d proven, the entry not marked", i, j)
			}
		}
		if mostU := largestSource(oneShot); e.most != 0 && (int(e.most)-1 != mostU || e.nreq != s.p.maxReq) {
			fail("entry %d caches %d for its largest one-shot source, which holds %d of %d requesters", i, e.most, mostU, e.nreq)
		}
		if most := largestSource(reqs); s.p.maxReqSrc != 0 && most > int(s.p.maxReqSrc) {
			fail("entry %d: a source holds %d requesters, cap %d", i, most, s.p.maxReqSrc)
		}
		want := (int(e.nreq) - 1 + lanesPerChunk - 1) / lanesPerChunk
		n := 0
		for c := e.chunk; c != nilIdx; c = s.chunks[c].next {
			n++
			if n > want {
				break
			}
		}
		if n != want {
			fail("entry %d with %d requesters has %d chunks, want %d", i, e.nreq, n, want)
		}
		owned += n
		reqs = s.requestersLocked(uint32(i))
		seen := make(map[lane.Key]bool, len(reqs))
		for _, r := range reqs {
			if seen[r] {
				fail("entry %d lists requester %v twice", i, r)
			}
			seen[r] = true
		}
	}
	if owned != s.nChunks {
		fail("entries own %d chunks, nChunks = %d", owned, s.nChunks)
	}
	freeChunks := 0
	for c := s.freeChunk; c != nilIdx; c = s.chunks[c].next {
		freeChunks++
		if freeChunks > len(s.chunks) {
			fail("chunk free list cycles")
		}
	}
	if owned+freeChunks != len(s.chunks) {
		fail("owned %d + free %d chunks != slab %d", owned, freeChunks, len(s.chunks))
	}
}

// indexSlotsFor returns the index length growIndexLocked reaches at n entries.
func indexSlotsFor(n int) int {
	size := initialIndexSlots
	for n*indexLoadDen > size*indexLoadNum {
		size *= 2
	}
	return size
}

// largestSource returns how many of reqs the most common source
// (lane.Key.Source) holds.
func largestSource(reqs []lane.Key) int {
	n := map[[16]byte]int{}
	most := 0
	for _, r := range reqs {
		n[r.Source()]++
		most = max(most, n[r.Source()])
	}
	return most
}

// flagsLocked returns the flags of entry i's requesters in join order.
func (s *shard) flagsLocked(i uint32) []uint8 {
	e := &s.entries[i]
	out := []uint8{e.firstFlags()}
	left := int(e.nreq) - 1
	for c := e.chunk; left > 0; c = s.chunks[c].next {
		n := min(left, lanesPerChunk)
		out = append(out, s.chunks[c].flags[:n]...)
		left -= n
	}
	return out
}

// requestersLocked returns entry i's requesters in join order.
func (s *shard) requestersLocked(i uint32) []lane.Key {
	e := &s.entries[i]
	out := []lane.Key{e.first}
	left := int(e.nreq) - 1
	for c := e.chunk; left > 0; c = s.chunks[c].next {
		n := min(left, lanesPerChunk)
		out = append(out, s.chunks[c].lanes[:n]...)
		left -= n
	}
	return out
}
