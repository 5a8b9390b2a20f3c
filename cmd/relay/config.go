package main

// The configuration of `relay run`: its flags, the optional JSON config
// file, and their validation.
//
// Every setting is a flag. The config file (--config FILE) is one JSON
// object whose keys are the flag names, except that the repeatable flags
// --galaxy, --lane and --sponsor are the objects "galaxies", "lanes" and
// "sponsors" (ship to lane, ship to lane, ship to sponsor) and --public-lane
// is the array "public-lanes". The file is applied first and the command
// line after it, so a flag given on the command line wins over the file
// (for the tables, per ship). On SIGHUP the file is read again and the same
// command line applied over it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/urbit-relay/relay/relay/route"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/relay/front"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/transport"
)

const (
	// galaxyBasePort is the live network's galaxy port base: a galaxy
	// listens on 13337 + its number.
	galaxyBasePort = 13337
	// defaultListen is the relay's UDP address: the port a galaxy or star
	// ship would otherwise own.
	defaultListen = "0.0.0.0:13337"
	// defaultGalaxyRefresh is how often galaxy DNS names are re-resolved,
	// as vere does.
	defaultGalaxyRefresh = 300 * time.Second
	// dnsTimeout bounds one round of galaxy lookups.
	dnsTimeout = 20 * time.Second
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
	logFormat     string // "auto", "json" or "console"
	metrics       string // "" for none, else HOST:PORT for net.Listen
	pprof         bool
	capture       string // "" for none
	captureBytes  int64
	captureFiles  int
	// front, when set, is fronting mode: the ship's namespace and device.
	front *front.Config
	// settings holds every flag's final value as text, keyed by flag name,
	// to tell on reload what changed.
	settings map[string]string
}

// liveSettings are the settings a SIGHUP reload applies to the running
// relay. Every other setting needs a restart; a reload that changes one
// says so in the log.
var liveSettings = []string{"galaxy", "lane", "relay", "log-level"}

// runFlags is the flag set of `relay run` and the variables it fills.
type runFlags struct {
	fs *flag.FlagSet

	config, listen, shipName, shipLane string
	public                             laneList
	hintNets                           prefixList
	galaxies, pinned, relays           shipLanes
	sponsors                           *sponsorFlag
	domain                             string
	refresh                            time.Duration
	maxPending, maxReq, maxPerSource   int
	ttl, suppress                      time.Duration
	refuse                             bool
	maxRoutes                          int
	laneExpiry                         time.Duration
	batch                              int
	logLevel, logFormat                string
	metrics                            string
	pprof, gso                         bool
	sockets, ampFactor, ampRate        int
	ampBurst, ampNetFactor             int
	capture                            string
	captureBytes                       int64
	captureFiles                       int
	frontNetns, frontDevice, frontAddr string
	frontPort                          int
}

// fileKeys maps the config file's keys that differ from their flag's name.
var fileKeys = map[string]string{
	"galaxies":     "galaxy",
	"lanes":        "lane",
	"sponsors":     "sponsor",
	"public-lanes": "public-lane",
	"hint-nets":    "hint-net",
	"relays":       "relay",
}

