package pit

import (
	"cmp"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// model is a map-based reference implementation of the Table's semantics,
// including per-shard caps, the overflow pool, the per-source rules (a full
// entry's max-min displacement among them) and the coarse clock. It keeps time as int64 nanoseconds and ticks, never
// wrapping, so it also checks the Table's modulo-2^32 arithmetic. Sources
// are told apart by the Table's own seeded hash (source), so that the
// model shares its collisions; it counts a source's entries and chunks
// afresh from the entries on every question, never keeping a counter.
type model struct {
	cfg     Config // defaulted
	p       params
	shardOf func(key uint64) int
	source  func(r lane.Key) uint32
	entries map[uint64]*modelEntry // present (possibly expired, not yet deleted)
	stats   Stats
}

type modelEntry struct {
	exp   int64 // expiry tick
	fwdMs int64
	reqs  []lane.Key
	// flags are the requesters' marks, by join position: flagReceives
	// (added by AddProven), flagDelivered (put back by Restore, cleared
	// when it asks again).
	flags []uint8
	// opened are the source slots charged for the entry's overflow
	// chunks, in order: the source of the requester that opened each
	// (reqs[1], reqs[4], ...), kept when that requester is displaced.
	opened []uint32
}

func newModel(cfg Config, t *Table) *model {
	cfg = cfg.withDefaults()
	mask := uint64(cfg.Shards - 1)
	return &model{
		cfg:     cfg,
		p:       newParams(cfg),
		shardOf: func(key uint64) int { return int((mix(key) >> 32) & mask) },
		source:  func(r lane.Key) uint32 { return t.shards[0].sourceSlot(&r) },
		entries: map[uint64]*modelEntry{},
	}
}

// held returns how many entries of shard si the source of r created (is
// the first requester of) and how many overflow chunks of them it opened.
func (m *model) held(si int, r lane.Key) (entries, chunks int) {
	src := m.source(r)
	for k, e := range m.entries {
		if m.shardOf(k) != si {
			continue
		}
		if m.source(e.reqs[0]) == src {
			entries++
		}
		for _, o := range e.opened {
			if o == src {
				chunks++
			}
		}
	}
	return entries, chunks
}

// displace applies the full entry's rule as the model reads it. A
// newcomer not proven competes with the one-shot requesters (flagReceives
// clear) alone: count them by source; if r's source, counting r, would
// hold fewer of them than the largest, r replaces the latest-joined
// one-shot requester of any source holding the most. A proven newcomer
// replaces a one-shot requester after the first of another source while
// there is one, of the source holding the most one-shot requesters, its
// latest (ties: the latest of all); else the max-min rule over all
// requesters. displace reports whether r was taken in.
func (m *model) displace(e *modelEntry, r lane.Key, rf uint8) bool {
	oneShot := func(j int) bool { return e.flags[j]&flagReceives == 0 }
	count := func(k lane.Key, only bool) int {
		n := 0
		for j, q := range e.reqs {
			if modelSameSource(q, k) && (!only || oneShot(j)) {
				n++
			}
		}
		return n
	}
	replace := func(j int) bool {
		e.reqs[j], e.flags[j] = r, rf
		m.stats.Displaced++
		return true
	}
	if rf&flagReceives == 0 {
		mostU := 0
		for j, q := range e.reqs {
			if oneShot(j) {
				mostU = max(mostU, count(q, true))
			}
		}
		if count(r, true)+1 >= mostU {
			return false
		}
		for j := len(e.reqs) - 1; j >= 1; j-- {
			if oneShot(j) && count(e.reqs[j], true) == mostU {
				return replace(j)
			}
		}
		panic("no one-shot source holds the most")
	}
	best, at := 0, 0
	for j := len(e.reqs) - 1; j >= 1; j-- {
		if oneShot(j) && !modelSameSource(e.reqs[j], r) {
			if n := count(e.reqs[j], true); n > best {
				best, at = n, j
			}
		}
	}
	if at > 0 {
		return replace(at)
	}
	most := 0
	for _, q := range e.reqs {
		most = max(most, count(q, false))
	}
	if count(r, false)+1 >= most {
		return false
	}
	for j := len(e.reqs) - 1; j >= 0; j-- {
		if count(e.reqs[j], false) == most {
			return replace(j)
		}
	}
	panic("no source holds the most")
}

// overShare reports whether r's source holds its fair share of shard si
// (the RefuseNew reserve's rule).
func (m *model) overShare(si int, r lane.Key) bool {
	n, _ := m.held(si, r)
	return n >= int(m.p.fullShare)
}

func (m *model) tick(now time.Duration) int64 { return int64(now) / int64(m.cfg.Tick) }

func (m *model) expTick(now time.Duration) int64 {
	return (int64(now) + int64(m.cfg.TTL) + int64(m.cfg.Tick) - 1) / int64(m.cfg.Tick)
}

func (m *model) inShard(si int) (n, chunks int) {
	for k, e := range m.entries {
		if m.shardOf(k) == si {
			n++
			chunks += (len(e.reqs) - 1 + lanesPerChunk - 1) / lanesPerChunk
		}
	}
	return n, chunks
}

func (m *model) expire(now time.Duration) int {
	nt := m.tick(now)
	n := 0
	for k, e := range m.entries {
		if e.exp <= nt {
			delete(m.entries, k)
			n++
		}
	}
	m.stats.Expired += uint64(n)
	return n
}

// add applies Add and returns the verdict and, if the verdict evicted an
// entry, the set of keys that were eligible victims (the shard's entries
// with the earliest expiry); the caller resolves which one the Table chose.
func (m *model) add(key uint64, r lane.Key, proven bool, now time.Duration) (Verdict, []uint64) {
	nt, nowMs := m.tick(now), int64(now/time.Millisecond)
	var rf uint8
	if proven {
		rf = flagReceives
	}
	if e, ok := m.entries[key]; ok {
		if e.exp <= nt {
			m.stats.Expired++
			if m.p.sourceCap > 0 && m.source(r) != m.source(e.reqs[0]) {
				if n, _ := m.held(m.shardOf(key), r); n >= int(m.p.sourceCap) {
					delete(m.entries, key)
					m.stats.SourceCapped++
					return VerdictSourceCapped, nil
				}
			}
			m.stats.Added++
			*e = modelEntry{exp: m.expTick(now), fwdMs: nowMs, reqs: []lane.Key{r}, flags: []uint8{rf}}
			return VerdictForwardNew, nil
		}
		if j := slices.Index(e.reqs, r); j >= 0 {
			e.flags[j] = e.flags[j]&^flagDelivered | rf
			e.exp = m.expTick(now)
			e.fwdMs = nowMs
			m.stats.Retransmits++
			return VerdictForwardRetransmit, nil
		}
		_, chunks := m.inShard(m.shardOf(key))
		needChunk := (len(e.reqs)-1)%lanesPerChunk == 0
		same := 0
		for _, q := range e.reqs {
			if modelSameSource(q, r) {
				same++
			}
		}
		capped := false
		switch {
		case m.p.maxReqSrc != 0 && same >= int(m.p.maxReqSrc):
			capped = true
			m.stats.EntryShareCapped++
		case len(e.reqs) >= m.cfg.MaxRequestersPerEntry:
			if capped = !m.displace(e, r, rf); capped {
				m.stats.EntryShareCapped++
			}
		case needChunk && m.p.chunkShare > 0:
			if _, held := m.held(m.shardOf(key), r); held >= int(m.p.chunkShare) {
				capped = true
				m.stats.OverflowShareCapped++
			}
		}
		full := len(e.reqs) >= m.cfg.MaxRequestersPerEntry
		if capped || !full && needChunk && chunks >= m.p.chunkCap {
			m.stats.RequesterCapped++
			if nowMs-e.fwdMs >= int64(m.p.windowMs) {
				e.fwdMs = nowMs
				return VerdictCappedForward, nil
			}
			return VerdictRequesterCapped, nil
		}
		if !full {
			if needChunk {
				e.opened = append(e.opened, m.source(r))
			}
			e.reqs = append(e.reqs, r)
			e.flags = append(e.flags, rf)
		}
		e.exp = m.expTick(now)
		if nowMs-e.fwdMs < int64(m.p.windowMs) {
			m.stats.Aggregated++
			return VerdictAggregated, nil
		}
		e.fwdMs = nowMs
		m.stats.Joined++
		return VerdictForwardJoined, nil
	}
	si := m.shardOf(key)
	if n, _ := m.held(si, r); m.p.sourceCap > 0 && n >= int(m.p.sourceCap) {
		m.stats.SourceCapped++
		return VerdictSourceCapped, nil
	}
	var victims []uint64
	if n, _ := m.inShard(si); n >= m.p.entryCap || m.cfg.FullPolicy == RefuseNew && n >= m.p.reserveAt && m.overShare(si, r) {
		// The Table first expires the whole shard.
		for k, e := range m.entries {
			if m.shardOf(k) == si && e.exp <= nt {
				delete(m.entries, k)
				m.stats.Expired++
			}
		}
		n, _ := m.inShard(si)
		if n < m.p.entryCap && n >= m.p.reserveAt && m.overShare(si, r) {
			m.stats.Refused++
			m.stats.RefusedShare++
			return VerdictRefused, nil
		}
		if n >= m.p.entryCap {
			if m.cfg.FullPolicy == RefuseNew {
				m.stats.Refused++
				return VerdictRefused, nil
			}
			first := true
			var best int64
			for k, e := range m.entries {
				if m.shardOf(k) != si {
					continue
				}
				switch {
				case first || e.exp < best:
					victims, best, first = []uint64{k}, e.exp, false
				case e.exp == best:
					victims = append(victims, k)
				}
			}
			m.stats.Evicted++
		}
	}
	m.entries[key] = &modelEntry{exp: m.expTick(now), fwdMs: nowMs, reqs: []lane.Key{r}, flags: []uint8{rf}}
	m.stats.Added++
	return VerdictForwardNew, victims
}

func (m *model) take(key uint64, now time.Duration) (*modelEntry, bool) {
	e, ok := m.entries[key]
	if !ok {
		return nil, false
	}
	delete(m.entries, key)
	if e.exp <= m.tick(now) {
		m.stats.Expired++
		return nil, false
	}
	m.stats.Taken++
	return e, true
}

// restore puts back t, taken at the same key, as Restore reads: every
// requester marked delivered; into a live entry of the name, the ones
// not on it; a new entry only within the shard's and the first's
// source's caps, with t's expiry and last forward; each requester within
// the entry's cap and the pool and its share. It returns the requesters
// the entry then holds.
func (m *model) restore(key uint64, t *modelEntry, now time.Duration) int {
	nt := m.tick(now)
	if t.exp <= nt {
		return 0
	}
	e, ok := m.entries[key]
	if ok && e.exp <= nt {
		delete(m.entries, key)
		m.stats.Expired++
		ok = false
	}
	si := m.shardOf(key)
	from := 0
	if !ok {
		if n, _ := m.held(si, t.reqs[0]); m.p.sourceCap > 0 && n >= int(m.p.sourceCap) {
			return 0
		}
		if n, _ := m.inShard(si); n >= m.p.entryCap {
			return 0
		}
		e = &modelEntry{exp: t.exp, fwdMs: t.fwdMs, reqs: []lane.Key{t.reqs[0]}, flags: []uint8{t.flags[0] | flagDelivered}}
		m.entries[key] = e
		m.stats.Added++
		m.stats.Restored++
		from = 1
	}
	e.exp = max(e.exp, t.exp)
	for j := from; j < len(t.reqs); j++ {
		if len(e.reqs) >= m.cfg.MaxRequestersPerEntry {
			break
		}
		if slices.Contains(e.reqs, t.reqs[j]) {
			continue
		}
		if (len(e.reqs)-1)%lanesPerChunk == 0 {
			if _, held := m.held(si, t.reqs[j]); m.p.chunkShare > 0 && held >= int(m.p.chunkShare) {
				m.stats.OverflowShareCapped++
				continue
			}
			if _, chunks := m.inShard(si); chunks >= m.p.chunkCap {
				continue
			}
			e.opened = append(e.opened, m.source(t.reqs[j]))
		}
		e.reqs = append(e.reqs, t.reqs[j])
		e.flags = append(e.flags, t.flags[j]|flagDelivered)
	}
	return len(e.reqs)
}

// present reports whether the Table still holds key (live or expired).
func present(t *Table, key uint64) bool {
	h := mix(key)
	s := t.shardOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _, ok := s.findLocked(h)
	return ok
}

// opSource yields the random choices driving a model run.
type opSource interface {
	// next returns a value in [0, n); ok is false when the source is
	// exhausted.
	next(n int) (v int, ok bool)
}

type randSource struct {
	r    *rand.Rand
	left int
}

func (s *randSource) next(n int) (int, bool) {
	if s.left <= 0 {
		return 0, false
	}
	s.left--
	return s.r.IntN(n), true
}

type byteSource struct{ b []byte }

func (s *byteSource) next(n int) (int, bool) {
	if len(s.b) < 2 {
		return 0, false
	}
	v := int(binary.LittleEndian.Uint16(s.b))
	s.b = s.b[2:]
	return v % n, true
}

// runModel drives a Table and the model with the same operations from src,
// starting at clock start, comparing every result, the stats and (every few
// operations) the structural invariants, and returns the final stats.
func runModel(t testing.TB, mc modelConfig, src opSource) Stats {
	t.Helper()
	cfg, start := noSourceCap(mc.cfg), mc.start
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(cfg, tb)
	keys := cmp.Or(mc.keys, 48)
	lanes := max(mc.lanes, 10)
	// The first ten lanes come from five sources: three IPv4 addresses on
	// several ports and two IPv6 addresses in one /64; any further lanes
	// each from its own IPv4 address.
	lk := func(i int) lane.Key {
		if i >= 10 {
			return lane.Key{IP: [16]byte{10: 0xff, 11: 0xff, 12: 10, 14: 1, 15: byte(i)}, Port: 2000}
		}
		if i >= 8 {
			return lane.Key{IP: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)}, Port: uint16(1000 + i)}
		}
		return lane.Key{IP: [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: byte(i % 3)}, Port: uint16(1000 + i)}
	}
	now := start
	var dst []lane.Key
	var held Held
	for step := 0; ; step++ {
		op, ok := src.next(100)
		if !ok {
			break
		}
		a, _ := src.next(keys)
		b, _ := src.next(lanes)
		key := uint64(a) * 0x9e3779b97f4a7c15 // spread, like a real hash
		switch {
		case op < 55:
			proven := op >= 45
			var v Verdict
			var evicted bool
			if proven {
				v, evicted = tb.AddProven(key, lk(b), now)
			} else {
				v, evicted = tb.Add(key, lk(b), now)
			}
			mv, victims := m.add(key, lk(b), proven, now)
			if v != mv || evicted != (victims != nil) {
				t.Fatalf("step %d: Add(%d, %d, proven %v) at %v = %v, evicted %v; model %v, victims %v", step, a, b, proven, now, v, evicted, mv, victims)
			}
			if victims != nil {
				var gone []uint64
				for _, k := range victims {
					if !present(tb, k) {
						gone = append(gone, k)
					}
				}
				if len(gone) != 1 {
					t.Fatalf("step %d: eviction removed %d of the earliest-expiring %v", step, len(gone), victims)
				}
				delete(m.entries, gone[0])
			}
		case op < 75:
			// Take, or (a contested page) take and put back.
			var got bool
			dst, got = tb.TakeHeld(key, dst[:0], &held, now)
			want, mok := m.take(key, now)
			if got != mok || got && (!slices.Equal(dst, want.reqs) || !slices.Equal(held.flags[:held.n], want.flags)) {
				t.Fatalf("step %d: Take(%d) at %v = %v %v; model %+v %v", step, a, now, dst, got, want, mok)
			}
			if got && op >= 68 {
				if n, mn := tb.Restore(key, dst, &held, now), m.restore(key, want, now); n != mn {
					t.Fatalf("step %d: Restore(%d) at %v put back %d; model %d", step, a, now, n, mn)
				}
				for j := range dst {
					if !held.Delivered(j) && want.flags[j]&flagDelivered != 0 {
						t.Fatalf("step %d: requester %d delivered in the model, not in Held", step, j)
					}
				}
			}
		case op < 85:
			if got, want := tb.Expire(now), m.expire(now); got != want {
				t.Fatalf("step %d: Expire at %v removed %d; model %d", step, now, got, want)
			}
		case op < 97:
			// Small steps around the suppression window.
			now += time.Duration(b) * m.cfg.SuppressWindow / 4
		case op < 99:
			now += m.cfg.TTL + time.Duration(b)*m.cfg.Tick
		default:
			// A gap longer than the whole wheel.
			now += time.Duration(m.p.wheelMask+1)*m.cfg.Tick*time.Duration(1+b%3) + time.Duration(b)*time.Millisecond
		}
		if got, want := tb.Len(), len(m.entries); got != want {
			t.Fatalf("step %d: Len %d; model %d", step, got, want)
		}
		if step%16 == 0 {
			checkInvariants(t, tb)
		}
	}
	checkInvariants(t, tb)
	st := tb.Stats()
	m.stats.Entries = len(m.entries)
	if st != m.stats {
		t.Fatalf("stats %+v; model %+v", st, m.stats)
	}
	return st
}

