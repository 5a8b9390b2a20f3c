package endpoint

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/urbit-relay/relay/internal/eventq"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
	"github.com/urbit-relay/relay/session"
)

// Datagram is one datagram an endpoint decided to send. Buf is the Core's
// (or the request's) and must not be modified; it stays valid until the
// request it belongs to completes, and for replies until the next call.
type Datagram struct {
	Buf []byte
	To  netip.AddrPort
}

// Core is an endpoint's protocol state machine: no goroutines, no sockets,
// no clock. Every input (a datagram heard, a timer tick, a new request) is a
// method call with the time passed in, and the datagrams to send are
// appended to the slice the caller passes. The Endpoint wraps a Core with a
// socket and goroutines; the simulator drives Cores directly in virtual
// time. A Core is not safe for concurrent use.
type Core struct {
	cfg    Config
	routes *route.Table

	published map[string][]byte   // path → value
	pending   map[string]*request // request name bytes → request
	nextPing  time.Duration
	seq       uint64
	pingSeq   uint64     // the last ping's message number (PingWire)
	reqSeq    uint64     // numbers requests in the order made: Tick sends what is due in that order
	due       []*request // Tick's scratch

	// Fragmented downloads (download.go): rcvr and path → download.
	downloads map[dlKey]*download
	// Held peeks for paths that will grow (Hold), answered by Grow.
	holds map[string][]heldPeek
	// Answers waiting out Config.Think, sent by Tick.
	later eventq.Queue[Datagram]

	// Legacy ames (legacy.go): messages' and wails' keys → request, and
	// the message numbers of messages sent, so that a late ack is not
	// taken for a message.
	legacy map[string]*request
	sent   recentIDs
	rng    *mrand.Rand // filler bytes of legacy acks and pings

	// Scry notifications, publisher side: nil without Config.Key.
	pub      *session.Publisher
	deferred []Datagram // notifications made by Publish, sent by the next Tick

	// Scry notifications, subscriber side (notify.go).
	links  map[lane.Ship]*link
	byName map[string]nameRef // name bytes of a subscription's or heartbeat's request
	nsubs  int
	epoch  uint64 // Config.Epoch in Unix nanoseconds (0 without one): heartbeat counters start at epoch+now
	msg    scry.NotifyMessage
	stats  NotifyStats
}

type request struct {
	rcvr    lane.Ship
	path    string
	wire    []byte // the datagram
	due     time.Duration
	tries   int
	waiters []func(Response)
	seq     uint64 // Core.reqSeq when made
	lim     Limit
	key     string    // its key in Core.pending or Core.legacy
	dl      *download // a fragment's request: the page goes to the download
	frag    uint64    // the fragment it asks for
}

// NewCore returns the state machine for cfg. self is the endpoint's own lane
// (never used as a target); it may be the zero AddrPort.
func NewCore(cfg Config, self netip.AddrPort) (*Core, error) {
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.FragmentSize < 0 || cfg.MaxTries < 0 {
		return nil, fmt.Errorf("endpoint: negative FragmentSize %d or MaxTries %d", cfg.FragmentSize, cfg.MaxTries)
	}
	if cfg.Routes.HintNets == nil {
		cfg.Routes.HintNets = cfg.HintNets
	}
	rt, err := route.New(cfg.Ship, cfg.Sponsors, cfg.Routes)
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	static := map[lane.Ship]lane.Key{}
	for s, ap := range cfg.Lanes {
		if !ap.IsValid() {
			return nil, fmt.Errorf("endpoint: invalid lane for %s", s)
		}
		static[s] = lane.KeyOf(lane.Canon(ap))
	}
	rt.SetStatic(static)
	if self.IsValid() {
		rt.AddSelf(lane.KeyOf(lane.Canon(self)))
	}
	if cfg.Key != nil && len(cfg.Key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("endpoint: signing key is %d bytes, want %d", len(cfg.Key), ed25519.PrivateKeySize)
	}
	seed := cfg.Seed
	if seed == 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("endpoint: seed: %w", err)
		}
		seed = binary.LittleEndian.Uint64(b[:])
	}
	c := &Core{
		cfg: cfg, routes: rt,
		published: map[string][]byte{},
		pending:   map[string]*request{},
		links:     map[lane.Ship]*link{},
		byName:    map[string]nameRef{},
		downloads: map[dlKey]*download{},
		holds:     map[string][]heldPeek{},
		legacy:    map[string]*request{},
		rng:       mrand.New(mrand.NewPCG(seed, seed^0x1e9a_c7a3_5eed)),
	}
	if !cfg.Epoch.IsZero() && cfg.Epoch.UnixNano() > 0 {
		c.epoch = uint64(cfg.Epoch.UnixNano())
	}
	if cfg.Key != nil {
		c.pub = session.NewPublisher(session.NewIDSource(seed ^ 0x5e55_1011_d5))
	}
	return c, nil
}

