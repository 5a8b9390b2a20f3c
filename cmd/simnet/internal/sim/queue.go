package sim

import (
	"net/netip"
	"time"
)

// evKind says what an event does.
type evKind uint8

const (
	evDeliver evKind = iota // a datagram reaches node
	evWake                  // node's endpoint core has timer work (Core.NextDeadline)
	evCall                  // fn runs
)

// event is one entry of the queue. Events run in order of (at, tie, seq):
// tie is a hash of the event's content, so that events at the same instant
// run in an order that does not depend on the order they were scheduled in;
// seq, the scheduling order, breaks what is left (identical events).
type event struct {
	at   time.Duration
	tie  uint64
	seq  uint64
	kind evKind
	net  bool    // evDeliver: crossed the network (NAT, counting); false for loopback
	cls  Traffic // evDeliver over the network: the datagram's Traffic class
	node int32
	from netip.AddrPort
	to   netip.AddrPort // evDeliver: the lane it was addressed to
	buf  []byte
	fn   func()
}

func (e *event) before(f *event) bool {
	if e.at != f.at {
		return e.at < f.at
	}
	if e.tie != f.tie {
		return e.tie < f.tie
	}
	return e.seq < f.seq
}

// queue is a binary min-heap of events.
type queue struct {
	h   []event
	seq uint64
}

func (q *queue) len() int { return len(q.h) }

func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.h[i].before(&q.h[p]) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *queue) peek() *event { return &q.h[0] }

func (q *queue) pop() event {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h[last] = event{} // drop references for the collector
	q.h = q.h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		m := l
		if r := l + 1; r < last && q.h[r].before(&q.h[l]) {
			m = r
		}
		if !q.h[m].before(&q.h[i]) {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}
