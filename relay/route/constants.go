package route

import "time"

// Every timing and cap of the route table, with its reason. cmd/relay
// exposes the operator's ones as config keys (routes.max-routes, routes.direct-lane-expiry).

const (
	// DefaultMaxRoutes caps the ships the relay keeps routing state for
	// (learned direct lanes, challengers and next-hop candidates). A galaxy
	// fronts tens of thousands of active ships; 1<<18 routes at RouteBytes
	// each stay under 144 MiB (TestRouteMemoryBound measures 538 bytes a
	// route, 484 before the KeepAlive index). Past the cap the least recently used route is dropped: a
	// dropped route costs one round trip up the sponsorship chain, never
	// correctness. One source address creates at most
	// 1/DefaultRouteSourceDivisor of them.
	DefaultMaxRoutes = 1 << 18

	// RouteBytes bounds the memory one route costs the table (the route
	// record, the LRU's entry and map slot, and the KeepAlive index's
	// entries for its lanes): the table's memory is at most
	// MaxRoutes*RouteBytes plus the lane clock (LaneClockSlots*16 bytes)
	// and the per-source counters (SourceSlots*4 bytes). Tested by
	// TestRouteMemoryBound.
	RouteBytes = 576

	// DefaultDirectLaneExpiry is how long a lane learned from a hop-0 packet
	// stays usable without being heard from again. Ships ping their sponsor
	// every 25 s to keep NAT pinholes open, so a sponsee that talks keeps its
	// lane; 2 minutes allows four lost pings before we stop using a lane
	// whose NAT binding has probably gone.
	DefaultDirectLaneExpiry = 2 * time.Minute

	// DefaultProbeTimeout is how long a route that was sent a request may
	// stay unanswered before the request counts as a failure against it. It
	// is longer than any sane round trip through a relay chain (the seed's
	// measurements put the slow path near 270 ms one way), short enough that
	// a dead tight route is noticed within a few requests.
	DefaultProbeTimeout = 2 * time.Second

	// DefaultCandidateFailures is how many unanswered probes discard an
	// unproven candidate lane (typically one behind a firewall). Requests
	// keep going to the looser, known-good route meanwhile, so nothing is
	// lost; three probes tolerate some packet loss before giving up.
	DefaultCandidateFailures = 3

	// DefaultProvenFailures is how many unanswered probes demote a proven
	// route back to unproven, so that the looser route is used again beside
	// it (fall back when it stops answering). One unanswered probe is not
	// enough: the request itself may have been lost.
	DefaultProvenFailures = 2

	// DefaultBadLaneHold is how long a discarded candidate lane is not tried
	// again for the same ship. Every page through the looser route carries
	// the same next-hop hint; without a hold the dead lane would be re-tried
	// on every round trip.
	DefaultBadLaneHold = 2 * time.Minute

	// DefaultLaneClockSlots sizes a relay's record of when each lane was
	// last heard (laneClock): 64Ki slots of 16 bytes, 1 MiB. A lane whose
	// slot another lane took looks silent, which costs only what every
	// lane cost before liveness was judged by hearing: its unanswered
	// probes count. A galaxy's relay talks to tens of thousands of lanes.
	DefaultLaneClockSlots = 1 << 16

	// EndpointLaneClockSlots sizes an endpoint's lane clock: an endpoint
	// talks to a handful of lanes, and the simulator runs 100,000 of
	// them (1 KiB each).
	EndpointLaneClockSlots = 64

	// MaxTargets is the most lanes one request is sent to: the tightest
	// untried route and the tightest known-good one.
	MaxTargets = 2

	// routeFreeListCap is how many evicted route records the route table
	// keeps for reuse (Table.free): enough to absorb a burst of
	// evictions without allocating, few enough that a table which shrank
	// does not hoard them.
	routeFreeListCap = 64
)

