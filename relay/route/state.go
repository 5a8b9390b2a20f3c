package route

import "fmt"

// The rules for a ship's lanes, as state machines you can read: the
// direct lane of a route is in one LaneState, its challenger (a second lane
// heard as the same ship) in one ChallengerState, its hint and base (lanes
// learned from next-hops) and its standing as a forwarder for the ships
// below it each in one CandidateState, and every change of any of them is
// one row of Transitions, ChallengerTransitions or CandidateTransitions,
// naming the Event that causes it and the Authority that event carries.
// While a lane is kept, its state changes only through step and stepNew
// (direct lane), stepChallenger (challenger) and stepCand (hint, base,
// forwarder), which refuse any change the tables do not list. Replacing the lane is not a
// row: a new direct lane (replaceDirect, moveIn) is set to StateUnknown
// and takes its first row at once, and an emptied challenger slot
// (clearChallenger: its lane became the direct lane, or a newer claim
// took the slot) is set to ChallengerNone. So the tables are the rules
// for a lane's standing; which lane holds a slot is decided by the
// route's rules in route.go (hear, challenge, moveIn, settle, answered,
// tryForwarder). Auth is checked where the event is raised: the step
// functions take the authority of whoever raised the event, and a row
// whose Auth differs is not taken (next).
//
// Who may say where a ship is (docs/reliability.md, "Who may say where a
// ship is"), strongest first:
//
//   - configuration and DNS (SetStatic, SetRelays): with ConfiguredWins the
//     ship's only lane; nothing below applies to it;
//   - the fronted ship (Pin, decided by relay/vouch.go): the pinned lane is
//     the ship's only lane until Unpin, and, as for a configured lane, the
//     ship has no route in this machine meanwhile: nothing heard on the
//     wire is kept for it;
//   - a signed page (PageObs.Signed, EvSigned): the publisher's key
//     vouches for the page's bytes, not for the lane it came from; with
//     the key at hand (--pki) only a verified hop-0 page may prove a lane
//     other than the direct one (PageObs.Unverified), and then only as an
//     answer does;
//   - a page answering a request the relay sent to a lane (the way the
//     request went): the lane receives as the ship, Proven; a next-hop on
//     such a page is a hint one step tighter (route.hint, route.base);
//   - merely heard (a hop-0 poke or legacy packet naming the ship): Heard
//     when the ship has no working lane, else only a challenger, which must
//     answer to keep its place and replaces the direct lane only once the
//     direct lane has gone silent.
//
// Time is the last authority: the tick (advance, run with the time passed
// in) expires a lane nothing has been heard from (STUN keepalives
// included: KeepAlive) and judges outstanding probes.

// LaneState is the standing of a ship's direct lane.
type LaneState uint8

const (
	// StateUnknown: no lane.
	StateUnknown LaneState = iota
	// StateHeard: the wire named the ship at this lane (a hop-0 poke or
	// legacy packet it sent), and the relay had no working lane for it.
	// Known-good for choosing routes; kept while the ship keeps contacting.
	StateHeard
	// StateProven: a page answering a request the relay sent to this lane
	// came back from it (or a signed page did).
	StateProven
	// StateDoubted: a proven lane not learned from the ship's contact left
	// ProvenFailures requests unanswered while silent: tried beside a
	// looser route, dropped after CandidateFailures more.
	StateDoubted
	// StateExpired: nothing heard from the lane for its expiry. The lane
	// is remembered (a sponsor gone quiet is still one's sponsor) but no
	// longer chosen, and any lane heard for the ship replaces it.
	StateExpired
	nLaneStates
)

var laneStateNames = [...]string{"unknown", "heard", "proven", "doubted", "expired"}

func (s LaneState) String() string { return nameOf(laneStateNames[:], uint8(s), "LaneState") }

