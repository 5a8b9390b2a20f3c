package main

// The configuration of `relay run`: its flags, the JSON config file, and
// their validation. What the settings are is settingTable (settings.go);
// this file applies them.
//
// The config file (--config FILE) is one JSON object nested as
// settingGroups: the settings every deployment sets at the top level, the
// others in one object per topic ({"pending": {"max-entries": 100000}});
// the tables are objects (ship to lane, ship to sponsor), the lists
// arrays. The file is applied first and the command line after it, so a
// flag given on the command line wins over the file (for the tables, per
// ship). On SIGHUP the file is read again and the same command line
// applied over it.

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
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/relay/capture"
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
	// maxSockets bounds io.sockets: one reader per core is the useful
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
	// logFormat is "auto", "json" or "console". When loadRunConfig fails
	// it is the format the settings read so far ask for, to report the
	// failure in.
	logFormat    string
	metrics      string         // "" for none, else HOST:PORT for net.Listen
	metricsOpts  metricsOptions // the listener's limits, and pprof
	capture      string         // "" for none
	captureBytes int64
	captureFiles int
	// front, when set, is fronting mode: the ship's namespace and device.
	front *front.Config
	// pki is the --pki file, "" for none, and pkiSnap what it held when
	// the configuration was loaded (nil for none).
	pki     string
	pkiSnap *pki.Snapshot
	// settings holds every setting's final value as text, keyed by config
	// key, to tell on reload what changed.
	settings map[string]string
}

// runFlags is the settings of `relay run` being read: the variables they
// fill, the command line's flag set, and where each value came from.
type runFlags struct {
	settingVals

	fs     *flag.FlagSet            // the command line: the settings with a flag
	values map[string]*settingValue // every setting's value, by its name()

	// Where the settings came from, to name them in errors (bad).
	configPath string            // the config file applied, "" for none
	fromArgs   map[string]bool   // settings the command line set
	fromFile   map[string]string // settings the file set: their JSON text
	inArgs     bool              // the command line is being parsed
	argErr     error             // the last command-line value rejected
}

// ampConfig returns the amplification budget the amplification settings
// give.
func (f *runFlags) ampConfig() amp.Config {
	a := amp.Config{Rate: f.ampRate, Burst: f.ampBurst, NetRate: f.ampNetRate, NetBurst: f.ampNetBurst}
	if !f.ampProbes {
		a.ProofLifetime = -1
	}
	return a
}

// newRunFlags returns the settings of `relay run` at their defaults and
// the flag set of those with a flag, writing nothing: the caller prints
// errors and usage. The values are wrapped (settingValue) to report
// rejected values in the operator's terms.
func newRunFlags() *runFlags {
	f := &runFlags{values: map[string]*settingValue{}, fromArgs: map[string]bool{}, fromFile: map[string]string{}}
	fs := flag.NewFlagSet("relay run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for i := range settingTable {
		s := &settingTable[i]
		v := &settingValue{Value: s.bind(&f.settingVals), s: s, f: f}
		f.values[s.name()] = v
		if s.flag != "" {
			fs.Var(v, s.flag, s.usage)
		}
	}
	f.fs = fs
	return f
}

// loadRunConfig builds and validates the configuration of `relay run` (and
// `relay check`) from its command line and the config file it names. The
// error is one line (flag.ErrHelp for -h); an error about a setting is a
// settingError naming it as the operator gave it. On an error the
// runConfig holds only logFormat, read from what could be read.
func loadRunConfig(args []string) (runConfig, error) {
	pre := newRunFlags()
	argErr := pre.parseArgs(args)
	if errors.Is(argErr, flag.ErrHelp) {
		return runConfig{}, argErr
	}
	f := newRunFlags()
	var err error
	if pre.config != "" {
		// Read even when the command line failed: its log format is the
		// error's.
		f.configPath = pre.config
		err = f.applyConfigFile(pre.config)
	}
	if argErr == nil && err == nil {
		err = f.parseArgs(args)
	}
	if argErr != nil {
		err = argErr
	}
	if err != nil {
		format := f.logFormat
		if pre.fromArgs["log.format"] {
			format = pre.logFormat
		}
		return runConfig{logFormat: knownLogFormat(format)}, err
	}
	c, err := f.validate()
	if err != nil {
		return runConfig{logFormat: knownLogFormat(f.logFormat)}, err
	}
	return c, nil
}

