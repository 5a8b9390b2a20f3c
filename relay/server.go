package relay

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/relay/transport"
)

// Clock is the server's time source: route.Clock.
type Clock = route.Clock

// SystemClock is the real monotonic clock: route.SystemClock.
type SystemClock = route.SystemClock

// NewSystemClock returns a clock reading zero now.
func NewSystemClock() *SystemClock { return route.NewSystemClock() }

// ServerConfig configures a Server; zero fields take defaults.
type ServerConfig struct {
	// Batch is the most datagrams read (and decided) per system call.
	Batch int
	// ReadBuffer is the length of each batch slot's read buffer; 0 means
	// ReadBufferSize. A datagram of ReadBuffer bytes or more is dropped as
	// DropTooLarge, never decided cut.
	ReadBuffer int
	// ExpiryInterval is how often timers are advanced.
	ExpiryInterval time.Duration
	// Clock defaults to a SystemClock.
	Clock Clock
	// Log defaults to a no-op logger.
	Log *zap.Logger
	// Tap, if set, is called from the reader goroutines for every datagram
	// a public socket reads (in: remote sent it to local) and sends (!in:
	// local to remote), the ship's datagrams too as they leave; reads
	// from and writes to the ship's device itself are not tapped.
	// It must not retain b. It is for packet capture; it costs a call per
	// datagram.
	Tap func(in bool, local, remote netip.AddrPort, b []byte)
	// Decisions, if set, is told what the relay did with each datagram it
	// wants (DecisionLog), the ship's too: for a debug log. Asking costs
	// a call per datagram (Want); a decision it wants, a call to Log with
	// the Decision Handle returned (recorded as it was made: no counters
	// are read).
	Decisions DecisionLog
	// Ship, in fronting mode (Config.Front), is the fronted ship's device
	// (relay/front's TUN, or transporttest.NewPipe in tests): a Conn whose reads
	// are what the ship sent, Addr the lane it addressed, and whose writes
	// reach the ship from Addr. A Batch's PortShip sends are written there as they are;
	// what the ship sends leaves by the first socket.
	Ship transport.Conn
}

// Server runs a Relay on one or more sockets: one reader goroutine per
// socket, and one for the ship's device in fronting mode (routineRead),
// and one timer goroutine (routineExpire).
type Server struct {
	// Static after construction.
	relay   *Relay
	conns   []transport.Conn
	readers []*sockReader
	cfg     ServerConfig
	log     *zap.Logger

	closing  atomic.Bool
	done     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
	writeErr atomic.Uint64 // datagrams the socket refused to send
	readErr  atomic.Uint64 // failed reads other than closure
	batches  atomic.Uint64 // read batches
	batchSum atomic.Uint64 // datagrams over all read batches
	service  ServiceHistogram
}

// NewServer returns a server for r on conns. It does not start it.
func NewServer(r *Relay, conns []transport.Conn, cfg ServerConfig) *Server {
	if cfg.Batch <= 0 {
		cfg.Batch = transport.DefaultBatchSize
	}
	if cfg.ReadBuffer <= 0 {
		cfg.ReadBuffer = ReadBufferSize
	}
	if cfg.ExpiryInterval <= 0 {
		cfg.ExpiryInterval = DefaultExpiryInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = NewSystemClock()
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	s := &Server{relay: r, conns: conns, cfg: cfg, log: cfg.Log, done: make(chan struct{})}
	for _, c := range conns {
		s.readers = append(s.readers, &sockReader{conn: c})
	}
	if cfg.Ship != nil {
		s.readers = append(s.readers, &sockReader{conn: cfg.Ship, ship: true})
	}
	return s
}

// sockReader is one socket's read loop (its decisions are made into a
// Reader of its own).
type sockReader struct {
	conn transport.Conn
	ship bool // the ship's device: datagrams are the ship's own
	// batchMu is held while a batch is decided and sent, so that Close
	// can wait for the batch in hand before closing the socket. It is the
	// outermost lock: the relay's own are taken under it, each alone
	// (relay.go's package comment, "Locks").
	batchMu sync.Mutex
}

// Start launches the server's goroutines and returns at once.
func (s *Server) Start() {
	for _, rd := range s.readers {
		s.wg.Add(1)
		go s.routineRead(rd)
	}
	s.wg.Add(1)
	go s.routineExpire()
}

// Close stops the server: it stops reading, lets each reader finish
// deciding and sending the batch in hand, closes the sockets, and waits for
// every goroutine to return. Close is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.closing.Store(true)
		close(s.done)
		for _, rd := range s.readers {
			rd.batchMu.Lock() // waits out the batch in hand
			if e := rd.conn.Close(); e != nil && err == nil {
				err = e
			}
			rd.batchMu.Unlock()
		}
	})
	s.wg.Wait()
	return err
}