// modelConfig is one configuration of the model runs: the table's config,
// the clock's start, the number of requester lanes (at least 10) and of
// names (0 for 48; few names fill their entries).
type modelConfig struct {
	name  string
	cfg   Config
	start time.Duration
	lanes int
	keys  int
}

// modelConfigs are the configurations the model runs use: one shard with
// tight caps (eviction, the overflow pool and the requester cap all bite),
// several shards, the refuse policy, and a 1 ms tick whose counters wrap.
var modelConfigs = []modelConfig{
	{"one-shard-tight", Config{Shards: 1, MaxEntries: 12, MaxRequestersPerEntry: 5, MaxOverflowRequesters: 7,
		TTL: 2 * time.Second, Tick: 100 * time.Millisecond, SuppressWindow: 500 * time.Millisecond}, 0, 0, 0},
	{"four-shards", Config{Shards: 4, MaxEntries: 40, MaxRequestersPerEntry: 8, MaxOverflowRequesters: 30,
		TTL: 3 * time.Second, Tick: 250 * time.Millisecond, SuppressWindow: time.Second}, time.Hour, 0, 0},
	{"entry-share", Config{Shards: 1, MaxEntries: 16, MaxRequestersPerEntry: 8, MaxRequestersPerSource: 2,
		MaxOverflowRequesters: 40, TTL: 2 * time.Second, Tick: 100 * time.Millisecond, SuppressWindow: 500 * time.Millisecond}, 0, 0, 0},
	{"refuse", Config{Shards: 2, MaxEntries: 10, MaxRequestersPerEntry: 3, TTL: time.Second,
		Tick: 100 * time.Millisecond, SuppressWindow: 200 * time.Millisecond, FullPolicy: RefuseNew}, 0, 0, 0},
	{"ms-wrap", Config{Shards: 1, MaxEntries: 20, MaxRequestersPerEntry: 4, MaxOverflowRequesters: 12,
		TTL: 700 * time.Millisecond, Tick: time.Millisecond, SuppressWindow: 50 * time.Millisecond},
		(1<<32 - 3000) * time.Millisecond, 0, 0},
	{"large", Config{Shards: 8, MaxEntries: 10_000, TTL: 5 * time.Second}, 0, 0, 0},
	{"per-source", Config{Shards: 2, MaxEntries: 30, MaxRequestersPerEntry: 10, MaxOverflowRequesters: 40,
		MaxEntriesPerSource: 16, MaxOverflowPerSource: 12, TTL: 2 * time.Second, Tick: 100 * time.Millisecond}, 0, 0, 0},
	{"refuse-reserve", Config{Shards: 1, MaxEntries: 24, MaxRequestersPerEntry: 6, MaxOverflowRequesters: 30,
		MaxOverflowPerSource: -1, TTL: 3 * time.Second, Tick: 100 * time.Millisecond, FullPolicy: RefuseNew}, 0, 40, 0},
	{"refuse-reserve-capped", Config{Shards: 2, MaxEntries: 40, MaxEntriesPerSource: 14, TTL: 3 * time.Second,
		Tick: 100 * time.Millisecond, FullPolicy: RefuseNew}, 0, 0, 0},
	// Few names and a small entry, so that entries fill and the max-min
	// rule displaces: among four sources of two to four lanes and six of
	// one.
	{"displace", Config{Shards: 1, MaxEntries: 16, MaxRequestersPerEntry: 7, MaxOverflowRequesters: 200,
		MaxOverflowPerSource: -1, TTL: 3 * time.Second, Tick: 100 * time.Millisecond}, 0, 16, 4},
	// The same with a fixed per-source cap below the entry's.
	{"displace-capped", Config{Shards: 1, MaxEntries: 16, MaxRequestersPerEntry: 6, MaxRequestersPerSource: 2,
		MaxOverflowRequesters: 200, MaxOverflowPerSource: -1, TTL: 3 * time.Second, Tick: 100 * time.Millisecond}, 0, 14, 3},
	// Displacement beside a tight pool and its per-source share: a chunk
	// stays charged to its opener when the opener is displaced.
	{"displace-pool-share", Config{Shards: 1, MaxEntries: 16, MaxRequestersPerEntry: 8, MaxOverflowRequesters: 18,
		MaxOverflowPerSource: 6, TTL: 3 * time.Second, Tick: 100 * time.Millisecond}, 0, 16, 6},
}

