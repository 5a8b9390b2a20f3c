package main

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// TestResolveGalaxies: every galaxy is looked up as <name>.<domain>; those
// that resolve get port 13337 + their number, IPv4-mapped answers unmapped;
// the others are left out.
func TestResolveGalaxies(t *testing.T) {
	zone := map[string]netip.Addr{
		"zod.urbit.example": netip.MustParseAddr("192.0.2.1"),
		"nec.urbit.example": netip.MustParseAddr("::ffff:192.0.2.2"),
		"fes.urbit.example": netip.MustParseAddr("192.0.2.255"),
	}
	var asked []string
	lookup := func(_ context.Context, network, host string) ([]netip.Addr, error) {
		if network != "ip4" {
			t.Errorf("looked up %s for %s", network, host)
		}
		asked = append(asked, host)
		if a, ok := zone[host]; ok {
			return []netip.Addr{a}, nil
		}
		return nil, errors.New("no such host")
	}
	got := resolveGalaxies(context.Background(), "urbit.example", lookup)
	if len(asked) != 256 {
		t.Errorf("looked up %d names, want all 256 galaxies", len(asked))
	}
	want := map[lane.Ship]netip.AddrPort{
		lane.ShipFromUint64(0):   netip.MustParseAddrPort("192.0.2.1:13337"),
		lane.ShipFromUint64(1):   netip.MustParseAddrPort("192.0.2.2:13338"),
		lane.ShipFromUint64(255): netip.MustParseAddrPort("192.0.2.255:13592"),
	}
	if len(got) != len(want) {
		t.Fatalf("resolved %v, want %v", got, want)
	}
	for s, ap := range want {
		if got[s] != ap {
			t.Errorf("%s resolved to %v, want %v", s, got[s], ap)
		}
	}
}

// TestResolveGalaxiesStopsWithContext: a cancelled round returns what it
// found so far instead of waiting out every lookup.
func TestResolveGalaxiesStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	lookup := func(ctx context.Context, _, _ string) ([]netip.Addr, error) {
		n++
		if n == 3 {
			cancel()
		}
		return []netip.Addr{netip.MustParseAddr("192.0.2.9")}, nil
	}
	got := resolveGalaxies(ctx, "urbit.example", lookup)
	if n != 3 || len(got) != 2 {
		t.Errorf("made %d lookups and kept %d lanes after cancelling at the third", n, len(got))
	}
}
