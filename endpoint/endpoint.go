// Package endpoint is a ship's side of the network: a process with one
// socket and one ship identity that publishes values (answering peeks for
// its paths and acking pokes) and makes requests of other ships (peeks and
// pokes), retrying until answered and tightening its routes with the same
// rubric as the relay (route.Table): send on the tightest known-good route
// and the one just tighter until the tighter one answers, follow next-hop
// hints one step per round trip, fall back when a route goes quiet.
//
// An endpoint keeps its sponsor's relay informed of its lane by sending it a
// hop-0 poke every PingInterval, as ships keep NAT pinholes open today.
//
// Endpoints also run scry notifications (docs/protocol.md). A subscriber
// (Subscribe) asks for a path that may not exist yet; a publisher that runs
// the protocol (Config.Key set) acks it, the subscriber stops re-sending
// and instead heartbeats, one stream per publisher, and the publisher
// answers a held heartbeat with the value when the path grows. A publisher
// that does not run it never acks, and its subscribers keep polling. The
// wire forms are in package scry (notify.go), the session state machines in
// package session; the Core glues them to routes and sockets.
//
// A publisher may serve long values in fragments (Config.FragmentSize),
// which Peek downloads with a window of requests in flight (download.go);
// requests can give up (Config.MaxTries, Fetch's Limit), a publisher can
// take a think time before answering (Config.Think) and hold peeks for a
// value not grown yet (Hold), and a ship can speak legacy ames (Message,
// Wail, Config.Legacy; legacy.go), as the replay tool's simulated ships do.
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
	"crypto/ed25519"
	"errors"
	"github.com/urbit-relay/relay/relay/route"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/transport"
)

// ErrTooManyRequests is returned when MaxPending requests are in flight.
var ErrTooManyRequests = errors.New("endpoint: too many requests in flight")

// ErrGaveUp is a Response's Err when its request reached its Limit
// unanswered (Config.MaxTries, or Fetch's Limit).
var ErrGaveUp = errors.New("endpoint: request gave up unanswered")

// ErrBadValue is a download's Response's Err when its first page states a
// value it cannot be (more than MaxFragments fragments, or fragments of no
// bytes).
var ErrBadValue = errors.New("endpoint: page states an impossible value")

// ErrBadSubscribePath is returned by Subscribe for an empty path, one
// longer than MaxSubscribePath, or one in the reserved namespace.
var ErrBadSubscribePath = errors.New("endpoint: path cannot be subscribed to")

