package main

// Issue 28: 64 TCP clients that each asked /healthz once and kept the
// connection idle held every slot of the metrics listener for
// metricsIdleTimeout (renewed by reconnecting), and no health probe was
// answered. The listener now closes an idle connection when one more
// comes (slotListener). These tests run on real loopback TCP.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	// idleHolders is the attack's client count: the listener's default
	// connection cap, every slot.
	idleHolders = defaultMetricsMaxConns
	// healthProbes is how many health probes run under the attack, one
	// after another, each on a new connection with relay health's own
	// timeout (defaultHealthTimeout).
	healthProbes = 3
	// keptScrapers, keptScrapes: the honest twin's scrapers, each on its
	// own kept-alive client, scraping keptScrapes times one after
	// another.
	keptScrapers = 3
	keptScrapes  = 8
	// slotsWait bounds the tests' waits for the listener (bounded polling
	// on I/O, not a condition of success).
	slotsWait = 10 * time.Second
)

// startSlotsServer serves the metrics handler with the default caps on a
// loopback listener, closed at cleanup.
func startSlotsServer(t *testing.T) (*metricsServer, *opsStats) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ops := &opsStats{}
	ops.ready.Store(true)
	m := serveMetrics(ln, newMetricsHandler(prometheus.GathererFunc((&countingGatherer{}).Gather), ops, metricsOptions{}))
	t.Cleanup(func() { m.Close() })
	return m, ops
}

// holdIdle runs n clients that each connect, ask /healthz once, read the
// answer and keep the connection without a word, connecting again when
// the server closes it, until ctx ends. answered counts their answers;
// with silent set they ask nothing, and answered counts their
// connections.
func holdIdle(ctx context.Context, addr string, n int, silent bool, answered *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp4", addr)
				if err != nil {
					continue
				}
				stop := context.AfterFunc(ctx, func() { c.Close() })
				br := bufio.NewReader(c)
				switch {
				case silent:
					answered.Add(1)
				default:
					fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n")
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						break
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					answered.Add(1)
				}
				io.Copy(io.Discard, br) // hold it until the server (or ctx) closes it
				stop()
				c.Close()
			}
		})
	}
	return &wg
}

// probeHealth runs relay health against base's /healthz and returns
// whether it passed and how long it took.
func probeHealth(base string) (bool, time.Duration, string) {
	var out strings.Builder
	t0 := time.Now()
	code := runHealth([]string{"--url", base + "/healthz"}, &out, &out)
	return code == 0, time.Since(t0), strings.TrimSpace(out.String())
}

// scrapeKept runs keptScrapers scrapers, each scraping keptScrapes times
// on a kept-alive client, and returns the scrapes that failed (an error
// or not 200, with the reason) and the connections the scrapers dialled.
// With untilClosed, a scraper waits after each scrape until its kept
// connection has been closed by the server (its client saw the close).
func scrapeKept(t *testing.T, base string, untilClosed bool) (lost []string, dials int64) {
	t.Helper()
	var mu sync.Mutex
	var n atomic.Int64
	var wg sync.WaitGroup
	for s := range keptScrapers {
		wg.Go(func() {
			var last *closeConn
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				n.Add(1)
				cc := &closeConn{Conn: c, closed: make(chan struct{})}
				mu.Lock()
				last = cc
				mu.Unlock()
				return cc, nil
			}
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial}}
			defer client.CloseIdleConnections()
			for i := range keptScrapes {
				resp, err := client.Get(base + "/metrics")
				why := ""
				if err != nil {
					why = err.Error()
				} else {
					body, rerr := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || rerr != nil || !strings.Contains(string(body), "test_gather") {
						why = fmt.Sprintf("%s %v %q", resp.Status, rerr, body)
					}
				}
				mu.Lock()
				if why != "" {
					lost = append(lost, fmt.Sprintf("scraper %d scrape %d: %s", s, i, why))
				}
				kept := last
				mu.Unlock()
				if untilClosed && kept != nil {
					select {
					case <-kept.closed:
					case <-time.After(slotsWait):
						t.Errorf("scraper %d: its connection not closed for room within %v", s, slotsWait)
					}
				}
			}
		})
	}
	wg.Wait()
	return lost, n.Load()
}

