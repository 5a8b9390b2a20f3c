package main

import (
	"bytes"
	"errors"
	"flag"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
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

// TestConfigFile runs config texts (and command lines over them) through
// loadRunConfig: each either loads and passes its check, or fails with a
// one-line error containing wantErr.
func TestConfigFile(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		name    string
		text    string   // config file; "" for no --config
		args    []string // command line after --config
		wantErr string
		check   func(t *testing.T, c runConfig)
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
				if c.metrics != "" || c.pprof || c.logFormat != "auto" {
					t.Errorf("metrics %q pprof %v format %q", c.metrics, c.pprof, c.logFormat)
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
				"log-level": "warn",
				"log-format": "json",
				"metrics": "127.0.0.1:9337",
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
				if r.Amp.NetFactor != -1 {
					t.Errorf("amp net factor %d, want -1", r.Amp.NetFactor)
				}
				if c.batch != 32 || c.logLevel.String() != "warn" || c.logFormat != "json" || c.metrics != "127.0.0.1:9337" || !c.pprof {
					t.Errorf("batch %d level %v format %q metrics %q pprof %v", c.batch, c.logLevel, c.logFormat, c.metrics, c.pprof)
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

		// Bad ships.
		{name: "bad @p in galaxies", text: `{"ship": "~sipsyl", "galaxies": {"~sylx": "10.0.0.1:1"}}`, wantErr: `"galaxies": invalid value "~sylx=10.0.0.1:1": lane: invalid ship`},
		{name: "bad @p ship", text: `{"ship": "~sampel-palnt"}`, wantErr: `ship: lane: invalid ship "~sampel-palnt"`},
		{name: "bad @p on the command line", text: `{"ship": "~sipsyl"}`, args: []string{"--lane", "~zzz=10.0.0.1:1"}, wantErr: `invalid value "~zzz=10.0.0.1:1" for flag -lane: lane: invalid ship`},
		{name: "galaxy that is a star", text: `{"ship": "~sipsyl", "galaxies": {"~marzod": "10.0.0.1:1"}}`, wantErr: "galaxy: ~marzod is a star, not a galaxy"},
		{name: "fronting a moon", text: `{"ship": "~mister-ritpub-sipsyl"}`, wantErr: "ship: ~mister-ritpub-sipsyl is a moon"},
		{name: "no ship", text: `{"listen": "127.0.0.1:1"}`, wantErr: "ship: required"},
		{name: "bad sponsor override", text: `{"ship": "~sipsyl", "sponsors": {"~ritpub-sipsyl": "~sampel-palnet"}}`, wantErr: `"sponsors": invalid value "~ritpub-sipsyl=~sampel-palnet": lane: invalid sponsor override`},

		// Bad addresses.
		{name: "lane without port", text: `{"ship": "~sipsyl", "lanes": {"~ritpub-sipsyl": "10.0.0.1"}}`, wantErr: `"lanes": invalid value "~ritpub-sipsyl=10.0.0.1": lane: invalid lane`},
		{name: "lane port 0", text: `{"ship": "~sipsyl", "galaxies": {"~syl": "10.0.0.1:0"}}`, wantErr: "port 0"},
		{name: "lane a host name", text: `{"ship": "~sipsyl", "galaxies": {"~syl": "syl.urbit.org:13441"}}`, wantErr: "lane: invalid lane"},
		{name: "listen", text: `{"ship": "~sipsyl", "listen": "localhost:13337"}`, wantErr: `listen: invalid address "localhost:13337"`},
		{name: "ship lane", text: `{"ship": "~sipsyl", "ship-lane": "10.0.0.1:99999"}`, wantErr: "ship-lane: lane: invalid lane"},
		{name: "public lane not an array", text: `{"ship": "~sipsyl", "public-lanes": "1.2.3.4:5"}`, wantErr: `"public-lanes": want an array`},
		{name: "metrics address", text: `{"ship": "~sipsyl", "metrics": "9337"}`, wantErr: `metrics: invalid address "9337"`},
		{name: "metrics host name", text: `{"ship": "~sipsyl", "metrics": "localhost:9337"}`, wantErr: "is not an IP address"},

		// Bad keys and values.
		{name: "unknown key", text: `{"ship": "~sipsyl", "shp": 1}`, wantErr: `unknown key "shp"`},
		{name: "underscore key", text: `{"ship": "~sipsyl", "max_pending": 5}`, wantErr: `unknown key "max_pending" (did you mean "max-pending"?)`},
		{name: "singular table key", text: `{"ship": "~sipsyl", "galaxy": {}}`, wantErr: `unknown key "galaxy" (did you mean "galaxies"?)`},
		{name: "config in config", text: `{"ship": "~sipsyl", "config": "other.json"}`, wantErr: `unknown key "config"`},
		{name: "not a number", text: `{"ship": "~sipsyl", "max-pending": "lots"}`, wantErr: `"max-pending": invalid value "lots"`},
		{name: "duration without unit", text: `{"ship": "~sipsyl", "pending-ttl": 30}`, wantErr: `"pending-ttl": invalid value "30"`},
		{name: "object for a scalar", text: `{"ship": "~sipsyl", "batch": {"n": 1}}`, wantErr: `"batch": want a string, number or boolean`},
		{name: "null", text: `{"ship": null}`, wantErr: `"ship": want a string, number or boolean`},
		{name: "table of numbers", text: `{"ship": "~sipsyl", "galaxies": {"~syl": 5}}`, wantErr: `"galaxies": want an object of ship to string`},
		{name: "bool not a bool", text: `{"ship": "~sipsyl", "refuse-when-full": "maybe"}`, wantErr: `"refuse-when-full": invalid value "maybe"`},
		{name: "log level", text: `{"ship": "~sipsyl", "log-level": "loud"}`, wantErr: `log-level: "loud" is not debug`},
		{name: "log format", text: `{"ship": "~sipsyl", "log-format": "xml"}`, wantErr: `log-format: "xml" is not auto`},
		{name: "pprof without metrics", text: `{"ship": "~sipsyl", "pprof": true}`, wantErr: "pprof: needs --metrics"},

		// Bad limits.
		{name: "max-pending 0", text: `{"ship": "~sipsyl", "max-pending": 0}`, wantErr: "max-pending: 0 is not positive"},
		{name: "max-requesters over the cap", text: `{"ship": "~sipsyl", "max-requesters": 1000}`, wantErr: "limits (max-pending"},
		{name: "negative ttl", text: `{"ship": "~sipsyl", "pending-ttl": "-1s"}`, wantErr: "pending-ttl: -1s is not positive"},
		{name: "batch too big", text: `{"ship": "~sipsyl", "batch": 100000}`, wantErr: "batch: 100000 is outside"},
		{name: "no sockets", text: `{"ship": "~sipsyl", "sockets": 0}`, wantErr: "sockets: 0 is outside"},
		{name: "negative amp rate", text: `{"ship": "~sipsyl", "amp-rate": -1}`, wantErr: "amp-rate and amp-burst must not be negative"},
		{name: "max-routes", text: `{"ship": "~sipsyl", "max-routes": -1}`, wantErr: "max-routes: -1 is not positive"},
		{name: "refresh with domain", text: `{"ship": "~sipsyl", "galaxy-domain": "urbit.org", "galaxy-refresh": "0s"}`, wantErr: "galaxy-refresh: 0s is not positive"},

		// Bad files.
		{name: "syntax error", text: "{\n  \"ship\": \"~sipsyl\",\n  \"batch\" 5\n}", wantErr: "line 3 column 11: invalid character"},
		{name: "truncated", text: `{"ship": "~sipsyl"`, wantErr: "line 1 column 19: unexpected end of file"},
		{name: "empty", text: " ", wantErr: "empty file"},
		{name: "array", text: `["~sipsyl"]`, wantErr: "want a JSON object"},
		{name: "two objects", text: `{"ship": "~sipsyl"} {}`, wantErr: "text after the JSON object"},
		{name: "unexpected argument", text: `{"ship": "~sipsyl"}`, args: []string{"extra"}, wantErr: `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.text != "" {
				args = append([]string{"--config", writeConfig(t, tt.text)}, args...)
			}
			c, err := loadRunConfig(args)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("loaded; want error containing %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q, want it to contain %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error is not one line: %q", err)
				}
				return
			}
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
// --config can be set from the file under its documented key.
func TestEveryFlagIsAConfigKey(t *testing.T) {
	newRunFlags().fs.VisitAll(func(fl *flag.Flag) {
		if fl.Name == "config" {
			return
		}
		fs := newRunFlags().fs
		err := applyKey(fs, fileKeyOf(fl.Name), []byte(`"x"`))
		if err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("flag --%s has no config key: %v", fl.Name, err)
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
		{[]string{"--ship", "~sipsy"}, `relay run: ship: lane: invalid ship "~sipsy"`},
		{[]string{"--ship", "~sipsyl", "--galaxy", "~syl=1.2.3.4"}, `relay run: invalid value "~syl=1.2.3.4" for flag -galaxy`},
		{[]string{"--ship", "~sipsyl", "--listen", udp.LocalAddr().String()}, "relay run: listen " + udp.LocalAddr().String() + ": bind: address already in use"},
		{[]string{"--ship", "~sipsyl", "--listen", "127.0.0.1:0", "--metrics", tcp.Addr().String()}, "relay run: metrics: listen " + tcp.Addr().String() + ": bind: address already in use"},
		{[]string{"--ship", "~sipsyl", "--nope"}, "relay run: flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"run"}, tt.args...), nil, &stdout, &stderr)
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
	for _, want := range []string{"usage: relay run", "-config FILE", "-metrics ADDR:PORT", "-max-pending"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
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
	if !slices.Equal(live, []string{"galaxies", "lanes", "log-level"}) {
		t.Errorf("live %v", live)
	}
	if !slices.Equal(restart, []string{"max-pending", "sponsors"}) {
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
		`[]`, `null`, ``, `{"ship": {"a": 1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rf := newRunFlags()
		err := applyConfig(rf.fs, b)
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
	if _, err := loadRunConfig([]string{"--ship", "~nec", "--front-netns", "u", "--ship-lane", "127.0.0.1:9"}); err == nil || !strings.Contains(err.Error(), "excludes ship-lane") {
		t.Errorf("front-netns with ship-lane: %v", err)
	}
}
