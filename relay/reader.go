package relay

import (
	"time"
	"unsafe"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

// Reader is one goroutine's context for deciding datagrams (a reader of a
// socket, in server.go): its Batch, what the decisions send, and its
// scratch: the page copies and STUN answers the Batch's buffers point
// into, the route plan, the requesters a page is taken for, the decision
// in hand, its counter block and the keys and mug prefixes computed ahead
// for the batch (Relay.Prefetch, MugBatch). Make it with Relay.NewReader;
// a Reader belongs to one goroutine.
type Reader struct {
	Batch // what is sent: r.Sends, r.Split()

	// scratch buffers for second variants of a page (to a sponsor).
	scratch [][]byte
	used    int
	reqs    []lane.Key
	held    pit.Held   // what page's TakeHeld took beyond reqs (issue 28)
	plan    route.Plan // Handle's route plan, reused
	d       Decision   // the decision in hand, or the last made

	// owner made o (Relay.NewReader) and counts o's decisions in own.
	// The decisions count into c, for dst: own when the relay deciding is
	// owner, else that relay's shared default block. perBatch
	// (CountPerBatch) leaves the counts in c until Flush or Reset;
	// otherwise c adds each straight to dst (tally.direct).
	owner    *Relay
	own      *counterBlock
	c        tally
	dst      *counterBlock
	perBatch bool

	// Keys computed by Prefetch since Reset, in order; preNext is the
	// next to take. key is the current datagram's, when hasKey.
	pre     []prefetched
	preNext int
	key     uint64
	hasKey  bool

	// free holds lanes the budget found free (amp.Budget.SpendFree:
	// proven, no renewal due), each until the instant its renewal falls
	// due. A live proof is never taken from its lane and only lengthens,
	// so until then it is still proven, and a page to it is sent without
	// asking the budget (Relay.spend), as a proven lane takes nothing;
	// from then on the budget is asked again, and says to probe.
	free laneUntilMemo
	// heard holds lanes whose arrival at an instant the lane clock has
	// recorded (Relay.arrived), until the next instant: recording it
	// again at that instant would change nothing.
	heard laneUntilMemo
	// hop holds the last next-hop lane's form and standing (nextHop).
	hop hopMemo
	// quiet holds the route table's last quiet answer to a page, reused
	// for the publisher's further hop-0 pages from the same lane while
	// its stamp holds (route.Table.PageArrivedHeld). Another relay's
	// table holds no stamp of this one's (each table's epoch starts at
	// random), so bind need not clear it.
	quiet route.PageAnswer

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

// NewReader returns a Reader sized for batches of up to batch input
// datagrams, for any relay: what a relay decides into it is counted in
// that relay's shared default counter block. A goroutine that decides many
// datagrams should use Relay.NewReader, whose counts no other goroutine
// writes.
func NewReader(batch int) *Reader {
	o := &Reader{
		Batch: Batch{
			Sends:  make([]transport.Message, 0, batch*route.MaxTargets),
			Ports:  make([]Port, 0, batch*route.MaxTargets),
			public: make([]transport.Message, 0, batch*route.MaxTargets),
			ship:   make([]transport.Message, 0, batch),
		},
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

// NewReader returns a Reader as the package-level NewReader does, with a
// counter block of its own registered with r: decisions r makes into it
// are counted there, uncontended, and summed into r's Snapshot. Each
// Reader made keeps its block for r's lifetime, so make one per
// goroutine, not per batch.
func (r *Relay) NewReader(batch int) *Reader {
	o := NewReader(batch)
	o.owner, o.own = r, r.counters.newBlock()
	return o
}

// bind points out's counts at r's block for it, for one Handle or
// HandleFromShip call, first flushing what out holds for another block.
func (r *Relay) bind(out *Reader) {
	dst := &r.counters.def
	if out.owner == r {
		dst = out.own
	}
	if out.dst != dst {
		out.Flush()
		out.dst = dst
		// Another relay's tables: what o remembers of this one's is
		// not theirs.
		out.free.clear()
		out.heard.clear()
		out.hop = hopMemo{}
	}
	if !out.perBatch {
		out.c.direct = dst
	}
}

// CountPerBatch makes o keep the counts of its decisions until Flush or
// Reset, instead of adding each to the relay's counters as it is made: a
// few atomic adds a batch instead of several a datagram (tally).
// Until then the relay's Snapshot does not show them. A server's reader
// counts per batch and flushes before it sends the batch, so a datagram is
// counted before it leaves, as with a Reader that does not.
func (o *Reader) CountPerBatch() { o.perBatch, o.c.direct = true, nil }

// Flush adds the counts o holds to the counters of the relay they were
// decided by.
func (o *Reader) Flush() {
	if o.dst != nil {
		o.c.flushTo(o.dst)
	}
}

// Reset flushes o's counts and empties o, its Batch and its scratch, for
// the next batch.
func (o *Reader) Reset() {
	o.Flush()
	o.Batch.reset()
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
func (o *Reader) MugBatch(bufs [][]byte) {
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
func (out *Reader) takeMug(b []byte) {
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

// laneMemoSlot is lane *k's slot in a laneUntilMemo: a byte of its
// address and of its port, so that lanes of one host, or at one port
// across hosts, spread.
func laneMemoSlot(k *lane.Key) int {
	return int(k.IP[15]^k.IP[14]^byte(k.Port)^byte(k.Port>>8)) & (laneMemoSlots - 1)
}

// laneUntilMemo remembers, for one Reader, lanes of which something holds
// until an instant (what, its owner field says): lanes[i] at every
// instant before until[i] (0: empty), i the lane's slot (laneMemoSlot).
// Direct-mapped, laneMemoSlots slots: a lane displaces whichever shared
// its slot, so a flood of lanes makes it forget and costs one compare a
// look.
// A Reader's clock does not go back, so an instant before the one a lane
// was put at is never asked.
type laneUntilMemo struct {
	lanes [laneMemoSlots]lane.Key
	until [laneMemoSlots]time.Duration
}

// has reports whether m holds *k at now.
func (m *laneUntilMemo) has(k *lane.Key, now time.Duration) bool {
	i := laneMemoSlot(k)
	return now < m.until[i] && m.lanes[i] == *k
}

// put makes m hold *k until until, in place of whatever its slot held.
func (m *laneUntilMemo) put(k *lane.Key, until time.Duration) {
	i := laneMemoSlot(k)
	m.lanes[i], m.until[i] = *k, until
}

// clear empties m.
func (m *laneUntilMemo) clear() { m.until = [laneMemoSlots]time.Duration{} }

// scratchCopy returns a copy of b in a scratch buffer, growing the pool
// when every buffer is in use.
func (o *Reader) scratchCopy(b []byte) []byte {
	if o.used == len(o.scratch) {
		o.scratch = append(o.scratch, make([]byte, 0, MaxPacket+GrowRoom))
	}
	s := append(o.scratch[o.used][:0], b...)
	o.scratch[o.used] = s[:0]
	o.used++
	return s
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
func (out *Reader) takePrefetched(b []byte) {
	out.hasKey = false
	if i := out.preNext; i < len(out.pre) && out.pre[i].data == unsafe.SliceData(b) && out.pre[i].n == len(b) {
		out.key, out.hasKey = out.pre[i].key, true
		out.preNext++
	}
}
