package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// countingGatherer is a gatherer of one gauge whose value is the gather's
// number (1, 2, ...), so a body tells which gather it came from. With
// hold set, each gather waits for a value from it.
type countingGatherer struct {
	n    atomic.Int64
	hold chan struct{}
}

func (g *countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	if g.hold != nil {
		<-g.hold
	}
	n := float64(g.n.Add(1))
	name, help := "test_gather", "The gather's number."
	return []*dto.MetricFamily{{
		Name:   &name,
		Help:   &help,
		Type:   dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: &n}}},
	}}, nil
}

var textKey = scrapeKey{format: expfmt.NewFormat(expfmt.TypeTextPlain)}

// TestScrapeShareConcurrentScrapesShareOneGather: scrapes arriving
// together, in any number, are answered by one gather and one encoding,
// every one written from the same bytes; a scrape that comes later is
// answered by a gather that started after it came, never an older one;
// and within metricsGatherInterval of a gather's start the next waits.
// It fails if the share is taken out (each scrape gathering), if a round
// stays open after it starts (a later scrape answered with older data),
// or if the interval is not kept.
func TestScrapeShareConcurrentScrapesShareOneGather(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &countingGatherer{}
		var gathers atomic.Uint64
		s := &scrapeShare{gather: g.Gather, interval: metricsGatherInterval, gathers: &gathers}
		ctx := context.Background()

		first, err := s.get(ctx, textKey)
		if err != nil || !bytes.Contains(first, []byte("test_gather 1")) {
			t.Fatalf("first scrape %q, %v", first, err)
		}
		start := time.Now()
		const n = 200
		bodies := make([][]byte, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				b, err := s.get(ctx, textKey)
				if err != nil {
					t.Error(err)
				}
				bodies[i] = b
			})
		}
		wg.Wait()
		if got := gathers.Load(); got != 2 {
			t.Errorf("%d gathers for one scrape and then %d together, want 2", got, n)
		}
		if waited := time.Since(start); waited != metricsGatherInterval {
			t.Errorf("the %d scrapes waited %v, want the interval since the first gather, %v", n, waited, metricsGatherInterval)
		}
		for i, b := range bodies {
			if !bytes.Contains(b, []byte("test_gather 2")) || &b[0] != &bodies[0][0] {
				t.Fatalf("scrape %d: %q, not the shared body of gather 2", i, b)
			}
		}

		// Long after: no wait, and a new gather.
		time.Sleep(time.Minute)
		start = time.Now()
		if b, _ := s.get(ctx, textKey); !bytes.Contains(b, []byte("test_gather 3")) || time.Since(start) != 0 {
			t.Errorf("a scrape a minute later: %q after %v, want gather 3 at once", b, time.Since(start))
		}
	})
}

// TestScrapeShareLateScrapeWaitsForANewGather: a scrape arriving while a
// gather is in progress is not answered from it (it may predate what the
// scrape wants to see) but from the next, which the scrapes arriving
// meanwhile share. It fails if a round accepts scrapes once started.
func TestScrapeShareLateScrapeWaitsForANewGather(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &countingGatherer{hold: make(chan struct{})}
		var gathers atomic.Uint64
		s := &scrapeShare{gather: g.Gather, interval: metricsGatherInterval, gathers: &gathers}
		ctx := context.Background()
		var early, late [][]byte
		var mu sync.Mutex
		scrape := func(into *[][]byte) {
			b, err := s.get(ctx, textKey)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			*into = append(*into, b)
			mu.Unlock()
		}
		var wg sync.WaitGroup
		wg.Go(func() { scrape(&early) })
		synctest.Wait() // the first gather has started, and is held
		for range 3 {
			wg.Go(func() { scrape(&late) })
		}
		synctest.Wait()
		g.hold <- struct{}{} // gather 1 ends
		synctest.Wait()      // the late ones' round waits out the interval, then gathers
		g.hold <- struct{}{}
		wg.Wait()
		if !bytes.Contains(early[0], []byte("test_gather 1")) {
			t.Errorf("early scrape %q, want gather 1", early[0])
		}
		for _, b := range late {
			if !bytes.Contains(b, []byte("test_gather 2")) {
				t.Errorf("late scrape %q, want gather 2", b)
			}
		}
		if gathers.Load() != 2 {
			t.Errorf("%d gathers, want 2", gathers.Load())
		}
	})
}

