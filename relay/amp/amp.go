// Package amp is the relay's amplification budget (Budget, set by Config).
// It bounds what a forged source can aim at a victim through the relay:
// the bytes of answers (pages, STUN responses, legacy ames forwards to
// lanes it learned) sent to one IP address, and to one network (its IPv4
// /Net4Bits or IPv6 /Net6Bits prefix), per second.
//
// The relay adds no amplification of its own beyond the protocol's: the
// pending table sends at most one page per request, which is what the
// publisher itself would send the requester. A spoofed request still makes
// the relay send that page to the victim whose address was forged, so the
// budget bounds it in absolute terms, with no byte ratio: an honest mesa
// download is one peek of tens of bytes for each page of up to 1.5 KB (24
// to 33 times its bytes) and a legacy transfer is mostly one-way, so any
// ratio below the protocol's throttles every real download.
//
// Each address is a token bucket of Rate bytes a second, banked up to
// Burst; each network one of NetRate, banked up to NetBurst. A send needs
// both. When its network's bucket is empty (its addresses together took
// NetRate), a send may instead take from its address's light allowance,
// LightRate a second banked up to LightBurst, so that a neighbour of a
// heavy user in its network gets what a host elsewhere gets: a /24 of
// flooders cannot withhold a neighbour's few pages. So with the defaults a
// victim address receives at most Burst + Rate*t bytes in t seconds, and a
// network at most NetBurst + NetRate*t plus, for each of its A addresses
// in use, LightBurst + LightRate*t (an IPv4 /24 has A <= 256).
//
// Return routability. Every vere ship answers a STUN binding request with
// a response that repeats its transaction id (io/ames.c, _ames_hear and
// _stun_on_request, for any ship; io/mesa.c hands it every datagram that
// is not a mesa packet), and an off-path attacker forging a victim's
// address never sees the relay's request. So once a lane has been sent
// ProbeAfter bytes below its address's full bucket, the relay sends it a
// 28-byte binding request with a random transaction id (never more than
// one a ProbeInterval per lane); a response from that lane with that id
// proves the lane answers at its address, and a proven lane is exempt from
// both budgets for ProofLifetime (renewed by further probes while it is
// busy). What that stops: aiming pages at any address that is not a live
// STUN-answering host at that port (a web server, a resolver, a home
// router, an unused address), which stays held to the budget. What it
// cannot: aiming pages at a live vere ship's own lane, which proves itself;
// that victim gets one page per forged request, exactly what the attacker
// gets by sending the same requests to the publisher directly (the relay
// is then no better a reflector than the publisher itself), and an
// on-path attacker can answer the probe for a lane it sees.
//
// A proof is also what the pending table counts as showing a requester
// receives (issue 28; pit's "Who has shown it receives"): a full entry's
// refused newcomer is probed as a refused page's lane is, and when proven
// it asks again through pit.Table.AddProven. The proof table is
// proofWays-way set-associative (a lane takes any of four adjacent slots
// of one stripe), so that lanes hashing to one slot, such as ships behind
// one NAT, are all proven: direct-mapped, 1 to 3 of 200 NAT lanes could
// not be for ProofLifetime; two-way, one in about twenty runs of 200.
//
// Addresses, networks and proofs are tracked in fixed tables of slots
// (Slots, NetSlots, ProofSlots) indexed by a seeded hash of all 16 bytes
// of the address (the network's masked address; the lane), with no
// allocation. A slot taken over by another address keeps the tokens its
// last holder left (brought up to date), so alternating addresses that
// share a slot, or churning slots, gains nothing: only a slot never used
// starts full. Each table is guarded by 64 striped locks, each over a run
// of slots; no call holds two locks.
//
// A proven lane's spend takes no lock when its address's slot is already
// up to date (Spend's lock-free look, as for every page of a reader's
// batch but the first): it reads the address's slot and the lane's proof
// under each stripe's version (a seqlock, which a writer holding the
// stripe makes odd while it changes what the look reads), writes nothing,
// and answers only where the locked path would change nothing in the
// address's slot and give the same answer at that instant; otherwise, or
// when a writer interferes, it takes the locked path.
package amp

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math/bits"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/urbit-relay/relay/lane"
)

// Config is the budget's settings (see the package comment); the zero
// value takes the defaults.
type Config struct {
	Rate  int // bytes a second an address may receive; negative disables the budget
	Burst int // most bytes an address banks; a slot never used starts with them

	// The per-network budget; NetRate negative disables it (the
	// per-address budget then stands alone).
	NetRate    int // bytes a second a network may receive
	NetBurst   int // most bytes a network banks
	LightRate  int // bytes a second an address may take past an empty network budget
	LightBurst int // most bytes of light allowance an address banks

	Slots    int // tracked addresses, a power of two
	NetSlots int // tracked networks, a power of two
	Net4Bits int // IPv4 prefix length of a network, 1-32
	Net6Bits int // IPv6 prefix length of a network, 1-128

	// Return routability; ProofLifetime negative disables probing.
	ProofLifetime time.Duration // how long a lane that answered a probe is exempt
	ProbeInterval time.Duration // least time between two probes of one lane
	ProbeAfter    int           // bytes below its address's full bucket after which a lane is probed
	ProofSlots    int           // tracked lanes being probed or proven, a power of two
}

