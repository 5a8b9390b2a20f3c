package sim

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
)

// TestRubricComposes: each strategy switch changes its one method of the
// rubric and leaves the others as route.Design has them.
func TestRubricComposes(t *testing.T) {
	k := func(s string) lane.Key { return lane.KeyOf(netip.MustParseAddrPort(s)) }
	cands := []route.Candidate{{Lane: k("203.0.113.1:1")}, {Lane: k("203.0.113.2:2"), Proven: true}}
	var sp lane.Sponsors
	moon := lane.Ship{Lo: 0x0001_0203_0005_0101} // a moon of a planet of a star of ~nec
	for _, c := range []struct {
		st       Strategy
		targets  int
		hints    bool
		galaxies bool
	}{
		{Strategy{}, 2, true, false},
		{Strategy{SingleRoute: true}, 1, true, false},
		{Strategy{NoHints: true}, 2, false, false},
		{Strategy{GalaxyOnly: true}, 2, true, true},
		{Strategy{GalaxyOnly: true, SingleRoute: true, NoHints: true}, 1, false, true},
	} {
		r := Rubric(c.st)
		if _, n := r.Choose(cands, route.Candidate{}); n != c.targets {
			t.Errorf("%+v: %d targets, want %d", c.st, n, c.targets)
		}
		if r.TakesHints() != c.hints {
			t.Errorf("%+v: TakesHints %v", c.st, !c.hints)
		}
		chain := r.Sponsors(nil, &sp, moon, lane.Ship{})
		full := sp.AppendChain(nil, moon)
		want := full
		if c.galaxies {
			want = []lane.Ship{moon, full[len(full)-1]}
		}
		if !slices.Equal(chain, want) {
			t.Errorf("%+v: walks %v, want %v", c.st, chain, want)
		}
	}
}
