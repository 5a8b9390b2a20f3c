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
		{name: "duration without unit", text: `{"ship": "~sipsyl", "pending": {"ttl": 30}}`,
			want: `config: "pending.ttl": 30: want a duration string such as "30s"`},
		{name: "not a number", text: `{"ship": "~sipsyl", "pending": {"max-entries": "lots"}}`,
			want: `config: "pending.max-entries": "lots": want a whole number`},
		{name: "fraction", text: `{"ship": "~sipsyl", "pcap": {"max-bytes": 1.5}}`,
			want: `config: "pcap.max-bytes": 1.5: want a whole number`},
		{name: "bool not a bool", text: `{"ship": "~sipsyl", "pending": {"refuse-when-full": "maybe"}}`,
			want: `config: "pending.refuse-when-full": "maybe": want true or false`},
		{name: "object for a scalar", text: `{"ship": "~sipsyl", "io": {"batch": {"n": 1}}}`,
			want: `config: "io.batch": {"n":1}: want a string, number or boolean`},
		{name: "null", text: `{"ship": null}`,
			want: `config: "ship": null: want a string, number or boolean`},
		{name: "table of numbers", text: `{"ship": "~sipsyl", "network": {"galaxies": {"~syl": 5}}}`,
			want: `config: "network.galaxies": {"~syl":5}: want an object of ship to lane, such as {"~zod": "203.0.113.5:13337"}`},
		{name: "sponsors not an object", text: `{"ship": "~sipsyl", "network": {"sponsors": ["~sipsyl"]}}`,
			want: `config: "network.sponsors": ["~sipsyl"]: want an object of ship to sponsor, such as {"~ritpub-sipsyl": "~sipsyl"}`},
		{name: "public lane not an array", text: `{"ship": "~sipsyl", "network": {"public-lanes": "1.2.3.4:5"}}`,
			want: `config: "network.public-lanes": "1.2.3.4:5": want an array of lanes, such as ["203.0.113.7:13337"]`},
		{name: "hint nets not an array", text: `{"ship": "~sipsyl", "network": {"hint-nets": 10}}`,
			want: `config: "network.hint-nets": 10: want an array of networks, such as ["10.0.0.0/8"]`},
		{name: "long value clipped", text: `{"ship": "~sipsyl", "io": {"batch": "` + strings.Repeat("9", 200) + `"}}`,
			want: `config: "io.batch": "` + strings.Repeat("9", 79) + `...: want a whole number`},

		// Ships and lanes in the file's tables: the entry as written.
		{name: "bad @p in galaxies", text: `{"ship": "~sipsyl", "network": {"galaxies": {"~sylx": "10.0.0.1:1"}}}`,
			want: `config: "network.galaxies": {"~sylx": "10.0.0.1:1"}: want a ship as @p such as ~sampel-palnet, or its number ("sylx" is not a six-letter word)`},
		{name: "galaxy that is a star", text: `{"ship": "~sipsyl", "network": {"galaxies": {"~marzod": "10.0.0.1:1"}}}`,
			want: `config: "network.galaxies": {"~marzod": "10.0.0.1:1"}: ~marzod is a star; want a galaxy (pin other ships' lanes with "network.lanes" (--lane))`},
		{name: "lane without port", text: `{"ship": "~sipsyl", "network": {"lanes": {"~ritpub-sipsyl": "10.0.0.1"}}}`,
			want: `config: "network.lanes": {"~ritpub-sipsyl": "10.0.0.1"}: want a lane as IP:PORT such as 203.0.113.5:13337 (an IP address, not a host name; IPv6 in brackets)`},
		{name: "lane port 0", text: `{"ship": "~sipsyl", "network": {"relays": {"~marzod": "10.0.0.1:0"}}}`,
			want: `config: "network.relays": {"~marzod": "10.0.0.1:0"}: want a lane as IP:PORT with a port other than 0`},
		{name: "lane a host name", text: `{"ship": "~sipsyl", "network": {"galaxies": {"~syl": "syl.urbit.org:13441"}}}`,
			wantSub: `config: "network.galaxies": {"~syl": "syl.urbit.org:13441"}: want a lane as IP:PORT`},
		{name: "bad sponsor override", text: `{"ship": "~sipsyl", "network": {"sponsors": {"~ritpub-sipsyl": "~sampel-palnet"}}}`,
			want: `config: "network.sponsors": {"~ritpub-sipsyl": "~sampel-palnet"}: want a sponsor that ranks above the ship (~sampel-palnet (planet) cannot sponsor ~ritpub-sipsyl (planet))`},
		{name: "bad sponsor @p", text: `{"ship": "~sipsyl", "network": {"sponsors": {"~ritpub-sipsyl": "~zzz"}}}`,
			want: `config: "network.sponsors": {"~ritpub-sipsyl": "~zzz"}: want a ship as @p such as ~sampel-palnet, or its number ("zzz" is not a suffix syllable)`},
		{name: "bad public lane", text: `{"ship": "~sipsyl", "network": {"public-lanes": ["1.2.3.4"]}}`,
			want: `config: "network.public-lanes": "1.2.3.4": want a lane as IP:PORT such as 203.0.113.5:13337 (an IP address, not a host name; IPv6 in brackets)`},
		{name: "bad hint net", text: `{"ship": "~sipsyl", "network": {"hint-nets": ["lots"]}}`,
			want: `config: "network.hint-nets": "lots": want a network as ADDR/BITS such as 10.0.0.0/8`},

		// Keys.
		{name: "unknown key", text: `{"ship": "~sipsyl", "shp": 1}`,
			want: `config: "shp": 1: unknown key; the keys are the groups and settings of docs/operations.md`},
		{name: "underscore key", text: `{"ship": "~sipsyl", "log_level": "debug"}`,
			want: `config: "log_level": "debug": unknown key; did you mean "log.level"?`},
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

		// The flat keys of before are unknown, pointed to their key where
		// their name is still a key in a group or a flag.
		{name: "flat key of a table", text: `{"ship": "~sipsyl", "galaxies": {"~syl": "10.0.0.1:1"}}`,
			want: `config: "galaxies": {"~syl":"10.0.0.1:1"}: unknown key; did you mean "network.galaxies"?`},
		{name: "flat key of a flag", text: `{"ship": "~sipsyl", "log-format": "json"}`,
			want: `config: "log-format": "json": unknown key; did you mean "log.format"?`},
		{name: "flat key of a file setting", text: `{"ship": "~sipsyl", "max-routes": 5}`,
			want: `config: "max-routes": 5: unknown key; did you mean "routes.max-routes"?`},
		{name: "flat key renamed", text: `{"ship": "~sipsyl", "max-pending": 5000}`,
			want: `config: "max-pending": 5000: unknown key; the keys are the groups and settings of docs/operations.md`},
		{name: "deprecated amp factor", text: `{"ship": "~sipsyl", "amplification": {"factor": -1}}`,
			want: `config: "amplification.factor": -1: unknown key; the keys of "amplification" are rate, burst, net-rate, net-burst, probes`},

		// Nested values: named by their path.
		{name: "nested duration", text: `{"ship": "~sipsyl", "pending": {"ttl": 30}}`,
			want: `config: "pending.ttl": 30: want a duration string such as "30s"`},
		{name: "nested limit", text: `{"ship": "~sipsyl", "pending": {"max-entries": 3}}`,
			want: `config: "pending.max-entries": 3: want a whole number from 16 to 268435424`},
		{name: "nested table entry", text: `{"ship": "~sipsyl", "network": {"lanes": {"~ritpub-sipsyl": "10.0.0.1"}}}`,
			wantSub: `config: "network.lanes": {"~ritpub-sipsyl": "10.0.0.1"}: want a lane as IP:PORT`},
		{name: "nested amp", text: `{"ship": "~sipsyl", "amplification": {"burst": -1}}`,
			want: `config: "amplification.burst": -1: want 0 or more bytes (a negative "amplification.rate" turns the budget off)`},
		{name: "nested metrics scrapes", text: `{"ship": "~sipsyl", "metrics-http": {"max-connections": 8, "max-scrapes": 8}}`,
			want: `config: "metrics-http.max-scrapes": 8: want a whole number from 1 to 7, fewer than "metrics-http.max-connections" (8), so that /healthz always finds a connection`},
		{name: "nested flag wins", text: `{"ship": "~sipsyl", "log": {"level": "debug"}}`, args: []string{"--log-level", "loud"},
			want: `--log-level loud: want debug, info, warn or error`},
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
		{name: "front addr", text: `{"ship": "~sipsyl", "front-netns": "u", "fronting": {"addr": "fe80::1"}}`,
			want: `config: "fronting.addr": "fe80::1": want an IPv4 address such as 169.254.13.37`},
		{name: "front port from listen 0", text: `{"ship": "~sipsyl", "front-netns": "u", "listen": "127.0.0.1:0"}`,
			want: `config: "fronting.port": 0 (the default): want a port from 1 to 65535 (0 means the listen port, which is 0 here)`},
		{name: "front port", text: `{"ship": "~sipsyl", "front-netns": "u", "fronting": {"port": 70000}}`,
			want: `config: "fronting.port": 70000: want a port from 1 to 65535 (0 means the listen port, which is 0 here)`},
		{name: "log level", text: `{"ship": "~sipsyl", "log": {"level": "loud"}}`,
			want: `config: "log.level": "loud": want debug, info, warn or error`},
		{name: "log format", text: `{"ship": "~sipsyl", "log": {"format": "xml"}}`,
			want: `config: "log.format": "xml": want auto, json or console`},
		{name: "metrics address", text: `{"ship": "~sipsyl", "metrics": "9337"}`,
			want: `config: "metrics": "9337": want IP:PORT such as 127.0.0.1:9337`},
		{name: "metrics host name", text: `{"ship": "~sipsyl", "metrics": "localhost:9337"}`,
			want: `config: "metrics": "localhost:9337": want IP:PORT such as 127.0.0.1:9337 ("localhost" is not an IP address)`},
		{name: "metrics port", text: `{"ship": "~sipsyl", "metrics": "127.0.0.1:http"}`,
			want: `config: "metrics": "127.0.0.1:http": want IP:PORT such as 127.0.0.1:9337 ("http" is not a port)`},
		{name: "pprof without metrics", text: `{"ship": "~sipsyl", "metrics-http": {"pprof": true}}`,
			want: `config: "metrics-http.pprof": true: needs "metrics" (--metrics), whose listener serves it`},
		{name: "metrics connections 1", text: `{"ship": "~sipsyl", "metrics-http": {"max-connections": 1}}`,
			want: `config: "metrics-http.max-connections": 1: want a whole number from 2 to 4096`},
		{name: "metrics connections over", text: `{"ship": "~sipsyl", "metrics-http": {"max-connections": 4097}}`,
			want: `config: "metrics-http.max-connections": 4097: want a whole number from 2 to 4096`},
		{name: "metrics scrapes 0", text: `{"ship": "~sipsyl", "metrics-http": {"max-scrapes": 0}}`,
			want: `config: "metrics-http.max-scrapes": 0: want a whole number from 1 to 63, fewer than "metrics-http.max-connections" (64), so that /healthz always finds a connection`},
		{name: "metrics scrapes all the connections", text: `{"ship": "~sipsyl", "metrics-http": {"max-connections": 8, "max-scrapes": 8}}`,
			want: `config: "metrics-http.max-scrapes": 8: want a whole number from 1 to 7, fewer than "metrics-http.max-connections" (8), so that /healthz always finds a connection`},
		{name: "metrics connections under the default scrapes", text: `{"ship": "~sipsyl", "metrics-http": {"max-connections": 4}}`,
			want: `config: "metrics-http.max-scrapes": 8 (the default): want a whole number from 1 to 3, fewer than "metrics-http.max-connections" (4), so that /healthz always finds a connection`},
		{name: "batch too big", text: `{"ship": "~sipsyl", "io": {"batch": 100000}}`,
			want: `config: "io.batch": 100000: want a whole number from 1 to 1024`},
		{name: "no sockets", text: `{"ship": "~sipsyl", "io": {"sockets": 0}}`,
			want: `config: "io.sockets": 0: want a whole number from 1 to 64`},
		{name: "amp rate too high", text: `{"ship": "~sipsyl", "amplification": {"rate": 2000000000}}`,
			want: `config: "amplification.rate": 2000000000: want at most 1073741824 bytes a second`},
		{name: "amp net rate too high", text: `{"ship": "~sipsyl", "amplification": {"net-rate": 2000000000}}`,
			want: `config: "amplification.net-rate": 2000000000: want at most 1073741824 bytes a second`},
		{name: "negative amp burst", text: `{"ship": "~sipsyl", "amplification": {"burst": -1}}`,
			want: `config: "amplification.burst": -1: want 0 or more bytes (a negative "amplification.rate" turns the budget off)`},
		{name: "negative amp net burst", text: `{"ship": "~sipsyl", "amplification": {"net-burst": -1}}`,
			want: `config: "amplification.net-burst": -1: want 0 or more bytes (a negative "amplification.net-rate" turns the budget off)`},
		{name: "amp burst too high", text: `{"ship": "~sipsyl", "amplification": {"burst": 9000000000}}`,
			want: `config: "amplification.burst": 9000000000: want at most 8589934592 bytes`},
		{name: "refresh with domain", text: `{"ship": "~sipsyl", "network": {"galaxy-domain": "urbit.org", "galaxy-refresh": "0s"}}`,
			want: `config: "network.galaxy-refresh": "0s": want a positive duration such as "300s"`},
		{name: "capture size", text: `{"ship": "~sipsyl", "pcap": {"file": "x.pcap", "max-bytes": 10}}`,
			want: `config: "pcap.max-bytes": 10: want at least 131072 bytes`},
		{name: "capture files", text: `{"ship": "~sipsyl", "pcap": {"file": "x.pcap", "files": 0}}`,
			want: `config: "pcap.files": 0: want at least 1 file`},
		{name: "capture no directory", text: `{"ship": "~sipsyl", "pcap": {"file": "/nonexistent/x.pcap"}}`,
			want: `config: "pcap.file": "/nonexistent/x.pcap": want a file in an existing directory (/nonexistent: no such file or directory)`},
		{name: "capture under a file", text: `{"ship": "~sipsyl", "pcap": {"file": "` + aFile + `/x.pcap"}}`,
			want: `config: "pcap.file": "` + aFile + `/x.pcap": want a file in a directory (` + aFile + ` is not one)`},
		{name: "capture not writable", text: `{"ship": "~sipsyl", "pcap": {"file": "` + noWrite + `/x.pcap"}}`,
			want: `config: "pcap.file": "` + noWrite + `/x.pcap": want a file in a directory this user may write (` + noWrite + ` is not writable)`},

		// Limits: the operator's keys and ranges, never the table's fields.
		{name: "max-pending negative", text: `{"ship": "~sipsyl", "pending": {"max-entries": -1}}`,
			want: `config: "pending.max-entries": -1: want a whole number from 16 to 268435424`},
		{name: "max-pending below the shards", text: `{"ship": "~sipsyl", "pending": {"max-entries": 15}}`,
			want: `config: "pending.max-entries": 15: want a whole number from 16 to 268435424`},
		{name: "max-pending over the shards' cap", text: `{"ship": "~sipsyl", "pending": {"max-entries": 268435425}}`,
			want: `config: "pending.max-entries": 268435425: want a whole number from 16 to 268435424`},
		{name: "max-requesters over the cap", text: `{"ship": "~sipsyl", "pending": {"max-requesters": 4097}}`,
			want: `config: "pending.max-requesters": 4097: want a whole number from 1 to 4096`},
		{name: "max-requesters negative", text: `{"ship": "~sipsyl", "pending": {"max-requesters": -1}}`,
			want: `config: "pending.max-requesters": -1: want a whole number from 1 to 4096`},
		{name: "negative ttl", text: `{"ship": "~sipsyl", "pending": {"ttl": "-1s"}}`,
			want: `config: "pending.ttl": "-1s": want a duration from 100ms to 1h49m13.6s`},
		{name: "ttl under a tick", text: `{"ship": "~sipsyl", "pending": {"ttl": "99ms"}}`,
			want: `config: "pending.ttl": "99ms": want a duration from 100ms to 1h49m13.6s`},
		{name: "ttl over the wheel", text: `{"ship": "~sipsyl", "pending": {"ttl": "2h"}}`,
			want: `config: "pending.ttl": "2h": want a duration from 100ms to 1h49m13.6s`},
		{name: "suppress window negative", text: `{"ship": "~sipsyl", "pending": {"suppress-window": "-1ms"}}`,
			want: `config: "pending.suppress-window": "-1ms": want a duration from 0s to 1h0m0s`},
		{name: "suppress window over", text: `{"ship": "~sipsyl", "pending": {"suppress-window": "61m"}}`,
			want: `config: "pending.suppress-window": "61m": want a duration from 0s to 1h0m0s`},
		{name: "max-routes", text: `{"ship": "~sipsyl", "routes": {"max-routes": -1}}`,
			want: `config: "routes.max-routes": -1: want a positive whole number`},
		{name: "direct lane expiry", text: `{"ship": "~sipsyl", "routes": {"direct-lane-expiry": "-1s"}}`,
			want: `config: "routes.direct-lane-expiry": "-1s": want a positive duration such as "2m"`},

		// Flags: named as flags, the value as typed.
		{name: "flag: no ship", args: []string{"--listen", "127.0.0.1:1"},
			want: `--ship: missing: want the fronted ship, a galaxy, star or planet as @p such as ~sampel-palnet`},
		{name: "flag: bad @p", args: []string{"--ship", "~sipsy"},
			want: `--ship ~sipsy: want a ship as @p such as ~sampel-palnet, or its number ("sipsy" is not a six-letter word)`},
		{name: "flag: seven letters", args: []string{"--ship", "~ritpub-sipsylx"},
			want: `--ship ~ritpub-sipsylx: want a ship as @p such as ~sampel-palnet, or its number ("sipsylx" is not a six-letter word)`},
		{name: "flag: trailing dash", args: []string{"--ship", "~sipsyl-"},
			want: `--ship ~sipsyl-: want a ship as @p such as ~sampel-palnet, or its number (a word is missing after -)`},
		{name: "flag: galaxy without lane", args: []string{"--ship", "~sipsyl", "--galaxy", "~syl"},
			want: `--galaxy ~syl: want SHIP=IP:PORT such as ~zod=203.0.113.5:13337`},
		{name: "flag: galaxy lane", args: []string{"--ship", "~sipsyl", "--galaxy", "~syl=1.2.3.4"},
			want: `--galaxy ~syl=1.2.3.4: want a lane as IP:PORT such as 203.0.113.5:13337 (an IP address, not a host name; IPv6 in brackets)`},
		{name: "sponsor without =", text: `{"ship": "~sipsyl", "network": {"sponsors": {"~ritpub-sipsyl": ""}}}`,
			want: `config: "network.sponsors": {"~ritpub-sipsyl": ""}: want a ship as @p such as ~sampel-palnet, or its number (empty)`},
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
		{name: "flag: a file-only setting", args: []string{"--ship", "~sipsyl", "--max-pending", "5"},
			want: `--max-pending: unknown flag (see relay run -h)`},
		{name: "flag: list value", args: []string{"--ship", "~sipsyl", "--hint-net", "lots"},
			want: `--hint-net lots: want a network as ADDR/BITS such as 10.0.0.0/8`},
		{name: "flag over a good file", text: ok, args: []string{"--log-format", "xml"},
			want: `--log-format xml: want auto, json or console`},
		{name: "flag wins over a bad file value", text: `{"ship": "~sipsyl", "log": {"level": "loud"}}`, args: []string{"--log-level", "louder"},
			want: `--log-level louder: want debug, info, warn or error`},
		{name: "file value under a flag elsewhere", text: `{"ship": "~sipsyl", "pending": {"max-entries": 1}}`, args: []string{"--log-level", "debug"},
			want: `config: "pending.max-entries": 1: want a whole number from 16 to 268435424`},
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
		`{"ship": "~sipsyl", "pending": {"max-entries": 16, "ttl": "100ms", "suppress-window": "0s", "max-requesters": 1}}`,
		`{"ship": "~sipsyl", "pending": {"max-entries": 16, "ttl": "1h49m13.6s", "suppress-window": "1h", "max-requesters": 4096}}`,
		`{"ship": "~sipsyl", "pending": {"max-entries": 16}, "routes": {"max-routes": 1}, "amplification": {"rate": 0, "burst": 0}}`,
		`{"ship": "~sipsyl", "pending": {"max-entries": 16}, "amplification": {"rate": -1, "burst": -5}}`,
		`{"ship": "~sipsyl", "pending": {"max-entries": 16}, "amplification": {"rate": 1073741824, "net-rate": 1073741824, "burst": 8589934592, "net-burst": 8589934592}}`,
		`{"ship": "~sipsyl", "pending": {"max-entries": 16}, "amplification": {"rate": -1, "net-rate": -1, "probes": false}}`,
		`{"ship": "~sipsyl", "pending": {"max-entries": 16}, "metrics-http": {"max-connections": 2, "max-scrapes": 1}}`,
		`{"ship": "~sipsyl", "pending": {"max-entries": 16}, "metrics-http": {"max-connections": 4096, "max-scrapes": 4095}}`,
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
	// A flat key of before fails, pointed to its key.
	stdout.Reset()
	path = writeConfig(t, `{"ship": "~sipsyl", "listen": "127.0.0.1:13338", "galaxies": {"~syl": "203.0.113.5:13441"}}`)
	if code := run([]string{"check", "--config", path}, nil, &stdout, &stderr); code != exitUsage {
		t.Fatalf("a flat key: exit %d, stderr %q", code, stderr.String())
	}
	wantErr := `relay check: config: "galaxies": {"~syl":"203.0.113.5:13441"}: unknown key; did you mean "network.galaxies"?` + "\n"
	if stdout.Len() != 0 || stderr.String() != wantErr {
		t.Errorf("a flat key: stdout %q stderr %q; want stderr %q", stdout.String(), stderr.String(), wantErr)
	}
	stdout.Reset()
	if code := run([]string{"check", "-h"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage: relay check") {
		t.Errorf("check -h: exit %d, stdout %q", code, stdout.String())
	}
}