// newRunFlags returns the flag set of `relay run`, writing nothing: the
// caller prints errors and usage.
func newRunFlags() *runFlags {
	f := &runFlags{galaxies: shipLanes{}, pinned: shipLanes{}, relays: shipLanes{}, sponsors: newSponsorFlag()}
	fs := flag.NewFlagSet("relay run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.config, "config", "", "JSON config `FILE`; its keys are these flags' names (see docs/operations.md); flags override it")
	fs.StringVar(&f.shipName, "ship", "", "the fronted ship, a galaxy, star or planet as @p (required)")
	fs.StringVar(&f.listen, "listen", defaultListen, "UDP `ADDR:PORT` to listen on (the ship's public port)")
	fs.StringVar(&f.shipLane, "ship-lane", "", "`ADDR:PORT` of the fronted ship's own process; datagrams for the ship go there")
	fs.Var(&f.public, "public-lane", "another `ADDR:PORT` this relay is reached at (behind NAT; repeatable): never a target")
	fs.StringVar(&f.frontNetns, "front-netns", "", "fronting mode: run the ship (vere) in network namespace `NAME` (created if absent), whose only route is a TUN device this relay owns; the ship then behaves as if it stood on the public address (see docs/operations.md). Excludes --ship-lane")
	fs.StringVar(&f.frontDevice, "front-device", front.DefaultDevice, "fronting mode: the TUN device's `NAME` in the ship's namespace")
	fs.StringVar(&f.frontAddr, "front-addr", front.DefaultShipAddr.String(), "fronting mode: the ship's IPv4 `ADDR` on its device (link-local: never seen outside)")
	fs.IntVar(&f.frontPort, "front-port", 0, "fronting mode: the UDP `PORT` vere binds in its namespace; 0 means the listen port")
	fs.Var(&f.hintNets, "hint-net", "a private `PREFIX` (CIDR) that next-hops and origins may name and the ship may send to, such as a LAN or loopback in a test (repeatable); by default only public addresses")
	fs.Var(f.galaxies, "galaxy", "galaxy lane `~GALAXY=ADDR:PORT` (repeatable)")
	fs.Var(f.pinned, "lane", "pinned lane of any ship `SHIP=ADDR:PORT` (repeatable)")
	fs.Var(f.relays, "relay", "a ship whose lane forwards for the ships below it (a relay in front of a star) `SHIP=ADDR:PORT` (repeatable); other sponsors must show they forward first")
	fs.Var(f.sponsors, "sponsor", "sponsor override for an escaped ship `SHIP=SPONSOR` (repeatable)")
	fs.StringVar(&f.domain, "galaxy-domain", "", "also resolve galaxies as <name>.`DOMAIN`, port 13337+number (e.g. urbit.org)")
	fs.DurationVar(&f.refresh, "galaxy-refresh", defaultGalaxyRefresh, "how often galaxy DNS names are re-resolved")
	fs.IntVar(&f.maxPending, "max-pending", pit.DefaultMaxEntries, "pending-request table capacity (entries)")
	fs.IntVar(&f.maxPerSource, "max-pending-per-source", 0, "pending entries one source IP may hold; 0 means max-pending/10, negative no cap")
	fs.IntVar(&f.maxReq, "max-requesters", pit.DefaultMaxRequestersPerEntry, "requester lanes kept per pending entry")
	fs.DurationVar(&f.ttl, "pending-ttl", pit.DefaultTTL, "pending entry lifetime, bumped by every repeat")
	fs.DurationVar(&f.suppress, "suppress-window", pit.DefaultSuppressWindow, "a new requester within this of the last forward is aggregated, not forwarded")
	fs.BoolVar(&f.refuse, "refuse-when-full", false, "when the pending table is full, refuse new requests instead of shedding the oldest entry")
	fs.IntVar(&f.maxRoutes, "max-routes", route.DefaultMaxRoutes, "ships with learned routing state (least recently used dropped)")
	fs.DurationVar(&f.laneExpiry, "direct-lane-expiry", route.DefaultDirectLaneExpiry, "how long a learned direct lane is used without hearing from it")
	fs.IntVar(&f.batch, "batch", transport.DefaultBatchSize, "datagrams per recvmmsg/sendmmsg")
	fs.BoolVar(&f.gso, "gso", true, "send runs of datagrams to one lane with UDP GSO where the kernel supports it (Linux 4.18+); false sends each datagram on its own")
	fs.IntVar(&f.sockets, "sockets", 1, "UDP sockets on the listen address (SO_REUSEPORT, Linux), each with its own reader goroutine")
	fs.IntVar(&f.ampFactor, "amp-factor", relay.DefaultAmpFactor, "page bytes sent to an address per byte of requests from it; negative disables the amplification budget")
	fs.IntVar(&f.ampRate, "amp-rate", relay.DefaultAmpRate, "page bytes per second an address may receive regardless of its requests")
	fs.IntVar(&f.ampBurst, "amp-burst", relay.DefaultAmpBurst, "most page bytes an address may bank")
	fs.IntVar(&f.ampNetFactor, "amp-net-factor", relay.DefaultAmpNetFactor, "answer bytes sent to a network (IPv4 /24, IPv6 /56) per byte of requests from it, with no free rate; negative disables the per-network budget")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error (debug adds rate-limited per-datagram logs)")
	fs.StringVar(&f.logFormat, "log-format", "auto", "log format: json, console, or auto (console on a terminal, else json)")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus /metrics, /healthz and /readyz on TCP `ADDR:PORT` (e.g. 127.0.0.1:9337)")
	fs.BoolVar(&f.pprof, "pprof", false, "also serve /debug/pprof/ on the --metrics listener")
	fs.StringVar(&f.capture, "capture", "", "record every datagram read and sent to pcap `FILE` (rotated: FILE.1, FILE.2, ...)")
	fs.Int64Var(&f.captureBytes, "capture-max-bytes", capture.DefaultMaxBytes, "start a new capture file past this size")
	fs.IntVar(&f.captureFiles, "capture-files", capture.DefaultMaxFiles, "capture files kept, the current one included")
	f.fs = fs
	return f
}

// runUsage prints the usage of `relay run`.
func runUsage(w io.Writer) {
	fmt.Fprint(w, `usage: relay run --ship ~SHIP [--config FILE] [flags]

Runs the relay on one UDP socket until SIGINT or SIGTERM; SIGHUP reloads the
config file's galaxies, lanes and log level. Flags override the config file.

`)
	fs := newRunFlags().fs
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// loadRunConfig builds and validates the configuration of `relay run` from
// its command line and the config file it names. The error is one line
// (flag.ErrHelp for -h).
func loadRunConfig(args []string) (runConfig, error) {
	pre := newRunFlags()
	if err := pre.fs.Parse(args); err != nil {
		return runConfig{}, err
	}
	f := newRunFlags()
	if pre.config != "" {
		if err := applyConfigFile(f.fs, pre.config); err != nil {
			return runConfig{}, fmt.Errorf("config %s: %w", pre.config, err)
		}
	}
	if err := f.fs.Parse(args); err != nil {
		return runConfig{}, err
	}
	if f.fs.NArg() > 0 {
		return runConfig{}, fmt.Errorf("unexpected argument %q", f.fs.Arg(0))
	}
	return f.validate()
}

// applyConfigFile sets the flags of fs from the JSON config file at path.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return errors.Unwrap(err) // the path is already in the caller's prefix
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxConfigFileBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxConfigFileBytes {
		return fmt.Errorf("larger than %d bytes", maxConfigFileBytes)
	}
	return applyConfig(fs, b)
}

// applyConfig sets the flags of fs from config text b (see the file
// comment for the format).
func applyConfig(fs *flag.FlagSet, b []byte) error {
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
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if err := applyKey(fs, key, doc[key]); err != nil {
			return err
		}
	}
	return nil
}

