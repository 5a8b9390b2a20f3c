// Package sim is a discrete-event simulation of an Urbit network that runs the
// project's real decision code: every relay is a relay.Relay (relay.New,
// Relay.Handle) and every ship an endpoint.Core, exchanging real mesa
// datagrams in virtual time. Nothing is sent on a real network; lanes are
// synthetic netip.AddrPort values used only as identifiers.
//
// # Time and determinism
//
// One goroutine pops events from a priority queue ordered by (time, tie,
// sequence): datagram deliveries, endpoint timer wake-ups (at
// Core.NextDeadline) and callbacks scheduled by experiments. A run is a
// function of its Config and the calls made on the Network: the latency,
// jitter and loss of a datagram are drawn from a hash of the seed, the two
// lanes, the send time and the bytes, so they do not depend on the order in
// which a core happens to emit its datagrams (Core.Tick walks a Go map);
// ties in time are broken by the same hash.
//
// # Nodes
//
// A ship without a relay is one node: an endpoint.Core on a public lane,
// possibly behind a NAT. A ship that runs a relay (a galaxy, a star, or a
// planet that sponsors moons, depending on the Strategy) is two nodes on one
// host: a relay.Relay on the ship's public lane and the ship's own
// endpoint.Core behind it on a private lane (relay.Config.ShipLane). The link
// between them is loopback (LoopbackLatency, no loss) and not counted as
// network traffic. Everything the hosted core sends goes to its relay, which
// routes it (the relay owns the ship's public port); identical datagrams the
// core emits in one batch (a dual send) are handed over once.
//
// # Addresses
//
// Every host has a public IPv4 address of its own, in a /16 of its own
// while there are enough (hostAddrs): its relay, or its ship, listens on
// PublicPort; on a relay host the ship listens on ShipPort of the same
// address. What a relay keys by address or network (the amplification
// budget, the per-source shares) so sees one host each, as in production,
// and relays and endpoints take next-hops on the public internet only.
//
// # Links
//
// Each ship sits at a point of a unit torus and has an access delay (drawn
// once, exponential; a quarter as much for relay hosts, which are in data
// centres). The one-way latency of a link is
//
//	Mean × (AccessShare × (acc_a + acc_b)/E[acc_a + acc_b] + (1 − AccessShare) × dist(a, b)/E[dist])
//
// times a per-datagram jitter of ±Jitter, so that the mean over random pairs
// of ships is Mean and latencies obey the triangle inequality up to access
// delays: a detour through a relay costs what it would on the Internet.
// Presets: Fast (65 ms mean, the seed's fastest-path figure over Mycelium)
// and Slow (267 ms, over Tor). Each datagram is lost with probability Loss.
//
// # NAT
//
// A fraction of planets and moons (NATFraction) sit behind a port-restricted
// NAT: a datagram reaches such a ship only from a lane the ship sent to
// within NATBindingTimeout (a pinhole). Ships ping their sponsor every
// endpoint.DefaultPingInterval (25 s), which keeps the sponsor's pinhole
// open. Rebind gives a ship a new public lane and closes its pinholes; a
// datagram in flight to the old lane is lost.
package sim
