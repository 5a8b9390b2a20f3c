package endpoint

import (
	"crypto/ed25519"
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
	"github.com/urbit-relay/relay/session"
)

// Scry notifications in the Core (docs/protocol.md). Subscriber side: a
// subscription is sent as two peeks, one for the path itself (which any
// publisher answers once the value exists) and one for its reserved "sub"
// name (which only a publisher running the protocol answers, with an ack);
// after a pending ack it is not re-sent, and the link to the publisher
// heartbeats instead. Publisher side: reserved peeks go to the
// session.Publisher, and its answers are signed and sent here.

// NotifyStats are the Core's scry-notification counts.
type NotifyStats struct {
	// Subscriber side.
	Subscribed  uint64 // subscriptions started
	Acks        uint64 // authentic acks taken
	Refusals    uint64 // acks with status refused (the subscription keeps polling)
	Beats       uint64 // heartbeats started
	BeatRepeats uint64 // heartbeats sent again, unanswered after session.HeartbeatResend
	BeatAnswers uint64 // authentic heartbeat answers taken
	Notified    uint64 // values delivered in acks or heartbeat answers
	Fetches     uint64 // grown paths fetched with a plain peek (value too large to carry)
	NewSessions uint64 // times a publisher's session changed under a link
	LinkDeaths  uint64 // times a link with acked subscriptions went unheard for session.LinkTimeout
	Stale       uint64 // authentic messages carrying a session the link has left

	// Notifications ignored: ForgedSignature (the signature does not
	// verify under the publisher's key), ForgedShip (the publisher or
	// subscriber named is not the one asked or asking), ForgedPath (an
	// ack for another path, a heartbeat answer for another counter, or a
	// message of the wrong kind), Malformed (not a notification payload).
	ForgedSignature uint64
	ForgedShip      uint64
	ForgedPath      uint64
	Malformed       uint64

	// Publisher side.
	AcksSent        uint64 // acks sent (every one, repeats included)
	BeatAnswersSent uint64 // heartbeat answers sent (per lane)
	BadRequests     uint64 // reserved peeks that do not parse
	Sessions        int    // live sessions
	Waiting         int    // (subscriber, path) subscriptions waiting to grow
	Publisher       session.PublisherStats
}

// NotifyStats returns the core's scry-notification counts.
func (c *Core) NotifyStats() NotifyStats {
	st := c.stats
	if c.pub != nil {
		st.Sessions, st.Waiting, st.Publisher = c.pub.Sessions(), c.pub.Waiting(), c.pub.Stats()
	}
	return st
}

type subState uint8

const (
	subPolling  subState = iota // not acked: re-send both peeks, backing off to PollInterval
	subAcked                    // acked: not re-sent; the link's heartbeats pin it
	subFetching                 // grown but not carried: re-send the plain peek every RetryInterval
)

// link is a subscriber's state for one publisher.
type link struct {
	pub   lane.Ship
	key   ed25519.PublicKey // nil: the publisher's acks cannot be checked, so it is only polled
	l     session.Link
	subs  map[string]*subscription // by path
	acked int                      // subscriptions in subAcked

	beatWire []byte // the heartbeat in flight
	beatKey  string // its name bytes
	beatTry  int
}

// subscription is one Subscribe in flight.
type subscription struct {
	link    *link
	path    string
	state   subState
	due     time.Duration
	backoff time.Duration
	tries   int
	waiters []func(Response)

	valueWire, ackWire []byte // the peeks for the path and for its "sub" name
	valueKey, ackKey   string // their name bytes
}

type refKind uint8

const (
	refValue refKind = iota + 1 // the subscribed path's own page
	refAck                      // the ack at the "sub" name
	refBeat                     // the answer at a heartbeat's name
)

// nameRef is what a name this core waits for belongs to.
type nameRef struct {
	kind refKind
	sub  *subscription // refValue, refAck
	link *link         // refBeat
}

