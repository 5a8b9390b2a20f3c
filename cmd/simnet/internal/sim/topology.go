package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/urbit-relay/relay/lane"
)

// Ship is one ship of the simulated network.
type Ship struct {
	ID    lane.Ship
	Class lane.Class
	// Sponsor and Galaxy are indexes into Network.Ships: the ship's default
	// sponsor (lane.Ship.Sponsor, a galaxy's is itself) and its galaxy.
	Sponsor, Galaxy int
	// NAT is set for a ship behind a NAT.
	NAT bool
	// Host is set for infrastructure: galaxies, stars and planets that
	// sponsor moons. Hosts are public and have data-centre access delays.
	Host bool
	// Relay is set when the ship runs a relay under the network's strategy.
	Relay bool

	front int32 // the node on the ship's public lane: its relay, or its core
	core  int32 // the node running its endpoint.Core
}

// Depth is the ship's depth in the sponsorship tree: 0 for a galaxy, 1 for a
// star, 2 for a planet, 3 for a moon.
func (s *Ship) Depth() int { return int(s.Class) }

// counts is how many ships of each class a network of n ships has.
type counts struct{ galaxies, stars, planets, moons, moonSponsors int }

func shipCounts(n int) (counts, error) {
	var c counts
	c.galaxies = min(MaxGalaxies, max(2, n/ShipsPerGalaxy))
	rest := n - c.galaxies
	c.stars = max(1, int(math.Round(float64(rest)*StarFraction)))
	c.moons = int(math.Round(float64(rest) * MoonFraction))
	c.planets = rest - c.stars - c.moons
	if c.stars > c.galaxies*MaxStarsPerGalaxy {
		return c, fmt.Errorf("sim: %d stars do not fit under %d galaxies", c.stars, c.galaxies)
	}
	if c.planets < 1 {
		return c, fmt.Errorf("sim: %d ships leave no planets", n)
	}
	if c.moons > 0 {
		c.moonSponsors = min(c.planets, (c.moons+MoonsPerSponsor-1)/MoonsPerSponsor)
	}
	return c, nil
}

// zipf draws indexes 0..n-1 with weight 1/(rank+1)^skew, where the ranks are
// a random permutation.
type zipf struct {
	cum  []float64
	perm []int
}

func newZipf(n int, skew float64, rng *rand.Rand) *zipf {
	z := &zipf{cum: make([]float64, n), perm: rng.Perm(n)}
	total := 0.0
	for i := range n {
		total += 1 / math.Pow(float64(i+1), skew)
		z.cum[i] = total
	}
	return z
}

func (z *zipf) draw(rng *rand.Rand) int {
	u := rng.Float64() * z.cum[len(z.cum)-1]
	return z.perm[sort.SearchFloat64s(z.cum, u)]
}

// buildShips lays out n ships: galaxies, then stars, planets and moons, each
// numbered so that its default sponsor (lane.Ship.Sponsor: the low 8, 16 or
// 32 bits) is the ship the tree gives it. A star is g + 256k, a planet
// s + 65536j, a moon p + m<<32, with k, j, m counting from 1 under each
// sponsor.
func buildShips(n int, natFraction float64, rng *rand.Rand) ([]Ship, error) {
	c, err := shipCounts(n)
	if err != nil {
		return nil, err
	}
	ships := make([]Ship, 0, n)
	children := make([]int, 0, n) // sponsees numbered so far, by index
	add := func(id lane.Ship, sponsor int) int {
		i := len(ships)
		s := Ship{ID: id, Class: id.Class(), Sponsor: sponsor, Galaxy: i}
		if sponsor != i {
			s.Galaxy = ships[sponsor].Galaxy
		}
		ships = append(ships, s)
		children = append(children, 0)
		return i
	}
	for _, g := range rng.Perm(MaxGalaxies)[:c.galaxies] {
		i := add(lane.ShipFromUint64(uint64(g)), len(ships))
		ships[i].Host = true
	}
	gz := newZipf(c.galaxies, StarSkew, rng)
	for range c.stars {
		g := gz.draw(rng)
		for children[g] == MaxStarsPerGalaxy {
			g = (g + 1) % c.galaxies
		}
		children[g]++
		gv, _ := ships[g].ID.Uint64()
		i := add(lane.ShipFromUint64(gv+256*uint64(children[g])), g)
		ships[i].Host = true
	}
	firstStar := c.galaxies
	sz := newZipf(c.stars, PlanetSkew, rng)
	for range c.planets {
		st := firstStar + sz.draw(rng)
		children[st]++
		sv, _ := ships[st].ID.Uint64()
		add(lane.ShipFromUint64(sv+65536*uint64(children[st])), st)
	}
	firstPlanet := firstStar + c.stars
	sponsors := rng.Perm(c.planets)[:c.moonSponsors]
	slices.Sort(sponsors)
	for _, p := range sponsors {
		ships[firstPlanet+p].Host = true
	}
	for range c.moons {
		p := firstPlanet + sponsors[rng.IntN(len(sponsors))]
		children[p]++
		pv, _ := ships[p].ID.Uint64()
		add(lane.ShipFromUint64(pv+uint64(children[p])<<32), p)
	}
	for i := range ships {
		s := &ships[i]
		if !s.Host && (s.Class == lane.Planet || s.Class == lane.Moon) {
			s.NAT = rng.Float64() < natFraction
		}
		if s.ID.Sponsor() != ships[s.Sponsor].ID {
			return nil, fmt.Errorf("sim: %s's default sponsor is %s, not %s", s.ID, s.ID.Sponsor(), ships[s.Sponsor].ID)
		}
	}
	return ships, nil
}
