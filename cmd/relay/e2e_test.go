package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/urbit-relay/relay/internal/harness/vtool"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

const (
	// e2eStartTimeout bounds the relay's start-up, from exec to /readyz.
	e2eStartTimeout = 10 * time.Second
	// e2eRetry is the endpoints' retry interval: longer than any answer
	// takes on loopback, so that no request is sent twice.
	e2eRetry = 5 * time.Second
	// e2eUnanswered is how long a request the test expects no answer to
	// is given: under e2eRetry, so it is sent once.
	e2eUnanswered = 300 * time.Millisecond
	// e2eStopLimit is how soon the relay must exit after SIGTERM.
	e2eStopLimit = time.Second
)

// buildRelay builds cmd/relay into dir with plain go build, which after
// go vet (as in CI) is mostly cached. TestDockerfileBuild checks the static
// build the image makes.
func buildRelay(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "relay")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startProcess starts cmd, and at cleanup kills it unless it has been
// waited for.
func startProcess(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
}

// relayProc is a `relay run` child process.
type relayProc struct {
	cmd    *exec.Cmd
	stderr *vtool.SyncBuffer
	listen netip.AddrPort
	url    string // metrics base URL
}

// logLines returns the JSON log lines written so far.
func (p *relayProc) logLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// waitLog waits for a log line with message msg and returns it.
func (p *relayProc) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	var found map[string]any
	err := waitUntil(context.Background(), e2eStartTimeout, func() bool {
		for _, l := range p.logLines(t) {
			if l["msg"] == msg {
				found = l
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no %q log line: %v\n%s", msg, err, p.stderr.String())
	}
	return found
}

// scrape returns the relay's metrics.
func (p *relayProc) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	code, body := get(t, p.url+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	return parseMetrics(t, body)
}

// waitMetric waits until series reaches want.
func (p *relayProc) waitMetric(t *testing.T, series string, want float64) {
	t.Helper()
	var got float64
	if err := waitUntil(context.Background(), 5*time.Second, func() bool {
		got = p.scrape(t)[series]
		return got == want
	}); err != nil {
		t.Fatalf("%s = %v, want %v", series, got, want)
	}
}

func startRelay(t *testing.T, bin string, args ...string) *relayProc {
	t.Helper()
	p := &relayProc{cmd: exec.Command(bin, append([]string{"run"}, args...)...), stderr: &vtool.SyncBuffer{}}
	p.cmd.Stderr = p.stderr
	startProcess(t, p.cmd)
	started := p.waitLog(t, "relay started")
	var err error
	if p.listen, err = netip.ParseAddrPort(fmt.Sprint(started["listen"])); err != nil {
		t.Fatalf("started line %v: %v", started, err)
	}
	p.url = strings.TrimSuffix(fmt.Sprint(started["metrics_url"]), "/metrics")
	if err := waitUntil(context.Background(), e2eStartTimeout, func() bool {
		code, _ := get(t, p.url+"/readyz")
		return code == 200
	}); err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	return p
}

// e2eEndpoint starts an endpoint on a real loopback socket, without pings
// and with a long retry interval, so that every datagram the relay counts
// is one the test sent, even on a loaded machine.
func e2eEndpoint(t *testing.T, ship string, lanes map[lane.Ship]netip.AddrPort) *endpoint.Endpoint {
	t.Helper()
	c, err := transport.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := endpoint.New(endpoint.Config{Ship: mustShip(t, ship), Lanes: lanes, PingInterval: -1, RetryInterval: e2eRetry, HintNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, c)
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(func() { e.Close() })
	return e
}

// TestE2E builds the relay, runs it on loopback with a config file, drives
// requests through it, checks its metrics and logs, reloads its galaxy
// table with SIGHUP, stops it with SIGTERM, and checks bad configurations.
func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if runtime.GOOS == "windows" {
		t.Skip("signals")
	}
	bin := buildRelay(t, t.TempDir())
	zod, nec, bus := mustShip(t, "~zod"), mustShip(t, "~nec"), mustShip(t, "~bus")

	// ~zod publishes behind its galaxy lane. ~nec's configured lane is at
	// first a bare socket that answers nothing; after SIGHUP it is the real
	// ~nec. ~bus has no lane at all.
	zodPub := e2eEndpoint(t, "~zod", nil)
	necPub := e2eEndpoint(t, "~nec", nil)
	sink, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	configText := func(necLane string) string {
		return fmt.Sprintf(`{
	"ship": "~sipsyl",
	"listen": "127.0.0.1:0",
	"metrics": "127.0.0.1:0",
	"network": {"hint-nets": ["127.0.0.0/8"], "galaxies": {"~zod": %q, "~nec": %q}},
	"pending": {"max-entries": 1000}
}`, zodPub.Addr(), necLane)
	}
	config := writeConfig(t, configText(sink.LocalAddr().String()))
	pcap := filepath.Join(t.TempDir(), "relay.pcap")
	p := startRelay(t, bin, "--config", config, "--capture", pcap)

	req := e2eEndpoint(t, "~rovnys", map[lane.Ship]netip.AddrPort{zod: p.listen, nec: p.listen, bus: p.listen})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	peek := func(rcvr lane.Ship, pub *endpoint.Endpoint, path string) endpoint.Response {
		t.Helper()
		pub.Publish(path, []byte(path))
		resp, err := req.Peek(ctx, rcvr, path)
		if err != nil || string(resp.Data) != path {
			t.Fatalf("peek %s %s: %v %q\n%s", rcvr, path, err, resp.Data, p.stderr.String())
		}
		return resp
	}
	unanswered := func(rcvr lane.Ship, path string) {
		t.Helper()
		uctx, ucancel := context.WithTimeout(ctx, e2eUnanswered)
		defer ucancel()
		if resp, err := req.Peek(uctx, rcvr, path); err == nil {
			t.Fatalf("peek %s %s answered from %v", rcvr, path, resp.From)
		}
	}

	// One request answered through the relay, whose next-hop names ~zod.
	if resp := peek(zod, zodPub, "e2e/1"); resp.From != p.listen || resp.Next != zodPub.Addr() {
		t.Fatalf("answer from %v next %v; want from the relay %v, next %v", resp.From, resp.Next, p.listen, zodPub.Addr())
	}
	// One forwarded to ~nec's configured lane, which does not answer.
	unanswered(nec, "e2e/2")
	sink.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 2048)
	n, from, err := sink.ReadFromUDPAddrPort(buf)
	if err != nil || !scry.IsMesa(buf[:n]) || from != p.listen {
		t.Fatalf("~nec's configured lane got %d bytes from %v (%v); want the relay's forward", n, from, err)
	}
	// One for a galaxy with no lane, and three datagrams of garbage.
	unanswered(bus, "e2e/3")
	raw, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(p.listen))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for i := 0; i < 3; i++ {
		raw.Write([]byte("hello"))
	}

	p.waitMetric(t, "relay_read_batch_datagrams_total", 7)
	m := p.scrape(t)
	for series, want := range map[string]float64{
		`relay_packets_in_total{kind="peek"}`:        3,
		`relay_packets_in_total{kind="page"}`:        1,
		`relay_packets_out_total{kind="peek"}`:       2,
		`relay_packets_out_total{kind="page"}`:       1,
		`relay_forward_sends_total`:                  2,
		`relay_answered_total`:                       1,
		`relay_drops_total{reason="no_route"}`:       1,
		`relay_drops_total{reason="malformed_ames"}`: 3,
		`relay_pending_entries`:                      1, // the request ~nec's old lane never answered
		`relay_galaxy_lanes`:                         2,
		`relay_config_reloads_total{result="ok"}`:    0,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}

	// SIGHUP with ~nec's lane changed: the next request for ~nec goes to
	// the new lane, on the same socket.
	if err := os.WriteFile(config, []byte(configText(necPub.Addr().String())), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitMetric(t, `relay_config_reloads_total{result="ok"}`, 1)
	if resp := peek(nec, necPub, "e2e/4"); resp.From != p.listen || resp.Next != necPub.Addr() {
		t.Fatalf("after reload: answer from %v next %v; want next %v", resp.From, resp.Next, necPub.Addr())
	}
	if l := p.waitLog(t, "config reloaded"); fmt.Sprint(l["changed"]) != "[network.galaxies]" {
		t.Errorf("reload log %v", l)
	}

	// A broken file on SIGHUP is logged and the running config kept.
	if err := os.WriteFile(config, []byte(`{"ship": "~sipsyl",`), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitMetric(t, `relay_config_reloads_total{result="error"}`, 1)
	p.waitLog(t, "config reload failed; keeping the running config")
	peek(zod, zodPub, "e2e/5")

	// SIGTERM: exit 0 within a second.
	stopped := make(chan error, 1)
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	go func() { stopped <- p.cmd.Wait() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
		if d := time.Since(start); d > e2eStopLimit {
			t.Errorf("took %v to stop", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit 5 s after SIGTERM")
	}
	logs := p.logLines(t)
	final := logs[len(logs)-1]
	if final["msg"] != "relay stopped" {
		t.Errorf("last log line %v", final)
	}

	// The capture, flushed at exit, holds every datagram read and sent.
	var in, out float64
	r, err := capture.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case rec.Dst == p.listen:
			in++
		case rec.Src == p.listen:
			out++
		default:
			t.Errorf("capture record %v -> %v does not involve the relay", rec.Src, rec.Dst)
		}
	}
	// At least the 9 datagrams read up to the reload; the last request,
	// also sent straight to ~zod (the next-hop learned from the first),
	// may or may not have passed through the relay by the time it stops.
	if in != final["in"] || out != final["out"] || in < 9 {
		t.Errorf("capture has %v in and %v out; the relay read %v and sent %v", in, out, final["in"], final["out"])
	}

	t.Run("bad configs", func(t *testing.T) {
		busy, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Close()
		tests := []struct{ name, config, want string }{
			{"bad @p", `{"ship": "~sipsyl", "network": {"lanes": {"~ritpub-sipsy": "10.0.0.1:1"}}}`,
				`config: "network.lanes": {"~ritpub-sipsy": "10.0.0.1:1"}: want a ship as @p`},
			{"bad address", `{"ship": "~sipsyl", "network": {"galaxies": {"~syl": "10.0.0.1:port"}}}`,
				`config: "network.galaxies": {"~syl": "10.0.0.1:port"}: want a lane as IP:PORT`},
			{"port in use", `{"ship": "~sipsyl", "listen": "` + busy.LocalAddr().String() + `"}`,
				"relay run: listen " + busy.LocalAddr().String() + ": bind: address already in use"},
			{"syntax", `{"ship" "~sipsyl"}`, "line 1 column 9: invalid character"},
		}
		for _, tt := range tests {
			cmd := exec.Command(bin, "run", "--log-format", "console", "--config", writeConfig(t, tt.config))
			out, err := cmd.CombinedOutput()
			code := -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != exitUsage {
				t.Errorf("%s: exit %d (%v), want %d", tt.name, code, err, exitUsage)
			}
			s := string(out)
			if strings.Count(s, "\n") != 1 || !strings.HasPrefix(s, "relay run: ") || !strings.Contains(s, tt.want) {
				t.Errorf("%s: output %q, want one line with %q", tt.name, s, tt.want)
			}
		}
	})

	t.Run("version", func(t *testing.T) {
		out, err := exec.Command(bin, "version").Output()
		if err != nil || !strings.HasPrefix(string(out), "relay dev\n") {
			t.Errorf("relay version: %v %q", err, out)
		}
	})
}