// Subscribe asks pub for the value at path, which may not exist yet; done
// is called, from a later Handle, with the value. It appends the first
// sends.
//
// The subscription is sent as a peek for path and a peek for its reserved
// "sub" name (the latter only if pub's key is in Config.PeerKeys; the
// former only while the link to pub is not known alive). Until an ack
// comes both are re-sent after RetryInterval, then at doubling intervals up
// to PollInterval: so a publisher that does not run the protocol is polled,
// and still answers once the value exists. An ack with status pending
// stops the re-sends; the link heartbeats instead, and the value comes in a
// heartbeat answer (or, if too large to carry, by a plain peek sent when
// the answer says it has grown). If the link dies (no authentic answer for
// session.LinkTimeout) or the publisher's session changes, acked
// subscriptions are re-sent as new.
//
// A second Subscribe of the same path joins the first; a Peek of it runs
// beside it. Each is answered once.
func (c *Core) Subscribe(pub lane.Ship, path string, now time.Duration, done func(Response), out []Datagram) ([]Datagram, error) {
	if path == "" || len(path) > MaxSubscribePath || scry.IsNotifyPath([]byte(path)) {
		return out, ErrBadSubscribePath
	}
	lk := c.links[pub]
	if lk != nil {
		if s := lk.subs[path]; s != nil {
			s.waiters = append(s.waiters, done)
			return out, nil
		}
	}
	if c.Pending() >= MaxPending {
		return out, ErrTooManyRequests
	}
	if lk == nil {
		lk = &link{pub: pub, l: session.NewLink(c.counterStart(now)), subs: map[string]*subscription{}}
		if k, ok := c.cfg.PeerKeys[pub]; ok && len(k) == ed25519.PublicKeySize {
			lk.key = k
		}
		c.links[pub] = lk
	}
	s := &subscription{link: lk, path: path, backoff: c.cfg.RetryInterval, waiters: []func(Response){done}}
	s.valueWire, s.valueKey = peekWire(pub, []byte(path))
	c.byName[s.valueKey] = nameRef{kind: refValue, sub: s}
	if lk.key != nil {
		np := scry.NotifyPath{Kind: scry.NotifyAck, Subscriber: c.cfg.Ship, Path: []byte(path)}
		s.ackWire, s.ackKey = peekWire(pub, np.Append(nil))
		c.byName[s.ackKey] = nameRef{kind: refAck, sub: s}
	}
	lk.subs[path] = s
	c.nsubs++
	c.stats.Subscribed++
	return c.sendSub(s, now, out), nil
}

// counterStart returns the counter a link made at now starts its
// heartbeats from: the wall-clock time in nanoseconds (Config.Epoch + now).
// A link sends at most one heartbeat per round trip, far fewer than one a
// nanosecond, so its counter stays below the wall clock, and a link made
// later (by this run or a restarted one) starts above every counter an
// earlier link of this ship sent. A publisher still holding the session of
// a subscriber's previous run therefore takes the new run's heartbeats as
// new, and replays of the previous run's as stale (docs/protocol.md,
// "Heartbeat counters"). Only a wall clock set back across a restart by
// more than the restart took breaks this; the link then recovers as from
// any unanswered heartbeat, when it dies after session.LinkTimeout.
func (c *Core) counterStart(now time.Duration) uint64 {
	return c.epoch + uint64(max(now, 0))
}

// peekWire returns a canonical peek for path on rcvr and its name bytes.
func peekWire(rcvr lane.Ship, path []byte) (wire []byte, key string) {
	pkt := scry.NewPeek(scry.Name{Ship: rcvr, Bloq: scry.DefaultBloq, Path: path})
	return pkt.Append(nil), string(pkt.Name.Append(nil))
}

