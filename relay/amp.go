package relay

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// AmpConfig bounds amplification: the bytes of answers the relay sends to
// an IP address (pages, STUN responses, legacy ames forwards to lanes it
// learned), against the bytes of requests it heard from that address.
//
// A spoofed request makes the relay send the response to the victim whose
// address was forged: a 40-byte peek can fetch a 1,472-byte page. The
// pending table already allows at most one page per request; this budget
// further limits each address to Factor bytes of pages per byte of
// requests, plus Rate bytes per second, banked up to Burst. An address the
// relay has not heard from recently starts with Initial bytes. So a victim
// address receives at most Factor*q + Rate bytes per second from an
// attacker sending q bytes per second of requests in its name.
//
// The per-address bound alone does not bound the ratio: Rate is free, so a
// slow attacker (q small) gets up to page/request (about 36x for mesa), and
// an attacker spreading forged requests over many addresses of one network
// gets Rate for each (64 addresses of a /24 at 100 peeks/s each: 86.6x
// into the /24). So every send also needs the budget of its address's
// network (its IPv4 /Net4Bits or IPv6 /Net6Bits prefix), which has no
// time-based rate: a network earns NetFactor bytes per byte of requests
// heard from any of its addresses, banked up to NetBurst, plus NetInitial
// once when its slot is made. A network therefore receives at most
// NetFactor*Q + NetInitial bytes for Q bytes of requests in the names of
// its addresses, for every attack rate and every spread over it: with the
// defaults, 8x plus a one-off 16 pages. (A network's slot is made again
// only when another network hashing to it takes it over, which an
// attacker cannot aim at without the seed: about NetSlots networks'
// requests per re-grant.) A send needs both budgets, and one that either
// refuses takes nothing from the other.
//
// What this costs honest traffic: a requester whose pages are larger than
// NetFactor times its requests (mesa peeks are 40-100 bytes, full pages
// 1,472) gets pages beyond NetInitial at the rate its requests earn them:
// a requester peeking 1,472-byte pages with 80-byte peeks gets the first
// 16 pages and then about 8*80/1472 = 43% of the rest at the first ask;
// the rest arrive when it asks again, each ask earning more (mesa and
// ames retransmit an unanswered request). TestHonestRequesterUnderNetworkBudget
// measures it. A requester whose route tightens past the relay (the
// next-hop on every page) stops costing anything after the first pages.
// Legacy ames forwards to learned lanes are budgeted the same way (Relay's
// ames): honest legacy traffic that sends at least 1/NetFactor of the
// bytes it receives through the relay is unaffected; a one-way transfer
// to a lane the relay learned, whose acks are about 1/15 of its fragments,
// stalls once NetInitial is spent (TestHonestLegacyTrafficUnthrottled: 46
// of 1,000 fragments). A negative NetFactor lifts that, and the bound.
//
// Addresses and networks are tracked in Slots and NetSlots fixed slots by
// a seeded hash, with no allocation: one whose slot is taken by another
// starts over from Initial (NetInitial), which is small so that churning
// slots gains an attacker little. Each table's slots are guarded by 64
// locks, each over a stripe of Slots/64 of them, so that readers on
// different sockets budgeting different addresses do not contend;
// striping changes which lock guards a slot, not which slot an address
// gets, so the bound (Slots addresses in all) and the eviction rule are
// those of one table. No call holds two locks.
type AmpConfig struct {
	Factor  int // page bytes allowed per request byte; negative disables the budget
	Rate    int // page bytes per second allowed regardless of requests
	Burst   int // most bytes an address can bank
	Initial int // budget of an address not tracked yet
	Slots   int // tracked addresses, a power of two

	// The per-network budget; NetFactor negative disables it (the
	// per-address budget then stands alone).
	NetFactor  int // answer bytes a network may receive per byte of requests from it
	NetBurst   int // most bytes a network can bank
	NetInitial int // budget of a network not tracked yet, granted once
	NetSlots   int // tracked networks, a power of two
	Net4Bits   int // IPv4 prefix length of a network, 1-32
	Net6Bits   int // IPv6 prefix length of a network, 1-128
}

