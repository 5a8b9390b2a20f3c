package relay

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/route"
)

// Config is the decision core's configuration, built once (in cmd/relay) and
// validated by New.
type Config struct {
	// Ship is the fronted ship.
	Ship lane.Ship
	// ShipLane is where the fronted ship's own process listens; invalid
	// means datagrams for it are dropped (DropOwnShipNoLane).
	ShipLane netip.AddrPort
	// Self lists this relay's own public lanes, never used as targets.
	Self []netip.AddrPort
	// Galaxies are the configured galaxy lanes.
	Galaxies map[lane.Ship]netip.AddrPort
	// Pinned are operator-configured lanes of other ships (sponsees or
	// sponsors at fixed addresses). Like galaxy lanes they are always
	// considered known-good for reaching the ship itself; as a sponsor's
	// lane, a pinned lane is tried as a forwarder like a learned one.
	Pinned map[lane.Ship]netip.AddrPort
	// Relays are lanes of ships known to forward for the ships below them
	// (relays of ours in front of stars, say): known-good as sponsors from
	// the start. Stock vere forwards only as a galaxy; any other sponsor
	// must show it forwards before its lane is relied on.
	Relays map[lane.Ship]netip.AddrPort
	// Sponsors overrides default sponsorship (escaped ships); nil for none.
	// It must not be changed after New.
	Sponsors *lane.Sponsors
	// Pending configures the pending-request table (a zero
	// MaxEntriesPerSource is MaxEntries/pit.DefaultSourceDivisor, a
	// negative one no per-source cap).
	Pending pit.Config
	// Routes configures the route table.
	Routes route.Config
	// Amp bounds amplification (see amp.Config); the zero value takes the
	// defaults.
	Amp amp.Config
	// Dup sizes the legacy ames duplicate filter (see DupConfig); the
	// zero value takes the defaults.
	Dup DupConfig
	// Front is fronting mode (see ship.go): the ship's process is reached
	// through a device the relay owns (relay/front), datagrams for it carry
	// their true source (PortShip), and what it sends is decided by
	// HandleFromShip. ShipLane must then be set: it is the ship's lane on
	// that device, and its key in the pending table.
	Front bool
	// PublicLane is the relay's lane as the internet reaches it: what a
	// private next-hop or origin is rewritten to. Invalid means such hints
	// are removed (next-hops) or their datagrams dropped (origins).
	PublicLane netip.AddrPort
	// HintNets are networks besides the public internet (lane.PublicAddr)
	// that next-hops and origins may name and the ship may send to: an
	// operator's LAN, or loopback in tests. Nil: the public internet only.
	HintNets []netip.Prefix
	// Withheld returns, from the fronted ship's sponsorship chain (the
	// ship first), the sponsors that are never given a forwarder's lane
	// as a next-hop (bareFor: their pages go without one; the publisher's
	// own lane they are given, as anyone is). Read once, in New. Nil is
	// the seed's rule, SeedWithheld; the simulator passes its own to
	// compare strategies.
	Withheld func(chain []lane.Ship) []lane.Ship
	// PKI checks publishers' signatures on pages (a *pki.Verifier, from
	// --pki); nil: no page counts as signed (pagesig.go).
	PKI PageVerifier
}

// SeedWithheld is the seed's rule for Config.Withheld: every sponsor up
// the fronted ship's chain (chain[1:]) gets no next-hop from us, so that
// no sponsor fraternizes past its sponsee.
func SeedWithheld(chain []lane.Ship) []lane.Ship { return chain[1:] }

// ConfigError is a field of Config's amp.Config or DupConfig that New (and
// their Validate) rejects. The pending and route tables' settings are
// rejected by their packages' own ConfigError (pit.ConfigError,
// route.ConfigError), which New wraps.
type ConfigError struct {
	Field string // the field's path in Config, such as "Amp.Burst"
	Value any    // its value
	Want  string // what is wanted, such as "0 or more bytes"
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("relay: Config.%s %v: want %s", e.Field, e.Value, e.Want)
}

// ampError reports relay/amp's *amp.ConfigError as this package's, its
// field under "Amp."; any other error as it is.
func ampError(err error) error {
	if e, ok := err.(*amp.ConfigError); ok {
		return &ConfigError{Field: "Amp." + e.Field, Value: e.Value, Want: e.Want}
	}
	return err
}