// sendSub sends subscription s's requests for its state and schedules the
// next re-send.
func (c *Core) sendSub(s *subscription, now time.Duration, out []Datagram) []Datagram {
	var bufs [2][]byte
	n := 0
	switch s.state {
	case subPolling:
		if s.ackWire != nil {
			bufs[n] = s.ackWire
			n++
		}
		if s.ackWire == nil || !s.link.l.Alive(now) {
			bufs[n] = s.valueWire
			n++
		}
		s.due = now + s.backoff
		s.backoff = min(2*s.backoff, PollInterval)
	case subFetching:
		bufs[n] = s.valueWire
		n++
		s.due = now + c.cfg.RetryInterval
	default:
		return out
	}
	s.tries++
	return c.sendOn(s.link.pub, bufs[:n], EventSubscribe, s.path, s.tries, 0, now, out)
}

// sendOn sends each of bufs on the lanes Routes selects for rcvr at now.
func (c *Core) sendOn(rcvr lane.Ship, bufs [][]byte, kind EventKind, path string, try int, sess uint64, now time.Duration, out []Datagram) []Datagram {
	t := c.routes.Select(rcvr, lane.Key{}, now)
	var targets []netip.AddrPort
	for i := 0; i < t.N; i++ {
		ap := t.Lanes[i].AddrPort()
		for _, b := range bufs {
			out = append(out, Datagram{Buf: b, To: ap})
		}
		if c.cfg.Observe != nil {
			targets = append(targets, ap)
		}
	}
	if c.cfg.Observe != nil && t.N > 0 {
		c.cfg.Observe(Event{Kind: kind, Rcvr: rcvr, Path: path, Targets: targets, Try: try, Session: sess})
	}
	return out
}

// beat starts link lk's next heartbeat, on its current session.
func (c *Core) beat(lk *link, now time.Duration, out []Datagram) []Datagram {
	c.stopBeat(lk)
	n := lk.l.Beat(now)
	np := scry.NotifyPath{Kind: scry.NotifyBeat, Subscriber: c.cfg.Ship, Session: uint64(lk.l.Session()), Counter: n}
	lk.beatWire, lk.beatKey = peekWire(lk.pub, np.Append(nil))
	lk.beatTry = 1
	c.byName[lk.beatKey] = nameRef{kind: refBeat, link: lk}
	c.stats.Beats++
	return c.sendOn(lk.pub, [][]byte{lk.beatWire}, EventBeat, "", lk.beatTry, uint64(lk.l.Session()), now, out)
}

// stopBeat abandons lk's heartbeat in flight: a late answer is ignored.
func (c *Core) stopBeat(lk *link) {
	lk.l.Stop()
	if lk.beatKey != "" {
		delete(c.byName, lk.beatKey)
		lk.beatKey, lk.beatWire = "", nil
	}
}

// ensureBeat starts a heartbeat on lk if it has acked subscriptions to pin
// and none is in flight.
func (c *Core) ensureBeat(lk *link, now time.Duration, out []Datagram) []Datagram {
	if _, beating := lk.l.Beating(); beating || lk.acked == 0 || lk.l.Session() == 0 {
		return out
	}
	return c.beat(lk, now, out)
}

// setState moves s to state st, keeping its link's count of acked
// subscriptions.
func (s *subscription) setState(st subState) {
	if s.state == subAcked {
		s.link.acked--
	}
	if st == subAcked {
		s.link.acked++
	}
	s.state = st
}

// repoll puts every acked subscription of lk except skip back to polling
// and sends it now: the publisher's session changed, or the link died.
func (c *Core) repoll(lk *link, skip *subscription, now time.Duration, out []Datagram) []Datagram {
	for _, s := range lk.subs {
		if s == skip || s.state != subAcked {
			continue
		}
		s.setState(subPolling)
		s.backoff = c.cfg.RetryInterval
		out = c.sendSub(s, now, out)
	}
	return out
}

// dropSub forgets subscription s.
func (c *Core) dropSub(s *subscription) {
	lk := s.link
	if lk.subs[s.path] != s {
		return
	}
	s.setState(subPolling)
	delete(lk.subs, s.path)
	delete(c.byName, s.valueKey)
	if s.ackKey != "" {
		delete(c.byName, s.ackKey)
	}
	c.nsubs--
}