// applyKey sets the flag named by config key key to raw, a JSON value.
func applyKey(fs *flag.FlagSet, key string, raw json.RawMessage) error {
	name, table := fileKeys[key]
	if !table {
		name = key
	}
	fl := fs.Lookup(name)
	if fl == nil || name == "config" || (!table && fileKeyOf(name) != key) {
		return unknownKeyError(fs, key)
	}
	set := func(v string) error {
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%q: invalid value %q: %w", key, v, err)
		}
		return nil
	}
	switch name {
	case "galaxy", "lane", "relay", "sponsor":
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%q: want an object of ship to string, like {\"~zod\": \"...\"}", key)
		}
		ships := make([]string, 0, len(m))
		for s := range m {
			ships = append(ships, s)
		}
		sort.Strings(ships)
		for _, s := range ships {
			if err := set(s + "=" + m[s]); err != nil {
				return err
			}
		}
		return nil
	case "public-lane", "hint-net":
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("%q: want an array of strings", key)
		}
		for _, v := range l {
			if err := set(v); err != nil {
				return err
			}
		}
		return nil
	}
	v, err := scalarText(raw)
	if err != nil {
		return fmt.Errorf("%q: %w", key, err)
	}
	return set(v)
}

// fileKeyOf returns the config file key of flag name.
func fileKeyOf(name string) string {
	for k, n := range fileKeys {
		if n == name {
			return k
		}
	}
	return name
}

// unknownKeyError reports a config key no flag has, suggesting the key
// meant when it is a flag's name with '_' for '-', or a table's flag name.
func unknownKeyError(fs *flag.FlagSet, key string) error {
	guess := strings.ReplaceAll(key, "_", "-")
	if _, table := fileKeys[guess]; table && guess != key {
		return fmt.Errorf("unknown key %q (did you mean %q?)", key, guess)
	}
	if fs.Lookup(guess) != nil && guess != "config" && fileKeyOf(guess) != key {
		return fmt.Errorf("unknown key %q (did you mean %q?)", key, fileKeyOf(guess))
	}
	return fmt.Errorf("unknown key %q (keys are relay run's flag names; see relay run -h)", key)
}

