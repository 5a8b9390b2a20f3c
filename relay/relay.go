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
// Every forward is plan, then admit, then commit: the route table plans
// the lanes without changing anything (route.Table.PlanFor); the pending
// table (a request) or the amplification budget (a legacy forward, which
// the duplicate filter checked and recorded before the plan, the record
// undone if the forward is not sent) admits it or not; and only what is
// sent is committed to the route table (route.Table.Commit). Requests and
// legacy packets take one path through the three steps, forwardPath
// (forward.go), which differs between them only in its pre-check, its
// admit and its edit.
//
// Locks, in the order they may be taken:
//
//  1. relay/daemon's Lanes lock, held while it calls SetLanes (which
//     takes the route table's, alone), off the datagram path;
//  2. the server's batch lock (sockReader.batchMu, one per socket reader), taken
//     under nothing, not even another reader's (Close takes them one at
//     a time), and held from a batch's decisions to its last send, so
//     that Close can wait out the batch in hand (TestBatchLockHeld);
//  3. the leaves, taken under a batch lock or under nothing, each alone.
//
// The leaves are: the route table's one mutex; the pending table's, one
// per shard; the amplification budget's (relay/amp: addresses, networks
// and proofs, one per stripe of slots, and the proof table's generator);
// the duplicate filter's, one per stripe; the vouch table's, the ship's
// STUN table's and the signature budget's, one each; a *pki.Verifier's,
// for the comets it learns; the counters' registry (Relay.NewReader,
// Snapshot), off the datagram path; and, under the batch lock only, the
// write locks of the socket (transport) and of the ship's device
// (relay/front), the capture writer's (ServerConfig.Tap) and the decision
// log's. No call holds a leaf while it takes another lock: TestLockOrder
// checks this package's and relay/amp's code, and that no batch lock is
// taken under any lock; the route and pending tables and the budget
// import nothing of this module but lane and call out under their locks
// to nothing but route.Table.Each's f (TestLockLeavesImport). So among
// the leaves there is no order to keep. A decision is steps, each under
// one leaf alone; what a step decides for another table is applied once
// its lock is released (a vouch's pin: vouch.go). The read that fills a
// batch (the socket's read lock) is over before the batch lock is taken.
// The timer goroutine's Expire takes the pending table's shards in turn,
// alone.
//
// Acquisitions per datagram (no --pki, no proof or probe in play), as
// TestLocksPerDatagram counts them (go test -tags lockcount; .ci/run runs it):
//
//   - a forwarded request, 3: the route table (PlanFor), a pending shard
//     (Add: the admit), the route table (Commit, which records a poke's
//     sender too); 2 when the commit would change nothing (a configured or
//     pinned lane, no route for the receiver, no sender to learn:
//     route.Plan.Touches); aggregated (not forwarded), the first 2; and
//     the plan takes no lock when the Reader's last plan was for the same
//     receiver, a configured or pinned lane alone with no route, and the
//     route table's quiet epoch has not moved since (route.Table.PlanFor
//     keeps it): 1 for such a request to a configured galaxy or a pinned
//     sponsee;
//   - a page to one requester, 4: a pending shard (TakeHeld), the route
//     table (PageArrived; none when the Reader holds the table's quiet
//     answer for the publisher's hop-0 pages from that lane:
//     route.Table.PageArrivedHeld), the requester's address stripe and
//     its network's (Spend); 2 more for each further requester, none for
//     the ship; 1 more, the route table (AppendLanesOf: our sponsors'
//     lanes), for a page whose next-hop does not name the publisher's own lane,
//     and for a page from the ship, when we have sponsors. With --pki a
//     page that may prove a lane adds the route table (Provable), the
//     signature budget and, for a comet, the verifier's;
//     an unsolicited page takes a pending shard and the route table
//     (LateAnswer);
//   - a legacy forward, 5 to one learned lane: a duplicate-filter stripe
//     (record, which checks the packet and records it at once), the route
//     table (PlanFor), each target's address and network stripes unless
//     it is configured (trustedLane), the route table (Commit); 3 to
//     configured lanes; a duplicate dropped, 1; one not sent after all (no
//     route, or refused by the budget), the duplicate-filter stripe again
//     (undo). A proven lane takes no lock when its address's slot is up
//     to date (amp's lock-free look), and a page to a lane its reader
//     holds free (Reader.free: found free before, until its proof's
//     renewal falls due) looks at no table at all; else its address stripe
//     alone; a lane not proven, at an address that holds a proof, its
//     address and network stripes;
//     the proof stripe only when a writer interferes with the look; a
//     probe, the proof stripe twice and the generator's;
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
//     socket: a pending shard (TakeHeld), the route table (AppendLanesOf),
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
// goroutine with its own Reader (Relay.NewReader, which also gives it counters of
// its own); the socket loop that calls it is in server.go. A server's
// Reader counts per batch (Reader.CountPerBatch): a batch's counts reach
// the relay's Counters together, before the batch is sent.
package relay

import (
	"hash/maphash"
	"net/netip"
	"time"
	"unsafe"

	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/relay/route"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/scry"
)

