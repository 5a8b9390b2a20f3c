// Package endpoint is a ship's side of the network: a process with one
// socket and one ship identity that publishes values (answering peeks for
// its paths and acking pokes) and makes requests of other ships (peeks and
// pokes), retrying until answered and tightening its routes with the same
// rubric as the relay (relay.Routes): send on the tightest known-good route
// and the one just tighter until the tighter one answers, follow next-hop
// hints one step per round trip, fall back when a route goes quiet.
//
// An endpoint keeps its sponsor's relay informed of its lane by sending it a
// hop-0 poke every PingInterval, as ships keep NAT pinholes open today.
//
// Endpoints are used by the relay's tests, the demo, the replay tool and the
// simulator. Their bookkeeping (maps of requests, one small allocation per
// request) is not on the relay's hot path.
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

const (
	// DefaultRetryInterval is how long a request waits for its response
	// before it is sent again. One second covers a round trip through a
	// full relay chain on the slow overlay preset (~270 ms one way), and
	// keeps a lost packet's cost to about a second.
	DefaultRetryInterval = time.Second

	// DefaultPingInterval is how often an endpoint pokes its sponsor so
	// the sponsor's relay keeps its lane: the 25 s ships use today to keep
	// NAT bindings alive.
	DefaultPingInterval = 25 * time.Second

	// DefaultTick is the resolution of the endpoint's timers.
	DefaultTick = 50 * time.Millisecond

	// MaxPending caps the requests an endpoint has in flight; Peek and
	// Poke fail with ErrTooManyRequests past it.
	MaxPending = 1 << 16

	// pingPath is the path of the keepalive poke's ack name.
	pingPath = "ping"
)

// ErrTooManyRequests is returned when MaxPending requests are in flight.
var ErrTooManyRequests = errors.New("endpoint: too many requests in flight")

// Config configures an Endpoint.
type Config struct {
	Ship     lane.Ship
	Sponsors *lane.Sponsors
	// Lanes are known lanes: the galaxies, and usually the sponsor's relay.
	Lanes map[lane.Ship]netip.AddrPort
	// RetryInterval, PingInterval and Tick default to the constants above;
	// a negative PingInterval disables pings.
	RetryInterval time.Duration
	PingInterval  time.Duration
	Tick          time.Duration
	Routes        relay.RouteConfig
	Clock         relay.Clock
	Log           *zap.Logger
	// Observe, if set, is called (from the endpoint's goroutines, without
	// locks held) for every request sent and page received.
	Observe func(Event)
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	EventSend EventKind = iota // a request sent on Targets
	EventPage                  // a page received
)

// Event is a trace record for tests and tools.
type Event struct {
	Kind    EventKind
	Rcvr    lane.Ship // the request's receiver / the page's publisher
	Path    string
	Targets []netip.AddrPort // EventSend: the lanes it went to
	From    netip.AddrPort   // EventPage: the lane it came from
	Next    netip.AddrPort   // EventPage: its next-hop, if any
	Hops    int              // EventPage: its hop count
	Fresh   bool             // EventPage: it answered a pending request
	Try     int              // EventSend: 1 for the first send
}

// Response is the answer to a request.
type Response struct {
	Data  []byte
	From  netip.AddrPort // lane the page came from
	Next  netip.AddrPort // its next-hop, if any
	Hops  int
	Tries int // times the request was sent
}

