package relay_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
)

// TestValidateChecksPinnedLanes: Config.Validate rejects a pinned lane
// that New would (one check, in one place), and accepts a valid one.
func TestValidateChecksPinnedLanes(t *testing.T) {
	s := ship(t, "~sampel-palnet")
	for _, c := range []struct {
		ap   netip.AddrPort
		fail bool
	}{
		{netip.AddrPort{}, true},
		{netip.MustParseAddrPort("203.0.113.5:0"), true},
		{netip.MustParseAddrPort("203.0.113.5:31337"), false},
	} {
		cfg := relay.Config{Ship: ship(t, "~marzod"), Pinned: map[lane.Ship]netip.AddrPort{s: c.ap}}
		err := cfg.Validate()
		if (err != nil) != c.fail || (err != nil && !strings.Contains(err.Error(), "pinned lane")) {
			t.Errorf("Validate with pinned %v: %v", c.ap, err)
		}
		if _, err := relay.New(cfg); (err != nil) != c.fail {
			t.Errorf("New with pinned %v: %v", c.ap, err)
		}
	}
}
