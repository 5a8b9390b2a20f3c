package main

// Issue 20: nothing a client does on the metrics listener costs
// forwarding. TestMetricsFloodSparesForwarding runs the attack (clients
// that pipeline GET /metrics and never read) against the built binary and
// checks the relay's memory, /healthz and forwarding meanwhile;
// TestMetricsHonestScraper is its honest twin. To measure, set
// RELAY_FLOOD_CLIENTS (default 1500), RELAY_FLOOD_HOLD (how long the
// checks run under the flood, default 5s) and, for another build (the one
// before the fix), RELAY_FLOOD_BIN; the figures are logged with -v:
//
//	go test ./cmd/relay -run 'MetricsFlood|HonestScraper' -v
//	RELAY_FLOOD_CLIENTS=6000 RELAY_FLOOD_HOLD=20s go test ./cmd/relay -run MetricsFlood -v

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
)

const (
	// floodClients is how many attacking clients TestMetricsFlood runs
	// (RELAY_FLOOD_CLIENTS overrides it): the first figure.
	floodClients = 1500
	// floodBurst is how many requests a client pipelines on connecting;
	// floodRequestEvery how often it sends one more, and tries again to
	// connect when the relay has closed it.
	floodBurst        = 8
	floodRequestEvery = 100 * time.Millisecond
	// floodRamp is how long the clients get to connect before the checks
	// begin; floodHold how long the checks run under the flood at least.
	floodRamp = time.Second
	floodHold = 5 * time.Second
	// floodPeeks are sent through the relay during the flood, one every
	// floodPeekEvery, each given floodPeekTimeout, which is under
	// e2eRetry: a peek answered was answered at its first send.
	floodPeeks       = 150
	floodPeekEvery   = 20 * time.Millisecond
	floodPeekTimeout = 2 * time.Second
	// floodHealthEvery is how often /healthz is probed, each time on a new
	// connection, as the container's HEALTHCHECK does; every probe must
	// answer within defaultHealthTimeout, relay health's own limit.
	floodHealthEvery = 200 * time.Millisecond
	// floodRSSGrowth bounds the relay's resident memory growth under the
	// flood. Measured: 23 MiB at 1,500 clients and at 6,000 (garbage of
	// the reconnections between collections; the heap in use after is
	// 3-15 MiB above before); 50 MiB without the connection limit; 444 MiB,
	// and 924 MiB after 18 s at 6,000, before the listener was capped.
	floodRSSGrowth = 32 << 20
	// honestScrapes is how many scrapes TestMetricsHonestScraper makes,
	// one after another on one connection, reading each.
	honestScrapes = 20
)

// floodRequest is the attackers' request: no Accept-Encoding, so the
// largest body.
const floodRequest = "GET /metrics HTTP/1.1\r\nHost: relay\r\nUser-Agent: flood\r\n\r\n"

// floodRelay builds (or takes RELAY_FLOOD_BIN) and starts a relay on
// loopback with its metrics listener and a publisher ~zod behind it.
func floodRelay(t *testing.T) (*relayProc, *relayPeeker) {
	t.Helper()
	bin := os.Getenv("RELAY_FLOOD_BIN")
	if bin == "" {
		bin = buildRelay(t, t.TempDir())
	}
	zodPub := e2eEndpoint(t, "~zod", nil)
	config := writeConfig(t, fmt.Sprintf(`{
	"ship": "~sipsyl",
	"listen": "127.0.0.1:0",
	"metrics": "127.0.0.1:0",
	"network": {"hint-nets": ["127.0.0.0/8"], "galaxies": {"~zod": %q}},
	"pending": {"max-entries": 1000},
	"routes": {"max-routes": 1000}
}`, zodPub.Addr()))
	p := startRelay(t, bin, "--config", config)
	zod := mustShip(t, "~zod")
	req := e2eEndpoint(t, "~rovnys", map[lane.Ship]netip.AddrPort{zod: p.listen})
	return p, &relayPeeker{zod: zod, pub: zodPub, req: req}
}