// knownLogFormat returns format if it is one, else "auto".
func knownLogFormat(format string) string {
	switch format {
	case "json", "console":
		return format
	}
	return "auto"
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

// applyConfigFile sets f's settings from the JSON config file at path.
// Errors about the file itself name it; those about a key are
// settingErrors.
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

// applyConfig sets f's settings from config text b (see the file comment
// for the format). It applies every key it can and returns the first
// error, in key order, so that a bad key hides no other setting (the log
// format an error is reported in).
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
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, key := range slices.Sorted(maps.Keys(doc)) {
		raw := doc[key]
		g, isGroup := groupOf(key)
		if !isGroup || g.key == "" {
			if s, ok := settingByKey(key); ok && s.group() == "" {
				keep(f.applyKey(s, raw))
			} else {
				keep(unknownKeyError(key, raw))
			}
			continue
		}
		var sub map[string]json.RawMessage
		if json.Unmarshal(raw, &sub) != nil || sub == nil {
			_, first, _ := cutKey(settingsOf(g)[0].key)
			keep(&settingError{ref: fileRef(key), value: jsonText(raw),
				want: fmt.Sprintf("want an object of the %s settings, such as {%q: ...}", strings.ToLower(g.title), first)})
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(sub)) {
			if s, ok := settingByKey(keyPath(g.key, k)); ok {
				keep(f.applyKey(s, sub[k]))
			} else {
				keep(unknownGroupKeyError(g, k, sub[k]))
			}
		}
	}
	return first
}

// keyPath returns the config key of a group's key as messages write it:
// "pending.max-entries", or "ship" at the top level.
func keyPath(group, key string) string {
	if group == "" {
		return key
	}
	return group + "." + key
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

// applyKey sets setting s from its config key's value raw, as its value's
// type is written in JSON: a table an object, a list an array, any other
// a string, number or boolean.
func (f *runFlags) applyKey(s *setting, raw json.RawMessage) error {
	key := s.key
	f.fromFile[key] = jsonText(raw)
	v := f.values[key]
	// set applies one value; echo is how the file wrote it.
	set := func(text, echo string) error {
		if err := v.Set(text); err != nil {
			return &settingError{ref: fileRef(key), value: clip(echo), want: err.Error()}
		}
		return nil
	}
	switch v.Value.(type) {
	case galaxyLanes, shipLanes, *sponsorFlag:
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			want := `want an object of ship to lane, such as {"~zod": "203.0.113.5:13337"}`
			if _, sponsors := v.Value.(*sponsorFlag); sponsors {
				want = `want an object of ship to sponsor, such as {"~ritpub-sipsyl": "~sipsyl"}`
			}
			return &settingError{ref: fileRef(key), value: jsonText(raw), want: want}
		}
		for _, sh := range slices.Sorted(maps.Keys(m)) {
			if err := set(sh+"="+m[sh], "{"+strconv.Quote(sh)+": "+strconv.Quote(m[sh])+"}"); err != nil {
				return err
			}
		}
		return nil
	case *laneList, *prefixList:
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil {
			want := `want an array of lanes, such as ["203.0.113.7:13337"]`
			if _, nets := v.Value.(*prefixList); nets {
				want = `want an array of networks, such as ["10.0.0.0/8"]`
			}
			return &settingError{ref: fileRef(key), value: jsonText(raw), want: want}
		}
		for _, e := range l {
			if err := set(e, strconv.Quote(e)); err != nil {
				return err
			}
		}
		return nil
	}
	text, err := scalarText(raw)
	if err != nil {
		return &settingError{ref: fileRef(key), value: jsonText(raw), want: err.Error()}
	}
	return set(text, jsonText(raw))
}

// unknownKeyError reports a top-level config key that is no setting or
// group, suggesting the key meant: one written with '_' for '-', a nested
// setting given at the top level by its key in its group, or by its flag.
func unknownKeyError(key string, raw json.RawMessage) error {
	e := &settingError{ref: fileRef(key), value: jsonText(raw),
		want: "unknown key; the keys are the groups and settings of docs/operations.md"}
	guess := strings.ReplaceAll(key, "_", "-")
	if key == "config" {
		e.want = "unknown key; a config file cannot name another"
		return e
	}
	if _, group := groupOf(guess); group && guess != key {
		e.want = fmt.Sprintf("unknown key; did you mean %q?", guess)
		return e
	}
	for i := range settingTable {
		s := &settingTable[i]
		_, k, nested := cutKey(s.key)
		if s.key != "" && s.key != key && (s.key == guess || nested && k == guess || s.flag == guess) {
			e.want = fmt.Sprintf("unknown key; did you mean %q?", s.key)
			return e
		}
	}
	return e
}

