package pit

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/urbit-relay/relay/lane"
)

// Table is the pending-request table. All methods are safe for concurrent
// use; see the package comment for the locking.
type Table struct {
	// Static after New.
	shards    []shard
	shardMask uint64
	tickNs    int64
	ttlNs     int64
	// tickMul and tickShift divide a clock reading by tickNs with a
	// multiply (see ticks); ttlQuot and ttlRem are ttlNs/tickNs and
	// ttlNs%tickNs; ticksMax is the largest reading ticks divides so.
	tickMul   uint64
	tickShift uint
	ttlQuot   int64
	ttlRem    int64
	ticksMax  int64

	// expireMark is expireStarted|tick of the last Expire that ran; it lets
	// repeated calls within one tick return without taking any lock.
	expireMark atomic.Uint64
}

const expireStarted = 1 << 32

// New returns an empty table configured by cfg, zero fields taking their
// defaults. It allocates only the shards' wheel buckets; slabs grow on
// demand up to the configured caps.
func New(cfg Config) (*Table, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := newParams(cfg)
	p.seed = cfg.Seed
	for p.seed == 0 {
		var seed [8]byte
		if _, err := rand.Read(seed[:]); err != nil {
			return nil, fmt.Errorf("pit: seed: %w", err)
		}
		p.seed = binary.LittleEndian.Uint64(seed[:])
	}
	p.seedA0 = mix(p.seed)
	t := &Table{
		shards:    make([]shard, cfg.Shards),
		shardMask: uint64(cfg.Shards - 1),
		tickNs:    p.tickNs,
		ttlNs:     p.ttlNs,
		ttlQuot:   p.ttlNs / p.tickNs,
		ttlRem:    p.ttlNs % p.tickNs,
		ticksMax:  math.MaxInt64 - p.ttlNs - p.tickNs,
	}
	t.tickMul, t.tickShift = tickDivisor(p.tickNs)
	for i := range t.shards {
		t.shards[i].init(p)
	}
	return t, nil
}

// shardOf returns the shard for hash h (bits 32 and up; the index uses the
// low bits and the tag the top byte).
func (t *Table) shardOf(h uint64) *shard {
	return &t.shards[(h>>32)&t.shardMask]
}

// tick returns the wheel tick containing now.
func (t *Table) tick(now time.Duration) uint32 {
	return uint32(int64(now) / t.tickNs)
}

// expiryTick returns the tick at which an entry added at now expires: now+TTL
// rounded up to a whole tick.
func (t *Table) expiryTick(now time.Duration) uint32 {
	end := int64(now) + t.ttlNs
	return uint32((end + t.tickNs - 1) / t.tickNs)
}

// tickDivisor returns the multiplier m and shift sh that divide any n in
// [0, 2^63) by d >= 2 as hi64(n*m) >> sh (Granlund and Montgomery,
// "Division by invariant integers using multiplication", 1994, theorem
// 4.2 with N = 63): with l = ceil(log2 d), m = ceil(2^(63+l) / d), which
// fits 64 bits, and m*d - 2^(63+l) < d <= 2^l. It replaces the 64-bit
// IDIVs by the tick (two an Add, one a Take or Expire) with one MUL.
// Config.validate keeps d >= MinTick.
func tickDivisor(d int64) (m uint64, sh uint) {
	l := uint(bits.Len64(uint64(d - 1)))
	q, r := bits.Div64(1<<(l-1), 0, uint64(d)) // 2^(63+l) / d; 2^(l-1) < d
	if r != 0 {
		q++
	}
	return q, l - 1
}

// tickFast is tick for a reading in [0, ticksMax], by tickDivisor's
// multiply; it also returns the reading's remainder within its tick.
func (t *Table) tickFast(n int64) (q, rem int64) {
	hi, _ := bits.Mul64(uint64(n), t.tickMul)
	q = int64(hi >> t.tickShift)
	return q, n - q*t.tickNs
}

// nowTick is tick, by a multiply for every reading but a negative one.
func (t *Table) nowTick(now time.Duration) uint32 {
	if now < 0 {
		return t.tick(now)
	}
	q, _ := t.tickFast(int64(now))
	return uint32(q)
}

