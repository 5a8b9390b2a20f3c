package pit

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// FullPolicy says what Add does when a new name arrives and its shard is full
// of live entries.
type FullPolicy uint8

const (
	// ShedOldest evicts the entry nearest expiry to make room; Add reports
	// the eviction. The default: a full table under a flood keeps admitting
	// fresh requests, and the entry shed is the one closest to being given up
	// anyway.
	ShedOldest FullPolicy = iota
	// RefuseNew refuses the new name (VerdictRefused) and keeps every
	// existing entry. So that a flood from one source cannot keep the
	// table full for everyone, the last part of each shard (see
	// FullReserveDivisor) is kept for sources holding less than their fair
	// share (FullShareDivisor): a source at or above it is refused once
	// the shard is that full, while others are refused only when the
	// shard is full.
	RefuseNew
)

// String returns the policy's name.
func (p FullPolicy) String() string {
	switch p {
	case ShedOldest:
		return "shed-oldest"
	case RefuseNew:
		return "refuse-new"
	}
	return fmt.Sprintf("FullPolicy(%d)", uint8(p))
}

// Config configures a Table. Its zero value is the default table: a zero
// field takes the default named in constants.go. Validate (and New)
// rejects out-of-range values with a *ConfigError naming the field.
type Config struct {
	// MaxEntries is the total capacity across shards; each shard holds at
	// most MaxEntries/Shards entries (so the table holds at most
	// MaxEntries, and a shard can be full while the table as a whole is a
	// fraction of a percent short of it). Default DefaultMaxEntries. Must be
	// at least Shards and at most Shards*MaxEntriesPerShard.
	MaxEntries int

	// MaxRequestersPerEntry caps the distinct requester lanes per entry.
	// Default DefaultMaxRequestersPerEntry; 1..MaxRequestersLimit.
	//
	// While an entry has room, every new requester is recorded, whatever
	// its source (an IP address, any port; an IPv6 /64): many hosts
	// behind one NAT are many requesters. A full entry is shared max-min
	// fairly by source: a newcomer whose source, counting it, would hold
	// fewer requesters than the entry's largest source takes the place of
	// that source's most recent requester (the displaced one is dropped
	// and counted in Stats.Displaced); any other newcomer is refused
	// (VerdictRequesterCapped or VerdictCappedForward, counted in
	// Stats.EntryShareCapped). So one source on many ports fills what is
	// free, but a requester from a source holding at least two fewer
	// takes one of its places and cannot be pushed off again: the entry's
	// shares settle max-min fair, no source holding more than one more
	// than any source still refused. That is among the requesters added
	// by Add (one-shot); those added by AddProven (shown to receive) come
	// first: no one-shot newcomer displaces one, and one takes a one-shot
	// requester's place (the package comment's "Who has shown it
	// receives").
	MaxRequestersPerEntry int

	// MaxOverflowRequesters caps, across the table, the requester lanes held
	// beyond each entry's first. Default MaxEntries/DefaultOverflowDivisor
	// (rounded up). Each shard gets an equal share, rounded up to whole
	// chunks of 3 lanes. When a shard's share is used up, new requesters on
	// its existing entries are refused as VerdictRequesterCapped.
	MaxOverflowRequesters int

	// MaxOverflowPerSource caps the overflow requesters one source (an IP
	// address, any port; an IPv6 /64) may hold, so that one source on many
	// ports cannot use up the pool. Default
	// MaxOverflowRequesters/DefaultOverflowSourceDivisor (rounded up);
	// negative means no cap. Like the pool it is enforced per shard, as
	// MaxOverflowPerSource/Shards rounded up to whole chunks of 3, and it
	// counts chunks: a chunk is charged to the source of the requester that
	// opened it (an entry's 2nd, 5th, 8th... requester), so the charges add
	// up to the pool's use however requesters mix. A chunk stays charged to
	// its opener's source when a newcomer displaces the opener (a
	// displacement costs the pool nothing, and charges it to no one). A
	// requester needing a new chunk while its source holds its share is
	// refused as VerdictRequesterCapped (or VerdictCappedForward); one
	// joining a chunk already open is not, since it costs the pool
	// nothing.
	MaxOverflowPerSource int

	// MaxRequestersPerSource, when positive and below
	// MaxRequestersPerEntry, is a fixed cap on the requester lanes one
	// source holds on one entry, applied even while the entry has room
	// (a newcomer from a source at the cap is refused and counted in
	// Stats.EntryShareCapped). Default none (0; negative is none too):
	// the full entry's max-min rule (MaxRequestersPerEntry) already keeps
	// one source from crowding the others out, and a fixed cap refuses
	// the hosts behind one NAT while there is room for them.
	MaxRequestersPerSource int

	// TTL is how long an entry lives after the last Add that bumped it;
	// expiry is rounded up to a whole Tick. Default DefaultTTL; at least
	// Tick and at most MaxTTLTicks ticks.
	TTL time.Duration

	// SuppressWindow is how long after an upstream forward a new requester
	// is aggregated without forwarding. Default DefaultSuppressWindow; at
	// most MaxSuppressWindow. It is kept in whole milliseconds: a window
	// under 1 ms (e.g. time.Nanosecond) forwards for every new requester.
	SuppressWindow time.Duration

	// Tick is the expiry clock's granularity. Default DefaultTick; at least
	// MinTick.
	Tick time.Duration

	// Shards is the number of independently locked shards, a power of two.
	// Default DefaultShards; at most MaxShards.
	Shards int

	// MaxEntriesPerSource caps the live entries created by one source IP
	// address (any port), so that one source cannot fill the table. It is
	// enforced per shard, as MaxEntriesPerSource/Shards rounded up, which
	// for the uniformly hashed names of any real load is the same thing.
	// Default MaxEntries/DefaultSourceDivisor (at least 1); negative means
	// no cap. A new name from a source at its cap gets
	// VerdictSourceCapped.
	MaxEntriesPerSource int

	// FullPolicy says what to do with a new name when its shard is full.
	// Default (zero) ShedOldest.
	FullPolicy FullPolicy

	// Seed seeds the hash that counts sources into their slots
	// (SourceSlotsPerShard). Zero, the default, draws a random seed in
	// New, which is what a relay must do: a known seed lets an attacker
	// pick addresses that share an honest source's slot, and so its
	// shares. Tests set it to reproduce a run exactly, collisions
	// included.
	Seed uint64
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultMaxEntries
	}
	if c.MaxRequestersPerEntry == 0 {
		c.MaxRequestersPerEntry = DefaultMaxRequestersPerEntry
	}
	if c.MaxOverflowRequesters == 0 && c.MaxEntries > 0 {
		c.MaxOverflowRequesters = (c.MaxEntries + DefaultOverflowDivisor - 1) / DefaultOverflowDivisor
	}
	if c.MaxEntriesPerSource == 0 {
		c.MaxEntriesPerSource = max(1, c.MaxEntries/DefaultSourceDivisor)
	}
	if c.MaxOverflowPerSource == 0 {
		c.MaxOverflowPerSource = (c.MaxOverflowRequesters + DefaultOverflowSourceDivisor - 1) / DefaultOverflowSourceDivisor
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.SuppressWindow == 0 {
		c.SuppressWindow = DefaultSuppressWindow
	}
	if c.Tick == 0 {
		c.Tick = DefaultTick
	}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	return c
}

