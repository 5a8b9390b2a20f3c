package main

// The HTTP side of `relay run --metrics` (and of the demo's relays): one
// small server for /metrics, /healthz, /readyz and, with metrics-http.pprof,
// /debug/pprof/. Nothing a client does on it may cost forwarding (issue
// 20: 1,500 clients pipelining GET /metrics and never reading added
// 476 MiB to the relay, 6,000 took 1.64 GB and 197 % CPU, forwarding fell
// to 0-10 of 150 peeks and /healthz timed out), so every resource a client
// can hold is capped:
//
//   - connections: at most metrics-max-connections open (slotListener).
//     When all are held, the next connection is accepted and waits while
//     the listener closes, oldest first, a connection idle between
//     requests, else one that has sent no whole request for
//     metricsPressureGrace; only when every connection is busy with a
//     request does it wait for one to end (issue 28: 64 clients that asked
//     /healthz once and kept the connection idle held every slot for
//     metricsIdleTimeout, and no health probe was answered);
//   - time: every connection is closed after metricsReadHeaderTimeout
//     without a request, metricsWriteTimeout on an unread answer, or
//     metricsIdleTimeout idle between requests;
//   - /metrics: at most metrics-max-scrapes at once, the rest answered 503
//     and closed at once, so /healthz and /readyz always find connections
//     free; and the scrapes in progress share gathers (scrapeShare), at
//     most one every metricsGatherInterval, whatever their number.

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/sys/unix"
)

// The metrics listener's caps and timeouts. The two an operator may need
// to change are config keys (metrics-http.max-connections, .max-scrapes);
// the timeouts are far from what any scraper or health check needs.
const (
	// defaultMetricsMaxConns is the default of metrics-http.max-connections:
	// the most connections the listener holds open. With all N held,
	// connection N+1 is accepted and waits while the listener closes an
	// idle one (slotListener); the ones after it wait in the kernel's
	// accept queue, which costs the relay nothing (no goroutine, no
	// buffer, no CPU). A new connection is never refused for want of a
	// slot: refusing it would refuse an honest client and spend the
	// relay's CPU on every reconnection of a hostile one. A connection
	// holds about 20 KiB (its goroutine, 4 KiB read and write buffers),
	// so 64 hold about 1.3 MiB; one Prometheus uses one.
	defaultMetricsMaxConns = 64
	// minMetricsConns and maxMetricsConns bound metrics-http.max-connections:
	// at least one for a scrape and one for /healthz; 4,096 connections
	// hold about 80 MiB, more than a relay should give its metrics.
	minMetricsConns, maxMetricsConns = 2, 4096
	// defaultMetricsMaxScrapes is the default of metrics-http.max-scrapes: the
	// most /metrics requests served at once, waiting for a gather or
	// writing its answer. One more is answered 503 and its connection
	// closed, so /metrics never holds more than this many connections and
	// the rest keep turning over: /healthz and /readyz, which are not
	// limited, get in. Scrapes at the same moment share one gather, so a
	// few Prometheus servers need one each only while they write.
	defaultMetricsMaxScrapes = 8
	// metricsGatherInterval is the least time between the starts of two
	// gathers. A scrape is answered from a gather that started after it
	// arrived, so it sees everything before it (a reload, a datagram); one
	// that arrives within this of the last gather's start waits for the
	// next, and shares it with every scrape arriving meanwhile. A flood
	// of scrapes so costs at most four gathers a second (each about a
	// millisecond), and a Prometheus scraping every 15 s never waits.
	metricsGatherInterval = 250 * time.Millisecond
	// metricsReadHeaderTimeout bounds the wait for a request's headers,
	// from the accept (on a kept connection, from the request's first
	// byte): a client sends them at once, so a connection that sends none
	// gives its slot back within 2 s.
	metricsReadHeaderTimeout = 2 * time.Second
	// metricsReadTimeout bounds the reading of a whole request, a body
	// included (none of the paths reads one).
	metricsReadTimeout = 5 * time.Second
	// metricsWriteTimeout bounds the writing of an answer, from the end of
	// the request's headers: a scrape is about 23 KB (5 KB gzipped),
	// written in milliseconds, so a client that does not read (the issue's
	// attack) has its connection closed after 5 s. Go's pprof handlers
	// extend it by the profile's duration.
	metricsWriteTimeout = 5 * time.Second
	// metricsIdleTimeout is how long a connection is kept between
	// requests. A Prometheus scraping every 15 s keeps its connection; a
	// slower one opens a new one per scrape, which costs a handshake.
	metricsIdleTimeout = 30 * time.Second
	// metricsMaxHeaderBytes bounds a request's headers: a scraper sends a
	// few hundred bytes, a proxy in front adds a few more.
	metricsMaxHeaderBytes = 8 << 10
	// metricsPressureGrace is how long a connection that has sent no
	// whole request yet is safe from being closed to make room
	// (slotListener). A client sends its request right behind the
	// handshake's last ACK, so its headers are in microseconds after the
	// accept on any network; only a lost segment (a retransmission, 200
	// ms or more) makes an honest request later than this, and only under
	// pressure does that cost it the connection. Under pressure the slots
	// so turn over at least max/grace times a second (640 at the default
	// cap): a health probe queued behind N connections that send nothing
	// waits about N/640 s (measured: 0.3 s behind 256, 1.5 s behind
	// 1,000). Without pressure such a connection keeps
	// metricsReadHeaderTimeout.
	metricsPressureGrace = 100 * time.Millisecond
	// metricsShutdownTimeout bounds the metrics listener's shutdown: a
	// scrape in progress gets this long to finish. It is well inside the
	// one second the relay has to exit after SIGTERM.
	metricsShutdownTimeout = 200 * time.Millisecond
)