// nameOf returns names[v], or kind(v) past its end.
func nameOf(names []string, v uint8, kind string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

// knownGood reports whether a lane in state s is a known-good route.
func (s LaneState) knownGood() bool { return s == StateHeard || s == StateProven }

// ChallengerState is the standing of a route's challenger: a lane heard as
// the ship while its direct lane works.
type ChallengerState uint8

const (
	// ChallengerNone: no challenger.
	ChallengerNone ChallengerState = iota
	// ChallengerClaimed: heard, not yet answered. Sent one probe at a
	// time beside the direct lane; an unanswered probe loses the place and
	// holds the lane out for BadLaneHold (it must answer to hold the slot).
	ChallengerClaimed
	// ChallengerAnswered: answered a probe. Sent every request beside the
	// direct lane (a contest: both receive, the requester gets both pages),
	// and becomes the direct lane once the direct lane is silent for
	// MoveSilence or expired.
	ChallengerAnswered
	nChallengerStates
)

var challengerStateNames = [...]string{"none", "claimed", "answered"}

func (s ChallengerState) String() string {
	return nameOf(challengerStateNames[:], uint8(s), "ChallengerState")
}

// Event is what moves a lane from one state to another.
type Event uint8

const (
	// EvContact: a hop-0 poke or legacy packet from the lane naming the
	// ship as its sender (Contacted, a committed plan's sender).
	EvContact Event = iota
	// EvAnswer: a page from the ship answering a request the relay sent
	// to the lane (Answered, PageArrived, a LateAnswer taken).
	EvAnswer
	// EvSigned: a hop-0 page signed by the ship, from a lane the request
	// went to (PageObs.Signed).
	EvSigned
	// EvProbeLost: the tick found a request to the lane unanswered for
	// ProbeTimeout with nothing heard from the lane since.
	EvProbeLost
	// EvSilence: the tick found nothing heard from the lane for its
	// expiry (DirectLaneExpiry).
	EvSilence
	// EvMove: the tick found an answered challenger and a direct lane
	// silent for MoveSilence, or expired: the ship moved.
	EvMove
	// EvOffer: a candidate lane is offered: a next-hop on a page that
	// came the way its request went (the hint), or a sponsor's lane up
	// the receiver's chain, tried as a forwarder.
	EvOffer
	nEvents
)

var eventNames = [...]string{"contact", "answer", "signed", "probe-lost", "silence", "move", "offer"}

func (e Event) String() string { return nameOf(eventNames[:], uint8(e), "Event") }

// Authority is who vouches for a transition.
type Authority uint8

const (
	AuthConfig    Authority = iota // the operator's configuration or DNS
	AuthShip                       // the fronted ship's own process
	AuthSignature                  // the publisher's key, on a signed page
	AuthChain                      // a page that came the way its request went
	AuthWire                       // merely heard
	AuthTick                       // time: silence, an unanswered probe
)

var authorityNames = [...]string{"configuration", "fronted ship", "signature", "chain", "wire", "tick"}

func (a Authority) String() string { return nameOf(authorityNames[:], uint8(a), "Authority") }

// Row is one rule of a state machine: in state From, Event moves the lane
// to To, on Auth's word. S is LaneState (Transitions) or ChallengerState
// (ChallengerTransitions).
type Row[S ~uint8] struct {
	From  S
	Event Event
	To    S
	Auth  Authority
	Rule  string
}

// Transitions is every change of a direct lane's state; nothing else
// changes it. A lane replaced by another (a new lane heard when the old
// one expired, a challenger moving in) starts from StateUnknown.
var Transitions = [...]Row[LaneState]{
	{StateUnknown, EvContact, StateHeard, AuthWire, "a ship with no lane is where it says it is"},
	{StateUnknown, EvAnswer, StateProven, AuthChain, "a page from the ship from a lane a request went to"},
	{StateUnknown, EvSigned, StateProven, AuthSignature, "a signed page from a lane a request went to"},
	{StateUnknown, EvMove, StateProven, AuthChain, "an answered challenger moves in"},
	{StateHeard, EvContact, StateHeard, AuthWire, "the ship keeps its lane alive"},
	{StateHeard, EvAnswer, StateProven, AuthChain, "the lane answered a request sent to it"},
	{StateHeard, EvSigned, StateProven, AuthSignature, "the lane answered with a signed page"},
	{StateHeard, EvSilence, StateExpired, AuthTick, "nothing heard for DirectLaneExpiry"},
	{StateProven, EvContact, StateProven, AuthWire, "the ship keeps its lane alive"},
	{StateProven, EvAnswer, StateProven, AuthChain, "the lane keeps answering"},
	{StateProven, EvSigned, StateProven, AuthSignature, "the lane keeps answering"},
	{StateProven, EvProbeLost, StateDoubted, AuthTick, "ProvenFailures unanswered while silent (not a lane the ship contacts us from)"},
	{StateProven, EvSilence, StateExpired, AuthTick, "nothing heard for DirectLaneExpiry"},
	{StateDoubted, EvContact, StateHeard, AuthWire, "the ship contacts us from it again"},
	{StateDoubted, EvAnswer, StateProven, AuthChain, "it answered again"},
	{StateDoubted, EvSigned, StateProven, AuthSignature, "it answered again, signed"},
	{StateDoubted, EvProbeLost, StateUnknown, AuthTick, "CandidateFailures more unanswered: dead, held out for BadLaneHold"},
	{StateDoubted, EvSilence, StateExpired, AuthTick, "nothing heard for DirectLaneExpiry"},
	{StateExpired, EvContact, StateHeard, AuthWire, "the ship is heard there again"},
	{StateExpired, EvAnswer, StateProven, AuthChain, "it answered again"},
	{StateExpired, EvSigned, StateProven, AuthSignature, "it answered again, signed"},
}

// ChallengerTransitions is every change of a challenger's state. EvMove
// empties the slot (the challenger became the direct lane: Transitions'
// EvMove row, from StateUnknown).
var ChallengerTransitions = [...]Row[ChallengerState]{
	{ChallengerNone, EvContact, ChallengerClaimed, AuthWire, "a new lane heard for a ship whose lane works (not held out; slot free)"},
	{ChallengerClaimed, EvContact, ChallengerClaimed, AuthWire, "heard again: not an answer"},
	{ChallengerClaimed, EvAnswer, ChallengerAnswered, AuthChain, "it answered a probe sent to it"},
	{ChallengerClaimed, EvSigned, ChallengerAnswered, AuthSignature, "it answered a probe, signed"},
	{ChallengerClaimed, EvProbeLost, ChallengerNone, AuthTick, "one probe unanswered: the slot is freed, the lane held out for BadLaneHold"},
	{ChallengerClaimed, EvSilence, ChallengerNone, AuthTick, "not heard for DirectLaneExpiry"},
	{ChallengerClaimed, EvMove, ChallengerNone, AuthTick, "the direct lane expired: it moves in"},
	{ChallengerAnswered, EvContact, ChallengerAnswered, AuthWire, "heard again"},
	{ChallengerAnswered, EvAnswer, ChallengerAnswered, AuthChain, "answers again"},
	{ChallengerAnswered, EvSigned, ChallengerAnswered, AuthSignature, "answers again, signed"},
	{ChallengerAnswered, EvProbeLost, ChallengerNone, AuthTick, "ProvenFailures unanswered: held out for BadLaneHold"},
	{ChallengerAnswered, EvSilence, ChallengerNone, AuthTick, "not heard for DirectLaneExpiry"},
	{ChallengerAnswered, EvMove, ChallengerNone, AuthTick, "the direct lane went silent for MoveSilence, or, only heard, left ProvenFailures requests unanswered that it answered: it moves in"},
}

// CandidateState is the standing of a lane tried toward a ship that is
// not the ship's own: the hint (a next-hop), the base (the hint it
// replaced once it proved itself), and a sponsor's lane as a forwarder
// for the ships below it (route.fwd).
type CandidateState uint8

const (
	// CandidateNone: no lane.
	CandidateNone CandidateState = iota
	// CandidateTried: offered, not yet answered. Sent one probe at a time
	// beside a known-good lane (a forwarder: beside the next looser way).
	CandidateTried
	// CandidateProven: a page came back from it for a request sent to it
	// (a forwarder: a relayed page for a ship below it): known-good.
	CandidateProven
	nCandidateStates
)

var candidateStateNames = [...]string{"none", "tried", "proven"}

func (s CandidateState) String() string {
	return nameOf(candidateStateNames[:], uint8(s), "CandidateState")
}

// CandidateTransitions is every change of a hint's, a base's or a
// forwarder's state. Which lane is the hint, the base or the forwarder is
// decided in route.go (answered, expireProbes, tryForwarder): a base is a
// proven hint moved aside, with its state, when a tighter hint arrives.
// A candidate moved to CandidateNone is forgotten, and held out: a dead
// lane for BadLaneHold, a dead hint's ship takes no hint for
// FailedHintHold, a dead forwarder is not tried for BadLaneHold.
var CandidateTransitions = [...]Row[CandidateState]{
	{CandidateNone, EvOffer, CandidateTried, AuthChain, "a next-hop on a page that came the way its request went, or a sponsor's lane up the receiver's chain"},
	{CandidateTried, EvAnswer, CandidateProven, AuthChain, "a page came back from it for a request sent to it"},
	{CandidateProven, EvAnswer, CandidateProven, AuthChain, "it keeps answering"},
	{CandidateProven, EvProbeLost, CandidateTried, AuthTick, "ProvenFailures unanswered while silent: demoted"},
	{CandidateTried, EvProbeLost, CandidateNone, AuthTick, "CandidateFailures unanswered while silent: dead, held out"},
}

// laneSteps, chalSteps and candSteps index the tables: each state's row
// for each event, with to+1 (0: no row) and the authority the row
// requires.
var (
	laneSteps [nLaneStates][nEvents]stepTo
	chalSteps [nChallengerStates][nEvents]stepTo
	candSteps [nCandidateStates][nEvents]stepTo
)

// stepTo is one indexed row: the state it goes to, plus one (0: no row),
// and the authority that must raise its event.
type stepTo struct {
	to   uint8
	auth Authority
}

func init() {
	indexRows(Transitions[:], laneSteps[:])
	indexRows(ChallengerTransitions[:], chalSteps[:])
	indexRows(CandidateTransitions[:], candSteps[:])
}

// indexRows fills steps from rows, refusing two rows for one state and
// event.
func indexRows[S interface {
	~uint8
	fmt.Stringer
}](rows []Row[S], steps [][nEvents]stepTo) {
	for _, t := range rows {
		if steps[t.From][t.Event].to != 0 {
			panic(fmt.Sprintf("route: two transitions from %v on %v", t.From, t.Event))
		}
		steps[t.From][t.Event] = stepTo{to: uint8(t.To) + 1, auth: t.Auth}
	}
}

// next returns the state a lane in state s goes to on e raised by a, and
// whether Transitions has that row with that authority: an event raised
// on a weaker (or merely other) word than its row names moves nothing.
func next(s LaneState, e Event, a Authority) (LaneState, bool) {
	st := laneSteps[s][e]
	return LaneState(st.to - 1), st.to != 0 && st.auth == a
}

// nextCandidate is next for a hint, a base or a forwarder.
func nextCandidate(s CandidateState, e Event, a Authority) (CandidateState, bool) {
	st := candSteps[s][e]
	return CandidateState(st.to - 1), st.to != 0 && st.auth == a
}

// nextChallenger is next for the challenger slot.
func nextChallenger(s ChallengerState, e Event, a Authority) (ChallengerState, bool) {
	st := chalSteps[s][e]
	return ChallengerState(st.to - 1), st.to != 0 && st.auth == a
}