// unknownGroupKeyError reports a key of group g that is no setting of it.
func unknownGroupKeyError(g settingGroup, key string, raw json.RawMessage) error {
	e := &settingError{ref: fileRef(keyPath(g.key, key)), value: jsonText(raw),
		want: fmt.Sprintf("unknown key; the keys of %q are %s", g.key, keyNames(g))}
	if guess := strings.ReplaceAll(key, "_", "-"); guess != key {
		if _, ok := settingByKey(keyPath(g.key, guess)); ok {
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
			return c, f.bad("front-netns", "want no "+refOf("ship-lane")+" with it: in fronting mode the ship is reached through its namespace's device")
		}
		addr, err := netip.ParseAddr(f.frontAddr)
		if err != nil || !addr.Is4() {
			return c, f.bad("fronting.addr", "want an IPv4 address such as "+front.DefaultShipAddr.String())
		}
		port := f.frontPort
		if port == 0 {
			port = int(c.listen.Port())
		}
		if port <= 0 || port > 65535 {
			return c, f.bad("fronting.port", "want a port from 1 to 65535 (0 means the listen port, which is 0 here)")
		}
		for _, l := range f.frontHostLanes {
			if !l.Addr().Unmap().Is4() {
				return c, f.bad("fronting.host-lanes", "want an IPv4 lane such as 192.0.2.1:5353 (vere speaks IPv4)")
			}
		}
		c.front = &front.Config{Namespace: f.frontNetns, Device: f.frontDevice, ShipAddr: addr, ShipPort: uint16(port),
			HostLanes: f.frontHostLanes}
		sl = netip.AddrPortFrom(addr, uint16(port))
	}
	if err := c.logLevel.Set(f.logLevel); err != nil {
		return c, f.bad("log.level", "want debug, info, warn or error")
	}
	switch f.logFormat {
	case "auto", "json", "console":
		c.logFormat = f.logFormat
	default:
		return c, f.bad("log.format", "want auto, json or console")
	}
	if f.metrics != "" {
		if err := checkTCPAddr(f.metrics); err != nil {
			return c, f.bad("metrics", err.Error())
		}
		c.metrics = f.metrics
	}
	if f.pprof && f.metrics == "" {
		return c, f.bad("metrics-http.pprof", "needs "+refOf("metrics")+", whose listener serves it")
	}
	if f.metricsMaxConns < minMetricsConns || f.metricsMaxConns > maxMetricsConns {
		return c, f.bad("metrics-http.max-connections", fmt.Sprintf("want a whole number from %d to %d", minMetricsConns, maxMetricsConns))
	}
	if f.metricsMaxScrapes < 1 || f.metricsMaxScrapes >= f.metricsMaxConns {
		return c, f.bad("metrics-http.max-scrapes", fmt.Sprintf(`want a whole number from 1 to %d, fewer than %s (%d), so that /healthz always finds a connection`,
			f.metricsMaxConns-1, refOf("metrics-http.max-connections"), f.metricsMaxConns))
	}
	c.metricsOpts = metricsOptions{maxConns: f.metricsMaxConns, maxScrapes: f.metricsMaxScrapes, pprof: f.pprof}
	if f.batch < 1 || f.batch > transport.MaxBatchSize {
		return c, f.bad("io.batch", fmt.Sprintf("want a whole number from 1 to %d", transport.MaxBatchSize))
	}
	if f.sockets < 1 || f.sockets > maxSockets {
		return c, f.bad("io.sockets", fmt.Sprintf("want a whole number from 1 to %d", maxSockets))
	}
	c.galaxyDomain = strings.Trim(f.domain, ".")
	if c.galaxyDomain != "" && f.refresh <= 0 {
		return c, f.bad("network.galaxy-refresh", `want a positive duration such as "300s"`)
	}
	if f.capture != "" {
		if f.captureBytes < capture.MinMaxBytes {
			return c, f.bad("pcap.max-bytes", fmt.Sprintf("want at least %d bytes", capture.MinMaxBytes))
		}
		if f.captureFiles < 1 {
			return c, f.bad("pcap.files", "want at least 1 file")
		}
		if err := checkCaptureDir(f.capture); err != nil {
			return c, f.bad("pcap.file", err.Error())
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
	c.settings = map[string]string{}
	for name, v := range f.values {
		if v.s.key != "" {
			c.settings[name] = v.String()
		}
	}
	return c, nil
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
	st, ok := settingByField(field)
	if !ok {
		// A field no setting of relay run sets, at its default: a bug.
		return fmt.Errorf("the relay's defaults are refused (%v); please report this", err)
	}
	if g, k, _ := cutKey(st.key); strings.HasSuffix(k, "burst") && strings.HasPrefix(want, "0 or more") {
		// A burst is checked against its rate.
		want += fmt.Sprintf(" (a negative %s turns the budget off)", refOf(keyPath(g, strings.Replace(k, "burst", "rate", 1))))
	}
	return f.bad(st.key, "want "+want)
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
	for key, v := range new.settings {
		if old.settings[key] == v {
			continue
		}
		if s, _ := settingByKey(key); s != nil && s.live {
			live = append(live, key)
		} else {
			restart = append(restart, key)
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
		return wantError(fmt.Sprintf(`%s is a %s; want a galaxy (pin other ships' lanes with %s)`, sh, c, refOf("network.lanes")))
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
	}
}

// addrOrNone prints ap, or "none" when it is not set.
func addrOrNone(ap netip.AddrPort) string {
	if !ap.IsValid() {
		return "none"
	}
	return ap.String()
}
