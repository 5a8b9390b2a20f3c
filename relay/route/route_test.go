package route

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// The rules of one route, tested alone: no Table, no lock, as tailscale
// tests maybeExpire (net/udprelay's TestServer_endpointGC). Each row of
// Transitions and ChallengerTransitions is one case, made from the table
// itself: a route is set in the row's From state, its event is raised
// through the route's own rule that raises it in the table (hear,
// challenge, answered, advance), and the state it lands in must be the
// row's To.

var (
	lane0   lane.Key
	rtLane  = key("203.0.113.1:1") // the direct lane
	rtChal  = key("203.0.113.2:2") // the challenger, or a new lane
	rtStart = time.Hour
)

func rulesCfg() *Config {
	var c Config
	c.fill()
	return &c
}

// directIn returns a route whose direct lane (rtLane, heard at rtStart) is
// in state s; StateUnknown has no lane.
func directIn(s LaneState) *route {
	rt := &route{}
	if s != StateUnknown {
		rt.direct = path{lane: rtLane, heard: rtStart}
		rt.state = s
	}
	return rt
}

// withChallenger returns a route whose direct lane is proven and fresh at
// rtStart and whose challenger (rtChal, heard at rtStart) is in state s.
func withChallenger(s ChallengerState) *route {
	rt := directIn(StateProven)
	if s != ChallengerNone {
		rt.chal = path{lane: rtChal, heard: rtStart}
		rt.chalState = s
		rt.chalSince = rtStart
	}
	return rt
}

// raiseDirect raises row.Event on a route whose direct lane is in
// row.From, through the rule that raises it, and returns the route.
func raiseDirect(t *testing.T, row Row[LaneState]) *route {
	cfg, clock := rulesCfg(), newLaneClock(64, 1)
	rt := directIn(row.From)
	now := rtStart + time.Second
	switch row.Event {
	case EvContact, EvAnswer, EvSigned:
		if row.From == StateUnknown || row.Event == EvContact {
			if _, ch := rt.hear(rtLane, now, row.Event, row.Auth, row.Event == EvContact, cfg, clock); ch {
				t.Fatalf("%v: heard at its own lane, sent to challenge", row)
			}
			break
		}
		rt.direct.waiting = rtStart
		rt.answered(rtLane, rtChal, false, row.Event, row.Auth, now, cfg, clock)
	case EvProbeLost:
		rt.direct.waiting = rtStart
		rt.direct.fails = uint8(cfg.ProvenFailures - 1)
		if !row.From.knownGood() {
			rt.direct.fails = uint8(cfg.CandidateFailures - 1)
		}
		rt.advance(rtStart+cfg.ProbeTimeout, cfg, clock)
	case EvSilence:
		rt.advance(rtStart+cfg.DirectLaneExpiry, cfg, clock)
	case EvMove:
		// The direct lane is replaced: an answered challenger moves in
		// once the old lane is silent for MoveSilence.
		rt = withChallenger(ChallengerAnswered)
		rt.chal.heard = rtStart + cfg.MoveSilence
		rt.advance(rtStart+cfg.MoveSilence, cfg, clock)
		if rt.direct.lane != rtChal {
			t.Fatalf("%v: the challenger did not move in: %+v", row, rt.direct)
		}
	default:
		t.Fatalf("%v: no rule raises %v", row, row.Event)
	}
	return rt
}

func TestTransitionRows(t *testing.T) {
	for _, row := range Transitions {
		t.Run(fmt.Sprintf("%v-%v", row.From, row.Event), func(t *testing.T) {
			if rt := raiseDirect(t, row); rt.state != row.To {
				t.Fatalf("%v --%v--> %v, want %v (%s)", row.From, row.Event, rt.state, row.To, row.Rule)
			}
		})
	}
}

