// Package daemon is the life of a relay process below its command line: it
// builds the relay core from a relay.Config, binds its UDP sockets, starts
// the server, keeps the galaxy and pinned lanes (Lanes: configured over
// DNS-resolved), resolves galaxies by DNS, and stops it all in order. It
// reads no flags or files and serves no HTTP: cmd/relay maps its
// configuration onto Config, wraps the daemon with the operator's surface
// (metrics, capture, the fronting device, systemd notifications, reloads)
// and calls Listen, Start and Close.
//
// It lives under relay/ rather than internal/ because it imports the relay
// (internal/ holds libraries the core imports, see TestInternalSplit), and
// apart from cmd/relay so that its tests reach start-up, lane state and DNS
// without building and driving the binary.
//
// Start-up is two steps so that a caller can open what else the process
// needs between them and fail cleanly: Listen builds the core and binds
// the sockets (nothing is read yet); Start serves. Close undoes either.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
)

// Config is what a daemon is built from. Its zero value, with a Relay
// config relay.New accepts, is one socket on an OS-chosen port of every
// address, no DNS.
type Config struct {
	// Relay is the core's configuration; its Galaxies and Pinned are the
	// configured lanes Lanes starts with.
	Relay relay.Config
	// Listen is the UDP address bound.
	Listen netip.AddrPort
	// Sockets is how many sockets share Listen (SO_REUSEPORT, a reader
	// each over the one core); 0 means 1.
	Sockets int
	// Batch is the most datagrams read or written per system call; 0 means
	// transport's default.
	Batch int
	// DisableGSO turns off UDP segmentation offload on the sockets.
	DisableGSO bool

	// GalaxyDomain, if set, is looked up as <galaxy>.<domain> for every
	// galaxy at Start and every GalaxyRefresh (0 means
	// DefaultGalaxyRefresh).
	GalaxyDomain  string
	GalaxyRefresh time.Duration
	// Lookup answers the DNS lookups; nil means net.DefaultResolver.
	Lookup Lookup
	// Resolved, if set, is called from the resolver goroutine after each
	// round with the number of galaxies found.
	Resolved func(galaxies int)
	// LanesChanged, if set, is called with the numbers of galaxy lanes
	// (configured and resolved, merged) and pinned lanes each time they
	// are replaced, under Lanes' lock: it must not call back into Lanes.
	LanesChanged func(galaxies, pinned int)
	// LocalAddrs returns the host's own addresses, never taken as
	// targets; nil means InterfaceAddrs.
	LocalAddrs func() []netip.Addr
}

// Daemon is a relay process's core: the relay, its sockets, its server
// once started, its lanes and its DNS resolver.
type Daemon struct {
	// Static after Listen.
	cfg   Config
	relay *relay.Relay
	conns []transport.Conn
	lanes *Lanes
	local []netip.Addr

	// Set by Start, read by Close: both are called by one owner.
	srv    *relay.Server
	cancel context.CancelFunc
	bg     sync.WaitGroup // the DNS resolver

	closeOnce sync.Once
	closeErr  error
}

// Listen builds the relay core and binds the sockets. Nothing is read until
// Start. The error of a bind names the address.
func Listen(cfg Config) (*Daemon, error) {
	r, err := relay.New(cfg.Relay)
	if err != nil {
		return nil, err
	}
	conns, err := listenSockets(cfg)
	if err != nil {
		return nil, err
	}
	localAddrs := cfg.LocalAddrs
	if localAddrs == nil {
		localAddrs = InterfaceAddrs
	}
	d := &Daemon{cfg: cfg, relay: r, conns: conns, local: localAddrs()}
	for _, c := range conns {
		r.AddListener(c.LocalAddr(), d.local)
	}
	d.lanes = NewLanes(r, cfg.LanesChanged)
	d.lanes.SetConfigured(cfg.Relay.Galaxies, cfg.Relay.Pinned)
	return d, nil
}

// Start serves: a reader per socket, and the DNS resolver if a galaxy
// domain is set. sc.Batch defaults to Config.Batch. Start is called once,
// after Listen and before Close.
func (d *Daemon) Start(sc relay.ServerConfig) {
	if sc.Batch == 0 {
		sc.Batch = d.cfg.Batch
	}
	d.srv = relay.NewServer(d.relay, d.conns, sc)
	d.srv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	if d.cfg.GalaxyDomain == "" {
		return
	}
	lookup := d.cfg.Lookup
	if lookup == nil {
		lookup = net.DefaultResolver.LookupNetIP
	}
	refresh := d.cfg.GalaxyRefresh
	if refresh <= 0 {
		refresh = DefaultGalaxyRefresh
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		RoutineResolveGalaxies(ctx, d.cfg.GalaxyDomain, refresh, lookup, d.lanes, d.cfg.Resolved)
	}()
}

// Close stops the daemon: the server stops reading and drains the batch in
// hand, then the resolver ends. Before Start it closes the sockets. It is
// idempotent and returns the first close's error; a socket already closed
// (net.ErrClosed) is not an error.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() {
		if d.srv == nil {
			closeAll(d.conns)
			return
		}
		if err := d.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			d.closeErr = err
		}
		d.cancel()
		d.bg.Wait()
	})
	return d.closeErr
}

// Relay returns the relay core.
func (d *Daemon) Relay() *relay.Relay { return d.relay }

// Server returns the server; nil before Start.
func (d *Daemon) Server() *relay.Server { return d.srv }

// Lanes returns the galaxy and pinned lanes, for reloads.
func (d *Daemon) Lanes() *Lanes { return d.lanes }

// LocalAddr returns the first socket's address (the others share its
// port).
func (d *Daemon) LocalAddr() netip.AddrPort { return d.conns[0].LocalAddr() }

// HostAddrs returns the host's addresses as Listen found them.
func (d *Daemon) HostAddrs() []netip.Addr { return d.local }

// listenSockets binds cfg.Sockets UDP sockets on the listen address: with
// more than one, SO_REUSEPORT lets the kernel spread flows across them, and
// the server runs a reader per socket over the one shared relay core.
func listenSockets(cfg Config) ([]transport.Conn, error) {
	n := max(cfg.Sockets, 1)
	opts := transport.Options{BatchSize: cfg.Batch, ReusePort: n > 1, DisableGSO: cfg.DisableGSO}
	addr := cfg.Listen
	var conns []transport.Conn
	for i := 0; i < n; i++ {
		c, err := transport.ListenUDP(addr, opts)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("listen %v: %w", addr, UnwrapOpError(err))
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

// UnwrapOpError drops a *net.OpError's repetition of the address, which the
// caller's message already has.
func UnwrapOpError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// InterfaceAddrs returns the host's interface addresses (none if they
// cannot be listed): where a socket bound at a wildcard address is
// reached, so that the relay never takes one of them as a target.
func InterfaceAddrs() []netip.Addr {
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
