package main

// The settings of `relay run`, declared once. Every setting is one row of
// settingTable: its key in the config file, its command-line flag if it
// has one, whether a SIGHUP reload applies it, the package Config field
// whose errors it answers for, its words in relay run -h and in the docs,
// and the variable it fills with its default. Everything else is made
// from the table: the flag set (newRunFlags), the file's keys and their
// JSON forms (applyConfig), relay run -h (runUsage), the live/restart
// split of a reload (changedSettings), the naming of a package's error
// (packageError), and the settings tables of README.md and
// docs/operations.md (TestSettingsDocs; go test -run TestSettingsDocs
// -update ./cmd/relay/ rewrites them).
//
// A setting has a flag only when an operator sets it per deployment or
// per run rather than as the site's policy, and its row says why (why;
// docs/operations.md, "The flags"): the file is where the rest live.

import (
	"flag"
	"time"

	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/relay/capture"
	relaydaemon "github.com/urbit-relay/relay/relay/daemon"
	"github.com/urbit-relay/relay/relay/front"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/relay/transport"
)

// setting is one setting of relay run.
type setting struct {
	// key is the setting's config file key, as messages write it:
	// "pending.ttl" for the key "ttl" of the object "pending", "ship" at
	// the top level; "" for --config alone, which the file cannot set.
	key string
	// flag is the command-line flag, "" for a setting only the file holds.
	flag string
	// arg names the value in relay run -h and the docs ("ADDR:PORT"); ""
	// for the value's type (int, duration, ...).
	arg string
	// live: a SIGHUP reload applies a change of it to the running relay;
	// any other change waits for a restart.
	live bool
	// field is the Config field a package's ConfigError names for it
	// ("pit.MaxEntries"; packageError), "" for none.
	field string
	// usage is its line in relay run -h (a flag's; short).
	usage string
	// why says why it is a flag and not in the file only (a flag's).
	why string
	// doc is its meaning in docs/operations.md.
	doc string
	// def is its default as the docs say it, where the value's own is a
	// zero that means something else; "" for the value's.
	def string
	// bind returns the setting's value, pointing into v and holding the
	// default.
	bind func(v *settingVals) flag.Value
}

// settingVals are the variables the settings fill.
type settingVals struct {
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
	sockets, ampRate, ampBurst         int
	ampNetRate, ampNetBurst            int
	ampProbes                          bool
	capture                            string
	captureBytes                       int64
	captureFiles                       int
	frontNetns, frontDevice, frontAddr string
	frontPort                          int
	pki                                string
}

// settingGroup is one topic of the settings: a heading of relay run -h
// and an object of the config file.
type settingGroup struct {
	title string // heading in relay run -h and the docs
	key   string // the config file's object, "" for the top level
}

// settingGroups are the topics, in the order relay run -h and the docs
// show them; a setting's group is its key's part before the dot. The top
// level is what every deployment sets.
var settingGroups = []settingGroup{
	{title: "Every deployment"},
	{title: "Lanes & DNS", key: "network"},
	{title: "Logging", key: "log"},
	{title: "Capture", key: "pcap"},
	{title: "Fronting details", key: "fronting"},
	{title: "Pending table", key: "pending"},
	{title: "Routes", key: "routes"},
	{title: "Amplification", key: "amplification"},
	{title: "Sockets & I/O", key: "io"},
	{title: "Metrics HTTP", key: "metrics-http"},
}