// raiseChallenger raises row.Event on a route whose challenger is in
// row.From, through the rule that raises it.
func raiseChallenger(t *testing.T, row Row[ChallengerState]) *route {
	cfg, clock := rulesCfg(), newLaneClock(64, 1)
	rt := withChallenger(row.From)
	now := rtStart + time.Second
	switch row.Event {
	case EvContact:
		if _, ch := rt.hear(rtChal, now, EvContact, AuthWire, false, cfg, clock); !ch {
			t.Fatalf("%v: a new lane beside a working direct lane did not challenge", row)
		}
		rt.challenge(rtChal, now, false, false, cfg)
	case EvAnswer, EvSigned:
		rt.chal.waiting = rtStart
		rt.answered(rtChal, rtLane, false, row.Event, row.Auth, now, cfg, clock)
	case EvProbeLost:
		rt.chal.waiting = rtStart
		if row.From == ChallengerAnswered {
			rt.chal.fails = uint8(cfg.ProvenFailures - 1)
		}
		rt.advance(rtStart+cfg.ProbeTimeout, cfg, clock)
		if rt.bad != rtChal {
			t.Fatalf("%v: the lost challenger is not held out", row)
		}
	case EvSilence:
		// The direct lane stays fresh; the challenger goes quiet.
		rt.direct.heard = rtStart + cfg.DirectLaneExpiry
		rt.advance(rtStart+cfg.DirectLaneExpiry, cfg, clock)
	case EvMove:
		if row.From == ChallengerClaimed {
			// Only an expired direct lane lets a claimed one in.
			rt.chal.heard = rtStart + cfg.DirectLaneExpiry - time.Second
			rt.advance(rtStart+cfg.DirectLaneExpiry, cfg, clock)
		} else {
			rt.chal.heard = rtStart + cfg.MoveSilence
			rt.advance(rtStart+cfg.MoveSilence, cfg, clock)
		}
		if rt.direct.lane != rtChal {
			t.Fatalf("%v: the challenger did not move in: %+v", row, rt.direct)
		}
	default:
		t.Fatalf("%v: no rule raises %v", row, row.Event)
	}
	return rt
}

func TestChallengerTransitionRows(t *testing.T) {
	for _, row := range ChallengerTransitions {
		t.Run(fmt.Sprintf("%v-%v", row.From, row.Event), func(t *testing.T) {
			if rt := raiseChallenger(t, row); rt.chalState != row.To {
				t.Fatalf("%v --%v--> %v, want %v (%s)", row.From, row.Event, rt.chalState, row.To, row.Rule)
			}
		})
	}
}

// TestWrongAuthorityTakesNoRow: an event raised on any word but its row's
// Auth moves nothing, in either table.
func TestWrongAuthorityTakesNoRow(t *testing.T) {
	for _, row := range Transitions {
		for a := AuthConfig; a <= AuthTick; a++ {
			rt := directIn(row.From)
			ok := rt.step(row.Event, a)
			if a == row.Auth {
				if !ok || rt.state != row.To {
					t.Errorf("%v --%v by %v--> %v (%v), want %v", row.From, row.Event, a, rt.state, ok, row.To)
				}
				continue
			}
			if ok || rt.state != row.From {
				t.Errorf("%v --%v by %v (row says %v)--> %v: taken", row.From, row.Event, a, row.Auth, rt.state)
			}
		}
	}
	for _, row := range ChallengerTransitions {
		for a := AuthConfig; a <= AuthTick; a++ {
			rt := withChallenger(row.From)
			ok := rt.stepChallenger(row.Event, a)
			if (a == row.Auth) != ok {
				t.Errorf("%v --%v by %v (row says %v): taken %v", row.From, row.Event, a, row.Auth, ok)
			}
		}
	}
	for _, row := range CandidateTransitions {
		for a := AuthConfig; a <= AuthTick; a++ {
			p := path{lane: rtChal, cand: row.From}
			ok := p.stepCand(row.Event, a)
			if (a == row.Auth) != ok {
				t.Errorf("candidate %v --%v by %v (row says %v): taken %v", row.From, row.Event, a, row.Auth, ok)
			}
		}
	}
}

// TestEventsRaisedWithTheirRowsAuthority: every rule that raises an event
// raises it with the authority its row names, so no row the tables list
// is refused in use. Each case runs the rule that raises the event and
// fails if the step it asked for was refused.
func TestEventsRaisedWithTheirRowsAuthority(t *testing.T) {
	for _, row := range Transitions {
		rt := raiseDirect(t, row)
		if rt.state != row.To {
			t.Errorf("direct %v on %v: raised with the wrong authority (landed %v)", row.From, row.Event, rt.state)
		}
	}
	// The raisers of the table (heardLocked, answeredLocked) pick the
	// authority from what they saw: check each pairing they make.
	for _, c := range []struct {
		e Event
		a Authority
	}{{EvContact, AuthWire}, {EvAnswer, AuthChain}, {EvSigned, AuthSignature}} {
		if _, ok := next(StateUnknown, c.e, c.a); !ok {
			t.Errorf("%v by %v: no row", c.e, c.a)
		}
	}
}

