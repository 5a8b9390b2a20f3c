package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/urbit-relay/relay/internal/harness/vtool"
	"github.com/urbit-relay/relay/scry"
)

// monitoringDir is the monitoring bundle, from this package's directory.
const monitoringDir = "../../docs/monitoring"

// inProcess is a `relay run` daemon started in the test's process, on a
// real loopback UDP socket, with its metrics listener, a capture and a
// config file, so that it exports every metric a deployed relay does.
type inProcess struct {
	d      *daemon
	p      *relayProc // its log and metrics URL, for relayProc's helpers
	config string
	text   string // the config file's text as first written
}

// startInProcess starts a daemon from a config file holding text.
func startInProcess(t *testing.T, text string) *inProcess {
	t.Helper()
	config := writeConfig(t, text)
	args := []string{"--config", config, "--capture", filepath.Join(t.TempDir(), "c.pcap")}
	cfg, err := loadRunConfig(args)
	if err != nil {
		t.Fatal(err)
	}
	stderr := &vtool.SyncBuffer{}
	d, err := startDaemon(cfg, args, stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	return &inProcess{d: d, p: &relayProc{stderr: stderr, url: d.metrics.URL()}, config: config, text: text}
}

const inProcessConfig = `{
	"ship": "~sipsyl",
	"listen": "127.0.0.1:0",
	"metrics": "127.0.0.1:0",
	"pending": {"max-entries": 65536},
	"routes": {"max-routes": 5000}
}`

// TestOperatorMetrics checks, on a real running relay, the metrics an
// operator sizes and alerts with: bytes by kind, table capacities, the
// socket buffers granted (and the start-up line saying so), the reload
// gauges through a failed and a good reload, and the build's revision.
func TestOperatorMetrics(t *testing.T) {
	start := time.Now()
	ip := startInProcess(t, inProcessConfig)
	loaded := time.Now()
	m := ip.p.scrape(t)

	// Capacities: the configured sizes, not literals in a dashboard.
	if m["relay_pending_capacity"] != 65536 || m["relay_routes_capacity"] != 5000 {
		t.Errorf("capacities: pending %v, routes %v; want 65536 and 5000", m["relay_pending_capacity"], m["relay_routes_capacity"])
	}

	// Socket buffers: granted in full with CAP_NET_ADMIN, else up to the
	// sysctl's cap; the start-up line says the same.
	wantRecv, wantSend := float64(socketBufferRequest), float64(socketBufferRequest)
	if os.Geteuid() != 0 {
		wantRecv = min(wantRecv, float64(sysctlInt(t, "rmem_max")))
		wantSend = min(wantSend, float64(sysctlInt(t, "wmem_max")))
	}
	if m["relay_socket_receive_buffer_bytes"] != wantRecv || m["relay_socket_send_buffer_bytes"] != wantSend {
		t.Errorf("socket buffers granted %v/%v, want %v/%v", m["relay_socket_receive_buffer_bytes"], m["relay_socket_send_buffer_bytes"], wantRecv, wantSend)
	}
	if m["relay_socket_receive_buffer_requested_bytes"] != socketBufferRequest || m["relay_socket_send_buffer_requested_bytes"] != socketBufferRequest {
		t.Errorf("socket buffers requested %v/%v", m["relay_socket_receive_buffer_requested_bytes"], m["relay_socket_send_buffer_requested_bytes"])
	}
	msg := "socket buffers"
	if wantRecv < socketBufferRequest || wantSend < socketBufferRequest {
		msg = "socket buffers smaller than requested; raise net.core.rmem_max / wmem_max or grant CAP_NET_ADMIN"
	}
	l := ip.p.waitLog(t, msg)
	if l["receive_granted"] != wantRecv || l["send_granted"] != wantSend || l["receive_requested"] != float64(socketBufferRequest) || l["sockets"] != 1.0 {
		t.Errorf("log line %v", l)
	}

	// Bytes: a 28-byte STUN request in, vere's 40-byte answer out.
	stun := (&scry.STUNRequest{TxID: [12]byte{7}}).Append(nil)
	listen, err := netip.ParseAddrPort(fmt.Sprint(ip.p.waitLog(t, "relay started")["listen"]))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(listen))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(stun); err != nil {
		t.Fatal(err)
	}
	ip.p.waitMetric(t, `relay_bytes_sent_total{kind="stun"}`, 40)
	m = ip.p.scrape(t)
	if m[`relay_bytes_received_total{kind="stun"}`] != 28 || m[`relay_bytes_received_total{kind="peek"}`] != 0 {
		t.Errorf("bytes received: stun %v, peek %v; want 28 and 0", m[`relay_bytes_received_total{kind="stun"}`], m[`relay_bytes_received_total{kind="peek"}`])
	}

	// Reloads: the start-up load counts as applied; a bad file turns the
	// gauge to 0 and leaves the time; a good one sets both again.
	at := m["relay_config_last_reload_success_timestamp_seconds"]
	if m["relay_config_last_reload_successful"] != 1 || at < float64(start.Unix()) || at > float64(loaded.UnixNano())/1e9 {
		t.Errorf("at start: successful %v at %v, want 1 within [%v, %v]", m["relay_config_last_reload_successful"], at, start.Unix(), loaded.Unix())
	}
	if err := os.WriteFile(ip.config, []byte(`{"ship": "~sipsyl",`), 0o600); err != nil {
		t.Fatal(err)
	}
	ip.d.reload()
	m = ip.p.scrape(t)
	if m["relay_config_last_reload_successful"] != 0 || m["relay_config_last_reload_success_timestamp_seconds"] != at ||
		m[`relay_config_reloads_total{result="error"}`] != 1 {
		t.Errorf("after a bad reload: successful %v at %v, errors %v; want 0 at %v, 1",
			m["relay_config_last_reload_successful"], m["relay_config_last_reload_success_timestamp_seconds"], m[`relay_config_reloads_total{result="error"}`], at)
	}
	if err := os.WriteFile(ip.config, []byte(ip.text), 0o600); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	ip.d.reload()
	m = ip.p.scrape(t)
	if m["relay_config_last_reload_successful"] != 1 || m["relay_config_last_reload_success_timestamp_seconds"] < float64(before.UnixNano())/1e9 ||
		m[`relay_config_reloads_total{result="ok"}`] != 1 {
		t.Errorf("after a good reload: successful %v at %v, ok %v; want 1 at %v or later, 1",
			m["relay_config_last_reload_successful"], m["relay_config_last_reload_success_timestamp_seconds"], m[`relay_config_reloads_total{result="ok"}`], before.Unix())
	}

	// The build's revision labels relay_build_info.
	found := false
	for k := range m {
		if strings.HasPrefix(k, "relay_build_info{") {
			found = true
			if !strings.Contains(k, `revision="`+buildRevision()+`"`) || !strings.Contains(k, `version="`+version+`"`) {
				t.Errorf("build info %s, want revision %q", k, buildRevision())
			}
		}
	}
	if !found {
		t.Error("no relay_build_info")
	}
}

