package relay

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// DupConfig sizes the legacy ames duplicate filter.
//
// Legacy ames carries no hop count: a packet caught between relays that
// each take the next for the receiver's way goes round for ever (three
// relays pinned in a cycle passed one packet about 44,000 times a second
// until they were stopped). The filter ends a loop by two rules, each
// read from how an honest sender repeats a packet (ames.hoon's packet
// pump re-sends the stored fragment, and AES-SIV is deterministic, so a
// retransmission's bytes are identical):
//
//  1. Another lane. A retransmission comes from its sender's lane, the one
//     the packet first came from; a copy of it from any other lane within
//     Window is a loop's (or took another path), and is dropped.
//  2. The same lane, too soon or too often. A loop can bring the packet
//     back from the very lane it first came from: an attacker who forges
//     the first copy from the lane of the loop's last relay makes every
//     lap look like a retransmission. But ames re-sends a packet only on
//     a timeout whose rto +clamp-rto keeps at 200 ms or more, doubling on
//     each (+on-timeout; at most 2 minutes), besides one fast re-send of
//     a packet not yet re-sent (+on-skipped-packet: retries=0 and three
//     later acks). So a same-lane copy is forwarded at most once sooner
//     than DupMinResend after the last forward (the fast re-send), and at
//     most DupMaxCopies copies in all while the record lives (each
//     forward renews it for Window): a doubling schedule from 200 ms
//     sends at most six copies (the packet, the fast re-send, 0.2, 0.4,
//     0.8 and 1.6 s later) before a gap outlasts the two-second window
//     and the record with it. A loop lapping faster than DupMinResend
//     ends on its second lap; a slower one within DupMaxCopies laps.
//
// Each relay of a loop therefore forwards one injected packet at most
// DupMaxCopies times, and a retransmission schedule as ames's passes
// whole. What honest traffic can lose: a sender whose rto other acks keep
// resetting to 200 ms, retransmitting one lost packet more than
// DupMaxCopies times within two-second gaps, has its further copies
// dropped until a gap outlasts the window (ames keeps doubling).
//
// A packet is known by its header mug, its content's length, its sender
// and receiver (none of which forwarding changes: the origin a relay
// inserts is outside the mugged range), and its content's first and last
// 8 bytes (encrypted in an ames packet, so 128 more bits against two
// packets colliding on the 20-bit mug), hashed with a per-process seed
// into a 64-bit fingerprint; the lane it came from by a seeded 28-bit
// tag, beside a 4-bit count of the copies forwarded. The filter is Slots
// fingerprints in sets of dupWays (one cache line each), the set chosen
// by the fingerprint: fixed memory (16 bytes a slot), no allocation, and
// a full set replaces its oldest entry, so a flood of distinct packets
// can only make the filter forget early, never grow it. It is striped
// under 64 locks as the amplification budget is (lockStripes).
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
	stripes [lockStripes]lockStripe // set i guarded by stripes[(i>>shift)%lockStripes]

	window time.Duration // static
	seed   uint64        // static
	shift  uint          // static: log2 of the sets per stripe
	sets   []dupSet      // static slice
}

// dupSet is dupWays fingerprints, when each was last forwarded (in
// milliseconds, modulo 2^32), and the tag of the lane it first came from
// with, in its low dupCountBits, the copies forwarded (dupCopies); a zero
// fingerprint is an empty way.
type dupSet struct {
	fp   [dupWays]uint64
	atMs [dupWays]uint32
	lane [dupWays]uint32
}

// dupCountBits are the low bits of dupSet.lane that count the copies of
// a packet forwarded; the tag is the rest.
const (
	dupCountBits = 4
	dupCountMask = 1<<dupCountBits - 1
)

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
	per := max(n/lockStripes, 1)
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

// laneTag returns the seeded tag of lane k the filter keeps (its low
// dupCountBits zero).
func (d *dupFilter) laneTag(k lane.Key) uint32 {
	if d == nil {
		return 0
	}
	return uint32(hash16(d.seed^uint64(k.Port)<<32, k.IP)>>32) &^ dupCountMask
}

// set returns the set and the lock of fingerprint fp.
func (d *dupFilter) set(fp uint64) (*dupSet, *lockStripe) {
	i := (fp >> 1) & uint64(len(d.sets)-1)
	return &d.sets[i], &d.stripes[(i>>d.shift)%lockStripes]
}

// within reports whether a packet recorded at ms (milliseconds modulo
// 2^32) is within the window at nowMs.
func (d *dupFilter) within(ms, nowMs uint32) bool {
	return int64(int32(nowMs-ms)) < int64(d.window/time.Millisecond)
}

// verdict says whether a copy of a packet recorded in way w of s may be
// forwarded at nowMs from the lane tagged tag (DupConfig's two rules):
// live reports whether the record is within the window, ok whether the
// copy may go (always, for a record past its window).
func (d *dupFilter) verdict(s *dupSet, w int, tag, nowMs uint32) (live, ok bool) {
	if !d.within(s.atMs[w], nowMs) {
		return false, true
	}
	copies := s.lane[w] & dupCountMask
	switch {
	case s.lane[w]&^dupCountMask != tag&^dupCountMask:
		return true, false // rule 1: another lane
	case copies >= DupMaxCopies:
		return true, false // rule 2: too often
	case nowMs-s.atMs[w] < uint32(DupMinResend/time.Millisecond) && copies >= dupFastResends+1:
		return true, false // rule 2: too soon, the fast re-send spent
	}
	return true, true
}

