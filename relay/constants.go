package relay

import (
	"time"

	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/scry"
)

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
	MaxHops = scry.MesaMaxHops

	// DefaultPendingSourceDivisor is the pending table's default
	// per-source cap, MaxEntries/10 (pit.DefaultSourceDivisor, which says
	// why).
	DefaultPendingSourceDivisor = pit.DefaultSourceDivisor

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
	// per lane, the last hop-0 poke handed to the ship (its sender, its
	// name, whether the ship acked it), so that the ship's ack on that lane
	// vouches for the sender (vouch.go). 4096 slots of 56 bytes: a galaxy's
	// pings over PingAnswerWindow fit many times over; a collision only
	// forgets one ping.
	PingTableSlots = 4096

	// PingAnswerWindow is how soon after a ping the ship's ack on its lane
	// counts as vouching for the pinging ship: vere acks at once, and a
	// second covers a slow event loop. It is also how close together two
	// acks of one name to two lanes count as one contested ack.
	PingAnswerWindow = time.Second

	// VouchMaxShips is how many sponsees' vouched lanes the fronted ship's
	// table holds (vouch.go; fronting mode): pins do not expire, so past it
	// the least recently vouched sponsee is unpinned (and routed as any
	// ship, or through the ship, again). 65,536 of about 150 bytes, 10 MiB
	// at most: a galaxy's stars and a star's planets fit. Only an ack or a
	// forward from the ship adds one; a sponsee whose pin is evicted is
	// reached through the ship, whose next forward to it pins it again.
	VouchMaxShips = 1 << 16

	// VouchAckNames is how many of a sponsee's acked ping names its vouch
	// remembers, so that an ack of one of them to another lane (arvo acks a
	// replayed message again, up to 10 behind the last it acked: ames.hoon
	// +sink:fo-call) moves nothing (vouch.go). 16 covers a ping flow's 11
	// with room for a few other pokes; 128 bytes a sponsee, 8 MiB at
	// VouchMaxShips.
	VouchAckNames = 16

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

	// MaxPacket is the size of the buffers the relay builds datagrams in
	// (Out's scratch buffers: a page's second variant, a STUN answer):
	// mesa packets are at most scry.MesaMaxPacket bytes, and 128 more
	// leave room. The server reads into larger buffers (ReadBufferSize),
	// since legacy ames packets can be as long as a UDP datagram.
	MaxPacket = scry.MesaMaxPacket + 128

	// readWarnInterval is the least time between two warnings of failed
	// reads from one reader: a socket failing on every call logs once a
	// second, not once a read.
	readWarnInterval = time.Second

	// cacheLine is the cache line size the counters are padded to
	// (counterBlock), so that readers on different cores never write the
	// same line: 64 bytes on amd64 and most arm64 cores.
	cacheLine = 64
)