func TestModel(t *testing.T) {
	// The rules each configuration is there to exercise: the runs must
	// reach them, or the comparison proves nothing about them.
	reach := map[string]func(Stats) bool{
		"per-source":            func(s Stats) bool { return s.SourceCapped > 0 && s.OverflowShareCapped > 0 },
		"refuse-reserve":        func(s Stats) bool { return s.RefusedShare > 0 && s.Refused > s.RefusedShare },
		"refuse-reserve-capped": func(s Stats) bool { return s.RefusedShare > 0 && s.SourceCapped > 0 },
		"entry-share":           func(s Stats) bool { return s.EntryShareCapped > 0 },
		"displace":              func(s Stats) bool { return s.Displaced > 0 && s.EntryShareCapped > 0 && s.Restored > 0 },
		"displace-capped":       func(s Stats) bool { return s.Displaced > 0 && s.EntryShareCapped > 0 },
		"displace-pool-share":   func(s Stats) bool { return s.Displaced > 0 && s.OverflowShareCapped > 0 },
	}
	for _, mc := range modelConfigs {
		t.Run(mc.name, func(t *testing.T) {
			var sum Stats
			for seed := range uint64(20) {
				st := runModel(t, mc, &randSource{r: rand.New(rand.NewPCG(seed, 7)), left: 3 * 4000})
				sum.SourceCapped += st.SourceCapped
				sum.OverflowShareCapped += st.OverflowShareCapped
				sum.Refused += st.Refused
				sum.RefusedShare += st.RefusedShare
				sum.EntryShareCapped += st.EntryShareCapped
				sum.Displaced += st.Displaced
				sum.Restored += st.Restored
			}
			if ok := reach[mc.name]; ok != nil && !ok(sum) {
				t.Errorf("the runs never reached the rules under test: %+v", sum)
			}
		})
	}
}

// FuzzModel drives the model comparison from fuzzer bytes: the first byte
// picks the configuration, the rest the operations.
func FuzzModel(f *testing.F) {
	for i := range modelConfigs {
		seed := []byte{byte(i)}
		r := rand.New(rand.NewPCG(uint64(i), 1))
		for range 600 {
			seed = binary.LittleEndian.AppendUint16(seed, uint16(r.Uint32()))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		mc := modelConfigs[int(data[0])%len(modelConfigs)]
		runModel(t, mc, &byteSource{b: data[1:]})
	})
}

// modelSameSource is the model's notion of one source: the same IPv4
// address, or the same IPv6 /64.
func modelSameSource(a, b lane.Key) bool {
	x, y := a.AddrPort().Addr(), b.AddrPort().Addr()
	if x.Is4() || y.Is4() {
		return x == y
	}
	px, _ := x.Prefix(64)
	py, _ := y.Prefix(64)
	return px == py
}
