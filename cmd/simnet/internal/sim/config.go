package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/urbit-relay/relay/endpoint"
)

const (
	// MaxShips is the largest network New builds. Past it the addresses
	// would still fit (hostAddrs: a /24 a host, a /16 for the first
	// 56,000 or so), but a run's memory (one endpoint.Core per ship,
	// about 10 KB each, plus the relays and their tables) would outgrow a
	// developer machine.
	MaxShips = 200_000

	// MinShips is the smallest network New builds: a couple of galaxies,
	// each with a star, and planets under them.
	MinShips = 16

	// MaxGalaxies is the number of galaxies on Urbit's network.
	MaxGalaxies = 256

	// ShipsPerGalaxy sets the number of galaxies in a small network:
	// Ships/ShipsPerGalaxy, at most MaxGalaxies (reached at 4,096 ships),
	// so that a test-sized network still has several stars per galaxy.
	ShipsPerGalaxy = 16

	// StarFraction is the share of non-galaxy ships that are stars. On the
	// live network a few thousand stars sponsor a few tens of thousands of
	// active planets; a tenth keeps stars numerous enough that most host
	// several planets and a few host thousands (see PlanetSkew).
	StarFraction = 0.10

	// MoonFraction is the share of non-galaxy ships that are moons.
	MoonFraction = 0.08

	// MoonsPerSponsor is the mean number of moons of a planet that has any:
	// moons are concentrated on a few planets (an operator's devices).
	MoonsPerSponsor = 2

	// StarSkew and PlanetSkew are the Zipf exponents by which stars are
	// spread over galaxies and planets over stars: weight 1/(rank+1)^skew.
	// Hosting providers' stars sponsor thousands of planets while most
	// stars sponsor a handful.
	StarSkew   = 0.8
	PlanetSkew = 1.0

	// MaxStarsPerGalaxy is how many stars a galaxy can sponsor (the high
	// byte of a star's number, 1-255).
	MaxStarsPerGalaxy = 255

	// NATBindingTimeout is how long a NAT keeps a pinhole open after the
	// ship last sent to a lane. 30 s is the short end of what home routers
	// use for UDP, and the reason ships ping every 25 s.
	NATBindingTimeout = 30 * time.Second

	// LoopbackLatency is the one-way delay between a relay and the ship it
	// fronts, on the same host.
	LoopbackLatency = 50 * time.Microsecond

	// RelayAccessFactor scales a relay host's access delay: relays run in
	// data centres, ships mostly at home.
	RelayAccessFactor = 0.25

	// MeanTorusDistance is the mean distance between two uniform points of
	// the unit torus (computed numerically: ∫∫ |p − q| over [0,1)² with
	// wrap-around), used to normalise the distance term of link latency.
	MeanTorusDistance = 0.3826

	// Simulated relays run with production defaults but for the sizes of
	// some tables, which production makes for one relay per process: 16
	// pending-table shards and 64Ki slots each for the amplification
	// budget's addresses and networks, the route table's lane clock and
	// the legacy duplicate filter take 4.3 MiB a relay up front, and a
	// 10,000-ship network has 1,620 relays (7 GB; -experiment all peaked
	// at 24.3 GB with one worker). The simulation sizes them for what a
	// simulated relay holds, below, each with the reason no figure
	// depends on it; Config.ProductionTables runs production's sizes, to
	// check that on a small network.

	// PendingShards is each simulated relay's pending-table shard count
	// (pit.Config.Shards; production: 16, for 16 readers' locks): one
	// goroutine drives every relay, so locks never meet, and a shard
	// costs 36 KiB up front. The table's capacity and every share of it
	// (per source, per entry, the overflow pool) are production's; the
	// shares are enforced per shard, Shards-th each, which for the hashed
	// names of any load is the same bound.
	PendingShards = 1

	// SlotsPerSponsee and MinTableSlots size a simulated relay's tables
	// keyed by address (relayTableSlots): the amplification budget's
	// per-address and per-network slots (amp.Config.Slots and
	// NetSlots) and the route table's lane clock
	// (route.Config.LaneClockSlots). A relay hears from its sponsees,
	// which ping it, and from a few requesters: in a 10,000-ship run of
	// the strategies workload the median relay hears 4 addresses and the
	// busiest 1,419. A workload that concentrates on one ship gives the
	// relays on its chain production's sizes instead
	// (Network.ProductionTablesOnChain): the notifications publisher's
	// star hears every subscriber, 10,000, and at 1,024 slots refused 30 %
	// more pages than at 64Ki under the earlier ratio budget. Production's
	// 64Ki slots hold a galaxy's tens of thousands. Two addresses in one
	// slot share one budget (a slot taken over keeps its tokens) and cost each other
	// their lane's last-heard time, so the tables are kept sparse: a
	// requester shares its slot with one of a relay's sponsees with a
	// chance of about 1/SlotsPerSponsee at most (sponsees/MinTableSlots
	// for a relay of fewer than 16). What a collision costs shows only
	// where a budget binds or a lane's liveness is read, and no table of
	// the experiments changes at production's size. Over a network the
	// slots come to at most MinTableSlots a relay plus 2*SlotsPerSponsee
	// a ship, 80 bytes each.
	SlotsPerSponsee = 64
	MinTableSlots   = 1 << 10

	// RouteSourceSlots sizes the per-source route counters of every
	// simulated relay's and endpoint's route table
	// (route.Config.SourceSlots; production: 4,096, 16 KiB a table, and
	// the simulation has a table per ship). A source is refused a route
	// only when its counter reaches MaxRoutes/SourceDivisor (16,384), and
	// a simulated table holds at most a route per ship (12,000 in these
	// runs; the busiest, a galaxy-only galaxy's, about 1,400), spread
	// over the sources that made them, so no counter gets there however
	// few there are.
	RouteSourceSlots = 64

	// DupSlots sizes each simulated relay's legacy ames duplicate filter
	// (relay.DupConfig.Slots): the simulation sends no legacy ames, so
	// the filter is never read or written; 64 is a small valid size.
	DupSlots = 64

	// PoolBufCap is the capacity of pooled datagram buffers: every
	// simulated datagram (peeks, pokes, pages with short payloads) fits,
	// with relay.GrowRoom to spare. Larger datagrams get their own buffer.
	PoolBufCap = 512
)

