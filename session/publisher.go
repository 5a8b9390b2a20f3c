package session

import (
	"net/netip"
	"slices"
	"time"

	"github.com/urbit-relay/relay/internal/eventq"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// Entry is a subscribed path that has grown, as a heartbeat response
// carries it: with its value (scry.NotifyValue) or, when the value does not
// fit, without (scry.NotifyGrown).
type Entry struct {
	Status scry.NotifyStatus
	Path   string
	Value  []byte // the published value, shared, never modified; nil unless NotifyValue
}

// Reply is a heartbeat response the publisher must send now: a page at
// Name, signed for Subscriber, carrying Session, Counter and Entries, sent
// to every lane in To. Its slices belong to the Publisher and stay valid
// until the next call on it.
type Reply struct {
	Subscriber lane.Ship
	Session    ID
	Counter    uint64
	Name       []byte
	To         []netip.AddrPort
	Entries    []Entry
}

// PublisherStats are a Publisher's event counts.
type PublisherStats struct {
	Opened       uint64 // sessions created
	Expired      uint64 // sessions freed after SessionTimeout without a word
	Refused      uint64 // subscriptions refused (a cap was reached)
	Held         uint64 // heartbeats held for later
	HeldEmpty    uint64 // held heartbeats answered empty after HoldTime
	Notified     uint64 // entries sent in heartbeat responses (first sends)
	Repeated     uint64 // heartbeat responses sent again for a repeated heartbeat
	WrongSession uint64 // heartbeats on a session other than the current one
	Stale        uint64 // heartbeats older than the last one answered
}

// Publisher is a publisher's notification state: one session per
// subscriber, with the paths it waits for, the grown ones not yet
// delivered, and its held heartbeat. It does no I/O and reads no clock;
// the caller checks whether a path has a value, and encodes, signs and
// sends the Replies. A Publisher is not safe for concurrent use.
//
// A session's heartbeats form a stop-and-wait stream: the answer to
// heartbeat n is fixed once made (a repeat of n gets the same entries),
// and heartbeat n+1 tells the publisher that answer n arrived, so its
// entries are dropped. A grown path therefore stays with the publisher
// until the subscriber has acknowledged it by asking for more, or the
// session dies (and the subscriber, seeing the new session, asks again).
type Publisher struct {
	ids      IDSource
	sessions map[lane.Ship]*pubSession
	waiting  map[string]map[*pubSession]struct{} // path → sessions waiting for it
	waits    int                                 // (session, path) pairs in waiting
	timers   eventq.Queue[timer]
	stats    PublisherStats
	order    []*pubSession // scratch for Grow
	replyTo  [1]netip.AddrPort
}

type pubSession struct {
	sub       lane.Ship
	id        ID
	lastHeard time.Duration

	paths map[string]struct{} // waiting for these
	ready []Entry             // grown, not yet sent
	sent  []Entry             // in the last answer

	// last is the newest heartbeat counter heard (when seen): answered
	// with sent, or held.
	last uint64
	seen bool

	hold struct {
		active  bool
		counter uint64
		name    []byte
		room    int
		to      [MaxHeldLanes]netip.AddrPort
		n       int
		due     time.Duration
		queued  bool // a hold timer is in the heap
	}
}

// NewPublisher returns an empty publisher drawing session ids from ids.
func NewPublisher(ids IDSource) *Publisher {
	return &Publisher{
		ids:      ids,
		sessions: map[lane.Ship]*pubSession{},
		waiting:  map[string]map[*pubSession]struct{}{},
	}
}

// Sessions returns the number of live sessions.
func (p *Publisher) Sessions() int { return len(p.sessions) }

// Waiting returns the number of (subscriber, path) subscriptions waiting
// for their path to grow.
func (p *Publisher) Waiting() int { return p.waits }

// Stats returns the publisher's counts.
func (p *Publisher) Stats() PublisherStats { return p.stats }

// Session returns sub's current session id, if it has one.
func (p *Publisher) Session(sub lane.Ship) (ID, bool) {
	s, ok := p.sessions[sub]
	if !ok {
		return 0, false
	}
	return s.id, true
}

// open returns sub's session, creating it, and marks it heard at now; nil
// if a new one is needed and MaxSessions are live.
func (p *Publisher) open(sub lane.Ship, now time.Duration) *pubSession {
	s, ok := p.sessions[sub]
	if !ok {
		if len(p.sessions) >= MaxSessions {
			return nil
		}
		s = &pubSession{sub: sub, id: p.ids.Next(), paths: map[string]struct{}{}}
		p.sessions[sub] = s
		p.stats.Opened++
		p.timers.Push(now+SessionTimeout, timer{s: s, kind: timerExpiry})
	}
	s.lastHeard = now
	return s
}

// Open returns sub's session id, creating the session if needed, and
// counts it as heard from at now (a subscription request proves the
// subscriber alive). It reports false if MaxSessions are live.
func (p *Publisher) Open(sub lane.Ship, now time.Duration) (ID, bool) {
	s := p.open(sub, now)
	if s == nil {
		return 0, false
	}
	return s.id, true
}

// Subscribe records, at now, that sub waits for path, which the caller has
// found has no value yet. It returns the session id to ack with and
// scry.NotifyPending, or scry.NotifyRefused when a cap is reached (with id
// 0 if no session could be opened). A repeated subscription is pending
// again and changes nothing.
func (p *Publisher) Subscribe(sub lane.Ship, path string, now time.Duration) (ID, scry.NotifyStatus) {
	s := p.open(sub, now)
	if s == nil {
		p.stats.Refused++
		return 0, scry.NotifyRefused
	}
	if _, ok := s.paths[path]; ok {
		return s.id, scry.NotifyPending
	}
	if len(s.paths)+len(s.ready)+len(s.sent) >= MaxPathsPerSubscriber || p.waits >= MaxWaits {
		p.stats.Refused++
		return s.id, scry.NotifyRefused
	}
	s.paths[path] = struct{}{}
	w := p.waiting[path]
	if w == nil {
		w = map[*pubSession]struct{}{}
		p.waiting[path] = w
	}
	w[s] = struct{}{}
	p.waits++
	return s.id, scry.NotifyPending
}

// Heartbeat handles, at now, heartbeat counter on session id from sub,
// whose request name is name (copied if held) and which came from lane
// from; room is how many bytes of entries its answer can carry
// (scry.NotifyRoom). It returns the answer to send now, if any:
//
//   - sub has no session, or another one: a new session is opened if
//     needed and the answer, at once and without entries, names it;
//   - a repeat of the heartbeat last answered: that answer again;
//   - an older heartbeat: nothing;
//   - a repeat of the held heartbeat: nothing (from is added to its
//     lanes);
//   - a new heartbeat: the previous answer was delivered; grown paths
//     are answered at once, or else the heartbeat is held until a path
//     grows or HoldTime passes.
func (p *Publisher) Heartbeat(sub lane.Ship, id ID, counter uint64, name []byte, from netip.AddrPort, room int, now time.Duration) (Reply, bool) {
	s, ok := p.sessions[sub]
	if !ok || s.id != id {
		s = p.open(sub, now)
		if s == nil {
			return Reply{}, false
		}
		for s.id == id {
			// The subscriber must see a change: a new session that
			// happened to draw its old id would hide the restart.
			s.id = p.ids.Next()
		}
		p.stats.WrongSession++
		return p.reply(s, counter, name, from, nil), true
	}
	s.lastHeard = now
	if s.seen && counter < s.last {
		p.stats.Stale++
		return Reply{}, false
	}
	if s.seen && counter == s.last {
		if s.hold.active {
			s.addLane(from)
			return Reply{}, false
		}
		p.stats.Repeated++
		return p.reply(s, counter, name, from, s.sent), true
	}
	s.seen, s.last = true, counter
	s.sent = s.sent[:0]
	s.hold.active = false
	if len(s.ready) > 0 {
		s.take(room)
		p.stats.Notified += uint64(len(s.sent))
		return p.reply(s, counter, name, from, s.sent), true
	}
	h := &s.hold
	h.active = true
	h.counter = counter
	h.name = append(h.name[:0], name...)
	h.room = room
	h.to[0], h.n = from, 1
	h.due = now + HoldTime
	p.stats.Held++
	if !h.queued {
		h.queued = true
		p.timers.Push(h.due, timer{s: s, kind: timerHold})
	}
	return Reply{}, false
}

// addLane adds from to the held heartbeat's lanes, replacing the oldest
// when MaxHeldLanes are held.
func (s *pubSession) addLane(from netip.AddrPort) {
	h := &s.hold
	if slices.Contains(h.to[:h.n], from) {
		return
	}
	if h.n < MaxHeldLanes {
		h.to[h.n] = from
		h.n++
		return
	}
	copy(h.to[:], h.to[1:])
	h.to[MaxHeldLanes-1] = from
}

// take moves the ready entries that fit in room bytes to sent, in order.
// An entry whose value does not fit even alone goes without it (grown).
func (s *pubSession) take(room int) {
	left := room
	i := 0
	for ; i < len(s.ready); i++ {
		e := s.ready[i]
		size := scry.NotifyEntrySize(len(e.Path), len(e.Value))
		if size > room {
			e.Status, e.Value = scry.NotifyGrown, nil
			size = scry.NotifyEntrySize(len(e.Path), 0)
		}
		if size > left && len(s.sent) > 0 {
			break
		}
		left -= size
		s.sent = append(s.sent, e)
	}
	n := copy(s.ready, s.ready[i:])
	clear(s.ready[n:])
	s.ready = s.ready[:n]
}

// reply builds the immediate answer to heartbeat counter of s at name, to
// from.
func (p *Publisher) reply(s *pubSession, counter uint64, name []byte, from netip.AddrPort, entries []Entry) Reply {
	p.replyTo[0] = from
	return Reply{Subscriber: s.sub, Session: s.id, Counter: counter, Name: name, To: p.replyTo[:], Entries: entries}
}

// answerHeld answers s's held heartbeat with what is ready.
func (p *Publisher) answerHeld(s *pubSession) Reply {
	h := &s.hold
	h.active = false
	s.sent = s.sent[:0]
	s.take(h.room)
	p.stats.Notified += uint64(len(s.sent))
	return Reply{Subscriber: s.sub, Session: s.id, Counter: h.counter, Name: h.name, To: h.to[:h.n], Entries: s.sent}
}

// Grow records that path has a value (value is shared, not
// copied, and must not be modified), and calls emit with an answer for
// every waiting subscriber whose heartbeat is held, in subscriber order.
// The others get the path with their next heartbeat.
func (p *Publisher) Grow(path string, value []byte, emit func(Reply)) {
	w, ok := p.waiting[path]
	if !ok {
		return
	}
	delete(p.waiting, path)
	p.order = p.order[:0]
	for s := range w {
		p.order = append(p.order, s)
	}
	slices.SortFunc(p.order, func(a, b *pubSession) int { return a.sub.Compare(b.sub) })
	for _, s := range p.order {
		delete(s.paths, path)
		p.waits--
		s.ready = append(s.ready, Entry{Status: scry.NotifyValue, Path: path, Value: value})
		if s.hold.active {
			emit(p.answerHeld(s))
		}
	}
	clear(p.order)
}

// Tick answers, empty, the held heartbeats whose HoldTime has passed at
// now, calling emit for each, and frees the sessions not heard from for
// SessionTimeout.
func (p *Publisher) Tick(now time.Duration, emit func(Reply)) {
	for p.timers.Due(now) {
		_, t := p.timers.Pop()
		s := t.s
		if p.sessions[s.sub] != s {
			continue // freed
		}
		switch t.kind {
		case timerHold:
			h := &s.hold
			h.queued = false
			if !h.active {
				continue
			}
			if h.due > now {
				h.queued = true
				p.timers.Push(h.due, timer{s: s, kind: timerHold})
				continue
			}
			r := p.answerHeld(s)
			if len(r.Entries) == 0 {
				p.stats.HeldEmpty++
			}
			emit(r)
		case timerExpiry:
			if exp := s.lastHeard + SessionTimeout; exp > now {
				p.timers.Push(exp, timer{s: s, kind: timerExpiry})
				continue
			}
			p.free(s)
		}
	}
}

// free drops session s and everything it holds.
func (p *Publisher) free(s *pubSession) {
	for path := range s.paths {
		if w := p.waiting[path]; w != nil {
			delete(w, s)
			if len(w) == 0 {
				delete(p.waiting, path)
			}
		}
		p.waits--
	}
	delete(p.sessions, s.sub)
	p.stats.Expired++
}

// NextDeadline returns the earliest time Tick has work, or ok false if none.
func (p *Publisher) NextDeadline() (at time.Duration, ok bool) {
	return p.timers.Next()
}

const (
	timerHold uint8 = iota
	timerExpiry
)

// timer is one entry of Publisher.timers, queued at the time it is due.
// Each session has at most one timer of each kind queued; a timer whose
// session has moved on is re-queued or dropped when it comes up (lazy
// rescheduling).
type timer struct {
	s    *pubSession
	kind uint8
}
