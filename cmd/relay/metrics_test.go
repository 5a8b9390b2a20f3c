package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/front"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
	"github.com/urbit-relay/relay/scry"
)

// parseMetrics parses Prometheus text exposition into sample values keyed
// by the series as written ("name" or `name{label="v",...}`).
func parseMetrics(t testing.TB, text string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// get fetches url and returns the status and body.
func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// memRelay is a relay fronting ~sipsyl on an in-memory network, with a
// publisher ~zod behind the galaxy lane and a requester ~rovnys.
type memRelay struct {
	srv                *relay.Server
	pub, req           *endpoint.Endpoint
	raw                transport.Conn
	relayAddr, pubAddr netip.AddrPort
	zod                lane.Ship
	closeAll           func()
}

func newMemRelay(t *testing.T) *memRelay {
	t.Helper()
	mem := transporttest.NewMemNetwork()
	listen := func(s string) transport.Conn {
		c, err := mem.Listen(netip.MustParseAddrPort(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	m := &memRelay{zod: mustShip(t, "~zod"), relayAddr: netip.MustParseAddrPort("10.0.0.1:13337"), pubAddr: netip.MustParseAddrPort("10.0.0.2:13337")}
	r, err := relay.New(relay.Config{HintNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Ship: mustShip(t, "~sipsyl"), Self: []netip.AddrPort{m.relayAddr},
		Galaxies: map[lane.Ship]netip.AddrPort{m.zod: m.pubAddr},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.srv = relay.NewServer(r, []transport.Conn{listen(m.relayAddr.String())}, relay.ServerConfig{})
	m.srv.Start()
	m.pub, err = endpoint.New(endpoint.Config{Ship: m.zod, PingInterval: -1, HintNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, listen(m.pubAddr.String()))
	if err != nil {
		t.Fatal(err)
	}
	m.req, err = endpoint.New(endpoint.Config{Ship: mustShip(t, "~rovnys"), PingInterval: -1, HintNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Lanes: map[lane.Ship]netip.AddrPort{m.zod: m.relayAddr}}, listen("10.0.0.3:1"))
	if err != nil {
		t.Fatal(err)
	}
	m.raw = listen("10.0.0.4:1")
	m.pub.Start()
	m.req.Start()
	m.closeAll = func() {
		m.req.Close()
		m.pub.Close()
		m.raw.Close()
		m.srv.Close()
	}
	return m
}

// TestMetrics drives one request and three garbage datagrams through a
// relay and checks that the scrape says so.
func TestMetrics(t *testing.T) {
	m := newMemRelay(t)
	defer m.closeAll()
	m.pub.Publish("x/1", []byte("one"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := m.req.Peek(ctx, m.zod, "x/1")
	if err != nil || string(resp.Data) != "one" || resp.Next != m.pubAddr {
		t.Fatalf("peek: %v %q next %v", err, resp.Data, resp.Next)
	}
	for i := 0; i < 3; i++ {
		msg := []transport.Message{{Buf: []byte("hello"), N: 5, Addr: m.relayAddr}}
		if _, err := m.raw.WriteBatch(msg); err != nil {
			t.Fatal(err)
		}
	}
	// A STUN binding request, which the relay answers.
	stun := (&scry.STUNRequest{TxID: [12]byte{1}}).Append(nil)
	if _, err := m.raw.WriteBatch([]transport.Message{{Buf: stun, N: len(stun), Addr: m.relayAddr}}); err != nil {
		t.Fatal(err)
	}
	if err := waitUntil(ctx, 5*time.Second, func() bool { s := m.srv.Relay().Counters().Snapshot(); return s.TotalIn() == 6 }); err != nil {
		t.Fatal(err)
	}

	ops := &opsStats{}
	ops.ready.Store(true)
	ops.reloadsOK.Add(2)
	ops.galaxyLanes.Store(1)
	ts := httptest.NewServer(newMetricsHandler(newMetricsRegistry(m.srv, ops, "v9.9.9"), ops, metricsOptions{}))
	defer ts.Close()
	code, body := get(t, ts.URL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	got := parseMetrics(t, body)
	want := map[string]float64{
		`relay_packets_in_total{kind="peek"}`:        1,
		`relay_packets_in_total{kind="page"}`:        1,
		`relay_packets_out_total{kind="peek"}`:       1,
		`relay_packets_out_total{kind="page"}`:       1,
		`relay_forward_sends_total`:                  1,
		`relay_forwards_total`:                       1, // deprecated name, same count
		`relay_requests_forwarded_total`:             1,
		`relay_forwarded_total`:                      1, // deprecated name, same count
		`relay_answered_total`:                       1,
		`relay_aggregated_total`:                     0,
		`relay_drops_total{reason="malformed_ames"}`: 3,
		`relay_drops_total{reason="no_route"}`:       0,
		`relay_packets_in_total{kind="stun"}`:        1,
		`relay_packets_out_total{kind="stun"}`:       1,
		`relay_stun_answered_total`:                  1,
		`relay_pending_entries`:                      0,
		`relay_pending_operations_total{op="added"}`: 1,
		`relay_pending_operations_total{op="taken"}`: 1,
		`relay_read_batch_datagrams_total`:           6,
		`relay_write_errors_total`:                   0,
		`relay_config_reloads_total{result="ok"}`:    2,
		`relay_config_reloads_total{result="error"}`: 0,
		`relay_galaxy_lanes`:                         1,
		`relay_build_info{goversion="` + runtime.Version() + `",revision="` + buildRevision() + `",version="v9.9.9"}`: 1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	// ~zod's lane is configured: its hop-0 page teaches the relay nothing
	// (a configured lane always wins over a learned one).
	if got["relay_routes"] != 0 {
		t.Errorf("relay_routes = %v, want 0", got["relay_routes"])
	}
	if got["relay_read_batches_total"] < 1 || got["relay_read_batches_total"] > 6 {
		t.Errorf("relay_read_batches_total = %v", got["relay_read_batches_total"])
	}
	for _, d := range relay.Drops() {
		if _, ok := got[`relay_drops_total{reason="`+d.String()+`"}`]; !ok {
			t.Errorf("no relay_drops_total series for %s", d)
		}
	}
	for _, k := range []string{"go_goroutines", "process_open_fds"} {
		if _, ok := got[k]; !ok && (k != "process_open_fds" || runtime.GOOS == "linux") {
			t.Errorf("no %s: Go and process collectors missing", k)
		}
	}
}

func TestHealthAndReady(t *testing.T) {
	m := newMemRelay(t)
	defer m.closeAll()
	ops := &opsStats{}
	reg := newMetricsRegistry(m.srv, ops, version)
	for _, withPprof := range []bool{false, true} {
		ts := httptest.NewServer(newMetricsHandler(reg, ops, metricsOptions{pprof: withPprof}))
		ops.ready.Store(false)
		ops.stopping.Store(false)
		check := func(path string, want int) {
			t.Helper()
			if code, _ := get(t, ts.URL+path); code != want {
				t.Errorf("pprof %v: %s = %d, want %d", withPprof, path, code, want)
			}
		}
		check("/healthz", 200)
		check("/readyz", 503)
		ops.ready.Store(true)
		check("/readyz", 200)
		ops.stopping.Store(true)
		check("/healthz", 503)
		check("/readyz", 503)
		if withPprof {
			check("/debug/pprof/", 200)
		} else {
			check("/debug/pprof/", 404)
		}
		ts.Close()
	}
	// Without daemon state (the demo) the relay is always ready.
	ts := httptest.NewServer(newMetricsHandler(reg, nil, metricsOptions{}))
	defer ts.Close()
	if code, _ := get(t, ts.URL+"/readyz"); code != 200 {
		t.Errorf("demo /readyz = %d", code)
	}
}

// TestMetricsDocumented checks that the README and docs/operations.md
// name every relay metric and every drop reason: the metrics of a relay on
// a real socket (its buffer gauges), with daemon state and a capture.
func TestMetricsDocumented(t *testing.T) {
	ip := startInProcess(t, inProcessConfig)
	families, err := newMetricsRegistry(ip.d.srv, ip.d.ops, version).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"../../README.md", "../../docs/operations.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		n := 0
		for _, f := range families {
			if !strings.HasPrefix(f.GetName(), metricPrefix) {
				continue
			}
			n++
			if !strings.Contains(text, "`"+f.GetName()+"`") {
				t.Errorf("%s does not document metric `%s`", doc, f.GetName())
			}
		}
		if n < 20 {
			t.Fatalf("only %d relay metrics gathered", n)
		}
		for _, d := range relay.Drops() {
			if !strings.Contains(text, "| `"+d.String()+"` |") {
				t.Errorf("%s has no table row for drop reason `%s`", doc, d)
			}
		}
	}
}

func TestHealthCommand(t *testing.T) {
	status := http.StatusOK
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	defer ts.Close()
	var stdout, stderr strings.Builder
	if code := run([]string{"health", "--url", ts.URL + "/healthz"}, nil, &stdout, &stderr); code != 0 {
		t.Errorf("healthy: exit %d, %s", code, stderr.String())
	}
	status = http.StatusServiceUnavailable
	stderr.Reset()
	if code := run([]string{"health", "--url", ts.URL + "/healthz"}, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "503") {
		t.Errorf("unhealthy: exit %d, %q", code, stderr.String())
	}
	ts.Close()
	if code := run([]string{"health", "--url", ts.URL + "/healthz", "--timeout", "1s"}, nil, &stdout, &stderr); code != 1 {
		t.Errorf("down: exit %d", code)
	}
	if code := run([]string{"health", "extra"}, nil, &stdout, &stderr); code != exitUsage {
		t.Errorf("bad usage: exit %d", code)
	}
}

func TestVersionCommand(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run([]string{"version"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(stdout.String(), "\n")
	if lines[0] != "relay "+version || lines[1] != "revision "+buildRevision() || !strings.HasPrefix(lines[2], "go "+runtime.Version()) {
		t.Errorf("output %q", stdout.String())
	}
}

// TestServiceHistogramBuckets pins relay_service_seconds' bucket bounds:
// one per power of two, 512 ns to 2^36 ns, whatever the histogram's own
// resolution, so dashboards and recording rules keep their series.
func TestServiceHistogramBuckets(t *testing.T) {
	var h relay.ServiceHistogram
	h.Observe(3*time.Microsecond, 2)
	h.Observe(time.Hour, 1)
	var m dto.Metric
	desc := prometheus.NewDesc("relay_service_seconds", "test", nil, nil)
	if err := serviceHistogram(desc, &h).Write(&m); err != nil {
		t.Fatal(err)
	}
	bs := m.GetHistogram().GetBucket()
	if len(bs) != 28 {
		t.Fatalf("%d buckets, want 28", len(bs))
	}
	for k, b := range bs {
		want := float64(time.Duration(1)<<(9+k)) / 1e9
		if b.GetUpperBound() != want {
			t.Fatalf("bucket %d bound %v, want %v", k, b.GetUpperBound(), want)
		}
		cum := uint64(0)
		if want > 3e-6 {
			cum = 2
		}
		if want == float64(1<<36)/1e9 {
			cum = 3 // the last bucket also holds what is longer
		}
		if b.GetCumulativeCount() != cum {
			t.Errorf("bucket %v holds %d, want %d", want, b.GetCumulativeCount(), cum)
		}
	}
	if m.GetHistogram().GetSampleCount() != 3 {
		t.Errorf("count %d, want 3", m.GetHistogram().GetSampleCount())
	}
}

// fakeFront is a fronted ship's device with fixed counts.
type fakeFront struct{ st front.Stats }

func (f fakeFront) Stats() front.Stats { return f.st }
func (f fakeFront) Drops() uint64      { return 7 }

// TestFrontDeviceMetrics checks that the device's counts reach
// /metrics under their labels, each skip reason its own field, and that
// the names are documented; outside fronting mode they are absent.
func TestFrontDeviceMetrics(t *testing.T) {
	ip := startInProcess(t, inProcessConfig)
	st := front.Stats{Received: 100, Sent: 200, SkippedNotIPv4: 1, SkippedNotUDP: 2, SkippedFragment: 3, SkippedMalformed: 4,
		SkippedNotShip: 5, SkippedBadDest: 6, SkippedToHost: 8, SkippedReadErrors: 9}
	want := map[string]float64{
		`relay_front_device_datagrams_total{direction="from_ship"}`: 100, `relay_front_device_datagrams_total{direction="to_ship"}`: 200,
		`relay_front_device_skipped_total{reason="not_ipv4"}`: 1, `relay_front_device_skipped_total{reason="not_udp"}`: 2,
		`relay_front_device_skipped_total{reason="fragment"}`: 3, `relay_front_device_skipped_total{reason="malformed"}`: 4,
		`relay_front_device_skipped_total{reason="not_ship"}`: 5, `relay_front_device_skipped_total{reason="bad_dest"}`: 6,
		`relay_front_device_skipped_total{reason="to_host"}`: 8, `relay_front_device_skipped_total{reason="read_error"}`: 9,
		`relay_front_device_queue_drops_total`: 7,
	}
	gather := func() map[string]float64 {
		families, err := newMetricsRegistry(ip.d.srv, ip.d.ops, version).Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			if !strings.HasPrefix(f.GetName(), "relay_front_device_") {
				continue
			}
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, l := range m.GetLabel() {
					key += "{" + l.GetName() + "=\"" + l.GetValue() + "\"}"
				}
				got[key] = m.GetCounter().GetValue()
			}
		}
		return got
	}
	if got := gather(); len(got) != 0 {
		t.Errorf("outside fronting mode: %v", got)
	}
	ip.d.ops.front = fakeFront{st}
	got := gather()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d series, want %d: %v", len(got), len(want), got)
	}
	for _, doc := range []string{"../../README.md", "../../docs/operations.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"relay_front_device_datagrams_total", "relay_front_device_skipped_total", "relay_front_device_queue_drops_total"} {
			if !strings.Contains(string(b), "`"+name+"`") {
				t.Errorf("%s does not document %s", doc, name)
			}
		}
		for _, r := range frontSkipReasons {
			if !strings.Contains(string(b), r) {
				t.Errorf("%s does not name skip reason %s", doc, r)
			}
		}
	}
}