// sysctlInt reads /proc/sys/net/core/NAME.
func sysctlInt(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/core/" + name)
	if err != nil {
		t.Skipf("no %s: %v", name, err)
	}
	var v int
	if _, err := fmt.Sscan(string(b), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRevisionOf: the -ldflags override wins, then the build's
// vcs.revision, marked -dirty for a modified tree; "unknown" without one.
func TestRevisionOf(t *testing.T) {
	bi := func(kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	for _, tc := range []struct {
		override string
		bi       *debug.BuildInfo
		want     string
	}{
		{"", nil, "unknown"},
		{"", bi("GOOS", "linux"), "unknown"},
		{"", bi("vcs.revision", "abc123", "vcs.modified", "false"), "abc123"},
		{"", bi("vcs.modified", "true", "vcs.revision", "abc123"), "abc123-dirty"},
		{"v1-given", bi("vcs.revision", "abc123", "vcs.modified", "true"), "v1-given"},
	} {
		if got := revisionOf(tc.override, tc.bi); got != tc.want {
			t.Errorf("revisionOf(%q, %v) = %q, want %q", tc.override, tc.bi, got, tc.want)
		}
	}
}

// ruleFile is the part of a Prometheus rule file the bundle test reads.
type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Record, Alert, Expr string
		}
	}
}