// TestStateWrittenOnlyByStep: the direct lane's and the challenger's
// states are assigned only inside the step functions (state.go's
// contract), in every non-test file of the package.
func TestStateWrittenOnlyByStep(t *testing.T) {
	steppers := map[string]bool{"step": true, "stepNew": true, "stepChallenger": true, "clearChallenger": true, "stepCand": true}
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources: %v", err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || steppers[fn.Name.Name] {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok {
					return true
				}
				for _, lhs := range as.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); ok && (sel.Sel.Name == "state" || sel.Sel.Name == "chalState" || sel.Sel.Name == "cand") {
						t.Errorf("%s: %s assigns .%s outside the step functions", fset.Position(as.Pos()), fn.Name.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// The candidate roles: which path of a route a CandidateTransitions row
// is raised on, through the rule that raises it there.
const (
	roleHint = iota
	roleBase
	roleFwd
)

var roleNames = [...]string{"hint", "base", "forwarder"}

// candidateIn returns a route whose role path holds rtChal in state s
// (CandidateNone: no lane), beside a fresh proven direct lane; for the
// base, with a proven hint tighter than it.
func candidateIn(role int, s CandidateState) (*route, *path) {
	rt := directIn(StateProven)
	p := []*path{&rt.hint, &rt.base, &rt.fwd}[role]
	if role == roleBase {
		rt.hint = path{lane: key("203.0.113.3:3"), cand: CandidateProven}
	}
	if s != CandidateNone {
		*p = path{lane: rtChal, cand: s}
	}
	return rt, p
}

// raiseCandidate raises row.Event on role's path, in row.From, through
// the rule that raises it; ok is false where the role has no such rule
// (a base is never offered: it is a hint moved aside).
func raiseCandidate(t *testing.T, role int, row Row[CandidateState]) (p *path, ok bool) {
	cfg, clock := rulesCfg(), newLaneClock(64, 1)
	rt, p := candidateIn(role, row.From)
	now := rtStart + time.Second
	switch row.Event {
	case EvOffer:
		switch role {
		case roleHint:
			// A page from a sponsor's lane (the table vouches for it:
			// hint) names rtChal as the next-hop.
			rt.answered(key("198.51.100.1:1"), rtChal, true, EvAnswer, AuthChain, now, cfg, clock)
		case roleFwd:
			rt.tryForwarder(rtChal, now, cfg)
		default:
			return p, false
		}
	case EvAnswer:
		p.waiting = rtStart
		if role == roleFwd {
			rt.forwarded(rtChal, now)
		} else {
			rt.answered(rtChal, lane0, false, EvAnswer, AuthChain, now, cfg, clock)
		}
	case EvProbeLost:
		p.waiting = rtStart
		p.fails = uint8(cfg.CandidateFailures - 1)
		if row.From == CandidateProven {
			p.fails = uint8(cfg.ProvenFailures - 1)
		}
		if role == roleFwd {
			rt.expireFwd(rtStart+cfg.ProbeTimeout, cfg)
		} else {
			rt.advance(rtStart+cfg.ProbeTimeout, cfg, clock)
		}
	default:
		t.Fatalf("%v: no rule raises %v", row, row.Event)
	}
	return p, true
}

func TestCandidateTransitionRows(t *testing.T) {
	for role, name := range roleNames {
		for _, row := range CandidateTransitions {
			t.Run(fmt.Sprintf("%s-%v-%v", name, row.From, row.Event), func(t *testing.T) {
				p, ok := raiseCandidate(t, role, row)
				if !ok {
					t.Skipf("no %s is %v", name, row.Event)
				}
				if p.cand != row.To {
					t.Fatalf("%s %v --%v--> %v, want %v (%s)", name, row.From, row.Event, p.cand, row.To, row.Rule)
				}
				if (row.To == CandidateNone) != !p.valid() {
					t.Fatalf("%s in %v with lane %v", name, p.cand, p.lane)
				}
			})
		}
	}
}