// ConfigError is a field of Config that New (and Validate) rejects.
// relay.Config.Validate reports it as a relay.ConfigError whose field is
// prefixed "Amp.".
type ConfigError struct {
	Field string // the field's name in Config, such as "Burst"
	Value any    // its value
	Want  string // what is wanted, such as "0 or more bytes"
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("amp: Config.%s %v: want %s", e.Field, e.Value, e.Want)
}

// Validate reports the first field of c that New would reject, as a
// *ConfigError; nil if New accepts c.
func (c Config) Validate() error { return c.fill() }

// fill gives each zero field its default (so the zero Config is the
// default budget) and checks the rest. A negative Rate disables the
// budget, a negative NetRate its per-network part, a negative
// ProofLifetime the probes.
func (c *Config) fill() error {
	if c.Rate < 0 {
		return nil
	}
	type field struct {
		name string
		v    *int
		def  int
		max  int    // 0: no bound beyond the type's
		unit string // of max, for the message
	}
	fields := []field{{"Rate", &c.Rate, DefaultRate, MaxRate, " bytes a second"},
		{"Burst", &c.Burst, DefaultBurst, MaxBurst, " bytes"},
		{"NetRate", &c.NetRate, DefaultNetRate, MaxRate, " bytes a second"},
		{"NetBurst", &c.NetBurst, DefaultNetBurst, MaxBurst, " bytes"},
		{"LightRate", &c.LightRate, DefaultLightRate, MaxRate, " bytes a second"},
		{"LightBurst", &c.LightBurst, DefaultLightBurst, MaxBurst, " bytes"},
		{"Slots", &c.Slots, DefaultSlots, 0, ""}, {"NetSlots", &c.NetSlots, DefaultNetSlots, 0, ""},
		{"Net4Bits", &c.Net4Bits, DefaultNet4Bits, 32, ""}, {"Net6Bits", &c.Net6Bits, DefaultNet6Bits, 128, ""},
		{"ProbeAfter", &c.ProbeAfter, DefaultProbeAfter, 0, " bytes"}, {"ProofSlots", &c.ProofSlots, DefaultProofSlots, 0, ""}}
	for _, f := range fields {
		// A negative NetRate is the per-network budget off.
		if *f.v < 0 && f.name != "NetRate" {
			return &ConfigError{Field: f.name, Value: *f.v, Want: "0 or more" + f.unit}
		}
	}
	if c.ProbeInterval < 0 {
		return &ConfigError{Field: "ProbeInterval", Value: c.ProbeInterval, Want: "a duration of 0s or more"}
	}
	for _, f := range fields {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if c.ProofLifetime == 0 {
		c.ProofLifetime = DefaultProofLifetime
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	for _, f := range fields {
		if f.max != 0 && *f.v > f.max {
			return &ConfigError{Field: f.name, Value: *f.v, Want: fmt.Sprintf("at most %d%s", f.max, f.unit)}
		}
	}
	pow2 := func(name string, v int) error {
		if bits.OnesCount(uint(v)) != 1 {
			return &ConfigError{Field: name, Value: v, Want: "a power of two"}
		}
		return nil
	}
	if err := pow2("Slots", c.Slots); err != nil {
		return err
	}
	if c.NetRate >= 0 {
		if err := pow2("NetSlots", c.NetSlots); err != nil {
			return err
		}
	}
	if c.ProofLifetime > 0 {
		return pow2("ProofSlots", c.ProofSlots)
	}
	return nil
}

// Budget is the amplification budget: per address, per network (net)
// and the proven lanes (proofs). It is safe for concurrent use.
type Budget struct {
	// First, so that the last stripe's padding keeps the locks off the
	// cache line of the static fields every call reads.
	stripes [ampStripes]ampStripe

	addr   bucketParams // static
	light  bucketParams // static: the light allowance, in the address's slot
	seed   uint64       // static
	mix0   uint64       // static: hash16's first round when the first half is zero (seedMix)
	shift  uint         // static: log2 of the slots per stripe
	slots  []ampSlot    // static slice; slot i guarded by stripes[i>>shift].mu
	probes int64        // static: ProbeAfter in token units

	net          *Budget     // static: the per-network budget; nil if disabled or this is it
	mask4, mask6 [2]uint64   // static: a network's prefix, over the address's halves as hash16 reads them
	proofs       *proofTable // static: nil when probing is disabled

	// versions[j] is stripe j's version: odd while a writer holding
	// the stripe changes a slot's ip or proven, which Spend's lock-free
	// look reads (stripeVersions).
	versions stripeVersions
}

// stripeVersions is a table's seqlock versions, one a stripe. A writer
// holding stripe j's lock brackets each change a lock-free reader could
// see torn with begin and end; a reader's look holds if the version it
// read before was even and is unchanged after (holds).
type stripeVersions [ampStripes]atomic.Uint32

func (v *stripeVersions) begin(j uint64)                  { v[j].Add(1) }
func (v *stripeVersions) end(j uint64)                    { v[j].Add(1) }
func (v *stripeVersions) read(j uint64) uint32            { return v[j].Load() }
func (v *stripeVersions) holds(j uint64, was uint32) bool { return was&1 == 0 && v[j].Load() == was }

// bucketParams are a token bucket's rate and size. Tokens are kept in
// nanobytes (bytes times 1e9), so that a refill of rate bytes a second
// over dt nanoseconds is rate*dt exactly, however often it is brought up
// to date.
type bucketParams struct {
	rate     int64         // bytes a second
	burst    int64         // nanobytes
	fullFrom time.Duration // a bucket idle this long is full: burst/rate
}

func newBucketParams(rate, burst int) bucketParams {
	p := bucketParams{rate: int64(rate), burst: int64(burst) * nanobytes}
	if rate > 0 {
		p.fullFrom = time.Duration(p.burst / p.rate)
	}
	return p
}

// refill returns tokens brought up dt nanoseconds later.
func (p *bucketParams) refill(tokens int64, dt time.Duration) int64 {
	if dt <= 0 || p.rate == 0 {
		return tokens
	}
	if dt >= p.fullFrom {
		return p.burst
	}
	return min(p.burst, tokens+p.rate*int64(dt)) // rate*dt < burst: no overflow
}

// nanobytes is the unit of a bucket's tokens: 1e9 a byte.
const nanobytes = int64(time.Second)

// ampStripe is the lock of one stripe of slots, padded so that
// neighbouring stripes' locks do not share a cache line.
type ampStripe struct {
	mu sync.Mutex
	_  [ampStripePad]byte
}

// ampSlot is one address's (one network's) buckets. ip, last and proven
// are read by Spend's lock-free look: they are written only with atomic
// stores (ipHalf, Store), by a writer holding the stripe, ip and proven
// between its version's begin and end when ip changes. last never goes
// back.
type ampSlot struct {
	ip     [16]byte // first: its halves are 8-byte aligned (ipHalf)
	tokens int64    // nanobytes allowed now
	light  int64    // nanobytes of light allowance (an address's slot)
	// last is when tokens were last brought up to date (a
	// time.Duration); 0: never used.
	last atomic.Int64
	// proven is when the latest proof recorded for a lane of this
	// address ends (a time.Duration; an address's slot): until then a
	// send looks the lane up in the proof table.
	proven atomic.Int64
}

// ipHalf returns half h (0: bytes 0-7, 1: bytes 8-15) of s.ip as an
// atomic word, in the machine's byte order (nativeHalves). ip is the
// first field of a struct that atomic.Int64 aligns to 8 bytes.
func (s *ampSlot) ipHalf(h int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&s.ip[8*h]))
}

