package daemon

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/urbit-relay/relay/lane"
)

const (
	// GalaxyBasePort is the live network's galaxy port base: a galaxy
	// listens on 13337 + its number, where vere looks for it.
	GalaxyBasePort = 13337
	// DefaultGalaxyRefresh is how often galaxy DNS names are re-resolved,
	// as vere does.
	DefaultGalaxyRefresh = 300 * time.Second
	// DNSTimeout bounds one round of galaxy lookups, so that a resolver
	// that stops answering delays the next round, never stalls them.
	DNSTimeout = 20 * time.Second
)

// Lookup is net.Resolver.LookupNetIP's shape, so that tests can answer.
type Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)

// ResolveGalaxies returns the lanes of the galaxies whose <name>.<domain>
// resolves to an IPv4 address, on port GalaxyBasePort + the galaxy's
// number, as vere finds them. A round takes at most DNSTimeout; when ctx
// ends it returns what it found so far.
func ResolveGalaxies(ctx context.Context, domain string, lookup Lookup) map[lane.Ship]netip.AddrPort {
	ctx, cancel := context.WithTimeout(ctx, DNSTimeout)
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
		found[s] = netip.AddrPortFrom(addrs[0].Unmap(), uint16(GalaxyBasePort+g))
	}
	return found
}

// RoutineResolveGalaxies resolves the galaxies now and every refresh until
// ctx ends, replacing lanes' resolved set each round, then calls resolved
// (if not nil) with the number found. A round cut short by ctx is dropped.
func RoutineResolveGalaxies(ctx context.Context, domain string, refresh time.Duration, lookup Lookup, lanes *Lanes, resolved func(galaxies int)) {
	t := time.NewTicker(refresh)
	defer t.Stop()
	for {
		found := ResolveGalaxies(ctx, domain, lookup)
		if ctx.Err() != nil {
			return
		}
		lanes.SetResolved(found)
		if resolved != nil {
			resolved(len(found))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
