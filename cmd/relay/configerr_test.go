package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// badConfig is a configuration relay run must refuse, and the message it
// must give: exactly want, or (when want is empty) containing wantSub.
// "{path}" in either stands for the config file's path.
type badConfig struct {
	name    string
	text    string   // config file; "" for none
	args    []string // command line (after --config FILE when text is set)
	want    string
	wantSub string
}

// badConfigs covers every message of config.go and configerr.go, in the
// manner of CoreDNS's setup tests: the input, the message.
func badConfigs(t *testing.T) []badConfig {
	noWrite := t.TempDir()
	if err := os.Chmod(noWrite, 0o500); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := `{"ship": "~sipsyl"}`
	cases := []badConfig{
		// Types in the file: the key, the value as written, the form wanted.
		{name: "duration without unit", text: `{"ship": "~sipsyl", "pending-ttl": 30}`,
			want: `config: "pending-ttl": 30: want a duration string such as "30s"`},
		{name: "not a number", text: `{"ship": "~sipsyl", "max-pending": "lots"}`,
			want: `config: "max-pending": "lots": want a whole number`},
		{name: "fraction", text: `{"ship": "~sipsyl", "capture-max-bytes": 1.5}`,
			want: `config: "capture-max-bytes": 1.5: want a whole number`},
		{name: "bool not a bool", text: `{"ship": "~sipsyl", "refuse-when-full": "maybe"}`,
			want: `config: "refuse-when-full": "maybe": want true or false`},
		{name: "object for a scalar", text: `{"ship": "~sipsyl", "batch": {"n":  1}}`,
			want: `config: "batch": {"n":1}: want a string, number or boolean`},
		{name: "null", text: `{"ship": null}`,
			want: `config: "ship": null: want a string, number or boolean`},
		{name: "table of numbers", text: `{"ship": "~sipsyl", "galaxies": {"~syl": 5}}`,
			want: `config: "galaxies": {"~syl":5}: want an object of ship to lane, such as {"~zod": "203.0.113.5:13337"}`},
		{name: "sponsors not an object", text: `{"ship": "~sipsyl", "sponsors": ["~sipsyl"]}`,
			want: `config: "sponsors": ["~sipsyl"]: want an object of ship to sponsor, such as {"~ritpub-sipsyl": "~sipsyl"}`},
		{name: "public lane not an array", text: `{"ship": "~sipsyl", "public-lanes": "1.2.3.4:5"}`,
			want: `config: "public-lanes": "1.2.3.4:5": want an array of lanes, such as ["203.0.113.7:13337"]`},
		{name: "hint nets not an array", text: `{"ship": "~sipsyl", "hint-nets": 10}`,
			want: `config: "hint-nets": 10: want an array of networks, such as ["10.0.0.0/8"]`},
		{name: "long value clipped", text: `{"ship": "~sipsyl", "batch": "` + strings.Repeat("9", 200) + `"}`,
			want: `config: "batch": "` + strings.Repeat("9", 79) + `...: want a whole number`},

		// Ships and lanes in the file's tables: the entry as written.
		{name: "bad @p in galaxies", text: `{"ship": "~sipsyl", "galaxies": {"~sylx": "10.0.0.1:1"}}`,
			want: `config: "galaxies": {"~sylx": "10.0.0.1:1"}: want a ship as @p such as ~sampel-palnet, or its number ("sylx" is not a six-letter word)`},
		{name: "galaxy that is a star", text: `{"ship": "~sipsyl", "galaxies": {"~marzod": "10.0.0.1:1"}}`,
			want: `config: "galaxies": {"~marzod": "10.0.0.1:1"}: ~marzod is a star; want a galaxy (pin other ships' lanes with "lanes" or --lane)`},
		{name: "lane without port", text: `{"ship": "~sipsyl", "lanes": {"~ritpub-sipsyl": "10.0.0.1"}}`,
			want: `config: "lanes": {"~ritpub-sipsyl": "10.0.0.1"}: want a lane as IP:PORT such as 203.0.113.5:13337 (an IP address, not a host name; IPv6 in brackets)`},
		{name: "lane port 0", text: `{"ship": "~sipsyl", "relays": {"~marzod": "10.0.0.1:0"}}`,
			want: `config: "relays": {"~marzod": "10.0.0.1:0"}: want a lane as IP:PORT with a port other than 0`},
		{name: "lane a host name", text: `{"ship": "~sipsyl", "galaxies": {"~syl": "syl.urbit.org:13441"}}`,
			wantSub: `config: "galaxies": {"~syl": "syl.urbit.org:13441"}: want a lane as IP:PORT`},
		{name: "bad sponsor override", text: `{"ship": "~sipsyl", "sponsors": {"~ritpub-sipsyl": "~sampel-palnet"}}`,
			want: `config: "sponsors": {"~ritpub-sipsyl": "~sampel-palnet"}: want a sponsor that ranks above the ship (~sampel-palnet (planet) cannot sponsor ~ritpub-sipsyl (planet))`},
		{name: "bad sponsor @p", text: `{"ship": "~sipsyl", "sponsors": {"~ritpub-sipsyl": "~zzz"}}`,
			want: `config: "sponsors": {"~ritpub-sipsyl": "~zzz"}: want a ship as @p such as ~sampel-palnet, or its number ("zzz" is not a suffix syllable)`},
		{name: "bad public lane", text: `{"ship": "~sipsyl", "public-lanes": ["1.2.3.4"]}`,
			want: `config: "public-lanes": "1.2.3.4": want a lane as IP:PORT such as 203.0.113.5:13337 (an IP address, not a host name; IPv6 in brackets)`},
		{name: "bad hint net", text: `{"ship": "~sipsyl", "hint-nets": ["lots"]}`,
			want: `config: "hint-nets": "lots": want a network as ADDR/BITS such as 10.0.0.0/8`},

		// Keys.
		{name: "unknown key", text: `{"ship": "~sipsyl", "shp": 1}`,
			want: `config: "shp": 1: unknown key; the keys are the groups and settings of relay run -h (see docs/operations.md)`},
		{name: "underscore key", text: `{"ship": "~sipsyl", "max_pending": 5}`,
			want: `config: "max_pending": 5: unknown key; did you mean "pending.max-entries"?`},
		{name: "singular table key", text: `{"ship": "~sipsyl", "galaxy": {}}`,
			want: `config: "galaxy": {}: unknown key; did you mean "network.galaxies"?`},
		{name: "underscore table key", text: `{"ship": "~sipsyl", "public_lanes": []}`,
			want: `config: "public_lanes": []: unknown key; did you mean "network.public-lanes"?`},
		{name: "underscore group", text: `{"ship": "~sipsyl", "metrics_http": {}}`,
			want: `config: "metrics_http": {}: unknown key; did you mean "metrics-http"?`},
		{name: "unknown key in a group", text: `{"ship": "~sipsyl", "routes": {"max": 5}}`,
			want: `config: "routes.max": 5: unknown key; the keys of "routes" are max-routes, direct-lane-expiry`},
		{name: "underscore key in a group", text: `{"ship": "~sipsyl", "pending": {"max_entries": 5}}`,
			want: `config: "pending.max_entries": 5: unknown key; did you mean "pending.max-entries"?`},
		{name: "flat key in a group", text: `{"ship": "~sipsyl", "pending": {"max-pending": 5}}`,
			wantSub: `config: "pending.max-pending": 5: unknown key; the keys of "pending" are max-entries, `},
		{name: "top-level key in a group", text: `{"pending": {"ship": "~sipsyl"}}`,
			wantSub: `config: "pending.ship": "~sipsyl": unknown key; the keys of "pending" are `},
		{name: "group not an object", text: `{"ship": "~sipsyl", "pending": 5}`,
			want: `config: "pending": 5: want an object of the pending table settings, such as {"max-entries": ...}`},
		{name: "group null", text: `{"ship": "~sipsyl", "amplification": null}`,
			want: `config: "amplification": null: want an object of the amplification settings, such as {"rate": ...}`},

		// Nested and flat: a setting given both ways is an error naming both.
		{name: "nested and flat", text: `{"ship": "~sipsyl", "pending": {"max-entries": 5000}, "max-pending": 5000}`,
			want: `config: "pending.max-entries" and "max-pending": both set; want one, "pending.max-entries" ("max-pending" is the deprecated flat key)`},
		{name: "nested and flat tables", text: `{"ship": "~sipsyl", "galaxies": {"~syl": "10.0.0.1:1"}, "network": {"galaxies": {"~zod": "10.0.0.2:2"}}}`,
			want: `config: "network.galaxies" and "galaxies": both set; want one, "network.galaxies" ("galaxies" is the deprecated flat key)`},
		{name: "nested and flat capture", text: `{"ship": "~sipsyl", "capture": "a.pcap", "pcap": {"file": "b.pcap"}}`,
			want: `config: "pcap.file" and "capture": both set; want one, "pcap.file" ("capture" is the deprecated flat key)`},

		// Nested values: named by their path.
		{name: "nested duration", text: `{"ship": "~sipsyl", "pending": {"ttl": 30}}`,
			want: `config: "pending.ttl": 30: want a duration string such as "30s"`},
		{name: "nested limit", text: `{"ship": "~sipsyl", "pending": {"max-entries": 3}}`,
			want: `config: "pending.max-entries": 3: want a whole number from 16 to 268435424`},
		{name: "nested table entry", text: `{"ship": "~sipsyl", "network": {"lanes": {"~ritpub-sipsyl": "10.0.0.1"}}}`,
			wantSub: `config: "network.lanes": {"~ritpub-sipsyl": "10.0.0.1"}: want a lane as IP:PORT`},
		{name: "nested amp", text: `{"ship": "~sipsyl", "amplification": {"burst": -1}}`,
			want: `config: "amplification.burst": -1: want 0 or more bytes (a negative "amp-rate" turns the budget off)`},
		{name: "nested metrics scrapes", text: `{"ship": "~sipsyl", "metrics-http": {"max-connections": 8, "max-scrapes": 8}}`,
			want: `config: "metrics-http.max-scrapes": 8: want a whole number from 1 to 7, fewer than "metrics-max-connections" (8), so that /healthz always finds a connection`},
		{name: "nested flag wins", text: `{"ship": "~sipsyl", "io": {"batch": 8}}`, args: []string{"--batch", "0"},
			want: `--batch 0: want a whole number from 1 to 1024`},
		{name: "config in config", text: `{"ship": "~sipsyl", "config": "other.json"}`,
			want: `config: "config": "other.json": unknown key; a config file cannot name another`},

		// The file itself: named by its path.
		{name: "syntax error", text: "{\n  \"ship\": \"~sipsyl\",\n  \"batch\" 5\n}",
			want: "config {path}: line 3 column 11: invalid character '5' after object key"},
		{name: "truncated", text: `{"ship": "~sipsyl"`, want: "config {path}: line 1 column 19: unexpected end of file"},
		{name: "empty", text: " ", want: "config {path}: empty file; want a JSON object"},
		{name: "array", text: `["~sipsyl"]`, want: "config {path}: want a JSON object"},
		{name: "json null", text: `null`, want: "config {path}: want a JSON object"},
		{name: "two objects", text: `{"ship": "~sipsyl"} {}`, want: "config {path}: text after the JSON object"},
		{name: "missing file", args: []string{"--config", filepath.Join(noWrite, "nope.json")},
			want: "config " + filepath.Join(noWrite, "nope.json") + ": no such file or directory"},
		{name: "file a directory", args: []string{"--config", noWrite},
			want: "config " + noWrite + ": is a directory"},

		// Validation, file settings: named by key, the value as written.
		{name: "no ship in the file", text: `{"listen": "127.0.0.1:1"}`,
			want: `config: "ship" (or --ship): missing: want the fronted ship, a galaxy, star or planet as @p such as ~sampel-palnet`},
		{name: "bad @p ship", text: `{"ship": "~sampel-palnt"}`,
			want: `config: "ship": "~sampel-palnt": want a ship as @p such as ~sampel-palnet, or its number ("palnt" is not a six-letter word)`},
		{name: "fronting a moon", text: `{"ship": "~mister-ritpub-sipsyl"}`,
			want: `config: "ship": "~mister-ritpub-sipsyl": a moon; want a galaxy, star or planet (a relay fronts one of those)`},
		{name: "listen", text: `{"ship": "~sipsyl", "listen": "localhost:13337"}`,
			want: `config: "listen": "localhost:13337": want IP:PORT such as 0.0.0.0:13337 (an IP address, not a host name)`},
		{name: "ship lane", text: `{"ship": "~sipsyl", "ship-lane": "10.0.0.1:99999"}`,
			wantSub: `config: "ship-lane": "10.0.0.1:99999": want a lane as IP:PORT`},
		{name: "front with ship lane", text: `{"ship": "~sipsyl", "front-netns": "u", "ship-lane": "127.0.0.1:9"}`,
			want: `config: "front-netns": "u": want no "ship-lane" (--ship-lane) with it: in fronting mode the ship is reached through its namespace's device`},
		{name: "front addr", text: `{"ship": "~sipsyl", "front-netns": "u", "front-addr": "fe80::1"}`,
			want: `config: "front-addr": "fe80::1": want an IPv4 address such as 169.254.13.37`},
		{name: "front port from listen 0", text: `{"ship": "~sipsyl", "front-netns": "u", "listen": "127.0.0.1:0"}`,
			want: `--front-port 0 (the default): want a port from 1 to 65535 (0 means the listen port, which is 0 here)`},
		{name: "front port", text: `{"ship": "~sipsyl", "front-netns": "u", "front-port": 70000}`,
			want: `config: "front-port": 70000: want a port from 1 to 65535 (0 means the listen port, which is 0 here)`},
		{name: "log level", text: `{"ship": "~sipsyl", "log-level": "loud"}`,
			want: `config: "log-level": "loud": want debug, info, warn or error`},
		{name: "log format", text: `{"ship": "~sipsyl", "log-format": "xml"}`,
			want: `config: "log-format": "xml": want auto, json or console`},
		{name: "metrics address", text: `{"ship": "~sipsyl", "metrics": "9337"}`,
			want: `config: "metrics": "9337": want IP:PORT such as 127.0.0.1:9337`},
		{name: "metrics host name", text: `{"ship": "~sipsyl", "metrics": "localhost:9337"}`,
			want: `config: "metrics": "localhost:9337": want IP:PORT such as 127.0.0.1:9337 ("localhost" is not an IP address)`},
		{name: "metrics port", text: `{"ship": "~sipsyl", "metrics": "127.0.0.1:http"}`,
			want: `config: "metrics": "127.0.0.1:http": want IP:PORT such as 127.0.0.1:9337 ("http" is not a port)`},
		{name: "pprof without metrics", text: `{"ship": "~sipsyl", "pprof": true}`,
			want: `config: "pprof": true: needs "metrics" (--metrics), whose listener serves it`},
		{name: "metrics connections 1", text: `{"ship": "~sipsyl", "metrics-max-connections": 1}`,
			want: `config: "metrics-max-connections": 1: want a whole number from 2 to 4096`},
		{name: "metrics connections over", text: `{"ship": "~sipsyl", "metrics-max-connections": 4097}`,
			want: `config: "metrics-max-connections": 4097: want a whole number from 2 to 4096`},
		{name: "metrics scrapes 0", text: `{"ship": "~sipsyl", "metrics-max-scrapes": 0}`,
			want: `config: "metrics-max-scrapes": 0: want a whole number from 1 to 63, fewer than "metrics-max-connections" (64), so that /healthz always finds a connection`},
		{name: "metrics scrapes all the connections", text: `{"ship": "~sipsyl", "metrics-max-connections": 8, "metrics-max-scrapes": 8}`,
			want: `config: "metrics-max-scrapes": 8: want a whole number from 1 to 7, fewer than "metrics-max-connections" (8), so that /healthz always finds a connection`},
		{name: "metrics connections under the default scrapes", text: `{"ship": "~sipsyl", "metrics-max-connections": 4}`,
			want: `--metrics-max-scrapes 8 (the default): want a whole number from 1 to 3, fewer than "metrics-max-connections" (4), so that /healthz always finds a connection`},
		{name: "batch too big", text: `{"ship": "~sipsyl", "batch": 100000}`,
			want: `config: "batch": 100000: want a whole number from 1 to 1024`},
		{name: "no sockets", text: `{"ship": "~sipsyl", "sockets": 0}`,
			want: `config: "sockets": 0: want a whole number from 1 to 64`},
		{name: "amp rate too high", text: `{"ship": "~sipsyl", "amp-rate": 2000000000}`,
			want: `config: "amp-rate": 2000000000: want at most 1073741824 bytes a second`},
		{name: "amp net rate too high", text: `{"ship": "~sipsyl", "amp-net-rate": 2000000000}`,
			want: `config: "amp-net-rate": 2000000000: want at most 1073741824 bytes a second`},
		{name: "negative amp burst", text: `{"ship": "~sipsyl", "amp-burst": -1}`,
			want: `config: "amp-burst": -1: want 0 or more bytes (a negative "amp-rate" turns the budget off)`},
		{name: "negative amp net burst", text: `{"ship": "~sipsyl", "amp-net-burst": -1}`,
			want: `config: "amp-net-burst": -1: want 0 or more bytes (a negative "amp-rate" turns the budget off)`},
		{name: "amp burst too high", text: `{"ship": "~sipsyl", "amp-burst": 9000000000}`,
			want: `config: "amp-burst": 9000000000: want at most 8589934592 bytes`},
		{name: "refresh with domain", text: `{"ship": "~sipsyl", "galaxy-domain": "urbit.org", "galaxy-refresh": "0s"}`,
			want: `config: "galaxy-refresh": "0s": want a positive duration such as "300s"`},
		{name: "capture size", text: `{"ship": "~sipsyl", "capture": "x.pcap", "capture-max-bytes": 10}`,
			want: `config: "capture-max-bytes": 10: want at least 131072 bytes`},
		{name: "capture files", text: `{"ship": "~sipsyl", "capture": "x.pcap", "capture-files": 0}`,
			want: `config: "capture-files": 0: want at least 1 file`},
		{name: "capture no directory", text: `{"ship": "~sipsyl", "capture": "/nonexistent/x.pcap"}`,
			want: `config: "capture": "/nonexistent/x.pcap": want a file in an existing directory (/nonexistent: no such file or directory)`},
		{name: "capture under a file", text: `{"ship": "~sipsyl", "capture": "` + aFile + `/x.pcap"}`,
			want: `config: "capture": "` + aFile + `/x.pcap": want a file in a directory (` + aFile + ` is not one)`},
		{name: "capture not writable", text: `{"ship": "~sipsyl", "capture": "` + noWrite + `/x.pcap"}`,
			want: `config: "capture": "` + noWrite + `/x.pcap": want a file in a directory this user may write (` + noWrite + ` is not writable)`},

		// Limits: the operator's keys and ranges, never the table's fields.
		{name: "max-pending negative", text: `{"ship": "~sipsyl", "max-pending": -1}`,
			want: `config: "max-pending": -1: want a whole number from 16 to 268435424`},
		{name: "max-pending below the shards", text: `{"ship": "~sipsyl", "max-pending": 15}`,
			want: `config: "max-pending": 15: want a whole number from 16 to 268435424`},
		{name: "max-pending over the shards' cap", text: `{"ship": "~sipsyl", "max-pending": 268435425}`,
			want: `config: "max-pending": 268435425: want a whole number from 16 to 268435424`},
		{name: "max-requesters over the cap", text: `{"ship": "~sipsyl", "max-requesters": 4097}`,
			want: `config: "max-requesters": 4097: want a whole number from 1 to 4096`},
		{name: "max-requesters negative", text: `{"ship": "~sipsyl", "max-requesters": -1}`,
			want: `config: "max-requesters": -1: want a whole number from 1 to 4096`},
		{name: "negative ttl", text: `{"ship": "~sipsyl", "pending-ttl": "-1s"}`,
			want: `config: "pending-ttl": "-1s": want a duration from 100ms to 1h49m13.6s`},
		{name: "ttl under a tick", text: `{"ship": "~sipsyl", "pending-ttl": "99ms"}`,
			want: `config: "pending-ttl": "99ms": want a duration from 100ms to 1h49m13.6s`},
		{name: "ttl over the wheel", text: `{"ship": "~sipsyl", "pending-ttl": "2h"}`,
			want: `config: "pending-ttl": "2h": want a duration from 100ms to 1h49m13.6s`},
		{name: "suppress window negative", text: `{"ship": "~sipsyl", "suppress-window": "-1ms"}`,
			want: `config: "suppress-window": "-1ms": want a duration from 0s to 1h0m0s`},
		{name: "suppress window over", text: `{"ship": "~sipsyl", "suppress-window": "61m"}`,
			want: `config: "suppress-window": "61m": want a duration from 0s to 1h0m0s`},
		{name: "max-routes", text: `{"ship": "~sipsyl", "max-routes": -1}`,
			want: `config: "max-routes": -1: want a positive whole number`},
		{name: "direct lane expiry", text: `{"ship": "~sipsyl", "direct-lane-expiry": "-1s"}`,
			want: `config: "direct-lane-expiry": "-1s": want a positive duration such as "2m"`},

		// Flags: named as flags, the value as typed.
		{name: "flag: no ship", args: []string{"--listen", "127.0.0.1:1"},
			want: `--ship: missing: want the fronted ship, a galaxy, star or planet as @p such as ~sampel-palnet`},
		{name: "flag: bad @p", args: []string{"--ship", "~sipsy"},
			want: `--ship ~sipsy: want a ship as @p such as ~sampel-palnet, or its number ("sipsy" is not a six-letter word)`},
		{name: "flag: seven letters", args: []string{"--ship", "~ritpub-sipsylx"},
			want: `--ship ~ritpub-sipsylx: want a ship as @p such as ~sampel-palnet, or its number ("sipsylx" is not a six-letter word)`},
		{name: "flag: trailing dash", args: []string{"--ship", "~sipsyl-"},
			want: `--ship ~sipsyl-: want a ship as @p such as ~sampel-palnet, or its number (a word is missing after -)`},
		{name: "flag: not a number", args: []string{"--ship", "~sipsyl", "--max-pending", "lots"},
			want: `--max-pending lots: want a whole number`},
		{name: "flag: int64", args: []string{"--ship", "~sipsyl", "--capture-max-bytes", "1MB"},
			want: `--capture-max-bytes 1MB: want a whole number`},
		{name: "flag: duration", args: []string{"--ship", "~sipsyl", "--pending-ttl", "30"},
			want: `--pending-ttl 30: want a duration string such as "30s"`},
		{name: "flag: bool", args: []string{"--ship", "~sipsyl", "--gso=maybe"},
			want: `--gso maybe: want true or false`},
		{name: "flag: galaxy without lane", args: []string{"--ship", "~sipsyl", "--galaxy", "~syl"},
			want: `--galaxy ~syl: want SHIP=IP:PORT such as ~zod=203.0.113.5:13337`},
		{name: "flag: galaxy lane", args: []string{"--ship", "~sipsyl", "--galaxy", "~syl=1.2.3.4"},
			want: `--galaxy ~syl=1.2.3.4: want a lane as IP:PORT such as 203.0.113.5:13337 (an IP address, not a host name; IPv6 in brackets)`},
		{name: "flag: sponsor without =", args: []string{"--ship", "~sipsyl", "--sponsor", "~ritpub-sipsyl"},
			want: `--sponsor ~ritpub-sipsyl: want SHIP=SPONSOR such as ~ritpub-sipsyl=~sipsyl`},
		{name: "flag: quoted value", args: []string{"--ship", "~sipsyl", "--log-level", "very loud"},
			want: `--log-level "very loud": want debug, info, warn or error`},
		{name: "flag: unknown", args: []string{"--ship", "~sipsyl", "--nope"},
			want: `--nope: unknown flag (see relay run -h)`},
		{name: "flag: missing value", args: []string{"--ship"},
			want: `--ship: missing value (see relay run -h)`},
		{name: "flag: bad syntax", args: []string{"---ship", "~zod"},
			want: `bad flag syntax: ---ship (see relay run -h)`},
		{name: "flag: unexpected argument", args: []string{"--ship", "~sipsyl", "extra"},
			want: `extra: unexpected argument (flags take their values as --flag VALUE; see relay run -h)`},
		{name: "flag: metrics scrapes", args: []string{"--ship", "~sipsyl", "--metrics-max-scrapes", "64"},
			want: `--metrics-max-scrapes 64: want a whole number from 1 to 63, fewer than "metrics-max-connections" (64), so that /healthz always finds a connection`},
		{name: "flag over a good file", text: ok, args: []string{"--batch", "0"},
			want: `--batch 0: want a whole number from 1 to 1024`},
		{name: "flag wins over a bad file value", text: `{"ship": "~sipsyl", "max-pending": 1}`, args: []string{"--max-pending", "2"},
			want: `--max-pending 2: want a whole number from 16 to 268435424`},
		{name: "file value under a flag elsewhere", text: `{"ship": "~sipsyl", "max-pending": 1}`, args: []string{"--batch", "8"},
			want: `config: "max-pending": 1: want a whole number from 16 to 268435424`},
	}
	if os.Geteuid() == 0 {
		// root may write anywhere: the unwritable directory is not.
		cases = slices.DeleteFunc(cases, func(c badConfig) bool { return c.name == "capture not writable" })
	}
	return cases
}

