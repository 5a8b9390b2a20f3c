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
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/capture"
	relaydaemon "github.com/urbit-relay/relay/relay/daemon"
	"github.com/urbit-relay/relay/relay/front"
	"github.com/urbit-relay/relay/relay/pki"
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
		return startupFailed(stderr, cfg.logFormat, err)
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

// daemon is a running `relay run`: relay/daemon's core (the relay, its
// sockets, lanes and DNS resolver) with the operator's surface around it.
type daemon struct {
	// Static after start.
	args    []string
	log     *zap.Logger
	level   zap.AtomicLevel
	core    *relaydaemon.Daemon
	srv     *relay.Server
	ops     *opsStats
	metrics *metricsServer  // nil without --metrics
	capture *capture.Writer // nil without --capture
	front   *front.Conn     // the ship's device; nil outside fronting mode
	pki     *pki.Verifier   // the relay's PageVerifier; empty without --pki
	cancel  context.CancelFunc
	bg      sync.WaitGroup // the host's addresses for the device

	// cfg is owned by the goroutine handling signals.
	cfg runConfig
}

// startDaemon builds the relay, binds its socket and metrics listener, and
// starts serving. args is the command line, re-applied over the config file
// on every reload.
func startDaemon(cfg runConfig, args []string, stderr io.Writer) (*daemon, error) {
	level := zap.NewAtomicLevelAt(cfg.logLevel)
	log := newLogger(stderr, cfg.logFormat, level)
	ops := &opsStats{}
	// One verifier for the daemon's life, so that a reload can give it a
	// file the start had none of; with no snapshot it verifies nothing.
	ver := pki.NewVerifier(cfg.pkiSnap)
	cfg.relay.PKI = ver
	ops.pki = ver
	core, err := relaydaemon.Listen(relaydaemon.Config{
		Relay:         cfg.relay,
		Listen:        cfg.listen,
		Sockets:       cfg.sockets,
		Batch:         cfg.batch,
		DisableGSO:    !cfg.gso,
		GalaxyDomain:  cfg.galaxyDomain,
		GalaxyRefresh: cfg.galaxyRefresh,
		Resolved: func(n int) {
			ops.ready.Store(true)
			log.Info("galaxies resolved", zap.String("domain", cfg.galaxyDomain), zap.Int("galaxies", n))
		},
		LanesChanged: func(galaxies, pinned int) {
			ops.galaxyLanes.Store(int64(galaxies))
			ops.pinnedLanes.Store(int64(pinned))
		},
	})
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	if cfg.metrics != "" {
		if ln, err = net.Listen(metricsNetwork(cfg.metrics), cfg.metrics); err != nil {
			core.Close()
			return nil, fmt.Errorf("metrics: listen %v: %w", cfg.metrics, relaydaemon.UnwrapOpError(err))
		}
	}
	var cw *capture.Writer
	if cfg.capture != "" {
		if cw, err = capture.NewRotating(cfg.capture, cfg.captureBytes, cfg.captureFiles); err != nil {
			core.Close()
			if ln != nil {
				ln.Close()
			}
			return nil, err // capture's errors name it and the path
		}
	}
	ops.capture = cw
	var ship transport.Conn
	var fc *front.Conn
	if cfg.front != nil {
		fc, err = openFront(*cfg.front)
		if err != nil {
			core.Close()
			if ln != nil {
				ln.Close()
			}
			if cw != nil {
				cw.Close()
			}
			return nil, err
		}
		fc.SetHostAddrs(core.HostAddrs())
		fc.SetListenAddrs(core.LocalAddr().Addr()) // the host, whatever the kernel's routes say
		ship = fc
		ops.front = fc
	}

	d := &daemon{args: args, log: log, level: level, cfg: cfg, core: core, ops: ops, capture: cw, front: fc, pki: ver}
	tap := packetLogger(log, level)
	if cw != nil {
		logTap := tap
		tap = func(in bool, local, remote netip.AddrPort, b []byte) {
			logTap(in, local, remote, b)
			cw.Tap(in, local, remote, b)
		}
	}
	if cfg.galaxyDomain == "" {
		ops.ready.Store(true)
	}
	core.Start(relay.ServerConfig{
		Log:  log,
		Tap:  tap,
		Ship: ship,
		// The decision of every datagram, at debug level, rate-limited.
		Decisions: newDecisionLogger(log, level),
	})
	d.srv = core.Server()
	if ln != nil {
		reg := newMetricsRegistry(d.srv, d.ops, version)
		d.metrics = serveMetrics(ln, newMetricsHandler(reg, d.ops, cfg.metricsOpts))
	}
	fields := append([]zap.Field{
		zap.String("version", version),
		zap.Stringer("listen", core.LocalAddr()),
	}, cfg.logFields()...)
	if d.metrics != nil {
		fields = append(fields, zap.String("metrics_url", d.metrics.URL()+"/metrics"))
	}
	log.Info("relay started", fields...)
	logSocketBuffers(log, d.srv)
	d.ops.configLoaded(time.Now(), false)
	// The sockets are bound and their readers running: a datagram sent now
	// is served.
	sdNotify(log, "READY=1\nSTATUS=serving on "+core.LocalAddr().String())

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	if fc != nil {
		d.bg.Add(1)
		go func() {
			defer d.bg.Done()
			d.routineFrontHost(ctx)
		}()
	}
	return d, nil
}

