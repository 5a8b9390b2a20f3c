// Package eventq is the tree's one time-ordered queue: a binary min-heap of
// values keyed by a virtual time, used by the simulators' event loops
// (cmd/simnet/internal/sim, cmd/replay, endpoint's test network) and by
// the timers of session.Publisher and cmd/replay's request deadlines.
//
// Values come out in order of (time, tie, push order). The tie is the
// caller's: a simulator that hashes an event's content into it runs the
// events of one instant in an order that does not depend on the order they
// were scheduled in; Push leaves it 0, so equal times come out first in,
// first out. Either way a run is deterministic.
//
// The zero Queue is empty and ready to use. A Queue is not safe for
// concurrent use. Push and Pop allocate nothing once the heap's backing
// array has grown to the queue's high-water mark.
package eventq

import "time"

// Queue is a min-heap of values of type T by time.
type Queue[T any] struct {
	h   []item[T]
	seq uint64
}

type item[T any] struct {
	at  time.Duration
	tie uint64
	seq uint64
	v   T
}

func (a *item[T]) before(b *item[T]) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.tie != b.tie {
		return a.tie < b.tie
	}
	return a.seq < b.seq
}

// Len returns the number of queued values.
func (q *Queue[T]) Len() int { return len(q.h) }

// Push queues v at time at, after every value already queued at the same
// time with tie 0.
func (q *Queue[T]) Push(at time.Duration, v T) { q.PushTie(at, 0, v) }

// PushTie queues v at time at; among values of the same time, lower ties
// come out first, and equal ties in push order.
func (q *Queue[T]) PushTie(at time.Duration, tie uint64, v T) {
	q.seq++
	q.h = append(q.h, item[T]{at: at, tie: tie, seq: q.seq, v: v})
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

// Next returns the time of the earliest value, and ok false if the queue is
// empty.
func (q *Queue[T]) Next() (at time.Duration, ok bool) {
	if len(q.h) == 0 {
		return 0, false
	}
	return q.h[0].at, true
}

// Due reports whether a value is queued at or before now.
func (q *Queue[T]) Due(now time.Duration) bool { return len(q.h) > 0 && q.h[0].at <= now }

// Pop removes and returns the earliest value and its time. It panics if the
// queue is empty.
func (q *Queue[T]) Pop() (time.Duration, T) {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h[last] = item[T]{} // drop references for the collector
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
	return top.at, top.v
}