// loadArgs returns the command line of a case, writing its config file.
func (tt badConfig) loadArgs(t *testing.T) (args []string, path string) {
	args = tt.args
	if tt.text != "" {
		path = writeConfig(t, tt.text)
		args = append([]string{"--config", path}, args...)
	}
	return args, path
}

// checkMessage fails t unless msg is the case's message, one line, in the
// operator's terms.
func (tt badConfig) checkMessage(t *testing.T, path, msg string) {
	t.Helper()
	want, sub := strings.ReplaceAll(tt.want, "{path}", path), strings.ReplaceAll(tt.wantSub, "{path}", path)
	switch {
	case want != "" && msg != want:
		t.Errorf("message\n  %s\nwant\n  %s", msg, want)
	case want == "" && !strings.Contains(msg, sub):
		t.Errorf("message\n  %s\nwant it to contain\n  %s", msg, sub)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message is not one line: %q", msg)
	}
	// No package prefixes, Go field names or flag-package wording; no
	// prefix twice.
	for _, leak := range []string{"pit:", "lane:", "relay:", "routes:", "MaxEntries", "TTL ", "invalid value", "parse error", "for flag", "flag provided"} {
		if strings.Contains(msg, leak) {
			t.Errorf("message %q has internal wording %q", msg, leak)
		}
	}
	parts := strings.Split(msg, ": ")
	for i := 1; i < len(parts); i++ {
		if parts[i] == parts[i-1] {
			t.Errorf("message %q repeats %q", msg, parts[i])
		}
	}
	if strings.Count(msg, "see relay run -h") > 1 {
		t.Errorf("message %q repeats its hint", msg)
	}
}