// settingTable is every setting of relay run, grouped as settingGroups
// and in the order relay run -h shows them.
var settingTable = []setting{
	// Every deployment: who, where, which mode, and what it reports on.
	{key: "ship", flag: "ship", arg: "~SHIP", def: "(required)",
		usage: "the fronted ship: a galaxy, star or planet",
		why:   "who the relay fronts: per instance, on a unit's command line beside `relay front setup`, which needs it too",
		doc:   "the fronted ship: a galaxy, star or planet, as @p (or its number)",
		bind:  strVal("", func(v *settingVals) *string { return &v.shipName })},
	{key: "listen", flag: "listen", arg: "ADDR:PORT",
		usage: "UDP address to listen on",
		why:   "the host's port for this ship, a fact of where it runs (the image sets it)",
		doc:   "UDP `IP:PORT` to listen on, the ship's public port (port 0: any free port, logged)",
		bind:  strVal(defaultListen, func(v *settingVals) *string { return &v.listen })},
	{key: "front-netns", flag: "front-netns", arg: "NAME",
		usage: "fronting mode: vere runs in this network namespace",
		why:   "the mode: `relay front setup`, `relay check` and `relay run` name the same namespace on one unit's command lines",
		doc: "fronting mode (see [Deploying](#fronting-mode---front-netns-the-ship-as-if-on-the-public-address)): vere runs in network namespace NAME, " +
			"whose only route is the relay's TUN device; `relay front setup` makes both (the namespace if absent); excludes `ship-lane`",
		bind: strVal("", func(v *settingVals) *string { return &v.frontNetns })},
	{key: "ship-lane", flag: "ship-lane", arg: "ADDR:PORT",
		usage: "ship-lane mode: the ship's own process",
		why:   "the other mode, per instance",
		doc:   "ship-lane mode: the fronted ship's own process; without it or `front-netns`, datagrams for the ship are dropped (`own_ship_no_lane`)",
		bind:  strVal("", func(v *settingVals) *string { return &v.shipLane })},
	{flag: "config", arg: "FILE",
		usage: "the JSON config file; flags override it",
		why:   "it names the file, which cannot",
		doc:   "the JSON config file (command line only); the command line is applied over it",
		bind:  strVal("", func(v *settingVals) *string { return &v.config })},
	{key: "metrics", flag: "metrics", arg: "ADDR:PORT",
		usage: "serve /metrics, /healthz, /readyz on TCP",
		why:   "a binding of this host: 127.0.0.1 on a host, 0.0.0.0 in a container (the image sets it)",
		doc: "TCP `IP:PORT` for `/metrics`, `/healthz`, `/readyz`; an IPv4 address, `0.0.0.0` too, is IPv4 only, " +
			"as the UDP socket on `0.0.0.0` is; `:9337` is every interface, IPv4 and IPv6",
		bind: strVal("", func(v *settingVals) *string { return &v.metrics })},
	{key: "pki", flag: "pki", arg: "FILE", live: true,
		usage: "an Azimuth snapshot to check page signatures by",
		why:   "a file of this host's, refreshed by a job beside the relay",
		doc: "an Azimuth snapshot (ship, life, rift, networking key a line; see [Signed pages](#signed-pages---pki)) to check publishers' " +
			"signatures on pages against; read again on every SIGHUP; `relay check` prints its ship count or its first bad line",
		bind: strVal("", func(v *settingVals) *string { return &v.pki })},

	// Lanes & DNS.
	{key: "network.galaxy-domain", flag: "galaxy-domain", arg: "DOMAIN",
		usage: "also resolve galaxies as NAME.DOMAIN",
		why:   "a quick start on the live network needs it and nothing else (the README's)",
		doc:   "also resolve every galaxy as `<name>.DOMAIN` (`urbit.org`), port 13337 + number",
		bind:  strVal("", func(v *settingVals) *string { return &v.domain })},
	{key: "network.public-lanes", flag: "public-lane", arg: "ADDR:PORT",
		usage: "the relay's address outside NAT",
		why:   "a fact of the host's network (the address NAT maps), known where the container is started",
		doc:   "another lane this relay is reached at (NAT, containers); never used as a target",
		bind:  func(v *settingVals) flag.Value { return &v.public }},
	{key: "network.galaxies", flag: "galaxy", arg: "~G=ADDR:PORT", live: true,
		usage: "a galaxy's lane",
		why:   "a test or a quick start pins a galaxy without writing a file",
		doc:   "a galaxy's lane; wins over DNS",
		bind:  func(v *settingVals) flag.Value { v.galaxies = galaxyLanes{shipLanes{}}; return v.galaxies }},
	{key: "network.lanes", flag: "lane", arg: "SHIP=ADDR:PORT", live: true,
		usage: "a pinned lane of any ship",
		why:   "a test or a quick start pins a lane without writing a file",
		doc:   "a pinned lane for any ship (a sponsee or sponsor at a fixed address)",
		bind:  func(v *settingVals) flag.Value { v.pinned = shipLanes{}; return v.pinned }},
	{key: "network.hint-nets", flag: "hint-net", arg: "PREFIX",
		usage: "a private network lanes may name",
		why:   "every test on loopback or a LAN sets it on every relay it starts",
		doc: "a private network (CIDR) that next-hops and origins may name and the ship may send to: by default a page from a loopback, " +
			"RFC 1918, link-local or otherwise non-public lane reaches requesters with no next-hop, and a legacy origin there is rewritten " +
			"to the first public `listen`/`public-lanes` lane (`relay_hints_scrubbed_total`)",
		bind: func(v *settingVals) flag.Value { return &v.hintNets }},
	{key: "network.relays", arg: "SHIP=ADDR:PORT", live: true,
		doc: "a ship whose lane forwards for the ships below it (a relay of ours in front of a star): known-good as a sponsor from the start. " +
			"Any other sponsor except a galaxy (stock vere forwards only as a galaxy, for its own sponsees) is tried beside the next looser " +
			"route until a relayed page comes back from its lane, and set aside for 2 minutes after 3 unanswered tries",
		bind: func(v *settingVals) flag.Value { v.relays = shipLanes{}; return v.relays }},
	{key: "network.sponsors", arg: "SHIP=SPONSOR",
		doc:  "sponsor override for an escaped ship",
		bind: func(v *settingVals) flag.Value { v.sponsors = newSponsorFlag(); return v.sponsors }},
	{key: "network.galaxy-refresh",
		doc:  "how often galaxy DNS names are re-resolved",
		bind: durVal(relaydaemon.DefaultGalaxyRefresh, func(v *settingVals) *time.Duration { return &v.refresh })},

	// Logging.
	{key: "log.level", flag: "log-level", arg: "LEVEL", live: true,
		usage: "debug, info, warn or error",
		why:   "turned up for one run while debugging",
		doc:   "`debug`, `info`, `warn` or `error`; `debug` adds rate-limited per-datagram lines (at most 50 a second each way)",
		bind:  strVal("info", func(v *settingVals) *string { return &v.logLevel })},
	{key: "log.format", flag: "log-format", arg: "FORMAT",
		usage: "json, console, or auto",
		why:   "chosen by what reads stderr (a terminal, journald, a collector), not by the site",
		doc:   "`json`, `console`, or `auto`: console on a terminal, JSON otherwise (a start-up error too)",
		bind:  strVal("auto", func(v *settingVals) *string { return &v.logFormat })},

	// Capture.
	{key: "pcap.file", flag: "capture", arg: "FILE",
		usage: "record every datagram read and sent as pcap",
		why:   "one recording, for one investigation",
		doc:   "record every datagram read and sent to a pcap file (Wireshark, `replay`), rotated: FILE, FILE.1, ...",
		bind:  strVal("", func(v *settingVals) *string { return &v.capture })},
	{key: "pcap.max-bytes",
		doc:  "start a new capture file past this size (at least 131072)",
		bind: int64Val(capture.DefaultMaxBytes, func(v *settingVals) *int64 { return &v.captureBytes })},
	{key: "pcap.files",
		doc:  "capture files kept, the current one included",
		bind: intVal(capture.DefaultMaxFiles, func(v *settingVals) *int { return &v.captureFiles })},

	// Fronting details.
	{key: "fronting.host-lanes", flag: "front-host-lane", arg: "ADDR:PORT",
		usage: "a lane on this host vere may reach",
		why:   "a fact of this host (its resolver's address) the fronted ship must reach",
		doc: "fronting mode: a lane on this host's own addresses the ship may reach; its datagrams to any other address of this host, " +
			"or to loopback, are refused ([Deploying](#the-namespace-reaches-the-world-not-the-host))",
		bind: func(v *settingVals) flag.Value { return &v.frontHostLanes }},
	{key: "fronting.device",
		doc:  "fronting mode: the TUN device's name in the namespace",
		bind: strVal(front.DefaultDevice, func(v *settingVals) *string { return &v.frontDevice })},
	{key: "fronting.addr",
		doc:  "fronting mode: the ship's IPv4 address on the device (link-local, never seen outside)",
		bind: strVal(front.DefaultShipAddr.String(), func(v *settingVals) *string { return &v.frontAddr })},
	{key: "fronting.port", def: "the listen port",
		doc:  "fronting mode: the UDP port vere binds in the namespace; 0 means the listen port",
		bind: intVal(0, func(v *settingVals) *int { return &v.frontPort })},

	// Pending table.
	{key: "pending.max-entries", field: "pit.MaxEntries",
		doc:  "pending-table entries; when full the oldest is shed (or, with `refuse-when-full`, new requests refused)",
		bind: intVal(pit.DefaultMaxEntries, func(v *settingVals) *int { return &v.maxPending })},
	{key: "pending.max-entries-per-source",
		doc:  "entries one source IP may hold; 0 means `max-entries`/10, negative no cap (`pending_per_source`)",
		bind: intVal(0, func(v *settingVals) *int { return &v.maxPerSource })},
	{key: "pending.max-requesters", field: "pit.MaxRequestersPerEntry",
		doc: "requester lanes per pending entry (1-4096; 200 ships behind one NAT waiting on one name fit) (`requesters_full`); " +
			"past it a request still refreshes the upstream forward once per suppression window (`relay_capped_forwards_total`)",
		bind: intVal(pit.DefaultMaxRequestersPerEntry, func(v *settingVals) *int { return &v.maxReq })},
	{key: "pending.max-requesters-per-source",
		doc: "a fixed cap on the requester lanes one source IP (an IPv6 /64) may hold on one entry; 0 or negative, the default, means none: " +
			"a full entry is shared max-min fairly, a requester from a smaller source displacing the largest source's most recent " +
			"(`requesters_full`; `relay_pending_share_refusals_total{share=\"entry\"}`; `relay_pending_operations_total{op=\"displaced\"}`)",
		bind: intVal(0, func(v *settingVals) *int { return &v.maxReqPerSource })},
	{key: "pending.max-overflow-per-source", field: "pit.MaxOverflowPerSource",
		doc:  "requester lanes beyond each entry's first one source IP may hold in all; 0 means a tenth of the pool (`max-entries`/4), negative no cap (`requesters_full`; `{share=\"overflow\"}`)",
		bind: intVal(0, func(v *settingVals) *int { return &v.maxOverflowPerSrc })},
	{key: "pending.ttl", field: "pit.TTL",
		doc:  "pending entry lifetime, bumped by every repeat",
		bind: durVal(pit.DefaultTTL, func(v *settingVals) *time.Duration { return &v.ttl })},
	{key: "pending.suppress-window", field: "pit.SuppressWindow",
		doc:  "a new requester within this of the last upstream forward is aggregated, not forwarded",
		bind: durVal(pit.DefaultSuppressWindow, func(v *settingVals) *time.Duration { return &v.suppress })},
	{key: "pending.refuse-when-full",
		doc:  "refuse new requests when the table is full instead of shedding the oldest entry (`pending_full`)",
		bind: boolVal(false, func(v *settingVals) *bool { return &v.refuse })},

	// Routes.
	{key: "routes.max-routes", field: "route.MaxRoutes",
		doc:  "ships with learned routing state (least recently used dropped); at most 576 bytes each (144 MiB at the default), one source address creating at most a sixteenth",
		bind: intVal(route.DefaultMaxRoutes, func(v *settingVals) *int { return &v.maxRoutes })},
	{key: "routes.direct-lane-expiry", field: "route.DirectLaneExpiry",
		doc:  "a learned direct lane unheard for this long is no longer used",
		bind: durVal(route.DefaultDirectLaneExpiry, func(v *settingVals) *time.Duration { return &v.laneExpiry })},

	// Amplification.
	{key: "amplification.rate", field: "relay.Amp.Rate",
		doc: "answer bytes per second one address may receive (pages, STUN answers, legacy forwards to learned lanes); at most 1073741824; " +
			"0 takes the default; negative disables the amplification budget",
		bind: intVal(amp.DefaultRate, func(v *settingVals) *int { return &v.ampRate })},
	{key: "amplification.burst", field: "relay.Amp.Burst",
		doc:  "most answer bytes one address may bank (a slot never used starts full); at most 8589934592",
		bind: intVal(amp.DefaultBurst, func(v *settingVals) *int { return &v.ampBurst })},
	{key: "amplification.net-rate", field: "relay.Amp.NetRate",
		doc:  "answer bytes per second one network (the address's IPv4 /24 or IPv6 /56) may receive, whatever the spread over its addresses; negative disables the per-network budget",
		bind: intVal(amp.DefaultNetRate, func(v *settingVals) *int { return &v.ampNetRate })},
	{key: "amplification.net-burst", field: "relay.Amp.NetBurst",
		doc:  "most answer bytes one network may bank",
		bind: intVal(amp.DefaultNetBurst, func(v *settingVals) *int { return &v.ampNetBurst })},
	{key: "amplification.probes",
		doc:  "send a lane that has been sent 256 KiB a STUN binding request; a lane that answers it (every vere ship does) is exempt from the budget for 2 minutes",
		bind: boolVal(true, func(v *settingVals) *bool { return &v.ampProbes })},

	// Sockets & I/O.
	{key: "io.sockets",
		doc:  "UDP sockets on the listen address (SO_REUSEPORT), each with its own reader over the one relay core (1-64)",
		bind: intVal(1, func(v *settingVals) *int { return &v.sockets })},
	{key: "io.batch",
		doc:  "datagrams per recvmmsg/sendmmsg (1-1024)",
		bind: intVal(transport.DefaultBatchSize, func(v *settingVals) *int { return &v.batch })},
	{key: "io.gso",
		doc: "send each batch's runs of datagrams to one lane as single UDP GSO sends (Linux 4.18+); turns itself off on a socket where " +
			"the kernel refuses GSO; `false` sends datagram by datagram",
		bind: boolVal(true, func(v *settingVals) *bool { return &v.gso })},

	// Metrics HTTP.
	{key: "metrics-http.max-connections",
		doc:  "connections the metrics listener holds open (2-4096); one more closes the connection idle longest (or silent longest) to make room, and more wait in the kernel's accept queue (see [the listener's limits](#metrics-and-health))",
		bind: intVal(defaultMetricsMaxConns, func(v *settingVals) *int { return &v.metricsMaxConns })},
	{key: "metrics-http.max-scrapes",
		doc:  "`/metrics` requests served at once, fewer than `max-connections`; more are answered 503 and closed (`relay_metrics_scrapes_refused_total`)",
		bind: intVal(defaultMetricsMaxScrapes, func(v *settingVals) *int { return &v.metricsMaxScrapes })},
	{key: "metrics-http.pprof",
		doc:  "also serve `/debug/pprof/` on the metrics listener",
		bind: boolVal(false, func(v *settingVals) *bool { return &v.pprof })},
}

