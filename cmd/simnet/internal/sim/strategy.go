package sim

import (
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
)

// The simulator's routing strategies, as route rubrics: each wraps the
// rubric it is given (route.Design at the bottom) and changes one method.
// They are the simulator's, not the project's: production code runs
// route.Design and never sees these.

// singleRoute sends each request on the tightest candidate alone, proven
// or not: the rubric without its safety net (a dead tighter lane loses
// requests until its probes fail).
type singleRoute struct{ route.Rubric }

func (singleRoute) Choose(cands []route.Candidate, _ route.Candidate) (to [route.MaxTargets]route.Candidate, n int) {
	to[0] = cands[0]
	return to, 1
}

// noHints ignores next-hop fields: routes never tighten past what is
// heard directly and what the sponsorship chain offers.
type noHints struct{ route.Rubric }

func (noHints) TakesHints() bool { return false }

// galaxyOnly walks the sponsorship chain straight to the galaxy, skipping
// intermediate sponsors (but never the receiver itself or self, where the
// walk stops), as directed messaging does today.
type galaxyOnly struct{ route.Rubric }

func (g galaxyOnly) Sponsors(dst []lane.Ship, sp *lane.Sponsors, s, self lane.Ship) []lane.Ship {
	chain := g.Rubric.Sponsors(dst, sp, s, self)
	out := chain[:0]
	for _, c := range chain {
		if c == s || c == self || c.Class() == lane.Galaxy {
			out = append(out, c)
		}
	}
	return out
}

// Rubric returns the route rubric of strategy s, which every relay and
// endpoint of the network runs (route.Config.Rubric).
func Rubric(s Strategy) route.Rubric {
	var r route.Rubric = route.Design{}
	if s.GalaxyOnly {
		r = galaxyOnly{r}
	}
	if s.NoHints {
		r = noHints{r}
	}
	if s.SingleRoute {
		r = singleRoute{r}
	}
	return r
}

// withheld returns the relay's Withheld rule (relay.Config.Withheld) of
// strategy s: nil, the seed's rule, unless s fraternizes, when no sponsor
// is withheld a next-hop.
func withheld(s Strategy) func([]lane.Ship) []lane.Ship {
	if !s.Fraternize {
		return nil
	}
	return func([]lane.Ship) []lane.Ship { return nil }
}
