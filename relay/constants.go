package relay

import "time"

// Every timing and cap of the relay's decision core, with its reason. The
// pending table's own caps (entries, requesters per entry, TTL, suppression
// window) live in package pit; Config repeats them so an operator sets them in
// one place. cmd/relay exposes each as a flag.

const (
	// MaxHops is the highest hop count the 3-bit mesa field holds. A request
	// that arrives with this many hops is dropped: it has crossed more relays
	// than any sponsorship chain has (comet/moon, planet, star, galaxy, plus a
	// requester-side relay), so it is looping between misconfigured relays
	// (urbit/urbit#2078, #3778).
	MaxHops = 7

	// DefaultMaxRoutes caps the ships the relay keeps routing state for
	// (learned direct lanes and next-hop candidates). A galaxy fronts tens of
	// thousands of ships; 1<<20 routes at about 200 bytes each stay under
	// 256 MiB. Past the cap the least recently used route is dropped: a
	// dropped route costs one round trip up the sponsorship chain, never
	// correctness.
	DefaultMaxRoutes = 1 << 20

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

	// DefaultPendingSourceDivisor sets the default per-source cap on pending
	// entries: MaxEntries/10. One source IP cannot hold more than a tenth of
	// the table, so a flood from one address (or one spoofed address) leaves
	// room for everyone else, while a downstream relay that aggregates many
	// ships behind one address still gets a large share.
	DefaultPendingSourceDivisor = 10

	// DefaultExpiryInterval is how often the relay loop advances the pending
	// table's timer wheel and its other timers.
	DefaultExpiryInterval = 100 * time.Millisecond

	// PrefetchMinPending is the pending-table size from which the server
	// prefetches each batch's table slots before deciding the batch
	// (Relay.Prefetch). Below it the table's index fits in a core's L2
	// cache (about 7 bytes of index per entry) and the extra look at each
	// datagram's name costs more than it saves; above it, each new name
	// is a cache miss, and prefetching lets a batch's misses overlap.
	PrefetchMinPending = 1 << 16

	// readErrorPause is how long a reader waits after a failed read (not
	// a closed socket), so that an error returned at once on every call
	// cannot spin a core.
	readErrorPause = time.Millisecond

	// DefaultVouchedLaneExpiry is how long a lane the fronted ship itself
	// sent a sponsee's traffic to (Routes.Vouch) stays usable without the
	// ship using it again. vere keeps a sponsee's lane for as long as it
	// has no newer one, and a ship whose STUN works pings its sponsor
	// rarely, so this is long: half an hour of the ship never once sending
	// to the lane. A stale vouched lane costs little: the ship still gets
	// every request the relay cannot route, and forwards it itself.
	DefaultVouchedLaneExpiry = 30 * time.Minute

	// PingTableSlots is the size of the front-mode table that remembers,
	// per lane, the sender of the last hop-0 poke handed to the ship, so
	// that the ship's answer on that lane vouches for it. 4096 slots of
	// 48 bytes: a galaxy's pings over PingAnswerWindow fit many times over;
	// a collision only forgets one ping.
	PingTableSlots = 4096

	// PingAnswerWindow is how soon after a ping the ship's answer on its
	// lane counts as vouching for the pinging ship: vere acks at once, and
	// a second covers a slow event loop.
	PingAnswerWindow = time.Second

	// ShipSTUNSlots is how many of the fronted ship's STUN transactions are
	// remembered (front mode), so that only responses to them reach it;
	// vere's client has one in flight at a time.
	ShipSTUNSlots = 16

	// ShipSTUNWindow is how long a STUN response to the ship is accepted
	// after its request: vere's client waits this long at most.
	ShipSTUNWindow = 40 * time.Second

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

	// GrowRoom is the spare capacity a packet buffer handed to Handle must
	// have beyond its length: setting a page's next-hop adds 6 bytes, as does
	// inserting a legacy ames origin.
	GrowRoom = 6

	// MaxPacket is the largest datagram the relay reads. Mesa packets are at
	// most 1472 bytes (larger ones are dropped); legacy ames has no limit of
	// its own, but a UDP payload on an Ethernet path is at most this.
	MaxPacket = 1472 + 128

	// cacheLine is the cache line size the counters are padded to
	// (counterBlock), so that readers on different cores never write the
	// same line: 64 bytes on amd64 and most arm64 cores.
	cacheLine = 64
)
