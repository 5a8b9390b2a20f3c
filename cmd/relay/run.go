package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/relay/front"
	"github.com/urbit-relay/relay/relay/transport"
)

// runRun is `relay run`: it validates the configuration, opens the socket
// and the metrics listener, and serves until SIGINT or SIGTERM. Any
// configuration or start-up error is one line on stderr, in the log format
// chosen (startupFailed), and exit code 2.
func runRun(args []string, stdout, stderr io.Writer) int {
	cfg, err := loadRunConfig(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			runUsage(stdout)
			return 0
		}
		return startupFailed(stderr, chosenLogFormat(args), err)
	}
	// Signals are caught before the socket opens, so that none arriving
	// during start-up kills the process with the default action.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	d, err := startDaemon(cfg, args, stderr)
	if err != nil {
		return startupFailed(stderr, cfg.logFormat, err)
	}
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			d.reload()
			continue
		}
		d.log.Info("shutting down", zap.Stringer("signal", sig))
		break
	}
	d.stop()
	return 0
}

// daemon is a running `relay run`.
type daemon struct {
	// Static after start.
	args    []string
	log     *zap.Logger
	level   zap.AtomicLevel
	srv     *relay.Server
	lanes   *laneState
	ops     *opsStats
	metrics *metricsServer  // nil without --metrics
	capture *capture.Writer // nil without --capture
	front   *front.Conn     // the ship's device; nil outside fronting mode
	cancel  context.CancelFunc
	bg      sync.WaitGroup // the DNS resolver, the host's addresses for the device

	// cfg is owned by the goroutine handling signals.
	cfg runConfig
}

// startDaemon builds the relay, binds its socket and metrics listener, and
// starts serving. args is the command line, re-applied over the config file
// on every reload.
func startDaemon(cfg runConfig, args []string, stderr io.Writer) (*daemon, error) {
	level := zap.NewAtomicLevelAt(cfg.logLevel)
	log := newLogger(stderr, cfg.logFormat, level)
	r, err := relay.New(cfg.relay)
	if err != nil {
		return nil, err
	}
	conns, err := listenSockets(cfg)
	if err != nil {
		return nil, err
	}
	conn := conns[0]
	var ln net.Listener
	if cfg.metrics != "" {
		if ln, err = net.Listen(metricsNetwork(cfg.metrics), cfg.metrics); err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("metrics: listen %v: %w", cfg.metrics, unwrapOpError(err))
		}
	}
	var cw *capture.Writer
	if cfg.capture != "" {
		if cw, err = capture.NewRotating(cfg.capture, cfg.captureBytes, cfg.captureFiles); err != nil {
			closeAll(conns)
			if ln != nil {
				ln.Close()
			}
			return nil, err // capture's errors name it and the path
		}
	}
	var ship transport.Conn
	var fc *front.Conn
	if cfg.front != nil {
		fc, err = openFront(*cfg.front)
		if err != nil {
			closeAll(conns)
			if ln != nil {
				ln.Close()
			}
			if cw != nil {
				cw.Close()
			}
			return nil, err
		}
		ship = fc
	}
	local := interfaceAddrs()
	for _, c := range conns {
		r.AddListener(c.LocalAddr(), local)
	}
	if fc != nil {
		fc.SetHostAddrs(local)
	}

	d := &daemon{args: args, log: log, level: level, cfg: cfg, ops: &opsStats{capture: cw}, capture: cw, front: fc}
	d.lanes = &laneState{r: r, ops: d.ops}
	d.lanes.setConfigured(cfg.relay.Galaxies, cfg.relay.Pinned)
	tap := packetLogger(log, level)
	if cw != nil {
		logTap := tap
		tap = func(in bool, local, remote netip.AddrPort, b []byte) {
			logTap(in, local, remote, b)
			cw.Tap(in, local, remote, b)
		}
	}
	d.srv = relay.NewServer(r, conns, relay.ServerConfig{
		Batch: cfg.batch,
		Log:   log,
		Tap:   tap,
		Ship:  ship,
		// The decision of every datagram, at debug level, rate-limited.
		Decisions: newDecisionLogger(log, level),
	})
	if ln != nil {
		reg := newMetricsRegistry(d.srv, d.ops, version)
		d.metrics = serveMetrics(ln, newMetricsHandler(reg, d.ops, cfg.metricsOpts))
	}
	d.srv.Start()
	fields := append([]zap.Field{
		zap.String("version", version),
		zap.Stringer("listen", conn.LocalAddr()),
	}, cfg.logFields()...)
	if d.metrics != nil {
		fields = append(fields, zap.String("metrics_url", d.metrics.URL()+"/metrics"))
	}
	log.Info("relay started", fields...)
	logSocketBuffers(log, d.srv)
	d.ops.configLoaded(time.Now(), false)
	// The sockets are bound and their readers running: a datagram sent now
	// is served.
	sdNotify(log, "READY=1\nSTATUS=serving on "+conn.LocalAddr().String())

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	if cfg.galaxyDomain != "" {
		d.bg.Add(1)
		go func() {
			defer d.bg.Done()
			d.routineResolveGalaxies(ctx, cfg.galaxyDomain, cfg.galaxyRefresh)
		}()
	} else {
		d.ops.ready.Store(true)
	}
	if fc != nil {
		d.bg.Add(1)
		go func() {
			defer d.bg.Done()
			d.routineFrontHost(ctx)
		}()
	}
	return d, nil
}