// Ship returns the core's ship.
func (c *Core) Ship() lane.Ship { return c.cfg.Ship }

// Routes returns the core's route table.
func (c *Core) Routes() *route.Table { return c.routes }

// Pending returns the number of requests (a download's fragments in flight
// each count, and legacy messages and wails) and subscriptions in flight.
func (c *Core) Pending() int { return len(c.pending) + len(c.legacy) + c.nsubs }

// Publish makes value the answer to peeks for path on this ship. Paths in
// the reserved namespace (scry.NotifyPrefix) cannot be published. The
// notifications a new value owes subscribers go out with the next Tick (see
// Grow to have them at once).
func (c *Core) Publish(path string, value []byte) {
	c.deferred = c.Grow(path, value, 0, c.deferred)
}

// Grow is Publish that also appends, to out, the notifications owed to
// subscribers whose heartbeats this core holds and the answers to peeks it
// holds for path (Hold). now is the time of the growth, like every Core
// input: held peeks are answered Think after it (Publish grows at time 0).
func (c *Core) Grow(path string, value []byte, now time.Duration, out []Datagram) []Datagram {
	if scry.IsNotifyPath([]byte(path)) {
		return out
	}
	_, existed := c.published[path]
	v := append([]byte(nil), value...)
	c.published[path] = v
	out = c.answerHeld(path, v, now, out)
	if c.pub == nil || existed {
		return out
	}
	c.pub.Grow(path, v, func(r session.Reply) { out = c.sendReply(r, out) })
	return out
}

// Peek starts (or joins) a download of the value at path on rcvr, with
// the Config's Limit; done is called, from a later Handle or Tick, with the
// whole value (see Fetch). It appends the first sends.
func (c *Core) Peek(rcvr lane.Ship, path string, now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
	return c.Fetch(rcvr, path, Limit{Tries: c.cfg.MaxTries}, now, done, out)
}

// Poke sends data to rcvr; done is called with its ack (or, past the
// Config's MaxTries, with ErrGaveUp).
func (c *Core) Poke(rcvr lane.Ship, data []byte, now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
	c.seq++
	path := fmt.Sprintf("ack/%s/%d", c.cfg.Ship, c.seq)
	pkt := pokePacket(c.cfg.Ship, rcvr, path, data)
	return c.start(rcvr, path, &pkt, Limit{Tries: c.cfg.MaxTries}, nil, now, done, out)
}

// Cancel abandons the request or subscription for path on rcvr, if any:
// its waiters are not called.
func (c *Core) Cancel(rcvr lane.Ship, path string) {
	for k, r := range c.pending {
		if r.rcvr == rcvr && r.path == path {
			delete(c.pending, k)
		}
	}
	delete(c.downloads, dlKey{rcvr, path})
	if lk := c.links[rcvr]; lk != nil {
		if s := lk.subs[path]; s != nil {
			c.dropSub(s)
		}
	}
}