// Endpoint is a ship with one socket. Create it with New, Start it, Close it.
type Endpoint struct {
	// Static after construction.
	cfg    Config
	conn   transport.Conn
	routes *relay.Routes
	log    *zap.Logger

	mu        sync.Mutex
	published map[string][]byte   // guarded by mu: path → value
	pending   map[string]*request // guarded by mu: request name bytes → request
	nextPing  time.Duration       // guarded by mu
	seq       uint64              // guarded by mu: poke ack-name counter

	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

type request struct {
	rcvr  lane.Ship
	path  string
	wire  []byte // the datagram
	due   time.Duration
	tries int
	done  chan Response
}

// New returns an endpoint for cfg on conn.
func New(cfg Config, conn transport.Conn) (*Endpoint, error) {
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Clock == nil {
		cfg.Clock = relay.NewSystemClock()
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	rt, err := relay.NewRoutes(cfg.Ship, cfg.Sponsors, cfg.Routes)
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
	rt.AddSelf(lane.KeyOf(conn.LocalAddr()))
	return &Endpoint{
		cfg: cfg, conn: conn, routes: rt, log: cfg.Log,
		published: map[string][]byte{},
		pending:   map[string]*request{},
		done:      make(chan struct{}),
	}, nil
}

// Ship returns the endpoint's ship.
func (e *Endpoint) Ship() lane.Ship { return e.cfg.Ship }

// Addr returns the endpoint's lane.
func (e *Endpoint) Addr() netip.AddrPort { return e.conn.LocalAddr() }

// Routes returns the endpoint's route table.
func (e *Endpoint) Routes() *relay.Routes { return e.routes }

// Start launches the endpoint's reader and timer goroutines. The first ping
// goes out at once.
func (e *Endpoint) Start() {
	e.wg.Add(2)
	go e.routineRead()
	go e.routineTimers()
}

// Close stops the endpoint and closes its socket; pending requests fail.
func (e *Endpoint) Close() error {
	var err error
	e.once.Do(func() {
		close(e.done)
		err = e.conn.Close()
	})
	e.wg.Wait()
	return err
}

// Publish makes value the answer to peeks for path on this ship.
func (e *Endpoint) Publish(path string, value []byte) {
	e.mu.Lock()
	e.published[path] = append([]byte(nil), value...)
	e.mu.Unlock()
}

// Peek asks rcvr for the value at path and waits for it, re-sending every
// RetryInterval, until ctx ends.
func (e *Endpoint) Peek(ctx context.Context, rcvr lane.Ship, path string) (Response, error) {
	name := scry.Name{Ship: rcvr, Bloq: scry.DefaultBloq, Path: []byte(path)}
	pkt := scry.NewPeek(name)
	return e.do(ctx, rcvr, path, &pkt)
}

// Poke sends data to rcvr and waits for its ack.
func (e *Endpoint) Poke(ctx context.Context, rcvr lane.Ship, data []byte) (Response, error) {
	e.mu.Lock()
	e.seq++
	seq := e.seq
	e.mu.Unlock()
	path := fmt.Sprintf("ack/%s/%d", e.cfg.Ship, seq)
	pkt := e.pokePacket(rcvr, path, data)
	return e.do(ctx, rcvr, path, &pkt)
}

func (e *Endpoint) pokePacket(rcvr lane.Ship, path string, data []byte) scry.Packet {
	name := scry.Name{Ship: rcvr, Bloq: scry.DefaultBloq, Path: []byte(path)}
	payload := scry.Name{Ship: e.cfg.Ship, Bloq: scry.DefaultBloq, Path: []byte(path)}
	return scry.NewPoke(name, payload, scry.Data{Total: uint64(len(data)), AuthKind: scry.AuthNone, Frag: data})
}

func (e *Endpoint) do(ctx context.Context, rcvr lane.Ship, path string, pkt *scry.Packet) (Response, error) {
	wire := pkt.Append(nil)
	var parsed scry.Packet
	if err := parsed.Parse(wire); err != nil {
		return Response{}, fmt.Errorf("endpoint: request does not encode: %w", err)
	}
	key := string(parsed.NameBytes())
	req := &request{rcvr: rcvr, path: path, wire: wire, done: make(chan Response, 1)}
	e.mu.Lock()
	if len(e.pending) >= MaxPending {
		e.mu.Unlock()
		return Response{}, ErrTooManyRequests
	}
	old, inFlight := e.pending[key]
	if inFlight {
		// Same name already in flight: share its answer.
		req = old
	} else {
		e.pending[key] = req
	}
	e.mu.Unlock()
	if !inFlight {
		e.send(req, e.cfg.Clock.Now())
	}
	select {
	case r := <-req.done:
		req.done <- r // let other waiters on the same name see it
		return r, nil
	case <-ctx.Done():
		e.mu.Lock()
		if e.pending[key] == req {
			delete(e.pending, key)
		}
		e.mu.Unlock()
		return Response{}, ctx.Err()
	case <-e.done:
		return Response{}, net.ErrClosed
	}
}

// send transmits req on the lanes Routes selects.
func (e *Endpoint) send(req *request, now time.Duration) {
	t := e.routes.Select(req.rcvr, lane.Key{}, now)
	e.mu.Lock()
	req.tries++
	req.due = now + e.cfg.RetryInterval
	try := req.tries
	e.mu.Unlock()
	if t.N == 0 {
		return
	}
	msgs := make([]transport.Message, t.N)
	var targets []netip.AddrPort
	for i := 0; i < t.N; i++ {
		ap := t.Lanes[i].AddrPort()
		msgs[i] = transport.Message{Buf: req.wire, N: len(req.wire), Addr: ap}
		targets = append(targets, ap)
	}
	if _, err := e.conn.WriteBatch(msgs); err != nil && !errors.Is(err, net.ErrClosed) {
		e.log.Debug("send failed", zap.Error(err))
	}
	if e.cfg.Observe != nil {
		e.cfg.Observe(Event{Kind: EventSend, Rcvr: req.rcvr, Path: req.path, Targets: targets, Try: try})
	}
}

func (e *Endpoint) routineTimers() {
	defer e.wg.Done()
	t := time.NewTicker(e.cfg.Tick)
	defer t.Stop()
	e.ping(e.cfg.Clock.Now())
	var due []*request
	for {
		select {
		case <-e.done:
			return
		case <-t.C:
		}
		now := e.cfg.Clock.Now()
		due = due[:0]
		e.mu.Lock()
		for _, r := range e.pending {
			if now >= r.due {
				due = append(due, r)
			}
		}
		ping := e.cfg.PingInterval > 0 && now >= e.nextPing
		e.mu.Unlock()
		for _, r := range due {
			e.send(r, now)
		}
		if ping {
			e.ping(now)
		}
	}
}

// ping pokes the sponsor at hop 0 so its relay learns (and keeps) our lane.
// The poke expects no answer.
func (e *Endpoint) ping(now time.Duration) {
	if e.cfg.PingInterval < 0 || e.cfg.Ship.Class() == lane.Galaxy {
		return
	}
	e.mu.Lock()
	e.nextPing = now + e.cfg.PingInterval
	e.mu.Unlock()
	sp := e.cfg.Sponsors.Sponsor(e.cfg.Ship)
	pkt := e.pokePacket(sp, pingPath, nil)
	wire := pkt.Append(nil)
	t := e.routes.Select(sp, lane.Key{}, now)
	for i := 0; i < t.N; i++ {
		e.conn.WriteBatch([]transport.Message{{Buf: wire, N: len(wire), Addr: t.Lanes[i].AddrPort()}})
	}
}

func (e *Endpoint) routineRead() {
	defer e.wg.Done()
	msgs := make([]transport.Message, 16)
	for i := range msgs {
		msgs[i].Buf = make([]byte, relay.MaxPacket)
	}
	for {
		n, err := e.conn.ReadBatch(msgs)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-e.done:
				return
			default:
			}
			continue
		}
		now := e.cfg.Clock.Now()
		for i := 0; i < n; i++ {
			e.handle(msgs[i].Buf[:msgs[i].N], lane.Canon(msgs[i].Addr), now)
		}
	}
}

