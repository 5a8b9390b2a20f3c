package route

import "github.com/urbit-relay/relay/lane"

// Rubric is how a plan chooses among its candidates and where it looks
// for them. Production code always runs Design, the rubric as specified;
// the simulator (cmd/simnet) compares others, as types that embed Design
// and change one method (Config.Rubric). A Rubric is called under the
// table's lock on every plan and every answered page: it must not call
// back into the table, and it keeps no state.
type Rubric interface {
	// Choose returns the n lanes a request is sent on, tightest first, at
	// most MaxTargets, from cands (at least one, tightest first; the walk
	// stops at the first proven one) and chal, a challenger to probe
	// beside the known-good lane (its Lane invalid when there is none).
	// It must not keep cands.
	Choose(cands []Candidate, chal Candidate) (to [MaxTargets]Candidate, n int)
	// Sponsors appends to dst the ships a plan for s walks for sponsor
	// lanes, s's own sponsorship chain from sp, s first; the walk stops at
	// self (the fronted ship: s is below us), so self must be kept if it
	// is in the chain.
	Sponsors(dst []lane.Ship, sp *lane.Sponsors, s, self lane.Ship) []lane.Ship
	// TakesHints reports whether a page's next-hop may become a hint.
	TakesHints() bool
}

// Design is the rubric as specified (Table): the tightest known-good
// candidate and the one just tighter (or the challenger), the whole
// sponsorship chain, and next-hop hints taken.
type Design struct{}

// Choose sends on the tightest known-good candidate (the loosest if none
// is), and beside it on the challenger when there is one, else on the
// candidate just tighter unless that is unproven with a probe out.
func (Design) Choose(cands []Candidate, chal Candidate) (to [MaxTargets]Candidate, n int) {
	good, beside := designPick(cands, &chal)
	if beside == len(cands) {
		to[n] = chal
		n++
	} else if beside >= 0 {
		to[n] = cands[beside]
		n++
	}
	to[n] = cands[good]
	return to, n + 1
}

// designPick is Design.Choose as indexes, for a table running Design to
// take its choice without copying candidates: good is the index in cands
// of the lane sent on, and beside what is sent beside it, tighter:
// len(cands) for *chal, an index in cands, or -1 for nothing.
func designPick(cands []Candidate, chal *Candidate) (good, beside int) {
	good = len(cands) - 1
	for i := range cands {
		if cands[i].Proven {
			good = i
			break
		}
	}
	if isValid(&chal.Lane) {
		// The challenger is probed beside the lane that works.
		return good, len(cands)
	}
	if good > 0 && !cands[good-1].Busy {
		// The lane just tighter is tried, one probe at a time while it
		// is unproven.
		return good, good - 1
	}
	return good, -1
}

// Sponsors walks s's whole sponsorship chain.
func (Design) Sponsors(dst []lane.Ship, sp *lane.Sponsors, s, _ lane.Ship) []lane.Ship {
	return sp.AppendChain(dst, s)
}

// TakesHints is true: routes tighten by next-hops.
func (Design) TakesHints() bool { return true }
