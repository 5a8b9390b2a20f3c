// Package seednet is shared/seeds/002's example network, described once:
// the requester ~rovnys, relays fronting the galaxy ~syl, the star ~sipsyl
// and the planet ~ritpub-sipsyl, and the publisher ~mister-ritpub-sipsyl, a
// moon. `relay demo` runs it on 127.0.0.1 and relay's end-to-end test
// (TestSeedExampleTightening) runs it over the in-memory network and real
// UDP, so the README's demo is the tested topology. The netns tests
// (relay/netnstest) build their hosts after it, with its names.
//
// The seed's names are not a default sponsorship chain (@p scrambles
// planets: ~ritpub-sipsyl's default sponsor is ~rondev), so ~ritpub-sipsyl
// is escaped to ~sipsyl, as an operator would configure it. Each relay
// knows, as pinned lanes, the relays one step below and above it
// (Nodes[i].Pinned); the moon's lane is learned from its pings. The moon
// signs its answers with MoonKey, which the requester knows.
package seednet

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
)

// The example's ships.
const (
	Rovnys = "~rovnys"               // the requester
	Syl    = "~syl"                  // a galaxy, fronted by a relay
	Sipsyl = "~sipsyl"               // a star under ~syl, fronted by a relay
	Ritpub = "~ritpub-sipsyl"        // a planet escaped to ~sipsyl, fronted by a relay
	Moon   = "~mister-ritpub-sipsyl" // the publisher, a moon of ~ritpub-sipsyl
)

// Roles of the example's nodes.
const (
	RoleRequester = "requester"
	RoleRelay     = "relay"
	RolePublisher = "publisher"
)

// Spec is one node of the example.
type Spec struct {
	Name string // the ship as @p
	Role string // RoleRequester, RoleRelay or RolePublisher
	Note string // what the node knows, for a reader
	// Pinned names the relays whose lanes a relay is configured with.
	Pinned []string
	// Lanes names the ships whose lanes an endpoint is configured with.
	Lanes []string
}

// Nodes is the example in chain order: the requester, then down the
// sponsorship chain to the moon.
var Nodes = []Spec{
	{Name: Rovnys, Role: RoleRequester, Note: "knows only ~syl's lane", Lanes: []string{Syl}},
	{Name: Syl, Role: RoleRelay, Note: "knows ~sipsyl's lane", Pinned: []string{Sipsyl}},
	{Name: Sipsyl, Role: RoleRelay, Note: "knows ~ritpub-sipsyl's lane", Pinned: []string{Ritpub}},
	{Name: Ritpub, Role: RoleRelay, Note: "escaped to ~sipsyl; learns the moon's lane from its pings", Pinned: []string{Sipsyl}},
	{Name: Moon, Role: RolePublisher, Note: "pings its sponsor ~ritpub-sipsyl", Lanes: []string{Syl, Ritpub}},
}

// Escapes are the example's sponsorships that differ from the default
// chain: ship to sponsor.
var Escapes = map[string]string{Ritpub: Sipsyl}

// MoonKey is the key the moon signs with (on the live network its
// subscribers would take it from Azimuth); fixed, so runs match.
func MoonKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x6d}, ed25519.SeedSize))
}

// Options say how to run the example.
type Options struct {
	// Listen opens a node's socket, as 127.0.0.1:0 on a
	// transporttest.MemNetwork or real UDP.
	Listen func() (transport.Conn, error)
	// Retry is the endpoints' retry interval (endpoint.Config.RetryInterval).
	Retry time.Duration
	// HintNets declares the networks the lanes are on (relay.Config.HintNets):
	// loopback, for 127.0.0.1.
	HintNets []netip.Prefix
	// Observe, if set, sees the requester's events (endpoint.Config.Observe).
	Observe func(endpoint.Event)
}

// Node is one running node of the example.
type Node struct {
	Spec
	Ship lane.Ship
	Addr netip.AddrPort

	Server   *relay.Server      // relays
	Endpoint *endpoint.Endpoint // the requester and the publisher
	// ShipEndpoint is a relay's ship: the process the relay fronts, at
	// ShipAddr (relay.Config.ShipLane). Pings for the relay's ship reach
	// it through the relay, which learns the pinging ship's lane only
	// because it handed the ping over.
	ShipEndpoint *endpoint.Endpoint
	ShipAddr     netip.AddrPort
}

// Net is the running example.
type Net struct {
	// Nodes are in the order of the package's Nodes.
	Nodes                             []*Node
	Rovnys, Syl, Sipsyl, Ritpub, Moon *Node
	Sponsors                          *lane.Sponsors
}