// PingWire is the keepalive a ship sends its sponsor (Core's ping): a
// hop-0 poke of sponsor whose payload names ship, at path
// ping/<ship>/<seq>: the pinger's @p, so that a relay in front of the
// sponsor keeps a pending entry per pinger rather than aggregating every
// sponsee's ping under one capped entry, and the message's number, since
// every ping is a message of its own and real mesa names each message's
// ack apart (docs/arvo-lanes.md A1): a relay takes an ack of a name it saw
// acked before, sent to another lane, for a replay's (relay/vouch.go).
func PingWire(ship, sponsor lane.Ship, seq uint64) []byte {
	pkt := pokePacket(ship, sponsor, pingPath+"/"+ship.String()+"/"+strconv.FormatUint(seq, 10), nil)
	return pkt.Append(nil)
}

func pokePacket(sndr, rcvr lane.Ship, path string, data []byte) scry.Packet {
	name := scry.Name{Ship: rcvr, Bloq: scry.DefaultBloq, Path: []byte(path)}
	payload := scry.Name{Ship: sndr, Bloq: scry.DefaultBloq, Path: []byte(path)}
	return scry.NewPoke(name, payload, scry.Data{Total: uint64(len(data)), AuthKind: scry.AuthNone, Frag: data})
}

func (c *Core) start(rcvr lane.Ship, path string, pkt *scry.Packet, lim Limit, dl *download, now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
	wire := pkt.Append(nil)
	var parsed scry.Packet
	if err := parsed.Parse(wire); err != nil {
		return out, fmt.Errorf("endpoint: request does not encode: %w", err)
	}
	key := string(parsed.NameBytes())
	if r, ok := c.pending[key]; ok {
		if done != nil {
			r.waiters = append(r.waiters, done)
		}
		return out, nil
	}
	if len(c.pending) >= MaxPending {
		return out, ErrTooManyRequests
	}
	r := c.newRequest(rcvr, path, wire, lim, key)
	if done != nil {
		r.waiters = append(r.waiters, done)
	}
	r.dl, r.frag = dl, pkt.Name.Frag
	c.pending[key] = r
	return c.send(r, now, out), nil
}

func (c *Core) newRequest(rcvr lane.Ship, path string, wire []byte, lim Limit, key string) *request {
	c.reqSeq++
	return &request{rcvr: rcvr, path: path, wire: wire, lim: lim, key: key, seq: c.reqSeq}
}

// send transmits r on the lanes Routes selects and schedules its retry.
func (c *Core) send(r *request, now time.Duration, out []Datagram) []Datagram {
	t := c.routes.Select(r.rcvr, lane.Key{}, now)
	r.tries++
	r.due = now + c.cfg.RetryInterval
	var targets []netip.AddrPort
	for i := 0; i < t.N; i++ {
		ap := t.Lanes[i].AddrPort()
		out = append(out, Datagram{Buf: r.wire, To: ap})
		if c.cfg.Observe != nil {
			targets = append(targets, ap)
		}
	}
	if c.cfg.Observe != nil && t.N > 0 {
		c.cfg.Observe(Event{Kind: EventSend, Rcvr: r.rcvr, Path: r.path, Targets: targets, Try: r.tries})
	}
	return out
}

// NextDeadline returns the earliest time Tick has work to do.
func (c *Core) NextDeadline() time.Duration {
	d := c.nextPing
	if c.cfg.PingInterval < 0 || c.cfg.Ship.Class() == lane.Galaxy {
		d = never
	}
	for _, r := range c.pending {
		d = min(d, r.due)
	}
	for _, r := range c.legacy {
		d = min(d, r.due)
	}
	if at, ok := c.later.Next(); ok {
		d = min(d, at)
	}
	return min(d, c.notifyDeadline())
}

// never is a deadline that does not come.
const never = time.Duration(1<<63 - 1)

