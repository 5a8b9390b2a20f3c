package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/relay/pit"
)

func mustShip(t testing.TB, s string) lane.Ship {
	t.Helper()
	v, err := lane.ParseShip(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// writeConfig writes text to a config file in a fresh directory.
func writeConfig(t testing.TB, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFile runs good config texts (and command lines over them)
// through loadRunConfig: each loads and passes its check. The bad ones are
// TestConfigErrors'.
func TestConfigFile(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		name  string
		text  string   // config file; "" for no --config
		args  []string // command line after --config
		check func(t *testing.T, c runConfig)
	}{
		{
			name: "minimal",
			text: `{"ship": "~sipsyl"}`,
			check: func(t *testing.T, c runConfig) {
				if c.relay.Ship != mustShip(t, "~sipsyl") || c.listen != ap(defaultListen) {
					t.Errorf("ship %v listen %v", c.relay.Ship, c.listen)
				}
				if c.relay.Pending.MaxEntries != pit.DefaultMaxEntries || c.relay.Pending.TTL != pit.DefaultTTL {
					t.Errorf("limits not defaulted: %+v", c.relay.Pending)
				}
				if c.metrics != "" || c.metricsOpts.pprof || c.logFormat != "auto" {
					t.Errorf("metrics %q pprof %v format %q", c.metrics, c.metricsOpts.pprof, c.logFormat)
				}
				if want := (metricsOptions{maxConns: defaultMetricsMaxConns, maxScrapes: defaultMetricsMaxScrapes}); c.metricsOpts != want {
					t.Errorf("metrics listener %+v, want the defaults %+v", c.metricsOpts, want)
				}
			},
		},
		{
			name: "every table and limit",
			text: `{
				"ship": "~sipsyl",
				"listen": "127.0.0.1:13338",
				"ship-lane": "127.0.0.1:23338",
				"metrics": "127.0.0.1:9337",
				"network": {
					"public-lanes": ["203.0.113.7:13338"],
					"galaxies": {"~syl": "203.0.113.5:13441", "~zod": "203.0.113.6:13337"},
					"lanes": {"~ritpub-sipsyl": "198.51.100.9:40000"},
					"sponsors": {"~ritpub-sipsyl": "~sipsyl"}
				},
				"pending": {"max-entries": 50000, "max-requesters": 8, "ttl": "20s", "suppress-window": "250ms", "refuse-when-full": true},
				"routes": {"max-routes": 4096, "direct-lane-expiry": "90s"},
				"io": {"batch": 32},
				"amplification": {"net-rate": -1, "rate": 3000000, "net-burst": 40000000, "probes": false},
				"log": {"level": "warn", "format": "json"},
				"metrics-http": {"max-connections": 16, "max-scrapes": 3, "pprof": true}
			}`,
			check: func(t *testing.T, c runConfig) {
				r := c.relay
				if r.ShipLane != ap("127.0.0.1:23338") || c.listen != ap("127.0.0.1:13338") {
					t.Errorf("ship lane %v listen %v", r.ShipLane, c.listen)
				}
				if !slices.Contains(r.Self, ap("203.0.113.7:13338")) || !slices.Contains(r.Self, c.listen) {
					t.Errorf("self %v", r.Self)
				}
				if len(r.Galaxies) != 2 || r.Galaxies[mustShip(t, "~syl")] != ap("203.0.113.5:13441") {
					t.Errorf("galaxies %v", r.Galaxies)
				}
				if r.Pinned[mustShip(t, "~ritpub-sipsyl")] != ap("198.51.100.9:40000") {
					t.Errorf("pinned %v", r.Pinned)
				}
				if r.Sponsors.Sponsor(mustShip(t, "~ritpub-sipsyl")) != mustShip(t, "~sipsyl") {
					t.Errorf("sponsor override not applied")
				}
				want := pit.Config{MaxEntries: 50000, MaxRequestersPerEntry: 8, TTL: 20 * time.Second,
					SuppressWindow: 250 * time.Millisecond, FullPolicy: pit.RefuseNew}
				if r.Pending != want {
					t.Errorf("pending %+v, want %+v", r.Pending, want)
				}
				if r.Routes.MaxRoutes != 4096 || r.Routes.DirectLaneExpiry != 90*time.Second {
					t.Errorf("routes %+v", r.Routes)
				}
				wantAmp := amp.Config{Rate: 3000000, Burst: amp.DefaultBurst, NetRate: -1, NetBurst: 40000000, ProofLifetime: -1}
				if r.Amp != wantAmp {
					t.Errorf("amp %+v, want %+v", r.Amp, wantAmp)
				}
				if want := (metricsOptions{maxConns: 16, maxScrapes: 3, pprof: true}); c.metricsOpts != want {
					t.Errorf("metrics listener %+v, want %+v", c.metricsOpts, want)
				}
				if c.batch != 32 || c.logLevel.String() != "warn" || c.logFormat != "json" || c.metrics != "127.0.0.1:9337" || !c.metricsOpts.pprof {
					t.Errorf("batch %d level %v format %q metrics %q pprof %v", c.batch, c.logLevel, c.logFormat, c.metrics, c.metricsOpts.pprof)
				}
			},
		},
		{
			name: "flags override the file",
			text: `{"ship": "~sipsyl", "log": {"level": "warn"}, "network": {"galaxies": {"~syl": "10.0.0.1:1", "~zod": "10.0.0.2:2"}}}`,
			args: []string{"--log-level", "debug", "--galaxy", "~syl=10.0.0.9:9", "--ship", "~marzod"},
			check: func(t *testing.T, c runConfig) {
				if c.logLevel.String() != "debug" || c.relay.Ship != mustShip(t, "~marzod") {
					t.Errorf("log level %v ship %v", c.logLevel, c.relay.Ship)
				}
				if c.relay.Galaxies[mustShip(t, "~syl")] != ap("10.0.0.9:9") || c.relay.Galaxies[mustShip(t, "~zod")] != ap("10.0.0.2:2") {
					t.Errorf("galaxies %v: the flag must win for ~syl, the file's ~zod stay", c.relay.Galaxies)
				}
			},
		},
		{
			name: "numbers as strings, ships as decimal",
			text: `{"ship": "256", "pending": {"max-entries": "3000"}, "network": {"galaxies": {"0": "10.0.0.1:13337"}}}`,
			check: func(t *testing.T, c runConfig) {
				if c.relay.Ship != mustShip(t, "~marzod") || c.relay.Pending.MaxEntries != 3000 || len(c.relay.Galaxies) != 1 {
					t.Errorf("%v %d %v", c.relay.Ship, c.relay.Pending.MaxEntries, c.relay.Galaxies)
				}
			},
		},
		{name: "flags only", args: []string{"--ship", "~zod"}, check: func(t *testing.T, c runConfig) {
			if c.configPath != "" || c.relay.Ship != mustShip(t, "~zod") {
				t.Errorf("%q %v", c.configPath, c.relay.Ship)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.text != "" {
				args = append([]string{"--config", writeConfig(t, tt.text)}, args...)
			}
			c, err := loadRunConfig(args)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestConfigFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.json")
	_, err := loadRunConfig([]string{"--config", path})
	if err == nil || err.Error() != "config "+path+": no such file or directory" {
		t.Fatalf("error %v", err)
	}
}

// TestEverySettingIsAConfigKey checks that each setting of settingTable
// but --config is set from the file under its key, nested in its group,
// and that a setting with a flag is the same value under both names.
func TestEverySettingIsAConfigKey(t *testing.T) {
	for _, s := range settingTable {
		if s.key == "" {
			if s.flag != "config" {
				t.Errorf("--%s has no config key", s.flag)
			}
			continue
		}
		text := fmt.Sprintf(`{%q: "x"}`, s.key)
		if group, k, nested := cutKey(s.key); nested {
			text = fmt.Sprintf(`{%q: {%q: "x"}}`, group, k)
		}
		f := newRunFlags()
		err := f.applyConfig([]byte(text))
		if err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("%s: %v", text, err)
		}
		if _, ok := f.fromFile[s.key]; !ok {
			t.Errorf("%s did not set %q", text, s.key)
		}
		if s.flag == "" {
			continue
		}
		if fl := f.fs.Lookup(s.flag); fl == nil || fl.Value != flag.Value(f.values[s.key]) {
			t.Errorf("--%s is not the value of %q", s.flag, s.key)
		}
	}
}

// TestRunBadConfigExits checks what an operator sees: one line on stderr
// and exit code 2.
func TestRunBadConfigExits(t *testing.T) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--ship", "~sipsy"}, `relay run: --ship ~sipsy: want a ship as @p`},
		{[]string{"--ship", "~sipsyl", "--galaxy", "~syl=1.2.3.4"}, `relay run: --galaxy ~syl=1.2.3.4: want a lane as IP:PORT`},
		{[]string{"--ship", "~sipsyl", "--listen", udp.LocalAddr().String()}, "relay run: listen " + udp.LocalAddr().String() + ": bind: address already in use"},
		{[]string{"--ship", "~sipsyl", "--listen", "127.0.0.1:0", "--metrics", tcp.Addr().String()}, "relay run: metrics: listen " + tcp.Addr().String() + ": bind: address already in use"},
		{[]string{"--ship", "~sipsyl", "--nope"}, "relay run: --nope: unknown flag (see relay run -h)"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"run", "--log-format", "console"}, tt.args...), nil, &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d", tt.args, code, exitUsage)
		}
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], tt.want) {
			t.Errorf("%v: stderr %q, want one line starting %q", tt.args, stderr.String(), tt.want)
		}
	}
}

func TestRunHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "-h"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out := stdout.String()
	for _, want := range []string{"usage: relay run", "--config FILE ", "--metrics ADDR:PORT ", "(default 0.0.0.0:13337)",
		"--galaxy ~G=ADDR:PORT ", "(repeatable)", "pending.max-entries", ".ttl", "network.relays"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	if strings.Contains(out, "panic") || strings.Contains(out, " value\n") {
		t.Errorf("usage shows wrapped values:\n%s", out)
	}
}

// helpScreen is the screen relay run -h must fit: 40 lines of 80 columns.
const helpScreenLines, helpScreenColumns = 40, 80

// TestRunHelpFitsOneScreen: relay run -h is one screen, every flag on one
// line (a flag added must push a setting into the file only), and it
// names every setting: the flags by group, the others as file keys.
func TestRunHelpFitsOneScreen(t *testing.T) {
	var b bytes.Buffer
	runUsage(&b)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) > helpScreenLines {
		t.Errorf("relay run -h is %d lines, more than %d:\n%s", len(lines), helpScreenLines, b.String())
	}
	for _, l := range lines {
		if len(l) > helpScreenColumns {
			t.Errorf("relay run -h has a line of %d columns, more than %d:\n%s", len(l), helpScreenColumns, l)
		}
	}
	flags := 0
	for _, s := range settingTable {
		if s.flag == "" {
			continue
		}
		flags++
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, "  --"+s.flag+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("--%s is on %d lines of relay run -h, want 1", s.flag, n)
		}
	}
	if flags != newRunFlagsCount(t) {
		t.Errorf("the table has %d flags, the flag set %d", flags, newRunFlagsCount(t))
	}
}

