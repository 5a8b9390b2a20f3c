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
// The protocol lives in Core, a state machine with time passed in and no
// I/O; Endpoint runs a Core on a socket with a reader and a timer goroutine.
// Endpoints are used by the relay's tests, the demo, the replay tool and the
// simulator (which drives Cores directly). Their bookkeeping (maps of
// requests, a few small allocations per request) is not on the relay's hot
// path.
package endpoint

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
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
	// Observe, if set, is called for every request sent and page
	// received, from inside the Core (for an Endpoint, with its lock
	// held): it must return quickly and must not call back into the
	// endpoint.
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

// Endpoint is a Core on a socket. Create it with New, Start it, Close it.
type Endpoint struct {
	// Static after construction.
	cfg  Config
	conn transport.Conn
	log  *zap.Logger

	mu   sync.Mutex
	core *Core // guarded by mu

	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// New returns an endpoint for cfg on conn.
func New(cfg Config, conn transport.Conn) (*Endpoint, error) {
	if cfg.Clock == nil {
		cfg.Clock = relay.NewSystemClock()
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	core, err := NewCore(cfg, conn.LocalAddr())
	if err != nil {
		return nil, err
	}
	return &Endpoint{cfg: core.cfg, conn: conn, log: cfg.Log, core: core, done: make(chan struct{})}, nil
}

// Ship returns the endpoint's ship.
func (e *Endpoint) Ship() lane.Ship { return e.cfg.Ship }

// Addr returns the endpoint's lane.
func (e *Endpoint) Addr() netip.AddrPort { return e.conn.LocalAddr() }

// Routes returns the endpoint's route table (safe for concurrent use).
func (e *Endpoint) Routes() *relay.Routes { return e.core.Routes() }

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
	e.core.Publish(path, value)
	e.mu.Unlock()
}

// Peek asks rcvr for the value at path and waits for it, re-sending every
// RetryInterval, until ctx ends.
func (e *Endpoint) Peek(ctx context.Context, rcvr lane.Ship, path string) (Response, error) {
	return e.wait(ctx, func(now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
		return e.core.Peek(rcvr, path, now, done, out)
	}, func() { e.core.Cancel(rcvr, path) })
}

// Poke sends data to rcvr and waits for its ack.
func (e *Endpoint) Poke(ctx context.Context, rcvr lane.Ship, data []byte) (Response, error) {
	return e.wait(ctx, func(now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
		return e.core.Poke(rcvr, data, now, done, out)
	}, nil)
}

// wait starts a request with start and waits for its answer; cancel runs
// (under the lock) if ctx ends first.
func (e *Endpoint) wait(ctx context.Context, start func(time.Duration, func(Response), []Datagram) ([]Datagram, error), cancel func()) (Response, error) {
	ch := make(chan Response, 1)
	e.mu.Lock()
	out, err := start(e.cfg.Clock.Now(), func(r Response) { ch <- r }, nil)
	e.mu.Unlock()
	if err != nil {
		return Response{}, err
	}
	e.send(out)
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		if cancel != nil {
			e.mu.Lock()
			cancel()
			e.mu.Unlock()
		}
		return Response{}, ctx.Err()
	case <-e.done:
		return Response{}, net.ErrClosed
	}
}

// send writes datagrams, logging (at debug) any the socket refuses.
func (e *Endpoint) send(out []Datagram) {
	if len(out) == 0 {
		return
	}
	msgs := make([]transport.Message, len(out))
	for i, d := range out {
		msgs[i] = transport.Message{Buf: d.Buf, N: len(d.Buf), Addr: d.To}
	}
	for len(msgs) > 0 {
		n, err := e.conn.WriteBatch(msgs)
		if err == nil || errors.Is(err, net.ErrClosed) || n >= len(msgs) {
			return
		}
		e.log.Debug("send failed", zap.Stringer("to", msgs[n].Addr), zap.Error(err))
		msgs = msgs[n+1:]
	}
}

func (e *Endpoint) routineTimers() {
	defer e.wg.Done()
	t := time.NewTicker(e.cfg.Tick)
	defer t.Stop()
	var out []Datagram
	for {
		now := e.cfg.Clock.Now()
		e.mu.Lock()
		out = e.core.Tick(now, out[:0])
		e.mu.Unlock()
		e.send(out)
		select {
		case <-e.done:
			return
		case <-t.C:
		}
	}
}

func (e *Endpoint) routineRead() {
	defer e.wg.Done()
	msgs := make([]transport.Message, 16)
	for i := range msgs {
		msgs[i].Buf = make([]byte, relay.MaxPacket)
	}
	var out []Datagram
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
		out = out[:0]
		e.mu.Lock()
		for i := 0; i < n; i++ {
			out = e.core.Handle(msgs[i].Buf[:msgs[i].N], msgs[i].Addr, now, out)
		}
		e.mu.Unlock()
		e.send(out)
	}
}