// Config configures an Endpoint.
type Config struct {
	Ship     lane.Ship
	Sponsors *lane.Sponsors
	// Lanes are known lanes: the galaxies, and usually the sponsor's relay.
	Lanes map[lane.Ship]netip.AddrPort
	// RetryInterval, PingInterval and Tick default to the constants in
	// constants.go; a negative PingInterval disables pings.
	RetryInterval time.Duration
	PingInterval  time.Duration
	Tick          time.Duration
	Routes        route.Config
	// HintNets are networks besides the public internet that next-hops
	// may name (route.Config.HintNets, when Routes leaves it nil):
	// loopback in tests, an operator's LAN.
	HintNets []netip.Prefix
	Clock    route.Clock
	Log      *zap.Logger
	// Key is this ship's Ed25519 signing key. With it the endpoint runs
	// the publisher side of scry notifications (acks, held heartbeats,
	// notifications, all signed with it); without it it is a publisher
	// that does not run the protocol.
	Key ed25519.PrivateKey
	// PeerKeys are other ships' public keys. Subscribe uses the protocol
	// only with a publisher whose key is here (it cannot authenticate the
	// others' acks) and polls the others. Not modified after New.
	PeerKeys map[lane.Ship]ed25519.PublicKey
	// Seed seeds session ids; 0 draws one from crypto/rand. Tests and the
	// simulator set it to be reproducible. A restarted publisher must not
	// reuse its previous Seed: its session ids would repeat, and a
	// subscriber could miss the restart.
	Seed uint64
	// Epoch is the wall-clock time at which Clock (the now passed to a
	// Core) reads zero. A subscriber's heartbeat counters start at the
	// wall-clock time in nanoseconds, Epoch + now, when its link to a
	// publisher is made, so a restarted subscriber's counters are above
	// its previous run's and a publisher still holding its session takes
	// them as new (docs/protocol.md, "Heartbeat counters"). New sets it
	// from the system clock when zero. A Core with no Epoch counts from
	// now alone, which must then be measured from a point fixed across
	// restarts (as the simulator's virtual clock is).
	Epoch time.Time
	// FragmentSize is the most bytes of a published value one page
	// carries: a longer value is served in fragments of this size, one
	// page per fragment asked for (a peek's name.Frag), each stating the
	// value's total. Zero: every value is one page, whatever its size (the
	// publisher keeps it within a datagram). Requesters need no setting:
	// Peek learns the fragments from the first page.
	FragmentSize int
	// Window is how many fragment requests of one download are in flight
	// at once; zero takes DefaultWindow.
	Window int
	// MaxTries is the Limit of Peek and Poke: a request sent this many
	// times and unanswered when its next retry falls due gives up, and
	// its waiters get ErrGaveUp. Zero: it retries until cancelled.
	MaxTries int
	// Think, if set, is how long this ship takes to answer: each answer
	// to a peek, poke or legacy ames packet leaves with the first Tick at
	// or after the time it was heard plus Think(). Called once per answer,
	// from inside the Core, so a simulator can draw it from its own
	// seeded source. Nil: answers leave at once.
	Think func() time.Duration
	// Legacy makes the ship answer legacy ames (legacy.go): it acks
	// ames-class messages addressed to it and answers fine requests
	// (wails) for its published values with purrs, and pings its sponsor
	// with a legacy packet instead of a mesa poke. Message and Wail work
	// without it.
	Legacy bool
	// Life is the ship's life (key revision) mod 16, which legacy ames
	// headers carry as its tick.
	Life uint8
	// Observe, if set, is called for every request sent and page
	// received, from inside the Core (for an Endpoint, with its lock
	// held): it must return quickly and must not call back into the
	// endpoint.
	Observe func(Event)
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	EventSend      EventKind = iota // a request sent on Targets
	EventPage                       // a page received
	EventSubscribe                  // a subscription's requests sent on Targets
	EventBeat                       // a heartbeat sent on Targets
	EventAck                        // an authentic ack taken (Status: its entry's status)
	EventValue                      // a subscription answered (Notified: by the protocol)
	EventForged                     // a notification ignored (Status: why)
)

// Event is a trace record for tests and tools.
type Event struct {
	Kind     EventKind
	Rcvr     lane.Ship // the request's receiver / the page's publisher
	Path     string
	Targets  []netip.AddrPort // EventSend, EventSubscribe, EventBeat: the lanes it went to
	From     netip.AddrPort   // EventPage: the lane it came from
	Next     netip.AddrPort   // EventPage: its next-hop, if any
	Hops     int              // EventPage: its hop count
	Fresh    bool             // EventPage: it answered a pending request
	Try      int              // EventSend, EventSubscribe, EventBeat: 1 for the first send
	Session  uint64           // EventAck, EventBeat: the session id
	Status   string           // EventAck: the entry's status; EventForged: the reason
	Notified bool             // EventValue: delivered by an ack or a heartbeat answer
}

// Response is the answer to a request.
type Response struct {
	Data  []byte
	From  netip.AddrPort // lane the page came from
	Next  netip.AddrPort // its next-hop, if any
	Hops  int
	Tries int // times the request was sent (a download's: its most-sent fragment's)
	// Err is ErrGaveUp (Data empty) if the request reached its Limit
	// unanswered, ErrBadValue for a download whose first page is not
	// believable; nil for an answer.
	Err error
	// Notified: a subscription's value that came in an ack or a heartbeat
	// answer (signed by the publisher) rather than in the path's own page.
	Notified bool
}