// scalarText returns a JSON string, number or boolean as flag text.
func scalarText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", errors.New("empty value")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
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

// validate checks the parsed flags and builds the runConfig.
func (f *runFlags) validate() (runConfig, error) {
	c := runConfig{configPath: f.config}
	var err error
	if c.listen, err = netip.ParseAddrPort(f.listen); err != nil {
		return c, fmt.Errorf("listen: invalid address %q: want IP:PORT", f.listen)
	}
	c.listen = lane.Canon(c.listen)
	if f.shipName == "" {
		return c, errors.New("ship: required (--ship ~SHIP, or \"ship\" in the config file)")
	}
	me, err := lane.ParseShip(f.shipName)
	if err != nil {
		return c, fmt.Errorf("ship: %w", err)
	}
	if me.Class() > lane.Planet {
		return c, fmt.Errorf("ship: %s is a %s; a relay fronts a galaxy, star or planet", me, me.Class())
	}
	var sl netip.AddrPort
	if f.shipLane != "" {
		if sl, err = lane.ParseLane(f.shipLane); err != nil {
			return c, fmt.Errorf("ship-lane: %w", err)
		}
	}
	if f.frontNetns != "" {
		if f.shipLane != "" {
			return c, errors.New("front-netns: excludes ship-lane (the ship is reached through its namespace's device)")
		}
		addr, err := netip.ParseAddr(f.frontAddr)
		if err != nil || !addr.Is4() {
			return c, fmt.Errorf("front-addr: %q is not an IPv4 address", f.frontAddr)
		}
		port := f.frontPort
		if port == 0 {
			port = int(c.listen.Port())
		}
		if port <= 0 || port > 65535 {
			return c, fmt.Errorf("front-port: %d is not a port (with listen port 0, give front-port)", port)
		}
		c.front = &front.Config{Namespace: f.frontNetns, Device: f.frontDevice, ShipAddr: addr, ShipPort: uint16(port)}
		sl = netip.AddrPortFrom(addr, uint16(port))
	}
	for g := range f.galaxies {
		if g.Class() != lane.Galaxy {
			return c, fmt.Errorf("galaxy: %s is a %s, not a galaxy (use a lane for it)", g, g.Class())
		}
	}
	if err := c.logLevel.Set(f.logLevel); err != nil {
		return c, fmt.Errorf("log-level: %q is not debug, info, warn or error", f.logLevel)
	}
	switch f.logFormat {
	case "auto", "json", "console":
		c.logFormat = f.logFormat
	default:
		return c, fmt.Errorf("log-format: %q is not auto, json or console", f.logFormat)
	}
	if f.metrics != "" {
		if err := checkTCPAddr(f.metrics); err != nil {
			return c, fmt.Errorf("metrics: %w", err)
		}
		c.metrics = f.metrics
	}
	if f.pprof && f.metrics == "" {
		return c, errors.New("pprof: needs --metrics, whose listener serves it")
	}
	if f.batch < 1 || f.batch > transport.MaxBatchSize {
		return c, fmt.Errorf("batch: %d is outside 1..%d", f.batch, transport.MaxBatchSize)
	}
	if f.sockets < 1 || f.sockets > maxSockets {
		return c, fmt.Errorf("sockets: %d is outside 1..%d", f.sockets, maxSockets)
	}
	if f.ampFactor >= 0 && (f.ampRate < 0 || f.ampBurst < 0) {
		return c, errors.New("amp-rate and amp-burst must not be negative")
	}
	c.galaxyDomain = strings.Trim(f.domain, ".")
	if c.galaxyDomain != "" && f.refresh <= 0 {
		return c, fmt.Errorf("galaxy-refresh: %v is not positive", f.refresh)
	}
	if f.capture != "" {
		if f.captureBytes < capture.MinMaxBytes {
			return c, fmt.Errorf("capture-max-bytes: %d is less than %d", f.captureBytes, capture.MinMaxBytes)
		}
		if f.captureFiles < 1 {
			return c, fmt.Errorf("capture-files: %d is less than 1", f.captureFiles)
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
		Galaxies: map[lane.Ship]netip.AddrPort(f.galaxies),
		Pinned:   map[lane.Ship]netip.AddrPort(f.pinned),
		Relays:   map[lane.Ship]netip.AddrPort(f.relays),
		Sponsors: f.sponsors.sp,
		Pending: pit.Config{
			MaxEntries: f.maxPending, MaxRequestersPerEntry: f.maxReq, TTL: f.ttl,
			SuppressWindow: f.suppress, FullPolicy: policy, MaxEntriesPerSource: f.maxPerSource,
		},
		Routes: route.Config{MaxRoutes: f.maxRoutes, DirectLaneExpiry: f.laneExpiry},
		Amp:    relay.AmpConfig{Factor: f.ampFactor, Rate: f.ampRate, Burst: f.ampBurst, NetFactor: f.ampNetFactor},
	}
	if err := checkLimits(c.relay); err != nil {
		return c, err
	}
	c.galaxyRefresh = f.refresh
	c.batch = f.batch
	c.sockets = f.sockets
	c.gso = f.gso
	c.pprof = f.pprof
	c.settings = map[string]string{}
	f.fs.VisitAll(func(fl *flag.Flag) { c.settings[fl.Name] = fl.Value.String() })
	return c, nil
}

// checkLimits validates the limits in cfg.
func checkLimits(cfg relay.Config) error {
	if cfg.Pending.MaxEntries <= 0 {
		return fmt.Errorf("max-pending: %d is not positive", cfg.Pending.MaxEntries)
	}
	if cfg.Pending.MaxRequestersPerEntry <= 0 {
		return fmt.Errorf("max-requesters: %d is not positive", cfg.Pending.MaxRequestersPerEntry)
	}
	if cfg.Pending.TTL <= 0 {
		return fmt.Errorf("pending-ttl: %v is not positive", cfg.Pending.TTL)
	}
	if cfg.Pending.SuppressWindow < 0 {
		return fmt.Errorf("suppress-window: %v is negative", cfg.Pending.SuppressWindow)
	}
	if cfg.Routes.MaxRoutes <= 0 {
		return fmt.Errorf("max-routes: %d is not positive", cfg.Routes.MaxRoutes)
	}
	if cfg.Routes.DirectLaneExpiry <= 0 {
		return fmt.Errorf("direct-lane-expiry: %v is not positive", cfg.Routes.DirectLaneExpiry)
	}
	// relay.New checks the rest (ranges against the pending table's shards
	// and timer wheel); building a throwaway core takes about a millisecond
	// and a few megabytes, so a bad limit is caught here, and on reload,
	// rather than at the next restart.
	if _, err := relay.New(cfg); err != nil {
		return fmt.Errorf("limits (max-pending, max-pending-per-source, max-requesters, pending-ttl, suppress-window, max-routes): %w", err)
	}
	return nil
}

// checkTCPAddr checks a HOST:PORT for net.Listen("tcp", ...): an IP address
// or empty host (every interface), and a port.
func checkTCPAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("invalid address %q: want IP:PORT", s)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("invalid address %q: %q is not an IP address", s, host)
		}
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("invalid address %q: bad port %q", s, port)
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
			live = append(live, fileKeyOf(name))
		} else {
			restart = append(restart, fileKeyOf(name))
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

// cutShip splits a SHIP=VALUE flag value and parses the ship; want names
// the expected form for the error.
func cutShip(v, want string) (lane.Ship, string, error) {
	s, rest, ok := strings.Cut(v, "=")
	if !ok {
		return lane.Ship{}, "", fmt.Errorf("want %s, got %q", want, v)
	}
	sh, err := lane.ParseShip(s)
	return sh, rest, err
}

func (m shipLanes) Set(v string) error {
	sh, a, err := cutShip(v, "SHIP=ADDR:PORT")
	if err != nil {
		return err
	}
	ap, err := lane.ParseLane(a)
	if err != nil {
		return err
	}
	m[sh] = ap
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
	ap, err := lane.ParseLane(v)
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
		return fmt.Errorf("want a network as ADDR/BITS, like 10.0.0.0/8: %w", err)
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
	sh, p, err := cutShip(v, "SHIP=SPONSOR")
	if err != nil {
		return err
	}
	sp, err := lane.ParseShip(p)
	if err != nil {
		return err
	}
	if err := f.sp.Set(sh, sp); err != nil {
		return err
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
	}
}

// addrOrNone prints ap, or "none" when it is not set.
func addrOrNone(ap netip.AddrPort) string {
	if !ap.IsValid() {
		return "none"
	}
	return ap.String()
}