// WriteErrors returns how many datagrams the sockets refused to send.
func (s *Server) WriteErrors() uint64 { return s.writeErr.Load() }

// ReadErrors returns how many reads failed for reasons other than closure.
func (s *Server) ReadErrors() uint64 { return s.readErr.Load() }

// KernelDrops returns the datagrams the sockets' receive queues dropped, for
// sockets that can tell (transport.DropCounter).
func (s *Server) KernelDrops() uint64 {
	var n uint64
	for _, c := range s.conns {
		if d, ok := c.(transport.DropCounter); ok {
			n += d.Drops()
		}
	}
	return n
}

// SocketBuffers returns the smallest receive and send buffers the kernel
// granted any of the server's public sockets (transport.GrantedBuffers),
// and how many sockets could tell; with none, recv and send are 0. It
// makes two system calls per socket: for scrapes and start-up, not per
// packet.
func (s *Server) SocketBuffers() (recv, send, sockets int) {
	for _, c := range s.conns {
		r, w, ok := transport.GrantedBuffers(c)
		if !ok {
			continue
		}
		if sockets == 0 || r < recv {
			recv = r
		}
		if sockets == 0 || w < send {
			send = w
		}
		sockets++
	}
	return recv, send, sockets
}

// Relay returns the server's decision core.
func (s *Server) Relay() *Relay { return s.relay }

// BatchStats returns the number of read batches and the datagrams in them.
func (s *Server) BatchStats() (batches, datagrams uint64) {
	return s.batches.Load(), s.batchSum.Load()
}

// ServiceTimes returns the histogram of the time datagrams spend in the
// server, from their read's return to their batch's last write's return.
func (s *Server) ServiceTimes() *ServiceHistogram { return &s.service }

// routineExpire advances the relay's timers every ExpiryInterval.
func (s *Server) routineExpire() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ExpiryInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.relay.Expire(s.cfg.Clock.Now())
		}
	}
}

