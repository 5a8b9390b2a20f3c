package pit

import "time"

// Defaults applied by New to zero Config fields, and the hard limits New
// enforces. Every cap and timing of the package is here.
const (
	// DefaultMaxEntries is the total number of pending entries across all
	// shards. A relay in front of a galaxy sees on the order of a million
	// requests in flight (tens of thousands of sponsees, each with many
	// outstanding peeks and pokes, each living up to TTL); at about 65 bytes
	// an entry this costs ~65 MB, which a relay host affords, while an
	// uncapped table (vere's mesa.c has no cap) lets a flood of unique names
	// exhaust memory.
	DefaultMaxEntries = 1_000_000

	// DefaultMaxRequestersPerEntry bounds the requester lanes remembered per
	// request name. Many requesters share a name when a path is popular (an
	// OTA update, a widely read scry path under one galaxy, a subscription
	// everyone waits on), and a carrier-grade NAT puts hundreds of ships
	// behind one address, each its own lane (a port of that address):
	// aggregation is the point of the table, so 200 ships of one NAT waiting
	// on one held name must all be remembered, with room for everyone else.
	// 512 is that with a margin. Past it, a full entry is shared max-min
	// fairly by source (see Config.MaxRequestersPerEntry): a newcomer whose
	// source, counting it, would still hold fewer than the entry's largest
	// displaces one of the largest's requesters, any other is not recorded (its request still refreshes the
	// upstream forward once per SuppressWindow, VerdictCappedForward) and
	// retries after the response. The cap bounds the linear
	// de-duplication scan on every Add (512 keys, 9 KiB: 1.6 µs for a
	// flood's refused Add at a full entry, BenchmarkFloodFullEntry on a
	// shared 2-core machine, against 1.1 µs for the 49 keys the old
	// 64-requester entry scanned then), the fan-out of one response (512
	// copies, each still within its address's amplification budget) and,
	// with MaxOverflowRequesters, the memory of the table.
	DefaultMaxRequestersPerEntry = 512

	// DefaultOverflowDivisor sets the default size of the shared pool of
	// overflow requester slots (every requester of an entry after its first)
	// to MaxEntries/DefaultOverflowDivisor. Most requests in flight have a
	// single requester (ship-to-ship pokes and acks); aggregation is the
	// exception, so a quarter slot per entry (about 5.3 MB at the defaults)
	// covers it while keeping total memory bounded however a flood spreads
	// requesters over entries.
	DefaultOverflowDivisor = 4

	// DefaultTTL is how long an entry lives after its last Add. UIP-0102's
	// discussion says thirty seconds ("every request must be satisfied within
	// thirty seconds"; many HTTP systems live with the same bound); its spec
	// body says three minutes with a two-minute re-send backoff. Requesters
	// retransmit far more often than every 30 s while a request is live, and
	// each retransmission bumps the expiry, so 30 s only drops requests whose
	// requester has given up. Configurable for the 3-minute reading.
	DefaultTTL = 30 * time.Second

	// DefaultSuppressWindow is how long after forwarding a request upstream a
	// new requester for the same name is aggregated without forwarding again.
	// 500 ms covers the round trip to the receiver on nearly every Internet
	// path (intercontinental RTTs are ~150-300 ms), so within it the first
	// copy's response is most likely still coming; after it, the first copy
	// may have been lost and forwarding the newcomer's copy is a free retry.
	DefaultSuppressWindow = 500 * time.Millisecond

	// DefaultTick is the granularity of the expiry clock and of the timer
	// wheel. Expiry is rounded up to a whole tick, so an entry lives between
	// TTL and TTL+Tick (at most 0.33% late at the defaults). 100 ms matches
	// the fastest ticker the relay runs Expire on; a coarser tick would let
	// lazily-called Expire do less work per call but hold entries longer.
	DefaultTick = 100 * time.Millisecond

	// DefaultShards is the number of independently locked shards. A relay runs
	// at most a handful of socket goroutines (SO_REUSEPORT, one per core); 16
	// shards make two of them meeting on one lock rare while keeping the
	// per-shard fixed cost (wheel heads, initial slabs) negligible. Raise it
	// to the next power of two at or above the socket count on bigger hosts.
	DefaultShards = 16

	// DefaultOverflowSourceDivisor sets the default per-source share of the
	// overflow pool (Config.MaxOverflowPerSource) to
	// MaxOverflowRequesters/DefaultOverflowSourceDivisor, the same tenth
	// one source gets of the table (DefaultSourceDivisor). Without a
	// share, one address joining many entries from many ports (each port
	// is a distinct requester lane) used up the pool,
	// and honest subscribers of any other name were refused once its first
	// requester was in. With it, one address holds at most a tenth of each
	// shard's overflow chunks and nine tenths stay for everyone else; it
	// takes ten addresses at their share to use the pool up, as it takes
	// ten to fill the table. The share is kept beside the entry's
	// max-min rule because it guards another thing: the entry's rule
	// shares one entry's slots, the pool is shared by all entries, and
	// DefaultMaxRequestersPerEntry times the entries far exceeds it. At
	// the default table the share is 1,563 lanes a shard, three full
	// entries' overflow (511 lanes each), so it never binds on one
	// address's requesters for one name; in tables below 126,736 entries
	// (16 shards) it binds before 200 requesters from one address fit one
	// entry.
	DefaultOverflowSourceDivisor = 10

	// DefaultSourceDivisor sets the default per-source cap on entries
	// (Config.MaxEntriesPerSource) to MaxEntries/DefaultSourceDivisor. One
	// source IP cannot hold more than a tenth of the table, so a flood
	// from one address (or one spoofed address) leaves room for everyone
	// else, while a downstream relay that aggregates many ships behind one
	// address still gets a large share.
	DefaultSourceDivisor = 10

	// FullReserveDivisor sets the part of each shard kept, under the
	// RefuseNew policy, for sources below their fair share:
	// the last (MaxEntries/Shards)/FullReserveDivisor entries of a shard
	// (an eighth) are given only to a new name whose source holds fewer
	// than FullShare entries in the shard. A flood from one address, or
	// from a few, fills the rest and is then refused, while a requester
	// with few entries still gets in, because no existing entry is shed
	// (RefuseNew's promise) but room is kept. An eighth is a few seconds
	// of honest arrivals at any table size (at the defaults 7,800 entries
	// a shard) and costs a large source an eighth of the table only while
	// the table is that full. 0 entries (no reserve) below 8 per shard.
	FullReserveDivisor = 8

	// FullShareDivisor sets the fair share used with the reserve:
	// a source holding (MaxEntries/Shards)/FullShareDivisor entries of a
	// shard (at least one) or more may not take the reserve's entries.
	// 1/64 of a shard is far above what one honest requester has pending
	// (a ship has tens of requests in flight, spread over the shards) and
	// far below what a flood from one address holds once the table is
	// full; a flood from N addresses, each held under the share, needs
	// N above FullShareDivisor (64 at any table size) to fill the reserve.
	FullShareDivisor = 64

	// SourceSlotsPerShard is the number of per-source counters each shard
	// keeps (entries created, for Config.MaxEntriesPerSource and the
	// RefuseNew reserve; overflow chunks opened, for
	// Config.MaxOverflowPerSource). A source is an IP address, any port;
	// an IPv6 source is its /64 (what one host or customer is routed,
	// RFC 6177), since a host picks any address in its /64 at will.
	// Sources are counted by a seeded hash into these slots, so two
	// sources may share a counter (and a cap) with probability 1/4096 per
	// pair; the seed keeps an attacker from choosing which. 32 KiB per
	// shard.
	SourceSlotsPerShard = 4096

	// MaxShards bounds Config.Shards; more shards than this only add fixed
	// cost.
	MaxShards = 1024

	// MaxRequestersLimit bounds Config.MaxRequestersPerEntry. The count is
	// held in 16 bits of the entry, but the bound is the work: every Add
	// scans the entry's requesters (4,096 keys are 72 KiB, 15 µs per
	// packet at a full entry, BenchmarkFloodFullEntry), and a displacement
	// counts them by source in a per-shard scratch table of
	// tallySlotsPerRequester slots per requester (32 B a slot: 256 KiB a
	// shard at the limit, allocated when a shard first meets a newcomer to
	// a full entry). It also sizes Held, a flag byte a requester (4 KiB,
	// one per caller goroutine).
	MaxRequestersLimit = 4096

	// MaxEntriesPerShard bounds MaxEntries/Shards: the index packs a slab
	// slot (plus one) into the low 24 bits of a 32-bit word, the high 8 bits
	// holding a hash tag.
	MaxEntriesPerShard = 1<<24 - 2

	// MaxTTLTicks bounds TTL/Tick. The wheel has one bucket per tick of the
	// TTL (rounded up to a power of two), 4 bytes each per shard; 65536
	// ticks is 6.5 s at 100 µs or 109 min at 100 ms.
	MaxTTLTicks = 1 << 16

	// MaxSuppressWindow bounds Config.SuppressWindow: last-forward times are
	// kept as 32-bit millisecond counters compared modulo 2^32, which is
	// exact for differences below 2^31 ms (24.8 days); one hour is far more
	// than any useful window.
	MaxSuppressWindow = time.Hour

	// MinTick bounds Config.Tick from below: a finer clock would make the
	// 32-bit tick counters wrap (modulo arithmetic stays correct only for
	// differences below 2^31 ticks) within 25 days of idle Expire.
	MinTick = time.Millisecond
)

// Internal layout constants.
const (
	// lanesPerChunk is the number of overflow requester lanes per chunk: three
	// 18-byte lane keys, their source slot, their flag bytes and a 4-byte
	// link make a 64-byte chunk, one cache line.
	lanesPerChunk = 3

	// initialEntrySlots, initialIndexSlots and initialChunkSlots size a
	// shard's slabs on first use; they then double up to the shard's cap.
	initialEntrySlots = 64
	initialIndexSlots = 128
	initialChunkSlots = 16

	// indexLoadNum/indexLoadDen is the maximum load factor of the
	// open-addressing index before it doubles. Linear probing stays short
	// (expected ~2.5 probes on a miss) at 3/4.
	indexLoadNum = 3
	indexLoadDen = 4

	// tallySlotsPerRequester sizes a shard's displacement tally: slots for
	// twice MaxRequestersPerEntry sources (rounded up to a power of two),
	// so that its open addressing stays at most half full and a count of
	// a full entry probes about once per requester.
	tallySlotsPerRequester = 2

	// cacheLinePad separates shards so one shard's lock and counters do not
	// share a cache line with its neighbour's.
	cacheLinePad = 64
)
