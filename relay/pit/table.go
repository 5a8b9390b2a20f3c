package pit

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
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
	t := &Table{
		shards:    make([]shard, cfg.Shards),
		shardMask: uint64(cfg.Shards - 1),
		tickNs:    p.tickNs,
		ttlNs:     p.ttlNs,
	}
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
// slightly out-of-order readings from different goroutines.
func (t *Table) Add(key uint64, requester lane.Key, now time.Duration) (v Verdict, evicted bool) {
	h := mix(key)
	s := t.shardOf(h)
	s.mu.Lock()
	v, evicted = s.addLocked(h, requester, t.tick(now), t.expiryTick(now), uint32(int64(now)/int64(time.Millisecond)))
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
	h := mix(key)
	s := t.shardOf(h)
	s.mu.Lock()
	dst, ok := s.takeLocked(h, dst, t.tick(now))
	s.mu.Unlock()
	return dst, ok
}

// Expire deletes the entries expired at now and returns how many. It does
// work only when now has entered a tick later than the last Expire's, then
// visits the wheel buckets of the ticks passed (each shard locked in turn,
// for a time proportional to its entries due), so calling it on every
// packet costs one atomic load. Entries whose expiry was bumped are kept.
func (t *Table) Expire(now time.Duration) int {
	nowTick := t.tick(now)
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
		s.c.expired.Add(uint64(n))
		s.mu.Unlock()
		removed += n
	}
	return removed
}

// Len returns the number of live entries, including expired ones not yet
// deleted by Expire, Take or Add. It takes no lock.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		n += t.shards[i].c.live()
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

// Stats returns a snapshot of the counters. It takes no lock.
func (t *Table) Stats() Stats {
	var st Stats
	for i := range t.shards {
		c := &t.shards[i].c
		st.Entries += c.live()
		c.addTo(&st)
	}
	return st
}