// dupFastResends is how many same-lane copies of a packet may come sooner
// than DupMinResend after the last: ames's one fast re-send
// (+on-skipped-packet re-sends a packet only while its retries are 0).
const dupFastResends = 1

// looped reports, changing nothing, whether a copy of fp from the lane
// tagged tag at now is to be dropped by DupConfig's rules: the packet was
// forwarded within the window and came from another lane, or came from
// this lane too soon or too often to be a retransmission. The relay asks
// record, which checks and records in one step; looped is the check
// alone, for the filter's tests.
func (d *dupFilter) looped(fp uint64, tag uint32, now time.Duration) bool {
	if d == nil {
		return false
	}
	nowMs := uint32(now / time.Millisecond)
	s, st := d.set(fp)
	st.mu.Lock()
	lockTaken()
	defer st.mu.Unlock()
	for w := range s.fp {
		if s.fp[w] == fp {
			_, ok := d.verdict(s, w, tag, nowMs)
			return !ok
		}
	}
	return false
}

// add records a copy of fp, heard from the lane tagged tag, as forwarded
// at now and reports true, or reports false (and changes nothing) if
// looped would drop it: the check and the record are one step, so of two
// readers forwarding one packet heard from two lanes at once only one is
// told to send it. A copy forwarded again from its first lane (a
// retransmission) renews the record's time and counts one more copy; a
// record past its window is begun anew.
func (d *dupFilter) add(fp uint64, tag uint32, now time.Duration) bool {
	ok, _ := d.record(fp, tag, now)
	return ok
}

// dupUndo is what one record changed, for undo: way w of set s (guarded
// by st) held fp, atMs and lane before, and was, after, the packet's
// record (rec...). A zero dupUndo changed nothing.
type dupUndo struct {
	s                *dupSet
	st               *lockStripe
	w                int
	fp, recFp        uint64
	atMs, lane       uint32
	recAtMs, recLane uint32
}

// record is add, returning also what it changed (u), so that a forward
// admitted before it is sent (Relay.amesPrecheck) can be undone when it
// is not sent after all.
func (d *dupFilter) record(fp uint64, tag uint32, now time.Duration) (ok bool, u dupUndo) {
	if d == nil {
		return true, u
	}
	nowMs := uint32(now / time.Millisecond)
	s, st := d.set(fp)
	st.mu.Lock()
	lockTaken()
	defer st.mu.Unlock()
	victim := 0
	for w := range s.fp {
		if s.fp[w] == fp {
			live, ok := d.verdict(s, w, tag, nowMs)
			if !ok {
				return false, u
			}
			if live {
				u = dupUndo{s: s, st: st, w: w, fp: fp, atMs: s.atMs[w], lane: s.lane[w]}
				s.atMs[w] = nowMs
				s.lane[w]++
				u.recFp, u.recAtMs, u.recLane = fp, nowMs, s.lane[w]
				return true, u
			}
			victim = w
			break
		}
		if s.fp[w] == 0 || s.fp[victim] != 0 && int32(s.atMs[w]-s.atMs[victim]) < 0 {
			victim = w
		}
	}
	u = dupUndo{s: s, st: st, w: victim, fp: s.fp[victim], atMs: s.atMs[victim], lane: s.lane[victim]}
	s.fp[victim], s.atMs[victim], s.lane[victim] = fp, nowMs, tag&^dupCountMask|1
	u.recFp, u.recAtMs, u.recLane = fp, nowMs, tag&^dupCountMask|1
	return true, u
}

// undo puts back what the record u describes changed, if its way still
// holds that record (another reader may have renewed or replaced it
// since: then it is left as it is). After a record and its undo with
// nothing between, the filter is as it was.
func (d *dupFilter) undo(u *dupUndo) {
	if u.s == nil {
		return
	}
	u.st.mu.Lock()
	lockTaken()
	s, w := u.s, u.w
	if s.fp[w] == u.recFp && s.atMs[w] == u.recAtMs && s.lane[w] == u.recLane {
		s.fp[w], s.atMs[w], s.lane[w] = u.fp, u.atMs, u.lane
	}
	u.st.mu.Unlock()
	*u = dupUndo{}
}

// trustedLane reports whether k is a lane the operator configured
// (galaxies, pinned ships, relays: the route table owns them,
// route.Table.Configured) or the fronted ship's own. Legacy forwards to
// them are not budgeted: no forged packet put them there. It takes no
// lock.
func (r *Relay) trustedLane(k lane.Key) bool {
	return (k == r.link.key && k.IsValid()) || r.routes.Configured(k)
}

// lockStripe is the lock of one stripe of slots, padded so that
// neighbouring stripes' locks do not share a cache line.
type lockStripe struct {
	mu sync.Mutex
	_  [lockStripePad]byte
}

// hash16 is the seeded hash of 16 bytes (an address) that the duplicate
// filter's lane tags and the signature budget index by, as relay/amp's
// tables do.
func hash16(seed uint64, b [16]byte) uint64 {
	h := lane.Mix64(seed ^ binary.LittleEndian.Uint64(b[:8]))
	return lane.Mix64(h ^ binary.LittleEndian.Uint64(b[8:]))
}

// randomSeed returns a seed from crypto/rand: a seed an attacker does not
// know keeps it from choosing inputs that share a slot.
func randomSeed() (uint64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("relay: seed: %w", err)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}