// TestScrapeShareFloodIsRateBounded: 64 scrapers asking again the moment
// they are answered, for 10 s, cost at most one gather per
// metricsGatherInterval. It fails without the interval.
func TestScrapeShareFloodIsRateBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &countingGatherer{}
		var gathers atomic.Uint64
		s := &scrapeShare{gather: g.Gather, interval: metricsGatherInterval, gathers: &gathers}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var scrapes atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				// At most 100 each: without the interval no time would
				// pass, and the loop would not end.
				for i := 0; i < 100 && ctx.Err() == nil; i++ {
					if _, err := s.get(ctx, textKey); err == nil {
						scrapes.Add(1)
					}
				}
			})
		}
		wg.Wait()
		// One at 0 s and one per interval to 10 s, and one a scraper opened
		// as the 10 s ran out, whose leader runs it all the same.
		want := uint64(10*time.Second/metricsGatherInterval) + 2
		if got := gathers.Load(); got > want || scrapes.Load() < 64*int64(want-3) {
			t.Errorf("%d scrapes cost %d gathers in 10 s; want at most %d gathers, answering every scraper each time", scrapes.Load(), got, want)
		}
	})
}

// TestScrapeShareGivesUpWithTheRequest: a scrape whose request ends while
// it waits returns at once, and the round it joined still answers the
// others.
func TestScrapeShareGivesUpWithTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &countingGatherer{}
		var gathers atomic.Uint64
		s := &scrapeShare{gather: g.Gather, interval: metricsGatherInterval, gathers: &gathers}
		s.get(context.Background(), textKey)
		var wg sync.WaitGroup
		var other []byte
		wg.Go(func() { other, _ = s.get(context.Background(), textKey) }) // leads the next round
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := s.get(ctx, textKey)
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("cancelled scrape: %v, want context.Canceled", err)
		}
		wg.Wait()
		if !bytes.Contains(other, []byte("test_gather 2")) {
			t.Errorf("the other scrape got %q, want gather 2", other)
		}
	})
}

// TestMetricsNegotiation: /metrics answers each request in the format and
// encoding it asks for, as promhttp did (text unless protobuf is asked
// for; gzip when accepted), with its length.
func TestMetricsNegotiation(t *testing.T) {
	ts := httptest.NewServer(newMetricsHandler(prometheus.GathererFunc((&countingGatherer{}).Gather), nil, metricsOptions{}))
	defer ts.Close()
	// DisableCompression: the test sees the bytes sent.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for _, tt := range []struct {
		accept, encoding string
		wantType         string
		wantGzip         bool
	}{
		{"", "", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores", false},
		{"", "gzip", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores", true},
		{"", "deflate, gzip;q=0.5", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores", true},
		{"", "gzip;q=0", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores", false},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "",
			"application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=underscores", false},
	} {
		req, _ := http.NewRequest("GET", ts.URL+"/metrics", nil)
		req.Header.Set("Accept", tt.accept)
		req.Header.Set("Accept-Encoding", tt.encoding)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != tt.wantType {
			t.Errorf("Accept %q: Content-Type %q, want %q", tt.accept, ct, tt.wantType)
		}
		if resp.ContentLength != int64(len(raw)) || len(raw) == 0 {
			t.Errorf("Accept-Encoding %q: Content-Length %d for %d bytes", tt.encoding, resp.ContentLength, len(raw))
		}
		body := raw
		if gz := resp.Header.Get("Content-Encoding") == "gzip"; gz != tt.wantGzip {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", tt.encoding, gz, tt.wantGzip)
		} else if gz {
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(zr)
		}
		if !bytes.Contains(body, []byte("test_gather")) {
			t.Errorf("Accept %q Accept-Encoding %q: body %q", tt.accept, tt.encoding, body)
		}
	}
}

// TestMetricsScrapesBeyondTheCapAreRefused: with metrics-max-scrapes in
// progress, one more /metrics is answered 503 at once and its connection
// closed, and counted; /healthz and /readyz still answer. It fails if the
// cap is taken out (the scrape would wait with the others) or the 503
// keeps its connection (a pipelining client would hold it).
func TestMetricsScrapesBeyondTheCapAreRefused(t *testing.T) {
	g := &countingGatherer{hold: make(chan struct{})}
	ops := &opsStats{}
	ops.ready.Store(true)
	h := newMetricsHandler(prometheus.GathererFunc(g.Gather), ops, metricsOptions{maxScrapes: 2})
	ts := httptest.NewServer(h)
	defer ts.Close()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code, _ := get(t, ts.URL+"/metrics"); code != 200 {
				t.Errorf("a scrape within the cap: %d", code)
			}
		})
	}
	// Both are in: the first gathering (held), the second waiting for it.
	if err := waitUntil(context.Background(), 5*time.Second, func() bool { return len(h.scrapes) == 2 }); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || !resp.Close || resp.Header.Get("Retry-After") == "" {
		t.Errorf("scrape over the cap: %d, close %v, Retry-After %q; want 503, closed, a Retry-After", resp.StatusCode, resp.Close, resp.Header.Get("Retry-After"))
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(t, ts.URL+path); code != 200 {
			t.Errorf("%s with /metrics at its cap: %d", path, code)
		}
	}
	close(g.hold)
	wg.Wait()
	if n := ops.http.scrapesRefused.Load(); n != 1 {
		t.Errorf("refused %d, want 1", n)
	}
}