// routineRead reads batches from rd's socket, decides each datagram and
// sends the results, until the socket is closed. Socket errors other than
// closure are counted and the loop goes on; bad datagrams are the relay's to
// count.
func (s *Server) routineRead(rd *sockReader) {
	defer s.wg.Done()
	c := rd.conn
	local := c.LocalAddr()
	in := make([]transport.Message, s.cfg.Batch)
	for i := range in {
		// Leave GrowRoom spare so Handle can add a next-hop or origin.
		in[i].Buf = make([]byte, s.cfg.ReadBuffer, s.cfg.ReadBuffer+GrowRoom)
	}
	// What a reader decides leaves by its own socket; what the ship's
	// device reader decides, by the first public socket.
	pub := c
	if rd.ship {
		pub = s.conns[0]
	}
	pubLocal := pub.LocalAddr()
	gso, _ := pub.(transport.GSOer)
	out := s.relay.NewReader(s.cfg.Batch)
	out.CountPerBatch()
	mugBufs := make([][]byte, s.cfg.Batch)
	var lastWarn time.Time
	for {
		n, err := c.ReadBatch(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.closing.Load() {
				return
			}
			// Not per packet: at most one warning a second, and a pause
			// so that a socket failing at once cannot spin a core.
			s.readErr.Add(1)
			if now := time.Now(); now.Sub(lastWarn) >= readWarnInterval {
				s.log.Warn("read failed", zap.Error(err), zap.Uint64("read_errors", s.readErr.Load()))
				lastWarn = now
			}
			time.Sleep(readErrorPause)
			continue
		}
		rd.batchMu.Lock()
		if s.closing.Load() {
			// Read after shutdown began: not ours to handle.
			rd.batchMu.Unlock()
			return
		}
		s.batches.Add(1)
		s.batchSum.Add(uint64(n))
		now := s.cfg.Clock.Now()
		out.Reset()
		if !rd.ship {
			// Hash the batch's mesa bodies interleaved before deciding
			// (Reader.MugBatch); nothing writes in[i] until its Handle.
			for i := 0; i < n; i++ {
				mugBufs[i] = in[i].Buf[:in[i].N]
			}
			out.MugBatch(mugBufs[:n])
		}
		if s.relay.pending.IndexSlots() >= PrefetchMinIndexSlots {
			for i := 0; i < n; i++ {
				s.relay.Prefetch(in[i].Buf[:in[i].N], out)
			}
		}
		for i := 0; i < n; i++ {
			m := &in[i]
			if m.Trunc || m.N >= len(m.Buf) {
				// Longer than the buffer: what was read is not the
				// datagram, and goes nowhere.
				s.relay.dropTooLarge(out, m.Buf[:m.N])
				continue
			}
			var d *Decision
			if rd.ship {
				d = s.relay.HandleFromShip(m.Buf[:m.N:cap(m.Buf)], m.Addr, now, out)
			} else {
				if s.cfg.Tap != nil {
					s.cfg.Tap(true, local, m.Addr, m.Buf[:m.N])
				}
				d = s.relay.Handle(m.Buf[:m.N:cap(m.Buf)], m.Addr, now, out)
			}
			if s.cfg.Decisions != nil && s.cfg.Decisions.Want() {
				s.cfg.Decisions.Log(d)
			}
		}
		// Counted before sent, as a Reader that flushes per datagram would.
		out.Flush()
		public, ship := out.Split()
		if s.cfg.Tap != nil {
			for i := range public {
				m := &public[i]
				s.cfg.Tap(false, pubLocal, m.Addr, m.Buf[:m.N])
			}
		}
		if gso != nil && gso.GSO() {
			// Runs to one lane share one send; each lane keeps its order.
			transport.GroupByAddr(public)
		}
		ok := s.writeAll(pub, public)
		switch {
		case len(ship) == 0:
		case s.cfg.Ship == nil:
			// A fronting relay served without the ship's device (a
			// caller's error): what is for the ship cannot be sent.
			s.writeErr.Add(uint64(len(ship)))
		default:
			// The ship's device closing stops only its own reader.
			if shipOK := s.writeAll(s.cfg.Ship, ship); rd.ship {
				ok = ok && shipOK
			}
		}
		s.service.Observe(s.cfg.Clock.Now()-now, n)
		// Drop references to datagram buffers before the next read.
		clear(out.Sends)
		clear(out.public)
		clear(out.ship)
		rd.batchMu.Unlock()
		if !ok {
			return
		}
	}
}

// writeAll sends msgs, skipping (and counting) any datagram the socket
// refuses, such as one to an unreachable address family. It reports false
// once the socket is closed.
func (s *Server) writeAll(c transport.Conn, msgs []transport.Message) bool {
	for len(msgs) > 0 {
		n, err := c.WriteBatch(msgs)
		if err == nil {
			return true
		}
		if errors.Is(err, net.ErrClosed) {
			s.writeErr.Add(uint64(len(msgs) - n))
			return false
		}
		if n >= len(msgs) {
			return true
		}
		s.writeErr.Add(1)
		msgs = msgs[n+1:]
	}
	return true
}

// dropTooLarge counts a datagram longer than the server's read buffer,
// which is not decided: its bytes were cut.
func (r *Relay) dropTooLarge(out *Reader, b []byte) {
	r.bind(out)
	out.begin(false, netip.AddrPort{}, len(b))
	out.dropOther(b, DropTooLarge)
}