// nativeHalves returns ip's halves as ipHalf reads them.
func nativeHalves(ip [16]byte) (uint64, uint64) {
	return binary.NativeEndian.Uint64(ip[:8]), binary.NativeEndian.Uint64(ip[8:])
}

// New returns the budget for cfg, its zero fields given their defaults,
// or nil (the budget off: every method of a nil Budget allows all) when
// cfg.Rate is negative.
func New(cfg Config) (*Budget, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return newAmpTable(cfg)
}

// Proven reports whether lane k answered a probe within ProofLifetime;
// false when probing is off.
func (a *Budget) Proven(k lane.Key, now time.Duration) bool {
	if !a.Probing() {
		return false
	}
	if ok, _, held := a.proofs.provenLockFree(k, now); held {
		return ok
	}
	ok, _ := a.proofs.proven(k, now)
	return ok
}

// newAmpTable returns the budget for cfg (filled), or nil when disabled.
func newAmpTable(cfg Config) (*Budget, error) {
	if cfg.Rate < 0 {
		return nil, nil
	}
	a, err := newAmpBank(newBucketParams(cfg.Rate, cfg.Burst), cfg.Slots)
	if err != nil {
		return nil, err
	}
	a.light = newBucketParams(cfg.LightRate, cfg.LightBurst)
	if cfg.ProofLifetime > 0 {
		a.probes = int64(cfg.ProbeAfter) * nanobytes
		if a.proofs, err = newProofTable(cfg, a.seed); err != nil {
			return nil, err
		}
	}
	if cfg.NetRate < 0 {
		return a, nil
	}
	// An IPv4 address is IPv4-mapped in a lane.Key's 16 bytes: its
	// prefix counts from bit 96.
	a.mask4, a.mask6 = hashHalves(prefixMask(96+cfg.Net4Bits)), hashHalves(prefixMask(cfg.Net6Bits))
	a.net, err = newAmpBank(newBucketParams(cfg.NetRate, cfg.NetBurst), cfg.NetSlots)
	return a, err
}

