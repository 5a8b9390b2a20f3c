// Package pit is the relay's pending-request table (NDN's "pending interest
// table"; UIP-0102's `pending=(map request [=lane expiry=@da])`). For each
// request (peek or poke) forwarded toward its receiver, it remembers which
// lanes asked, so that the response page can be sent back to each of them;
// the entry is deleted when the response is taken or when TTL passes without
// a repeat.
//
// # Semantics
//
// Keys are 64-bit hashes of request names, computed by the caller (the
// relay's: seeded hash/maphash); two names with the same hash share an
// entry. Requesters are lane.Keys.
// Time is passed in as the caller's monotonic clock (time since the relay's
// start); the package never reads a clock.
//
// Add(key, requester, now) records an interest and returns a Verdict:
//
//   - VerdictForwardNew: no live entry; one is created. Forward.
//   - VerdictForwardRetransmit: the requester is already on the entry; its
//     retransmission. Expiry bumped. Forward again.
//   - VerdictAggregated: a new requester within SuppressWindow of the last
//     upstream forward. Added (at a full entry, in place of one it
//     displaced), expiry bumped. Do not forward.
//   - VerdictForwardJoined: a new requester after SuppressWindow. Added,
//     expiry bumped. Forward (the earlier copy may have been lost).
//   - VerdictRequesterCapped: a new requester on an entry already holding
//     MaxRequestersPerEntry requesters whose source may not displace one
//     (below), or when the shard's overflow pool is used up, or its
//     source's share of it. Not recorded, entry unchanged. Drop.
//   - VerdictRefused: a new name, its shard full, policy RefuseNew (or
//     within the shard's reserve, its source over its fair share). Drop.
//   - VerdictSourceCapped: a new name from a source at
//     MaxEntriesPerSource. Drop.
//
// Every forwarding verdict sets the entry's last-forward time. With the
// default policy ShedOldest, a new name arriving at a full shard evicts the
// entry nearest expiry and Add reports evicted=true. An entry expires at
// now+TTL of its last bump, rounded up to a whole Tick: it lives at least
// TTL and less than TTL+Tick. Take(key, dst, now) appends the requesters of
// a live entry to dst (distinct, in join order, a displacing requester in
// the place of the one it displaced), deletes the entry and reports true;
// an absent or expired entry gives false. Expire(now) deletes what has
// expired.
//
// # Sources and their shares
//
// A source is an IP address, whatever the port (a host has 64 Ki of
// them), or an IPv6 /64 (a host picks any address in its /64). Four rules
// keep one source from starving the others; the first three are enforced
// per shard and counted in fixed per-source slots (SourceSlotsPerShard, a
// seeded hash of the source, 8 bytes a slot: entries and chunks), the
// fourth by counting a full entry's requesters by source:
//
//   - MaxEntriesPerSource caps the entries a source creates (the relay
//     sets a tenth of the table).
//   - MaxOverflowPerSource caps the overflow chunks a source opens (a
//     tenth of the pool by default); a chunk is charged to the source of
//     the requester that opened it (its first lane, unless that one was
//     displaced since), so the charges add up to the pool's use.
//   - Under RefuseNew, the last FullReserveDivisor-th of a shard is kept
//     for sources holding fewer than 1/FullShareDivisor of the shard's
//     entries: a flood from few sources fills the rest and is refused
//     there, while others still get in. No entry is shed.
//   - An entry refuses no new requester while it has room, whatever its
//     source: hundreds of ships behind one carrier-grade NAT asking for
//     one name are all remembered (DefaultMaxRequestersPerEntry is 512).
//     A full entry is shared max-min fairly: a newcomer whose source,
//     counting it, would hold fewer requesters than the entry's largest
//     source takes the place of that source's most recent requester
//     (Stats.Displaced); any other is refused (Stats.EntryShareCapped).
//     So a source on many ports joining the name everyone waits on (a
//     subscription's) fills what is free, each later requester from a
//     source holding at least two fewer takes one of its places, and it
//     cannot push them off: a displacement never brings a source below
//     the newcomer's, and the shares settle max-min fair. The counts are
//     exact (lane.Key.Source, not the slots): the entry's largest count
//     is cached in the entry once it is full, and a displacement counts
//     the entry's requesters in a per-shard scratch table (tally), so a
//     refused Add costs the one scan every Add pays. Overflow chunks stay
//     charged to their openers. Config.MaxRequestersPerSource adds an
//     optional fixed cap, off by default.
//
// # Who has shown it receives
//
// A source address costs an off-path attacker nothing to forge, so counted
// alone it let 2,000 forged one-datagram peeks, each from an address of
// its own, level 200 ships behind one NAT (one source) down to one
// requester of the entry they waited on (issue 28). A requester is
// therefore one-shot unless the caller has shown that it receives at its
// lane (AddProven; flagReceives, kept until the entry goes). The relay's
// evidence is authority, not a guess: the lane answered a STUN binding
// request the relay sent there with a random transaction id (relay's
// amp.Config proofs), which an off-path forger never sees. Asking twice is
// no evidence (a forger sends two datagrams as easily as one), nor is a
// route for the lane (a route is learned for ships, not for requesters).
// The relay asks for the proof where it matters: when a full entry
// refuses a newcomer it probes the newcomer's lane (at most once a
// ProbeInterval a lane), and a lane proven asks again through AddProven.
// At a full entry:
//
//   - a one-shot newcomer competes only with the entry's one-shot
//     requesters, by the max-min rule above counted among them, and never
//     displaces a proven one;
//   - a proven newcomer takes the place of a one-shot requester (other
//     than the entry's first) of another source while there is one, the
//     latest of the source holding the most; otherwise it competes with
//     all by the max-min rule.
//
// So forged sources fill what real askers leave and no more, and an entry
// with many real askers is not capped by forged ones: the NAT's 200, each
// refused once, probed and asking again, all get the page. Proven sources
// share among themselves max-min as before (an attacker answering probes
// at its own addresses is proven like anyone, and is one source per
// address). Without AddProven every requester is one-shot and the rules
// are those above.
//
// # Contested pages
//
// A response that does not end the request (the relay's page from a
// ship's answered challenger while its known-good lane works: the request
// stays pending for that lane's page) is taken with TakeHeld and put back
// with Restore, which marks every requester delivered (flagDelivered). A
// further such page is not sent to a delivered requester
// (Held.Delivered), and the mark is cleared when the requester asks again
// (its retransmission is answered): one copy per ask, however many such
// pages come. Put back as before: Restore keeps the entry's expiry and
// last forward (a page is not an ask and does not prolong the entry).
// Before, the requesters were added again after each such page, and each
// got a copy of every one: 23 times the attacker's bytes at 20 requesters,
// 512 times possible.
//
// What remains: sources share slots with probability 1/4096 per pair (a
// collision shares the caps too); a flood from many addresses, each under
// every share (more than ten at the caps' tenths, more than
// FullShareDivisor for the reserve), fills the table and the pool as
// before, and under ShedOldest the fresh entries of such a flood shed the
// oldest, whoever made them; on one entry, a flood from as many
// addresses as the entry holds requesters levels every source at one.
// Many hosts behind one address count as one source for the entry and
// pool shares: in tables below 126,736 entries (16 shards) the overflow
// share binds before 200 of them fit one entry, below 326,416 before 512
// do.
//
// # Memory layout
//
// Nothing in a shard's tables holds a pointer, so the garbage collector
// scans none of the million entries; links are uint32 slab indices.
//
//	entry (56 B): hash u64 | expiry u32 | sched u32 | fwdMs u32 |
//	              next u32 | prev u32 | chunk u32 | first lane.Key (18 B) |
//	              nreq u16 | src u16 (first's source slot, 12 bits, and
//	              its flags) | most u16 (1 + the largest source's one-shot
//	              requesters, once full)
//	chunk (64 B): 3 × lane.Key | src u16 (lanes[0]'s source slot) |
//	              3 × flags u8 | next u32
//	index slot (4 B): tag (hash's top byte) << 24 | entry slot + 1; 0 empty
//
// Each shard has an entry slab with a free list; an open-addressing index
// (linear probing, backward-shift deletion, load <= 3/4) from hash to slab
// slot; a chunk slab with a free list holding requesters beyond the first
// (3 per chunk, chained); and a timer wheel of one bucket per Tick
// (buckets = next power of two above TTL/Tick + 1), each bucket an intrusive
// doubly linked list through the entries' next/prev. The hash stored is
// mix(key), a bijection, so comparing hashes compares keys; the shard comes
// from bits 32 up of the hash, the index position from its low bits, the tag
// from its top byte. Slabs and index start small and double on demand up to
// the shard's caps (MaxEntries/Shards entries, the shard's share of
// MaxOverflowRequesters); once grown, operations allocate nothing. The
// per-source slots, when any per-source rule is on (the overflow share is
// by default), are allocated in New: 32 KiB a shard. The displacement
// tally (32 B a slot, two slots per MaxRequestersPerEntry: 32 KiB a shard
// at the default) is allocated when a shard first meets a newcomer to a
// full entry.
//
// Measured with the defaults (1M entries, 16 shards, one requester each):
// 65.2 bytes of heap per live entry (56 for the entry, 8.4 for the index at
// its final 0.48 load, 0.5 for the per-source slots, the rest wheel
// buckets), against ~1300 B in ndnd. A
// Go map[uint64]uint32 as the index measured 37.7 B per entry alone, so the
// open-addressing index saves ~30 B per entry, and is faster under churn.
// Overflow requesters cost 64 B per 3 (one cache line; 60 before the
// flags) and are bounded by MaxOverflowRequesters (5.3 MB at the
// defaults).
//
// # Expiry
//
// Expiry is kept in ticks (modulo 2^32, compared by signed difference), the
// last forward in milliseconds (likewise), so the clock may run forever.
// An entry is linked in the wheel bucket of its expiry tick when created; a
// bump only moves its expiry field. Expire advances the wheel tick by tick
// since its last call, at most one full turn, deleting the entries due and
// re-linking the bumped ones at their new expiry (lazy re-scheduling): the
// work is proportional to the entries due plus the bumped entries met, never
// a scan of the table. Within one tick Expire returns after one atomic load,
// so it may be called on every packet as well as on a ticker. Eviction walks
// the wheel from the earliest non-empty bucket for the entry with the
// earliest expiry, re-linking bumped entries it passes.
//
// # Concurrency
//
// The table is split into Shards (a power of two) shards, chosen by masking
// hash bits, each behind its own sync.Mutex that guards all of the shard's
// slabs, index and wheel; a lock is held for one operation on one shard
// (Expire takes the shards in turn). Several socket goroutines may share
// one table. Counters are per-shard plain words, written and read (by Stats
// and Len) under the shard's lock; IndexSlots reads only the index's size,
// without a lock. Calls from different goroutines may
// carry clock readings slightly out of order: an older reading never
// shortens an entry's life, and entries never go missing from the wheel.
package pit