// The binders of the flag package's own value types, whose String the
// flag package and the docs print and whose Get wantOf reads.

func strVal(def string, p func(*settingVals) *string) func(*settingVals) flag.Value {
	return func(v *settingVals) flag.Value {
		return scratch(func(fs *flag.FlagSet) { fs.StringVar(p(v), "v", def, "") })
	}
}

func intVal(def int, p func(*settingVals) *int) func(*settingVals) flag.Value {
	return func(v *settingVals) flag.Value {
		return scratch(func(fs *flag.FlagSet) { fs.IntVar(p(v), "v", def, "") })
	}
}

func int64Val(def int64, p func(*settingVals) *int64) func(*settingVals) flag.Value {
	return func(v *settingVals) flag.Value {
		return scratch(func(fs *flag.FlagSet) { fs.Int64Var(p(v), "v", def, "") })
	}
}

func durVal(def time.Duration, p func(*settingVals) *time.Duration) func(*settingVals) flag.Value {
	return func(v *settingVals) flag.Value {
		return scratch(func(fs *flag.FlagSet) { fs.DurationVar(p(v), "v", def, "") })
	}
}

func boolVal(def bool, p func(*settingVals) *bool) func(*settingVals) flag.Value {
	return func(v *settingVals) flag.Value {
		return scratch(func(fs *flag.FlagSet) { fs.BoolVar(p(v), "v", def, "") })
	}
}