// newAmpBank returns one table of n slots of bucket p.
func newAmpBank(p bucketParams, n int) (*Budget, error) {
	seed, err := randomSeed()
	if err != nil {
		return nil, err
	}
	// n/ampStripes slots a stripe, or one each (and some stripes unused)
	// when there are fewer slots than stripes.
	per := max(n/ampStripes, 1)
	return &Budget{
		addr: p, seed: seed, mix0: seedMix(seed),
		shift: uint(bits.TrailingZeros(uint(per))),
		slots: make([]ampSlot, n),
	}, nil
}

// randomSeed returns a seed from crypto/rand: a seed an attacker does not
// know keeps it from choosing addresses that share a slot.
func randomSeed() (uint64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("amp: seed: %w", err)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// prefixMask returns the mask of the first n of 128 bits, as the
// big-endian halves of an address (hashHalves turns them into halves as
// hash16 reads them).
func prefixMask(n int) [2]uint64 {
	hi, lo := ^uint64(0), ^uint64(0)
	switch {
	case n <= 0:
		hi, lo = 0, 0
	case n < 64:
		hi, lo = ^uint64(0)<<(64-n), 0
	case n < 128:
		lo = ^uint64(0) << (128 - n)
	}
	return [2]uint64{hi, lo}
}

// hashHalves turns big-endian halves of 16 bytes into their halves as
// hash16 reads them (little-endian).
func hashHalves(be [2]uint64) [2]uint64 {
	return [2]uint64{bits.ReverseBytes64(be[0]), bits.ReverseBytes64(be[1])}
}

// halves returns ip's halves as hash16 reads them.
func halves(ip [16]byte) (hi, lo uint64) {
	return binary.LittleEndian.Uint64(ip[:8]), binary.LittleEndian.Uint64(ip[8:])
}

// fromHalves returns the 16 bytes whose halves (as hash16 reads them) are
// hi and lo.
func fromHalves(hi, lo uint64) (b [16]byte) {
	binary.LittleEndian.PutUint64(b[:8], hi)
	binary.LittleEndian.PutUint64(b[8:], lo)
	return b
}

// netHalves returns the halves of the masked address of the network of
// the address of halves hi and lo: its IPv4 prefix if it is IPv4-mapped,
// else its IPv6 prefix.
func (a *Budget) netHalves(hi, lo uint64) (uint64, uint64) {
	m := &a.mask6
	if hi == 0 && uint32(lo) == v4MappedLo {
		m = &a.mask4
	}
	return hi & m[0], lo & m[1]
}

// network returns the masked address of ip's network (netHalves).
func (a *Budget) network(ip [16]byte) [16]byte {
	return fromHalves(a.netHalves(halves(ip)))
}

// index returns ip's slot: a seeded hash of all 16 bytes, each half mixed
// in whole (lane.Mix64 is a bijection with full avalanche), so that the
// addresses of one network spread over the slots like any others.
func (a *Budget) index(ip [16]byte) uint64 { return a.indexHalves(halves(ip)) }

// indexHalves is index of the address of halves hi and lo (halves).
func (a *Budget) indexHalves(hi, lo uint64) uint64 {
	return hashFrom(a.seed, a.mix0, hi, lo) & uint64(len(a.slots)-1)
}

// hash16 is the seeded hash of 16 bytes the budget's tables index by.
func hash16(seed uint64, b [16]byte) uint64 {
	h := lane.Mix64(seed ^ binary.LittleEndian.Uint64(b[:8]))
	return lane.Mix64(h ^ binary.LittleEndian.Uint64(b[8:]))
}

// seedMix is hash16's first round for bytes whose first half is zero, as
// every IPv4-mapped address's and IPv4 network's is.
func seedMix(seed uint64) uint64 { return lane.Mix64(seed) }

// hashFrom is hash16(seed, fromHalves(hi, lo)), mix0 seedMix(seed): the
// first round taken from mix0 when hi is zero.
func hashFrom(seed, mix0, hi, lo uint64) uint64 {
	h := mix0
	if hi != 0 {
		h = lane.Mix64(seed ^ hi)
	}
	return lane.Mix64(h ^ lo)
}

// stripeOf returns slot i's stripe.
func (a *Budget) stripeOf(i uint64) uint64 { return (i >> a.shift) % ampStripes }

// stripe returns the lock guarding slot i.
func (a *Budget) stripe(i uint64) *sync.Mutex { return &a.stripes[a.stripeOf(i)].mu }

// slotLocked returns slot i, ip's, brought up to date at now. A slot never
// used starts full; a slot held by another address is taken over with the
// tokens its holder left, so that taking it over gains nothing. Its stripe
// must be locked.
func (a *Budget) slotLocked(i uint64, ip [16]byte, now time.Duration) *ampSlot {
	s := &a.slots[i]
	last := time.Duration(s.last.Load())
	if last == 0 {
		a.holdLocked(i, s, ip)
		s.tokens, s.light = a.addr.burst, a.light.burst
		s.last.Store(int64(max(now, 1)))
		return s
	}
	if dt := now - last; dt > 0 {
		s.tokens = a.addr.refill(s.tokens, dt)
		s.light = a.light.refill(s.light, dt)
		s.last.Store(int64(now))
	}
	if s.ip != ip {
		a.holdLocked(i, s, ip)
	}
	return s
}

// holdLocked gives slot i, s, to ip, with no proof: ip and proven change
// together for Spend's lock-free look (stripeVersions). Its stripe must be
// locked.
func (a *Budget) holdLocked(i uint64, s *ampSlot, ip [16]byte) {
	j := a.stripeOf(i)
	hi, lo := nativeHalves(ip)
	a.versions.begin(j)
	s.ipHalf(0).Store(hi)
	s.ipHalf(1).Store(lo)
	s.proven.Store(0)
	a.versions.end(j)
}

// provenLockFree is Spend's lock-free look for lane k, whose address
// hashes to h (hashFrom): held reports that it answers for Spend (k is
// proven at now), and until when k's proof ends; held false, the locked
// path decides. It answers when, at one instant, k's address holds its slot
// with a proof recorded past now and the slot is up to date at now (so
// that the locked path's slotLocked would change nothing: last never goes
// back), and at a later one k's proof is live (as the locked path looks
// it up after unlocking). Probing must be on.
func (a *Budget) provenLockFree(h uint64, k lane.Key, now time.Duration) (until time.Duration, held bool) {
	i := h & uint64(len(a.slots)-1)
	j := a.stripeOf(i)
	s := &a.slots[i]
	was := a.versions.read(j)
	last := time.Duration(s.last.Load())
	// A slot never used has no proof (proven 0) and last 0: the look
	// passes it only for now < 0, and a lane is proven only once its
	// slot is in use (markProven), so the proof table then refuses.
	if last < now || time.Duration(s.proven.Load()) <= now {
		return 0, false
	}
	hi, lo := nativeHalves(k.IP)
	if s.ipHalf(0).Load() != hi || s.ipHalf(1).Load() != lo || !a.versions.holds(j, was) {
		return 0, false
	}
	until, held = a.proofs.untilLockFreeOf(h, k)
	return until, held && until > now
}

// Spend takes n bytes from the budgets of lane k's address and of its
// network, reporting whether the send may go (taking nothing when it may
// not), and whether k should be probed (a lane not proven whose address
// has been sent ProbeAfter bytes below its full bucket, or refused). A
// proven lane takes nothing.
func (a *Budget) Spend(k lane.Key, n int, now time.Duration) (ok, probe bool) {
	ok, probe, _ = a.SpendFree(k, n, now)
	return ok, probe
}

// SpendFree is Spend, and reports too until when k is free, if it is free
// at now (freeUntil > now; 0 otherwise): proven, its proof not due for
// renewal. A live proof is never taken from its lane (startable) and only
// ever lengthens (answer), so k stays free until freeUntil, when its
// proof's last quarter begins, whatever else happens: a caller that sends
// to one lane many times (the pages of a download) may skip its further
// spends until then, as a proven lane takes nothing, and asks again at
// freeUntil, when the spend says to probe. (Spend itself may budget k
// again meanwhile: the mark of its proof in its address's slot is lost
// when another address takes the slot.)
func (a *Budget) SpendFree(k lane.Key, n int, now time.Duration) (ok, probe bool, freeUntil time.Duration) {
	if a == nil {
		return true, false, 0
	}
	hi, lo := halves(k.IP)
	h := hashFrom(a.seed, a.mix0, hi, lo)
	if a.proofs != nil {
		if until, held := a.provenLockFree(h, k, now); held {
			return a.provenSpend(until, now)
		}
	}
	return a.spendLocked(h, hi, lo, k, n, now)
}

// provenSpend is SpendFree's answer for a lane proven at now until until.
func (a *Budget) provenSpend(until, now time.Duration) (ok, probe bool, freeUntil time.Duration) {
	if _, renew := a.proofs.standing(until, now); renew {
		return true, true, 0
	}
	return true, false, a.proofs.freeUntil(until)
}

// spendLocked is SpendFree without its lock-free look, for k of halves hi
// and lo (halves) hashing to h (hashFrom): what SpendFree answers whenever
// the look does not.
func (a *Budget) spendLocked(h, hi, lo uint64, k lane.Key, n int, now time.Duration) (ok, probe bool, freeUntil time.Duration) {
	need := int64(n) * nanobytes
	i := h & uint64(len(a.slots)-1)
	mu := a.stripe(i)
	mu.Lock()
	lockTaken()
	s := a.slotLocked(i, k.IP, now)
	if time.Duration(s.proven.Load()) > now {
		// The proof looked up without its lock while this stripe's is
		// held (no call holds two locks); if a writer interferes, with
		// its lock once this one's is released, and this slot brought up
		// to date again.
		until, held := a.proofs.untilLockFreeOf(h, k)
		if held && until > now {
			mu.Unlock()
			return a.provenSpend(until, now)
		}
		if !held {
			mu.Unlock()
			if until := a.proofs.proofEnd(k); until > now {
				return a.provenSpend(until, now)
			}
			mu.Lock()
			lockTaken()
			s = a.slotLocked(i, k.IP, now)
		}
	}
	if s.tokens < need {
		mu.Unlock()
		return false, a.proofs != nil, 0
	}
	s.tokens -= need
	probe = a.proofs != nil && s.tokens < a.addr.burst-a.probes
	mu.Unlock()
	if a.net == nil {
		return true, probe, 0
	}
	if nhi, nlo := a.netHalves(hi, lo); a.net.takeHalves(nhi, nlo, need, now) {
		return true, probe, 0
	}
	// The network's bucket is empty: the address's light allowance, or
	// its tokens back.
	mu.Lock()
	lockTaken()
	s = a.slotLocked(i, k.IP, now)
	if s.light >= need {
		s.light -= need
		mu.Unlock()
		return true, probe, 0
	}
	s.tokens = min(a.addr.burst, s.tokens+need)
	mu.Unlock()
	return false, a.proofs != nil, 0
}

// Refund gives back n bytes a Spend for k took, for a send that did not
// happen after all. (A spend the light allowance paid is refunded to the
// network, which then holds what the send did not use: bounded by
// NetBurst, and only ever for a send refused after spend.)
func (a *Budget) Refund(k lane.Key, n int, now time.Duration) {
	if a == nil {
		return
	}
	need := int64(n) * nanobytes
	a.add(k.IP, need, now)
	if a.net != nil {
		a.net.add(a.network(k.IP), need, now)
	}
}

// add banks n nanobytes in ip's slot, up to the burst.
func (a *Budget) add(ip [16]byte, n int64, now time.Duration) {
	i := a.index(ip)
	mu := a.stripe(i)
	mu.Lock()
	lockTaken()
	s := a.slotLocked(i, ip, now)
	s.tokens = min(a.addr.burst, s.tokens+n)
	mu.Unlock()
}

// take takes n nanobytes from ip's slot, reporting false (and taking
// nothing) if it does not have them.
func (a *Budget) take(ip [16]byte, n int64, now time.Duration) bool {
	return a.takeAt(a.index(ip), ip, n, now)
}

// takeHalves is take of the 16 bytes of halves hi and lo (halves).
func (a *Budget) takeHalves(hi, lo uint64, n int64, now time.Duration) bool {
	return a.takeAt(a.indexHalves(hi, lo), fromHalves(hi, lo), n, now)
}

// takeAt is take of ip, whose slot is i.
func (a *Budget) takeAt(i uint64, ip [16]byte, n int64, now time.Duration) bool {
	mu := a.stripe(i)
	mu.Lock()
	lockTaken()
	s := a.slotLocked(i, ip, now)
	ok := s.tokens >= n
	if ok {
		s.tokens -= n
	}
	mu.Unlock()
	return ok
}

// Probing reports whether the relay probes lanes (Config).
func (a *Budget) Probing() bool { return a != nil && a.proofs != nil }

// markProven records on k's address slot that a lane of it is proven
// until `until`, so that Spend looks the lane up.
func (a *Budget) markProven(k lane.Key, until, now time.Duration) {
	i := a.index(k.IP)
	mu := a.stripe(i)
	mu.Lock()
	lockTaken()
	s := a.slotLocked(i, k.IP, now)
	// Alone, proven is read whole by Spend's lock-free look: no version.
	s.proven.Store(int64(max(time.Duration(s.proven.Load()), until)))
	mu.Unlock()
}

// Probe returns the transaction id of a binding request to send lane k,
// and false when k was probed within ProbeInterval or its slot holds
// another lane's live probe or proof.
func (a *Budget) Probe(k lane.Key, now time.Duration) ([12]byte, bool) {
	if a == nil || a.proofs == nil {
		return [12]byte{}, false
	}
	return a.proofs.start(k, now)
}

// Answer takes a binding response with transaction id tx heard from lane
// k, reporting whether it answered a probe of k's (the lane is then
// proven).
func (a *Budget) Answer(k lane.Key, tx [12]byte, now time.Duration) bool {
	if a == nil || a.proofs == nil {
		return false
	}
	until, ok := a.proofs.answer(k, tx, now)
	if ok {
		a.markProven(k, until, now)
	}
	return ok
}

// proofTable remembers, per lane, the probe last sent to it and until when
// it is proven. It is safe for concurrent use.
type proofTable struct {
	stripes [ampStripes]ampStripe

	// rng draws the probes' transaction ids: ChaCha8, a cryptographically
	// strong generator (math/rand/v2), seeded from crypto/rand, so that
	// no id can be guessed from others; it allocates nothing, as
	// crypto/rand's Read need not. Guarded by rngMu, never held with a
	// stripe's lock.
	rngMu sync.Mutex
	rng   *mrand.ChaCha8

	seed     uint64        // static: the address table's (newProofTable)
	mix0     uint64        // static: seedMix(seed)
	shift    uint          // static
	lifetime time.Duration // static: ProofLifetime
	interval time.Duration // static: ProbeInterval
	slots    []proofSlot   // static slice; slot i guarded by stripes[i>>shift].mu

	// versions[j] is odd while a writer holding stripe j changes the
	// lane a slot holds (provenLockFree reads it).
	versions stripeVersions
}

// proofSlot is one lane's probe and proof. Its lane (ip0, ip1: the
// address's halves as nativeHalves gives them; port) and until are read
// by provenLockFree: written only with atomic stores by a writer holding
// the stripe, the lane between its version's begin and end.
type proofSlot struct {
	ip0, ip1 atomic.Uint64
	port     atomic.Uint32
	tx       [12]byte      // the last probe's transaction id
	probed   time.Duration // when it was sent; 0: never
	until    atomic.Int64  // proven until (a time.Duration)
}

// holds reports whether s holds lane k.
func (s *proofSlot) holds(k lane.Key) bool {
	hi, lo := nativeHalves(k.IP)
	return s.holdsHalves(hi, lo, uint32(k.Port))
}

// holdsHalves is holds of the lane of address halves hi and lo
// (nativeHalves) and port.
func (s *proofSlot) holdsHalves(hi, lo uint64, port uint32) bool {
	return s.ip0.Load() == hi && s.ip1.Load() == lo && s.port.Load() == port
}

// provenUntil is when s's proof ends.
func (s *proofSlot) provenUntil() time.Duration { return time.Duration(s.until.Load()) }

// newProofTable returns the proof table for cfg (filled), whose lanes are
// indexed by their address's hash in the address table of seed mixed with
// the port (ways), so that a spend hashes the address once.
func newProofTable(cfg Config, seed uint64) (*proofTable, error) {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("amp: seed: %w", err)
	}
	per := max(cfg.ProofSlots/ampStripes, 1)
	return &proofTable{
		rng:  mrand.NewChaCha8(key),
		seed: seed, mix0: seedMix(seed), shift: uint(bits.TrailingZeros(uint(per))),
		lifetime: cfg.ProofLifetime, interval: cfg.ProbeInterval,
		slots: make([]proofSlot, cfg.ProofSlots),
	}, nil
}

