package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/transport"
)

const (
	// galaxyBasePort is the live network's galaxy port base: a galaxy
	// listens on 13337 + its number.
	galaxyBasePort = 13337
	// defaultGalaxyRefresh is how often galaxy DNS names are re-resolved,
	// as vere does.
	defaultGalaxyRefresh = 300 * time.Second
	// dnsTimeout bounds one round of galaxy lookups.
	dnsTimeout = 20 * time.Second
)

// runConfig is everything `relay run` is told, validated.
type runConfig struct {
	listen        netip.AddrPort
	relay         relay.Config
	galaxyDomain  string
	galaxyRefresh time.Duration
	batch         int
	logLevel      zapcore.Level
}

// shipLanes is a repeatable SHIP=ADDR:PORT flag.
type shipLanes map[lane.Ship]netip.AddrPort

func (m shipLanes) String() string { return fmt.Sprint(map[lane.Ship]netip.AddrPort(m)) }

func (m shipLanes) Set(v string) error {
	s, a, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want SHIP=ADDR:PORT, got %q", v)
	}
	sh, err := lane.ParseShip(s)
	if err != nil {
		return err
	}
	ap, err := lane.ParseLane(a)
	if err != nil {
		return err
	}
	if ap.Port() == 0 {
		return fmt.Errorf("lane %q has no port", a)
	}
	m[sh] = ap
	return nil
}

// sponsorFlag is a repeatable SHIP=SPONSOR flag.
type sponsorFlag struct{ sp *lane.Sponsors }

func (f sponsorFlag) String() string { return "" }

func (f sponsorFlag) Set(v string) error {
	s, p, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want SHIP=SPONSOR, got %q", v)
	}
	sh, err := lane.ParseShip(s)
	if err != nil {
		return err
	}
	sp, err := lane.ParseShip(p)
	if err != nil {
		return err
	}
	return f.sp.Set(sh, sp)
}

// parseRunFlags builds and validates the configuration of `relay run`.
func parseRunFlags(args []string, stderr io.Writer) (runConfig, error) {
	fs := flag.NewFlagSet("relay run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		listen     = fs.String("listen", "0.0.0.0:13337", "UDP `ADDR:PORT` to listen on")
		shipName   = fs.String("ship", "", "the fronted ship, as @p (required)")
		shipLane   = fs.String("ship-lane", "", "`ADDR:PORT` of the fronted ship's own process; datagrams for the ship go there")
		galaxies   = shipLanes{}
		pinned     = shipLanes{}
		sponsors   = &lane.Sponsors{}
		domain     = fs.String("galaxy-domain", "", "resolve galaxies as <name>.`DOMAIN` (port 13337+number), e.g. urbit.org")
		refresh    = fs.Duration("galaxy-refresh", defaultGalaxyRefresh, "how often galaxy DNS names are re-resolved")
		maxPending = fs.Int("max-pending", pit.DefaultMaxEntries, "pending-request table capacity (entries)")
		maxReq     = fs.Int("max-requesters", pit.DefaultMaxRequestersPerEntry, "requester lanes kept per pending entry")
		ttl        = fs.Duration("pending-ttl", pit.DefaultTTL, "pending entry lifetime, bumped by every repeat")
		suppress   = fs.Duration("suppress-window", pit.DefaultSuppressWindow, "a new requester within this of the last forward is aggregated, not forwarded")
		refuse     = fs.Bool("refuse-when-full", false, "when the pending table is full, refuse new requests instead of shedding the oldest entry")
		maxRoutes  = fs.Int("max-routes", relay.DefaultMaxRoutes, "ships with learned routing state")
		laneExpiry = fs.Duration("direct-lane-expiry", relay.DefaultDirectLaneExpiry, "how long a learned direct lane is used without hearing from it")
		batch      = fs.Int("batch", transport.DefaultBatchSize, "datagrams per recvmmsg/sendmmsg")
		logLevel   = fs.String("log-level", "info", "log level: debug, info, warn, error")
	)
	fs.Var(galaxies, "galaxy", "galaxy lane `~GALAXY=ADDR:PORT` (repeatable)")
	fs.Var(pinned, "lane", "pinned lane of any ship `SHIP=ADDR:PORT` (repeatable)")
	fs.Var(sponsorFlag{sponsors}, "sponsor", "sponsor override for an escaped ship `SHIP=SPONSOR` (repeatable)")
	if err := fs.Parse(args); err != nil {
		return runConfig{}, err
	}
	if fs.NArg() > 0 {
		return runConfig{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var c runConfig
	var err error
	if c.listen, err = netip.ParseAddrPort(*listen); err != nil {
		return c, fmt.Errorf("--listen: %w", err)
	}
	if *shipName == "" {
		return c, errors.New("--ship is required")
	}
	me, err := lane.ParseShip(*shipName)
	if err != nil {
		return c, fmt.Errorf("--ship: %w", err)
	}
	if me.Class() > lane.Planet {
		return c, fmt.Errorf("--ship: %s is a %s; a relay fronts a galaxy, star or planet", me, me.Class())
	}
	var sl netip.AddrPort
	if *shipLane != "" {
		if sl, err = lane.ParseLane(*shipLane); err != nil || sl.Port() == 0 {
			return c, fmt.Errorf("--ship-lane: invalid lane %q", *shipLane)
		}
	}
	for g := range galaxies {
		if g.Class() != lane.Galaxy {
			return c, fmt.Errorf("--galaxy: %s is not a galaxy", g)
		}
	}
	if err := c.logLevel.Set(*logLevel); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	policy := pit.ShedOldest
	if *refuse {
		policy = pit.RefuseNew
	}
	c.relay = relay.Config{
		Ship: me, ShipLane: sl, Galaxies: galaxies, Pinned: pinned, Sponsors: sponsors,
		Self: []netip.AddrPort{c.listen},
		Pending: pit.Config{
			MaxEntries: *maxPending, MaxRequestersPerEntry: *maxReq, TTL: *ttl,
			SuppressWindow: *suppress, FullPolicy: policy,
		},
		Routes: relay.RouteConfig{MaxRoutes: *maxRoutes, DirectLaneExpiry: *laneExpiry},
	}
	c.galaxyDomain = strings.Trim(*domain, ".")
	c.galaxyRefresh = *refresh
	c.batch = *batch
	return c, nil
}

// newLogger returns a JSON logger, or a console one when w is a terminal.
func newLogger(w *os.File, level zapcore.Level) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	if fi, err := w.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		enc.EncodeLevel = zapcore.CapitalColorLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	} else {
		encoder = zapcore.NewJSONEncoder(enc)
	}
	return zap.New(zapcore.NewCore(encoder, zapcore.Lock(w), level))
}