// fill gives each zero field its default (so the zero AmpConfig is the
// default budget) and checks the rest. A negative Factor disables the
// budget, a negative NetFactor its per-network part.
func (c *AmpConfig) fill() error {
	if c.Factor < 0 {
		return nil
	}
	if c.Rate < 0 || c.Burst < 0 || c.Initial < 0 || c.Slots < 0 ||
		c.NetBurst < 0 || c.NetInitial < 0 || c.NetSlots < 0 || c.Net4Bits < 0 || c.Net6Bits < 0 {
		return fmt.Errorf("relay: negative amplification setting %+v", *c)
	}
	for _, f := range []struct {
		v   *int
		def int
	}{{&c.Factor, DefaultAmpFactor}, {&c.Rate, DefaultAmpRate}, {&c.Burst, DefaultAmpBurst},
		{&c.Initial, DefaultAmpInitial}, {&c.Slots, DefaultAmpSlots},
		{&c.NetFactor, DefaultAmpNetFactor}, {&c.NetBurst, DefaultAmpNetBurst},
		{&c.NetInitial, DefaultAmpNetInitial}, {&c.NetSlots, DefaultAmpNetSlots},
		{&c.Net4Bits, DefaultAmpNet4Bits}, {&c.Net6Bits, DefaultAmpNet6Bits}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if bits.OnesCount(uint(c.Slots)) != 1 {
		return fmt.Errorf("relay: amplification slots %d is not a power of two", c.Slots)
	}
	if c.NetFactor >= 0 && bits.OnesCount(uint(c.NetSlots)) != 1 {
		return fmt.Errorf("relay: amplification network slots %d is not a power of two", c.NetSlots)
	}
	if c.Net4Bits > 32 || c.Net6Bits > 128 {
		return fmt.Errorf("relay: network prefix /%d (IPv4) or /%d (IPv6) too long", c.Net4Bits, c.Net6Bits)
	}
	return nil
}

// ampTable is the amplification budget: per address, and (net) per
// network. It is safe for concurrent use. The network budget is an
// ampTable of its own, keyed by the network's masked address, with Rate 0.
type ampTable struct {
	// First, so that the last stripe's padding keeps the locks off the
	// cache line of the static fields every call reads.
	stripes [ampStripes]ampStripe

	cfg   AmpConfig // static
	seed  uint64    // static
	shift uint      // static: log2 of the slots per stripe
	slots []ampSlot // static slice; slot i guarded by stripes[i>>shift].mu

	net          *ampTable // static: the per-network budget; nil if disabled or this is it
	mask4, mask6 [2]uint64 // static: a network's prefix, over the address's 128 bits
}

// ampStripe is the lock of one stripe of slots, padded so that
// neighbouring stripes' locks do not share a cache line.
type ampStripe struct {
	mu sync.Mutex
	_  [ampStripePad]byte
}

type ampSlot struct {
	ip     [16]byte
	tokens int64         // bytes of pages allowed now
	last   time.Duration // when tokens was last brought up to date
}

// newAmpTable returns the budget for cfg (filled), or nil when disabled.
func newAmpTable(cfg AmpConfig) (*ampTable, error) {
	if cfg.Factor < 0 {
		return nil, nil
	}
	a, err := newAmpBank(cfg)
	if err != nil || cfg.NetFactor < 0 {
		return a, err
	}
	// An IPv4 address is IPv4-mapped in a lane.Key's 16 bytes: its
	// prefix counts from bit 96.
	a.mask4, a.mask6 = prefixMask(96+cfg.Net4Bits), prefixMask(cfg.Net6Bits)
	a.net, err = newAmpBank(AmpConfig{Factor: cfg.NetFactor, Burst: cfg.NetBurst,
		Initial: cfg.NetInitial, Slots: cfg.NetSlots})
	return a, err
}

// newAmpBank returns one table of slots for cfg, with no network budget.
func newAmpBank(cfg AmpConfig) (*ampTable, error) {
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("relay: seed: %w", err)
	}
	// Slots/ampStripes slots a stripe, or one each (and some stripes
	// unused) when there are fewer slots than stripes.
	per := max(cfg.Slots/ampStripes, 1)
	return &ampTable{
		cfg: cfg, seed: binary.LittleEndian.Uint64(seed[:]),
		shift: uint(bits.TrailingZeros(uint(per))),
		slots: make([]ampSlot, cfg.Slots),
	}, nil
}

// prefixMask returns the mask of the first n of 128 bits, as the
// big-endian halves of an address.
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

