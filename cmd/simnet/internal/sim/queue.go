package sim

import "net/netip"

// evKind says what an event does.
type evKind uint8

const (
	evDeliver evKind = iota // a datagram reaches node
	evWake                  // node's endpoint core has timer work (Core.NextDeadline)
	evCall                  // fn runs
)

// event is one entry of the network's queue (an eventq.Queue, keyed by the
// event's time and a tie). Events run in order of (time, tie, push order):
// the tie is a hash of the event's content, so that events at the same
// instant run in an order that does not depend on the order they were
// scheduled in; the push order breaks what is left (identical events).
type event struct {
	kind evKind
	net  bool    // evDeliver: crossed the network (NAT, counting); false for loopback
	cls  Traffic // evDeliver over the network: the datagram's Traffic class
	node int32
	from netip.AddrPort
	to   netip.AddrPort // evDeliver: the lane it was addressed to
	buf  []byte
	fn   func()
}
