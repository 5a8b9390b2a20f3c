package main

// The configuration of `relay run`: its flags, the optional JSON config
// file, and their validation.
//
// Every setting is a flag. The config file (--config FILE) is one JSON
// object nested as relay run -h groups the flags (configgroups.go): the
// settings every deployment sets at the top level, the others in one
// object per topic ({"pending": {"max-entries": 100000}}); the repeatable
// flags are objects (ship to lane, ship to sponsor) or arrays. The flat
// keys of before (the flag names; fileKeys for the tables) still read,
// each with a deprecation note. The file is applied first and the command
// line after it, so a flag given on the command line wins over the file
// (for the tables, per ship). On SIGHUP the file is read again and the
// same command line applied over it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/capture"
	relaydaemon "github.com/urbit-relay/relay/relay/daemon"
	"github.com/urbit-relay/relay/relay/front"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/pki"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/relay/transport"
)

const (
	// defaultListen is the relay's UDP address: the port a galaxy or star
	// ship would otherwise own.
	defaultListen = "0.0.0.0:13337"
	// maxConfigFileBytes bounds the config file read: a real one is a few
	// kilobytes even with every galaxy listed.
	maxConfigFileBytes = 4 << 20
	// maxSockets bounds --sockets: one reader per core is the useful
	// most, and 64 covers any host this runs on.
	maxSockets = 64
)

// runConfig is everything `relay run` is told, validated.
type runConfig struct {
	// configPath is the config file, "" for none.
	configPath    string
	listen        netip.AddrPort
	relay         relay.Config
	galaxyDomain  string
	galaxyRefresh time.Duration
	batch         int
	sockets       int // SO_REUSEPORT sockets on the listen address
	gso           bool
	logLevel      zapcore.Level
	logFormat     string         // "auto", "json" or "console"
	metrics       string         // "" for none, else HOST:PORT for net.Listen
	metricsOpts   metricsOptions // the listener's limits, and --pprof
	capture       string         // "" for none
	captureBytes  int64
	captureFiles  int
	// front, when set, is fronting mode: the ship's namespace and device.
	front *front.Config
	// pki is the --pki file, "" for none, and pkiSnap what it held when
	// the configuration was loaded (nil for none).
	pki     string
	pkiSnap *pki.Snapshot
	// settings holds every flag's final value as text, keyed by flag name,
	// to tell on reload what changed.
	settings map[string]string
	// deprecated notes the file's deprecated (flat) keys, one line each.
	deprecated []string
}

// liveSettings are the settings a SIGHUP reload applies to the running
// relay. Every other setting needs a restart; a reload that changes one
// says so in the log.
var liveSettings = []string{"galaxy", "lane", "relay", "log-level", "pki"}

// runFlags is the flag set of `relay run` and the variables it fills.
type runFlags struct {
	fs *flag.FlagSet

	config, listen, shipName, shipLane string
	public                             laneList
	hintNets                           prefixList
	frontHostLanes                     laneList
	galaxies                           galaxyLanes
	pinned, relays                     shipLanes
	sponsors                           *sponsorFlag
	domain                             string
	refresh                            time.Duration
	maxPending, maxReq, maxPerSource   int
	maxReqPerSource, maxOverflowPerSrc int
	ttl, suppress                      time.Duration
	refuse                             bool
	maxRoutes                          int
	laneExpiry                         time.Duration
	batch                              int
	logLevel, logFormat                string
	metrics                            string
	metricsMaxConns, metricsMaxScrapes int
	pprof, gso                         bool
	sockets, ampFactor, ampRate        int
	ampBurst, ampNetFactor             int
	ampNetRate, ampNetBurst            int
	ampProbes                          bool
	capture                            string
	captureBytes                       int64
	captureFiles                       int
	frontNetns, frontDevice, frontAddr string
	frontPort                          int
	pki                                string

	// Where the settings came from, to name them in errors (bad).
	configPath string            // the config file applied, "" for none
	fromArgs   map[string]bool   // flags the command line set
	fromFile   map[string]string // flags the file set: their JSON text
	fileKey    map[string]string // flags the file set: the key, as keyPath writes it
	deprecated []string          // notes on the file's flat keys
	inArgs     bool              // the command line is being parsed
	argErr     error             // the last command-line value rejected
}

// ampConfig returns the amplification budget the amp-* settings give.
// The deprecated amp-factor and amp-net-factor still turn the budget, or
// its per-network part, off when negative; they are otherwise ignored
// (the budget has no byte ratio any more: docs/operations.md).
func (f *runFlags) ampConfig() relay.AmpConfig {
	a := relay.AmpConfig{Rate: f.ampRate, Burst: f.ampBurst, NetRate: f.ampNetRate, NetBurst: f.ampNetBurst}
	if f.ampFactor < 0 {
		a.Rate = -1
	}
	if f.ampNetFactor < 0 {
		a.NetRate = -1
	}
	if !f.ampProbes {
		a.ProofLifetime = -1
	}
	return a
}

