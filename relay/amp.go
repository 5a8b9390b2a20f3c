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

// AmpConfig bounds amplification: the bytes of pages the relay sends to an
// IP address, against the bytes of requests it heard from that address.
//
// A spoofed request makes the relay send the response to the victim whose
// address was forged: a 40-byte peek can fetch a 1,472-byte page. The
// pending table already allows at most one page per request; this budget
// further limits each address to Factor bytes of pages per byte of
// requests, plus Rate bytes per second, banked up to Burst. An address the
// relay has not heard from recently starts with Initial bytes. So a victim
// receives at most Factor*q + Rate bytes per second from an attacker sending
// q bytes per second of requests in its name: an amplification of at most
// Factor + Rate/q, and never more than Rate per second in absolute terms
// beyond Factor times what the attacker spends.
//
// Addresses are tracked in Slots fixed slots by a seeded hash, with no
// allocation: an address whose slot is taken by another starts over from
// Initial, which is small so that churning slots gains an attacker little.
// The slots are guarded by 64 locks, each over a stripe of Slots/64 of
// them, so that readers on different sockets budgeting different addresses
// do not contend; striping changes which lock guards a slot, not which
// slot an address gets, so the bound (Slots addresses in all) and the
// eviction rule are those of one table.
type AmpConfig struct {
	Factor  int // page bytes allowed per request byte; negative disables the budget
	Rate    int // page bytes per second allowed regardless of requests
	Burst   int // most bytes an address can bank
	Initial int // budget of an address not tracked yet
	Slots   int // tracked addresses, a power of two
}

// fill gives each zero field its default (so the zero AmpConfig is the
// default budget) and checks the rest. A negative Factor disables the
// budget.
func (c *AmpConfig) fill() error {
	if c.Factor < 0 {
		return nil
	}
	if c.Rate < 0 || c.Burst < 0 || c.Initial < 0 || c.Slots < 0 {
		return fmt.Errorf("relay: negative amplification setting %+v", *c)
	}
	for _, f := range []struct {
		v   *int
		def int
	}{{&c.Factor, DefaultAmpFactor}, {&c.Rate, DefaultAmpRate}, {&c.Burst, DefaultAmpBurst},
		{&c.Initial, DefaultAmpInitial}, {&c.Slots, DefaultAmpSlots}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if bits.OnesCount(uint(c.Slots)) != 1 {
		return fmt.Errorf("relay: amplification slots %d is not a power of two", c.Slots)
	}
	return nil
}

// ampTable is the per-address amplification budget. It is safe for
// concurrent use.
type ampTable struct {
	// First, so that the last stripe's padding keeps the locks off the
	// cache line of the static fields every call reads.
	stripes [ampStripes]ampStripe

	cfg   AmpConfig // static
	seed  uint64    // static
	shift uint      // static: log2 of the slots per stripe
	slots []ampSlot // static slice; slot i guarded by stripes[i>>shift].mu
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

// credit records n bytes of requests heard from k's address.
func (a *ampTable) credit(k lane.Key, n int, now time.Duration) {
	if a == nil {
		return
	}
	i := a.index(k.IP)
	mu := a.stripe(i)
	mu.Lock()
	s := a.slotLocked(i, k.IP, now)
	s.tokens = min(int64(a.cfg.Burst), s.tokens+int64(a.cfg.Factor)*int64(n))
	mu.Unlock()
}

// spend takes n bytes from k's address's budget, reporting false (and taking
// nothing) if it does not have them.
func (a *ampTable) spend(k lane.Key, n int, now time.Duration) bool {
	if a == nil {
		return true
	}
	i := a.index(k.IP)
	mu := a.stripe(i)
	mu.Lock()
	s := a.slotLocked(i, k.IP, now)
	ok := s.tokens >= int64(n)
	if ok {
		s.tokens -= int64(n)
	}
	mu.Unlock()
	return ok
}