// newRunFlagsCount counts the flags of relay run's flag set.
func newRunFlagsCount(t *testing.T) int {
	t.Helper()
	n := 0
	newRunFlags().fs.VisitAll(func(*flag.Flag) { n++ })
	return n
}

func TestChangedSettings(t *testing.T) {
	load := func(text string) runConfig {
		t.Helper()
		c, err := loadRunConfig([]string{"--config", writeConfig(t, text)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := load(`{"ship": "~sipsyl", "network": {"galaxies": {"~syl": "10.0.0.1:1"}}, "pending": {"max-entries": 1000}}`)
	same := load(`{"pending": {"max-entries": 1000}, "network": {"galaxies": {"~syl": "10.0.0.1:1"}}, "ship": "~sipsyl"}`)
	if live, restart := changedSettings(old, same); len(live)+len(restart) != 0 {
		t.Errorf("same settings reordered: live %v restart %v", live, restart)
	}
	changed := load(`{"ship": "~sipsyl", "network": {"galaxies": {"~syl": "10.0.0.2:1"}, "lanes": {"~ritpub-sipsyl": "10.0.0.3:3"},
		"sponsors": {"~ritpub-sipsyl": "~sipsyl"}}, "pending": {"max-entries": 2000}, "log": {"level": "debug"}}`)
	live, restart := changedSettings(old, changed)
	if !slices.Equal(live, []string{"log.level", "network.galaxies", "network.lanes"}) {
		t.Errorf("live %v", live)
	}
	if !slices.Equal(restart, []string{"network.sponsors", "pending.max-entries"}) {
		t.Errorf("restart %v", restart)
	}
}

func TestParseHelpIsErrHelp(t *testing.T) {
	if _, err := loadRunConfig([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("error %v", err)
	}
}

// FuzzConfig feeds arbitrary config texts to the parser and validation:
// they must never panic, and every error must be one line.
func FuzzConfig(f *testing.F) {
	for _, s := range []string{
		`{"ship": "~sipsyl"}`,
		`{"ship": "~sipsyl", "network": {"galaxies": {"~syl": "203.0.113.5:13441"}, "lanes": {"~ritpub-sipsyl": "[2001:db8::1]:4"}}}`,
		`{"ship": "~sipsyl", "network": {"sponsors": {"~ritpub-sipsyl": "~sipsyl"}, "public-lanes": ["1.2.3.4:5"]}}`,
		`{"ship": "256", "pending": {"max-entries": 5000, "ttl": "20s", "refuse-when-full": true}, "log": {"level": "debug"}}`,
		`{"ship": "~zod", "metrics": ":9337", "metrics-http": {"pprof": true}, "io": {"batch": 1024}, "max_pending": 1}`,
		"{\n  \"ship\": \"~sipsyl\",\n  \"io\" 5\n}",
		`{"ship": "~zod", "pending": {"max-entries": 5000, "ttl": "20s"}, "network": {"galaxies": {"~zod": "1.2.3.4:5"}}}`,
		`{"ship": "~zod", "pending": {"max-entries": 1}, "max-pending": 2, "amplification": null, "io": {"batch_": 1}}`,
		`[]`, `null`, ``, `{"ship": {"a": 1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rf := newRunFlags()
		err := rf.applyConfig(b)
		if err == nil {
			_, err = rf.validate()
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("error is not one line: %q", err)
		}
	})
}

// TestGSOSetting checks that io.gso defaults on and that false reaches
// the config the sockets are opened from.
func TestGSOSetting(t *testing.T) {
	c, err := loadRunConfig([]string{"--ship", "~zod"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.gso {
		t.Error("gso is off by default")
	}
	c, err = loadRunConfig([]string{"--config", writeConfig(t, `{"ship": "~zod", "io": {"gso": false}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if c.gso {
		t.Error(`config "io.gso": false left gso on`)
	}
}

// TestRelaysAndHintNetsParse: the tables of configured relays and declared
// networks reach the relay's config from flags and from the file.
func TestRelaysAndHintNetsParse(t *testing.T) {
	path := writeConfig(t, `{"ship": "~nec", "listen": "127.0.0.1:0", "network": {"relays": {"~marnec": "203.0.113.60:13337", "~fipnev": "203.0.113.61:13337"}, "hint-nets": ["10.1.0.0/16"]}}`)
	c, err := loadRunConfig([]string{"--config", path, "--hint-net", "192.168.1.7/16"})
	if err != nil {
		t.Fatal(err)
	}
	marnec, _ := lane.ParseShip("~marnec")
	fipnev, _ := lane.ParseShip("~fipnev")
	if c.relay.Relays[marnec] != netip.MustParseAddrPort("203.0.113.60:13337") || c.relay.Relays[fipnev] != netip.MustParseAddrPort("203.0.113.61:13337") {
		t.Errorf("relays: %v", c.relay.Relays)
	}
	if len(c.relay.HintNets) != 2 || c.relay.HintNets[0].String() != "10.1.0.0/16" || c.relay.HintNets[1].String() != "192.168.0.0/16" {
		t.Errorf("hint-nets: %v", c.relay.HintNets)
	}
	if _, err := loadRunConfig([]string{"--ship", "~nec", "--hint-net", "lots"}); err == nil || !strings.Contains(err.Error(), "ADDR/BITS") {
		t.Errorf("a bad prefix: %v", err)
	}
	if _, err := loadRunConfig([]string{"--ship", "~nec", "--front-netns", "u", "--ship-lane", "127.0.0.1:9"}); err == nil || !strings.Contains(err.Error(), `want no "ship-lane"`) {
		t.Errorf("front-netns with ship-lane: %v", err)
	}
}

// TestMetricsNetwork: an IPv4 --metrics address, 0.0.0.0 included, is
// listened on as tcp4 (IPv4 only, as the UDP socket on 0.0.0.0 is); an
// empty host or an IPv6 address as tcp.
func TestMetricsNetwork(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:9337": "tcp4", "127.0.0.1:9337": "tcp4", ":9337": "tcp", "[::]:9337": "tcp", "[::1]:9337": "tcp",
	} {
		if got := metricsNetwork(addr); got != want {
			t.Errorf("metricsNetwork(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestConfigEveryGroup loads a file with every group and key set, and
// checks the values reach the core's config.
func TestConfigEveryGroup(t *testing.T) {
	c, err := loadRunConfig([]string{"--config", writeConfig(t, `{"ship": "~sipsyl",
		"network": {"galaxies": {"~syl": "203.0.113.5:13441"}, "lanes": {"~ritpub-sipsyl": "198.51.100.9:40000"},
			"relays": {"~marzod": "203.0.113.60:13337"}, "sponsors": {"~ritpub-sipsyl": "~sipsyl"},
			"public-lanes": ["203.0.113.7:13338"], "hint-nets": ["10.1.0.0/16"], "galaxy-domain": "urbit.org", "galaxy-refresh": "60s"},
		"pending": {"max-entries": 50000, "max-entries-per-source": -1, "max-requesters": 8, "max-requesters-per-source": 2,
			"max-overflow-per-source": 7, "ttl": "20s", "suppress-window": "250ms", "refuse-when-full": true},
		"routes": {"max-routes": 4096, "direct-lane-expiry": "90s"},
		"amplification": {"rate": 3000000, "burst": 1000, "net-rate": -1, "net-burst": 2000, "probes": false},
		"io": {"sockets": 2, "batch": 32, "gso": false},
		"log": {"level": "warn", "format": "json"},
		"pcap": {"file": "", "max-bytes": 200000, "files": 3},
		"metrics-http": {"max-connections": 16, "max-scrapes": 3},
		"fronting": {"device": "u1", "addr": "169.254.1.1", "port": 5, "host-lanes": ["192.0.2.1:53"]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if c.relay.Pending.MaxEntries != 50000 || c.relay.Pending.TTL != 20*time.Second || c.relay.Pending.MaxEntriesPerSource != -1 ||
		c.relay.Routes.MaxRoutes != 4096 || c.relay.Amp.Burst != 1000 || c.relay.Amp.NetRate != -1 || c.sockets != 2 || c.gso ||
		c.metricsOpts.maxScrapes != 3 || c.captureFiles != 3 || len(c.relay.Relays) != 1 || c.galaxyRefresh != time.Minute {
		t.Errorf("nested values not applied: %+v", c)
	}
	for key := range c.settings {
		if _, ok := settingByKey(key); !ok {
			t.Errorf("settings holds %q, no setting's key", key)
		}
	}
	if len(c.settings) != len(settingTable)-1 {
		t.Errorf("settings holds %d values, want every setting's but --config's (%d)", len(c.settings), len(settingTable)-1)
	}
}

// TestZeroTakesTheDefault: a package setting given as 0 is its default,
// as the package's zero value is.
func TestZeroTakesTheDefault(t *testing.T) {
	c, err := loadRunConfig([]string{"--config", writeConfig(t,
		`{"ship": "~sipsyl", "pending": {"max-entries": 0, "max-requesters": 0, "ttl": "0s"}, "routes": {"max-routes": 0, "direct-lane-expiry": "0s"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.New(c.relay); err != nil {
		t.Errorf("relay.New: %v", err)
	}
}

// TestSettingGroups: every setting's key is in a group of settingGroups
// and every group has a setting; keys and flags are each unique; no group's
// object is also a top-level key; relay run -h shows the groups that have
// flags in order, the settings every deployment sets first.
func TestSettingGroups(t *testing.T) {
	keys, flags := map[string]bool{}, map[string]bool{}
	used := map[string]bool{}
	for _, s := range settingTable {
		if keys[s.key] || flags[s.flag] {
			t.Errorf("%q (--%s) is declared twice", s.key, s.flag)
		}
		if s.key != "" {
			keys[s.key] = true
		}
		if s.flag != "" {
			flags[s.flag] = true
		}
		if _, ok := groupOf(s.group()); !ok {
			t.Errorf("%q is in no group of settingGroups", s.key)
		}
		used[s.group()] = true
		if (s.flag == "") != (s.usage == "") || (s.flag == "") != (s.why == "") || s.doc == "" {
			t.Errorf("%q (--%s): usage %q why %q doc %q; a flag has a usage and a why, a file-only setting neither, every setting a doc",
				s.key, s.flag, s.usage, s.why, s.doc)
		}
	}
	for _, g := range settingGroups {
		if !used[g.key] {
			t.Errorf("group %q has no setting", g.key)
		}
		if g.key != "" && keys[g.key] {
			t.Errorf("group %q is also a top-level key", g.key)
		}
	}
	var b bytes.Buffer
	runUsage(&b)
	out := b.String()
	at := 0
	for i, g := range settingGroups {
		hasFlag := false
		for _, s := range settingsOf(g) {
			hasFlag = hasFlag || s.flag != ""
		}
		heading := "\n" + g.title + ":\n"
		if g.key != "" {
			heading = fmt.Sprintf("\n%s (file: %q):\n", g.title, g.key)
		}
		j := strings.Index(out, heading)
		if !hasFlag {
			if j >= 0 {
				t.Errorf("relay run -h shows heading %q with no flag under it", heading)
			}
			continue
		}
		if j < at {
			t.Fatalf("relay run -h: heading %q missing or out of order", heading)
		}
		at = j
		if i == 0 && !strings.HasPrefix(out[j+len(heading):], "  --ship ~SHIP ") {
			t.Errorf("relay run -h does not show --ship first under %q", heading)
		}
	}
}