// fileKeys maps the flat config keys (deprecated) that differ from their
// flag's name.
var fileKeys = map[string]string{
	"galaxies":         "galaxy",
	"lanes":            "lane",
	"sponsors":         "sponsor",
	"public-lanes":     "public-lane",
	"hint-nets":        "hint-net",
	"front-host-lanes": "front-host-lane",
	"relays":           "relay",
}

// newRunFlags returns the flag set of `relay run`, writing nothing: the
// caller prints errors and usage. Its values are wrapped (settingValue) to
// report rejected values in the operator's terms.
func newRunFlags() *runFlags {
	f := defineRunFlags()
	f.fs.VisitAll(func(fl *flag.Flag) { fl.Value = &settingValue{Value: fl.Value, name: fl.Name, f: f} })
	return f
}

// defineRunFlags returns the flag set of `relay run` with the flag
// package's own values, whose types its usage names (duration, int).
func defineRunFlags() *runFlags {
	f := &runFlags{galaxies: galaxyLanes{shipLanes{}}, pinned: shipLanes{}, relays: shipLanes{}, sponsors: newSponsorFlag(),
		fromArgs: map[string]bool{}, fromFile: map[string]string{}, fileKey: map[string]string{}}
	fs := flag.NewFlagSet("relay run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.config, "config", "", "JSON config `FILE`, nested by the groups below (see docs/operations.md); flags override it")
	fs.StringVar(&f.shipName, "ship", "", "the fronted ship, a galaxy, star or planet as @p (required)")
	fs.StringVar(&f.listen, "listen", defaultListen, "UDP `ADDR:PORT` to listen on (the ship's public port)")
	fs.StringVar(&f.shipLane, "ship-lane", "", "`ADDR:PORT` of the fronted ship's own process; datagrams for the ship go there")
	fs.Var(&f.public, "public-lane", "another `ADDR:PORT` this relay is reached at (behind NAT; repeatable): never a target")
	fs.StringVar(&f.frontNetns, "front-netns", "", "fronting mode: run the ship (vere) in network namespace `NAME` (created if absent), whose only route is a TUN device this relay owns; the ship then behaves as if it stood on the public address (see docs/operations.md). Excludes --ship-lane")
	fs.StringVar(&f.frontDevice, "front-device", front.DefaultDevice, "fronting mode: the TUN device's `NAME` in the ship's namespace")
	fs.StringVar(&f.frontAddr, "front-addr", front.DefaultShipAddr.String(), "fronting mode: the ship's IPv4 `ADDR` on its device (link-local: never seen outside)")
	fs.IntVar(&f.frontPort, "front-port", 0, "fronting mode: the UDP `PORT` vere binds in its namespace; 0 means the listen port")
	fs.Var(&f.frontHostLanes, "front-host-lane", "fronting mode: an `ADDR:PORT` on this host's own addresses that the ship may reach (repeatable); the ship's datagrams to any other lane of this host, or to loopback, are refused")
	fs.Var(&f.hintNets, "hint-net", "a private `PREFIX` (CIDR) that next-hops and origins may name and the ship may send to, such as a LAN or loopback in a test (repeatable); by default only public addresses")
	fs.Var(f.galaxies, "galaxy", "galaxy lane `~GALAXY=ADDR:PORT` (repeatable)")
	fs.Var(f.pinned, "lane", "pinned lane of any ship `SHIP=ADDR:PORT` (repeatable)")
	fs.Var(f.relays, "relay", "a ship whose lane forwards for the ships below it (a relay in front of a star) `SHIP=ADDR:PORT` (repeatable); other sponsors must show they forward first")
	fs.Var(f.sponsors, "sponsor", "sponsor override for an escaped ship `SHIP=SPONSOR` (repeatable)")
	fs.StringVar(&f.domain, "galaxy-domain", "", "also resolve galaxies as <name>.`DOMAIN`, port 13337+number (e.g. urbit.org)")
	fs.DurationVar(&f.refresh, "galaxy-refresh", relaydaemon.DefaultGalaxyRefresh, "how often galaxy DNS names are re-resolved")
	fs.IntVar(&f.maxPending, "max-pending", pit.DefaultMaxEntries, "pending-request table capacity (entries)")
	fs.IntVar(&f.maxPerSource, "max-pending-per-source", 0, "pending entries one source IP may hold; 0 means max-pending/10, negative no cap")
	fs.IntVar(&f.maxReq, "max-requesters", pit.DefaultMaxRequestersPerEntry, "requester lanes kept per pending entry")
	fs.IntVar(&f.maxReqPerSource, "max-requesters-per-source", 0, "a fixed cap on the requester lanes one source IP may hold on one pending entry; 0 or negative means none (a full entry is shared max-min fairly: a requester from a smaller source displaces one of the largest's)")
	fs.IntVar(&f.maxOverflowPerSrc, "max-overflow-per-source", 0, "requester lanes beyond each entry's first one source IP may hold in all; 0 means a tenth of the pool (max-pending/4), negative no cap")
	fs.DurationVar(&f.ttl, "pending-ttl", pit.DefaultTTL, "pending entry lifetime, bumped by every repeat")
	fs.DurationVar(&f.suppress, "suppress-window", pit.DefaultSuppressWindow, "a new requester within this of the last forward is aggregated, not forwarded")
	fs.BoolVar(&f.refuse, "refuse-when-full", false, "when the pending table is full, refuse new requests instead of shedding the oldest entry")
	fs.IntVar(&f.maxRoutes, "max-routes", route.DefaultMaxRoutes, "ships with learned routing state (least recently used dropped)")
	fs.DurationVar(&f.laneExpiry, "direct-lane-expiry", route.DefaultDirectLaneExpiry, "how long a learned direct lane is used without hearing from it")
	fs.IntVar(&f.batch, "batch", transport.DefaultBatchSize, "datagrams per recvmmsg/sendmmsg")
	fs.BoolVar(&f.gso, "gso", true, "send runs of datagrams to one lane with UDP GSO where the kernel supports it (Linux 4.18+); false sends each datagram on its own")
	fs.IntVar(&f.sockets, "sockets", 1, "UDP sockets on the listen address (SO_REUSEPORT, Linux), each with its own reader goroutine")
	fs.IntVar(&f.ampRate, "amp-rate", relay.DefaultAmpRate, "answer bytes per second one address may receive (pages, STUN answers, legacy forwards to learned lanes); negative disables the amplification budget")
	fs.IntVar(&f.ampBurst, "amp-burst", relay.DefaultAmpBurst, "most answer bytes one address may bank")
	fs.IntVar(&f.ampNetRate, "amp-net-rate", relay.DefaultAmpNetRate, "answer bytes per second one network (IPv4 /24, IPv6 /56) may receive; negative disables the per-network budget")
	fs.IntVar(&f.ampNetBurst, "amp-net-burst", relay.DefaultAmpNetBurst, "most answer bytes one network may bank")
	fs.BoolVar(&f.ampProbes, "amp-probes", true, "probe busy lanes with a STUN request (every vere ship answers one) and exempt those that answer from the budget")
	fs.IntVar(&f.ampFactor, "amp-factor", 0, "deprecated, ignored unless negative: a negative value disables the amplification budget (as a negative amp-rate)")
	fs.IntVar(&f.ampNetFactor, "amp-net-factor", 0, "deprecated, ignored unless negative: a negative value disables the per-network budget (as a negative amp-net-rate)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error (debug adds rate-limited per-datagram logs)")
	fs.StringVar(&f.logFormat, "log-format", "auto", "log format: json, console, or auto (console on a terminal, else json)")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus /metrics, /healthz and /readyz on TCP `ADDR:PORT` (e.g. 127.0.0.1:9337); an IPv4 address, 0.0.0.0 too, listens on IPv4 only, as the UDP socket does; an empty host (:9337) on IPv4 and IPv6")
	fs.IntVar(&f.metricsMaxConns, "metrics-max-connections", defaultMetricsMaxConns, "most connections the --metrics listener holds open; more wait in the kernel's accept queue until one closes")
	fs.IntVar(&f.metricsMaxScrapes, "metrics-max-scrapes", defaultMetricsMaxScrapes, "most /metrics requests served at once (fewer than metrics-max-connections); more are answered 503 and closed, so /healthz always finds a connection")
	fs.BoolVar(&f.pprof, "pprof", false, "also serve /debug/pprof/ on the --metrics listener")
	fs.StringVar(&f.pki, "pki", "", "check publishers' signatures on pages against the Azimuth snapshot `FILE` (one ship a line; see docs/operations.md), read again on SIGHUP")
	fs.StringVar(&f.capture, "capture", "", "record every datagram read and sent to pcap `FILE` (rotated: FILE.1, FILE.2, ...)")
	fs.Int64Var(&f.captureBytes, "capture-max-bytes", capture.DefaultMaxBytes, "start a new capture file past this size")
	fs.IntVar(&f.captureFiles, "capture-files", capture.DefaultMaxFiles, "capture files kept, the current one included")
	f.fs = fs
	return f
}

// runUsage prints the usage of `relay run`.
func runUsage(w io.Writer) {
	fmt.Fprintf(w, `usage: relay run --ship ~SHIP [--config FILE] [flags]

Runs the relay on its UDP port (--sockets sockets) until SIGINT or SIGTERM;
SIGHUP reloads the config file and applies %s at once (every other
setting at the next start). Flags override the config file, whose objects
are the groups below: {"ship": "~sipsyl", "pending": {"max-entries": 100000}}.

`, strings.Join(liveSettings, ", "))
	printGroupedUsage(w, defineRunFlags().fs)
}

// loadRunConfig builds and validates the configuration of `relay run` (and
// `relay check`) from its command line and the config file it names. The
// error is one line (flag.ErrHelp for -h); an error about a setting is a
// settingError naming it as the operator gave it.
func loadRunConfig(args []string) (runConfig, error) {
	pre := newRunFlags()
	if err := pre.parseArgs(args); err != nil {
		return runConfig{}, err
	}
	f := newRunFlags()
	if pre.config != "" {
		f.configPath = pre.config
		if err := f.applyConfigFile(pre.config); err != nil {
			return runConfig{}, err
		}
	}
	if err := f.parseArgs(args); err != nil {
		return runConfig{}, err
	}
	return f.validate()
}

// parseArgs applies the command line to f, reporting a rejected value as a
// settingError rather than in the flag package's words.
func (f *runFlags) parseArgs(args []string) error {
	f.inArgs = true
	err := f.fs.Parse(args)
	f.inArgs = false
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		return err
	case f.argErr != nil:
		return f.argErr
	default:
		return flagSyntaxError(err)
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument (flags take their values as --flag VALUE; see relay run -h)", shellWord(clip(f.fs.Arg(0))))
	}
	return nil
}