// Tick sends the answers whose think time is over, re-sends requests
// whose retry time has come (in the order they were made) or gives them up
// past their Limit, pings the sponsor when due, and runs the notification
// timers: subscriptions' re-sends, heartbeats, held heartbeats' answers and
// session expiry.
func (c *Core) Tick(now time.Duration, out []Datagram) []Datagram {
	for c.later.Due(now) {
		_, d := c.later.Pop()
		out = append(out, d)
	}
	due := c.due[:0]
	for _, r := range c.pending {
		if now >= r.due {
			due = append(due, r)
		}
	}
	for _, r := range c.legacy {
		if now >= r.due {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b *request) int { return cmp.Compare(a.seq, b.seq) })
	for _, r := range due {
		if c.pending[r.key] != r && c.legacy[r.key] != r {
			continue // ended by an earlier one's give-up
		}
		if r.lim.over(r.tries, now) {
			out = c.giveUp(r, now, out)
			continue
		}
		out = c.send(r, now, out)
	}
	clear(due)
	c.due = due[:0]
	if c.cfg.PingInterval > 0 && c.cfg.Ship.Class() != lane.Galaxy && now >= c.nextPing {
		out = c.ping(now, out)
	}
	return c.tickNotify(now, out)
}

// ping pokes the sponsor at hop 0 so its relay learns (and keeps) our lane
// (PingWire; with Config.Legacy, a legacy ames packet). It expects no
// answer.
func (c *Core) ping(now time.Duration, out []Datagram) []Datagram {
	c.nextPing = now + c.cfg.PingInterval
	sp := c.cfg.Sponsors.Sponsor(c.cfg.Ship)
	var wire []byte
	if c.cfg.Legacy {
		wire = c.legacyPing(sp) // fresh filler each time, as a real one is
	} else {
		c.pingSeq++
		wire = PingWire(c.cfg.Ship, sp, c.pingSeq)
	}
	t := c.routes.Select(sp, lane.Key{}, now)
	for i := 0; i < t.N; i++ {
		out = append(out, Datagram{Buf: wire, To: t.Lanes[i].AddrPort()})
	}
	return out
}

// Handle processes the datagram b heard from lane from at now: it answers
// peeks and pokes addressed to this ship, completes requests with the
// pages that answer them, and answers a STUN binding request with the
// lane it came from, as every vere ship does (io/ames.c, _ames_hear and
// _stun_on_request): a relay probing a requester's lane relies on it.
// Legacy ames packets addressed to this ship go to legacyHear.
func (c *Core) Handle(b []byte, from netip.AddrPort, now time.Duration, out []Datagram) []Datagram {
	var p scry.Packet
	if err := p.Parse(b); err != nil {
		var q scry.STUNRequest
		if scry.IsSTUN(b) && q.Parse(b) == nil {
			resp := scry.STUNResponse{TxID: q.TxID, Mapped: lane.Canon(from)}
			return append(out, Datagram{Buf: resp.Append(nil), To: from})
		}
		var a scry.AmesPacket
		if a.Parse(b) == nil && a.Rcvr == c.cfg.Ship {
			return c.legacyHear(&a, lane.Canon(from), now, out)
		}
		return out
	}
	from = lane.Canon(from)
	// Whatever arrives from a lane shows it alive (Routes.Arrived).
	c.routes.Arrived(lane.KeyOf(from), now)
	switch p.Header.Type {
	case scry.TypePeek:
		if p.Name.Ship != c.cfg.Ship {
			return out
		}
		if c.pub != nil && scry.IsNotifyPath(p.Name.Path) {
			return c.notifyRequest(&p, from, now, out)
		}
		v, ok := c.published[string(p.Name.Path)]
		if !ok {
			return c.hold(&p, from, out)
		}
		return c.replyFragment(&p, v, from, now, out)
	case scry.TypePoke:
		if p.Name.Ship != c.cfg.Ship {
			return out
		}
		if p.Header.Hops == 0 {
			c.routes.Contacted(p.PayloadName.Ship, lane.KeyOf(from), now)
		}
		return c.answer(c.reply(&p, nil), from, now, out)
	case scry.TypePage:
		return c.page(&p, from, now, out)
	}
	return out
}

