package relay_test

import (
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/relay"
)

// TestHopMemo: a Reader remembers one next-hop lane's SHORT form and
// standing (Reader.hop), which are the relay's to judge: a lane one relay
// may name (its HintNets) another must scrub, however the Reader was used
// before, and a lane's standing is never lent to another lane. Killed
// mutants: bind not clearing the memo, the memo's lane compare dropped
// (or the port ignored).
func TestHopMemo(t *testing.T) {
	private := netip.MustParseAddrPort("10.0.0.9:13338")
	privateOtherPort := netip.MustParseAddrPort("10.0.0.9:13339")
	lan := newFixture(t, func(c *relay.Config) { c.HintNets = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} })
	wan := newFixture(t, nil)
	wan.out = lan.out // one Reader, two relays
	n := 0
	// relayed fetches a page of ~nec's, relayed to us from necLane and
	// carrying next-hop carried, for alice through f, and returns the
	// next-hop alice's copy names (invalid: none).
	relayed := func(f *fixture, carried netip.AddrPort) netip.AddrPort {
		t.Helper()
		n++
		path := string(rune('a'+n%26)) + "/" + string(rune('a'+n/26))
		oneSend(t, f.handle(peek(t, "~nec", path, 0), alice), necLane)
		p := parse(t, oneSend(t, f.handle(page(t, "~nec", path, 1, carried), necLane), alice))
		next, _ := p.NextHopAddr()
		return next
	}
	steps := []struct {
		f       *fixture
		name    string
		carried netip.AddrPort
		want    netip.AddrPort
	}{
		{lan, "lan relay, private lane in its HintNets", private, private},
		{wan, "wan relay, same lane, same Reader", private, necLane},
		{lan, "lan relay again", private, private},
		{lan, "lan relay, a public lane", zodLane, zodLane},
		{wan, "wan relay, a public lane", zodLane, zodLane},
		{wan, "wan relay, the private lane after a public one", private, necLane},
		{lan, "lan relay, the private lane once more", private, private},
		{lan, "lan relay, another port of the private host", privateOtherPort, privateOtherPort},
		{wan, "wan relay, another port of the private host", privateOtherPort, necLane},
	}
	for _, s := range steps {
		if got := relayed(s.f, s.carried); got != s.want {
			t.Errorf("%s: next-hop %v carried %v, want %v", s.name, got, s.carried, s.want)
		}
	}
}