// proofWays is how many adjacent slots of one stripe a lane may take in
// the proof table (set-associative, so that lanes sharing a slot, such as
// ships behind one NAT, are all proven; issue 28): with two, one of 200
// NAT ships found both its slots held by others' 2-minute proofs in about
// one run in twenty; with four, the chance is squared again.
const proofWays = 4

// ways returns k's slots (proofWays adjacent slots of one stripe, fewer
// when a stripe holds fewer), their lock and their stripe. A lane is in
// at most one of them.
func (t *proofTable) ways(k lane.Key) (set []proofSlot, mu *sync.Mutex, stripe uint64) {
	hi, lo := halves(k.IP)
	return t.waysOf(hashFrom(t.seed, t.mix0, hi, lo), k.Port)
}

// waysOf is ways of the lane of port whose address hashes to h
// (hashFrom, the table's seed).
func (t *proofTable) waysOf(h uint64, port uint16) (set []proofSlot, mu *sync.Mutex, stripe uint64) {
	i := lane.Mix64(h^uint64(port)) & uint64(len(t.slots)-1)
	stripe = (i >> t.shift) % ampStripes
	n := uint64(min(proofWays, 1<<t.shift))
	base := i &^ (n - 1)
	return t.slots[base : base+n], &t.stripes[stripe].mu, stripe
}

