package relay

import (
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// The relay answers STUN itself. It owns the fronted ship's public port, and
// every ship under a galaxy sends its galaxy a binding request every 25 s to
// learn its own public lane (vere's io/ames/stun.c); forwarded to the ship's
// process, the answer would name the relay's side of that hop, not the
// requester's NAT. So a binding request gets, from the relay, the binding
// response vere's galaxy would send: the request's transaction id and the
// lane it came from as XOR-MAPPED-ADDRESS, byte for byte vere's 40 bytes
// (scry.STUNResponse). The fronted ship never sees a STUN request.
//
// A response goes to the request's source, which may be forged: it is
// bounded by the amplification budget like a page (its bytes are spent
// from the source's), and it is at most scry.STUNResponseMaxLen bytes for
// a request of at least scry.STUNRequestMinLen, under twice the request.
// It never asks for a probe: a lane that only STUNs takes 40 bytes a
// request, and probing it would answer a request with two datagrams.

// stun decides a datagram scry.IsSTUN took for a binding request: answer a
// well-formed one (scry.STUNRequest.Parse) to its source, else drop it.
func (r *Relay) stun(b []byte, from netip.AddrPort, now time.Duration, out *Reader) {
	var q scry.STUNRequest
	if q.Parse(b) != nil {
		out.dropOther(b, DropSTUNMalformed)
		return
	}
	out.in(KindSTUN, len(b))
	fromKey := lane.KeyOf(from)
	if !stunAnswerable(from) || r.routes.IsSelf(&fromKey) {
		out.drop(DropSelf)
		return
	}
	// A ship that only STUNs its sponsor keeps its lane so (a keepalive
	// moves nothing: route.Table.KeepAlive).
	lockTaken()
	r.routes.KeepAlive(fromKey, now)
	resp := scry.STUNResponse{TxID: q.TxID, Mapped: from}
	if ok, _ := r.amp.Spend(fromKey, resp.Len(), now); !ok {
		out.c.add(EventAmpThrottled, 1)
		out.drop(DropSTUNThrottled)
		return
	}
	// An empty scratch buffer, MaxPacket+GrowRoom bytes of room.
	rb := resp.Append(out.scratchCopy(nil))
	out.add(rb, from)
	out.c.countOut(KindSTUN, 1, len(rb))
	out.c.add(EventSTUNAnswered, 1)
	out.act(ActionSTUNAnswered)
}

// stunAnswerable reports whether a response can go to lane from: not port
// 0, nor an unspecified, multicast or IPv4 broadcast address (which no
// honest request comes from, and a forged one would fan out).
func stunAnswerable(from netip.AddrPort) bool {
	a := from.Addr()
	return from.IsValid() && from.Port() != 0 && !a.IsUnspecified() && !a.IsMulticast() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