// unwrapOpError drops a *net.OpError's repetition of the address, which the
// caller's message already has.
func unwrapOpError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// reload re-reads the config file and applies what can change live: the
// galaxy table, the pinned lanes and the log level. A bad file is logged
// and the running configuration kept.
func (d *daemon) reload() {
	if d.cfg.configPath == "" {
		d.log.Info("SIGHUP: no --config file, nothing to reload")
		return
	}
	sdNotify(d.log, reloadingState())
	defer sdNotify(d.log, "READY=1")
	nc, err := loadRunConfig(d.args)
	if err != nil {
		d.ops.reloadFailed()
		d.log.Error("config reload failed; keeping the running config", zap.String("config", d.cfg.configPath), zap.Error(err))
		return
	}
	live, restart := changedSettings(d.cfg, nc)
	d.lanes.setConfigured(nc.relay.Galaxies, nc.relay.Pinned)
	d.srv.Relay().SetRelays(nc.relay.Relays)
	d.level.SetLevel(nc.logLevel)
	d.cfg.relay.Galaxies, d.cfg.relay.Pinned, d.cfg.logLevel = nc.relay.Galaxies, nc.relay.Pinned, nc.logLevel
	d.cfg.relay.Relays = nc.relay.Relays
	for _, name := range liveSettings {
		d.cfg.settings[name] = nc.settings[name]
	}
	d.ops.configLoaded(time.Now(), true)
	d.log.Info("config reloaded",
		zap.String("config", d.cfg.configPath),
		zap.Strings("changed", live),
		zap.Int("galaxies", len(nc.relay.Galaxies)),
		zap.Int("pinned_lanes", len(nc.relay.Pinned)))
	if len(restart) > 0 {
		d.log.Warn("config changes that take effect only at restart", zap.Strings("settings", restart))
	}
}

// stop shuts the daemon down: readiness off, the server stops reading and
// drains the batch in hand, then the metrics listener closes.
func (d *daemon) stop() {
	sdNotify(d.log, "STOPPING=1")
	d.ops.stopping.Store(true)
	if err := d.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		d.log.Warn("close", zap.Error(err))
	}
	d.cancel()
	d.bg.Wait()
	if d.capture != nil {
		if err := d.capture.Close(); err != nil {
			d.log.Warn("capture", zap.Error(err))
		}
		st := d.capture.Stats()
		d.log.Info("capture closed", zap.String("path", d.cfg.capture), zap.Uint64("records", st.Records),
			zap.Uint64("dropped", st.Dropped), zap.Uint64("rotations", st.Rotations))
	}
	if d.metrics != nil {
		if err := d.metrics.Close(); err != nil {
			d.log.Warn("metrics listener", zap.Error(err))
		}
	}
	snap := d.srv.Relay().Counters().Snapshot()
	var out uint64
	for _, n := range snap.Out {
		out += n
	}
	d.log.Info("relay stopped", zap.Uint64("in", snap.TotalIn()), zap.Uint64("out", out),
		zap.Uint64("forwards", snap.Events[relay.EventForwardSends]), zap.Uint64("answered", snap.Events[relay.EventAnswered]), zap.Uint64("drops", snap.TotalDrops()))
	d.log.Sync()
}

