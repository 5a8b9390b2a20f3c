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
				"public-lanes": ["203.0.113.7:13338"],
				"galaxies": {"~syl": "203.0.113.5:13441", "~zod": "203.0.113.6:13337"},
				"lanes": {"~ritpub-sipsyl": "198.51.100.9:40000"},
				"sponsors": {"~ritpub-sipsyl": "~sipsyl"},
				"max-pending": 50000,
				"max-requesters": 8,
				"pending-ttl": "20s",
				"suppress-window": "250ms",
				"refuse-when-full": true,
				"max-routes": 4096,
				"direct-lane-expiry": "90s",
				"batch": 32,
				"amp-net-factor": -1,
				"amp-rate": 3000000,
				"amp-net-burst": 40000000,
				"amp-probes": false,
				"log-level": "warn",
				"log-format": "json",
				"metrics": "127.0.0.1:9337",
				"metrics-max-connections": 16,
				"metrics-max-scrapes": 3,
				"pprof": true
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
				// The deprecated amp-net-factor, negative, still turns
				// the network budget off.
				wantAmp := relay.AmpConfig{Rate: 3000000, Burst: relay.DefaultAmpBurst, NetRate: -1, NetBurst: 40000000, ProofLifetime: -1}
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
			text: `{"ship": "~sipsyl", "max-pending": 1000, "galaxies": {"~syl": "10.0.0.1:1", "~zod": "10.0.0.2:2"}}`,
			args: []string{"--max-pending", "2000", "--galaxy", "~syl=10.0.0.9:9", "--ship", "~marzod"},
			check: func(t *testing.T, c runConfig) {
				if c.relay.Pending.MaxEntries != 2000 || c.relay.Ship != mustShip(t, "~marzod") {
					t.Errorf("max-pending %d ship %v", c.relay.Pending.MaxEntries, c.relay.Ship)
				}
				if c.relay.Galaxies[mustShip(t, "~syl")] != ap("10.0.0.9:9") || c.relay.Galaxies[mustShip(t, "~zod")] != ap("10.0.0.2:2") {
					t.Errorf("galaxies %v: the flag must win for ~syl, the file's ~zod stay", c.relay.Galaxies)
				}
			},
		},
		{
			name: "numbers as strings, ships as decimal",
			text: `{"ship": "256", "max-pending": "3000", "galaxies": {"0": "10.0.0.1:13337"}}`,
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

// TestEveryFlagIsAConfigKey checks that each flag of relay run but
// --config can be set from the file under its nested key, and under its
// deprecated flat key with a note.
func TestEveryFlagIsAConfigKey(t *testing.T) {
	newRunFlags().fs.VisitAll(func(fl *flag.Flag) {
		if fl.Name == "config" {
			return
		}
		key := configKeyOf(fl.Name)
		text := fmt.Sprintf(`{%q: "x"}`, key)
		if group, k, nested := strings.Cut(key, "."); nested {
			text = fmt.Sprintf(`{%q: {%q: "x"}}`, group, k)
		}
		f := newRunFlags()
		err := f.applyConfig([]byte(text))
		if err != nil && strings.Contains(err.Error(), "unknown key") || len(f.deprecated) != 0 {
			t.Errorf("flag --%s has no config key %s: %v (deprecated %q)", fl.Name, text, err, f.deprecated)
		}
		if _, ok := f.fileKey[fl.Name]; err == nil && !ok {
			t.Errorf("%s did not set --%s", text, fl.Name)
		}
		f = newRunFlags()
		err = f.applyConfig([]byte(fmt.Sprintf(`{%q: "x"}`, fileKeyOf(fl.Name))))
		if err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("flag --%s has no flat config key: %v", fl.Name, err)
		}
		if top := !strings.Contains(key, "."); len(f.deprecated) == 0 == !top && err == nil {
			t.Errorf("--%s's flat key %q: deprecation notes %q", fl.Name, fileKeyOf(fl.Name), f.deprecated)
		}
	})
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
	for _, want := range []string{"usage: relay run", "-config FILE", "-metrics ADDR:PORT", "-max-pending int", "-pending-ttl duration",
		"(default 30s)", "-capture-max-bytes int", "listens on IPv4 only"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	if strings.Contains(stdout.String(), "panic") || strings.Contains(stdout.String(), " value\n") {
		t.Errorf("usage shows wrapped values:\n%s", stdout.String())
	}
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
	old := load(`{"ship": "~sipsyl", "galaxies": {"~syl": "10.0.0.1:1"}, "max-pending": 1000}`)
	same := load(`{"max-pending": 1000, "galaxies": {"~syl": "10.0.0.1:1"}, "ship": "~sipsyl"}`)
	if live, restart := changedSettings(old, same); len(live)+len(restart) != 0 {
		t.Errorf("same settings reordered: live %v restart %v", live, restart)
	}
	changed := load(`{"ship": "~sipsyl", "galaxies": {"~syl": "10.0.0.2:1"}, "lanes": {"~ritpub-sipsyl": "10.0.0.3:3"},
		"max-pending": 2000, "log-level": "debug", "sponsors": {"~ritpub-sipsyl": "~sipsyl"}}`)
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
		`{"ship": "~sipsyl", "galaxies": {"~syl": "203.0.113.5:13441"}, "lanes": {"~ritpub-sipsyl": "[2001:db8::1]:4"}}`,
		`{"ship": "~sipsyl", "sponsors": {"~ritpub-sipsyl": "~sipsyl"}, "public-lanes": ["1.2.3.4:5"]}`,
		`{"ship": "256", "max-pending": 5000, "pending-ttl": "20s", "refuse-when-full": true, "log-level": "debug"}`,
		`{"ship": "~zod", "metrics": ":9337", "pprof": true, "batch": 1024, "max_pending": 1}`,
		"{\n  \"ship\": \"~sipsyl\",\n  \"batch\" 5\n}",
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

// TestGSOFlag checks that --gso defaults on and that false reaches the
// config the sockets are opened from, by flag and by config file.
func TestGSOFlag(t *testing.T) {
	c, err := loadRunConfig([]string{"--ship", "~zod"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.gso {
		t.Error("gso is off by default")
	}
	c, err = loadRunConfig([]string{"--ship", "~zod", "--gso=false"})
	if err != nil {
		t.Fatal(err)
	}
	if c.gso {
		t.Error("--gso=false left gso on")
	}
	path := filepath.Join(t.TempDir(), "relay.json")
	if err := os.WriteFile(path, []byte(`{"ship": "~zod", "gso": false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = loadRunConfig([]string{"--config", path})
	if err != nil {
		t.Fatal(err)
	}
	if c.gso {
		t.Error(`config "gso": false left gso on`)
	}
}

// TestRelaysAndHintNetsParse: the tables of configured relays and declared
// networks reach the relay's config from flags and from the file.
func TestRelaysAndHintNetsParse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.json")
	if err := os.WriteFile(path, []byte(`{"ship": "~nec", "listen": "127.0.0.1:0", "relays": {"~marnec": "203.0.113.60:13337"}, "hint-nets": ["10.1.0.0/16"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadRunConfig([]string{"--config", path, "--hint-net", "192.168.1.7/16", "--relay", "~fipnev=203.0.113.61:13337"})
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

// TestConfigNestedAndFlat runs config texts in the nested form, the flat
// form and mixed: each pair loads to the same settings, and the flat keys
// (only those) are noted as deprecated. Conflicts between the forms are
// TestConfigErrors' ("nested and flat").
func TestConfigNestedAndFlat(t *testing.T) {
	tests := []struct {
		name, nested, flat string
		deprecated         []string // the flat text's flat keys
	}{
		{name: "top level only", nested: `{"ship": "~sipsyl", "listen": "127.0.0.1:13338", "ship-lane": "127.0.0.1:9", "metrics": "127.0.0.1:9337"}`,
			flat: `{"ship": "~sipsyl", "listen": "127.0.0.1:13338", "ship-lane": "127.0.0.1:9", "metrics": "127.0.0.1:9337"}`},
		{name: "every group",
			nested: `{"ship": "~sipsyl",
				"network": {"galaxies": {"~syl": "203.0.113.5:13441"}, "lanes": {"~ritpub-sipsyl": "198.51.100.9:40000"},
					"relays": {"~marzod": "203.0.113.60:13337"}, "sponsors": {"~ritpub-sipsyl": "~sipsyl"},
					"public-lanes": ["203.0.113.7:13338"], "hint-nets": ["10.1.0.0/16"], "galaxy-domain": "urbit.org", "galaxy-refresh": "60s"},
				"pending": {"max-entries": 50000, "max-entries-per-source": -1, "max-requesters": 8, "max-requesters-per-source": 2,
					"max-overflow-per-source": 7, "ttl": "20s", "suppress-window": "250ms", "refuse-when-full": true},
				"routes": {"max-routes": 4096, "direct-lane-expiry": "90s"},
				"amplification": {"rate": 3000000, "burst": 1000, "net-rate": -1, "net-burst": 2000, "probes": false, "factor": 0, "net-factor": 0},
				"io": {"sockets": 2, "batch": 32, "gso": false},
				"log": {"level": "warn", "format": "json"},
				"pcap": {"file": "", "max-bytes": 200000, "files": 3},
				"metrics-http": {"max-connections": 16, "max-scrapes": 3},
				"fronting": {"device": "u1", "addr": "169.254.1.1", "port": 5, "host-lanes": ["192.0.2.1:53"]}}`,
			flat: `{"ship": "~sipsyl",
				"galaxies": {"~syl": "203.0.113.5:13441"}, "lanes": {"~ritpub-sipsyl": "198.51.100.9:40000"},
				"relays": {"~marzod": "203.0.113.60:13337"}, "sponsors": {"~ritpub-sipsyl": "~sipsyl"},
				"public-lanes": ["203.0.113.7:13338"], "hint-nets": ["10.1.0.0/16"], "galaxy-domain": "urbit.org", "galaxy-refresh": "60s",
				"max-pending": 50000, "max-pending-per-source": -1, "max-requesters": 8, "max-requesters-per-source": 2,
				"max-overflow-per-source": 7, "pending-ttl": "20s", "suppress-window": "250ms", "refuse-when-full": true,
				"max-routes": 4096, "direct-lane-expiry": "90s",
				"amp-rate": 3000000, "amp-burst": 1000, "amp-net-rate": -1, "amp-net-burst": 2000, "amp-probes": false, "amp-factor": 0, "amp-net-factor": 0,
				"sockets": 2, "batch": 32, "gso": false,
				"log-level": "warn", "log-format": "json",
				"capture": "", "capture-max-bytes": 200000, "capture-files": 3,
				"metrics-max-connections": 16, "metrics-max-scrapes": 3,
				"front-device": "u1", "front-addr": "169.254.1.1", "front-port": 5, "front-host-lanes": ["192.0.2.1:53"]}`,
			deprecated: []string{"amp-burst", "amp-factor", "amp-net-burst", "amp-net-factor", "amp-net-rate", "amp-probes", "amp-rate",
				"batch", "capture", "capture-files", "capture-max-bytes", "direct-lane-expiry", "front-addr", "front-device", "front-host-lanes",
				"front-port", "galaxies", "galaxy-domain", "galaxy-refresh", "gso", "hint-nets", "lanes", "log-format", "log-level",
				"max-overflow-per-source", "max-pending", "max-pending-per-source", "max-requesters", "max-requesters-per-source", "max-routes",
				"metrics-max-connections", "metrics-max-scrapes", "pending-ttl", "public-lanes", "refuse-when-full", "relays", "sockets",
				"sponsors", "suppress-window"}},
		{name: "mixed", nested: `{"ship": "~sipsyl", "pending": {"max-entries": 3000, "ttl": "10s"}, "log": {"level": "debug"}}`,
			flat:       `{"ship": "~sipsyl", "pending": {"max-entries": 3000}, "pending-ttl": "10s", "log": {"level": "debug"}}`,
			deprecated: []string{"pending-ttl"}},
	}
	load := func(t *testing.T, text string) runConfig {
		t.Helper()
		c, err := loadRunConfig([]string{"--config", writeConfig(t, text)})
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return c
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, f := load(t, tt.nested), load(t, tt.flat)
			if len(n.deprecated) != 0 {
				t.Errorf("nested form: deprecation notes %q", n.deprecated)
			}
			if live, restart := changedSettings(n, f); len(live)+len(restart) != 0 {
				t.Errorf("the forms differ in %v %v", live, restart)
			}
			var notes []string
			for _, k := range tt.deprecated {
				name, table := fileKeys[k]
				if !table {
					name = k
				}
				notes = append(notes, deprecationNote(k, name))
			}
			if !slices.Equal(f.deprecated, notes) {
				t.Errorf("deprecation notes\n  %q\nwant\n  %q", f.deprecated, notes)
			}
		})
	}
	// The values reach the core's config.
	c := load(t, tests[1].nested)
	if c.relay.Pending.MaxEntries != 50000 || c.relay.Pending.TTL != 20*time.Second || c.relay.Pending.MaxEntriesPerSource != -1 ||
		c.relay.Routes.MaxRoutes != 4096 || c.relay.Amp.Burst != 1000 || c.relay.Amp.NetRate != -1 || c.sockets != 2 || c.gso ||
		c.metricsOpts.maxScrapes != 3 || c.captureFiles != 3 || len(c.relay.Relays) != 1 {
		t.Errorf("nested values not applied: %+v", c)
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

// TestSettingGroups: every flag of relay run is in exactly one group, no
// group's object is also a top-level or flat key, and relay run -h shows
// the groups in order, the settings every deployment sets first.
func TestSettingGroups(t *testing.T) {
	seen := map[string]string{}
	for _, g := range settingGroups {
		if g.key != "" {
			if fl := newRunFlags().fs.Lookup(g.key); fl != nil || fileKeys[g.key] != "" {
				t.Errorf("group %q is also a flat key", g.key)
			}
		}
		for _, k := range g.keys {
			if prev, dup := seen[k.flag]; dup {
				t.Errorf("--%s is in %q and %q", k.flag, prev, g.title)
			}
			seen[k.flag] = g.title
		}
	}
	defineRunFlags().fs.VisitAll(func(fl *flag.Flag) {
		if _, ok := seen[fl.Name]; !ok {
			t.Errorf("--%s is in no group of settingGroups", fl.Name)
		}
	})
	var b bytes.Buffer
	runUsage(&b)
	out := b.String()
	at := 0
	for i, g := range settingGroups {
		heading := g.title + ":\n"
		if g.key != "" {
			heading = fmt.Sprintf("\n%s (config file: %q):\n", g.title, g.key)
		}
		j := strings.Index(out, heading)
		if j < at {
			t.Fatalf("relay run -h: heading %q missing or out of order", heading)
		}
		at = j
		if i == 0 && !strings.HasPrefix(out[j+len(heading):], "  -ship string\n") {
			t.Errorf("relay run -h does not show --ship first under %q", heading)
		}
	}
}
