package relay_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
)

// TestQuietPageMemo: a Reader reuses the route table's answer to a
// configured publisher's hop-0 page (Reader.quiet,
// route.Table.PageArrivedHeld) only for the same publisher, the same lane
// and the same relay, and only while the table's configured lanes, pins
// and routes stand: a page from the publisher's own lane names that lane,
// and a page from anywhere else, a relayed one, one after the publisher's
// lane moved, or one decided for another relay with the same Reader, does
// not. Killed mutants: the held answer's stamp, publisher, lane or hop-0
// check dropped.
func TestQuietPageMemo(t *testing.T) {
	moved := netip.MustParseAddrPort("198.51.100.9:13338")
	a := newFixture(t, nil)
	b := newFixture(t, func(c *relay.Config) {
		c.Galaxies = map[lane.Ship]netip.AddrPort{ship(t, "~zod"): zodLane, ship(t, "~nec"): moved}
	})
	b.out = a.out // one Reader, two relays
	n := 0
	var fetchRelayed func(f *fixture, pub string, ask, from netip.AddrPort, hops int, carried netip.AddrPort) netip.AddrPort
	// fetch asks f for a page of pub's (sent on to lane ask), answers it
	// from lane from at hop 0, and returns the next-hop alice's copy
	// names (invalid: none).
	fetch := func(f *fixture, pub string, ask, from netip.AddrPort) netip.AddrPort {
		t.Helper()
		return fetchRelayed(f, pub, ask, from, 0, netip.AddrPort{})
	}
	// fetchRelayed is fetch of a page that came hops hops, carrying
	// next-hop carried.
	fetchRelayed = func(f *fixture, pub string, ask, from netip.AddrPort, hops int, carried netip.AddrPort) netip.AddrPort {
		t.Helper()
		n++
		path := fmt.Sprintf("quiet/%d", n)
		oneSend(t, f.handle(peek(t, pub, path, 0), alice), ask)
		p := parse(t, oneSend(t, f.handle(page(t, pub, path, hops, carried), from), alice))
		next, _ := p.NextHopAddr()
		return next
	}
	steps := []struct {
		f         *fixture
		name      string
		pub       string
		ask, from netip.AddrPort
		want      netip.AddrPort
	}{
		{a, "~nec's page from its lane", "~nec", necLane, necLane, necLane},
		{a, "again, the table's answer held", "~nec", necLane, necLane, necLane},
		{a, "from a lane not ~nec's", "~nec", necLane, publisher2, netip.AddrPort{}},
		{a, "from its lane once more", "~nec", necLane, necLane, necLane},
		{a, "~zod's page from ~nec's lane", "~zod", zodLane, necLane, netip.AddrPort{}},
		{a, "~nec's from its lane, after ~zod's", "~nec", necLane, necLane, necLane},
		{b, "another relay, ~nec elsewhere, the same Reader", "~nec", moved, necLane, netip.AddrPort{}},
		{b, "that relay, from ~nec's lane there", "~nec", moved, moved, moved},
		{a, "the first relay again", "~nec", necLane, necLane, necLane},
	}
	for _, s := range steps {
		if got := fetch(s.f, s.pub, s.ask, s.from); got != s.want {
			t.Errorf("%s: next-hop %v, want %v", s.name, got, s.want)
		}
	}
	// A relayed page of ~nec's from its lane, after a hop-0 one: not
	// the memo's to answer (it names the lane it carries, and teaches the
	// table that the lane forwards).
	fetch(a, "~nec", necLane, necLane)
	if got := fetchRelayed(a, "~nec", necLane, necLane, 1, publisher2); got != publisher2 {
		t.Errorf("a relayed page from ~nec's lane, after a hop-0 one: next-hop %v, want %v, the lane it carried", got, publisher2)
	}
	// ~nec's lane moves: its pages from the old lane name it no more.
	a.r.SetLanes(map[lane.Ship]netip.AddrPort{ship(t, "~zod"): zodLane, ship(t, "~nec"): moved}, nil)
	if got := fetch(a, "~nec", moved, necLane); got.IsValid() {
		t.Errorf("after ~nec moved: its old lane's page names %v, want none", got)
	}
	if got := fetch(a, "~nec", moved, moved); got != moved {
		t.Errorf("after ~nec moved: its new lane's page names %v, want %v", got, moved)
	}
}