// reload re-reads the config file and applies what can change live (the
// settings marked live in settingTable): the galaxy table, the pinned
// lanes, the configured relays, the log level and the pki file. A bad file is logged
// and the running configuration kept.
func (d *daemon) reload() {
	if d.cfg.configPath == "" {
		if d.cfg.pki != "" {
			d.reloadPKI()
			return
		}
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
	d.core.Lanes().SetConfigured(nc.relay.Galaxies, nc.relay.Pinned)
	d.srv.Relay().SetRelays(nc.relay.Relays)
	d.level.SetLevel(nc.logLevel)
	d.pki.Store(nc.pkiSnap) // read again even if the path is unchanged
	d.cfg.pki, d.cfg.pkiSnap = nc.pki, nc.pkiSnap
	d.cfg.relay.Galaxies, d.cfg.relay.Pinned, d.cfg.logLevel = nc.relay.Galaxies, nc.relay.Pinned, nc.logLevel
	d.cfg.relay.Relays = nc.relay.Relays
	for _, key := range liveKeys() {
		d.cfg.settings[key] = nc.settings[key]
	}
	d.ops.configLoaded(time.Now(), true)
	d.log.Info("config reloaded",
		zap.String("config", d.cfg.configPath),
		zap.Strings("changed", live),
		zap.Int("galaxies", len(nc.relay.Galaxies)),
		zap.Int("pinned_lanes", len(nc.relay.Pinned)),
		zap.String("pki", nc.pki), zap.Int("pki_ships", d.pki.Len()))
	if len(restart) > 0 {
		d.log.Warn("config changes that take effect only at restart", zap.Strings("settings", restart))
	}
}

// reloadPKI reads the --pki file again when there is no config file to
// reload. A bad file is logged and the running snapshot kept.
func (d *daemon) reloadPKI() {
	snap, err := pki.Load(d.cfg.pki, 0)
	if err != nil {
		d.ops.reloadFailed()
		d.log.Error("pki reload failed; keeping the running snapshot", zap.Error(err))
		return
	}
	d.pki.Store(snap)
	d.cfg.pkiSnap = snap
	d.ops.configLoaded(time.Now(), true)
	d.log.Info("pki reloaded", zap.String("pki", d.cfg.pki), zap.Int("pki_ships", snap.Len()))
}

// stop shuts the daemon down: readiness off, the server stops reading and
// drains the batch in hand, then the metrics listener closes.
func (d *daemon) stop() {
	sdNotify(d.log, "STOPPING=1")
	d.ops.stopping.Store(true)
	if err := d.core.Close(); err != nil {
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
