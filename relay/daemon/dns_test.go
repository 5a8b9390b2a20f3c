package daemon

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

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
	got := ResolveGalaxies(context.Background(), "urbit.example", lookup)
	if len(asked) != 256 {
		t.Errorf("looked up %d names, want all 256 galaxies", len(asked))
	}
	want := laneMap{
		lane.ShipFromUint64(0):   ap("192.0.2.1:13337"),
		lane.ShipFromUint64(1):   ap("192.0.2.2:13338"),
		lane.ShipFromUint64(255): ap("192.0.2.255:13592"),
	}
	if !maps.Equal(got, want) {
		t.Errorf("resolved %v, want %v", got, want)
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
	got := ResolveGalaxies(ctx, "urbit.example", lookup)
	if n != 3 || len(got) != 2 {
		t.Errorf("made %d lookups and kept %d lanes after cancelling at the third", n, len(got))
	}
}

// TestResolveGalaxiesTimeout: a resolver that never answers ends the round
// after DNSTimeout with nothing found.
func TestResolveGalaxiesTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		hang := func(ctx context.Context, _, _ string) ([]netip.Addr, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		got := ResolveGalaxies(context.Background(), "urbit.example", hang)
		if len(got) != 0 || time.Since(start) != DNSTimeout {
			t.Errorf("found %v after %v, want nothing after %v", got, time.Since(start), DNSTimeout)
		}
	})
}

// TestRoutineResolveGalaxies: a round at once, then one every refresh, each
// replacing the resolved lanes and reported; cancelling ends the routine.
func TestRoutineResolveGalaxies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const refresh = time.Minute
		round := 0
		lookup := func(_ context.Context, _, host string) ([]netip.Addr, error) {
			if host == "zod.urbit.example" {
				round++
			}
			// zod resolves in every round, nec from the second on.
			if host == "zod.urbit.example" || host == "nec.urbit.example" && round > 1 {
				return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
			}
			return nil, errors.New("no such host")
		}
		var r recordLanes
		reports := make(chan int, 3) // each round's count, in order
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			RoutineResolveGalaxies(ctx, "urbit.example", refresh, lookup, NewLanes(&r, nil), func(n int) { reports <- n })
		}()
		for i, want := range []int{1, 2} {
			if i > 0 {
				time.Sleep(refresh)
			}
			if n := <-reports; n != want || r.numGalaxies() != want {
				t.Fatalf("round %d: reported %d, relay has %d galaxies; want %d", i+1, n, r.numGalaxies(), want)
			}
			synctest.Wait()
			if len(reports) != 0 {
				t.Fatalf("round %d: more rounds than one a refresh", i+1)
			}
		}
		cancel()
		<-done
		if round != 2 {
			t.Errorf("%d rounds, want 2", round)
		}
	})
}