// metricsOptions are the metrics listener's settings; a zero field takes
// its default.
type metricsOptions struct {
	maxConns   int  // metrics-http.max-connections
	maxScrapes int  // metrics-http.max-scrapes
	pprof      bool // metrics-http.pprof
}

// withDefaults returns o with every zero field set to its default.
func (o metricsOptions) withDefaults() metricsOptions {
	if o.maxConns <= 0 {
		o.maxConns = defaultMetricsMaxConns
	}
	if o.maxScrapes <= 0 {
		o.maxScrapes = defaultMetricsMaxScrapes
	}
	return o
}

// httpStats are the metrics listener's counts, exported with the daemon's
// (relay_metrics_*).
type httpStats struct {
	conns          atomic.Int64  // connections open
	scrapesRefused atomic.Uint64 // /metrics answered 503: metrics-max-scrapes in progress
	gathers        atomic.Uint64 // gathers run for /metrics
}

// metricsHandler serves the metrics listener's paths.
type metricsHandler struct {
	// Static after construction.
	mux     *http.ServeMux
	opts    metricsOptions
	stats   *httpStats
	share   *scrapeShare
	scrapes chan struct{} // a slot per /metrics request in progress
}

// newMetricsHandler serves /metrics from reg, /healthz and /readyz from
// ops (always healthy and ready when ops is nil, as in the demo), and
// with opts.pprof the /debug/pprof/ endpoints. Its counts are ops's, or
// its own without ops.
func newMetricsHandler(reg prometheus.Gatherer, ops *opsStats, opts metricsOptions) *metricsHandler {
	opts = opts.withDefaults()
	h := &metricsHandler{mux: http.NewServeMux(), opts: opts, stats: &httpStats{}, scrapes: make(chan struct{}, opts.maxScrapes)}
	if ops != nil {
		h.stats = &ops.http
	}
	h.share = &scrapeShare{gather: reg.Gather, interval: metricsGatherInterval, gathers: &h.stats.gathers}
	mux := h.mux
	mux.HandleFunc("GET /metrics", h.serveMetrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if ops != nil && ops.stopping.Load() {
			http.Error(w, "stopping", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ops != nil && (!ops.ready.Load() || ops.stopping.Load()) {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	if opts.pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return h
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// serveMetrics answers a scrape from the gather it shares with the
// scrapes arriving with it, or 503 when metrics-max-scrapes are in
// progress. The 503 closes the connection, so a client that pipelines
// requests and never reads cannot hold it.
func (h *metricsHandler) serveMetrics(w http.ResponseWriter, r *http.Request) {
	select {
	case h.scrapes <- struct{}{}:
		defer func() { <-h.scrapes }()
	default:
		h.stats.scrapesRefused.Add(1)
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("%d scrapes in progress (metrics-max-scrapes); try again later", cap(h.scrapes)), http.StatusServiceUnavailable)
		return
	}
	key := scrapeKey{format: expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...), gzip: acceptsGzip(r.Header)}
	body, err := h.share.get(r.Context(), key)
	switch {
	case r.Context().Err() != nil:
		return // the client is gone, or the server stopping
	case err != nil:
		http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Add("Vary", "Accept")
	hd.Add("Vary", "Accept-Encoding")
	hd.Set("Content-Type", string(key.format))
	if key.gzip {
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body) // shared with the other scrapes of the gather: read only
}

// acceptsGzip reports whether an Accept-Encoding in h names gzip with a
// weight above 0.
func acceptsGzip(h http.Header) bool {
	for _, v := range h.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(part, ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			q, ok := strings.CutPrefix(strings.TrimSpace(params), "q=")
			f, err := strconv.ParseFloat(q, 64)
			return !ok || err != nil || f > 0
		}
	}
	return false
}

// scrapeKey is what a scrape's body depends on: its format and whether it
// is gzipped.
type scrapeKey struct {
	format expfmt.Format
	gzip   bool
}

// scrapeShare runs /metrics' gathers: one at a time, each starting at
// least interval after the one before and shared by every scrape that
// arrived before it started. A scrape is so answered with data gathered
// after it arrived; N scrapes at once cost one gather, and one encoding
// for each format they ask for, written to all of them from one []byte;
// and a flood costs at most one gather per interval.
type scrapeShare struct {
	// Static after construction.
	gather   func() ([]*dto.MetricFamily, error)
	interval time.Duration
	gathers  *atomic.Uint64

	mu   sync.Mutex
	next *scrapeRound // guarded by mu: the round a scrape arriving now joins; nil when none waits to start
	last *scrapeRound // guarded by mu: the round started last

	gz *gzip.Writer // owned by the round running: rounds never overlap
}

// scrapeRound is one gather and the bodies encoded from it. The scrape
// that opens a round runs it; the others wait for done.
type scrapeRound struct {
	prev   *scrapeRound           // the round before, which this one starts after; owned by the runner
	keys   map[scrapeKey]struct{} // the bodies asked for; guarded by scrapeShare.mu until the round starts
	start  time.Time              // set when it starts, before done
	bodies map[scrapeKey][]byte   // set before done is closed, read only after
	err    error                  // likewise
	done   chan struct{}
}

// get returns the body for key from the next gather to start, which it
// runs itself if no other scrape is waiting for one. It returns early,
// with ctx's error, when ctx ends; a round it runs is finished first.
func (s *scrapeShare) get(ctx context.Context, key scrapeKey) ([]byte, error) {
	s.mu.Lock()
	r := s.next
	lead := r == nil
	if lead {
		r = &scrapeRound{prev: s.last, keys: map[scrapeKey]struct{}{}, done: make(chan struct{})}
		s.next = r
	}
	r.keys[key] = struct{}{}
	s.mu.Unlock()
	if lead {
		// Others may be waiting on this round: it runs whatever ctx does,
		// for at most an interval and a gather.
		s.run(r)
	}
	select {
	case <-r.done:
		return r.bodies[key], r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run waits for the round before r to end and for the interval since its
// start, then gathers once and encodes every body r's scrapes asked for.
func (s *scrapeShare) run(r *scrapeRound) {
	if prev := r.prev; prev != nil {
		r.prev = nil // no chain of old rounds kept alive
		<-prev.done
		if wait := time.Until(prev.start.Add(s.interval)); wait > 0 {
			time.Sleep(wait)
		}
	}
	s.mu.Lock()
	s.next, s.last = nil, r // scrapes arriving from now on wait for the next round
	r.start = time.Now()
	s.mu.Unlock()
	// Should the gather or an encoding panic (net/http recovers it), the
	// round still ends, with an error, and so does every one after it.
	r.err = errGatherPanicked
	defer close(r.done)
	s.gathers.Add(1)
	mfs, err := s.gather()
	bodies := make(map[scrapeKey][]byte, len(r.keys))
	for k := range r.keys {
		if err != nil {
			break
		}
		bodies[k], err = s.encode(mfs, k)
	}
	r.bodies, r.err = bodies, err
}

// errGatherPanicked is the error of a round whose gather or encoding
// panicked.
var errGatherPanicked = errors.New("the gather panicked")

// encode returns mfs encoded as k says.
func (s *scrapeShare) encode(mfs []*dto.MetricFamily, k scrapeKey) ([]byte, error) {
	var b bytes.Buffer
	w := io.Writer(&b)
	if k.gzip {
		if s.gz == nil {
			s.gz = gzip.NewWriter(&b)
		} else {
			s.gz.Reset(&b)
		}
		w = s.gz
	}
	enc := expfmt.NewEncoder(w, k.format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil {
			return nil, err
		}
	}
	if k.gzip {
		if err := s.gz.Close(); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// metricsServer serves a metrics handler on a listener.
type metricsServer struct {
	srv   *http.Server
	ln    net.Listener
	slots *slotListener // ln
	done  chan error
}

// serveMetrics starts serving h on ln, at most h's maxConns connections
// at once (slotListener: the next waits while an idle one is closed),
// each bounded by the metrics timeouts.
func serveMetrics(ln net.Listener, h *metricsHandler) *metricsServer {
	sl := newSlotListener(ln, h.opts.maxConns, metricsPressureGrace, time.Now)
	ln = sl
	m := &metricsServer{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: metricsReadHeaderTimeout,
			ReadTimeout:       metricsReadTimeout,
			WriteTimeout:      metricsWriteTimeout,
			IdleTimeout:       metricsIdleTimeout,
			MaxHeaderBytes:    metricsMaxHeaderBytes,
			ConnState: func(c net.Conn, s http.ConnState) {
				sl.setState(c, s)
				switch s {
				case http.StateNew:
					h.stats.conns.Add(1)
				case http.StateClosed, http.StateHijacked:
					h.stats.conns.Add(-1)
				}
			},
		},
		ln:    ln,
		slots: sl,
		done:  make(chan error, 1),
	}
	go func() {
		err := m.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		m.done <- err
	}()
	return m
}

// URL returns the base URL the server is reached at.
func (m *metricsServer) URL() string { return "http://" + m.ln.Addr().String() }

// Close shuts the server down, giving requests in progress
// metricsShutdownTimeout to finish.
func (m *metricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownTimeout)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		m.srv.Close()
	}
	return <-m.done
}

// slotListener holds at most max connections open, and keeps the ones it
// holds answering: when all are held and one more connection comes, it
// closes one that is not serving a request, so that a client who holds
// connections without asking anything (issue 28: 64 clients that asked
// /healthz once and kept their connections idle, renewed by reconnecting)
// cannot keep a health probe out. Accept takes the next connection from
// the kernel and, while all max slots are held, closes (oldest first) a
// connection idle between requests, else one that has sent no whole
// request for grace since it was accepted, and returns the new one in the
// freed slot. When every held connection is serving a request (at most
// metrics-max-scrapes of them /metrics, the rest /healthz and /readyz,
// answered at once), or sent its first request less than grace ago, Accept
// waits for one to end or to age; the connections after it wait in the
// kernel's accept queue.
//
// What a closed idle connection costs its client: nothing, for an HTTP
// client that retries an idempotent request on a kept connection the
// server closed (Go's, and so Prometheus', does; any client must, as a
// server may close an idle connection at any moment, RFC 9112 section 9.5).
// Without pressure no connection is closed before its own timeout.
//
// The server reports each connection's state to setState (its
// http.Server.ConnState); a connection's slot is given back when it is
// closed, by the server, its client, or Accept.
type slotListener struct {
	net.Listener
	// Static after construction.
	max   int
	grace time.Duration
	now   func() time.Time

	mu     sync.Mutex
	held   map[*slotConn]struct{} // guarded by mu: the connections holding a slot
	closed int                    // guarded by mu: connections closed to make room (evicted)

	wake chan struct{} // 1-buffered: a slot freed, or a connection became idle
	done chan struct{} // closed by Close
	once sync.Once
}

// slotConn is a connection slotListener holds.
type slotConn struct {
	net.Conn
	raw   syscall.RawConn // nil if Conn has no descriptor (tests' pipes)
	l     *slotListener
	state http.ConnState // guarded by l.mu: as the server last reported it
	since time.Time      // guarded by l.mu: when it entered state (for StateNew, when it was accepted)
	once  sync.Once
}

// newSlotListener holds at most max of ln's connections at once, and
// under pressure closes one that has sent no request for grace; now is
// the clock.
func newSlotListener(ln net.Listener, max int, grace time.Duration, now func() time.Time) *slotListener {
	return &slotListener{
		Listener: ln,
		max:      max,
		grace:    grace,
		now:      now,
		held:     make(map[*slotConn]struct{}, max),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

// Accept returns the next connection once it holds a slot (see
// slotListener).
func (l *slotListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &slotConn{Conn: c, l: l, state: http.StateNew}
	if scn, ok := c.(syscall.Conn); ok {
		sc.raw, _ = scn.SyscallConn()
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		l.mu.Lock()
		now := l.now()
		if len(l.held) < l.max {
			sc.since = now
			l.held[sc] = struct{}{}
			l.mu.Unlock()
			return sc, nil
		}
		victim, retry := l.victimLocked(now)
		if victim != nil {
			l.closed++
		}
		l.mu.Unlock()
		if victim != nil {
			victim.Close() // gives its slot back at once
			continue
		}
		var aged <-chan time.Time
		if retry > 0 {
			if timer == nil {
				timer = time.NewTimer(retry)
			} else {
				timer.Reset(retry)
			}
			aged = timer.C
		}
		select {
		case <-l.wake:
		case <-aged:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// victimLocked returns the connection to close for room at now: the one
// idle longest, else the one accepted longest ago that has sent no whole
// request for grace; or none, and how long until the oldest such becomes
// one (0: none will without news from setState). A connection whose
// request bytes wait unread in the kernel (sentUnread) has sent its
// request: the server has not been scheduled to read it yet (a loaded
// machine), and it is not closed.
func (l *slotListener) victimLocked(now time.Time) (victim *slotConn, retry time.Duration) {
	var idle, fresh *slotConn
	for c := range l.held {
		switch c.state {
		case http.StateIdle:
			if idle == nil || c.since.Before(idle.since) {
				idle = c
			}
		case http.StateNew:
			if (fresh == nil || c.since.Before(fresh.since)) && !c.sentUnread() {
				fresh = c
			}
		}
	}
	switch {
	case idle != nil:
		return idle, 0
	case fresh == nil:
		return nil, 0
	case now.Sub(fresh.since) >= l.grace:
		return fresh, 0
	}
	return nil, fresh.since.Add(l.grace).Sub(now)
}

// sentUnread reports whether bytes the client sent wait in the kernel's
// receive queue, not yet read by the server (SIOCINQ). Only asked under
// pressure, of connections the server has read nothing from.
func (c *slotConn) sentUnread() bool {
	if c.raw == nil {
		return false
	}
	n := 0
	if err := c.raw.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	}); err != nil {
		return false
	}
	return n > 0
}

// setState records a connection's state as the server reports it
// (http.Server.ConnState).
func (l *slotListener) setState(c net.Conn, s http.ConnState) {
	sc, ok := c.(*slotConn)
	if !ok {
		return
	}
	if s == http.StateClosed || s == http.StateHijacked {
		sc.release()
		return
	}
	l.mu.Lock()
	if s != sc.state {
		sc.state, sc.since = s, l.now()
	}
	l.mu.Unlock()
	if s == http.StateIdle {
		l.signal()
	}
}

// evicted returns how many connections were closed to make room.
func (l *slotListener) evicted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// signal wakes an Accept waiting for room.
func (l *slotListener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Close closes the listener and ends an Accept waiting for room.
func (l *slotListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Close closes the connection and gives its slot back.
func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// release gives the connection's slot back, once.
func (c *slotConn) release() {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.held, c)
		c.l.mu.Unlock()
		c.l.signal()
	})
}
