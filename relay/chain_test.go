package relay_test

import (
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// TestPageToAnySponsorUpOurChainCarriesNoNextHop: the rule that a sponsor
// is never given a forwarder's lane as next-hop covers the fronted ship's
// whole sponsorship chain, not only its immediate sponsor. A relay
// fronting a planet gets a request from the planet's galaxy (two steps
// up), and one fronting a moon gets requests from the moon's star and
// galaxy (two and three steps up): for a page that came through a
// forwarder and names no lane of its publisher's, each gets the page with
// no next-hop, while a stranger asking for the same name gets the
// forwarder's lane. It guards against applying the rule to the immediate
// sponsor only (relay.New setting r.ourChain = chain[1:2] instead of
// chain[1:]).
func TestPageToAnySponsorUpOurChainCarriesNoNextHop(t *testing.T) {
	planet := ship(t, "~nidsut-tomdun") // under ~marzod, under ~zod
	moon := lane.ShipFromUint64(1<<32 | planet.Lo)
	starLane := netip.MustParseAddrPort("198.51.100.4:13337") // ~marzod's relay
	for _, tc := range []struct {
		name    string
		fronted lane.Ship
		above   []netip.AddrPort // requesters up our chain, past the immediate sponsor
	}{
		{"planet", planet, []netip.AddrPort{zodLane}},
		{"moon", moon, []netip.AddrPort{starLane, zodLane}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *relay.Config) {
				c.Ship = tc.fronted
				c.Pinned = map[lane.Ship]netip.AddrPort{ship(t, "~marzod"): starLane}
			})
			var defaults *lane.Sponsors
			if got := defaults.AppendChain(nil, tc.fronted); len(got) != len(tc.above)+2 {
				t.Fatalf("chain of %s is %v", tc.fronted, got)
			}
			for _, q := range tc.above {
				p := scry.NewPeek(scry.Name{Ship: planetUnderNec, Bloq: scry.DefaultBloq, Path: []byte("a")})
				p.Header.Hops = 1
				f.handle(p.Append(nil), q)
			}
			f.handle(peekOf(planetUnderNec, "a"), alice)
			sends := f.handle(hopPage(t, planetUnderNec, "a", 1, netip.AddrPort{}), necLane)
			if len(sends) != len(tc.above)+1 {
				t.Fatalf("sends %v, want one to each of %v and %v", sendsTo(sends), tc.above, alice)
			}
			for _, s := range sends {
				p := parse(t, s.Buf)
				next, has := p.NextHopAddr()
				if s.To == alice {
					if !has || next != necLane {
						t.Errorf("page to a stranger has next-hop %v %v, want %v", next, has, necLane)
					}
				} else if has {
					t.Errorf("page to our sponsor at %v has next-hop %v", s.To, next)
				}
			}
		})
	}
}