// procSample is a process's resident memory and CPU time so far.
type procSample struct {
	rss, hwm int64         // VmRSS, VmHWM in bytes
	cpu      time.Duration // user + system
}

// sampleProc reads /proc/pid/status and /proc/pid/stat.
func sampleProc(t *testing.T, pid int) procSample {
	t.Helper()
	var s procSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			s.rss = kb << 10
		case "VmHWM":
			s.hwm = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command, which is in parentheses: utime and
	// stime are the 14th and 15th, in clock ticks (USER_HZ, 100 on Linux).
	_, rest, _ := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest)
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	s.cpu = time.Duration(ut+st) * 10 * time.Millisecond
	return s
}

// relayPeeker is a requester whose lane for ~zod is the relay, and ~zod
// behind the relay.
type relayPeeker struct {
	zod      lane.Ship
	pub, req *endpoint.Endpoint
}

// floodStats are the attackers' counts.
type floodStats struct {
	dials, drops, requests atomic.Int64
}

// floodCounts are floodStats read once.
type floodCounts struct{ dials, drops, requests int64 }

// floodAttackEnv starts the test binary as the flood's client process:
// ADDR CLIENTS.
const floodAttackEnv = "RELAY_FLOOD_ATTACK"

// startFloodClients starts the attacking clients in a process of their
// own, the test binary running TestMetricsFloodClients: the kernel shares
// the cores among the processes, so the clients' own load does not queue
// the requester and publisher, which run in this one, behind thousands
// of goroutines (the relay is what is measured). The returned function
// stops them and returns their counts.
func startFloodClients(t *testing.T, addr string, clients int) func() floodCounts {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMetricsFloodClients$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", floodAttackEnv, addr, clients))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	startProcess(t, cmd)
	return func() floodCounts {
		stdin.Close() // the clients stop at EOF
		if err := cmd.Wait(); err != nil {
			t.Fatalf("flood clients: %v\n%s", err, out.String())
		}
		var c floodCounts
		if _, err := fmt.Sscanf(out.String()[strings.Index(out.String(), "flood:"):], "flood: dials %d drops %d requests %d", &c.dials, &c.drops, &c.requests); err != nil {
			t.Fatalf("flood clients' output: %v\n%s", err, out.String())
		}
		return c
	}
}