// TestMetricsServerLimits: the server carries every timeout and cap; with
// both of two slots held by connections that send nothing, connection 3
// is served once the oldest of them has sent nothing for
// metricsPressureGrace, which is closed for it, and not before; the
// other is kept; the open connections are counted. It fails if the slot
// listener or a timeout is taken out, or if it closes a connection
// younger than the grace.
func TestMetricsServerLimits(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ops := &opsStats{}
	m := serveMetrics(ln, newMetricsHandler(prometheus.NewRegistry(), ops, metricsOptions{maxConns: 2, maxScrapes: 1}))
	defer m.Close()
	s := m.srv
	if s.ReadHeaderTimeout != metricsReadHeaderTimeout || s.ReadTimeout != metricsReadTimeout || s.WriteTimeout != metricsWriteTimeout ||
		s.IdleTimeout != metricsIdleTimeout || s.MaxHeaderBytes != metricsMaxHeaderBytes {
		t.Errorf("server timeouts %v %v %v %v, headers %d", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
	addr := ln.Addr().String()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Two connections that send nothing take both slots.
	start := time.Now()
	idle := []net.Conn{dial(), dial()}
	if err := waitUntil(context.Background(), time.Second, func() bool { return ops.http.conns.Load() == 2 }); err != nil {
		t.Fatalf("open connections %d, want 2", ops.http.conns.Load())
	}
	// The third asks, and is answered only once the first has sent
	// nothing for the grace.
	third := dial()
	fmt.Fprintf(third, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(metricsReadHeaderTimeout))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatalf("connection 3 of 2: %v", err)
	}
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != 200 || took < metricsPressureGrace {
		t.Errorf("connection 3 of 2 answered %s after %v, want 200 OK after at least %v", resp.Status, took, metricsPressureGrace)
	}
	// The first was closed for it, the second kept.
	idle[0].SetReadDeadline(time.Now().Add(metricsReadHeaderTimeout))
	if n, err := idle[0].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the oldest silent connection: read %d, %v; want closed (EOF)", n, err)
	}
	idle[1].SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := idle[1].Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the younger silent connection: %v, want it kept open", err)
	}
	if n, e := ops.http.conns.Load(), m.slots.evicted(); n != 2 || e != 1 {
		t.Errorf("open connections %d, closed for room %d; want 2 (the cap) and 1", n, e)
	}
}

