package route

import (
	"time"

	"github.com/urbit-relay/relay/lane"
)

// DirectLane returns s's fresh direct lane, if any.
func (r *Table) DirectLane(s lane.Ship, now time.Duration) (lane.Key, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.getLocked(s, false, lane.Key{})
	if rt == nil || !r.directFreshLocked(rt, now) {
		return lane.Key{}, false
	}
	return rt.direct.lane, true
}

// Info is a snapshot of one ship's route, for logs, tests and tools.
type Info struct {
	Direct, Hint, Base       lane.Key
	DirectProven, HintProven bool
	BaseProven               bool
	DirectHeard              time.Duration
	// Challenger is a lane heard as the ship while its direct lane works,
	// not yet trusted (see Table); ChallengerProven once it has answered.
	Challenger       lane.Key
	ChallengerProven bool
	// Forwarder is the ship's lane as a forwarder for ships below it,
	// proven once a page for one of them came back from it.
	Forwarder       lane.Key
	ForwarderProven bool
	// State is the direct lane's state, ChallengerState the challenger's
	// (state.go).
	State           LaneState
	ChallengerState ChallengerState
	// HintState, BaseState and ForwarderState are the hint's, the base's
	// and the forwarder's (CandidateTransitions).
	HintState, BaseState, ForwarderState CandidateState
}

// infoOf returns v's snapshot.
func infoOf(v *route) Info {
	return Info{
		Direct: v.direct.lane, DirectProven: v.directProven(), DirectHeard: v.direct.heard,
		Hint: v.hint.lane, HintProven: v.hint.proven(),
		Base: v.base.lane, BaseProven: v.base.proven(),
		Challenger: v.chal.lane, ChallengerProven: v.chalProven(),
		Forwarder: v.fwd.lane, ForwarderProven: v.fwd.proven(),
		State: v.state, ChallengerState: v.chalState,
		HintState: v.hint.cand, BaseState: v.base.cand, ForwarderState: v.fwd.cand,
	}
}

// Info returns a snapshot of s's route.
func (r *Table) Info(s lane.Ship) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.table.Peek(s)
	if !ok {
		return Info{}, false
	}
	return infoOf(v), true
}

// Each calls f with a snapshot of every ship's route, least recently used
// first, under the table's lock: f must not call back into the table.
func (r *Table) Each(f func(lane.Ship, Info)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.table.Keys() {
		v, _ := r.table.Peek(s)
		f(s, infoOf(v))
	}
}