// deliver completes subscription s with resp.
func (c *Core) deliver(s *subscription, resp Response) {
	c.dropSub(s)
	resp.Tries = s.tries
	if resp.Notified {
		c.stats.Notified++
	}
	if c.cfg.Observe != nil {
		c.cfg.Observe(Event{Kind: EventValue, Rcvr: s.link.pub, Path: s.path, Notified: resp.Notified})
	}
	for _, w := range s.waiters {
		w(resp)
	}
}

// notifyAction is what a page at a name in byName asks of the core, once
// it has been checked.
type notifyAction struct {
	kind  refKind // 0: nothing
	sub   *subscription
	link  *link
	msg   *scry.NotifyMessage // refAck, refBeat: the checked payload (aliases the page)
	value []byte              // refValue: the page's data
	fresh bool
}

// notifyPage checks page p, which is at the name of ref, and returns what
// to do with it; authentic is false (and the reason counted) for an ack or
// heartbeat answer that fails its checks.
func (c *Core) notifyPage(p *scry.Packet, ref nameRef, now time.Duration) (act notifyAction, authentic bool) {
	if ref.kind == refValue {
		return notifyAction{kind: refValue, sub: ref.sub, value: p.Data.Frag, fresh: true}, true
	}
	lk := ref.link
	if ref.kind == refAck {
		lk = ref.sub.link
	}
	m := &c.msg
	reason := ""
	switch {
	case p.Data.Total != uint64(len(p.Data.Frag)) || m.Parse(p.Data.Frag) != nil:
		c.stats.Malformed++
		reason = "malformed"
	case !m.Verify(lk.key):
		c.stats.ForgedSignature++
		reason = "signature"
	case m.Publisher != lk.pub || m.Subscriber != c.cfg.Ship:
		c.stats.ForgedShip++
		reason = "ship"
	case ref.kind == refAck && (m.Kind != scry.NotifyAck || string(m.Entries[0].Path) != ref.sub.path):
		c.stats.ForgedPath++
		reason = "path"
	case ref.kind == refBeat && (m.Kind != scry.NotifyBeat || !lk.beating(m.Counter)):
		c.stats.ForgedPath++
		reason = "path"
	}
	if reason != "" {
		if c.cfg.Observe != nil {
			path := ""
			if ref.sub != nil {
				path = ref.sub.path
			}
			c.cfg.Observe(Event{Kind: EventForged, Rcvr: lk.pub, Path: path, Status: reason})
		}
		return notifyAction{}, false
	}
	return notifyAction{kind: ref.kind, sub: ref.sub, link: lk, msg: m, fresh: true}, true
}

// beating reports whether counter is the heartbeat lk has in flight.
func (lk *link) beating(counter uint64) bool {
	n, ok := lk.l.Beating()
	return ok && n == counter
}

// applyNotify carries out act; resp holds the page's lane facts.
func (c *Core) applyNotify(act *notifyAction, resp Response, now time.Duration, out []Datagram) []Datagram {
	switch act.kind {
	case refValue:
		resp.Data = append([]byte(nil), act.value...)
		c.deliver(act.sub, resp)
		return out
	case refAck:
		return c.takeAck(act.sub, act.msg, resp, now, out)
	case refBeat:
		return c.takeBeatAnswer(act.link, act.msg, resp, now, out)
	}
	return out
}

// hear applies the session of an authentic message from lk's publisher;
// it reports false if the message is stale and must be ignored.
func (c *Core) hear(lk *link, m *scry.NotifyMessage, skip *subscription, now time.Duration, out *[]Datagram) bool {
	switch lk.l.Hear(session.ID(m.Session), now) {
	case session.HeardStale:
		c.stats.Stale++
		return false
	case session.HeardNew:
		c.stats.NewSessions++
		c.stopBeat(lk)
		*out = c.repoll(lk, skip, now, *out)
	}
	return true
}