// holding returns the slot of set holding k, or nil. Its lock must be
// held, or its stripe's version read before and checked after.
func holding(k lane.Key, set []proofSlot) *proofSlot {
	hi, lo := nativeHalves(k.IP)
	for i := range set {
		if set[i].holdsHalves(hi, lo, uint32(k.Port)) {
			return &set[i]
		}
	}
	return nil
}

// proven reports whether k answered a probe within ProofLifetime, and
// whether the proof is in its last quarter (renew: k should be probed
// again, so that a busy lane stays proven).
func (t *proofTable) proven(k lane.Key, now time.Duration) (ok, renew bool) {
	return t.standing(t.proofEnd(k), now)
}

// proofEnd returns when k's proof ends (0: k holds none), under its
// lock.
func (t *proofTable) proofEnd(k lane.Key) time.Duration {
	set, mu, _ := t.ways(k)
	mu.Lock()
	lockTaken()
	until := t.untilIn(k, set)
	mu.Unlock()
	return until
}

// provenLockFree is proven without the lock: held reports that ok and
// renew are what proven answers at one instant of the call; held false
// (a writer changed a lane of k's slots meanwhile), they say nothing.
func (t *proofTable) provenLockFree(k lane.Key, now time.Duration) (ok, renew, held bool) {
	hi, lo := halves(k.IP)
	until, held := t.untilLockFreeOf(hashFrom(t.seed, t.mix0, hi, lo), k)
	ok, renew = t.standing(until, now)
	return ok, renew, held
}