// Validate reports whether New would accept c, without building anything:
// the relay's own fields (the ship's lane, fronting, the galaxies' lanes)
// and, through their own Validate, the pending table's, the route table's,
// the amplification budget's and the duplicate filter's. A package's
// rejection is its typed ConfigError (pit, route, or this package's),
// naming the field and the value wanted.
func (c Config) Validate() error {
	if err := c.validateOwn(); err != nil {
		return err
	}
	if err := c.Pending.Validate(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if err := c.Routes.Validate(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if err := ampError(c.Amp.Validate()); err != nil {
		return err
	}
	return c.Dup.Validate()
}

// validateOwn checks the relay's own fields; New leaves the packages'
// to their constructors, which validate them.
func (c Config) validateOwn() error {
	if c.ShipLane.IsValid() && c.ShipLane.Port() == 0 {
		return errors.New("relay: ship lane has port 0")
	}
	if c.Front && !c.ShipLane.IsValid() {
		return errors.New("relay: fronting mode needs the ship's lane on its device")
	}
	for g, ap := range c.Galaxies {
		if g.Class() != lane.Galaxy {
			return fmt.Errorf("relay: %s is not a galaxy", g)
		}
		if !ap.IsValid() || ap.Port() == 0 {
			return fmt.Errorf("relay: galaxy %s has an invalid lane %v", g, ap)
		}
	}
	for s, ap := range c.Pinned {
		if !ap.IsValid() || ap.Port() == 0 {
			return fmt.Errorf("relay: pinned lane of %s is invalid: %v", s, ap)
		}
	}
	return nil
}

// New returns a relay core for cfg.
func New(cfg Config) (*Relay, error) {
	if err := cfg.validateOwn(); err != nil {
		return nil, err
	}
	pt, err := pit.New(cfg.Pending)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	budget, err := amp.New(cfg.Amp)
	if err != nil {
		return nil, ampError(err)
	}
	if err := cfg.Dup.fill(); err != nil {
		return nil, err
	}
	dups, err := newDupFilter(cfg.Dup)
	if err != nil {
		return nil, err
	}
	if cfg.Routes.LaneClockSlots == 0 {
		cfg.Routes.LaneClockSlots = route.DefaultLaneClockSlots
	}
	// The operator's lanes outrank the wire's.
	cfg.Routes.ConfiguredWins = true
	// One rule for what a lane may be: the table's, with the relay's
	// declared networks.
	cfg.Routes.HintNets = slices.Clone(cfg.HintNets)
	rt, err := route.New(cfg.Ship, cfg.Sponsors, cfg.Routes)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	seed, err := randomSeed()
	if err != nil {
		return nil, err
	}
	r := &Relay{
		ship:     cfg.Ship,
		sponsors: cfg.Sponsors,
		nameSeed: maphash.MakeSeed(),
		pending:  pt,
		amp:      budget,
		dups:     dups,
		routes:   rt,
		pki:      cfg.PKI,
	}
	r.sigs.seed = lane.Mix64(seed ^ 0x9e3779b97f4a7c15)
	r.link.init(cfg.ShipLane, cfg.Front, cfg.PublicLane)
	withheld := cfg.Withheld
	if withheld == nil {
		withheld = SeedWithheld
	}
	r.ourChain = withheld(r.sponsors.AppendChain(nil, cfg.Ship))
	r.SetLanes(cfg.Galaxies, cfg.Pinned)
	r.SetRelays(cfg.Relays)
	for _, s := range cfg.Self {
		rt.AddSelf(lane.KeyOf(lane.Canon(s)))
	}
	return r, nil
}

// SetLanes replaces the configured galaxy and pinned lanes (on SIGHUP, or
// when DNS answers change).
func (r *Relay) SetLanes(galaxies, pinned map[lane.Ship]netip.AddrPort) {
	m := make(map[lane.Ship]lane.Key, len(galaxies)+len(pinned)+1)
	for s, ap := range pinned {
		m[s] = lane.KeyOf(lane.Canon(ap))
	}
	for s, ap := range galaxies {
		m[s] = lane.KeyOf(lane.Canon(ap))
	}
	if r.link.present() {
		m[r.ship] = r.link.key
	}
	r.routes.SetStatic(m)
}

// SetRelays replaces the configured relays (Config.Relays).
func (r *Relay) SetRelays(relays map[lane.Ship]netip.AddrPort) {
	m := make(map[lane.Ship]lane.Key, len(relays))
	for s, ap := range relays {
		m[s] = lane.KeyOf(lane.Canon(ap))
	}
	r.routes.SetRelays(m)
}

// AddSelf records another lane of this process (for example the public
// address an operator configures, or a second socket).
func (r *Relay) AddSelf(ap netip.AddrPort) { r.routes.AddSelf(lane.KeyOf(lane.Canon(ap))) }

// AddListener records a socket of this process bound at ap: its lane is
// never a target. Bound at a wildcard address (0.0.0.0 or [::]), the socket
// is reached at every local address with its port: each of local (the
// host's interface addresses) and any loopback address is then a lane of
// this process, so a next-hop naming one cannot point the relay at itself.
func (r *Relay) AddListener(ap netip.AddrPort, local []netip.Addr) {
	if !ap.Addr().IsUnspecified() {
		r.AddSelf(ap)
		return
	}
	r.routes.AddSelfPort(ap.Port())
	for _, a := range local {
		r.AddSelf(netip.AddrPortFrom(a, ap.Port()))
	}
}