// laneState merges the lanes the relay is configured with: galaxies from
// the config (which win) over galaxies resolved by DNS, and pinned lanes.
type laneState struct {
	r   *relay.Relay
	ops *opsStats

	mu       sync.Mutex
	galaxies map[lane.Ship]netip.AddrPort // guarded by mu
	pinned   map[lane.Ship]netip.AddrPort // guarded by mu
	resolved map[lane.Ship]netip.AddrPort // guarded by mu
}

// setConfigured replaces the configured galaxy and pinned lanes.
func (s *laneState) setConfigured(galaxies, pinned map[lane.Ship]netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.galaxies, s.pinned = galaxies, pinned
	s.applyLocked()
}

// setResolved replaces the DNS-resolved galaxy lanes.
func (s *laneState) setResolved(resolved map[lane.Ship]netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolved = resolved
	s.applyLocked()
}

func (s *laneState) applyLocked() {
	merged := make(map[lane.Ship]netip.AddrPort, len(s.resolved)+len(s.galaxies))
	maps.Copy(merged, s.resolved)
	maps.Copy(merged, s.galaxies)
	s.r.SetLanes(merged, s.pinned)
	s.ops.galaxyLanes.Store(int64(len(merged)))
	s.ops.pinnedLanes.Store(int64(len(s.pinned)))
}

// routineResolveGalaxies looks up every galaxy's <name>.<domain> now and
// every refresh until ctx ends. The relay is ready after the first round.
func (d *daemon) routineResolveGalaxies(ctx context.Context, domain string, refresh time.Duration) {
	t := time.NewTicker(refresh)
	defer t.Stop()
	for {
		found := resolveGalaxies(ctx, domain, net.DefaultResolver.LookupNetIP)
		if ctx.Err() != nil {
			return
		}
		d.lanes.setResolved(found)
		d.ops.ready.Store(true)
		d.log.Info("galaxies resolved", zap.String("domain", domain), zap.Int("galaxies", len(found)))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lookupNetIP is net.Resolver.LookupNetIP's shape, so tests can answer.
type lookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)

// resolveGalaxies returns the lanes of the galaxies whose <name>.<domain>
// resolves to an IPv4 address, on port 13337 + the galaxy's number, as
// vere finds them.
func resolveGalaxies(ctx context.Context, domain string, lookup lookupNetIP) map[lane.Ship]netip.AddrPort {
	ctx, cancel := context.WithTimeout(ctx, dnsTimeout)
	defer cancel()
	found := map[lane.Ship]netip.AddrPort{}
	for g := uint64(0); g < 256; g++ {
		s := lane.ShipFromUint64(g)
		host := strings.TrimPrefix(s.String(), "~") + "." + domain
		addrs, err := lookup(ctx, "ip4", host)
		if ctx.Err() != nil {
			return found
		}
		if err != nil || len(addrs) == 0 {
			continue
		}
		found[s] = netip.AddrPortFrom(addrs[0].Unmap(), uint16(galaxyBasePort+g))
	}
	return found
}

// listenSockets binds cfg.sockets UDP sockets on the listen address: with
// more than one, SO_REUSEPORT lets the kernel spread flows across them, and
// the server runs a reader per socket over the one shared relay core.
func listenSockets(cfg runConfig) ([]transport.Conn, error) {
	opts := transport.Options{BatchSize: cfg.batch, ReusePort: cfg.sockets > 1, DisableGSO: !cfg.gso}
	addr := cfg.listen
	var conns []transport.Conn
	for i := 0; i < cfg.sockets; i++ {
		c, err := transport.ListenUDP(addr, opts)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("listen %v: %w", addr, unwrapOpError(err))
		}
		conns = append(conns, c)
		addr = c.LocalAddr() // the others share the first one's port
	}
	return conns, nil
}

func closeAll(conns []transport.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// interfaceAddrs returns the host's interface addresses (none if they
// cannot be listed): where a socket bound at a wildcard address is
// reached, so that the relay never takes one of them as a target.
func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap().WithZone(""))
		}
	}
	return out
}