// LatencyModel is the distribution of one-way link latencies (see the package
// comment).
type LatencyModel struct {
	Name string
	// Mean is the mean one-way latency of the link between two ships drawn
	// at random.
	Mean time.Duration
	// AccessShare is the part of Mean due to the two ends' access delays;
	// the rest grows with their distance.
	AccessShare float64
	// Jitter is the per-datagram variation, ± this fraction.
	Jitter float64
}

// Latency presets, after the overlay measurements of shared/seeds/001: the
// fastest paths take 65 ms over Mycelium's round trips and 267 ms over Tor's.
const (
	FastMean = 65 * time.Millisecond
	SlowMean = 267 * time.Millisecond
	// PresetAccessShare is the presets' AccessShare: about 40% of a
	// typical one-way latency is the last mile at the two ends.
	PresetAccessShare = 0.4
	// FastJitter and SlowJitter are the presets' per-datagram jitter; an
	// onion-routed circuit varies more.
	FastJitter = 0.1
	SlowJitter = 0.2
)

// Fast is the 65 ms preset.
func Fast() LatencyModel {
	return LatencyModel{Name: "fast", Mean: FastMean, AccessShare: PresetAccessShare, Jitter: FastJitter}
}

// Slow is the 267 ms preset.
func Slow() LatencyModel {
	return LatencyModel{Name: "slow", Mean: SlowMean, AccessShare: PresetAccessShare, Jitter: SlowJitter}
}

// LatencyPreset returns the preset called name ("fast" or "slow").
func LatencyPreset(name string) (LatencyModel, error) {
	for _, m := range []LatencyModel{Fast(), Slow()} {
		if m.Name == name {
			return m, nil
		}
	}
	return LatencyModel{}, fmt.Errorf("sim: unknown latency preset %q (want fast or slow)", name)
}