// Endpoint is a Core on a socket. Create it with New, Start it, Close it.
type Endpoint struct {
	// Static after construction.
	cfg  Config
	conn transport.Conn
	log  *zap.Logger
	kick chan struct{} // wakes the timer goroutine: the Core's deadline may have moved

	mu   sync.Mutex
	core *Core // guarded by mu

	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// New returns an endpoint for cfg on conn.
func New(cfg Config, conn transport.Conn) (*Endpoint, error) {
	if cfg.Clock == nil {
		cfg.Clock = route.NewSystemClock()
	}
	if cfg.Epoch.IsZero() {
		cfg.Epoch = time.Now().Add(-cfg.Clock.Now())
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	core, err := NewCore(cfg, conn.LocalAddr())
	if err != nil {
		return nil, err
	}
	return &Endpoint{
		cfg: core.cfg, conn: conn, log: cfg.Log, core: core,
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}, nil
}

// Ship returns the endpoint's ship.
func (e *Endpoint) Ship() lane.Ship { return e.cfg.Ship }

// Addr returns the endpoint's lane.
func (e *Endpoint) Addr() netip.AddrPort { return e.conn.LocalAddr() }

// Routes returns the endpoint's route table (safe for concurrent use).
func (e *Endpoint) Routes() *route.Table { return e.core.Routes() }

// NotifyStats returns the endpoint's scry-notification counts.
func (e *Endpoint) NotifyStats() NotifyStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.core.NotifyStats()
}

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

// Publish makes value the answer to peeks for path on this ship and, if the
// endpoint runs scry notifications, notifies at once the subscribers whose
// heartbeats it holds.
func (e *Endpoint) Publish(path string, value []byte) {
	e.mu.Lock()
	out := e.core.Grow(path, value, e.cfg.Clock.Now(), nil)
	e.mu.Unlock()
	e.send(out)
	e.wake()
}

// Peek asks rcvr for the value at path and waits for it, re-sending every
// RetryInterval, until ctx ends.
func (e *Endpoint) Peek(ctx context.Context, rcvr lane.Ship, path string) (Response, error) {
	return e.wait(ctx, func(now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
		return e.core.Peek(rcvr, path, now, done, out)
	}, func() { e.core.Cancel(rcvr, path) })
}

// Subscribe asks pub for the value at path, which may not exist yet, and
// waits for it until ctx ends: by scry notifications if pub runs them (and
// its key is in PeerKeys), else by polling (see Core.Subscribe).
func (e *Endpoint) Subscribe(ctx context.Context, pub lane.Ship, path string) (Response, error) {
	return e.wait(ctx, func(now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
		return e.core.Subscribe(pub, path, now, done, out)
	}, func() { e.core.Cancel(pub, path) })
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
	out, err := start(e.cfg.Clock.Now(), func(r Response) {
		select {
		case ch <- r:
		default: // a second answer to a joined request: the first counts
		}
	}, nil)
	e.mu.Unlock()
	if err != nil {
		return Response{}, err
	}
	e.send(out)
	e.wake()
	select {
	case r := <-ch:
		return r, r.Err
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

// wake tells the timer goroutine to look at the Core's deadline again.
func (e *Endpoint) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
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

// routineTimers runs the Core's timers: it sleeps until the Core's next
// deadline, or until woken because a call may have moved the deadline
// earlier. An idle endpoint does not wake at all.
func (e *Endpoint) routineTimers() {
	defer e.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	var out []Datagram
	for {
		now := e.cfg.Clock.Now()
		e.mu.Lock()
		out = e.core.Tick(now, out[:0])
		next := e.core.NextDeadline()
		e.mu.Unlock()
		e.send(out)
		t.Reset(e.timerWait(now, next))
		select {
		case <-e.done:
			return
		case <-t.C:
		case <-e.kick:
			t.Stop() // since Go 1.23 a stopped timer delivers no stale value
		}
	}
}

// timerWait returns how long the timer goroutine sleeps at now for a
// deadline next: until next rounded up to a multiple of Tick on the clock,
// and at least until the next multiple. Timer work is thus batched on a
// Tick grid, and endpoints sharing a clock wake together.
func (e *Endpoint) timerWait(now, next time.Duration) time.Duration {
	tick := e.cfg.Tick
	at := max(min(next, now+maxTimerSleep), now+1)
	at = (at + tick - 1) / tick * tick
	return at - now
}

func (e *Endpoint) routineRead() {
	defer e.wg.Done()
	msgs := make([]transport.Message, 16)
	for i := range msgs {
		msgs[i].Buf = make([]byte, MaxDatagram)
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
		before := e.core.NextDeadline()
		for i := 0; i < n; i++ {
			out = e.core.Handle(msgs[i].Buf[:msgs[i].N], msgs[i].Addr, now, out)
		}
		moved := e.core.NextDeadline() < before
		e.mu.Unlock()
		e.send(out)
		if moved {
			e.wake()
		}
	}
}
