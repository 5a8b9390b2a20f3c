package relay

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

// DupConfig sizes the legacy ames duplicate filter.
//
// Legacy ames carries no hop count: a packet caught between relays that
// each take the next for the receiver's way goes round for ever (three
// relays pinned in a cycle passed one packet about 44,000 times a second
// until they were stopped). A loop brings a packet back from another lane
// than the one it first came from; a retransmission (ames.hoon's packet
// pump re-sends the stored fragment, and AES-SIV is deterministic, so the
// bytes are identical) comes from its sender's lane, the one it came from
// the first time. So the relay remembers, for Window, every legacy packet
// it forwarded and the lane it came from, and drops the same packet heard
// from any other lane (DropDuplicate), while the same packet from the
// same lane is forwarded again, every time: each relay of a loop forwards
// a packet once per copy its sender sends, so one packet injected into a
// loop of n relays costs at most 1 + n*route.MaxTargets datagrams, and
// each retransmission the same again.
//
// A packet is known by its header mug, its content's length, its sender
// and receiver (none of which forwarding changes: the origin a relay
// inserts is outside the mugged range), and its content's first and last
// 8 bytes (encrypted in an ames packet, so 128 more bits against two
// packets colliding on the 20-bit mug), hashed with a per-process seed
// into a 64-bit fingerprint; the lane it came from by a seeded 32-bit
// tag. The filter is Slots fingerprints in sets of dupWays (one cache
// line each), the set chosen by the fingerprint: fixed memory (16 bytes a
// slot), no allocation, and a full set replaces its oldest entry, so a
// flood of distinct packets can only make the filter forget early, never
// grow it. It is striped under 64 locks as the amplification table is.
//
// What it cannot tell: a copy of a packet heard first from another lane
// than its sender's (an on-path attacker replaying it from its own lane
// before the sender's retransmission) makes the sender's copies look like
// the loop's for Window. The fronted ship's own packets are therefore
// never refused (only recorded, so a loop bringing one back is caught).
type DupConfig struct {
	Window time.Duration // how long a forwarded packet is remembered; negative disables the filter
	Slots  int           // fingerprints remembered, a power of two and at least dupWays
}

// Validate reports the field of c that New would reject, as a
// *ConfigError; nil if New accepts c.
func (c DupConfig) Validate() error { return c.fill() }

// fill gives each zero field its default and checks the rest.
func (c *DupConfig) fill() error {
	if c.Window < 0 {
		return nil
	}
	if c.Window == 0 {
		c.Window = DefaultDupWindow
	}
	if c.Slots == 0 {
		c.Slots = DefaultDupSlots
	}
	if c.Slots < dupWays || bits.OnesCount(uint(c.Slots)) != 1 {
		return &ConfigError{Field: "Dup.Slots", Value: c.Slots, Want: fmt.Sprintf("a power of two of at least %d", dupWays)}
	}
	return nil
}

// dupFilter is the legacy ames duplicate filter (DupConfig). It is safe
// for concurrent use.
type dupFilter struct {
	stripes [ampStripes]ampStripe // set i guarded by stripes[(i>>shift)%ampStripes]

	window time.Duration // static
	seed   uint64        // static
	shift  uint          // static: log2 of the sets per stripe
	sets   []dupSet      // static slice
}

// dupSet is dupWays fingerprints, when each was last forwarded (in
// milliseconds, modulo 2^32) and the tag of the lane it came from; a zero
// fingerprint is an empty way.
type dupSet struct {
	fp   [dupWays]uint64
	atMs [dupWays]uint32
	lane [dupWays]uint32
}

// newDupFilter returns the filter for cfg (filled), or nil when disabled.
func newDupFilter(cfg DupConfig) (*dupFilter, error) {
	if cfg.Window < 0 {
		return nil, nil
	}
	seed, err := randomSeed()
	if err != nil {
		return nil, err
	}
	n := cfg.Slots / dupWays
	per := max(n/ampStripes, 1)
	return &dupFilter{
		window: cfg.Window, seed: seed,
		shift: uint(bits.TrailingZeros(uint(per))), sets: make([]dupSet, n),
	}, nil
}

// fingerprint returns a's fingerprint, never zero (zero when d is nil).
func (d *dupFilter) fingerprint(a *scry.AmesPacket) uint64 {
	if d == nil {
		return 0
	}
	var head, tail uint64
	var buf [8]byte
	c := a.Content
	copy(buf[:], c)
	head = binary.LittleEndian.Uint64(buf[:])
	if len(c) >= 8 {
		tail = binary.LittleEndian.Uint64(c[len(c)-8:])
	}
	h := lane.Mix64(d.seed ^ uint64(a.Mug) ^ uint64(len(c))<<24)
	for _, w := range [...]uint64{a.Sndr.Hi, a.Sndr.Lo, a.Rcvr.Hi, a.Rcvr.Lo, head, tail} {
		h = lane.Mix64(h ^ w)
	}
	return h | 1
}

// laneTag returns the seeded 32-bit tag of lane k the filter keeps.
func (d *dupFilter) laneTag(k lane.Key) uint32 {
	if d == nil {
		return 0
	}
	return uint32(hash16(d.seed^uint64(k.Port)<<32, k.IP) >> 32)
}

