package pit

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// model is a map-based reference implementation of the Table's semantics,
// including per-shard caps, the overflow pool and the coarse clock. It keeps
// time as int64 nanoseconds and ticks, never wrapping, so it also checks
// the Table's modulo-2^32 arithmetic.
type model struct {
	cfg     Config // defaulted
	p       params
	shardOf func(key uint64) int
	entries map[uint64]*modelEntry // present (possibly expired, not yet deleted)
	stats   Stats
}

type modelEntry struct {
	exp   int64 // expiry tick
	fwdMs int64
	reqs  []lane.Key
}

func newModel(cfg Config) *model {
	cfg = cfg.withDefaults()
	mask := uint64(cfg.Shards - 1)
	return &model{
		cfg:     cfg,
		p:       newParams(cfg),
		shardOf: func(key uint64) int { return int((mix(key) >> 32) & mask) },
		entries: map[uint64]*modelEntry{},
	}
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
func (m *model) add(key uint64, r lane.Key, now time.Duration) (Verdict, []uint64) {
	nt, nowMs := m.tick(now), int64(now/time.Millisecond)
	if e, ok := m.entries[key]; ok {
		if e.exp <= nt {
			m.stats.Expired++
			m.stats.Added++
			*e = modelEntry{exp: m.expTick(now), fwdMs: nowMs, reqs: []lane.Key{r}}
			return VerdictForwardNew, nil
		}
		if slices.Contains(e.reqs, r) {
			e.exp = m.expTick(now)
			e.fwdMs = nowMs
			m.stats.Retransmits++
			return VerdictForwardRetransmit, nil
		}
		_, chunks := m.inShard(m.shardOf(key))
		needChunk := (len(e.reqs)-1)%lanesPerChunk == 0
		if len(e.reqs) >= m.cfg.MaxRequestersPerEntry || needChunk && chunks >= m.p.chunkCap {
			m.stats.RequesterCapped++
			if nowMs-e.fwdMs >= int64(m.p.windowMs) {
				e.fwdMs = nowMs
				return VerdictCappedForward, nil
			}
			return VerdictRequesterCapped, nil
		}
		e.reqs = append(e.reqs, r)
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
	var victims []uint64
	if n, _ := m.inShard(si); n >= m.p.entryCap {
		// The Table first expires the whole shard.
		for k, e := range m.entries {
			if m.shardOf(k) == si && e.exp <= nt {
				delete(m.entries, k)
				m.stats.Expired++
			}
		}
		if n, _ := m.inShard(si); n >= m.p.entryCap {
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
	m.entries[key] = &modelEntry{exp: m.expTick(now), fwdMs: nowMs, reqs: []lane.Key{r}}
	m.stats.Added++
	return VerdictForwardNew, victims
}

func (m *model) take(key uint64, now time.Duration) ([]lane.Key, bool) {
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
	return e.reqs, true
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
// operations) the structural invariants.
func runModel(t testing.TB, cfg Config, start time.Duration, src opSource) {
	t.Helper()
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(cfg)
	const keys, lanes = 48, 10
	lk := func(i int) lane.Key { return lane.Key{IP: [16]byte{15: byte(i)}, Port: uint16(1000 + i)} }
	now := start
	var dst []lane.Key
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
			v, evicted := tb.Add(key, lk(b), now)
			mv, victims := m.add(key, lk(b), now)
			if v != mv || evicted != (victims != nil) {
				t.Fatalf("step %d: Add(%d, %d) at %v = %v, evicted %v; model %v, victims %v", step, a, b, now, v, evicted, mv, victims)
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
			var got bool
			dst, got = tb.Take(key, dst[:0], now)
			want, mok := m.take(key, now)
			if got != mok || got && !slices.Equal(dst, want) {
				t.Fatalf("step %d: Take(%d) at %v = %v %v; model %v %v", step, a, now, dst, got, want, mok)
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
}

// modelConfigs are the configurations the model runs use: one shard with
// tight caps (eviction, the overflow pool and the requester cap all bite),
// several shards, the refuse policy, and a 1 ms tick whose counters wrap.
var modelConfigs = []struct {
	name  string
	cfg   Config
	start time.Duration
}{
	{"one-shard-tight", Config{Shards: 1, MaxEntries: 12, MaxRequestersPerEntry: 5, MaxOverflowRequesters: 7,
		TTL: 2 * time.Second, Tick: 100 * time.Millisecond, SuppressWindow: 500 * time.Millisecond}, 0},
	{"four-shards", Config{Shards: 4, MaxEntries: 40, MaxRequestersPerEntry: 8, MaxOverflowRequesters: 30,
		TTL: 3 * time.Second, Tick: 250 * time.Millisecond, SuppressWindow: time.Second}, time.Hour},
	{"refuse", Config{Shards: 2, MaxEntries: 10, MaxRequestersPerEntry: 3, TTL: time.Second,
		Tick: 100 * time.Millisecond, SuppressWindow: 200 * time.Millisecond, FullPolicy: RefuseNew}, 0},
	{"ms-wrap", Config{Shards: 1, MaxEntries: 20, MaxRequestersPerEntry: 4, MaxOverflowRequesters: 12,
		TTL: 700 * time.Millisecond, Tick: time.Millisecond, SuppressWindow: 50 * time.Millisecond},
		(1<<32 - 3000) * time.Millisecond},
	{"large", Config{Shards: 8, MaxEntries: 10_000, TTL: 5 * time.Second}, 0},
}

func TestModel(t *testing.T) {
	for _, mc := range modelConfigs {
		t.Run(mc.name, func(t *testing.T) {
			for seed := range uint64(20) {
				runModel(t, mc.cfg, mc.start, &randSource{r: rand.New(rand.NewPCG(seed, 7)), left: 3 * 4000})
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
		runModel(t, mc.cfg, mc.start, &byteSource{b: data[1:]})
	})
}
