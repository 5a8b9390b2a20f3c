package relay

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/urbit-relay/relay/relay/transport"
)

// Clock gives monotonic time as a duration since an arbitrary epoch. The
// decision core never reads time itself; the server asks its Clock once per
// batch.
type Clock interface{ Now() time.Duration }

// SystemClock is the real monotonic clock, measured from its creation. Under
// testing/synctest it follows the bubble's fake time.
type SystemClock struct{ start time.Time }

// NewSystemClock returns a clock reading zero now.
func NewSystemClock() *SystemClock { return &SystemClock{start: time.Now()} }

// Now returns the time since the clock was created.
func (c *SystemClock) Now() time.Duration { return time.Since(c.start) }

// ServerConfig configures a Server; zero fields take defaults.
type ServerConfig struct {
	// Batch is the most datagrams read (and decided) per system call.
	Batch int
	// ExpiryInterval is how often timers are advanced.
	ExpiryInterval time.Duration
	// Clock defaults to a SystemClock.
	Clock Clock
	// Log defaults to a no-op logger.
	Log *zap.Logger
}

// Server runs a Relay on one or more sockets: one reader goroutine per
// socket (RoutineRead) and one timer goroutine (RoutineExpire).
type Server struct {
	// Static after construction.
	relay *Relay
	conns []transport.Conn
	cfg   ServerConfig
	log   *zap.Logger

	closing  atomic.Bool
	done     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
	writeErr atomic.Uint64 // datagrams the socket refused to send
	batches  atomic.Uint64 // read batches
	batchSum atomic.Uint64 // datagrams over all read batches
}

// NewServer returns a server for r on conns. It does not start it.
func NewServer(r *Relay, conns []transport.Conn, cfg ServerConfig) *Server {
	if cfg.Batch <= 0 {
		cfg.Batch = transport.DefaultBatchSize
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
	return &Server{relay: r, conns: conns, cfg: cfg, log: cfg.Log, done: make(chan struct{})}
}

// Start launches the server's goroutines and returns at once.
func (s *Server) Start() {
	for _, c := range s.conns {
		s.wg.Add(1)
		go s.RoutineRead(c)
	}
	s.wg.Add(1)
	go s.RoutineExpire()
}

// Close stops the server: it closes its sockets, which ends the readers
// after the batch in hand is sent, and waits for every goroutine to return.
// Close is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.closing.Store(true)
		close(s.done)
		for _, c := range s.conns {
			if e := c.Close(); e != nil && err == nil {
				err = e
			}
		}
	})
	s.wg.Wait()
	return err
}

// WriteErrors returns how many datagrams the sockets refused to send.
func (s *Server) WriteErrors() uint64 { return s.writeErr.Load() }

// BatchStats returns the number of read batches and the datagrams in them.
func (s *Server) BatchStats() (batches, datagrams uint64) {
	return s.batches.Load(), s.batchSum.Load()
}

// RoutineExpire advances the relay's timers every ExpiryInterval.
func (s *Server) RoutineExpire() {
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

// RoutineRead reads batches from c, decides each datagram and sends the
// results, until c is closed. Socket errors other than closure are counted
// and the loop goes on; bad datagrams are the relay's to count.
func (s *Server) RoutineRead(c transport.Conn) {
	defer s.wg.Done()
	in := make([]transport.Message, s.cfg.Batch)
	for i := range in {
		// Leave GrowRoom spare so Handle can add a next-hop or origin.
		in[i].Buf = make([]byte, MaxPacket, MaxPacket+GrowRoom)
	}
	outMsgs := make([]transport.Message, 0, 2*s.cfg.Batch)
	out := NewOut(s.cfg.Batch)
	for {
		n, err := c.ReadBatch(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.closing.Load() {
				return
			}
			s.log.Warn("read failed", zap.Error(err))
			continue
		}
		s.batches.Add(1)
		s.batchSum.Add(uint64(n))
		now := s.cfg.Clock.Now()
		out.Reset()
		for i := 0; i < n; i++ {
			m := &in[i]
			s.relay.Handle(m.Buf[:m.N:cap(m.Buf)], m.Addr, now, out)
		}
		if len(out.Sends) == 0 {
			continue
		}
		outMsgs = outMsgs[:0]
		for _, snd := range out.Sends {
			outMsgs = append(outMsgs, transport.Message{Buf: snd.Buf, N: len(snd.Buf), Addr: snd.To})
		}
		if !s.writeAll(c, outMsgs) {
			return
		}
		// Drop references to datagram buffers before the next read.
		clear(outMsgs)
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