// applyConfigFile sets f's flags from the JSON config file at path. Errors
// about the file itself name it; those about a key are settingErrors.
func (f *runFlags) applyConfigFile(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, errors.Unwrap(err)) // the path once
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxConfigFileBytes+1))
	if err != nil {
		return fmt.Errorf("config %s: %w", path, errors.Unwrap(err))
	}
	if len(b) > maxConfigFileBytes {
		return fmt.Errorf("config %s: larger than %d bytes", path, maxConfigFileBytes)
	}
	if err := f.applyConfig(b); err != nil {
		var se *settingError
		if errors.As(err, &se) {
			return err
		}
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// applyConfig sets f's flags from config text b (see the file comment for
// the format).
func (f *runFlags) applyConfig(b []byte) error {
	var doc map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		return jsonError(b, err)
	}
	if dec.More() {
		return errors.New("text after the JSON object")
	}
	if doc == nil {
		return errors.New("want a JSON object")
	}
	for _, key := range slices.Sorted(maps.Keys(doc)) {
		raw := doc[key]
		g, isGroup := groupOf(key)
		if !isGroup || g.key == "" {
			if err := f.applyTopKey(key, raw); err != nil {
				return err
			}
			continue
		}
		var sub map[string]json.RawMessage
		if json.Unmarshal(raw, &sub) != nil || sub == nil {
			return &settingError{ref: fileRef(key), value: jsonText(raw),
				want: fmt.Sprintf("want an object of the %s settings, such as {%q: ...}", strings.ToLower(g.title), g.keys[0].key)}
		}
		for _, k := range slices.Sorted(maps.Keys(sub)) {
			name, ok := g.flagOf(k)
			if !ok {
				return unknownGroupKeyError(g, k, sub[k])
			}
			if err := f.applyKey(keyPath(g.key, k), name, sub[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyTopKey applies a top-level key of the file other than a group: a
// setting every deployment sets, or a deprecated flat key.
func (f *runFlags) applyTopKey(key string, raw json.RawMessage) error {
	top, _ := groupOf("")
	if name, ok := top.flagOf(key); ok {
		return f.applyKey(key, name, raw)
	}
	name, table := fileKeys[key]
	if !table {
		name = key
	}
	if f.fs.Lookup(name) == nil || name == "config" || (!table && fileKeyOf(name) != key) {
		return unknownKeyError(f.fs, key, raw)
	}
	if err := f.applyKey(key, name, raw); err != nil {
		return err
	}
	f.deprecated = append(f.deprecated, deprecationNote(key, name))
	return nil
}

// maxEchoLen bounds how much of a rejected value an error message echoes.
const maxEchoLen = 80

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > maxEchoLen {
		return s[:maxEchoLen] + "..."
	}
	return s
}

// jsonText returns raw as one line of JSON, clipped for an error message.
func jsonText(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return clip(strconv.Quote(string(raw)))
	}
	return clip(b.String())
}

// applyKey sets flag name from config key key (as keyPath writes it) to
// raw, a JSON value. A setting the file gives twice, nested and flat, is
// an error naming both.
func (f *runFlags) applyKey(key, name string, raw json.RawMessage) error {
	fs := f.fs
	if prev, twice := f.fileKey[name]; twice {
		nested, flat := prev, key
		if configKeyOf(name) != prev {
			nested, flat = key, prev
		}
		return &settingError{ref: fmt.Sprintf("config: %q and %q", nested, flat),
			want: fmt.Sprintf("both set; want one, %q (%q is the deprecated flat key)", nested, flat)}
	}
	f.fileKey[name] = key
	f.fromFile[name] = jsonText(raw)
	// set applies one value; echo is how the file wrote it.
	set := func(v, echo string) error {
		if err := fs.Set(name, v); err != nil {
			return &settingError{ref: fileRef(key), value: clip(echo), want: err.Error()}
		}
		return nil
	}
	switch name {
	case "galaxy", "lane", "relay", "sponsor":
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			want := `want an object of ship to lane, such as {"~zod": "203.0.113.5:13337"}`
			if name == "sponsor" {
				want = `want an object of ship to sponsor, such as {"~ritpub-sipsyl": "~sipsyl"}`
			}
			return &settingError{ref: fileRef(key), value: jsonText(raw), want: want}
		}
		ships := make([]string, 0, len(m))
		for s := range m {
			ships = append(ships, s)
		}
		sort.Strings(ships)
		for _, s := range ships {
			if err := set(s+"="+m[s], "{"+strconv.Quote(s)+": "+strconv.Quote(m[s])+"}"); err != nil {
				return err
			}
		}
		return nil
	case "public-lane", "hint-net", "front-host-lane":
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil {
			want := `want an array of lanes, such as ["203.0.113.7:13337"]`
			if name == "hint-net" {
				want = `want an array of networks, such as ["10.0.0.0/8"]`
			}
			return &settingError{ref: fileRef(key), value: jsonText(raw), want: want}
		}
		for _, v := range l {
			if err := set(v, strconv.Quote(v)); err != nil {
				return err
			}
		}
		return nil
	}
	v, err := scalarText(raw)
	if err != nil {
		return &settingError{ref: fileRef(key), value: jsonText(raw), want: err.Error()}
	}
	return set(v, jsonText(raw))
}

// fileKeyOf returns the flat (deprecated) config key of flag name.
func fileKeyOf(name string) string {
	for k, n := range fileKeys {
		if n == name {
			return k
		}
	}
	return name
}

// unknownKeyError reports a top-level config key that is no setting,
// suggesting the key meant when it is one written with '_' for '-'.
func unknownKeyError(fs *flag.FlagSet, key string, raw json.RawMessage) error {
	e := &settingError{ref: fileRef(key), value: jsonText(raw),
		want: "unknown key; the keys are the groups and settings of relay run -h (see docs/operations.md)"}
	guess := strings.ReplaceAll(key, "_", "-")
	name := guess
	if n, table := fileKeys[guess]; table {
		name = n
	}
	_, group := groupOf(guess)
	switch {
	case key == "config":
		e.want = "unknown key; a config file cannot name another"
	case group && guess != key:
		e.want = fmt.Sprintf("unknown key; did you mean %q?", guess)
	case fs.Lookup(name) != nil && name != "config" && configKeyOf(name) != key:
		e.want = fmt.Sprintf("unknown key; did you mean %q?", configKeyOf(name))
	}
	return e
}

// unknownGroupKeyError reports a key of group g that is no setting of it.
func unknownGroupKeyError(g settingGroup, key string, raw json.RawMessage) error {
	e := &settingError{ref: fileRef(keyPath(g.key, key)), value: jsonText(raw),
		want: fmt.Sprintf("unknown key; the keys of %q are %s", g.key, g.keyNames())}
	if guess := strings.ReplaceAll(key, "_", "-"); guess != key {
		if _, ok := g.flagOf(guess); ok {
			e.want = fmt.Sprintf("unknown key; did you mean %q?", keyPath(g.key, guess))
		}
	}
	return e
}

// scalarText returns a JSON string, number or boolean as flag text.
func scalarText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", errors.New("want a value")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errors.New("want a valid JSON string")
		}
		return s, nil
	case 't', 'f':
		return string(raw), nil
	case '{', '[', 'n':
		return "", errors.New("want a string, number or boolean")
	}
	return string(raw), nil // a number, as JSON wrote it
}

