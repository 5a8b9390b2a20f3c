package relay

import (
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// PrefetchedTaken returns how many keys computed by Prefetch since o's
// last Reset Handle has taken instead of hashing again (for tests).
func (o *Reader) PrefetchedTaken() int { return o.preNext }

// FreeLane reports whether o remembers lane k as free at now (for tests:
// Reader.free).
func (o *Reader) FreeLane(k netip.AddrPort, now time.Duration) bool {
	key := lane.KeyOf(lane.Canon(k))
	return o.free.has(&key, now)
}

// HeardLane reports whether o remembers the lane clock recording lane k
// at now (for tests: Reader.heard).
func (o *Reader) HeardLane(k netip.AddrPort, now time.Duration) bool {
	key := lane.KeyOf(lane.Canon(k))
	return o.heard.has(&key, now)
}
