package sim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/urbit-relay/relay/lane"
)

// Addresses. Every host (a ship, with its relay if it runs one) has a public
// IPv4 address of its own, as on the internet: each in a /16 of its own, drawn
// from the public unicast space (lane.PublicAddr), so that what the relays
// key by address or by network (the amplification budget's per-address and
// per-network slots, the pending table's per-source shares, the route
// table's per-source caps) sees one host per address and per network, as it
// would in production. Lanes used to be 10.0.x.y, 256 hosts to a /24, which
// put a quarter of a thousand hosts in one per-network budget.

// publicNets16 returns the first two bytes of every /16 of public IPv4
// unicast space: those whose every address lane.PublicAddr accepts.
func publicNets16() [][2]byte {
	var out [][2]byte
	for a := 1; a < 224; a++ {
		for b := range 256 {
			// A /16 is public if its first and last addresses are: every
			// range public4 excludes is a /16 or larger, or (192.0.0/24)
			// starts one.
			lo := netip.AddrFrom4([4]byte{byte(a), byte(b), 0, 1})
			hi := netip.AddrFrom4([4]byte{byte(a), byte(b), 255, 254})
			if lane.PublicAddr(lo) && lane.PublicAddr(hi) {
				out = append(out, [2]byte{byte(a), byte(b)})
			}
		}
	}
	return out
}

// hostAddrs returns n distinct public addresses, one per host, drawn from
// rng: hosts get /16s of their own, in random order, while there are enough
// (about 56,000); past that, hosts share /16s but never a /24.
func hostAddrs(n int, rng *rand.Rand) ([]netip.Addr, error) {
	nets := publicNets16()
	if n > len(nets)*256 {
		return nil, fmt.Errorf("sim: %d hosts do not fit in %d public /24s", n, len(nets)*256)
	}
	rng.Shuffle(len(nets), func(i, j int) { nets[i], nets[j] = nets[j], nets[i] })
	third := make([]byte, len(nets)) // each /16's first /24, at random
	for i := range third {
		third[i] = byte(rng.IntN(256))
	}
	out := make([]netip.Addr, n)
	for h := range out {
		k, round := h%len(nets), h/len(nets)
		out[h] = netip.AddrFrom4([4]byte{nets[k][0], nets[k][1], third[k] + byte(round), byte(1 + rng.IntN(254))})
	}
	return out, nil
}