// promqlNonMetrics are the identifiers of PromQL that are not metric
// names and are not followed by "(" (functions and aggregations are told
// by that).
var promqlNonMetrics = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "Inf": true, "NaN": true,
}

var (
	promqlString    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promqlRange     = regexp.MustCompile(`\[[^\[\]]*\]`)
	promqlLabelList = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlDuration  = regexp.MustCompile(`\b(\d+(ms|[smhdwy]))+\b`)
	promqlNumber    = regexp.MustCompile(`\b\d+(\.\d+)?([eE][+-]?\d+)?\b`)
	promqlIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	grafanaVar      = regexp.MustCompile(`\$\{?\w+\}?`)
)

// metricNames returns the metric names expr selects: its identifiers less
// strings, label matchers and lists, ranges, durations, numbers, keywords and
// functions (an identifier followed by "(").
func metricNames(expr string) []string {
	s := grafanaVar.ReplaceAllString(expr, "")
	s = promqlString.ReplaceAllString(s, `""`)
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlRange.ReplaceAllString(s, " ")
	s = promqlLabelList.ReplaceAllString(s, " ")
	s = promqlDuration.ReplaceAllString(s, " ")
	s = promqlNumber.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		id := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if promqlNonMetrics[id] || strings.HasPrefix(rest, "(") {
			continue
		}
		if !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (instance, reason) (rate(relay_drops_total{reason=~"a|b",instance="$instance"}[5m])) / 1e6`: {"relay_drops_total"},
		`histogram_quantile(0.99, sum by (instance, le) (rate(relay_service_seconds_bucket[5m])))`:          {"relay_service_seconds_bucket"},
		`instance:relay_pending:fill_ratio > 0.9 and on(instance) up == bool 1`:                             {"instance:relay_pending:fill_ratio", "up"},
		`sum(rate(x_total[1h] offset 5m)) without (job) or vector(0) unless y{a="b{c}"}`:                    {"x_total", "y"},
		`relay_config_last_reload_success_timestamp_seconds{instance=~"${instance}"} * 1000`:                {"relay_config_last_reload_success_timestamp_seconds"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}

// documentedQueries returns the queries of operations.md's promql blocks:
// each a line "# RECORD: what it is" and the expression on the next line.
func documentedQueries(t *testing.T, doc string) map[string]string {
	t.Helper()
	out := map[string]string{}
	in := false
	record := ""
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```promql":
			in = true
		case line == "```":
			in = false
		case in && strings.HasPrefix(line, "# "):
			record, _, _ = strings.Cut(strings.TrimPrefix(line, "# "), ": ")
		case in && record != "":
			if _, dup := out[record]; dup {
				t.Errorf("operations.md documents %s twice", record)
			}
			out[record] = line
			record = ""
		case in && strings.TrimSpace(line) != "":
			t.Errorf("operations.md query %q has no \"# record: ...\" line above it", line)
		}
	}
	return out
}

// dashboardExprs returns every PromQL expression of a Grafana dashboard:
// its panels' targets (nested rows included) and its query variables.
func dashboardExprs(t *testing.T, b []byte) []string {
	t.Helper()
	type panel struct {
		ID      int
		Title   string
		Type    string
		GridPos struct{ H, W, X, Y int }
		Targets []struct{ Expr string }
		Panels  json.RawMessage
	}
	var d struct {
		UID, Title string
		Panels     []panel
		Templating struct {
			List []struct {
				Type  string
				Query json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("dashboard has no uid or title")
	}
	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 {
			t.Errorf("panel %q at x %d width %d: off the 24-column grid", p.Title, p.GridPos.X, p.GridPos.W)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((\w+),\s*\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable query: %v", err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable query %q is not label_values(metric, label)", q.Query)
		}
		exprs = append(exprs, m[1])
	}
	return exprs
}

// exportedFamilies scrapes url and returns its metric families' sample
// names: a histogram's _bucket, _sum and _count, every other family's own.
func exportedFamilies(t *testing.T, body string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		if f[3] == "histogram" || f[3] == "summary" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f[2]+s] = true
			}
			continue
		}
		names[f[2]] = true
	}
	return names
}