// closeConn is a client's connection that tells when it is closed.
type closeConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestHealthAnsweredBesideIdleClients: 64 clients that asked /healthz
// once and keep their connections idle (reconnecting when closed) hold
// every slot, yet each of 3 health probes, relay health itself, is
// answered at once; and kept-alive scrapers scraping meanwhile, whose
// connections are closed for room between their scrapes, lose no scrape
// (their client retries on a new connection). It fails if idle connections are not closed under pressure (as
// before issue 28: 0/3 probes, each timing out after 2 s).
func TestHealthAnsweredBesideIdleClients(t *testing.T) {
	m, ops := startSlotsServer(t)
	base := m.URL()
	ctx, cancel := context.WithCancel(context.Background())
	var answered atomic.Int64
	holders := holdIdle(ctx, m.ln.Addr().String(), idleHolders, false, &answered)
	defer func() { cancel(); holders.Wait() }()
	full := func() bool { return answered.Load() >= idleHolders && ops.http.conns.Load() == idleHolders }
	if err := waitUntil(context.Background(), slotsWait, full); err != nil {
		t.Fatalf("the %d holders: %d answered, %d connections open: %v", idleHolders, answered.Load(), ops.http.conns.Load(), err)
	}

	ok := 0
	var slowest time.Duration
	for i := range healthProbes {
		pass, took, out := probeHealth(base)
		slowest = max(slowest, took)
		if pass {
			ok++
		} else {
			t.Errorf("probe %d after %v: %s", i, took.Round(time.Millisecond), out)
		}
	}
	// Between its scrapes a scraper waits until its kept connection has
	// been closed for room (a holder reconnecting closes the connection
	// idle longest): its next scrape needs a new one.
	lost, dials := scrapeKept(t, base, true)
	for _, l := range lost {
		t.Error(l)
	}
	t.Logf("%d idle holders: %d/%d health probes answered, slowest %v; %d/%d kept-alive scrapes answered on %d connections; %d connections closed for room, %d holder answers",
		idleHolders, ok, healthProbes, slowest.Round(time.Millisecond), keptScrapers*keptScrapes-len(lost), keptScrapers*keptScrapes, dials, m.slots.evicted(), answered.Load())
	m.slots.mu.Lock()
	held := len(m.slots.held)
	m.slots.mu.Unlock()
	if held > defaultMetricsMaxConns {
		t.Errorf("%d connections hold a slot, over the cap of %d", held, defaultMetricsMaxConns)
	}
}

// TestKeptScrapersKeepTheirConnections is the honest twin without an
// attack: kept-alive scrapers lose nothing and keep one connection each,
// none closed for room, as a Prometheus scraping every 15 s keeps its own.
// It fails if the listener closes idle connections without pressure.
func TestKeptScrapersKeepTheirConnections(t *testing.T) {
	m, _ := startSlotsServer(t)
	lost, dials := scrapeKept(t, m.URL(), false)
	for _, l := range lost {
		t.Error(l)
	}
	if dials != keptScrapers || m.slots.evicted() != 0 {
		t.Errorf("%d scrapers dialled %d connections for %d scrapes, %d closed for room; want one each, none closed",
			keptScrapers, dials, keptScrapers*keptScrapes, m.slots.evicted())
	}
}

// TestHealthAnsweredBesideSilentClients: 64 clients that connect and send
// nothing, connecting again when closed, hold every slot; each of 3
// health probes is answered once the oldest has been silent for
// metricsPressureGrace, well within relay health's timeout. It fails if
// silent connections keep their slots for metricsReadHeaderTimeout under
// pressure (the probes would wait up to 2 s).
func TestHealthAnsweredBesideSilentClients(t *testing.T) {
	m, ops := startSlotsServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	var conns atomic.Int64
	holders := holdIdle(ctx, m.ln.Addr().String(), idleHolders, true, &conns)
	defer func() { cancel(); holders.Wait() }()
	full := func() bool { return conns.Load() >= idleHolders && ops.http.conns.Load() == idleHolders }
	if err := waitUntil(context.Background(), slotsWait, full); err != nil {
		t.Fatalf("the %d silent clients: %d connections made, %d open: %v", idleHolders, conns.Load(), ops.http.conns.Load(), err)
	}
	var slowest time.Duration
	for i := range healthProbes {
		pass, took, out := probeHealth(m.URL())
		slowest = max(slowest, took)
		if !pass || took > defaultHealthTimeout/2 {
			t.Errorf("probe %d after %v: %s; want an answer within %v", i, took.Round(time.Millisecond), out, defaultHealthTimeout/2)
		}
	}
	t.Logf("%d silent clients: %d health probes, slowest %v; %d connections closed for room, %d made", idleHolders, healthProbes, slowest.Round(time.Millisecond), m.slots.evicted(), conns.Load())
}

// TestSentRequestNotClosedForRoom: under pressure a connection that has
// sent its request, whose bytes wait unread because the server has not
// been scheduled to read them (a loaded machine: a health probe failed so
// in a CI-like run, "connection reset by peer"), is not closed to make
// room however long it waits; one that has sent nothing is, after grace.
func TestSentRequestNotClosedForRoom(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const grace = 100 * time.Millisecond
	now := time.Unix(1000, 0)
	l := newSlotListener(ln, 2, grace, func() time.Time { return now })
	accept := func(send bool) (*slotConn, net.Conn) {
		t.Helper()
		client, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		if send {
			fmt.Fprint(client, "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n")
		}
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*slotConn), client
	}
	sent, _ := accept(true)
	deadline := time.Now().Add(slotsWait)
	for !sent.sentUnread() { // the request's bytes reach the server's socket
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the server's socket")
		}
		time.Sleep(time.Millisecond)
	}
	now = now.Add(time.Millisecond)
	silent, _ := accept(false)
	now = now.Add(10 * grace)
	l.mu.Lock()
	victim, _ := l.victimLocked(now)
	l.mu.Unlock()
	if victim != silent {
		t.Fatalf("victim %p, want the silent connection %p (the one that sent its request is %p)", victim, silent, sent)
	}
	silent.Close()
	l.mu.Lock()
	victim, _ = l.victimLocked(now)
	l.mu.Unlock()
	if victim != nil {
		t.Fatalf("with only the connection that sent its request held, victim %p", victim)
	}
}