// jsonError turns a decoding error into a one-line message with the line
// and column.
func jsonError(b []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read, the offending one included.
		line, col := lineCol(b, se.Offset-1)
		return fmt.Errorf("line %d column %d: %v", line, col, se)
	case errors.As(err, &te):
		return errors.New("want a JSON object")
	case errors.Is(err, io.EOF):
		return errors.New("empty file; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := lineCol(b, int64(len(b)))
		return fmt.Errorf("line %d column %d: unexpected end of file", line, col)
	}
	return err
}

// lineCol returns the 1-based line and column of byte offset off in b.
func lineCol(b []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(b)))
	line = 1 + bytes.Count(b[:off], []byte{'\n'})
	col = int(off) - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}

// validate checks the parsed flags and builds the runConfig. It binds
// nothing: `relay check` runs it as `relay run` does.
func (f *runFlags) validate() (runConfig, error) {
	c := runConfig{configPath: f.config}
	var err error
	if c.listen, err = netip.ParseAddrPort(f.listen); err != nil {
		return c, f.bad("listen", "want IP:PORT such as 0.0.0.0:13337 (an IP address, not a host name)")
	}
	c.listen = lane.Canon(c.listen)
	if f.shipName == "" {
		ref := flagRef("ship")
		if f.configPath != "" {
			ref = fileRef("ship") + " (or --ship)"
		}
		return c, &settingError{ref: ref, want: "missing: want the fronted ship, a galaxy, star or planet as @p such as ~sampel-palnet"}
	}
	me, err := parseShipValue(f.shipName)
	if err != nil {
		return c, f.bad("ship", err.Error())
	}
	if me.Class() > lane.Planet {
		return c, f.bad("ship", fmt.Sprintf("a %s; want a galaxy, star or planet (a relay fronts one of those)", me.Class()))
	}
	var sl netip.AddrPort
	if f.shipLane != "" {
		if sl, err = parseLaneValue(f.shipLane); err != nil {
			return c, f.bad("ship-lane", err.Error())
		}
	}
	if f.frontNetns != "" {
		if f.shipLane != "" {
			return c, f.bad("front-netns", `want no "ship-lane" (--ship-lane) with it: in fronting mode the ship is reached through its namespace's device`)
		}
		addr, err := netip.ParseAddr(f.frontAddr)
		if err != nil || !addr.Is4() {
			return c, f.bad("front-addr", "want an IPv4 address such as "+front.DefaultShipAddr.String())
		}
		port := f.frontPort
		if port == 0 {
			port = int(c.listen.Port())
		}
		if port <= 0 || port > 65535 {
			return c, f.bad("front-port", "want a port from 1 to 65535 (0 means the listen port, which is 0 here)")
		}
		for _, l := range f.frontHostLanes {
			if !l.Addr().Unmap().Is4() {
				return c, f.bad("front-host-lane", "want an IPv4 lane such as 192.0.2.1:5353 (vere speaks IPv4)")
			}
		}
		c.front = &front.Config{Namespace: f.frontNetns, Device: f.frontDevice, ShipAddr: addr, ShipPort: uint16(port),
			HostLanes: f.frontHostLanes}
		sl = netip.AddrPortFrom(addr, uint16(port))
	}
	if err := c.logLevel.Set(f.logLevel); err != nil {
		return c, f.bad("log-level", "want debug, info, warn or error")
	}
	switch f.logFormat {
	case "auto", "json", "console":
		c.logFormat = f.logFormat
	default:
		return c, f.bad("log-format", "want auto, json or console")
	}
	if f.metrics != "" {
		if err := checkTCPAddr(f.metrics); err != nil {
			return c, f.bad("metrics", err.Error())
		}
		c.metrics = f.metrics
	}
	if f.pprof && f.metrics == "" {
		return c, f.bad("pprof", `needs "metrics" (--metrics), whose listener serves it`)
	}
	if f.metricsMaxConns < minMetricsConns || f.metricsMaxConns > maxMetricsConns {
		return c, f.bad("metrics-max-connections", fmt.Sprintf("want a whole number from %d to %d", minMetricsConns, maxMetricsConns))
	}
	if f.metricsMaxScrapes < 1 || f.metricsMaxScrapes >= f.metricsMaxConns {
		return c, f.bad("metrics-max-scrapes", fmt.Sprintf(`want a whole number from 1 to %d, fewer than "metrics-max-connections" (%d), so that /healthz always finds a connection`,
			f.metricsMaxConns-1, f.metricsMaxConns))
	}
	c.metricsOpts = metricsOptions{maxConns: f.metricsMaxConns, maxScrapes: f.metricsMaxScrapes, pprof: f.pprof}
	if f.batch < 1 || f.batch > transport.MaxBatchSize {
		return c, f.bad("batch", fmt.Sprintf("want a whole number from 1 to %d", transport.MaxBatchSize))
	}
	if f.sockets < 1 || f.sockets > maxSockets {
		return c, f.bad("sockets", fmt.Sprintf("want a whole number from 1 to %d", maxSockets))
	}
	c.galaxyDomain = strings.Trim(f.domain, ".")
	if c.galaxyDomain != "" && f.refresh <= 0 {
		return c, f.bad("galaxy-refresh", `want a positive duration such as "300s"`)
	}
	if f.capture != "" {
		if f.captureBytes < capture.MinMaxBytes {
			return c, f.bad("capture-max-bytes", fmt.Sprintf("want at least %d bytes", capture.MinMaxBytes))
		}
		if f.captureFiles < 1 {
			return c, f.bad("capture-files", "want at least 1 file")
		}
		if err := checkCaptureDir(f.capture); err != nil {
			return c, f.bad("capture", err.Error())
		}
	}
	c.capture, c.captureBytes, c.captureFiles = f.capture, f.captureBytes, f.captureFiles
	policy := pit.ShedOldest
	if f.refuse {
		policy = pit.RefuseNew
	}
	self := append([]netip.AddrPort{c.listen}, f.public...)
	// The public lane that private hints are rewritten to: the first of
	// the lanes the relay is reached at that is public.
	var public netip.AddrPort
	for _, ap := range self {
		if lane.PublicAddr(ap.Addr()) {
			public = ap
			break
		}
	}
	c.relay = relay.Config{
		Ship: me, ShipLane: sl, Self: self,
		PublicLane: public, HintNets: f.hintNets, Front: c.front != nil,
		Galaxies: map[lane.Ship]netip.AddrPort(f.galaxies.shipLanes),
		Pinned:   map[lane.Ship]netip.AddrPort(f.pinned),
		Relays:   map[lane.Ship]netip.AddrPort(f.relays),
		Sponsors: f.sponsors.sp,
		Pending: pit.Config{
			MaxEntries: f.maxPending, MaxRequestersPerEntry: f.maxReq, TTL: f.ttl,
			SuppressWindow: f.suppress, FullPolicy: policy, MaxEntriesPerSource: f.maxPerSource,
			MaxRequestersPerSource: f.maxReqPerSource, MaxOverflowPerSource: f.maxOverflowPerSrc,
		},
		Routes: route.Config{MaxRoutes: f.maxRoutes, DirectLaneExpiry: f.laneExpiry},
		Amp:    f.ampConfig(),
	}
	if err := f.checkPackages(c.relay); err != nil {
		return c, err
	}
	if f.pki != "" {
		if c.pkiSnap, err = pki.Load(f.pki, 0); err != nil {
			return c, f.bad("pki", strings.TrimPrefix(err.Error(), f.pki+": "))
		}
		c.pki = f.pki
	}
	c.galaxyRefresh = f.refresh
	c.batch = f.batch
	c.sockets = f.sockets
	c.gso = f.gso
	c.deprecated = f.deprecated
	c.settings = map[string]string{}
	f.fs.VisitAll(func(fl *flag.Flag) { c.settings[fl.Name] = fl.Value.String() })
	return c, nil
}