// Amplification budget defaults and caps (AmpConfig, amp.go).
//
// The budget is absolute (bytes a second to an address and to its network)
// and sized above honest peaks, measured through the relay with defaults
// (relay/honest_test.go, docs/reliability.md "What honest users get"):
//   - one requester fetching a 2,000-fragment message of 1.4 KB pages with
//     a window of 32 asks for 2.8 MB within about 0.1 s: under Burst;
//   - 20 requesters of one /24 fetching 200 such fragments each at once
//     ask 5.6 MB into their network: under NetBurst;
//   - 200 ships behind one carrier-grade NAT fetching 5 pages each: 1.4 MB
//     to one address, under Burst;
//   - a one-way legacy ames transfer of 1 KB fragments at 500 a second is
//     500 KB/s to one lane: under Rate.
//
// A lane whose traffic outgrows them for long is a live ship's, and every
// vere ship answers the relay's STUN probe (AmpConfig), after which it is
// not budgeted at all.
const (
	// DefaultAmpRate is 1 MiB a second to one address (about 700 full
	// pages a second): twice the legacy transfer above, and what the
	// heaviest honest lane takes for the one round trip before its
	// probe's answer exempts it.
	DefaultAmpRate = 1 << 20
	// DefaultAmpBurst banks 8 MiB an address (about 5,700 full pages):
	// nearly three times the 2,000-fragment download above at once.
	DefaultAmpBurst = 8 << 20
	// DefaultAmpSlots tracks 64Ki addresses in 3 MiB (48 bytes a slot).
	DefaultAmpSlots = 1 << 16

	// DefaultAmpNetRate is 2 MiB a second into one network
	// (DefaultAmpNet4Bits, DefaultAmpNet6Bits), whatever the spread over
	// its addresses: what bounds an attack spread over a /24.
	DefaultAmpNetRate = 2 << 20
	// DefaultAmpNetBurst banks 16 MiB a network: nearly three times the
	// 20-requester /24 above at once.
	DefaultAmpNetBurst = 16 << 20
	// DefaultAmpLightRate is 4 KiB a second (about 3 full pages) that
	// an address may take when its network's budget is empty, so that
	// the neighbour of a flooder in one /24 still gets its pages. An
	// attack spread over all 256 addresses of a /24 gains 256 of them:
	// 1 MiB a second more than NetRate.
	DefaultAmpLightRate = 4 << 10
	// DefaultAmpLightBurst banks 64 KiB (about 45 full pages) of light
	// allowance an address: a neighbour's 25 pages at once.
	DefaultAmpLightBurst = 64 << 10
	// DefaultAmpNetSlots tracks 64Ki networks in 3 MiB.
	DefaultAmpNetSlots = 1 << 16
	// DefaultAmpNet4Bits: an IPv4 network is a /24, the smallest block
	// routed on the internet, and what one customer or one data-centre
	// rack is commonly given.
	DefaultAmpNet4Bits = 24
	// DefaultAmpNet6Bits: an IPv6 network is a /56, what ISPs commonly
	// delegate to one customer (RIPE-690), so one victim's addresses
	// share a budget and an attacker cannot spread over its 2^72 of them.
	DefaultAmpNet6Bits = 56

	// MaxAmpRate bounds every rate of AmpConfig (1 GiB a second), so
	// that a bucket's refill cannot overflow its nanobyte count.
	MaxAmpRate = 1 << 30
	// MaxAmpBurst bounds every burst of AmpConfig (8 GiB): held in
	// nanobytes, it stays under 2^63.
	MaxAmpBurst = 8 << 30

	// DefaultProbeAfter: a lane is probed (a STUN binding request, which
	// every vere ship answers) once its address has been sent 256 KiB
	// below its full bucket, about 180 full pages: a small message or the
	// first pages of a download are never probed; a bulk download is,
	// after a fraction of a second, long before Burst runs out.
	DefaultProbeAfter = 256 << 10
	// DefaultProbeInterval is the least time between two probes of one
	// lane: one 28-byte datagram a second at most, for a lane sent at
	// least ProbeAfter bytes; a lost probe or answer is tried again after
	// it.
	DefaultProbeInterval = time.Second
	// ProbeAnswerWindow is how long after a probe its answer is taken:
	// vere answers a binding request at once, so the window only covers
	// the round trip.
	ProbeAnswerWindow = 5 * time.Second
	// DefaultProofLifetime is how long a lane that answered a probe is
	// exempt from the budget: two minutes, the relay's other lane
	// lifetimes' order; a busy lane is probed again in the last quarter
	// so that its proof does not lapse, and a NAT rebinding (a new lane)
	// needs a proof of its own.
	DefaultProofLifetime = 2 * time.Minute
	// DefaultProofSlots tracks 16Ki lanes being probed or proven in 1
	// MiB: only lanes sent ProbeAfter bytes, or refused (a page over
	// budget, a full pending entry's newcomer), are probed, so this is
	// the number of heavy or contending lanes at once, not of
	// requesters. A probe unanswered holds its slot for a ProbeInterval,
	// a proof for ProofLifetime; a lane has two slots to choose from
	// (amp.go's proofTable.ways).
	DefaultProofSlots = 1 << 14

	// ampStripes is how many locks guard each table's slots, a power of
	// two. Every page sent spends from its receiver's budget, so with one
	// lock the relay's readers, one per socket, serialise on it. A slot's
	// stripe is the high bits of its index (the seeded hash of the
	// address), so stripe i guards slots [i*Slots/ampStripes,
	// (i+1)*Slots/ampStripes); striping changes which lock guards a slot,
	// not which slot an address gets. 64 stripes put two readers on one
	// lock about one call in 64, for 4.5 KiB of locks, each on its own
	// cache line.
	ampStripes = 64

	// ampStripePad follows each stripe's lock so that neighbouring
	// stripes' locks do not share a cache line.
	ampStripePad = cacheLine
)