// ticks returns tick(now) and expiryTick(now) with one multiply instead
// of two divisions, for a reading in [0, ticksMax] (any other takes the
// divisions; TestTicksAgree pins that the two agree). With now = q*tick +
// rem and TTL = ttlQuot*tick + ttlRem, the expiry tick is q + ttlQuot +
// ceil((rem + ttlRem) / tick), and rem + ttlRem lies in [0, 2*tick-2].
func (t *Table) ticks(now time.Duration) (nowTick, expTick uint32) {
	n := int64(now)
	if n < 0 || n > t.ticksMax {
		return t.tick(now), t.expiryTick(now)
	}
	q, rem := t.tickFast(n)
	x := rem + t.ttlRem
	exp := q + t.ttlQuot
	if x > 0 {
		exp++
	}
	if x > t.tickNs {
		exp++
	}
	return uint32(q), uint32(exp)
}

// Prefetch asks the CPU to bring key's home slot in the index into cache,
// without waiting for it and without taking the shard's lock. A caller
// with a batch of keys prefetches them all, then Adds or Takes them: in a
// table too big for the cache the index misses then overlap instead of
// stalling one after another. It changes nothing and is always safe; a
// slot that moves meanwhile is merely a wasted hint.
func (t *Table) Prefetch(key uint64) {
	h := mix(key)
	v := t.shardOf(h).slotsView.Load()
	if v == nil {
		return
	}
	slots := *v
	prefetch(unsafe.Pointer(&slots[int(h)&(len(slots)-1)]))
}

// Add records that requester asked for the request named key at now and
// returns what the caller must do with the request (see Verdict). evicted
// reports that a live entry was shed to make room for this one (ShedOldest
// with a full shard); the caller counts it. now is the caller's monotonic
// clock (time since an arbitrary epoch, non-negative); calls may carry
// slightly out-of-order readings from different goroutines. The requester
// is a one-shot requester (see the package comment's "Who has shown it
// receives"); AddProven is Add for one the caller has shown to receive.
func (t *Table) Add(key uint64, requester lane.Key, now time.Duration) (v Verdict, evicted bool) {
	return t.add(key, &requester, false, now)
}

// AddAt is Add of the requester at *requester, read in place.
func (t *Table) AddAt(key uint64, requester *lane.Key, now time.Duration) (v Verdict, evicted bool) {
	return t.add(key, requester, false, now)
}

// AddProven is Add for a requester the caller has shown to receive at its
// lane (the relay: it answered a STUN probe the relay sent it there). At a
// full entry it takes the place of a requester not shown to receive, if
// any (other than the entry's first), before the max-min rule applies;
// none shown to receive is displaced by a newcomer that is not. A
// requester already on the entry keeps the mark until the entry goes.
func (t *Table) AddProven(key uint64, requester lane.Key, now time.Duration) (v Verdict, evicted bool) {
	return t.add(key, &requester, true, now)
}

// add is Add and AddProven; requester is read, not kept (see addLocked).
func (t *Table) add(key uint64, requester *lane.Key, proven bool, now time.Duration) (v Verdict, evicted bool) {
	h := mix(key)
	s := t.shardOf(h)
	nowTick, expTick := t.ticks(now)
	nowMs := uint32(int64(now) / int64(time.Millisecond))
	s.mu.Lock()
	v, evicted = s.addLocked(h, requester, proven, nowTick, expTick, nowMs)
	s.mu.Unlock()
	return v, evicted
}

// Take answers the request named key: if a live entry exists at now, it
// appends the entry's requesters (distinct, in the order they joined, a
// requester that displaced another in the other's place) to dst,
// deletes the entry and returns the extended slice and true. If the entry is
// absent or expired it returns dst unchanged and false (deleting an expired
// entry). Take allocates only if dst lacks capacity.
func (t *Table) Take(key uint64, dst []lane.Key, now time.Duration) ([]lane.Key, bool) {
	return t.TakeHeld(key, dst, nil, now)
}

// TakeHeld is Take that also records in held (unless nil) what the entry
// held beyond its requesters, so that the caller may put it back with
// Restore and tell which requesters a contested page reached already
// (Held.Delivered). It allocates nothing more than Take.
func (t *Table) TakeHeld(key uint64, dst []lane.Key, held *Held, now time.Duration) ([]lane.Key, bool) {
	h := mix(key)
	s := t.shardOf(h)
	nowTick := t.nowTick(now)
	s.mu.Lock()
	dst, ok := s.takeLocked(h, dst, held, nowTick)
	s.mu.Unlock()
	return dst, ok
}

