package relay

import (
	"time"

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
const (
	// DefaultAmpFactor lets a requester receive 8 bytes of pages per
	// byte of requests: a typical 60-100 byte peek then earns a 500-800
	// byte page, and Rate covers the rest of an honest requester's pages.
	DefaultAmpFactor = 8
	// DefaultAmpRate is 256 KiB/s per address regardless of requests:
	// about 180 full pages a second, ample for a requester whose route
	// will tighten past the relay within a few round trips, and for a
	// downstream relay at moderate load.
	DefaultAmpRate = 256 << 10
	// DefaultAmpBurst banks up to 512 KiB, about 350 full pages.
	DefaultAmpBurst = 512 << 10
	// DefaultAmpInitial is three full pages.
	DefaultAmpInitial = 3 * scry.MesaMaxPacket
	// DefaultAmpSlots tracks 64Ki addresses in 2 MiB (32 bytes a slot).
	DefaultAmpSlots = 1 << 16

	// ampStripes is how many locks guard the slots, a power of two. Every
	// received request credits its sender and every page sent spends from
	// its receiver's budget, so with one lock the relay's readers, one per
	// socket, serialise on it. A slot's stripe is the high bits of its
	// index (the seeded hash of the address), so stripe i guards slots
	// [i*Slots/ampStripes, (i+1)*Slots/ampStripes): Slots/ampStripes
	// addresses each (1,024 with the default Slots; one each, and some
	// stripes unused, if Slots is smaller), Slots in all, the same bound
	// as one lock. Striping changes which lock guards a slot, not which
	// slot an address gets, so eviction is unchanged. 64 stripes put two
	// readers on one lock about one call in 64, for 4.5 KiB of locks,
	// each on its own cache line.
	ampStripes = 64

	// DefaultAmpNetFactor lets a network (DefaultAmpNet4Bits,
	// DefaultAmpNet6Bits) receive 8 bytes of answers per byte of
	// requests heard from any of its addresses, with no time-based rate:
	// the ratio every attack is held to, whatever its rate and however it
	// is spread over the network's addresses (AmpConfig). Under 10, the
	// most the project allows; as the per-address Factor.
	DefaultAmpNetFactor = 8
	// DefaultAmpNetBurst banks up to 512 KiB a network, as Burst.
	DefaultAmpNetBurst = DefaultAmpBurst
	// DefaultAmpNetInitial is 16 full pages, granted once to a network
	// the relay starts tracking: a new requester's first pages (a small
	// message, the first pages of a download before its route tightens
	// past the relay) are not held to NetFactor. It is the whole of what
	// an attacker gains beyond NetFactor from one network.
	DefaultAmpNetInitial = 16 * scry.MesaMaxPacket
	// DefaultAmpNetSlots tracks 64Ki networks in 2 MiB (32 bytes a slot).
	DefaultAmpNetSlots = 1 << 16
	// DefaultAmpNet4Bits: an IPv4 network is a /24, the smallest block
	// routed on the internet, and what one customer or one data-centre
	// rack is commonly given.
	DefaultAmpNet4Bits = 24
	// DefaultAmpNet6Bits: an IPv6 network is a /56, what ISPs commonly
	// delegate to one customer (RIPE-690), so one victim's addresses
	// share a budget and an attacker cannot spread over its 2^72 of them.
	DefaultAmpNet6Bits = 56

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
	// device in front mode); --batch 1024 makes it 64 MiB a reader. The
	// memory is allocated once; only the bytes a datagram fills are
	// touched.
	ReadBufferSize = MaxLegacyPacket + 1

	// DefaultDupWindow is how long a forwarded legacy packet is
	// remembered (DupConfig). Two seconds outlast any loop's lap between
	// relays on the internet by far; what they cost is that a sender's
	// retransmission of the same bytes through the relay within them is
	// dropped (ames backs off and retransmits again).
	DefaultDupWindow = 2 * time.Second

	// DefaultDupSlots remembers 64Ki forwarded packets in 1 MiB: 32,768
	// legacy forwards a second for DefaultDupWindow before the filter
	// forgets early (which lets a loop live only as long as the relay
	// forwards more than that).
	DefaultDupSlots = 1 << 16

	// dupWays is the size of one set of the duplicate filter: 4
	// fingerprints and their times, 64 bytes, one cache line.
	dupWays = 4
)