// errConfig is what every *ConfigError is (errors.Is).
var errConfig = errors.New("pit: invalid config")

// ConfigError is a Config field that Validate (and New) rejects.
type ConfigError struct {
	Field string // the Config field, such as "MaxEntries"
	Value any    // its value (after defaults: a zero field is its default)
	Want  string // what is wanted, such as "a whole number from 16 to 268435424"
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("pit: Config.%s %v: want %s", e.Field, e.Value, e.Want)
}

// Unwrap makes every ConfigError errConfig for errors.Is.
func (e *ConfigError) Unwrap() error { return errConfig }

// Validate reports the first field of c (with its defaults) that New
// would reject, as a *ConfigError; nil if New accepts c.
func (c Config) Validate() error { return c.withDefaults().validate() }

// validate reports the first out-of-range field of a defaulted config.
func (c Config) validate() error {
	bad := func(field string, v any, format string, a ...any) error {
		return &ConfigError{Field: field, Value: v, Want: fmt.Sprintf(format, a...)}
	}
	if c.Shards < 1 || c.Shards > MaxShards || bits.OnesCount(uint(c.Shards)) != 1 {
		return bad("Shards", c.Shards, "a power of two from 1 to %d", MaxShards)
	}
	maxOverflow := c.Shards*lanesPerChunk*MaxEntriesPerShard - 1
	switch {
	case c.MaxEntries < c.Shards || c.MaxEntries > c.Shards*MaxEntriesPerShard:
		return bad("MaxEntries", c.MaxEntries, "a whole number from %d to %d", c.Shards, c.Shards*MaxEntriesPerShard)
	case c.MaxRequestersPerEntry < 1 || c.MaxRequestersPerEntry > MaxRequestersLimit:
		return bad("MaxRequestersPerEntry", c.MaxRequestersPerEntry, "a whole number from 1 to %d", MaxRequestersLimit)
	case c.MaxOverflowRequesters < 0 || c.MaxOverflowRequesters/c.Shards/lanesPerChunk >= MaxEntriesPerShard:
		return bad("MaxOverflowRequesters", c.MaxOverflowRequesters, "a whole number from 0 to %d", maxOverflow)
	case c.MaxOverflowPerSource/c.Shards/lanesPerChunk >= MaxEntriesPerShard:
		return bad("MaxOverflowPerSource", c.MaxOverflowPerSource, "a whole number up to %d (negative: no cap)", maxOverflow)
	case c.Tick < MinTick:
		return bad("Tick", c.Tick, "a duration of at least %v", MinTick)
	case c.TTL < c.Tick || c.TTL/c.Tick > MaxTTLTicks || c.TTL/c.Tick == MaxTTLTicks && c.TTL%c.Tick != 0:
		return bad("TTL", c.TTL, "a duration from %v to %v", c.Tick, c.Tick*MaxTTLTicks)
	case c.SuppressWindow < 0 || c.SuppressWindow > MaxSuppressWindow:
		return bad("SuppressWindow", c.SuppressWindow, "a duration from 0s to %v", MaxSuppressWindow)
	case c.FullPolicy != ShedOldest && c.FullPolicy != RefuseNew:
		return bad("FullPolicy", c.FullPolicy, "%v or %v", ShedOldest, RefuseNew)
	}
	return nil
}