// TestStartupErrorFormat: a start-up error is a JSON entry under log
// format json (from --log-format or the file's "log": {"format"}, even
// when another setting is what failed), and the plain line under console.
// stderr here is no terminal, so auto is JSON: the console cases are the
// ones that show the format was read.
func TestStartupErrorFormat(t *testing.T) {
	jsonFile := writeConfig(t, `{"ship": "~sipsyl", "log": {"format": "json"}, "io": {"batch": 0}}`)
	consoleFile := writeConfig(t, `{"ship": "~sipsyl", "log": {"format": "console"}, "io": {"batch": 0}}`)
	const msg = `config: "io.batch": 0: want a whole number from 1 to 1024`
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
		// The file's format is the error's even when the error is in a key
		// read before "log", or on the command line.
		{[]string{"--config", writeConfig(t, `{"ship": "~sipsyl", "amplification": {"rate": "x"}, "log": {"format": "console"}}`)}, false,
			`relay run: config: "amplification.rate": "x": want a whole number`},
		{[]string{"--config", writeConfig(t, `{"ship": "~sipsyl", "galaxies": {}, "log": {"format": "console"}}`)}, false,
			`relay run: config: "galaxies": {}: unknown key; did you mean "network.galaxies"?`},
		{[]string{"--config", consoleFile, "--ship", "~sipsy"}, false,
			`relay run: --ship ~sipsy: want a ship as @p such as ~sampel-palnet, or its number ("sipsy" is not a six-letter word)`},
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