// packageFlags names the flag that sets each Config field the packages'
// ConfigErrors name ("pit." + pit.ConfigError.Field, and so on).
var packageFlags = map[string]string{
	"pit.MaxEntries":            "max-pending",
	"pit.MaxRequestersPerEntry": "max-requesters",
	"pit.MaxOverflowPerSource":  "max-overflow-per-source",
	"pit.TTL":                   "pending-ttl",
	"pit.SuppressWindow":        "suppress-window",
	"route.MaxRoutes":           "max-routes",
	"route.DirectLaneExpiry":    "direct-lane-expiry",
	"relay.Amp.Rate":            "amp-rate",
	"relay.Amp.Burst":           "amp-burst",
	"relay.Amp.NetRate":         "amp-net-rate",
	"relay.Amp.NetBurst":        "amp-net-burst",
}

// checkPackages validates the settings the relay core's packages own, as
// relay.New will (relay.Config.Validate, which asks each package's), and
// reports the one rejected as the setting that set it.
func (f *runFlags) checkPackages(cfg relay.Config) error {
	if err := cfg.Validate(); err != nil {
		return f.packageError(err)
	}
	return nil
}

// packageError turns a package's ConfigError into a settingError naming
// the setting as the operator gave it and what the package wants.
func (f *runFlags) packageError(err error) error {
	var field, want string
	var pe *pit.ConfigError
	var re *route.ConfigError
	var ce *relay.ConfigError
	switch {
	case errors.As(err, &pe):
		field, want = "pit."+pe.Field, pe.Want
	case errors.As(err, &re):
		field, want = "route."+re.Field, re.Want
	case errors.As(err, &ce):
		field, want = "relay."+ce.Field, ce.Want
	default:
		return err
	}
	name, ok := packageFlags[field]
	if !ok {
		// A field no setting of relay run sets, at its default: a bug.
		return fmt.Errorf("the relay's defaults are refused (%v); please report this", err)
	}
	if (name == "amp-burst" || name == "amp-net-burst") && strings.HasPrefix(want, "0 or more") {
		want += ` (a negative "amp-rate" turns the budget off)`
	}
	return f.bad(name, "want "+want)
}