// TestConfigErrors checks every configuration message: each bad config,
// by file or by flag, is refused with exactly its message.
func TestConfigErrors(t *testing.T) {
	for _, tt := range badConfigs(t) {
		t.Run(tt.name, func(t *testing.T) {
			args, path := tt.loadArgs(t)
			_, err := loadRunConfig(args)
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			tt.checkMessage(t, path, err.Error())
		})
	}
}

// TestConfigLimitEdges checks that the limit ranges TestConfigErrors
// rejects just outside are accepted at their edges by the relay core
// itself: the ranges cmd/relay checks (and names) are pit's, not looser
// and not tighter, so the core's own error, in its internal names, is
// never what an operator sees.
func TestConfigLimitEdges(t *testing.T) {
	for _, text := range []string{
		`{"ship": "~sipsyl", "max-pending": 16, "pending-ttl": "100ms", "suppress-window": "0s", "max-requesters": 1}`,
		`{"ship": "~sipsyl", "max-pending": 16, "pending-ttl": "1h49m13.6s", "suppress-window": "1h", "max-requesters": 4096}`,
		`{"ship": "~sipsyl", "max-pending": 16, "max-routes": 1, "amp-rate": 0, "amp-burst": 0}`,
		`{"ship": "~sipsyl", "max-pending": 16, "amp-factor": -1, "amp-burst": -5}`,
		`{"ship": "~sipsyl", "max-pending": 16, "amp-rate": 1073741824, "amp-net-rate": 1073741824, "amp-burst": 8589934592, "amp-net-burst": 8589934592}`,
		`{"ship": "~sipsyl", "max-pending": 16, "amp-rate": -1, "amp-net-rate": -1, "amp-probes": false}`,
		`{"ship": "~sipsyl", "max-pending": 16, "metrics-max-connections": 2, "metrics-max-scrapes": 1}`,
		`{"ship": "~sipsyl", "max-pending": 16, "metrics-max-connections": 4096, "metrics-max-scrapes": 4095}`,
	} {
		if _, err := loadRunConfig([]string{"--config", writeConfig(t, text)}); err != nil {
			t.Errorf("%s: %v", text, err)
		}
	}
}