// Start opens a socket per node, then starts the relays, the moon and the
// requester, in that order. On error it closes what it started.
func Start(opts Options) (n *Net, err error) {
	n = &Net{Sponsors: &lane.Sponsors{}}
	conns := make([]transport.Conn, len(Nodes)) // until a relay or endpoint owns it
	defer func() {
		if err != nil {
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
			n.Close()
		}
	}()
	byName := map[string]*Node{}
	for i, sp := range Nodes {
		s, err := lane.ParseShip(sp.Name)
		if err != nil {
			return n, err
		}
		c, err := opts.Listen()
		if err != nil {
			return n, err
		}
		conns[i] = c
		node := &Node{Spec: sp, Ship: s, Addr: c.LocalAddr()}
		n.Nodes = append(n.Nodes, node)
		byName[sp.Name] = node
	}
	n.Rovnys, n.Syl, n.Sipsyl, n.Ritpub, n.Moon = byName[Rovnys], byName[Syl], byName[Sipsyl], byName[Ritpub], byName[Moon]
	for ship, sponsor := range Escapes {
		if err := n.Sponsors.Set(byName[ship].Ship, byName[sponsor].Ship); err != nil {
			return n, err
		}
	}
	// Each relay's ship, behind it; started once sponsorship is set.
	for _, node := range n.Nodes {
		if node.Role != RoleRelay {
			continue
		}
		sc, err := opts.Listen()
		if err != nil {
			return n, err
		}
		node.ShipAddr = sc.LocalAddr()
		ep, err := endpoint.New(endpoint.Config{Ship: node.Ship, Sponsors: n.Sponsors, RetryInterval: opts.Retry, HintNets: opts.HintNets}, sc)
		if err != nil {
			sc.Close()
			return n, fmt.Errorf("seednet: %s's ship: %w", node.Name, err)
		}
		node.ShipEndpoint = ep
		ep.Start()
	}
	lanes := func(names []string) map[lane.Ship]netip.AddrPort {
		m := map[lane.Ship]netip.AddrPort{}
		for _, name := range names {
			m[byName[name].Ship] = byName[name].Addr
		}
		return m
	}
	galaxies := lanes([]string{Syl})
	key := MoonKey()
	// Relays first, so the moon's first ping finds its sponsor's relay.
	for _, role := range []string{RoleRelay, RolePublisher, RoleRequester} {
		for i, node := range n.Nodes {
			if node.Role != role {
				continue
			}
			switch role {
			case RoleRelay:
				r, err := relay.New(relay.Config{HintNets: opts.HintNets,
					Ship: node.Ship, ShipLane: node.ShipAddr, Galaxies: galaxies, Pinned: lanes(node.Pinned), Sponsors: n.Sponsors,
					Self: []netip.AddrPort{node.Addr},
				})
				if err != nil {
					return n, err
				}
				node.Server = relay.NewServer(r, []transport.Conn{conns[i]}, relay.ServerConfig{})
				node.Server.Start()
			default:
				cfg := endpoint.Config{Ship: node.Ship, Sponsors: n.Sponsors, RetryInterval: opts.Retry, Lanes: lanes(node.Lanes), HintNets: opts.HintNets}
				if role == RolePublisher {
					cfg.Key = key
				} else {
					cfg.Observe = opts.Observe
					cfg.PeerKeys = map[lane.Ship]ed25519.PublicKey{n.Moon.Ship: key.Public().(ed25519.PublicKey)}
				}
				ep, err := endpoint.New(cfg, conns[i])
				if err != nil {
					return n, fmt.Errorf("seednet: %s: %w", node.Name, err)
				}
				node.Endpoint = ep
				ep.Start()
			}
			conns[i] = nil
		}
	}
	return n, nil
}

// Relays returns the relay nodes, in chain order.
func (n *Net) Relays() []*Node {
	var out []*Node
	for _, node := range n.Nodes {
		if node.Server != nil {
			out = append(out, node)
		}
	}
	return out
}

// Name returns the @p of the node at lane ap, or the lane itself.
func (n *Net) Name(ap netip.AddrPort) string {
	for _, node := range n.Nodes {
		if node.Addr == ap {
			return node.Name
		}
	}
	return ap.String()
}

// Close stops every node, the requester first, and returns the first
// error.
func (n *Net) Close() error {
	var errs []error
	for i := len(n.Nodes) - 1; i >= 0; i-- {
		node := n.Nodes[i]
		if node.Endpoint != nil {
			errs = append(errs, node.Endpoint.Close())
		}
	}
	for i := len(n.Nodes) - 1; i >= 0; i-- {
		if node := n.Nodes[i]; node.Server != nil {
			errs = append(errs, node.Server.Close())
		}
	}
	for _, node := range n.Nodes {
		if node.ShipEndpoint != nil {
			errs = append(errs, node.ShipEndpoint.Close())
		}
	}
	return errors.Join(errs...)
}