// params are a shard's immutable copy of the validated config, in the units
// the hot path uses.
type params struct {
	tickNs    int64  // Tick in nanoseconds
	ttlNs     int64  // TTL in nanoseconds
	windowMs  int32  // SuppressWindow in whole milliseconds
	wheelMask uint32 // wheel buckets - 1; buckets is a power of two > TTL/Tick + 1
	entryCap  int    // MaxEntries / Shards
	chunkCap  int    // overflow chunks per shard
	maxReq    uint16 // MaxRequestersPerEntry
	// maxReqSrc is MaxRequestersPerSource when positive and below maxReq;
	// 0 for none.
	maxReqSrc uint16
	policy    FullPolicy
	sourceCap uint32 // MaxEntriesPerSource per shard; 0 for none
	// chunkShare is MaxOverflowPerSource per shard in chunks; 0 for none.
	chunkShare uint32
	// reserveAt is the entry count from which a new name is refused to a
	// source holding fullShare entries or more (RefuseNew); entryCap when
	// there is no reserve.
	reserveAt int
	fullShare uint32
	// countEntries is set when a rule needs entries counted by source:
	// sourceCap or the reserve.
	countEntries bool
	seed         uint64 // seeds the source hash
	seedA0       uint64 // mix(seed): the source hash's first round for an IPv4 source (shard.sourceHash)
}

// counted reports whether shards keep per-source counters.
func (p *params) counted() bool { return p.countEntries || p.chunkShare > 0 }

func newParams(c Config) params {
	ttlTicks := (c.TTL + c.Tick - 1) / c.Tick
	// An entry's expiry tick is at most floor(now/Tick) + ttlTicks + 1, so
	// ttlTicks + 2 buckets keep every fresh schedule in a distinct bucket
	// from the one being processed.
	buckets := uint32(1) << bits.Len32(uint32(ttlTicks)+1)
	overflowPerShard := (c.MaxOverflowRequesters + c.Shards - 1) / c.Shards
	entryCap := c.MaxEntries / c.Shards
	var chunkShare uint32
	if c.MaxOverflowPerSource > 0 {
		perShard := (c.MaxOverflowPerSource + c.Shards - 1) / c.Shards
		chunkShare = uint32((perShard + lanesPerChunk - 1) / lanesPerChunk)
	}
	var maxReqSrc uint16
	if c.MaxRequestersPerSource > 0 && c.MaxRequestersPerSource < c.MaxRequestersPerEntry {
		maxReqSrc = uint16(c.MaxRequestersPerSource)
	}
	reserveAt := entryCap
	if c.FullPolicy == RefuseNew {
		reserveAt -= entryCap / FullReserveDivisor
	}
	return params{
		tickNs:    int64(c.Tick),
		ttlNs:     int64(c.TTL),
		windowMs:  int32(c.SuppressWindow / time.Millisecond),
		wheelMask: buckets - 1,
		entryCap:  entryCap,
		chunkCap:  (overflowPerShard + lanesPerChunk - 1) / lanesPerChunk,
		maxReq:    uint16(c.MaxRequestersPerEntry),
		maxReqSrc: maxReqSrc,
		policy:    c.FullPolicy,
		sourceCap: uint32((max(c.MaxEntriesPerSource, 0) + c.Shards - 1) / c.Shards),

		chunkShare: chunkShare,
		reserveAt:  reserveAt,
		fullShare:  uint32(max(1, entryCap/FullShareDivisor)),

		countEntries: c.MaxEntriesPerSource > 0 || reserveAt < entryCap,
	}
}