// network returns the masked address of ip's network: its IPv4 prefix if
// ip is IPv4-mapped, else its IPv6 prefix.
func (a *ampTable) network(ip [16]byte) [16]byte {
	hi := binary.BigEndian.Uint64(ip[:8])
	lo := binary.BigEndian.Uint64(ip[8:])
	m := &a.mask6
	if (lane.Key{IP: ip}).Is4() {
		m = &a.mask4
	}
	var n [16]byte
	binary.BigEndian.PutUint64(n[:8], hi&m[0])
	binary.BigEndian.PutUint64(n[8:], lo&m[1])
	return n
}

// index returns ip's slot, by the seeded hash.
func (a *ampTable) index(ip [16]byte) uint64 {
	lo := binary.LittleEndian.Uint64(ip[:8])
	hi := binary.LittleEndian.Uint64(ip[8:])
	h := (lo ^ a.seed) * 0x9e3779b97f4a7c15
	h = (h ^ hi ^ h>>29) * 0xbf58476d1ce4e5b9
	return (h ^ h>>32) & uint64(len(a.slots)-1)
}

// stripe returns the lock guarding slot i.
func (a *ampTable) stripe(i uint64) *sync.Mutex { return &a.stripes[(i>>a.shift)%ampStripes].mu }

// slotLocked returns slot i, ip's, brought up to date at now; a slot held
// by another address is taken over. Its stripe must be locked.
func (a *ampTable) slotLocked(i uint64, ip [16]byte, now time.Duration) *ampSlot {
	s := &a.slots[i]
	if s.ip != ip || s.last == 0 {
		*s = ampSlot{ip: ip, tokens: int64(a.cfg.Initial), last: now}
		if now == 0 {
			s.last = 1 // keep "never used" distinct from a real time
		}
		return s
	}
	if dt := now - s.last; dt > 0 {
		s.tokens = min(int64(a.cfg.Burst), s.tokens+int64(a.cfg.Rate)*int64(dt)/int64(time.Second))
		s.last = now
	}
	return s
}

// credit records n bytes of requests heard from k's address (and its
// network).
func (a *ampTable) credit(k lane.Key, n int, now time.Duration) {
	if a == nil {
		return
	}
	a.add(k.IP, int64(a.cfg.Factor)*int64(n), now)
	if a.net != nil {
		a.net.add(a.network(k.IP), int64(a.net.cfg.Factor)*int64(n), now)
	}
}

// spend takes n bytes from the budgets of k's address and of its network,
// reporting false (and taking nothing) if either does not have them.
func (a *ampTable) spend(k lane.Key, n int, now time.Duration) bool {
	if a == nil {
		return true
	}
	// The network first: without a free rate it is the budget an attack
	// runs out of, and a spend it refuses then costs one lock, not three.
	if a.net == nil {
		return a.take(k.IP, n, now)
	}
	netIP := a.network(k.IP)
	if !a.net.take(netIP, n, now) {
		return false
	}
	if !a.take(k.IP, n, now) {
		a.net.add(netIP, int64(n), now) // the network's back: nothing was sent
		return false
	}
	return true
}

// refund gives back n bytes a spend for k took, for a send that did not
// happen after all.
func (a *ampTable) refund(k lane.Key, n int, now time.Duration) {
	if a == nil {
		return
	}
	a.add(k.IP, int64(n), now)
	if a.net != nil {
		a.net.add(a.network(k.IP), int64(n), now)
	}
}

// add banks n bytes in ip's slot, up to Burst.
func (a *ampTable) add(ip [16]byte, n int64, now time.Duration) {
	i := a.index(ip)
	mu := a.stripe(i)
	mu.Lock()
	s := a.slotLocked(i, ip, now)
	s.tokens = min(int64(a.cfg.Burst), s.tokens+n)
	mu.Unlock()
}

// take takes n bytes from ip's slot, reporting false (and taking nothing)
// if it does not have them.
func (a *ampTable) take(ip [16]byte, n int, now time.Duration) bool {
	i := a.index(ip)
	mu := a.stripe(i)
	mu.Lock()
	s := a.slotLocked(i, ip, now)
	ok := s.tokens >= int64(n)
	if ok {
		s.tokens -= int64(n)
	}
	mu.Unlock()
	return ok
}