// checkCaptureDir checks that a capture file can be created at path: its
// directory exists and is writable. It creates nothing.
func checkCaptureDir(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("want a file in an existing directory (%s: %v)", dir, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("want a file in a directory (%s is not one)", dir)
	case unix.Access(dir, unix.W_OK) != nil:
		return fmt.Errorf("want a file in a directory this user may write (%s is not writable)", dir)
	}
	return nil
}

// metricsNetwork returns the network for net.Listen of the --metrics
// address addr (checked by checkTCPAddr): "tcp4" for an IPv4 address, so
// that 0.0.0.0 is IPv4 only as the UDP socket on 0.0.0.0 is (Go's "tcp"
// on 0.0.0.0 would take IPv6 too); "tcp" otherwise, an empty host
// meaning every address of both families.
func metricsNetwork(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
		return "tcp4"
	}
	return "tcp"
}

// checkTCPAddr checks a HOST:PORT for net.Listen: an IP address or empty
// host (every interface), and a port. It says what is wanted.
func checkTCPAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want IP:PORT such as 127.0.0.1:9337")
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("want IP:PORT such as 127.0.0.1:9337 (%q is not an IP address)", host)
		}
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("want IP:PORT such as 127.0.0.1:9337 (%q is not a port)", port)
	}
	return nil
}

