package relay

import (
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
// a page would change publisher's route, never for every datagram.
//
// It is called by pageAuthority only.
func (r *Relay) pageSigned(pkt []byte, publisher lane.Ship) bool {
	return r.pki != nil && r.pki.Signed(pkt, publisher)
}

// pageAuthority returns what page b (parsed as p, from lane from) may
// say about its publisher's lane, as route.PageObs's Signed and
// Unverified. Only a hop-0 page speaks for its publisher's lane, and only
// when it could change the route (route.Table.Provable: from is a lane a
// request went to, and not the publisher's fresh direct lane, whose
// standing an answer merely renews) is it looked at, so that pages from
// anywhere else cost no signature check; then, with a
// verifier that holds the publisher's key, a message's first page
// carrying a signature (the only page that carries one) is checked
// (signed), and any page that is not so verified is unverified: it may
// not prove the lane. b is as it came: the check runs before any
// next-hop edit.
func (r *Relay) pageAuthority(b []byte, p *scry.Packet, from lane.Key, now time.Duration) (signed, unverified bool) {
	if r.pki == nil || p.Header.Hops != 0 || !r.pki.Knows(p.Name.Ship) {
		return false, false
	}
	if !r.routes.Provable(p.Name.Ship, from, now) {
		return false, false
	}
	if p.Name.Init && p.Data.AuthKind == scry.AuthSign && r.pageSigned(b, p.Name.Ship) {
		return true, false
	}
	return false, true
}