// Restore puts back an entry TakeHeld took: reqs is the slice TakeHeld
// returned for key and held what it recorded. It is for a response that
// does not end the request: a page from a lane the relay is not sure of
// (the relay's contested page), after which the request stays pending for
// the page of the lane it trusts. Every requester is put back marked
// delivered (Held.Delivered, for the next TakeHeld): the caller sent it
// that page now or a page of the name before, and it is sent no other
// such page until it asks again (Add clears the mark), so however many
// such pages arrive, each requester gets one copy per ask. The entry
// keeps its expiry and last forward (a response is not an ask: it does
// not prolong the entry), and each requester its proof of receiving. If
// the name has a live entry again (asked meanwhile), the requesters not
// on it are appended to it. Restore creates no entry past the shard's
// share of MaxEntries or the first requester's source's
// MaxEntriesPerSource, and appends no requester past
// MaxRequestersPerEntry or the overflow pool and its per-source share; an
// expired entry is not put back. It returns how many requesters the
// entry then holds (0: none put back).
func (t *Table) Restore(key uint64, reqs []lane.Key, held *Held, now time.Duration) int {
	if held.base < 0 || held.base+held.n > len(reqs) {
		return 0
	}
	h := mix(key)
	s := t.shardOf(h)
	s.mu.Lock()
	n := s.restoreLocked(h, reqs[held.base:held.base+held.n], held, t.nowTick(now))
	s.mu.Unlock()
	return n
}

// Held is what TakeHeld records of an entry beyond its requesters: when it
// expires and was last forwarded, and each requester's marks. A Held is
// about 4 KiB (a flag byte for each of MaxRequestersLimit requesters);
// the caller keeps one and reuses it.
type Held struct {
	flags         [MaxRequestersLimit]uint8
	expiry, fwdMs uint32
	base, n       int // the requesters' place in TakeHeld's dst
}

// Delivered reports whether the i-th requester TakeHeld returned (counting
// from the first it appended) was sent a contested page (Restore) since it
// last asked: the caller sends it no other contested page.
func (h *Held) Delivered(i int) bool {
	return i >= 0 && i < h.n && h.flags[i]&flagDelivered != 0
}

// Expire deletes the entries expired at now and returns how many. It does
// work only when now has entered a tick later than the last Expire's, then
// visits the wheel buckets of the ticks passed (each shard locked in turn,
// for a time proportional to its entries due), so calling it on every
// packet costs one atomic load. Entries whose expiry was bumped are kept.
func (t *Table) Expire(now time.Duration) int {
	nowTick := t.nowTick(now)
	mark := t.expireMark.Load()
	if mark&expireStarted != 0 && int32(nowTick-uint32(mark)) <= 0 {
		return 0
	}
	if !t.expireMark.CompareAndSwap(mark, expireStarted|uint64(nowTick)) {
		return 0 // another goroutine is expiring this tick
	}
	removed := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n := s.expireLocked(nowTick)
		s.c.expired += uint64(n)
		s.mu.Unlock()
		removed += n
	}
	return removed
}

// Len returns the number of live entries, including expired ones not yet
// deleted by Expire, Take or Add. It takes each shard's lock in turn: for
// metrics and tests, not a per-datagram path (see IndexSlots).
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.c.live()
		s.mu.Unlock()
	}
	return n
}

// IndexSlots returns the size of the table's key index, in slots of 4
// bytes, summed over the shards, without a lock: what a lookup of a new
// name ranges over, and so whether it misses the cache. The index grows
// (doubling, at 3/4 full) and never shrinks, so this is a high-water mark
// of Len: between 4/3 and 8/3 of the most entries a shard has held, per
// shard, and at least initialIndexSlots per shard once it held any.
func (t *Table) IndexSlots() int {
	n := 0
	for i := range t.shards {
		if v := t.shards[i].slotsView.Load(); v != nil {
			n += len(*v)
		}
	}
	return n
}

// Cap returns the most live entries the table holds: each shard's share
// of Config.MaxEntries (MaxEntries/Shards) times the shards. It is static.
func (t *Table) Cap() int {
	n := 0
	for i := range t.shards {
		n += t.shards[i].p.entryCap
	}
	return n
}

// Stats returns a snapshot of the counters, taking each shard's lock in
// turn.
func (t *Table) Stats() Stats {
	var st Stats
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		st.Entries += s.c.live()
		s.c.addTo(&st)
		s.mu.Unlock()
	}
	return st
}
