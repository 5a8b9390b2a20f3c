package netnstest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/internal/harness/vtool"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
	"github.com/urbit-relay/relay/scry"
)

// Soak settings. SOAK=1 runs TestSoak; SOAK_DURATION, SOAK_RATE and
// SOAK_JUNK_RATE override the defaults below; SOAK_REPORT names a file the
// samples are also written to, as a Markdown table.
const (
	soakEnv         = "SOAK"
	soakDurationEnv = "SOAK_DURATION"
	soakRateEnv     = "SOAK_RATE"
	soakJunkRateEnv = "SOAK_JUNK_RATE"
	soakReportEnv   = "SOAK_REPORT"

	// soakDefaultDuration is the ten minutes.
	soakDefaultDuration = 10 * time.Minute
	// soakDefaultRate is honest operations (peeks and pokes) a second:
	// about 8,000 datagrams a second through the relay, which the -race
	// build sustains on the 2-core development machine with room to spare.
	soakDefaultRate = 2000
	// soakDefaultJunkRate is hostile datagrams a second (malformed,
	// unanswerable, unsolicited, at the hop limit).
	soakDefaultJunkRate = 500
	// soakSampleInterval is how often the relay's resources are sampled.
	soakSampleInterval = 10 * time.Second
	// soakWarmupFraction: the first fifth of the run is warm-up (two
	// minutes of ten): tables fill to their steady size (pending entries
	// live soakPendingTTL) and the heap reaches its working size.
	soakWarmupFraction = 5
	// soakPendingTTL is the relay's pending.ttl: unanswered junk
	// requests expire after it, so the table reaches a steady size early.
	soakPendingTTL = 30 * time.Second

	soakPublishers = 8
	soakRequesters = 16
	soakWorkers    = 8 // concurrent operations per requester
	soakPaths      = 4096
	// soakOpTimeout: an honest operation not answered within this is lost.
	soakOpTimeout = 10 * time.Second
	// soakPokeEvery: one operation in this many is a poke, the rest peeks.
	soakPokeEvery = 8

	// Flatness after warm-up: goroutines and file descriptors may move by
	// at most soakCountSlack (a metrics scrape in progress); the peak of
	// resident memory and of the heap in the last third of the run may
	// exceed their peak in the first third by at most soakMemGrowth.
	soakCountSlack = 2
	soakMemGrowth  = 0.15
)

// soakSample is one reading of the relay's resources.
type soakSample struct {
	at                 time.Duration
	rssKiB, hwmKiB     int
	threads, fds       int
	goroutines, heapMi float64
	pending, routes    float64
	in, out, drops     float64
	ok, failed, resent int64
}

