package session

import "time"

// Heard is what an authenticated message's session id means to a Link.
type Heard uint8

const (
	// HeardStale: the id is one the link has moved away from; the message
	// is late and must be ignored.
	HeardStale Heard = iota + 1
	// HeardSame: the link's current session.
	HeardSame
	// HeardFirst: the link had no session and has adopted this one.
	HeardFirst
	// HeardNew: the publisher has a new session (it restarted, or our
	// old one expired): the link has adopted it, and the subscriber must
	// re-send every pending request and heartbeat on the new id.
	HeardNew
)

// String returns the verdict's name.
func (h Heard) String() string {
	switch h {
	case HeardStale:
		return "stale"
	case HeardSame:
		return "same"
	case HeardFirst:
		return "first"
	case HeardNew:
		return "new"
	}
	return "unknown"
}

// Link is a subscriber's view of one publisher: the session it believes
// in, the ids it has left behind, when it last heard the publisher, and its
// heartbeat stream. At most one heartbeat is in flight; the next is sent
// when its answer arrives (Answered, then Beat). Link does no I/O and reads
// no clock. The zero Link has no session and is not beating.
type Link struct {
	session  ID
	dead     [MaxDeadSessions]ID
	nextDead int

	heard   bool
	heardAt time.Duration

	counter uint64
	beating bool
	due     time.Duration
}

// NewLink returns a link whose first heartbeat will carry counter start+1.
// start must be above every counter an earlier link of this subscriber to
// the same publisher sent, its previous runs' included (the endpoint uses
// the wall clock in nanoseconds): a publisher that still holds the
// session of a previous run ignores a counter below the newest it has
// heard, so a lower start would leave every heartbeat ignored until the
// link dies (package doc, "Heartbeat counters").
func NewLink(start uint64) Link { return Link{counter: start} }

// Session returns the link's session id (0 before the first is heard).
func (l *Link) Session() ID { return l.session }

// Hear records, at now, an authenticated message from the publisher
// carrying session id, and says what it means.
func (l *Link) Hear(id ID, now time.Duration) Heard {
	if id == 0 {
		return HeardStale
	}
	for _, d := range l.dead {
		if d == id {
			return HeardStale
		}
	}
	l.heard, l.heardAt = true, now
	switch l.session {
	case id:
		return HeardSame
	case 0:
		l.session = id
		return HeardFirst
	}
	l.dead[l.nextDead] = l.session
	l.nextDead = (l.nextDead + 1) % MaxDeadSessions
	l.session = id
	return HeardNew
}

// Alive reports whether the publisher was heard within LinkTimeout of now.
func (l *Link) Alive(now time.Duration) bool {
	return l.heard && now-l.heardAt < LinkTimeout
}

// DeadAt returns when the link stops being Alive, if nothing is heard
// before; ok is false if it was never heard.
func (l *Link) DeadAt() (at time.Duration, ok bool) {
	return l.heardAt + LinkTimeout, l.heard
}

// Beat starts the next heartbeat at now and returns its counter. Any
// heartbeat still in flight is abandoned.
func (l *Link) Beat(now time.Duration) uint64 {
	l.counter++
	l.beating = true
	l.due = now + HeartbeatResend
	return l.counter
}

// Beating reports whether a heartbeat is in flight, and its counter.
func (l *Link) Beating() (counter uint64, ok bool) { return l.counter, l.beating }

// Resend reports whether the heartbeat in flight is due to be sent again
// at now, and if so schedules the repeat after it.
func (l *Link) Resend(now time.Duration) bool {
	if !l.beating || now < l.due {
		return false
	}
	l.due = now + HeartbeatResend
	return true
}

// Answered records the answer to heartbeat counter. It reports false, and
// changes nothing, if that is not the heartbeat in flight.
func (l *Link) Answered(counter uint64) bool {
	if !l.beating || counter != l.counter {
		return false
	}
	l.beating = false
	return true
}

// Stop abandons the heartbeat in flight, if any.
func (l *Link) Stop() { l.beating = false }

// Deadline returns when Resend next has work, or ok false if no heartbeat
// is in flight.
func (l *Link) Deadline() (at time.Duration, ok bool) { return l.due, l.beating }
