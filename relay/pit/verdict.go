package pit

import "fmt"

// Verdict is Add's instruction to the relay. The zero Verdict is never
// returned.
type Verdict uint8

const (
	// VerdictForwardNew: no live entry had this name; one was created with
	// the requester and the request must be forwarded upstream.
	VerdictForwardNew Verdict = iota + 1

	// VerdictForwardRetransmit: the requester was already on the entry, so
	// this is its retransmission (the upstream copy or the response may have
	// been lost). Expiry bumped; forward again.
	VerdictForwardRetransmit

	// VerdictAggregated: a new requester joined a live entry within
	// SuppressWindow of the last upstream forward. Requester recorded (at
	// a full entry, in place of one it displaced: see
	// Config.MaxRequestersPerEntry), expiry bumped; do not forward — the
	// response on its way will be sent to every requester.
	VerdictAggregated

	// VerdictForwardJoined: a new requester joined a live entry more than
	// SuppressWindow after the last upstream forward. Requester recorded
	// (at a full entry, in place of one it displaced), expiry bumped;
	// forward, since the earlier copy may have been lost.
	VerdictForwardJoined

	// VerdictRequesterCapped: a new requester for a live entry that could
	// not be recorded: the entry has MaxRequestersPerEntry requesters and
	// the requester's source, counting it, would hold no fewer than the
	// entry's largest source (Stats counts these as EntryShareCapped too);
	// or its shard has used its share of MaxOverflowRequesters; or its
	// source, needing a new overflow chunk, holds its MaxOverflowPerSource
	// (Stats: OverflowShareCapped); or its source holds a set
	// MaxRequestersPerSource (Stats: EntryShareCapped). Expiry not bumped,
	// the entry is unchanged; drop the request: a response could not be
	// sent back to it. The requester will retransmit and be served by a
	// later round.
	VerdictRequesterCapped

	// VerdictCappedForward: as VerdictRequesterCapped (the requester is
	// not recorded), but the entry's last upstream forward is older than
	// SuppressWindow: forward the request anyway, so that an entry whose
	// forward or answer was lost is not left waiting for its recorded
	// requesters alone to retry. The last-forward time is updated.
	VerdictCappedForward

	// VerdictRefused: a new name whose shard is full of live entries under
	// the RefuseNew policy, or whose source holds its fair share of a shard
	// filled into its reserve (FullReserveDivisor; Stats counts these as
	// RefusedShare too). Nothing recorded; drop the request.
	VerdictRefused

	// VerdictSourceCapped: a new name from a source IP that already has
	// MaxEntriesPerSource live entries (per shard). Nothing recorded; drop
	// the request.
	VerdictSourceCapped
)

// Forward reports whether the caller must send the request upstream.
func (v Verdict) Forward() bool {
	return v == VerdictForwardNew || v == VerdictForwardRetransmit || v == VerdictForwardJoined ||
		v == VerdictCappedForward
}

// String returns the verdict's name, for logs and metric labels.
func (v Verdict) String() string {
	switch v {
	case VerdictForwardNew:
		return "forward-new"
	case VerdictForwardRetransmit:
		return "forward-retransmit"
	case VerdictAggregated:
		return "aggregated"
	case VerdictForwardJoined:
		return "forward-joined"
	case VerdictRequesterCapped:
		return "requester-capped"
	case VerdictCappedForward:
		return "capped-forward"
	case VerdictRefused:
		return "refused"
	case VerdictSourceCapped:
		return "source-capped"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}