// promtool returns promtool's path; without one it skips the test, or
// fails it under CI (CI=true), where .ci/run installs it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found, and CI=true: .ci/run installs it (Debian package prometheus)")
		}
		t.Skip("promtool not found (Debian package prometheus): rules and exposition not checked")
	}
	return p
}

// TestMonitoringBundle checks docs/monitoring against the relay: every
// metric its rules and dashboard name is one a running relay exports (or
// a recording rule of rules.yml, or Prometheus' own up); every query
// docs/operations.md documents is a recording rule with the same
// expression, and every recording rule is documented; and promtool passes
// the rules, their unit tests and the relay's exposition.
func TestMonitoringBundle(t *testing.T) {
	ip := startInProcess(t, inProcessConfig)
	_, body := get(t, ip.p.url+"/metrics")
	exported := exportedFamilies(t, body)
	if len(exported) < 50 {
		t.Fatalf("only %d families scraped", len(exported))
	}

	rb, err := os.ReadFile(filepath.Join(monitoringDir, "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	if err := yaml.Unmarshal(rb, &rules); err != nil {
		t.Fatalf("rules.yml: %v", err)
	}
	records := map[string]string{}
	var exprs []string
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records[r.Record] = r.Expr
			} else {
				alerts++
			}
			exprs = append(exprs, r.Expr)
		}
	}
	if len(records) < 10 || alerts < 8 {
		t.Fatalf("rules.yml has %d recording and %d alerting rules", len(records), alerts)
	}

	db, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	exprs = append(exprs, dashboardExprs(t, db)...)
	named := map[string]bool{}
	for _, e := range exprs {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("query %q names no metric", e)
		}
		for _, n := range names {
			named[n] = true
			switch {
			case strings.Contains(n, ":"):
				if _, ok := records[n]; !ok {
					t.Errorf("query %q uses %s, which rules.yml does not record", e, n)
				}
			case n == "up":
			case !exported[n]:
				t.Errorf("query %q uses %s, which the relay does not export", e, n)
			}
		}
	}
	// The bundle watches what the operator asked for.
	for _, n := range []string{"relay_bytes_sent_total", "relay_pending_capacity", "relay_routes_capacity",
		"relay_kernel_receive_drops_total", "relay_amp_throttled_total", "relay_service_seconds_bucket",
		"relay_config_last_reload_successful", "relay_socket_receive_buffer_bytes", "relay_drops_total"} {
		if !named[n] {
			t.Errorf("no rule or panel uses %s", n)
		}
	}

	ob, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := documentedQueries(t, string(ob))
	for rec, expr := range records {
		if d, ok := docs[rec]; !ok {
			t.Errorf("recording rule %s is not documented in operations.md", rec)
		} else if d != expr {
			t.Errorf("%s: operations.md has\n\t%s\nrules.yml has\n\t%s", rec, d, expr)
		}
	}
	for rec := range docs {
		if _, ok := records[rec]; !ok {
			t.Errorf("operations.md documents %s, which rules.yml does not record", rec)
		}
	}
	if t.Failed() {
		return
	}

	t.Run("promtool", func(t *testing.T) {
		pt := promtool(t)
		for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "rules_test.yml"}} {
			cmd := exec.Command(pt, args...)
			cmd.Dir = monitoringDir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		cmd := exec.Command(pt, "check", "metrics")
		cmd.Stdin = bytes.NewReader([]byte(body))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})
}
