package relay

import (
	"sync"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// PageVerifier checks the publisher's signature on a mesa page.
// *pki.Verifier is one; a nil *pki.Verifier in the interface answers false.
type PageVerifier interface {
	// Signed reports whether pkt is a message's first page, published by
	// publisher (the ship its name names) and signed with the key the
	// verifier holds for publisher. It must be safe for concurrent use and
	// must not keep pkt.
	Signed(pkt []byte, publisher lane.Ship) bool
	// Knows reports whether the verifier holds publisher's key: then a
	// page of publisher's must verify before it may prove a new lane.
	Knows(publisher lane.Ship) bool
}

// pageSigned reports whether pkt, a page, was signed by publisher: the
// evidence a page may give for a new lane of publisher's. False when no
// verifier is configured (Config.PKI). A check costs an ed25519
// verification and a BLAKE3 root, 65-80 µs in all on the 2-core EPYC
// BenchmarkVerify ran on (relay/pki), some 90 times the relay's whole
// decision for a datagram (750-900 ns in BENCHMARKS.md), so it is for where
// a page would change publisher's route, never for every datagram, and
// within sigBudget.
//
// It is called by pageAuthority only.
func (r *Relay) pageSigned(pkt []byte, publisher lane.Ship) bool {
	return r.pki != nil && r.pki.Signed(pkt, publisher)
}

// pageAuthority returns what page b (parsed as p, from lane *from) may
// say about its publisher's lane, as route.PageObs's Signed and
// Unverified; solicited says whether it matched a pending request.
//
// Only a hop-0 page speaks for its publisher's lane, and only with a
// verifier (--pki) does either flag get set. A page whose publisher's key
// the verifier holds and that does not verify is unverified: it may not
// prove a lane. A signature is checked only for a page that answers a
// request the relay sent (solicited: the pending entry it takes was made
// by a forwarded request, so one check per forwarded request) to that
// lane as the publisher's own (route.Table.Provable: not a sponsor's lane,
// from which a hop-0 page is never honest, and not the publisher's fresh
// direct lane, whose standing an answer merely renews), only for a
// message's first page carrying a signature (the only page that carries
// one), and only within sigBudget: per lane SigChecksPerLane a second,
// SigChecksPerSecond in all. So an attacker makes the relay spend at most
// one check per request it gets forwarded to a lane it answers from and
// the page it answers with (half a check per datagram), at most
// SigChecksPerLane a second per lane on a route, and at most
// SigChecksPerSecond in all (about 7 % of a core at 70 µs a check). An
// unsolicited page (a late copy) is never checked: with the key at hand it
// is unverified. A comet's key comes with its signature (an attestation
// the verifier learns in Signed), so a comet the verifier does not know
// yet is checked the same way and, verified, counts as signed; failing,
// it is not unverified (no key was held). b is as it came: the check runs
// before any next-hop edit.
func (r *Relay) pageAuthority(b []byte, p *scry.Packet, from *lane.Key, now time.Duration, solicited bool, out *Reader) (signed, unverified bool) {
	if r.pki == nil || p.Header.Hops != 0 {
		return false, false
	}
	publisher := p.Name.Ship
	known := r.pki.Knows(publisher)
	signs := p.Name.Init && p.Data.AuthKind == scry.AuthSign
	if !known && !(signs && publisher.Class() == lane.Comet) {
		return false, false
	}
	// Unverified, unless the page is the fresh direct lane's (or from a
	// lane no request went to, which Provable also refuses):
	// route.PageObs.mayProve lets the direct lane renew itself, and
	// nothing from elsewhere is credited either way.
	if !solicited || !signs {
		return false, known
	}
	lockTaken()
	if !r.routes.Provable(publisher, *from, now) {
		return false, known
	}
	if !r.sigs.take(*from, now) {
		out.c.add(EventSignatureChecksRefused, 1)
		return false, known
	}
	out.c.add(EventSignatureChecks, 1)
	if r.pageSigned(b, publisher) {
		return true, false
	}
	return false, known
}

// sigBudget bounds the signature checks pageAuthority makes: a generic
// cell rate (GCRA) per lane, by seeded hash of the lane into
// sigLaneSlots slots, SigChecksPerLane a second with a burst of
// SigLaneBurst, and one for the relay, SigChecksPerSecond with a burst of
// as many. A check is taken from both or from neither. Checks are rare
// (a page that would change a route), so one mutex serves.
type sigBudget struct {
	seed uint64 // static

	mu     sync.Mutex
	global time.Duration               // guarded by mu; the global cell's theoretical arrival time
	lanes  [sigLaneSlots]time.Duration // guarded by mu; each slot's
}

// sigLaneSlots is how many per-lane cells sigBudget keeps (8 KiB): lanes
// that collide share one lane's rate.
const sigLaneSlots = 1024

// gcraAllows reports whether a cell at tat (its theoretical arrival time)
// with interval iv and burst n may take one at now, and the new tat.
func gcraAllows(tat, now, iv time.Duration, n int) (time.Duration, bool) {
	t := max(tat, now)
	if t-now > time.Duration(n-1)*iv {
		return tat, false
	}
	return t + iv, true
}

// take takes one check for lane k at now from the lane's cell and the
// relay's, reporting whether both had one.
func (b *sigBudget) take(k lane.Key, now time.Duration) bool {
	i := hash16(b.seed^uint64(k.Port)<<32, k.IP) % sigLaneSlots
	b.mu.Lock()
	lockTaken()
	defer b.mu.Unlock()
	lt, ok := gcraAllows(b.lanes[i], now, time.Second/SigChecksPerLane, SigLaneBurst)
	if !ok {
		return false
	}
	gt, ok := gcraAllows(b.global, now, time.Second/SigChecksPerSecond, SigChecksPerSecond)
	if !ok {
		return false
	}
	b.lanes[i], b.global = lt, gt
	return true
}