// untilLockFreeOf is provenUntil without the lock, for k whose address
// hashes to h (waysOf): held false (a writer changed a lane of k's slots
// meanwhile), until says nothing.
func (t *proofTable) untilLockFreeOf(h uint64, k lane.Key) (until time.Duration, held bool) {
	set, _, j := t.waysOf(h, k.Port)
	was := t.versions.read(j)
	until = t.untilIn(k, set)
	return until, t.versions.holds(j, was)
}

// untilIn returns when k's proof ends, from k's slots set (0: none).
func (t *proofTable) untilIn(k lane.Key, set []proofSlot) time.Duration {
	if s := holding(k, set); s != nil {
		return s.provenUntil()
	}
	return 0
}

// standing judges, at now, a proof that ends at until: ok, it is live;
// renew, it is in its last quarter, and its lane is to be probed again
// (so that a busy lane stays proven).
func (t *proofTable) standing(until, now time.Duration) (ok, renew bool) {
	ok = until > now
	renew = ok && until-now < t.lifetime/4
	return ok, renew
}

// freeUntil is the first instant at which a lane whose proof ends at until
// is no longer free: standing's renew, until-now < lifetime/4, first holds
// one nanosecond past until-lifetime/4.
func (t *proofTable) freeUntil(until time.Duration) time.Duration {
	return until - t.lifetime/4 + 1
}