// TestSoak runs a -race build of the relay for SOAK_DURATION under
// generated traffic: honest requesters peeking and poking publishers
// through it (routes pinned to the relay: NoHints, so it stays on the path),
// and a junk sender. Every soakSampleInterval it reads the relay's resident
// memory and threads (/proc/PID/status), its file descriptors (/proc/PID/fd)
// and goroutines and heap (its --metrics endpoint). It fails if any honest
// operation is lost, the relay reports a data race, or goroutines, file
// descriptors or memory grow after warm-up.
func TestSoak(t *testing.T) {
	if os.Getenv(soakEnv) == "" {
		t.Skipf("the soak runs only with %s=1 (see docs/reliability.md)", soakEnv)
	}
	duration := envDuration(t, soakDurationEnv, soakDefaultDuration)
	rate := envInt(t, soakRateEnv, soakDefaultRate)
	junkRate := envInt(t, soakJunkRateEnv, soakDefaultJunkRate)
	transporttest.CheckGoroutineLeaks(t)
	bin := relayBinary(t, true)

	zod := lane.ShipFromUint64(0)
	relayAddr := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
	// pending.ttl is a setting of the relay's config file only.
	config := filepath.Join(t.TempDir(), "relay.json")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{"pending": {"ttl": %q}}`, soakPendingTTL)), 0o600); err != nil {
		t.Fatal(err)
	}
	rp := startProcess(t, "relay-soak", "", []string{bin, "run", "--ship", zod.String(), "--config", config,
		"--listen", relayAddr.String(), "--metrics", metricsAddr, "--hint-net", "127.0.0.0/8", "--log-level", "warn"},
		func(cmd *exec.Cmd) error {
			cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
			return nil
		})
	t.Cleanup(func() {
		if !rp.stop(syscall.SIGTERM) {
			t.Errorf("relay did not exit within %v of SIGTERM", processStopTimeout)
		}
		if log := rp.tail(); strings.Contains(log, "DATA RACE") || t.Failed() {
			t.Errorf("relay log:\n%s", log)
		}
	})
	rp.waitBound(relayAddr)
	lanes := map[lane.Ship]netip.AddrPort{zod: relayAddr}

	// Publishers: planets under ~zod on 127.0.2.x, each serving soakPaths
	// values of 100 to 1,000 bytes and pinging the relay every second.
	var pubs []lane.Ship
	for k := 1; k <= soakPublishers; k++ {
		ship := lane.ShipFromUint64(uint64(k) << 16)
		ep := soakEndpoint(t, endpoint.Config{Ship: ship, Lanes: lanes, PingInterval: time.Second, HintNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
			netip.AddrFrom4([4]byte{127, 0, 2, byte(k)}))
		for i := 0; i < soakPaths; i++ {
			ep.Publish(fmt.Sprintf("s/%d", i), soakValue(ship, i))
		}
		pubs = append(pubs, ship)
	}
	waitUntil(t, 5*time.Second, "the relay to hear every publisher", func() bool {
		m, err := metrics(metricsAddr)
		return err == nil && m["relay_routes"] >= soakPublishers
	})

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var ok, failed, resent atomic.Int64
	var firstErr atomic.Value
	var workers sync.WaitGroup
	period := time.Duration(float64(time.Second) * soakRequesters * soakWorkers / float64(rate))
	for k := 1; k <= soakRequesters; k++ {
		ship := lane.ShipFromUint64(uint64(k)<<16 | 1) // planets under ~nec
		ep := soakEndpoint(t, endpoint.Config{Ship: ship, Lanes: lanes, PingInterval: -1, HintNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
			RetryInterval: 500 * time.Millisecond, Routes: route.Config{Rubric: soakNoHints{}}},
			netip.AddrFrom4([4]byte{127, 0, 1, byte(k)}))
		for w := 0; w < soakWorkers; w++ {
			workers.Add(1)
			go func() {
				defer workers.Done()
				rng := rand.New(rand.NewPCG(uint64(k), uint64(w)))
				tick := time.NewTicker(period)
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
					pub := pubs[rng.IntN(len(pubs))]
					i := rng.IntN(soakPaths)
					opCtx, opCancel := context.WithTimeout(context.Background(), soakOpTimeout)
					var resp endpoint.Response
					var err error
					if n%soakPokeEvery == 0 {
						resp, err = ep.Poke(opCtx, pub, []byte(fmt.Sprintf("poke %d", n)))
					} else if resp, err = ep.Peek(opCtx, pub, fmt.Sprintf("s/%d", i)); err == nil && string(resp.Data) != string(soakValue(pub, i)) {
						err = fmt.Errorf("peek %s s/%d: wrong value (%d bytes)", pub, i, len(resp.Data))
					}
					opCancel()
					switch {
					case err != nil:
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					case resp.Tries > 1:
						resent.Add(1)
						fallthrough
					default:
						ok.Add(1)
					}
				}
			}()
		}
	}
	workers.Add(1)
	go func() {
		defer workers.Done()
		junk(ctx, t, relayAddr, pubs, junkRate)
	}()

	pid := rp.pid()
	start := time.Now()
	var samples []soakSample
	scrapeFailures := 0
	sample := func() {
		s := soakSample{at: time.Since(start).Round(time.Second)}
		s.rssKiB, s.hwmKiB, s.threads = procStatus(t, pid)
		s.fds = procFDs(t, pid)
		m, err := metrics(metricsAddr)
		if err != nil {
			scrapeFailures++
			t.Logf("scraping the relay's metrics: %v", err)
		}
		s.goroutines, s.heapMi = m["go_goroutines"], m["go_memstats_heap_inuse_bytes"]/(1<<20)
		s.pending, s.routes = m["relay_pending_entries"], m["relay_routes"]
		s.in, s.out, s.drops = m["relay_packets_in_total"], m["relay_packets_out_total"], m["relay_drops_total"]
		s.ok, s.failed, s.resent = ok.Load(), failed.Load(), resent.Load()
		samples = append(samples, s)
		t.Logf("%s", s.row())
	}
	t.Logf("%s", soakHeader)
	sample()
	tick := time.NewTicker(soakSampleInterval)
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-tick.C:
			if !rp.alive() {
				t.Fatalf("relay exited (%v):\n%s", rp.waitErr, rp.tail())
			}
			sample()
		}
	}
	tick.Stop()
	workers.Wait()
	sample()
	writeSoakReport(t, samples, duration, rate, junkRate)

	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d honest operations lost (first: %v)", n, n+ok.Load(), firstErr.Load())
	}
	if scrapeFailures > 0 {
		t.Errorf("%d of %d metrics scrapes failed", scrapeFailures, len(samples))
	}
	checkFlat(t, samples[len(samples)/soakWarmupFraction:])
}

// checkFlat fails the test if the relay's resources grew over samples (the
// post-warm-up part of the run). Goroutines and file descriptors are
// compared sample by sample; memory, which follows the garbage collector's
// sawtooth, by the peak of the last third of the samples against the peak
// of the first third.
func checkFlat(t *testing.T, samples []soakSample) {
	t.Helper()
	if len(samples) < 6 {
		t.Fatalf("only %d samples after warm-up; run longer", len(samples))
	}
	base := samples[0]
	for _, s := range samples[1:] {
		if d := s.goroutines - base.goroutines; d > soakCountSlack || d < -soakCountSlack {
			t.Errorf("at %v goroutines %v, %v at the end of warm-up", s.at, s.goroutines, base.goroutines)
		}
		if d := s.fds - base.fds; d > soakCountSlack || d < -soakCountSlack {
			t.Errorf("at %v file descriptors %d, %d at the end of warm-up", s.at, s.fds, base.fds)
		}
	}
	third := len(samples) / 3
	first, last := samples[:third], samples[len(samples)-third:]
	peak := func(ss []soakSample, v func(soakSample) float64) float64 {
		m := 0.0
		for _, s := range ss {
			m = max(m, v(s))
		}
		return m
	}
	for _, m := range []struct {
		what string
		v    func(soakSample) float64
	}{
		{"resident memory (MiB)", func(s soakSample) float64 { return float64(s.rssKiB) / 1024 }},
		{"heap in use (MiB)", func(s soakSample) float64 { return s.heapMi }},
	} {
		early, late := peak(first, m.v), peak(last, m.v)
		t.Logf("%s: peak %.1f in the first third after warm-up, %.1f in the last", m.what, early, late)
		if late > early*(1+soakMemGrowth) {
			t.Errorf("%s grew: peak %.1f in the last third after warm-up, more than %.0f%% over %.1f in the first",
				m.what, late, 100*soakMemGrowth, early)
		}
	}
}

const soakHeader = "| time | RSS MiB | peak RSS MiB | threads | fds | goroutines | heap in use MiB | pending | routes | datagrams in | out | dropped | honest ok | resent | lost |\n" +
	"|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"

func (s soakSample) row() string {
	return fmt.Sprintf("| %v | %.1f | %.1f | %d | %d | %.0f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %d | %d | %d |",
		s.at, float64(s.rssKiB)/1024, float64(s.hwmKiB)/1024, s.threads, s.fds, s.goroutines, s.heapMi,
		s.pending, s.routes, s.in, s.out, s.drops, s.ok, s.resent, s.failed)
}

func writeSoakReport(t *testing.T, samples []soakSample, duration time.Duration, rate, junkRate int) {
	path := os.Getenv(soakReportEnv)
	if path == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Soak of %v: %d honest operations/s, %d junk datagrams/s, sampled every %v.\n\n%s\n",
		duration, rate, junkRate, soakSampleInterval, soakHeader)
	for _, s := range samples {
		b.WriteString(s.row() + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("writing %s: %v", path, err)
	}
}

// soakValue is the value a soak publisher serves at s/i: 100 to 1,000
// bytes, different for every ship and path.
func soakValue(ship lane.Ship, i int) []byte {
	n := 100 + (i*37)%900
	v := make([]byte, n)
	seed := fmt.Sprintf("%s s/%d ", ship, i)
	for j := range v {
		v[j] = seed[j%len(seed)]
	}
	return v
}

// soakEndpoint starts an endpoint on addr (any port), closed at cleanup.
// soakNoHints is the route rubric as specified but for next-hops, which it
// never takes: the soak's requesters stay on the relay.
type soakNoHints struct{ route.Design }

func (soakNoHints) TakesHints() bool { return false }

func soakEndpoint(t *testing.T, cfg endpoint.Config, addr netip.Addr) *endpoint.Endpoint {
	t.Helper()
	conn, err := transport.ListenUDP(netip.AddrPortFrom(addr, 0), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := endpoint.New(cfg, conn)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	ep.Start()
	t.Cleanup(func() { ep.Close() })
	return ep
}

// junk sends rate hostile datagrams a second to the relay from 127.0.3.1
// until ctx ends, cycling through: random bytes; a peek for a path no
// publisher serves (it waits in the pending table until it expires); a peek
// for an unknown planet under ~zod; a peek for a ship with no route; an
// unsolicited page; a mesa packet cut short; a peek at the hop limit.
func junk(ctx context.Context, t *testing.T, to netip.AddrPort, pubs []lane.Ship, rate int) {
	conn, err := transport.ListenUDP(netip.MustParseAddrPort("127.0.3.1:0"), transport.Options{})
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	const kinds = 7
	tick := time.NewTicker(time.Second / 100)
	defer tick.Stop()
	perTick := max(1, rate/100)
	msgs := make([]transport.Message, perTick)
	for n := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for i := range msgs {
			b := junkDatagram(rng, n%kinds, pubs)
			msgs[i] = transport.Message{Buf: b, N: len(b), Addr: to}
			n++
		}
		conn.WriteBatch(msgs)
	}
}

func junkDatagram(rng *rand.Rand, kind int, pubs []lane.Ship) []byte {
	path := []byte(fmt.Sprintf("junk/%x", rng.Uint64()))
	peek := func(ship lane.Ship) []byte {
		p := scry.NewPeek(scry.Name{Ship: ship, Bloq: scry.DefaultBloq, Path: path})
		return p.Append(nil)
	}
	switch kind {
	case 0:
		b := make([]byte, 1+rng.IntN(1500))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	case 1:
		return peek(pubs[rng.IntN(len(pubs))])
	case 2:
		return peek(lane.ShipFromUint64(uint64(1000+rng.IntN(60000)) << 16))
	case 3:
		return peek(lane.ShipFromUint64(uint64(rng.Uint32()|1<<16) | 0xffff))
	case 4:
		p := scry.NewPage(scry.Name{Ship: pubs[rng.IntN(len(pubs))], Bloq: scry.DefaultBloq, Path: path},
			scry.Data{Total: 600, AuthKind: scry.AuthNone, Frag: make([]byte, 600)})
		return p.Append(nil)
	case 5:
		b := peek(pubs[0])
		return b[:scry.MesaHeaderLen+rng.IntN(len(b)-scry.MesaHeaderLen)]
	default:
		b := peek(pubs[rng.IntN(len(pubs))])
		scry.SetHops(b, scry.MesaMaxHops)
		return b
	}
}

// procStatus reads VmRSS, VmHWM (KiB) and Threads from /proc/PID/status.
func procStatus(t *testing.T, pid int) (rss, hwm, threads int) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.Atoi(fields[0])
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		case "Threads":
			threads = n
		}
	}
	return rss, hwm, threads
}

// procFDs counts the entries of /proc/PID/fd.
func procFDs(t *testing.T, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// soakScrapeTimeout bounds one metrics scrape; the soak shares a small
// machine with the load it generates.
const soakScrapeTimeout = 30 * time.Second

// metrics scrapes addr's /metrics, summing each metric over its labels.
func metrics(addr string) (map[string]float64, error) {
	// No keep-alive: an idle connection would hold goroutines in the
	// relay between scrapes and blur its goroutine count.
	c := http.Client{Timeout: soakScrapeTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	series, err := vtool.ParseMetrics(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, v := range series {
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		out[name] += v
	}
	return out, nil
}

// freePort returns a port the kernel just handed out on 127.0.0.1 for
// network ("udp" or "tcp"), for a child process to bind.
func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(pollInterval)
	}
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}