// takeAck applies an authentic ack for s.
func (c *Core) takeAck(s *subscription, m *scry.NotifyMessage, resp Response, now time.Duration, out []Datagram) []Datagram {
	lk := s.link
	if !c.hear(lk, m, s, now, &out) {
		return out
	}
	c.stats.Acks++
	e := m.Entries[0]
	if c.cfg.Observe != nil {
		c.cfg.Observe(Event{Kind: EventAck, Rcvr: lk.pub, Path: s.path, Session: m.Session, Status: e.Status.String()})
	}
	if lk.subs[s.path] != s {
		return c.ensureBeat(lk, now, out) // completed meanwhile
	}
	switch e.Status {
	case scry.NotifyPending:
		s.setState(subAcked)
	case scry.NotifyValue:
		resp.Data, resp.Notified = append([]byte(nil), e.Value...), true
		c.deliver(s, resp)
	case scry.NotifyGrown:
		c.stats.Fetches++
		s.setState(subFetching)
		out = c.sendSub(s, now, out)
	case scry.NotifyRefused:
		c.stats.Refusals++
		if s.state == subAcked {
			s.setState(subPolling)
		}
	}
	return c.ensureBeat(lk, now, out)
}

// takeBeatAnswer applies an authentic answer to lk's heartbeat in flight.
func (c *Core) takeBeatAnswer(lk *link, m *scry.NotifyMessage, resp Response, now time.Duration, out []Datagram) []Datagram {
	if !c.hear(lk, m, nil, now, &out) {
		return out
	}
	c.stats.BeatAnswers++
	lk.l.Answered(m.Counter)
	c.stopBeat(lk)
	for _, e := range m.Entries {
		s := lk.subs[string(e.Path)]
		if s == nil {
			continue // completed or cancelled
		}
		switch e.Status {
		case scry.NotifyValue:
			r := resp
			r.Data, r.Notified = append([]byte(nil), e.Value...), true
			c.deliver(s, r)
		case scry.NotifyGrown:
			c.stats.Fetches++
			s.setState(subFetching)
			out = c.sendSub(s, now, out)
		}
	}
	return c.ensureBeat(lk, now, out)
}

// tickNotify runs the notification timers at now.
func (c *Core) tickNotify(now time.Duration, out []Datagram) []Datagram {
	if len(c.deferred) > 0 {
		out = append(out, c.deferred...)
		clear(c.deferred)
		c.deferred = c.deferred[:0]
	}
	if c.pub != nil {
		c.pub.Tick(now, func(r session.Reply) { out = c.sendReply(r, out) })
	}
	for pub, lk := range c.links {
		if lk.acked > 0 && !lk.l.Alive(now) {
			// Unheard for LinkTimeout: poll the acked subscriptions
			// again, and keep heartbeating.
			c.stats.LinkDeaths++
			out = c.repoll(lk, nil, now, out)
		}
		if lk.l.Resend(now) {
			// Re-sent while the link has subscriptions, dead or not,
			// until the publisher answers.
			if len(lk.subs) == 0 {
				c.stopBeat(lk)
			} else {
				lk.beatTry++
				c.stats.BeatRepeats++
				out = c.sendOn(lk.pub, [][]byte{lk.beatWire}, EventBeat, "", lk.beatTry, uint64(lk.l.Session()), now, out)
			}
		}
		for _, s := range lk.subs {
			if s.state != subAcked && now >= s.due {
				out = c.sendSub(s, now, out)
			}
		}
		if len(lk.subs) == 0 && !lk.l.Alive(now) {
			c.stopBeat(lk)
			delete(c.links, pub)
		}
	}
	return out
}