func (e *Endpoint) handle(b []byte, from netip.AddrPort, now time.Duration) {
	var p scry.Packet
	if err := p.Parse(b); err != nil {
		return
	}
	fromKey := lane.KeyOf(from)
	switch p.Header.Type {
	case scry.TypePeek:
		if p.Name.Ship != e.cfg.Ship {
			return
		}
		e.mu.Lock()
		v, ok := e.published[string(p.Name.Path)]
		e.mu.Unlock()
		if !ok {
			return
		}
		e.reply(&p, v, from)
	case scry.TypePoke:
		if p.Name.Ship != e.cfg.Ship {
			return
		}
		if p.Header.Hops == 0 {
			e.routes.Heard(p.PayloadName.Ship, fromKey, now)
		}
		e.reply(&p, nil, from)
	case scry.TypePage:
		e.page(&p, b, from, now)
	}
}

// reply answers request p with a hop-0 page carrying v, sent to the lane
// the request came from. The page's name is the request's, byte for byte.
func (e *Endpoint) reply(p *scry.Packet, v []byte, to netip.AddrPort) {
	page := scry.Packet{
		Header: scry.Header{Version: scry.MesaVersion, Type: scry.TypePage},
		Name:   p.Name,
		Data:   scry.Data{Total: uint64(len(v)), AuthKind: scry.AuthNone, Frag: v},
	}
	wire := page.Append(make([]byte, 0, page.Size()))
	e.conn.WriteBatch([]transport.Message{{Buf: wire, N: len(wire), Addr: to}})
}

func (e *Endpoint) page(p *scry.Packet, b []byte, from netip.AddrPort, now time.Duration) {
	fromKey := lane.KeyOf(from)
	publisher := p.Name.Ship
	next, hasNext := p.NextHopAddr()
	var nextKey lane.Key
	if hasNext {
		nextKey = lane.KeyOf(lane.Canon(next))
	}
	e.mu.Lock()
	req, fresh := e.pending[string(p.NameBytes())]
	if fresh {
		delete(e.pending, string(p.NameBytes()))
	}
	e.mu.Unlock()
	if p.Header.Hops == 0 {
		e.routes.Heard(publisher, fromKey, now)
	}
	if fresh {
		e.routes.Answered(publisher, fromKey, nextKey, now)
	} else {
		e.routes.Answered(publisher, fromKey, lane.Key{}, now)
	}
	var path string
	if fresh {
		path = req.path
		req.done <- Response{
			Data: append([]byte(nil), p.Data.Frag...), From: from, Next: next,
			Hops: int(p.Header.Hops), Tries: req.tries,
		}
	}
	if e.cfg.Observe != nil {
		e.cfg.Observe(Event{Kind: EventPage, Rcvr: publisher, Path: path, From: from, Next: next, Hops: int(p.Header.Hops), Fresh: fresh})
	}
}
