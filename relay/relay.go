// Package relay is the heart of the project: the decision core of a UDP relay
// for Urbit's network, after UIP-0102 "symmetric routing" (shared/seeds/002).
//
// A relay fronts one ship (a galaxy, a star, or a planet that sponsors moons)
// on its public UDP port (one socket, or several with SO_REUSEPORT). For every datagram it reads it decides, as a function of
// (datagram, lane it came from, now), which datagrams to send to which lanes:
//
//   - A request (mesa peek or poke) for receiver R is sent on R's tightest
//     known-good route and, until it proves itself, on the route one step
//     tighter (see route.Table). Its hop count is bumped; a request at MaxHops, or
//     one whose only route leads back where it came from, is dropped. The
//     requester is recorded in the pending table under the request's name
//     (hashed with a per-process seed): repeats bump the entry, a repeat from
//     a new requester within the suppression window is aggregated.
//   - A response (mesa page) is sent only to the lanes in its pending entry,
//     which is then deleted: a page nobody asked for is dropped, so the relay
//     is not a reflector. For each requester the hop count is bumped and the
//     next-hop set to the lane the page came from, so the requester can skip
//     us next time; a requester that is one of our own sponsors gets the page
//     with no next-hop (the seed's rule against a galaxy fraternizing with
//     our sponsees).
//   - A legacy ames packet is forwarded statelessly toward its receiver, with
//     the origin lane inserted when the sender is not a galaxy and none is
//     present, as galaxies do today.
//   - Datagrams for the fronted ship itself go to its own process at
//     ShipLane, untouched; what that process sends through us is treated as
//     the fronted ship speaking (no hop is added, and its pages carry no
//     next-hop: we are its public lane).
//
// Lanes are learned from traffic: a hop-0 packet whose sender is known (a
// page's publisher, a poke's payload ship, a legacy packet's sender) gives
// that ship's direct lane; a solicited page's next-hop gives a candidate
// tighter lane for its publisher.
//
// Every decision is plan, then admit, then commit: the route table plans
// the lanes without changing anything (route.Table.PlanInto); the pending
// table (a request) or the amplification budget and the duplicate filter
// (a legacy forward) admit it or not; and only what is sent is committed
// to the route table (route.Table.Commit). Relay.request and Relay.ames
// show the three steps in order.
//
// Locks. Each table has its own: the route table one mutex, the pending
// table one per shard, the amplification budget (addresses, networks,
// proofs) and the duplicate filter one per stripe of slots, the proof
// table's generator one; the vouch table, the ship's STUN table and the
// signature budget one each; a *pki.Verifier one, for the comets it
// learns. Each of these is a leaf: no call holds one while it takes
// another (TestLockOrder checks this package's; the route and pending
// tables import neither each other nor this package, and call out under
// their locks to nothing but Table.Each's f: TestLockLeavesImport), so
// among them there is no order to keep. A decision is steps, each under
// one table's lock alone; what a step decides for another table is
// applied once its lock is released (a vouch's pin: vouch.go).
//
// Above the leaves is the server's batch lock (reader.batchMu, one per
// reader), held from a batch's first decision to its last send so that
// Close can wait out the batch in hand. Under it the leaves above are
// taken, one at a time, and so are the write locks of the socket
// (transport) and of the ship's device (relay/front), the capture
// writer's (ServerConfig.Tap) and the decision log's. Nothing is held
// when it is taken: the read that filled the batch (the socket's read
// lock) is over, and Close takes it before closing the socket. The order
// is thus: a batch lock, then any one leaf. Off the datagram path,
// relay/daemon's Lanes holds its lock while it calls SetLanes (which takes
// the route table's), and the timer goroutine's Expire takes the pending
// table's shards in turn, alone.
//
// Acquisitions per datagram (no --pki, no proof or probe in play):
//
//   - a forwarded request, 3: the route table (PlanInto), a pending shard
//     (Add: the admit), the route table (Commit, which records a poke's
//     sender too);
//   - a page to one requester, 4: a pending shard (Take), the route table
//     (PageArrived), the requester's address stripe and its network's
//     (spend); 2 more for each further requester, none for the ship. With
//     --pki a page that may prove a lane adds the route table (Provable),
//     the signature budget and, for a comet, the verifier's; an
//     unsolicited page takes a pending shard and the route table
//     (LateAnswer);
//   - a legacy forward, 6 to one learned lane, 8 to two: a duplicate-filter
//     stripe (looped), the route table (PlanInto), each target's address
//     and network stripes unless it is configured (trustedLane), the
//     duplicate-filter stripe (add), the route table (Commit); 4 to
//     configured lanes. A proven lane adds its proof stripe and its address
//     stripe again; a probe, the proof stripe twice and the generator's;
//   - a STUN request, 3: the route table (KeepAlive), the address and
//     network stripes; a STUN response, the ship's STUN table (fronting
//     mode) or the proof stripe and the address stripe (a probe's answer);
//   - a datagram handed to the ship: a pending shard (a request, at a
//     lane), the vouch table (a peek or ping), the route table (Contacted,
//     for a sender named at hop 0);
//   - the ship's own datagram (HandleFromShip): a pending shard (its
//     request); vouching, the vouch table once or twice and the route
//     table once per pin changed (Pin, and Unpin of an evicted sponsee);
//     to a lane not otherwise allowed, the vouch table (pinger) and the
//     route table (Plan). At a lane the ship's pages come by the public
//     socket: a pending shard (Take), the route table (AppendLanesOf),
//     then vouching as here.
//
// The route table alone holds the pins (Pin, RevertPin, with the lane each
// replaced); the vouch table holds only the evidence (pings, acks). A
// vouch decides under the vouch table's lock and applies its route
// operation after releasing it, so two readers vouching at once apply two
// operations in some order, with no second copy to disagree.
//
// The core holds only soft state: a restart loses pending entries and learned
// lanes, never correctness. Relay.Handle is safe for concurrent use, each
// goroutine with its own Out (Relay.NewOut, which also gives it counters of
// its own); the socket loop that calls it is in server.go.
package relay