// notifyDeadline returns the earliest time tickNotify has work.
func (c *Core) notifyDeadline() time.Duration {
	d := never
	if len(c.deferred) > 0 {
		return 0
	}
	if c.pub != nil {
		if at, ok := c.pub.NextDeadline(); ok {
			d = at
		}
	}
	for _, lk := range c.links {
		if at, ok := lk.l.Deadline(); ok {
			d = min(d, at)
		}
		if lk.acked > 0 || len(lk.subs) == 0 {
			if at, ok := lk.l.DeadAt(); ok {
				d = min(d, at)
			} else if len(lk.subs) == 0 {
				d = 0 // never heard and unused: drop it
			}
		}
		for _, s := range lk.subs {
			if s.state != subAcked {
				d = min(d, s.due)
			}
		}
	}
	return d
}

// notifyRequest answers a reserved peek addressed to this publisher.
func (c *Core) notifyRequest(p *scry.Packet, from netip.AddrPort, now time.Duration, out []Datagram) []Datagram {
	var np scry.NotifyPath
	if err := np.Parse(p.Name.Path); err != nil {
		c.stats.BadRequests++
		return out
	}
	name := p.NameBytes()
	room := scry.NotifyRoom(len(name))
	switch np.Kind {
	case scry.NotifyAck:
		path := string(np.Path)
		var id session.ID
		e := scry.NotifyEntry{Path: np.Path}
		if v, ok := c.published[path]; ok {
			var open bool
			if id, open = c.pub.Open(np.Subscriber, now); !open {
				return out // no session to ack with; the plain peek gets the value
			}
			e.Status, e.Value = scry.NotifyValue, v
			if e.Size() > room {
				e.Status, e.Value = scry.NotifyGrown, nil
			}
		} else if id, e.Status = c.pub.Subscribe(np.Subscriber, path, now); id == 0 {
			return out
		}
		m := scry.NotifyMessage{Kind: scry.NotifyAck, Publisher: c.cfg.Ship, Subscriber: np.Subscriber,
			Session: uint64(id), Entries: []scry.NotifyEntry{e}}
		c.stats.AcksSent++
		return append(out, Datagram{Buf: c.notifyPageWire(name, &m), To: from})
	case scry.NotifyBeat:
		r, ok := c.pub.Heartbeat(np.Subscriber, session.ID(np.Session), np.Counter, name, from, room, now)
		if ok {
			out = c.sendReply(r, out)
		}
	}
	return out
}

// sendReply signs and sends a heartbeat answer.
func (c *Core) sendReply(r session.Reply, out []Datagram) []Datagram {
	m := scry.NotifyMessage{Kind: scry.NotifyBeat, Publisher: c.cfg.Ship, Subscriber: r.Subscriber,
		Session: uint64(r.Session), Counter: r.Counter}
	if len(r.Entries) > 0 {
		m.Entries = make([]scry.NotifyEntry, len(r.Entries))
		for i, e := range r.Entries {
			m.Entries[i] = scry.NotifyEntry{Status: e.Status, Path: []byte(e.Path), Value: e.Value}
		}
	}
	wire := c.notifyPageWire(r.Name, &m)
	for _, to := range r.To {
		out = append(out, Datagram{Buf: wire, To: to})
		c.stats.BeatAnswersSent++
	}
	return out
}

// notifyPageWire returns a hop-0 page at the name whose wire bytes are name
// carrying m signed with the core's key. The name is copied byte for byte,
// so the page matches the relays' pending entries for the request whatever
// widths the subscriber wrote it with.
func (c *Core) notifyPageWire(name []byte, m *scry.NotifyMessage) []byte {
	payload := m.AppendSigned(make([]byte, 0, m.Size()), c.cfg.Key)
	data := scry.Data{Total: uint64(len(payload)), AuthKind: scry.AuthNone, Frag: payload}
	h := scry.Header{Version: scry.MesaVersion, Type: scry.TypePage}
	b := make([]byte, 0, scry.MesaHeaderLen+len(name)+data.Size()+scry.ShortHopLen)
	b = binary.LittleEndian.AppendUint32(b, h.Word())
	b = binary.LittleEndian.AppendUint32(b, scry.MesaCookie)
	b = append(b, name...)
	b = data.Append(b)
	scry.FixMug(b)
	return b
}