// Strategy is a routing strategy: where relays run and how routes are
// chosen. It maps onto route rubrics (Rubric, strategy.go) and the relay's
// Withheld rule (relay.Config.Withheld).
type Strategy struct {
	Name string
	// GalaxyOnly models directed messaging as Urbit runs it today: relays
	// only at galaxies, one relay hop. Every ship's sponsor (for pings and
	// for routing, in relays and endpoints alike) is overridden to its
	// galaxy, so each galaxy learns the lanes of every ship under it, and
	// the galaxyOnly rubric is run. Next-hop hints stay on: vere's galaxies
	// always write the next-hop, and Arvo takes it as a lane to try.
	// Without it, relays run at galaxies, stars and planets that sponsor
	// moons, and requests climb the whole sponsorship chain.
	GalaxyOnly bool
	// SingleRoute sends each request on the tightest candidate lane alone,
	// proven or not (the singleRoute rubric), in relays and
	// endpoints: no dual send, so a dead tighter lane loses requests until
	// its probes fail.
	SingleRoute bool
	// NoHints ignores next-hop fields (the noHints rubric).
	NoHints bool
	// Fraternize lifts the seed's rule: relays set the next-hop on pages to
	// their own sponsors too (relay.Config.Withheld returns nil).
	Fraternize bool
	// Requester is what ships that run no relay run as requester and
	// keepalive: the project's endpoint.Core, or stock arvo and vere
	// (stockShip). Publishing is the endpoint's in both.
	Requester RequesterModel
	// VereGalaxies runs no relay anywhere: galaxies forward as stock vere
	// does (vereGalaxy), one hop. It is today's network with stock ships.
	VereGalaxies bool
}

// Config describes a simulated network.
type Config struct {
	// Seed determines the topology, positions, NATs and every random
	// draw of the network.
	Seed uint64
	// Ships is the number of ships, galaxies included.
	Ships int
	// NATFraction is the share of planets and moons behind a NAT. Ships
	// that run relays are public.
	NATFraction float64
	// Loss is the probability that a datagram crossing the network is
	// lost.
	Loss     float64
	Latency  LatencyModel
	Strategy Strategy
	// RetryInterval and PingInterval configure every endpoint (zero: the
	// endpoint defaults, 1 s and 25 s).
	RetryInterval time.Duration
	PingInterval  time.Duration
	// NoAmpBudget runs every relay without its amplification budget
	// (amp.Config's off switch), to compare against the default.
	NoAmpBudget bool
	// ProductionTables builds relays and route tables with production's
	// table sizes throughout (the zero configurations), rather than the
	// simulation's (PendingShards, relayTableSlots, RouteSourceSlots,
	// DupSlots): 7 MiB a relay, to check on a small network that the
	// simulation's sizes change no figure.
	ProductionTables bool
}

// relayTableSlots is the size of the tables keyed by address of a relay
// with sponsees sponsees: SlotsPerSponsee a sponsee, a power of two, at
// least MinTableSlots.
func relayTableSlots(sponsees int) int {
	n := MinTableSlots
	for n < SlotsPerSponsee*sponsees {
		n *= 2
	}
	return n
}

func (c *Config) fill() error {
	if c.Ships < MinShips || c.Ships > MaxShips {
		return fmt.Errorf("sim: %d ships; want %d to %d", c.Ships, MinShips, MaxShips)
	}
	if c.NATFraction < 0 || c.NATFraction > 1 || c.Loss < 0 || c.Loss >= 1 {
		return errors.New("sim: NAT fraction and loss must be probabilities (loss below 1)")
	}
	if c.Latency.Mean <= 0 {
		c.Latency = Fast()
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = endpoint.DefaultRetryInterval
	}
	if c.PingInterval == 0 {
		c.PingInterval = endpoint.DefaultPingInterval
	}
	return nil
}