// changedSettings returns the config keys of the settings whose values
// differ between old and new, split into those a reload applies and those
// that need a restart.
func changedSettings(old, new runConfig) (live, restart []string) {
	for name, v := range new.settings {
		if name == "config" || old.settings[name] == v {
			continue
		}
		if slices.Contains(liveSettings, name) {
			live = append(live, configKeyOf(name))
		} else {
			restart = append(restart, configKeyOf(name))
		}
	}
	sort.Strings(live)
	sort.Strings(restart)
	return live, restart
}

// shipLanes is a repeatable SHIP=ADDR:PORT flag.
type shipLanes map[lane.Ship]netip.AddrPort

// String lists the lanes sorted by ship, so equal tables print equally.
func (m shipLanes) String() string { return formatShipMap(m) }

// formatShipMap prints m as SHIP=VALUE pairs sorted by ship, comma-separated.
func formatShipMap[V any](m map[lane.Ship]V) string {
	ships := slices.SortedFunc(maps.Keys(m), lane.Ship.Compare)
	var b strings.Builder
	for i, s := range ships {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%v", s, m[s])
	}
	return b.String()
}

// cutShip splits a SHIP=VALUE flag value and parses the ship; form names
// the expected form for the error.
func cutShip(v, form string) (lane.Ship, string, error) {
	s, rest, ok := strings.Cut(v, "=")
	if !ok {
		return lane.Ship{}, "", wantError("want " + form)
	}
	sh, err := parseShipValue(s)
	return sh, rest, err
}