// startable returns the slot of set k's probe may take at now: the one
// holding k, unless k was probed within ProbeInterval; else the first one
// holding no live proof and no probe within ProbeInterval (k must not take
// another: it would cancel an honest lane's probe or proof); else nil. Its
// lock must be held.
func (t *proofTable) startable(k lane.Key, set []proofSlot, now time.Duration) *proofSlot {
	free := func(s *proofSlot) bool { return s.probed == 0 || now-s.probed >= t.interval }
	if s := holding(k, set); s != nil {
		if free(s) {
			return s
		}
		return nil
	}
	for i := range set {
		if s := &set[i]; free(s) && s.provenUntil() <= now {
			return s
		}
	}
	return nil
}

// start records a probe of k at now and returns its transaction id, or
// false: k was probed within ProbeInterval, or every one of its ways holds another
// lane's proof or a probe still within ProbeInterval.
func (t *proofTable) start(k lane.Key, now time.Duration) ([12]byte, bool) {
	set, mu, j := t.ways(k)
	mu.Lock()
	lockTaken()
	ok := t.startable(k, set, now) != nil
	mu.Unlock()
	if !ok {
		return [12]byte{}, false
	}
	var tx [12]byte
	t.rngMu.Lock()
	lockTaken()
	t.rng.Read(tx[:])
	t.rngMu.Unlock()
	mu.Lock()
	lockTaken()
	defer mu.Unlock()
	// Chosen again: another reader may have probed k meanwhile.
	s := t.startable(k, set, now)
	if s == nil {
		return [12]byte{}, false
	}
	if !s.holds(k) {
		hi, lo := nativeHalves(k.IP)
		t.versions.begin(j)
		s.ip0.Store(hi)
		s.ip1.Store(lo)
		s.port.Store(uint32(k.Port))
		s.until.Store(0)
		t.versions.end(j)
		s.tx, s.probed = [12]byte{}, 0
	}
	s.tx, s.probed = tx, max(now, 1)
	return tx, true
}

// answer takes a response with id tx from lane k: when it repeats the id
// of k's last probe, sent within ProbeAnswerWindow, k is proven for
// ProofLifetime from now, and answer returns until when. An id is taken
// once.
func (t *proofTable) answer(k lane.Key, tx [12]byte, now time.Duration) (time.Duration, bool) {
	set, mu, _ := t.ways(k)
	mu.Lock()
	lockTaken()
	defer mu.Unlock()
	s := holding(k, set)
	if s == nil || s.probed == 0 || now-s.probed > ProbeAnswerWindow || s.tx != tx || tx == ([12]byte{}) {
		return 0, false
	}
	s.tx = [12]byte{}
	// Alone, until is read whole by provenLockFree: no version.
	s.until.Store(int64(now + t.lifetime))
	return now + t.lifetime, true
}