// TestMetricsFloodClients is the flood's client process (startFloodClients),
// and skips unless started as one: it floods until its stdin ends, then
// prints its counts.
func TestMetricsFloodClients(t *testing.T) {
	spec := os.Getenv(floodAttackEnv)
	if spec == "" {
		t.Skip("the flood's client process, which TestMetricsFloodSparesForwarding starts")
	}
	var addr string
	var clients int
	if _, err := fmt.Sscanf(spec, "%s %d", &addr, &clients); err != nil {
		t.Fatalf("%s=%q: %v", floodAttackEnv, spec, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var st floodStats
	flood(ctx, addr, clients, &st)
	fmt.Printf("flood: dials %d drops %d requests %d\n", st.dials.Load(), st.drops.Load(), st.requests.Load())
}

// flood runs clients that each connect to addr, pipeline floodBurst
// requests, then send one more every floodRequestEvery, never reading;
// when the relay closes a connection (a write fails) the client connects
// again at its next tick. It returns when ctx ends and every client has
// closed its connection.
func flood(ctx context.Context, addr string, clients int, st *floodStats) {
	var wg sync.WaitGroup
	burst := strings.Repeat(floodRequest, floodBurst)
	for range clients {
		wg.Go(func() {
			var c net.Conn
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			tick := time.NewTicker(floodRequestEvery)
			defer tick.Stop()
			for ctx.Err() == nil {
				msg := floodRequest
				if c == nil {
					d := net.Dialer{}
					var err error
					if c, err = d.DialContext(ctx, "tcp4", addr); err != nil {
						c = nil
					} else {
						st.dials.Add(1)
						msg = burst
					}
				}
				if c != nil {
					c.SetWriteDeadline(time.Now().Add(floodRequestEvery))
					if _, err := io.WriteString(c, msg); err != nil {
						if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
							c.Close()
							c = nil
							st.drops.Add(1)
						}
					} else {
						st.requests.Add(int64(strings.Count(msg, "GET ")))
					}
				}
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
}

// TestMetricsFloodSparesForwarding: 1,500 clients on 127.0.0.1 pipeline
// GET /metrics and never read, reconnecting when closed, for over 6 s.
// Meanwhile the relay's resident memory grows by less than
// floodRSSGrowth, every /healthz probe (a new connection each) answers
// 200 within defaultHealthTimeout, and 150 of 150 peeks through the relay
// are answered at their first send; afterwards the listener held at most
// metrics-max-connections. Before the listener was capped (RELAY_FLOOD_BIN
// set to that build) the same run took 476 MiB, timed /healthz out and
// answered a few of the peeks.
func TestMetricsFloodSparesForwarding(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	clients := floodClients
	if s := os.Getenv("RELAY_FLOOD_CLIENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RELAY_FLOOD_CLIENTS=%q: want a positive number", s)
		}
		clients = n
	}
	hold := floodHold
	if s := os.Getenv("RELAY_FLOOD_HOLD"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < floodHold {
			t.Fatalf("RELAY_FLOOD_HOLD=%q: want a duration of %v or more", s, floodHold)
		}
		hold = d
	}
	p, peer := floodRelay(t)
	pid := p.cmd.Process.Pid
	metricsAddr := strings.TrimPrefix(p.url, "http://")
	_, first := get(t, p.url+"/metrics") // a first gather, as a scraper would have made
	base := sampleProc(t, pid)
	baseHeap := parseMetrics(t, first)["go_memstats_heap_inuse_bytes"]

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	start := time.Now()
	clientsDone := startFloodClients(t, metricsAddr, clients)

	// Samples of the relay's memory, every 100 ms from the start.
	var peak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			if s := sampleProc(t, pid); s.rss > peak.Load() {
				peak.Store(s.rss)
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}()
	time.Sleep(floodRamp)

	// /healthz, each probe on a new connection.
	var probes, probeFails atomic.Int64
	var probeMax atomic.Int64
	healthDone := make(chan struct{})
	probeCtx, probeStop := context.WithCancel(ctx)
	go func() {
		defer close(healthDone)
		client := &http.Client{Timeout: defaultHealthTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
		for probeCtx.Err() == nil {
			t0 := time.Now()
			resp, err := client.Get(p.url + "/healthz")
			took := time.Since(t0)
			probes.Add(1)
			if err != nil || resp.StatusCode != 200 {
				probeFails.Add(1)
				t.Logf("/healthz after %v: %v", took.Round(time.Millisecond), err)
			}
			if err == nil {
				resp.Body.Close()
			}
			if int64(took) > probeMax.Load() {
				probeMax.Store(int64(took))
			}
			sleepCtx(probeCtx, floodHealthEvery)
		}
	}()

	// Peeks through the relay, each given floodPeekTimeout.
	answered := 0
	var slowestPeek time.Duration
	holdUntil := time.Now().Add(hold)
	for i := range floodPeeks {
		path := fmt.Sprintf("flood/%d", i)
		peer.pub.Publish(path, []byte(path))
		pctx, cancel := context.WithTimeout(ctx, floodPeekTimeout)
		t0 := time.Now()
		resp, err := peer.req.Peek(pctx, peer.zod, path)
		slowestPeek = max(slowestPeek, time.Since(t0))
		cancel()
		if err == nil && string(resp.Data) == path {
			answered++
		}
		time.Sleep(floodPeekEvery)
	}
	time.Sleep(time.Until(holdUntil))
	probeStop()
	<-healthDone
	during := sampleProc(t, pid)
	flooding := time.Since(start)
	stop()
	<-sampled
	st := clientsDone()

	growth := peak.Load() - base.rss
	cpu := float64(during.cpu-base.cpu) / float64(flooding) * 100
	// After the flood: the listener's own counts, from a scrape.
	var m map[string]float64
	if err := waitUntil(context.Background(), 10*time.Second, func() bool {
		resp, err := http.Get(p.url + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return false
		}
		m = parseMetrics(t, string(b))
		return true
	}); err != nil {
		t.Fatalf("no scrape after the flood: %v", err)
	}
	t.Logf("%d clients for %v: %d connections made, %d closed by the relay, %d requests sent",
		clients, flooding.Round(100*time.Millisecond), st.dials, st.drops, st.requests)
	t.Logf("relay RSS %.1f MiB before, peak %.1f MiB (+%.1f MiB), VmHWM %.1f MiB; CPU %.0f %% of a core over the flood; heap in use %.1f MiB before, %.1f MiB after",
		mib(base.rss), mib(peak.Load()), mib(growth), mib(during.hwm), cpu, baseHeap/(1<<20), m["go_memstats_heap_inuse_bytes"]/(1<<20))
	t.Logf("/healthz: %d probes, %d failed, slowest %v; peeks answered %d/%d, slowest %v",
		probes.Load(), probeFails.Load(), time.Duration(probeMax.Load()).Round(time.Millisecond), answered, floodPeeks, slowestPeek.Round(time.Millisecond))
	t.Logf("listener: %v scrapes refused (503), %v gathers, %v connections open after",
		m["relay_metrics_scrapes_refused_total"], m["relay_metrics_gathers_total"], m["relay_metrics_connections"])

	if answered != floodPeeks {
		t.Errorf("peeks answered %d/%d during the flood, want all", answered, floodPeeks)
	}
	if probeFails.Load() > 0 || probes.Load() == 0 {
		t.Errorf("/healthz: %d of %d probes failed or took over %v", probeFails.Load(), probes.Load(), defaultHealthTimeout)
	}
	if growth > floodRSSGrowth {
		t.Errorf("relay RSS grew %.1f MiB under the flood, want under %.0f MiB", mib(growth), mib(floodRSSGrowth))
	}
	if maxGathers := flooding.Seconds()/metricsGatherInterval.Seconds() + 10; m["relay_metrics_gathers_total"] > maxGathers {
		t.Errorf("%v gathers in %v, want at most %.0f", m["relay_metrics_gathers_total"], flooding, maxGathers)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// TestMetricsHonestScraper is the flood's honest twin: a scraper on one
// connection, reading every answer and asking again at once, gets every
// scrape: honestScrapes answers, all 200, all on the first connection,
// each from its own gather (so each sees what came before it), none
// waiting more than metricsGatherInterval beyond the gather.
func TestMetricsHonestScraper(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p, _ := floodRelay(t)
	// Its own transport: startRelay's /readyz polls left an idle
	// connection in the default one.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	var conns atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if !i.Reused {
			conns.Add(1)
		}
	}}
	last := -1.0
	var slowest time.Duration
	for i := range honestScrapes {
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", p.url+"/metrics", nil)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		body, err := io.ReadAll(bufio.NewReader(resp.Body))
		resp.Body.Close()
		took := time.Since(t0)
		slowest = max(slowest, took)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("scrape %d: %d %v", i, resp.StatusCode, err)
		}
		g := parseMetrics(t, string(body))["relay_metrics_gathers_total"]
		if g != last+1 && last >= 0 {
			t.Errorf("scrape %d: gather %v after %v; want a gather of its own", i, g, last)
		}
		last = g
		if took > metricsGatherInterval+time.Second {
			t.Errorf("scrape %d took %v", i, took)
		}
	}
	t.Logf("%d scrapes answered 200 on %d connection(s), slowest %v", honestScrapes, conns.Load(), slowest.Round(time.Millisecond))
	if conns.Load() != 1 {
		t.Errorf("%d connections for %d scrapes, want 1", conns.Load(), honestScrapes)
	}
}