// Legacy ames: the read buffer and the duplicate filter (dupfilter.go).
const (
	// MaxLegacyPacket is the largest legacy ames datagram the relay reads
	// and forwards: the largest vere's drivers do. vere reads its socket
	// into 400,000-byte buffers (io/mesa.c, _mesa_alloc: the mesa driver
	// owns the socket and hands legacy datagrams to io/ames.c), checks no
	// length on the legacy path (io/ames.c, _ames_hear, _ames_try_forward)
	// and speaks IPv4 only (sockaddr_in), so what it takes is every IPv4
	// UDP payload: 65,535 bytes less the 20-byte IP and 8-byte UDP
	// headers. (io/ames.c's own 2,048-byte allocator, whose comment says
	// an ames packet is at most 1,060 bytes, is not used for reads.) One
	// needing an origin grows by 6 bytes, and then cannot be sent over
	// IPv4: vere fails the same send.
	MaxLegacyPacket = 65535 - 20 - 8

	// ReadBufferSize is the length of each batch slot's read buffer
	// (ServerConfig.ReadBuffer): one byte over MaxLegacyPacket, so that a
	// longer datagram is seen as one (DropTooLarge) on any Conn, even one
	// that cannot report truncation (transport.Message.Trunc). With
	// GrowRoom, 65,514 bytes a slot: 4.0 MiB for a reader of the default
	// 64-datagram batch, one reader per socket (and one for the ship's
	// device in front mode); an io.batch of 1024 makes it 64 MiB a reader. The
	// memory is allocated once; only the bytes a datagram fills are
	// touched.
	ReadBufferSize = MaxLegacyPacket + 1

	// DefaultDupWindow is how long a forwarded legacy packet is
	// remembered after its last forward (DupConfig). Two seconds outlast
	// any loop's lap between relays on the internet by far; what they cost
	// is that a copy of the packet from another lane within them is
	// dropped, and that a sender past DupMaxCopies waits out one window.
	DefaultDupWindow = 2 * time.Second

	// DefaultDupSlots remembers 64Ki forwarded packets in 1 MiB: 32,768
	// legacy forwards a second for DefaultDupWindow before the filter
	// forgets early (which lets a loop live only as long as the relay
	// forwards more than that).
	DefaultDupSlots = 1 << 16

	// SigChecksPerSecond bounds the page signature checks (--pki) the
	// relay makes in all, with a burst of as many: at 65-80 µs a check,
	// about 7 % of a core. Honest pages need a check only where a route
	// would change (a ship's first answer from a new lane), a handful a
	// second on a busy relay; past the bound a page is forwarded but
	// proves nothing (pagesig.go).
	SigChecksPerSecond = 1000

	// SigChecksPerLane bounds the checks for pages from one lane, with a
	// burst of SigLaneBurst: a lane answers as one ship, and a ship's new
	// lane needs one verified page to be proven, so an attacker's lane,
	// answering every request it is forwarded with a signed page, is held
	// to this while another lane's checks go on.
	SigChecksPerLane = 4
	SigLaneBurst     = 8

	// DupMinResend is the least gap between two copies of a legacy
	// packet from one lane that the duplicate filter takes for a
	// retransmission (DupConfig, rule 2) beyond ames's one fast re-send:
	// half of the 200 ms floor ames.hoon's +clamp-rto puts under every
	// timeout re-send, the other half for jitter that brings two copies
	// closer on the way. A loop that laps faster ends on its second lap.
	DupMinResend = 100 * time.Millisecond

	// DupMaxCopies is how many copies of one legacy packet from one lane
	// the duplicate filter forwards while its record lives (each forward
	// renews it for the window; DupConfig, rule 2): ames's doubling
	// re-sends from 200 ms fit six in the two-second window before a gap
	// outlasts it, so eight leave room for an rto that other acks pull
	// back once or twice, and a loop lapping slower than DupMinResend ends
	// within eight laps. At most dupCountMask.
	DupMaxCopies = 8

	// dupWays is the size of one set of the duplicate filter: 4
	// fingerprints and their times, 64 bytes, one cache line.
	dupWays = 4
)
