package amp

import "time"

// Amplification budget defaults and caps (Config).
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
// vere ship answers the relay's STUN probe (the package comment), after which it is
// not budgeted at all.
const (
	// DefaultRate is 1 MiB a second to one address (about 700 full
	// pages a second): twice the legacy transfer above, and what the
	// heaviest honest lane takes for the one round trip before its
	// probe's answer exempts it.
	DefaultRate = 1 << 20
	// DefaultBurst banks 8 MiB an address (about 5,700 full pages):
	// nearly three times the 2,000-fragment download above at once.
	DefaultBurst = 8 << 20
	// DefaultSlots tracks 64Ki addresses in 3 MiB (48 bytes a slot).
	DefaultSlots = 1 << 16

	// DefaultNetRate is 2 MiB a second into one network
	// (DefaultNet4Bits, DefaultNet6Bits), whatever the spread over
	// its addresses: what bounds an attack spread over a /24.
	DefaultNetRate = 2 << 20
	// DefaultNetBurst banks 16 MiB a network: nearly three times the
	// 20-requester /24 above at once.
	DefaultNetBurst = 16 << 20
	// DefaultLightRate is 4 KiB a second (about 3 full pages) that
	// an address may take when its network's budget is empty, so that
	// the neighbour of a flooder in one /24 still gets its pages. An
	// attack spread over all 256 addresses of a /24 gains 256 of them:
	// 1 MiB a second more than NetRate.
	DefaultLightRate = 4 << 10
	// DefaultLightBurst banks 64 KiB (about 45 full pages) of light
	// allowance an address: a neighbour's 25 pages at once.
	DefaultLightBurst = 64 << 10
	// DefaultNetSlots tracks 64Ki networks in 3 MiB.
	DefaultNetSlots = 1 << 16
	// DefaultNet4Bits: an IPv4 network is a /24, the smallest block
	// routed on the internet, and what one customer or one data-centre
	// rack is commonly given.
	DefaultNet4Bits = 24
	// DefaultNet6Bits: an IPv6 network is a /56, what ISPs commonly
	// delegate to one customer (RIPE-690), so one victim's addresses
	// share a budget and an attacker cannot spread over its 2^72 of them.
	DefaultNet6Bits = 56

	// MaxRate bounds every rate of Config (1 GiB a second), so
	// that a bucket's refill cannot overflow its nanobyte count.
	MaxRate = 1 << 30
	// MaxBurst bounds every burst of Config (8 GiB): held in
	// nanobytes, it stays under 2^63.
	MaxBurst = 8 << 30

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
	// (proofTable.ways).
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

	// cacheLine is the cache line size the stripes' locks are padded to:
	// 64 bytes on amd64 and most arm64 cores.
	cacheLine = 64

	// v4MappedLo is the low half's bottom 32 bits (bytes 8-11, two
	// zeros then ff ff, as hash16 reads them) of an IPv4-mapped address
	// (::ffff:0:0/96, RFC 4291 2.5.5.2), whose high half is zero: what
	// lane.Key.Is4 checks, read as two words.
	v4MappedLo = 0xffff0000
)