// TestCheckMatchesRun runs every bad config through `relay check` and
// `relay run`: both exit 2 with the same message, check's as a plain line
// on stderr, run's (stderr not a terminal, --log-format auto) as a JSON
// log entry, and neither writes to stdout.
func TestCheckMatchesRun(t *testing.T) {
	for _, tt := range badConfigs(t) {
		t.Run(tt.name, func(t *testing.T) {
			args, path := tt.loadArgs(t)
			var cout, cerr bytes.Buffer
			if code := run(append([]string{"check"}, args...), nil, &cout, &cerr); code != exitUsage {
				t.Fatalf("check: exit %d, want %d (stderr %q)", code, exitUsage, cerr.String())
			}
			checkMsg, ok := strings.CutPrefix(strings.TrimSuffix(cerr.String(), "\n"), "relay check: ")
			if !ok || cout.Len() != 0 {
				t.Fatalf("check: stdout %q stderr %q; want stderr only, starting \"relay check: \"", cout.String(), cerr.String())
			}
			tt.checkMessage(t, path, checkMsg)
			var rout, rerr bytes.Buffer
			if code := run(append([]string{"run"}, args...), nil, &rout, &rerr); code != exitUsage {
				t.Fatalf("run: exit %d, want %d (stderr %q)", code, exitUsage, rerr.String())
			}
			var e struct{ Level, Msg, Error string }
			if err := json.Unmarshal(rerr.Bytes(), &e); err != nil || strings.Count(rerr.String(), "\n") != 1 || rout.Len() != 0 {
				t.Fatalf("run: stdout %q stderr %q; want one JSON line on stderr (%v)", rout.String(), rerr.String(), err)
			}
			if e.Level != "error" || e.Msg != "start-up failed" || e.Error != checkMsg {
				t.Errorf("run said %+v; check said %q", e, checkMsg)
			}
		})
	}
}