func runRun(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseRunFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "relay run: %v\n", err)
		return exitUsage
	}
	log := newLogger(os.Stderr, cfg.logLevel)
	defer log.Sync()

	r, err := relay.New(cfg.relay)
	if err != nil {
		fmt.Fprintf(stderr, "relay run: %v\n", err)
		return exitUsage
	}
	conn, err := transport.ListenUDP(cfg.listen, transport.Options{BatchSize: cfg.batch})
	if err != nil {
		fmt.Fprintf(stderr, "relay run: listen %v: %v\n", cfg.listen, err)
		return exitUsage
	}
	r.AddSelf(conn.LocalAddr())
	srv := relay.NewServer(r, []transport.Conn{conn}, relay.ServerConfig{Batch: cfg.batch, Log: log})
	srv.Start()
	log.Info("relay started",
		zap.Stringer("ship", cfg.relay.Ship),
		zap.Stringer("listen", conn.LocalAddr()),
		zap.Stringer("ship_lane", cfg.relay.ShipLane),
		zap.Int("galaxies", len(cfg.relay.Galaxies)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.galaxyDomain != "" {
		go resolveGalaxies(ctx, r, cfg, log)
	}
	<-ctx.Done()
	log.Info("shutting down")
	if err := srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		log.Warn("close", zap.Error(err))
	}
	snap := r.Counters().Snapshot()
	log.Info("relay stopped", zap.Uint64("in", snap.TotalIn()), zap.Uint64("forwards", snap.Forwards),
		zap.Uint64("answered", snap.Answered), zap.Uint64("drops", snap.TotalDrops()))
	return 0
}

// resolveGalaxies looks up every galaxy's <name>.<domain> now and every
// galaxyRefresh, merging the answers under the flags' --galaxy lanes (flags
// win).
func resolveGalaxies(ctx context.Context, r *relay.Relay, cfg runConfig, log *zap.Logger) {
	t := time.NewTicker(cfg.galaxyRefresh)
	defer t.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, dnsTimeout)
		found := map[lane.Ship]netip.AddrPort{}
		for g := uint64(0); g < 256; g++ {
			s := lane.ShipFromUint64(g)
			host := strings.TrimPrefix(s.String(), "~") + "." + cfg.galaxyDomain
			addrs, err := net.DefaultResolver.LookupNetIP(lctx, "ip4", host)
			if err != nil || len(addrs) == 0 {
				continue
			}
			found[s] = netip.AddrPortFrom(addrs[0].Unmap(), uint16(galaxyBasePort+g))
		}
		cancel()
		for s, ap := range cfg.relay.Galaxies {
			found[s] = ap
		}
		r.SetLanes(found, cfg.relay.Pinned)
		log.Info("galaxies resolved", zap.String("domain", cfg.galaxyDomain), zap.Int("galaxies", len(found)))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
