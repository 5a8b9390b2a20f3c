package route

import (
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// TestConfiguredIsTheTablesLanes: Configured answers from the lanes the
// table routes by (SetStatic, SetStaticLane, SetRelays), one owner: a lane
// stops being configured when the table stops routing by it.
func TestConfiguredIsTheTablesLanes(t *testing.T) {
	r := newTable(t)
	gal, rel, other := key("198.51.100.7:7"), key("198.51.100.8:8"), key("198.51.100.9:9")
	r.SetStatic(map[lane.Ship]lane.Key{nec: gal})
	r.SetRelays(map[lane.Ship]lane.Key{marnec: rel})
	for _, c := range []struct {
		k    lane.Key
		want bool
	}{{gal, true}, {rel, true}, {other, false}} {
		if got := r.Configured(c.k); got != c.want {
			t.Errorf("Configured(%v) = %v, want %v", c.k, got, c.want)
		}
	}
	r.SetStaticLane(planet, other)
	if !r.Configured(other) || !r.Configured(gal) || !r.Configured(rel) {
		t.Errorf("SetStaticLane: a lane added or kept is not configured")
	}
	r.SetStaticLane(nec, lane.Key{})
	if r.Configured(gal) {
		t.Errorf("a removed lane is still configured")
	}
	if tg := r.Select(nec, lane.Key{}, 0); tg.N > 0 && tg.Lanes[0] == gal {
		t.Errorf("the table still routes by a removed lane")
	}
	r.SetRelays(nil)
	if r.Configured(rel) || !r.Configured(other) {
		t.Errorf("SetRelays(nil): relays' lanes configured %v, static's %v", r.Configured(rel), r.Configured(other))
	}
}
