package relay

import (
	"time"

	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/route"
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

	// laneMemoSlots is how many lanes a Reader remembers as found free by
	// the budget (proven, no renewal due: amp.Budget.SpendFree), until
	// their renewal falls due, and as recorded by the lane clock, for the
	// instant it decides at: further pages to the first, and a batch's
	// further datagrams from the second, skip that table's look.
	// Direct-mapped by a byte of the lane, one compare a look: lanes beyond
	// it, or sharing a slot, are looked up as before. Not a cap: nothing
	// is refused for it.
	laneMemoSlots = 16

	// PrefetchMinIndexSlots is the pending table's index size
	// (pit.Table.IndexSlots, 4 bytes a slot) from which the server
	// prefetches each batch's table slots before deciding the batch
	// (Relay.Prefetch): 512 KiB. Below it the index fits in a core's L2
	// cache and the extra look at each datagram's name costs more than it
	// saves; above it, each new name is a cache miss, and prefetching lets
	// a batch's misses overlap. The index holds 4/3 to 8/3 slots an entry
	// and never shrinks, so this is reached at 49,152 to 98,304 entries,
	// and prefetching stays on once a table has been that big (its index,
	// sparse or not, is as big).
	PrefetchMinIndexSlots = 1 << 17

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

	// VouchMaxShips is how many sponsees' evidence (their pings, the
	// ship's acks) the vouch table holds (vouch.go): the route table's
	// pin cap, route.MaxPins, so that every pinned sponsee has its
	// evidence; past it the least recently vouched sponsee's evidence is
	// dropped and it is unpinned (and routed as any ship, or through the
	// ship, again). About 150 bytes a sponsee, 10 MiB at most: a galaxy's
	// stars and a star's planets fit. Only an ack or a forward from the
	// ship adds one; a sponsee unpinned so is reached through the ship,
	// whose next forward to it pins it again.
	VouchMaxShips = route.MaxPins

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
	// (a Reader's scratch buffers: a page's second variant, a STUN answer):
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

// The duplicate filter's and the signature budget's locks.
const (
	// lockStripes is how many locks guard the duplicate filter's sets, a
	// power of two: as the amplification budget's (relay/amp), 64, so that
	// two readers share a lock about one call in 64.
	lockStripes = 64

	// lockStripePad follows each stripe's lock so that neighbouring
	// stripes' locks do not share a cache line.
	lockStripePad = cacheLine
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