// parseShipLane parses a SHIP=ADDR:PORT flag value.
func parseShipLane(v string) (lane.Ship, netip.AddrPort, error) {
	sh, a, err := cutShip(v, "SHIP=IP:PORT such as ~zod=203.0.113.5:13337")
	if err != nil {
		return sh, netip.AddrPort{}, err
	}
	ap, err := parseLaneValue(a)
	return sh, ap, err
}

func (m shipLanes) Set(v string) error {
	sh, ap, err := parseShipLane(v)
	if err != nil {
		return err
	}
	m[sh] = ap
	return nil
}

// galaxyLanes is the repeatable --galaxy flag: shipLanes of galaxies only.
type galaxyLanes struct{ shipLanes }

func (g galaxyLanes) Set(v string) error {
	sh, ap, err := parseShipLane(v)
	if err != nil {
		return err
	}
	if c := sh.Class(); c != lane.Galaxy {
		return wantError(fmt.Sprintf(`%s is a %s; want a galaxy (pin other ships' lanes with "lanes" or --lane)`, sh, c))
	}
	g.shipLanes[sh] = ap
	return nil
}

// laneList is a repeatable ADDR:PORT flag.
type laneList []netip.AddrPort

func (l *laneList) String() string {
	if l == nil {
		return ""
	}
	return fmt.Sprint([]netip.AddrPort(*l))
}

func (l *laneList) Set(v string) error {
	ap, err := parseLaneValue(v)
	if err != nil {
		return err
	}
	*l = append(*l, ap)
	return nil
}

// prefixList is a repeatable CIDR prefix flag.
type prefixList []netip.Prefix

func (l *prefixList) String() string {
	if l == nil {
		return ""
	}
	return fmt.Sprint([]netip.Prefix(*l))
}

func (l *prefixList) Set(v string) error {
	p, err := netip.ParsePrefix(v)
	if err != nil {
		return wantError("want a network as ADDR/BITS such as 10.0.0.0/8")
	}
	*l = append(*l, p.Masked())
	return nil
}

// sponsorFlag is a repeatable SHIP=SPONSOR flag.
type sponsorFlag struct {
	sp  *lane.Sponsors
	set map[lane.Ship]lane.Ship // the overrides, for String
}

func newSponsorFlag() *sponsorFlag {
	return &sponsorFlag{sp: &lane.Sponsors{}, set: map[lane.Ship]lane.Ship{}}
}

// String lists the overrides sorted by ship.
func (f *sponsorFlag) String() string {
	if f == nil {
		return ""
	}
	return formatShipMap(f.set)
}

func (f *sponsorFlag) Set(v string) error {
	sh, p, err := cutShip(v, "SHIP=SPONSOR such as ~ritpub-sipsyl=~sipsyl")
	if err != nil {
		return err
	}
	sp, err := parseShipValue(p)
	if err != nil {
		return err
	}
	if err := f.sp.Set(sh, sp); err != nil {
		reason := strings.TrimPrefix(err.Error(), lane.ErrBadSponsor.Error()+": ")
		return wantError("want a sponsor that ranks above the ship (" + reason + ")")
	}
	f.set[sh] = sp
	return nil
}

// logFields describes c for the start-up log line.
func (c runConfig) logFields() []zap.Field {
	return []zap.Field{
		zap.Stringer("ship", c.relay.Ship),
		zap.String("ship_lane", addrOrNone(c.relay.ShipLane)),
		zap.Bool("front", c.front != nil),
		zap.Int("galaxies", len(c.relay.Galaxies)),
		zap.Int("pinned_lanes", len(c.relay.Pinned)),
		zap.Int("sponsor_overrides", c.relay.Sponsors.Len()),
		zap.String("galaxy_domain", c.galaxyDomain),
		zap.Int("max_pending", c.relay.Pending.MaxEntries),
		zap.String("config", c.configPath),
		zap.String("metrics", c.metrics),
		zap.String("capture", c.capture),
		zap.Strings("deprecated_config_keys", c.deprecated),
	}
}

// addrOrNone prints ap, or "none" when it is not set.
func addrOrNone(ap netip.AddrPort) string {
	if !ap.IsValid() {
		return "none"
	}
	return ap.String()
}