// set returns the set and the lock of fingerprint fp.
func (d *dupFilter) set(fp uint64) (*dupSet, *ampStripe) {
	i := (fp >> 1) & uint64(len(d.sets)-1)
	return &d.sets[i], &d.stripes[(i>>d.shift)%ampStripes]
}

// within reports whether a packet recorded at ms (milliseconds modulo
// 2^32) is within the window at nowMs.
func (d *dupFilter) within(ms, nowMs uint32) bool {
	return int64(int32(nowMs-ms)) < int64(d.window/time.Millisecond)
}

// looped reports whether fp was forwarded within the window before now
// after coming from another lane than tag's: the packet came round a
// loop (or by another path), and is not to be forwarded again.
func (d *dupFilter) looped(fp uint64, tag uint32, now time.Duration) bool {
	if d == nil {
		return false
	}
	nowMs := uint32(now / time.Millisecond)
	s, st := d.set(fp)
	st.mu.Lock()
	defer st.mu.Unlock()
	for w := range s.fp {
		if s.fp[w] == fp && d.within(s.atMs[w], nowMs) {
			return s.lane[w] != tag
		}
	}
	return false
}

// add records fp, heard from the lane tagged tag, as forwarded at now and
// reports true, or reports false (and changes nothing) if it was
// forwarded within the window after coming from another lane: the check
// and the record are one step, so of two readers forwarding one packet
// heard from two lanes at once only one is told to send it. A packet
// forwarded again from its first lane (a retransmission) is forwarded
// and its time renewed.
func (d *dupFilter) add(fp uint64, tag uint32, now time.Duration) bool {
	if d == nil {
		return true
	}
	nowMs := uint32(now / time.Millisecond)
	s, st := d.set(fp)
	st.mu.Lock()
	defer st.mu.Unlock()
	victim := 0
	for w := range s.fp {
		if s.fp[w] == fp {
			if d.within(s.atMs[w], nowMs) && s.lane[w] != tag {
				return false
			}
			victim = w
			break
		}
		if s.fp[w] == 0 || s.fp[victim] != 0 && int32(s.atMs[w]-s.atMs[victim]) < 0 {
			victim = w
		}
	}
	s.fp[victim], s.atMs[victim], s.lane[victim] = fp, nowMs, tag
	return true
}

// amesAdmit admits a planned legacy forward (Relay.ames): every target
// lane not trusted (trustedLanes) has n bytes in its amplification budget,
// and the packet was not forwarded within the duplicate window after
// coming from another lane. It takes the bytes and records the packet,
// or, refusing, takes nothing and counts why; probe marks the targets the
// budget wants probed, for the caller to probe whether or not the forward
// is sent. It is made on the stack for each legacy forward.
type amesAdmit struct {
	r     *Relay
	out   *Out
	plan  *route.Plan // the plan Route made, read for its targets
	fp    uint64      // the packet's fingerprint
	tag   uint32      // the tag of the lane it came from
	own   bool        // the fronted ship's own packet: recorded, not refused
	n     int         // bytes each target is sent
	now   time.Duration
	probe [route.MaxTargets]bool
}

// admit takes each target's bytes and records the packet, reporting
// whether the forward may go; refusing, it gives back what it took.
func (a *amesAdmit) admit() bool {
	t := &a.plan.Targets
	for i := 0; i < t.N; i++ {
		a.probe[i] = false
		if a.r.trusted.has(t.Lanes[i], a.r.link.key) {
			continue
		}
		ok, probe := a.r.amp.spend(t.Lanes[i], a.n, a.now)
		a.probe[i] = probe
		if ok {
			continue
		}
		a.refund(i)
		a.out.c.add(EventAmpThrottled, 1)
		a.out.drop(DropLegacyThrottled)
		return false
	}
	if !a.r.dups.add(a.fp, a.tag, a.now) && !a.own {
		// Another reader forwarded it from another lane since ames looked.
		a.refund(t.N)
		a.out.drop(DropDuplicate)
		return false
	}
	return true
}

// refund gives back what Admit took from the first k targets.
func (a *amesAdmit) refund(k int) {
	t := &a.plan.Targets
	for i := 0; i < k; i++ {
		if !a.r.trusted.has(t.Lanes[i], a.r.link.key) {
			a.r.amp.refund(t.Lanes[i], a.n, a.now)
		}
	}
}

// trustedLanes are the lanes the operator configured (galaxies, pinned
// ships and the ship's own lane: Relay.SetLanes; relays: SetRelays).
// Legacy forwards to them are not budgeted: no forged packet put them
// there. Each set is replaced whole, never written in place.
type trustedLanes struct {
	static, relays atomic.Pointer[map[lane.Key]struct{}]
}

// store replaces the set p holds with the lanes of m.
func (t *trustedLanes) store(p *atomic.Pointer[map[lane.Key]struct{}], m map[lane.Ship]lane.Key) {
	set := make(map[lane.Key]struct{}, len(m))
	for _, k := range m {
		set[k] = struct{}{}
	}
	p.Store(&set)
}

// has reports whether k is a trusted lane, or ship, the ship's own.
func (t *trustedLanes) has(k, ship lane.Key) bool {
	if k == ship && ship.IsValid() {
		return true
	}
	for _, p := range [...]*atomic.Pointer[map[lane.Key]struct{}]{&t.static, &t.relays} {
		if m := p.Load(); m != nil {
			if _, ok := (*m)[k]; ok {
				return true
			}
		}
	}
	return false
}