import (
	"errors"
	"fmt"
	"github.com/urbit-relay/relay/relay/route"
	"net/netip"
	"slices"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

// Config is the decision core's configuration, built once (in cmd/relay) and
// validated by New.
type Config struct {
	// Ship is the fronted ship.
	Ship lane.Ship
	// ShipLane is where the fronted ship's own process listens; invalid
	// means datagrams for it are dropped (DropOwnShipNoLane).
	ShipLane netip.AddrPort
	// Self lists this relay's own public lanes, never used as targets.
	Self []netip.AddrPort
	// Galaxies are the configured galaxy lanes.
	Galaxies map[lane.Ship]netip.AddrPort
	// Pinned are operator-configured lanes of other ships (sponsees or
	// sponsors at fixed addresses). Like galaxy lanes they are always
	// considered known-good for reaching the ship itself; as a sponsor's
	// lane, a pinned lane is tried as a forwarder like a learned one.
	Pinned map[lane.Ship]netip.AddrPort
	// Relays are lanes of ships known to forward for the ships below them
	// (relays of ours in front of stars, say): known-good as sponsors from
	// the start. Stock vere forwards only as a galaxy; any other sponsor
	// must show it forwards before its lane is relied on.
	Relays map[lane.Ship]netip.AddrPort
	// Sponsors overrides default sponsorship (escaped ships); nil for none.
	// It must not be changed after New.
	Sponsors *lane.Sponsors
	// Pending configures the pending-request table (a zero
	// MaxEntriesPerSource is MaxEntries/pit.DefaultSourceDivisor, a
	// negative one no per-source cap).
	Pending pit.Config
	// Routes configures the route table.
	Routes route.Config
	// Amp bounds amplification (see AmpConfig); the zero value takes the
	// defaults.
	Amp AmpConfig
	// Dup sizes the legacy ames duplicate filter (see DupConfig); the
	// zero value takes the defaults.
	Dup DupConfig
	// Front is fronting mode (see ship.go): the ship's process is reached
	// through a device the relay owns (relay/front), datagrams for it carry
	// their true source (PortShip), and what it sends is decided by
	// HandleFromShip. ShipLane must then be set: it is the ship's lane on
	// that device, and its key in the pending table.
	Front bool
	// PublicLane is the relay's lane as the internet reaches it: what a
	// private next-hop or origin is rewritten to. Invalid means such hints
	// are removed (next-hops) or their datagrams dropped (origins).
	PublicLane netip.AddrPort
	// HintNets are networks besides the public internet (lane.PublicAddr)
	// that next-hops and origins may name and the ship may send to: an
	// operator's LAN, or loopback in tests. Nil: the public internet only.
	HintNets []netip.Prefix
	// Withheld returns, from the fronted ship's sponsorship chain (the
	// ship first), the sponsors that are never given a forwarder's lane
	// as a next-hop (bareFor: their pages go without one; the publisher's
	// own lane they are given, as anyone is). Read once, in New. Nil is
	// the seed's rule, SeedWithheld; the simulator passes its own to
	// compare strategies.
	Withheld func(chain []lane.Ship) []lane.Ship
	// PKI checks publishers' signatures on pages (a *pki.Verifier, from
	// --pki); nil: no page counts as signed (pagesig.go).
	PKI PageVerifier
}

// SeedWithheld is the seed's rule for Config.Withheld: every sponsor up
// the fronted ship's chain (chain[1:]) gets no next-hop from us, so that
// no sponsor fraternizes past its sponsee.
func SeedWithheld(chain []lane.Ship) []lane.Ship { return chain[1:] }

// Relay is the decision core. Create it with New.
type Relay struct {
	// Static after construction.
	ship     lane.Ship
	link     shipLink // how the fronted ship's process is reached (ship.go)
	sponsors *lane.Sponsors
	ourChain []lane.Ship // our sponsors, above the fronted ship
	hashSeed uint64
	pending  *pit.Table
	amp      *ampTable  // nil when the budget is disabled
	dups     *dupFilter // nil when the filter is disabled
	routes   *route.Table
	pki      PageVerifier // nil: none
	sigs     sigBudget    // the signature checks pageAuthority may make
	counters Counters
}

// Validate reports whether New would accept c, without building anything:
// the relay's own fields (the ship's lane, fronting, the galaxies' lanes)
// and, through their own Validate, the pending table's, the route table's,
// the amplification budget's and the duplicate filter's. A package's
// rejection is its typed ConfigError (pit, route, or this package's),
// naming the field and the value wanted.
func (c Config) Validate() error {
	if err := c.validateOwn(); err != nil {
		return err
	}
	if err := c.Pending.Validate(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if err := c.Routes.Validate(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if err := c.Amp.Validate(); err != nil {
		return err
	}
	return c.Dup.Validate()
}

// validateOwn checks the relay's own fields; New leaves the packages'
// to their constructors, which validate them.
func (c Config) validateOwn() error {
	if c.ShipLane.IsValid() && c.ShipLane.Port() == 0 {
		return errors.New("relay: ship lane has port 0")
	}
	if c.Front && !c.ShipLane.IsValid() {
		return errors.New("relay: fronting mode needs the ship's lane on its device")
	}
	for g, ap := range c.Galaxies {
		if g.Class() != lane.Galaxy {
			return fmt.Errorf("relay: %s is not a galaxy", g)
		}
		if !ap.IsValid() || ap.Port() == 0 {
			return fmt.Errorf("relay: galaxy %s has an invalid lane %v", g, ap)
		}
	}
	for s, ap := range c.Pinned {
		if !ap.IsValid() || ap.Port() == 0 {
			return fmt.Errorf("relay: pinned lane of %s is invalid: %v", s, ap)
		}
	}
	return nil
}

// New returns a relay core for cfg.
func New(cfg Config) (*Relay, error) {
	if err := cfg.validateOwn(); err != nil {
		return nil, err
	}
	pt, err := pit.New(cfg.Pending)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	if err := cfg.Amp.fill(); err != nil {
		return nil, err
	}
	amp, err := newAmpTable(cfg.Amp)
	if err != nil {
		return nil, err
	}
	if err := cfg.Dup.fill(); err != nil {
		return nil, err
	}
	dups, err := newDupFilter(cfg.Dup)
	if err != nil {
		return nil, err
	}
	if cfg.Routes.LaneClockSlots == 0 {
		cfg.Routes.LaneClockSlots = route.DefaultLaneClockSlots
	}
	// The operator's lanes outrank the wire's.
	cfg.Routes.ConfiguredWins = true
	// One rule for what a lane may be: the table's, with the relay's
	// declared networks.
	cfg.Routes.HintNets = slices.Clone(cfg.HintNets)
	rt, err := route.New(cfg.Ship, cfg.Sponsors, cfg.Routes)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	seed, err := randomSeed()
	if err != nil {
		return nil, err
	}
	r := &Relay{
		ship:     cfg.Ship,
		sponsors: cfg.Sponsors,
		hashSeed: seed,
		pending:  pt,
		amp:      amp,
		dups:     dups,
		routes:   rt,
		pki:      cfg.PKI,
	}
	r.sigs.seed = lane.Mix64(seed ^ 0x9e3779b97f4a7c15)
	r.link.init(cfg.ShipLane, cfg.Front, cfg.PublicLane)
	withheld := cfg.Withheld
	if withheld == nil {
		withheld = SeedWithheld
	}
	r.ourChain = withheld(r.sponsors.AppendChain(nil, cfg.Ship))
	r.SetLanes(cfg.Galaxies, cfg.Pinned)
	r.SetRelays(cfg.Relays)
	for _, s := range cfg.Self {
		rt.AddSelf(lane.KeyOf(lane.Canon(s)))
	}
	return r, nil
}

// SetLanes replaces the configured galaxy and pinned lanes (on SIGHUP, or
// when DNS answers change).
func (r *Relay) SetLanes(galaxies, pinned map[lane.Ship]netip.AddrPort) {
	m := make(map[lane.Ship]lane.Key, len(galaxies)+len(pinned)+1)
	for s, ap := range pinned {
		m[s] = lane.KeyOf(lane.Canon(ap))
	}
	for s, ap := range galaxies {
		m[s] = lane.KeyOf(lane.Canon(ap))
	}
	if r.link.present() {
		m[r.ship] = r.link.key
	}
	r.routes.SetStatic(m)
}

// SetRelays replaces the configured relays (Config.Relays).
func (r *Relay) SetRelays(relays map[lane.Ship]netip.AddrPort) {
	m := make(map[lane.Ship]lane.Key, len(relays))
	for s, ap := range relays {
		m[s] = lane.KeyOf(lane.Canon(ap))
	}
	r.routes.SetRelays(m)
}

// AddSelf records another lane of this process (for example the public
// address an operator configures, or a second socket).
func (r *Relay) AddSelf(ap netip.AddrPort) { r.routes.AddSelf(lane.KeyOf(lane.Canon(ap))) }

// AddListener records a socket of this process bound at ap: its lane is
// never a target. Bound at a wildcard address (0.0.0.0 or [::]), the socket
// is reached at every local address with its port: each of local (the
// host's interface addresses) and any loopback address is then a lane of
// this process, so a next-hop naming one cannot point the relay at itself.
func (r *Relay) AddListener(ap netip.AddrPort, local []netip.Addr) {
	if !ap.Addr().IsUnspecified() {
		r.AddSelf(ap)
		return
	}
	r.routes.AddSelfPort(ap.Port())
	for _, a := range local {
		r.AddSelf(netip.AddrPortFrom(a, ap.Port()))
	}
}

// ShipLane returns the fronted ship's lane (invalid when there is none).
func (r *Relay) ShipLane() netip.AddrPort { return r.link.lane }

// Routes returns the relay's route table.
func (r *Relay) Routes() *route.Table { return r.routes }

// Pending returns the relay's pending-request table.
func (r *Relay) Pending() *pit.Table { return r.pending }

// Counters returns the relay's counters.
func (r *Relay) Counters() *Counters { return &r.counters }

// Expire advances the pending table's timers to now; the loop calls it every
// DefaultExpiryInterval.
func (r *Relay) Expire(now time.Duration) { r.pending.Expire(now) }

// Port is where a decided datagram leaves the relay.
type Port uint8

const (
	// PortPublic: by the relay's public socket, Buf sent to Addr.
	PortPublic Port = iota
	// PortShip: into the fronted ship's device (fronting mode,
	// Config.Front), Buf handed to the ship as sent from Addr, the lane it
	// came from: the source the ship must see.
	PortShip
)

// Out collects the datagrams Handle decides to send, in decision order, as
// messages ready for a transport.Conn's WriteBatch: Sends[i] leaves by
// Ports[i] (Split gives them by port). In every message N is
// len(Buf). Buffers alias the datagram passed to Handle or Out's own
// scratch buffers, so they are valid until that datagram's buffer is
// reused or Reset is called. An Out belongs to one goroutine.
type Out struct {
	Sends []transport.Message
	Ports []Port // Ports[i] is where Sends[i] leaves
	// nShip counts the PortShip sends; public and ship are Split's
	// partitions, reused.
	nShip        int
	public, ship []transport.Message
	// scratch buffers for second variants of a page (to a sponsor).
	scratch [][]byte
	used    int
	reqs    []lane.Key
	held    pit.Held   // what page's TakeHeld took beyond reqs (issue 28)
	plan    route.Plan // Handle's route plan, reused
	d       Decision   // the decision in hand, or the last made

	// owner made o (Relay.NewOut) and counts o's decisions in own; c is
	// the block of the call in progress: own when the relay deciding is
	// owner, else that relay's shared default block.
	owner *Relay
	own   *counterBlock
	c     *counterBlock

	// Keys computed by Prefetch since Reset, in order; preNext is the
	// next to take. key is the current datagram's, when hasKey.
	pre     []prefetched
	preNext int
	key     uint64
	hasKey  bool

	// Mug prefixes MugBatch computed since Reset, in order; mugNext is the
	// next to take, mug the current datagram's (zero: none, hashed whole).
	mugs    []prefetchedMug
	mugNext int
	mug     scry.MugPrefix
	// mugBodies, mugNs and mugPre are MugBatch's scratch.
	mugBodies [][]byte
	mugNs     []int
	mugPre    []scry.MugPrefix
}

// prefetchedMug is the mug prefix MugBatch computed for the mesa body at
// data, n bytes long (the datagram's bytes after its header).
type prefetchedMug struct {
	data *byte
	n    int
	pre  scry.MugPrefix
}

// NewOut returns an Out sized for batches of up to batch input datagrams,
// for any relay: what a relay decides into it is counted in that relay's
// shared default counter block. A goroutine that decides many datagrams
// should use Relay.NewOut, whose counts no other goroutine writes.
func NewOut(batch int) *Out {
	o := &Out{
		Sends:     make([]transport.Message, 0, batch*route.MaxTargets),
		Ports:     make([]Port, 0, batch*route.MaxTargets),
		public:    make([]transport.Message, 0, batch*route.MaxTargets),
		ship:      make([]transport.Message, 0, batch),
		scratch:   make([][]byte, batch),
		pre:       make([]prefetched, 0, batch),
		mugs:      make([]prefetchedMug, 0, batch),
		mugBodies: make([][]byte, batch),
		mugNs:     make([]int, batch),
		mugPre:    make([]scry.MugPrefix, batch),
	}
	for i := range o.scratch {
		o.scratch[i] = make([]byte, 0, MaxPacket+GrowRoom)
	}
	return o
}

// NewOut returns an Out as the package-level NewOut does, with a counter
// block of its own registered with r: decisions r makes into it are
// counted there, uncontended, and summed into r's Snapshot. Each Out made
// keeps its block for r's lifetime, so make one per goroutine, not per
// batch.
func (r *Relay) NewOut(batch int) *Out {
	o := NewOut(batch)
	o.owner, o.own = r, r.counters.newBlock()
	return o
}

// bind points out's counts at r's block for it, for one Handle or
// HandleFromShip call.
func (r *Relay) bind(out *Out) {
	if out.owner == r {
		out.c = out.own
	} else {
		out.c = &r.counters.def
	}
}

// Reset empties o for the next batch.
func (o *Out) Reset() {
	o.Sends, o.Ports, o.nShip = o.Sends[:0], o.Ports[:0], 0
	o.public, o.ship = o.public[:0], o.ship[:0]
	o.pre, o.preNext = o.pre[:0], 0
	o.mugs, o.mugNext = o.mugs[:0], 0
	o.used = 0
}

// MugBatch hashes the mesa datagrams of a batch before they are decided,
// four bodies' MurmurHash3 chains interleaved (scry.MugPrefixes), each up
// to what Parse hashes before a page's next-hop (scry.MesaMugPrefixLen);
// Handle then resumes each datagram's mug check from its prefix
// (scry.Packet.ParseWithPrefix) instead of hashing it whole. A prefix is
// taken only for the very bytes it was computed from (the same buffer and
// length, in batch order), and bufs must not change between MugBatch and
// their Handle: the prefix is trusted. Other datagrams are hashed whole.
func (o *Out) MugBatch(bufs [][]byte) {
	if len(bufs) > len(o.mugBodies) {
		o.mugBodies = make([][]byte, len(bufs))
		o.mugNs = make([]int, len(bufs))
		o.mugPre = make([]scry.MugPrefix, len(bufs))
	}
	bodies := o.mugBodies[:len(bufs)]
	for i, b := range bufs {
		bodies[i], o.mugNs[i] = nil, 0
		if scry.IsMesa(b) && len(b) > scry.MesaHeaderLen {
			bodies[i], o.mugNs[i] = b[scry.MesaHeaderLen:], scry.MesaMugPrefixLen(b)
		}
	}
	scry.MugPrefixes(bodies, o.mugNs, o.mugPre)
	for i, body := range bodies {
		if body != nil {
			o.mugs = append(o.mugs, prefetchedMug{data: unsafe.SliceData(body), n: len(body), pre: o.mugPre[i]})
		}
		bodies[i] = nil
	}
}

// takeMug sets out's current mug prefix to the one MugBatch computed for
// b's body, scanning forward (a datagram dropped before its Handle is
// skipped); the zero prefix, hashed whole, when there is none.
func (out *Out) takeMug(b []byte) {
	out.mug = scry.MugPrefix{}
	if len(b) <= scry.MesaHeaderLen {
		return
	}
	body := b[scry.MesaHeaderLen:]
	for i := out.mugNext; i < len(out.mugs); i++ {
		if out.mugs[i].data == unsafe.SliceData(body) && out.mugs[i].n == len(body) {
			out.mug, out.mugNext = out.mugs[i].pre, i+1
			return
		}
	}
}

func (o *Out) add(b []byte, to netip.AddrPort) {
	o.Sends = append(o.Sends, transport.Message{Buf: b, N: len(b), Addr: to})
	o.Ports = append(o.Ports, PortPublic)
}

// addShip hands b to the fronted ship's device as sent from lane from.
func (o *Out) addShip(b []byte, from netip.AddrPort) {
	o.Sends = append(o.Sends, transport.Message{Buf: b, N: len(b), Addr: from})
	o.Ports = append(o.Ports, PortShip)
	o.nShip++
}

// Split returns o's sends by port, each in decision order: those for the
// public socket and those for the fronted ship's device. With none for the
// ship, public is Sends itself. Both alias o's buffers until Reset.
func (o *Out) Split() (public, ship []transport.Message) {
	if o.nShip == 0 {
		return o.Sends, nil
	}
	o.public, o.ship = o.public[:0], o.ship[:0]
	for i := range o.Sends {
		if o.Ports[i] == PortShip {
			o.ship = append(o.ship, o.Sends[i])
		} else {
			o.public = append(o.public, o.Sends[i])
		}
	}
	return o.public, o.ship
}

// scratchCopy returns a copy of b in a scratch buffer, growing the pool
// when every buffer is in use.
func (o *Out) scratchCopy(b []byte) []byte {
	if o.used == len(o.scratch) {
		o.scratch = append(o.scratch, make([]byte, 0, MaxPacket+GrowRoom))
	}
	s := append(o.scratch[o.used][:0], b...)
	o.scratch[o.used] = s[:0]
	o.used++
	return s
}

// Handle decides what to do with datagram b, heard from lane from at now,
// and appends the datagrams to send to out. It may rewrite b in place and
// grow it by up to GrowRoom bytes: cap(b) must be at least len(b)+GrowRoom.
// Every datagram is counted once in In and, unless forwarded or answered,
// once under a Drop reason.
//
// It returns what it decided (Decision), which stays valid until out
// decides another datagram or is Reset.
func (r *Relay) Handle(b []byte, from netip.AddrPort, now time.Duration, out *Out) *Decision {
	r.bind(out)
	out.takePrefetched(b)
	out.takeMug(b)
	from = lane.Canon(from)
	out.begin(false, from, len(b))
	r.handle(b, from, now, out)
	return out.finish()
}

// handle is Handle's decision, for a bound out with its decision begun.
func (r *Relay) handle(b []byte, from netip.AddrPort, now time.Duration, out *Out) {
	if scry.IsMesa(b) {
		var p scry.Packet
		if err := p.ParseWithPrefix(b, out.mug); err != nil {
			if err == scry.ErrMesaTooLarge {
				out.dropOther(b, DropTooLarge)
			} else {
				out.dropOther(b, DropMalformedMesa)
			}
			return
		}
		// A well-formed datagram shows its lane alive (route.Table.Arrived).
		r.routes.Arrived(lane.KeyOf(from), now)
		switch p.Header.Type {
		case scry.TypePeek:
			out.in(KindPeek, len(b))
			r.request(b, &p, KindPeek, from, now, out)
		case scry.TypePoke:
			out.in(KindPoke, len(b))
			r.request(b, &p, KindPoke, from, now, out)
		case scry.TypePage:
			out.in(KindPage, len(b))
			r.page(b, &p, from, now, out)
		default:
			out.dropOther(b, DropReservedType)
		}
		return
	}
	if scry.IsSTUN(b) {
		r.stun(b, from, now, out)
		return
	}
	if r.link.takesSTUN() || r.amp.probing() {
		var resp scry.STUNResponse
		if resp.Parse(b) == nil {
			// The answer to the ship's own STUN request (it STUNs its
			// galaxy through us): its XOR-MAPPED-ADDRESS is our public
			// lane, as the ship must learn.
			if r.link.takeSTUN(resp.TxID, now) {
				out.in(KindOther, len(b))
				r.toShip(b, KindOther, from, out)
				return
			}
			// The answer to the relay's own probe (AmpConfig): the lane
			// it came from is proven.
			if r.amp.answer(lane.KeyOf(from), resp.TxID, now) {
				out.in(KindSTUN, len(b))
				out.c.add(EventLanesProven, 1)
				out.act(ActionLaneProven)
				return
			}
		}
	}
	var a scry.AmesPacket
	if err := a.Parse(b); err != nil {
		out.dropOther(b, DropMalformedAmes)
		return
	}
	out.in(KindAmes, len(b))
	r.routes.Arrived(lane.KeyOf(from), now)
	r.ames(b, &a, from, now, out)
}

// Prefetch starts bringing into cache the pending-table slot Handle will
// look up for datagram b, if b is a mesa request or page, and returns at
// once. A server calls it for every datagram of a batch before handling
// the first, so that in a table too big for the cache the misses overlap.
// It changes nothing in the relay; Handle must still be called. The key
// it computes is kept in out until out's next Reset, and Handle (or
// HandleFromShip), given the same buffer unchanged and out, in the order
// Prefetch saw them, uses it instead of hashing the name again.
func (r *Relay) Prefetch(b []byte, out *Out) {
	if _, name, ok := scry.NameWire(b); ok {
		key := r.key(name)
		r.pending.Prefetch(key)
		out.pre = append(out.pre, prefetched{data: unsafe.SliceData(b), n: len(b), key: key})
	}
}

// prefetched is the pending-table key Prefetch computed for the datagram
// at data, n bytes long, for Handle to take instead of hashing the name
// again.
type prefetched struct {
	data *byte
	n    int
	key  uint64
}

// takePrefetched sets out's current key to the one Prefetch computed for
// b, if b is the next datagram it was given (the same buffer, the same
// length); anything else is hashed when its key is needed.
func (out *Out) takePrefetched(b []byte) {
	out.hasKey = false
	if i := out.preNext; i < len(out.pre) && out.pre[i].data == unsafe.SliceData(b) && out.pre[i].n == len(b) {
		out.key, out.hasKey = out.pre[i].key, true
		out.preNext++
	}
}

// nameKey returns the pending-table key of name, the name of the datagram
// being decided into out: Prefetch's, when it computed it.
func (r *Relay) nameKey(name []byte, out *Out) uint64 {
	if out.hasKey {
		return out.key
	}
	return r.key(name)
}

func (r *Relay) key(name []byte) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(r.hashSeed)
	d.Write(name)
	return d.Sum64()
}

// request handles a peek or poke.
func (r *Relay) request(b []byte, p *scry.Packet, k Kind, from netip.AddrPort, now time.Duration, out *Out) {
	fromKey := lane.KeyOf(from)
	fromShip := r.link.sent(from)
	if !fromShip && r.routes.IsSelf(fromKey) {
		out.drop(DropSelf)
		return
	}
	// A poke names its sender: at hop 0 it was sent by that ship itself.
	// The sender's lane is learned only if the poke is sent on, and never
	// for a ship the fronted ship speaks for (vouch.go).
	named := k == KindPoke && p.Header.Hops == 0 && !fromShip
	learn := named && r.mayLearn(p.PayloadName.Ship, fromKey)
	key := r.nameKey(p.NameBytes(), out)
	rcvr := p.Name.Ship
	if rcvr == r.ship {
		if !r.link.present() {
			// Dropped, so nothing is learned from it: a relay with no
			// ship behind it knows its sponsees from configuration.
			out.drop(DropOwnShipNoLane)
			return
		}
		if fromShip {
			out.drop(DropLoop)
			return
		}
		// Through a device the ship answers the requester's true lane
		// itself; otherwise it answers us, and we pass the page on.
		if !r.link.answersItself() && !r.remember(out, key, fromKey, now) {
			return
		}
		r.handToShip(b, k, from, fromKey, p.PayloadName.Ship, named, true, key, now, out)
		return
	}
	if p.Header.Hops >= MaxHops {
		out.drop(DropHopLimit)
		return
	}
	// Plan, admit, commit: each step takes its table's lock alone (the
	// lock order: the package comment).
	// 1. Plan: the route table chooses the lanes, changing nothing.
	q := route.Query{Rcvr: rcvr, From: fromKey, Sender: p.PayloadName.Ship, Learn: learn}
	plan := &out.plan
	r.routes.PlanInto(plan, q, now)
	if plan.N == 0 {
		if plan.Sponsee && r.link.forwardsForSponsees() {
			// Our sponsee, at a lane we do not know: the ship knows its
			// sponsees and forwards for them (and its forward teaches us
			// the lane: HandleFromShip).
			r.handToShip(b, k, from, fromKey, p.PayloadName.Ship, named, false, key, now, out)
			return
		}
		r.dropUnrouted(out, &plan.Targets)
		return
	}
	// 2. Admit: the pending table records the requester and says whether
	// to forward (its verdict counted by remember).
	if !r.remember(out, key, fromKey, now) {
		return
	}
	// 3. Commit what is sent: the lanes' probes, the sender's lane.
	r.routes.Commit(plan, now)
	if !fromShip {
		scry.SetHops(b, int(p.Header.Hops)+1)
	}
	r.forward(b, k, &plan.Targets, out)
}

// remember records a request whose name hashes to key in the pending table
// and reports whether it is to be forwarded.
func (r *Relay) remember(out *Out, key uint64, from lane.Key, now time.Duration) bool {
	c := out.c
	v, evicted := r.pending.Add(key, from, now)
	fwd := v.Forward()
	if (v == pit.VerdictRequesterCapped || v == pit.VerdictCappedForward) && r.amp.probing() {
		// Issue 28: a full entry refused it as a one-shot requester. A
		// lane that answered our STUN probe receives there: it asks
		// again as one, and takes a one-shot requester's place. Any
		// other is probed (at most once a ProbeInterval), so that a
		// real asker proves its lane by its next ask.
		if ok, _ := r.amp.proofs.proven(from, now); !ok {
			r.probe(from, now, out)
		} else if v2, ev2 := r.pending.AddProven(key, from, now); v2 != pit.VerdictRequesterCapped && v2 != pit.VerdictCappedForward {
			v, evicted, fwd = v2, evicted || ev2, fwd || v2.Forward()
		}
	}
	if evicted {
		c.add(EventEvicted, 1)
	}
	switch v {
	case pit.VerdictForwardRetransmit:
		c.add(EventRetransmits, 1)
	case pit.VerdictAggregated:
		c.add(EventAggregated, 1)
		out.act(ActionAggregated)
	case pit.VerdictRequesterCapped:
		out.drop(DropRequestersFull)
	case pit.VerdictCappedForward:
		// Forwarded to refresh the entry upstream; this requester is not
		// on it and will not get the answer.
		c.add(EventCappedForwards, 1)
	case pit.VerdictRefused:
		out.drop(DropPendingFull)
	case pit.VerdictSourceCapped:
		out.drop(DropPendingPerSource)
	}
	return fwd
}

// page handles a response.
func (r *Relay) page(b []byte, p *scry.Packet, from netip.AddrPort, now time.Duration, out *Out) {
	fromKey := lane.KeyOf(from)
	fromShip := r.link.sent(from)
	key := r.nameKey(p.NameBytes(), out)
	reqs, ok := r.pending.TakeHeld(key, out.reqs[:0], &out.held, now)
	out.reqs = reqs[:0]
	publisher := p.Name.Ship
	// sponsors are the lanes of our own sponsors: requesters there get the
	// page without a next-hop.
	var sponsorBuf [2 * 4]lane.Key
	var sponsors []lane.Key
	// obs is what the route table learns from the page; Signed only when
	// a verifier (--pki) checked the publisher's signature on it.
	obs := route.PageObs{Publisher: publisher, From: fromKey, Next: nextHopKey(p),
		Hop0: p.Header.Hops == 0, Relayed: p.Header.Hops > 0}
	contested := false
	// placed is where the route table places the publisher (PageArrived).
	var placed lane.Key
	switch {
	case !ok:
		// Route knowledge is taken from solicited pages only, so that
		// unsolicited traffic cannot steer the route table; a late copy
		// answers only a probe outstanding on the lane it came from.
		if !fromShip {
			obs.Signed, obs.Unverified = r.pageAuthority(b, p, fromKey, now, false, out)
		}
		if !fromShip && r.routes.LateAnswer(obs, now) {
			out.c.add(EventLateAnswers, 1)
		}
		out.drop(DropUnsolicited)
		return
	case !fromShip:
		obs.Signed, obs.Unverified = r.pageAuthority(b, p, fromKey, now, true, out)
		sponsors, contested, placed = r.routes.PageArrived(obs, now, r.ourChain, sponsorBuf[:0])
	case len(r.ourChain) > 0:
		sponsors = r.routes.AppendLanesOf(sponsorBuf[:0], r.ourChain)
	}
	out.c.add(EventPagesMatched, 1)
	out.act(ActionAnswered)
	// Variant for requesters that are our sponsors: no next-hop. Made
	// first, from the bytes as they came.
	var bare []byte
	var hopShort [6]byte
	canShort := false
	// own: the next-hop names the publisher's own lane, which our sponsors
	// may be given too; a forwarder's lane is never given to them (the
	// seed's rule: no fraternizing).
	own := false
	if !fromShip {
		// The next-hop names the publisher's own lane, never a
		// forwarder's: a stock requester stores a relayed page's next-hop
		// as the publisher's lane, replacing even a direct lane it holds
		// that differs (ames.hoon +ev-update-lane, docs/arvo-lanes.md
		// L3), and has no rule that moves it from one relay to the next:
		// a forwarder's lane there un-tightens it. So: where the route
		// table places the publisher (pinned; the lane a hop-0 page came
		// from as the publisher's own; a proven, fresh direct lane), that
		// lane; else, for a page relayed once, the next-hop it carries,
		// which the forwarder that heard it at hop 0 wrote as the lane it
		// heard it from (vere's _mesa_hear_page, and this function); else
		// none, and the requester keeps the lane it holds (L2).
		var hop netip.AddrPort
		var named bool
		hop, named, own = nextHopFor(p, from, obs.Next, placed)
		if named {
			hopShort, canShort = lane.EncodeShort(hop)
		}
		if !named {
			out.c.add(EventNextHopUnknown, 1)
		} else if !canShort {
			out.c.add(EventNextHopUnencodable, 1)
		} else if !r.hintOK(hop) {
			// Never point a requester at a private lane: no next-hop,
			// so it goes on asking us.
			canShort = false
			out.c.add(EventHintsScrubbed, 1)
		}
	}
	hops := int(p.Header.Hops)
	if !fromShip && hops < MaxHops {
		hops++
	}
	// Through a device the ship gets the page as it came, from where it came.
	var orig []byte
	for _, q := range reqs {
		if bare == nil && r.bareFor(q, sponsors, own) {
			bare = out.scratchCopy(b)
			bare = r.editPage(bare, p, hops, [6]byte{}, false)
		}
		if orig == nil && r.link.takesPagesAsTheyCame(q) {
			orig = b
			if len(reqs) > 1 {
				orig = out.scratchCopy(b)
			}
		}
	}
	var main []byte
	if orig == nil || len(reqs) > 1 {
		main = r.editPage(b, p, hops, hopShort, canShort)
	}
	sent, sentBytes := 0, 0
	for i, q := range reqs {
		if contested && out.held.Delivered(i) {
			// A contested page reached it since it last asked: one copy
			// per ask, however many such pages come (issue 28).
			continue
		}
		if orig != nil && q == r.link.key {
			r.toShip(orig, KindPage, from, out)
			continue
		}
		buf := main
		if bare != nil && r.bareFor(q, sponsors, own) {
			buf = bare
		}
		if q != r.link.key {
			ok, probe := r.amp.spend(q, len(buf), now)
			if probe {
				r.probe(q, now, out)
			}
			if !ok {
				out.c.add(EventAmpThrottled, 1)
				continue
			}
		}
		out.add(buf, q.AddrPort())
		sent++
		sentBytes += len(buf)
		if fromShip && !r.link.device && len(reqs) == 1 {
			// At a lane the ship answers us and we pass its page on: an
			// ack of a sponsee's ping, sent to the lane the ping came
			// from, is its word for that lane (vouch.go); sent to more
			// than one lane (a ping name copied, aggregated), it says
			// nothing (vouchContested).
			r.vouchAck(out.c, q, key, lane.Ship{}, now)
		}
	}
	if fromShip && !r.link.device && len(reqs) > 1 {
		r.vouchContested(out.c, reqs, key, now)
	}
	out.c.countOut(KindPage, sent, sentBytes)
	out.c.add(EventAnswered, uint64(sent))
	if contested {
		// The page came from the publisher's challenger, and its
		// known-good lane was sent the same request: the requesters stay
		// pending, so that lane's page reaches them too (route.PageArrived),
		// each marked as sent this name's contested page (pit.Restore).
		r.pending.Restore(key, reqs, &out.held, now)
	}
}

// nextHopFor returns the next-hop a relay writes on page p, which came from
// lane from (see page), and whether it names the publisher's own lane
// (own): where the route table places the publisher (placed); else, for a
// relayed page, the next-hop it carries, which every forwarder writes as
// the publisher's own lane when it knows one (this function; vere's
// _mesa_hear_page names the lane a page came from, and vere forwards only
// to a sponsee's direct lane, so a page reaches it at hop 0); else, for a
// relayed page that carries none (its forwarder knew no public lane of
// the publisher's, or withheld it from us as its sponsor), the forwarder's
// lane from, the seed's step; else none (named false).
func nextHopFor(p *scry.Packet, from netip.AddrPort, carried, placed lane.Key) (hop netip.AddrPort, named, own bool) {
	switch {
	case placed.IsValid():
		return placed.AddrPort(), true, true
	case p.Header.Hops == 0:
		return netip.AddrPort{}, false, false
	case carried.IsValid():
		return carried.AddrPort(), true, true
	}
	return from, true, false
}

// nextHopKey returns page p's next-hop, invalid when it has none.
func nextHopKey(p *scry.Packet) lane.Key {
	if ap, has := p.NextHopAddr(); has {
		return lane.KeyOf(lane.Canon(ap))
	}
	return lane.Key{}
}

// bareFor reports whether requester q gets a page with no next-hop: one of
// our own sponsors when the next-hop names a forwarder (!own: the seed's
// rule against fraternizing; the publisher's own lane they are given, to
// pass on to a stock requester, docs/arvo-lanes.md L3), or the ship behind
// us in ship-lane mode, which must not learn lanes that bypass the relay it
// sits behind.
func (r *Relay) bareFor(q lane.Key, sponsors []lane.Key, own bool) bool {
	return (!own && slices.Contains(sponsors, q)) || r.link.mustNotLearnBypasses(q)
}

// editPage sets a page's hop count and next-hop (cleared when !set), with
// its mug, in place. b holds the bytes p was parsed from (or a copy made
// before any edit), so the mug is resumed from the state p saved instead of
// re-hashing the whole page. On error nothing changes, and the only error
// possible for a page Parse accepted is a page within 6 bytes of the size
// limit, which has no next-hop and goes on without one.
func (r *Relay) editPage(b []byte, p *scry.Packet, hops int, hop [6]byte, set bool) []byte {
	scry.SetHops(b, hops)
	b, _ = scry.EditPageNextHop(b, p, hop, set)
	return b
}

// ames forwards a legacy ames packet statelessly. Legacy ames has no hop
// count and no pending table, so two guards stand in for them: the
// duplicate filter (DupConfig) drops a packet this relay forwarded
// already when it comes back from another lane, which ends any loop, and
// the amplification budget bounds what is forwarded to a lane the relay
// learned (the lane of a ship that named itself the sender of a packet
// heard from there, which a forged packet can name a victim): every byte
// forwarded to a lane that is neither configured (a galaxy, pinned or
// relay lane) nor the ship's own spends from its address's and network's
// budgets (AmpConfig). A forward goes to all its targets or to none.
func (r *Relay) ames(b []byte, a *scry.AmesPacket, from netip.AddrPort, now time.Duration, out *Out) {
	fromKey := lane.KeyOf(from)
	fromShip := r.link.sent(from)
	if !fromShip && r.routes.IsSelf(fromKey) {
		out.drop(DropSelf)
		return
	}
	// An unrelayed packet was sent by its sender itself; its lane is
	// learned only if the packet is sent on. Never a galaxy's: galaxy
	// lanes come from configuration, and a relay forwards a galaxy's
	// packets on without an origin (none is needed), so a packet naming a
	// galaxy as its sender says nothing of where the galaxy is.
	named := !a.Relayed && !fromShip && a.Sndr.Class() != lane.Galaxy
	learn := named && r.mayLearn(a.Sndr, fromKey)
	if a.Rcvr == r.ship {
		if !r.link.present() {
			out.drop(DropOwnShipNoLane) // and learns nothing: see request
			return
		}
		if fromShip {
			out.drop(DropLoop)
			return
		}
		r.handToShip(b, KindAmes, from, fromKey, a.Sndr, named, true, legacyPing, now, out)
		return
	}
	// The fronted ship's own packets are recorded, never refused: its
	// retransmissions are its own business, and one coming back round
	// a loop arrives from another lane.
	own := fromShip && a.Sndr == r.ship
	fp, tag := r.dups.fingerprint(a), r.dups.laneTag(fromKey)
	if !own && r.dups.looped(fp, tag, now) {
		out.drop(DropDuplicate)
		return
	}
	var origin [scry.AmesOriginLen]byte
	insert, scrubbed := false, false
	if !fromShip && scry.NeedsOrigin(a) {
		ap := from
		if !r.hintOK(from) {
			// A sender on a private network is named by our public
			// lane, or not at all: answers then come back through us.
			ap, scrubbed = r.link.public, true
		}
		origin, insert = lane.EncodeShort(ap)
		insert = insert && ap.IsValid()
	}
	n := len(b)
	if insert {
		n += scry.AmesOriginLen
	}
	// Plan, admit, commit, as for a request (Relay.request).
	plan := &out.plan
	r.routes.PlanInto(plan, route.Query{Rcvr: a.Rcvr, From: fromKey, Sender: a.Sndr, Learn: learn}, now)
	if plan.N == 0 {
		if plan.Sponsee && r.link.forwardsForSponsees() {
			r.handToShip(b, KindAmes, from, fromKey, a.Sndr, named, false, legacyPing, now, out)
			return
		}
		r.dropUnrouted(out, &plan.Targets)
		return
	}
	// Admit: every target's budget and the duplicate filter (amesAdmit,
	// which counts a refusal), each lock taken alone; the targets the
	// budget asked to probe are probed, sent or not.
	adm := amesAdmit{r: r, out: out, plan: plan, fp: fp, tag: tag, own: own, n: n, now: now}
	admitted := adm.admit()
	for i := 0; i < plan.Targets.N; i++ {
		if adm.probe[i] {
			r.probe(plan.Targets.Lanes[i], now, out)
		}
	}
	if !admitted {
		return
	}
	r.routes.Commit(plan, now)
	if scrubbed {
		out.c.add(EventHintsScrubbed, 1)
	}
	if insert {
		if nb, err := scry.InsertOrigin(b, origin); err == nil {
			b = nb
			out.c.add(EventOriginsInserted, 1)
		}
	}
	r.forward(b, KindAmes, &plan.Targets, out)
}

// probe sends lane k a STUN binding request whose answer proves k
// (AmpConfig), unless k was probed lately.
func (r *Relay) probe(k lane.Key, now time.Duration, out *Out) {
	tx, ok := r.amp.probe(k, now)
	if !ok {
		return
	}
	q := scry.STUNRequest{TxID: tx}
	b := q.Append(out.scratchCopy(nil))
	out.add(b, k.AddrPort())
	out.c.countOut(KindSTUN, 1, len(b))
	out.c.add(EventProbesSent, 1)
}

// dropUnrouted counts a datagram whose route plan found no target.
func (r *Relay) dropUnrouted(out *Out, t *route.Targets) {
	switch {
	case t.Looped:
		out.drop(DropLoop)
	case t.Sponsee:
		out.drop(DropSponseeUnknown)
	default:
		out.drop(DropNoRoute)
	}
}

// forward sends b, a datagram of kind k, on every target.
func (r *Relay) forward(b []byte, k Kind, t *route.Targets, out *Out) {
	for i := 0; i < t.N; i++ {
		out.add(b, t.Lanes[i].AddrPort())
	}
	out.c.add(EventRequestsForwarded, 1)
	out.act(ActionForwarded)
	out.c.countOut(k, t.N, t.N*len(b))
	out.c.add(EventForwardSends, uint64(t.N))
	if t.N > 1 {
		out.c.add(EventDualSends, 1)
	}
}