// reply returns the answer to request p: a hop-0 page carrying v, whose
// name is the request's, byte for byte.
func (c *Core) reply(p *scry.Packet, v []byte) []byte {
	return c.replyPart(p, v, uint64(len(v)))
}

// replyPart is reply for a fragment frag of a value of total bytes.
func (c *Core) replyPart(p *scry.Packet, frag []byte, total uint64) []byte {
	page := scry.Packet{
		Header: scry.Header{Version: scry.MesaVersion, Type: scry.TypePage},
		Name:   p.Name,
		Data:   scry.Data{Total: total, AuthKind: scry.AuthNone, Frag: frag},
	}
	return page.Append(nil)
}

// answer sends wire, an answer to a request heard from to at now, after
// the Config's Think time: at once without one, else from a later Tick.
func (c *Core) answer(wire []byte, to netip.AddrPort, now time.Duration, out []Datagram) []Datagram {
	d := Datagram{Buf: wire, To: to}
	if c.cfg.Think == nil {
		return append(out, d)
	}
	c.later.Push(now+max(c.cfg.Think(), 0), d)
	return out
}

// page takes a page: it completes the request, subscription or heartbeat
// it answers and learns routes from it. A page at a name this core waits
// for that fails authentication teaches nothing and changes nothing.
func (c *Core) page(p *scry.Packet, from netip.AddrPort, now time.Duration, out []Datagram) []Datagram {
	fromKey := lane.KeyOf(from)
	publisher := p.Name.Ship
	next, hasNext := p.NextHopAddr()
	var nextKey lane.Key
	if hasNext {
		nextKey = lane.KeyOf(lane.Canon(next))
	}
	req, fresh := c.pending[string(p.NameBytes())]
	if fresh {
		delete(c.pending, string(p.NameBytes()))
	}
	// solicited: the page answers a request of ours, or is an authentic
	// page at a name we wait on; only such a page teaches routes.
	solicited := fresh
	var act notifyAction
	if ref, ok := c.byName[string(p.NameBytes())]; ok {
		var authentic bool
		act, authentic = c.notifyPage(p, ref, now)
		if !authentic && !fresh {
			return out
		}
		solicited = solicited || authentic
		fresh = fresh || act.fresh
	}
	switch {
	case !solicited:
		// Nobody here asked for it: it teaches nothing, beyond answering
		// a probe outstanding on its lane (the slower copy of a request
		// sent on two lanes). A forged page cannot redirect us.
		c.routes.LateAnswer(route.PageObs{Publisher: publisher, From: fromKey, Next: nextKey, Hop0: p.Header.Hops == 0, Relayed: p.Header.Hops > 0}, now)
	default:
		if p.Header.Hops == 0 {
			c.routes.Heard(publisher, fromKey, now)
		}
		// route.Table.Answered takes a hint only from a page that came the way
		// the request went, so a copy through a looser route changes
		// nothing.
		c.routes.Answered(publisher, fromKey, nextKey, p.Header.Hops > 0, now)
	}
	resp := Response{From: from, Next: next, Hops: int(p.Header.Hops)}
	var path string
	if req != nil {
		path = req.path
		resp.Tries = req.tries
		if req.dl != nil {
			out = c.fragment(req, p, resp, now, out)
		} else {
			resp.Data = append([]byte(nil), p.Data.Frag...)
			for _, w := range req.waiters {
				w(resp)
			}
		}
	}
	if c.cfg.Observe != nil {
		c.cfg.Observe(Event{Kind: EventPage, Rcvr: publisher, Path: path, From: from, Next: next, Hops: int(p.Header.Hops), Fresh: fresh})
	}
	return c.applyNotify(&act, resp, now, out)
}
