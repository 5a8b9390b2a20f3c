package relay

import "time"

// Every timing and cap of the relay's decision core, with its reason. The
// route table's own (lane expiries, probe timeouts, the lane clock) live in
// package route. The
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

	// GrowRoom is the spare capacity a packet buffer handed to Handle must
	// have beyond its length: setting a page's next-hop adds 6 bytes, as does
	// inserting a legacy ames origin.
	GrowRoom = 6

	// MaxPacket is the largest datagram the relay reads. Mesa packets are at
	// most 1472 bytes (larger ones are dropped); legacy ames has no limit of
	// its own, but a UDP payload on an Ethernet path is at most this.
	MaxPacket = 1472 + 128
)
