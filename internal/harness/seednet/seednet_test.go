package seednet

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

// TestChain checks the example's data: with its escapes, the moon's
// sponsorship chain is the relays in reverse chain order, and every lane a
// node is configured with is another node's.
func TestChain(t *testing.T) {
	synctestStart(t, func(n *Net) {
		var names []string
		for _, s := range n.Sponsors.AppendChain(nil, n.Moon.Ship) {
			names = append(names, s.String())
		}
		want := []string{Moon, Ritpub, Sipsyl, Syl}
		if len(names) != len(want) {
			t.Fatalf("the moon's chain %v, want %v", names, want)
		}
		for i := range want {
			if names[i] != want[i] {
				t.Fatalf("the moon's chain %v, want %v", names, want)
			}
		}
		// The moon's first ping teaches its sponsor's relay its lane.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		k, ok := n.Ritpub.Server.Relay().Routes().Placed(n.Moon.Ship)
		if !ok || k.AddrPort() != n.Moon.Addr {
			t.Errorf("%s's relay has not placed the moon at its lane: %v", Ritpub, k.AddrPort())
		}
		if got := n.Name(n.Sipsyl.Addr); got != Sipsyl {
			t.Errorf("Name(%v) = %q", n.Sipsyl.Addr, got)
		}
		if len(n.Relays()) != 3 {
			t.Errorf("%d relays, want 3", len(n.Relays()))
		}
	})
	known := map[string]bool{}
	for _, sp := range Nodes {
		known[sp.Name] = true
	}
	for _, sp := range Nodes {
		for _, name := range append(append([]string{}, sp.Pinned...), sp.Lanes...) {
			if !known[name] {
				t.Errorf("%s is configured with %s, not a node", sp.Name, name)
			}
		}
	}
}

// synctestStart runs f on the example started over an in-memory network in
// a synctest bubble, and closes it.
func synctestStart(t *testing.T, f func(*Net)) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		mem.SetDelay(5 * time.Millisecond)
		n, err := Start(Options{
			Listen:   func() (transport.Conn, error) { return mem.Listen(netip.MustParseAddrPort("127.0.0.1:0")) },
			Retry:    500 * time.Millisecond,
			HintNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		f(n)
	})
}