// Relay is the decision core. Create it with New.
type Relay struct {
	// Static after construction.
	ship     lane.Ship
	link     shipLink // how the fronted ship's process is reached (ship.go)
	sponsors *lane.Sponsors
	ourChain []lane.Ship  // our sponsors, above the fronted ship
	nameSeed maphash.Seed // the pending table's keys (key)
	pending  *pit.Table
	amp      *amp.Budget // nil when the budget is disabled
	dups     *dupFilter  // nil when the filter is disabled
	routes   *route.Table
	pki      PageVerifier // nil: none
	sigs     sigBudget    // the signature checks pageAuthority may make
	counters Counters
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

// Handle decides what to do with datagram b, heard from lane from at now,
// and appends the datagrams to send to out. It may rewrite b in place and
// grow it by up to GrowRoom bytes: cap(b) must be at least len(b)+GrowRoom.
// Every datagram is counted once in In and, unless forwarded or answered,
// once under a Drop reason: in the relay's Counters when Handle returns,
// or, for a Reader that counts per batch, at its next Flush or Reset.
//
// It returns what it decided (Decision), which stays valid until out
// decides another datagram or is Reset.
func (r *Relay) Handle(b []byte, from netip.AddrPort, now time.Duration, out *Reader) *Decision {
	r.bind(out)
	out.takePrefetched(b)
	out.takeMug(b)
	from = lane.Canon(from)
	out.begin(false, from, len(b))
	r.handle(b, from, now, out)
	return out.finish()
}

// handle is Handle's decision, for a bound out with its decision begun.
func (r *Relay) handle(b []byte, from netip.AddrPort, now time.Duration, out *Reader) {
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
		var fromKey lane.Key
		fromKey.Set(from)
		r.arrived(&fromKey, now, out)
		switch p.Header.Type {
		case scry.TypePeek:
			out.in(KindPeek, len(b))
			r.request(b, &p, KindPeek, from, &fromKey, now, out)
		case scry.TypePoke:
			out.in(KindPoke, len(b))
			r.request(b, &p, KindPoke, from, &fromKey, now, out)
		case scry.TypePage:
			out.in(KindPage, len(b))
			r.page(b, &p, from, &fromKey, now, out)
		default:
			out.dropOther(b, DropReservedType)
		}
		return
	}
	if scry.IsSTUN(b) {
		r.stun(b, from, now, out)
		return
	}
	if r.link.takesSTUN() || r.amp.Probing() {
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
			// The answer to the relay's own probe (amp.Config): the lane
			// it came from is proven.
			if r.amp.Answer(lane.KeyOf(from), resp.TxID, now) {
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
	var fromKey lane.Key
	fromKey.Set(from)
	r.arrived(&fromKey, now, out)
	r.ames(b, &a, from, fromKey, now, out)
}

// arrived records that a well-formed datagram came from lane *k at now: a
// lane is alive while it is heard from (route.Table.Arrived). out's
// further datagrams from k at the same instant skip the lane clock
// (Reader.heard), which they would change only to take back a slot
// another lane took meanwhile: such a collision can only make a lane
// look silent, as the clock allows, and for one batch at most.
func (r *Relay) arrived(k *lane.Key, now time.Duration, out *Reader) {
	if out.heard.has(k, now) {
		return
	}
	r.routes.Arrived(*k, now)
	out.heard.put(k, now+1)
}

// Prefetch starts bringing into cache the pending-table slot Handle will
// look up for datagram b, if b is a mesa request or page, and returns at
// once. A server calls it for every datagram of a batch before handling
// the first, so that in a table too big for the cache the misses overlap.
// It changes nothing in the relay; Handle must still be called. The key
// it computes is kept in out until out's next Reset, and Handle (or
// HandleFromShip), given the same buffer unchanged and out, in the order
// Prefetch saw them, uses it instead of hashing the name again.
func (r *Relay) Prefetch(b []byte, out *Reader) {
	if _, name, ok := scry.NameWire(b); ok {
		key := r.key(name)
		r.pending.Prefetch(key)
		out.pre = append(out.pre, prefetched{data: unsafe.SliceData(b), n: len(b), key: key})
	}
}

// nameKey returns the pending-table key of name, the name of the datagram
// being decided into out: Prefetch's, when it computed it.
func (r *Relay) nameKey(name []byte, out *Reader) uint64 {
	if out.hasKey {
		return out.key
	}
	return r.key(name)
}

// key returns the pending-table key of name: a hash seeded per relay
// (hash/maphash, the runtime's AES-based hash where the CPU has it, as Go's
// own maps use against chosen keys), so that no one can choose names that
// share a key without the seed. Names that do share one share an entry
// (relay/pit), as any 64-bit hash allows. maphash costs ~3 ns for a
// 40-byte name where a seeded xxhash Digest cost ~20.
func (r *Relay) key(name []byte) uint64 {
	return maphash.Bytes(r.nameSeed, name)
}

// (amp.Config), unless k was probed lately.
func (r *Relay) probe(k lane.Key, now time.Duration, out *Reader) {
	tx, ok := r.amp.Probe(k, now)
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
func (r *Relay) dropUnrouted(out *Reader, t *route.Targets) {
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
func (r *Relay) forward(b []byte, k Kind, t *route.Targets, out *Reader) {
	for i := 0; i < t.N; i++ {
		out.add(b, lane.AddrPortOf(&t.Lanes[i]))
	}
	out.c.add(EventRequestsForwarded, 1)
	out.act(ActionForwarded)
	out.c.countOut(k, t.N, t.N*len(b))
	out.c.add(EventForwardSends, uint64(t.N))
	if t.N > 1 {
		out.c.add(EventDualSends, 1)
	}
}
