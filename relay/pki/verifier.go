package pki

import (
	"crypto/ed25519"
	"sync"
	"sync/atomic"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// Reason is a verdict of Verify, and the counter it is added to.
type Reason uint8

const (
	// ReasonVerified: the publisher's signature on the page is good.
	ReasonVerified Reason = iota
	// ReasonBadSignature: signed, but not by the key the snapshot holds.
	ReasonBadSignature
	// ReasonUnknownShip: the snapshot has no key for the publisher.
	ReasonUnknownShip
	// ReasonStaleKey: the page's rift, or the life its %publ path names,
	// is not the snapshot's (a key rotated or a ship breached since one of
	// them was made).
	ReasonStaleKey
	// ReasonNotSigned: the page carries no signature (an HMAC, a Merkle
	// pair, or none).
	ReasonNotSigned
	// ReasonNotFirst: not a message's first page; only that one carries
	// the message's signature.
	ReasonNotFirst
	// ReasonMalformed: not a mesa page, or its signed fields do not fit
	// together (a proof of the wrong length, a bad life in the path).
	ReasonMalformed

	// NumReasons is the number of reasons.
	NumReasons
)

var reasonNames = [NumReasons]string{
	"verified", "bad_signature", "unknown_ship", "stale_key",
	"not_signed", "not_first_fragment", "malformed",
}

// String returns the reason's metric label ("bad_signature").
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// DefaultMaxComets caps the comets a Verifier learns at run time
// (AddComet). A comet's entry is 56 bytes and map overhead; 2^16 of them
// stay under 8 MiB. When full, new comets are refused, not evicted, so that
// a flood of fresh comets cannot push out the ones in use.
const DefaultMaxComets = 1 << 16

// Verifier checks publishers' signatures on first-fragment pages against
// an Azimuth snapshot. It is safe for concurrent use: Verify reads the
// snapshot through an atomic pointer, so Store (a SIGHUP reload) swaps it
// without a lock, and a Verify in flight finishes on the snapshot it
// started with. Create one with NewVerifier; the nil *Verifier's Signed
// answers false.
type Verifier struct {
	snap atomic.Pointer[Snapshot]

	// comets learned at run time; guarded by mu, at most maxComets.
	mu        sync.Mutex
	comets    map[lane.Ship]key
	maxComets int
	// nComets is len(comets), read without mu: the relay asks Knows of
	// every page's publisher, and most relays never learn a comet.
	nComets atomic.Int32

	counts [NumReasons]atomic.Uint64
}

// NewVerifier returns a verifier over s (nil: no ships yet).
func NewVerifier(s *Snapshot) *Verifier {
	v := &Verifier{comets: make(map[lane.Ship]key), maxComets: DefaultMaxComets}
	v.Store(s)
	return v
}

// Store makes s the snapshot later Verify calls use. A nil s empties it.
func (v *Verifier) Store(s *Snapshot) {
	if s == nil {
		s = &Snapshot{}
	}
	v.snap.Store(s)
}

// Len is the number of ships in the current snapshot.
func (v *Verifier) Len() int { return v.snap.Load().Len() }

// AddComet records a comet's key, which certifies itself: the comet is
// CometShip(p), its life 1 and its rift 0 (a comet cannot breach). It
// returns the comet, and false if the table is full or p is not a comet's
// pass (its hash is below 2^64).
func (v *Verifier) AddComet(p *Pass) (lane.Ship, bool) {
	ship := CometShip(p)
	if p[0] != passTag || ship.Class() != lane.Comet {
		return ship, false
	}
	k := key{life: 1}
	copy(k.sign[:], p.SignKey())
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.comets[ship]; !ok && len(v.comets) >= v.maxComets {
		return ship, false
	}
	v.comets[ship] = k
	v.nComets.Store(int32(len(v.comets)))
	return ship, true
}

// keyOf returns ship's key: the snapshot's, else a learned comet's.
func (v *Verifier) keyOf(ship lane.Ship) (key, bool) {
	if k, ok := v.snap.Load().lookup(ship); ok {
		return k, true
	}
	if ship.Class() != lane.Comet || v.nComets.Load() == 0 {
		return key{}, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	k, ok := v.comets[ship]
	return k, ok
}

// Verify checks the publisher's signature on page p, a parsed mesa packet,
// and counts the verdict. Only ReasonVerified means the page was signed by
// the ship its name names, with the key the snapshot holds for it.
func (v *Verifier) Verify(p *scry.Packet) Reason {
	r := v.verify(p)
	v.counts[r].Add(1)
	return r
}

func (v *Verifier) verify(p *scry.Packet) Reason {
	var a pageAuth
	if r := readPageAuth(p, &a); r != ReasonVerified {
		return r
	}
	k, ok := v.keyOf(a.ship)
	if !ok {
		return ReasonUnknownShip
	}
	if a.rift != k.rift || (a.life != 0 && a.life != k.life) {
		return ReasonStaleKey
	}
	var buf [maxSignedLen]byte
	msg := appendSigned(buf[:0], a.ship, a.path, &a.root)
	if !ed25519.Verify(k.sign[:], msg, a.sig) {
		return ReasonBadSignature
	}
	return ReasonVerified
}

// VerifyBytes parses datagram b as a mesa packet and verifies it (Verify).
// A datagram that does not parse is ReasonMalformed.
func (v *Verifier) VerifyBytes(b []byte) Reason {
	var p scry.Packet
	if p.Parse(b) != nil {
		v.counts[ReasonMalformed].Add(1)
		return ReasonMalformed
	}
	return v.Verify(&p)
}

// Signed reports whether datagram pkt is a first-fragment page published
// by publisher and signed with publisher's key: the relay's PageVerifier.
// A comet's attestation page teaches the verifier the comet's key first
// (LearnComet), so it is signed too. A page naming another ship than
// publisher counts as malformed. A nil v reports false.
func (v *Verifier) Signed(pkt []byte, publisher lane.Ship) bool {
	if v == nil {
		return false
	}
	var p scry.Packet
	if p.Parse(pkt) != nil || p.Name.Ship != publisher {
		v.counts[ReasonMalformed].Add(1)
		return false
	}
	if pass, ok := readCometProof(&p); ok {
		v.AddComet(&pass)
	}
	return v.Verify(&p) == ReasonVerified
}

// Knows reports whether v holds a key for ship (the snapshot's, or a
// comet's it learned): then a page of ship's must be signed before it may
// prove a new lane (route.PageObs.Unverified). A nil v knows no ship.
func (v *Verifier) Knows(ship lane.Ship) bool {
	if v == nil {
		return false
	}
	_, ok := v.keyOf(ship)
	return ok
}

// Counts returns how many pages got each verdict since the verifier was
// made (reloads do not reset them).
func (v *Verifier) Counts() [NumReasons]uint64 {
	var c [NumReasons]uint64
	for i := range c {
		c[i] = v.counts[i].Load()
	}
	return c
}