// TestCheckOK: a good config passes check with "config ok" and a summary
// on stdout, nothing on stderr; -h is check's usage, exit 0.
func TestCheckOK(t *testing.T) {
	path := writeConfig(t, `{"ship": "~sipsyl", "listen": "127.0.0.1:13338", "network": {"galaxies": {"~syl": "203.0.113.5:13441"}}}`)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", "--config", path, "--lane", "~ritpub-sipsyl=203.0.113.9:4000"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	want := "config ok: ~sipsyl on 127.0.0.1:13338, ship lane none, 1 galaxies, 1 pinned lanes\n"
	if stdout.String() != want || stderr.Len() != 0 {
		t.Errorf("stdout %q stderr %q; want stdout %q", stdout.String(), stderr.String(), want)
	}
	// A flat key passes, with its deprecation note on stderr.
	stdout.Reset()
	path = writeConfig(t, `{"ship": "~sipsyl", "listen": "127.0.0.1:13338", "galaxies": {"~syl": "203.0.113.5:13441"}, "pending-ttl": "20s"}`)
	if code := run([]string{"check", "--config", path}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("flat keys: exit %d, stderr %q", code, stderr.String())
	}
	wantErr := `relay check: config: "galaxies" is deprecated (flat keys are read for now); write "network": {"galaxies": ...}` + "\n" +
		`relay check: config: "pending-ttl" is deprecated (flat keys are read for now); write "pending": {"ttl": ...}` + "\n"
	if stdout.String() != "config ok: ~sipsyl on 127.0.0.1:13338, ship lane none, 1 galaxies, 0 pinned lanes\n" || stderr.String() != wantErr {
		t.Errorf("flat keys: stdout %q stderr %q; want stderr %q", stdout.String(), stderr.String(), wantErr)
	}
	stdout.Reset()
	if code := run([]string{"check", "-h"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage: relay check") {
		t.Errorf("check -h: exit %d, stdout %q", code, stdout.String())
	}
}

// TestStartupErrorFormat: a start-up error is a JSON entry under
// --log-format json (from the flag or the file, even when another setting
// is what failed), and the plain line under console.
func TestStartupErrorFormat(t *testing.T) {
	jsonFile := writeConfig(t, `{"ship": "~sipsyl", "log-format": "json", "batch": 0}`)
	consoleFile := writeConfig(t, `{"ship": "~sipsyl", "log-format": "console", "batch": 0}`)
	const msg = `config: "batch": 0: want a whole number from 1 to 1024`
	tests := []struct {
		args     []string
		wantJSON bool
		want     string
	}{
		{[]string{"--config", jsonFile}, true, msg},
		{[]string{"--config", consoleFile}, false, "relay run: " + msg},
		{[]string{"--config", consoleFile, "--log-format", "json"}, true, msg},
		{[]string{"--config", jsonFile, "--log-format", "console"}, false, "relay run: " + msg},
		{[]string{"--log-format", "json", "--ship", "~sipsy"}, true, `--ship ~sipsy: want a ship as @p such as ~sampel-palnet, or its number ("sipsy" is not a six-letter word)`},
		{[]string{"--log-format", "console", "--listen", "127.0.0.1:0", "--ship", "~sipsyl", "--capture", "/nonexistent/x"}, false,
			"relay run: --capture /nonexistent/x: want a file in an existing directory (/nonexistent: no such file or directory)"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"run"}, tt.args...), nil, &stdout, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d", tt.args, code)
		}
		line := strings.TrimSuffix(stderr.String(), "\n")
		var e map[string]any
		isJSON := json.Unmarshal([]byte(line), &e) == nil
		switch {
		case strings.Contains(line, "\n"):
			t.Errorf("%v: %q is not one line", tt.args, stderr.String())
		case isJSON != tt.wantJSON:
			t.Errorf("%v: %q: JSON %v, want %v", tt.args, line, isJSON, tt.wantJSON)
		case isJSON && (e["error"] != tt.want || e["level"] != "error" || e["ts"] == nil):
			t.Errorf("%v: entry %v, want error %q", tt.args, e, tt.want)
		case !isJSON && line != tt.want:
			t.Errorf("%v: %q, want %q", tt.args, line, tt.want)
		}
	}
}

// TestShellWord: command-line values are echoed as typed, quoted only when
// a shell would need it.
func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"~sipsyl": "~sipsyl", "10.0.0.1:99": "10.0.0.1:99", "[::1]:4": "[::1]:4",
		"": `""`, "a b": `"a b"`, "x\ny": `"x\ny"`, `"`: `"\""`,
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
	if got := fmt.Sprint(&settingError{ref: "--x", value: "1", want: "want 2"}); got != "--x 1: want 2" {
		t.Errorf("flag error %q", got)
	}
}