// TestMetricsBusySlotsAreNotClosed: with both slots serving scrapes, a
// health probe waits for one to end rather than cut it: no connection is
// closed for room while they serve. It fails if the slot listener closes an active one.
func TestMetricsBusySlotsAreNotClosed(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &countingGatherer{hold: make(chan struct{})}
	ops := &opsStats{}
	h := newMetricsHandler(prometheus.GathererFunc(g.Gather), ops, metricsOptions{maxConns: 2, maxScrapes: 2})
	m := serveMetrics(ln, h)
	defer m.Close()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code, _ := get(t, m.URL()+"/metrics"); code != 200 {
				t.Errorf("a scrape: %d", code)
			}
		})
	}
	if err := waitUntil(context.Background(), 5*time.Second, func() bool { return len(h.scrapes) == 2 }); err != nil {
		t.Fatal(err)
	}
	probe := make(chan int, 1)
	go func() {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		resp, err := client.Get(m.URL() + "/healthz")
		if err != nil {
			probe <- 0
			return
		}
		resp.Body.Close()
		probe <- resp.StatusCode
	}()
	// The probe waits past the grace: the scrapes are not closed for it.
	if err := waitUntil(context.Background(), 5*time.Second, func() bool {
		m.slots.mu.Lock()
		defer m.slots.mu.Unlock()
		return len(m.slots.held) == 2
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-probe:
		t.Fatalf("the probe answered %d while both slots served scrapes", code)
	case <-time.After(2 * metricsPressureGrace):
	}
	if e := m.slots.evicted(); e != 0 {
		t.Errorf("%d connections closed for room while busy, want 0", e)
	}
	// The scrapes end; their connections, idle now, make room.
	close(g.hold)
	wg.Wait()
	if code := <-probe; code != 200 {
		t.Errorf("the probe after the scrapes: %d", code)
	}
}

// TestAcceptsGzip: Accept-Encoding is read as RFC 9110 says, for gzip.
func TestAcceptsGzip(t *testing.T) {
	for v, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "deflate, gzip": true, "gzip;q=0.1": true, "gzip; q=0": false,
		"gzip;q=0.0": false, "br": false, "identity": false, "x-gzip": false, "gzip;q=bad": true,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Accept-Encoding", v)
		}
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", v, got, want)
		}
	}
	if o := (metricsOptions{}).withDefaults(); o.maxConns != defaultMetricsMaxConns || o.maxScrapes != defaultMetricsMaxScrapes {
		t.Errorf("zero options %+v do not take the defaults", o)
	}
}

// TestScrapeShareSurvivesAPanickingGather: a gather that panics (in the
// leader's handler, which net/http recovers) still ends its round, so the
// round after it, waiting for it, gathers, and so do later ones. It
// fails, every later scrape hanging, if the round is not ended on a panic.
func TestScrapeShareSurvivesAPanickingGather(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &countingGatherer{hold: make(chan struct{})}
		panicking := true
		gather := func() ([]*dto.MetricFamily, error) {
			mfs, err := g.Gather()
			if panicking {
				panic("a collector's bug")
			}
			return mfs, err
		}
		var gathers atomic.Uint64
		s := &scrapeShare{gather: gather, interval: metricsGatherInterval, gathers: &gathers}
		var wg sync.WaitGroup
		wg.Go(func() {
			defer func() {
				if recover() == nil {
					t.Error("the leader's gather did not panic")
				}
			}()
			s.get(context.Background(), textKey)
		})
		synctest.Wait() // the leader gathers, held
		var joinErr error
		wg.Go(func() { _, joinErr = s.get(context.Background(), textKey) }) // the next round
		synctest.Wait()
		g.hold <- struct{}{}
		synctest.Wait()
		panicking = false
		close(g.hold)
		wg.Wait()
		if joinErr != nil {
			t.Errorf("the round after the panic: %v", joinErr)
		}
		if b, err := s.get(context.Background(), textKey); err != nil || !bytes.Contains(b, []byte("test_gather 3")) {
			t.Errorf("a later scrape: %q, %v", b, err)
		}
	})
}
