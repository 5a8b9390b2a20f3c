package relay

import "github.com/urbit-relay/relay/lane"

// PageVerifier checks the publisher's signature on a mesa page.
// *pki.Verifier is one; a nil *pki.Verifier in the interface answers false.
type PageVerifier interface {
	// Signed reports whether pkt is a message's first page, published by
	// publisher (the ship its name names) and signed with the key the
	// verifier holds for publisher. It must be safe for concurrent use and
	// must not keep pkt.
	Signed(pkt []byte, publisher lane.Ship) bool
}

// pageSigned reports whether pkt, a page, was signed by publisher: the
// evidence a page may give for a new lane of publisher's. False when no
// verifier is configured (Config.PKI). A check costs an ed25519
// verification and a BLAKE3 root, 65-80 µs in all on the 2-core EPYC
// BenchmarkVerify ran on (relay/pki), some 90 times the relay's whole
// decision for a datagram (750-900 ns in BENCHMARKS.md), so it is for where
// a page would change publisher's route, never for every datagram.
//
// Where it goes (not called yet): in page, for a solicited page not from
// the fronted ship (the !fromShip case, beside routes.PageArrived), only
// when the page's lane is not already publisher's known-good one, and
// only for a first page (p.Name.Init && p.Data.AuthKind ==
// scry.AuthSign, a test that saves the parse for every other page); its
// answer is the route table's "signature verified" observation. Call it on
// b as it came, before scrubNextHop or a next-hop edit rewrites it: the
// signature does not cover the next-hop, but Signed parses b, and Parse
// checks the mug.
func (r *Relay) pageSigned(pkt []byte, publisher lane.Ship) bool {
	return r.pki != nil && r.pki.Signed(pkt, publisher)
}
