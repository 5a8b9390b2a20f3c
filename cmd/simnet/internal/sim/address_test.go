package sim

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/amp"
)

// TestHostsHaveTheirOwnNetworks checks the address plan: every host's lanes
// are public, each host is in a /16 of its own, and a relay host's ship
// listens on the host's address.
func TestHostsHaveTheirOwnNetworks(t *testing.T) {
	n := newNet(t, Config{Ships: 2000, NATFraction: 0.3})
	nets := map[netip.Prefix]int{}
	for i, s := range n.Ships() {
		ap := n.Lane(i)
		if !lane.PublicAddr(ap.Addr()) {
			t.Fatalf("%s: lane %v is not a public address", s.ID, ap)
		}
		p, err := ap.Addr().Prefix(16)
		if err != nil {
			t.Fatal(err)
		}
		if j, ok := nets[p]; ok {
			t.Fatalf("%s and %s are both in %v", s.ID, n.Ships()[j].ID, p)
		}
		nets[p] = i
		if s.Relay {
			if ship := n.nodes[s.core].lane; ship.Addr() != ap.Addr() || ship == ap {
				t.Errorf("%s: relay on %v, its ship on %v; want the host's address, another port", s.ID, ap, ship)
			}
		}
	}
	// Past one host a /16, hosts share /16s but not /24s.
	k := len(publicNets16())
	addrs, err := hostAddrs(k+1000, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	by16, by24 := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	for h, a := range addrs {
		p16, _ := a.Prefix(16)
		p24, _ := a.Prefix(24)
		if h < k && by16[p16] || by24[p24] || !lane.PublicAddr(a) {
			t.Fatalf("host %d: %v shares its network or is not public", h, a)
		}
		by16[p16], by24[p24] = true, true
	}
}

// TestRelaysAreSizedForTheSimulation guards the memory of a network: every
// relay's tables at production sizes took 4.3 MiB a relay (7 GB for the
// 1,620 relays of a 10,000-ship network, and a full run peaked at 24 GB).
// The relays' own fixed cost (the relay.Relay struct) is about 200 KiB.
func TestRelaysAreSizedForTheSimulation(t *testing.T) {
	const perRelay = 1 << 20 // bytes, at most
	used, relays, err := Footprint(Config{Seed: 1, Ships: 2000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d relays: %.1f MiB, %.0f KiB a relay", relays, float64(used)/(1<<20), float64(used)/float64(relays)/(1<<10))
	if relays == 0 || used > int64(relays)*perRelay {
		t.Errorf("a network of %d relays takes %d MiB, over %d KiB a relay", relays, used>>20, perRelay>>10)
	}
}

func TestRelayTableSlots(t *testing.T) {
	for _, c := range []struct{ sponsees, want int }{
		{0, MinTableSlots}, {16, MinTableSlots}, {17, 2 * MinTableSlots}, {1070, 1 << 17},
	} {
		if got := relayTableSlots(c.sponsees); got != c.want {
			t.Errorf("relayTableSlots(%d) = %d, want %d", c.sponsees, got, c.want)
		}
	}
}

// TestProductionTablesOnChain checks that the relays on a ship's chain, and
// only they, are rebuilt at production's sizes, and only before the run.
func TestProductionTablesOnChain(t *testing.T) {
	n := newNet(t, Config{})
	p := pick(t, n, func(_ int, s *Ship) bool { return s.Class == lane.Moon && !s.Host })
	if err := n.ProductionTablesOnChain(p); err != nil {
		t.Fatal(err)
	}
	ships := n.Ships()
	chain := map[int]bool{}
	for j := ships[p].Sponsor; ; j = ships[j].Sponsor {
		chain[j] = true
		if ships[j].Sponsor == j {
			break
		}
	}
	if len(chain) != 3 {
		t.Fatalf("a moon's chain has %d ships, want its planet, star and galaxy", len(chain))
	}
	for i, s := range ships {
		if !s.Relay {
			continue
		}
		c := n.nodes[s.front].relayCfg
		production := c.Amp == amp.Config{} && c.Routes.LaneClockSlots == 0 && c.Pending.Shards == 0
		if production != chain[i] {
			t.Errorf("%s (on the chain: %v): amplification slots %d, lane clock %d, pending shards %d", s.ID, chain[i], c.Amp.Slots, c.Routes.LaneClockSlots, c.Pending.Shards)
		}
	}
	n.RunUntil(time.Second)
	if err := n.ProductionTablesOnChain(p); err == nil {
		t.Error("ProductionTablesOnChain after the network ran succeeded")
	}
}