// scratch returns the value define gives flag "v" of a throwaway set.
func scratch(define func(fs *flag.FlagSet)) flag.Value {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	define(fs)
	return fs.Lookup("v").Value
}

// name is how the code names s: its config key, or for --config its flag.
func (s *setting) name() string {
	if s.key == "" {
		return s.flag
	}
	return s.key
}

// group returns the config object s's key is in, "" for the top level.
func (s *setting) group() string {
	g, _, nested := cutKey(s.key)
	if !nested {
		return ""
	}
	return g
}

// cutKey splits a config key "group.key" into its object and key.
func cutKey(key string) (group, k string, nested bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == '.' {
			return key[:i], key[i+1:], true
		}
	}
	return "", key, false
}

// settingByKey returns the setting of config key key ("pending.ttl").
func settingByKey(key string) (*setting, bool) {
	for i := range settingTable {
		if s := &settingTable[i]; s.key == key && key != "" {
			return s, true
		}
	}
	return nil, false
}

// settingByField returns the setting a package's ConfigError field names.
func settingByField(field string) (*setting, bool) {
	for i := range settingTable {
		if s := &settingTable[i]; s.field == field && field != "" {
			return s, true
		}
	}
	return nil, false
}

// liveKeys returns the config keys a SIGHUP reload applies, in table order.
func liveKeys() []string {
	var keys []string
	for _, s := range settingTable {
		if s.live {
			keys = append(keys, s.key)
		}
	}
	return keys
}

// groupOf returns the group whose config object is key.
func groupOf(key string) (settingGroup, bool) {
	for _, g := range settingGroups {
		if g.key == key {
			return g, true
		}
	}
	return settingGroup{}, false
}

// settingsOf returns the settings of group g (its config object's keys),
// in table order.
func settingsOf(g settingGroup) []*setting {
	var in []*setting
	for i := range settingTable {
		if s := &settingTable[i]; s.group() == g.key {
			in = append(in, s)
		}
	}
	return in
}