// The rules that keep the wire from steering the table (see Table).
const (
	// DefaultFailedHintHold is how long, after a next-hop hint proved dead,
	// a ship's route takes no new hint. A hint is tried one probe at a
	// time and dropped after DefaultCandidateFailures, so a hint pointed at
	// a third party (its port rotated to dodge the bad-lane hold) costs
	// that party at most 3 requests per 30 s per ship, where an honest
	// route retries tightening after half a minute.
	DefaultFailedHintHold = 30 * time.Second

	// DefaultChallengerHold is how long a challenger (a new lane heard for
	// a ship whose direct lane works) keeps its place against a newer one
	// without being heard: first come, so that a stream of spoofed lanes
	// cannot push out a genuine newcomer, and a challenger that went quiet
	// frees its place after half a minute.
	DefaultChallengerHold = 30 * time.Second

	// DefaultMoveSilence is how long a ship's direct lane must have been
	// silent (nothing heard from it) before a proven challenger replaces
	// it. Ships ping their sponsor every 25 s, so a ship still at its old
	// lane is heard within it and keeps its route however often others
	// claim to be it; a ship that moved is followed after 40 s (and its
	// traffic reaches it beside the old lane meanwhile).
	DefaultMoveSilence = 40 * time.Second

	// DefaultRouteSourceDivisor caps the routes created on behalf of one
	// source address (an IPv4 address, an IPv6 /56) at
	// MaxRoutes/DefaultRouteSourceDivisor, so that one source naming
	// millions of ships cannot evict every other ship's route (it evicts
	// at most a sixteenth of the table, its own first once it is at its
	// cap). A NAT hiding many ships shares one share.
	DefaultRouteSourceDivisor = 16

	// RouteSourceIPv6Bits is the IPv6 prefix one source's route share is
	// counted by: a /56, the network the amplification budget counts by
	// (amp.DefaultNet6Bits), what ISPs commonly give one customer.
	// Counted by /64, one customer's 256 /64s took 256 shares: 17 of them
	// filled a 4,096-route table (issue 21).
	RouteSourceIPv6Bits = 56

	// DefaultRouteSourceSlots is how many per-source route counters are
	// kept, by seeded hash of the address (4 bytes each: 16 KiB); sources
	// sharing a slot share a cap.
	DefaultRouteSourceSlots = 4096

	// ChallengerFailures is how many unanswered probes lose a claimed
	// challenger its slot: one. A claim costs nothing to make (a socket
	// that never reads, or a forged source, can send it), so the slot is
	// held only by answering: a claimant is probed at the next request for
	// the ship and, silent for ProbeTimeout, gives the slot back and may
	// not claim it again for BadLaneHold (Table.held). An honest lane whose
	// one probe was lost claims again after BadLaneHold, by when its old
	// lane has expired if the ship really moved.
	ChallengerFailures = 1

	// HeldSlotsDivisor sizes the record of lanes held out of challenger
	// slots (Table.held) at LaneClockSlots/HeldSlotsDivisor entries of 16
	// bytes (64 KiB for a relay), at least MinHeldSlots (16 KiB, made at
	// the first hold, so an endpoint that never sees a challenger fail
	// pays nothing): one entry per lane that failed a probe within
	// BadLaneHold, in sets of HeldWays (holdRecord). A hold is forgotten
	// only when more than HeldWays lanes of one set lose within
	// BadLaneHold; the lane forgotten may then claim once more (one
	// probe).
	HeldSlotsDivisor = 16
	MinHeldSlots     = 1024
	// HeldWays is the held record's entries a set: four, as the
	// amplification budget's proof table (with one, two squatter lanes
	// sharing a slot forgot each other's hold at every loss and held the
	// slot in turns indefinitely).
	HeldWays = 4

	// MaxPins is how many ships' pins (Pin: the fronted ship's word) a
	// table holds: pins do not expire, so past it the least recently
	// pinned is unpinned (and routed as any ship, or through the ship,
	// again). 65,536 of about 60 bytes, 4 MiB at most: a galaxy's stars
	// and a star's planets fit. relay/vouch.go keeps its evidence for as
	// many ships (relay.VouchMaxShips) and unpins the ship whose evidence
	// it evicts, so this cap is the table's own bound, reached only by
	// another caller of Pin.
	MaxPins = 1 << 16
)
