package endpoint

import (
	"bytes"
	"crypto/ed25519"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
	"github.com/urbit-relay/relay/session"
)

// testKey returns a deterministic key pair for ship number n.
func testKey(n byte) ed25519.PrivateKey {
	seed := bytes.Repeat([]byte{n}, ed25519.SeedSize)
	return ed25519.NewKeyFromSeed(seed)
}

func pubKey(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// notifyPair is a subscriber ~sampel-palnet and a publisher ~nec (a galaxy:
// no pings) that reach each other directly on a simNet.
type notifyPair struct {
	net            *simNet
	sub, pub       *simNode
	subCore        *Core
	pubCore        *Core
	subShip, pShip lane.Ship
	events         []Event
	got            []Response
}

func newNotifyPair(t *testing.T, pubRunsProtocol bool) *notifyPair {
	t.Helper()
	np := &notifyPair{net: newSimNet(1), subShip: mustShip(t, "~sampel-palnet"), pShip: mustShip(t, "~nec")}
	var key ed25519.PrivateKey
	if pubRunsProtocol {
		key = testKey(2)
	}
	var err error
	np.pubCore, err = NewCore(Config{Ship: np.pShip, Key: key, Seed: 7}, bLane)
	if err != nil {
		t.Fatal(err)
	}
	np.subCore, err = NewCore(Config{
		Ship: np.subShip, PingInterval: -1, Seed: 9,
		Lanes:    map[lane.Ship]netip.AddrPort{np.pShip: bLane},
		PeerKeys: map[lane.Ship]ed25519.PublicKey{np.pShip: pubKey(testKey(2))},
		Observe:  func(e Event) { np.events = append(np.events, e) },
	}, aLane)
	if err != nil {
		t.Fatal(err)
	}
	np.sub = np.net.addCore(aLane, np.subCore)
	np.pub = np.net.addCore(bLane, np.pubCore)
	return np
}

func (np *notifyPair) subscribe(t *testing.T, path string) {
	t.Helper()
	np.net.do(np.sub, func(now time.Duration) []Datagram {
		out, err := np.subCore.Subscribe(np.pShip, path, now, func(r Response) { np.got = append(np.got, r) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
}

func (np *notifyPair) grow(path, value string) {
	np.net.do(np.pub, func(now time.Duration) []Datagram {
		return np.pubCore.Grow(path, []byte(value), now, nil)
	})
}

// count returns how many events of kind there were after time from (by
// index) — events carry no time, so callers mark indices.
func (np *notifyPair) count(kind EventKind, since int) int {
	n := 0
	for _, e := range np.events[since:] {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func TestNotifyAckStopsResends(t *testing.T) {
	np := newNotifyPair(t, true)
	np.subscribe(t, "v/1")
	np.net.run(time.Second)
	st := np.subCore.NotifyStats()
	if st.Acks != 1 || st.Beats != 1 {
		t.Fatalf("after a round trip: %+v", st)
	}
	// Ten idle minutes: no subscription re-sends, only heartbeats, each
	// held HoldTime by the publisher.
	mark := len(np.events)
	np.net.run(10 * time.Minute)
	if n := np.count(EventSubscribe, mark); n != 0 {
		t.Errorf("%d subscription re-sends after the ack", n)
	}
	beats := np.count(EventBeat, mark)
	if want := int(10 * time.Minute / session.HoldTime); beats < want-1 || beats > want+1 {
		t.Errorf("%d heartbeats in 10 minutes, want about %d", beats, want)
	}
	if ps := np.pubCore.NotifyStats(); ps.Sessions != 1 || ps.Waiting != 1 || ps.Publisher.HeldEmpty < uint64(beats)-1 {
		t.Errorf("publisher %+v", ps)
	}
	// The value grows: it arrives within one one-way delay, in the held
	// heartbeat's answer.
	np.grow("v/1", "one")
	np.net.run(10*time.Minute + 10*time.Millisecond)
	if len(np.got) != 1 || string(np.got[0].Data) != "one" || !np.got[0].Notified {
		t.Fatalf("got %+v", np.got)
	}
	if np.subCore.Pending() != 0 {
		t.Errorf("%d still pending", np.subCore.Pending())
	}
	// With nothing left to pin, heartbeats stop and the publisher frees
	// the session a minute later.
	mark = len(np.events)
	np.net.run(13 * time.Minute)
	if n := np.count(EventBeat, mark); n != 0 {
		t.Errorf("%d heartbeats with no subscription", n)
	}
	if ps := np.pubCore.NotifyStats(); ps.Sessions != 0 || ps.Publisher.Expired != 1 {
		t.Errorf("publisher kept the session: %+v", ps)
	}
}

func TestNotifySubscribeExistingValue(t *testing.T) {
	np := newNotifyPair(t, true)
	np.grow("v/1", "one")
	np.subscribe(t, "v/1")
	np.net.run(time.Second)
	// The ack carries the value, and the plain page too: delivered once.
	if len(np.got) != 1 || string(np.got[0].Data) != "one" {
		t.Fatalf("got %+v", np.got)
	}
	np.net.run(time.Minute)
	if len(np.got) != 1 {
		t.Fatalf("delivered %d times", len(np.got))
	}
}

func TestNotifyLargeValueIsFetched(t *testing.T) {
	np := newNotifyPair(t, true)
	np.subscribe(t, "big")
	np.net.run(time.Second)
	big := bytes.Repeat([]byte("x"), 1300)
	np.grow("big", string(big))
	np.net.run(2 * time.Second)
	if len(np.got) != 1 || !bytes.Equal(np.got[0].Data, big) || np.got[0].Notified {
		t.Fatalf("got %d responses", len(np.got))
	}
	if st := np.subCore.NotifyStats(); st.Fetches != 1 {
		t.Errorf("fetches %d", st.Fetches)
	}
}

// TestNotifyLostNotificationRecovered drops the heartbeat answer that
// carries the value: the publisher keeps it until the subscriber asks for
// more, and the subscriber repeats its heartbeat.
func TestNotifyLostNotificationRecovered(t *testing.T) {
	np := newNotifyPair(t, true)
	np.subscribe(t, "v/1")
	np.net.run(5 * time.Second)
	dropped := 0
	np.net.Loss = 0
	np.net.Tap = func(from, to netip.AddrPort, b []byte) {
		var p scry.Packet
		if p.Parse(b) == nil && p.Header.Type == scry.TypePage && bytes.Contains(p.Data.Frag, []byte("one")) && dropped == 0 {
			dropped++
			np.net.Loss = 1 // this one datagram
		} else {
			np.net.Loss = 0
		}
	}
	np.grow("v/1", "one")
	np.net.Tap = nil
	np.net.Loss = 0
	if dropped != 1 {
		t.Fatal("notification not dropped")
	}
	np.net.run(5*time.Second + session.HeartbeatResend)
	if len(np.got) != 1 || string(np.got[0].Data) != "one" {
		t.Fatalf("not recovered: %+v", np.got)
	}
	if st := np.subCore.NotifyStats(); st.BeatRepeats != 1 {
		t.Errorf("beat repeats %d", st.BeatRepeats)
	}
}

func TestNotifyPublisherWithoutProtocolIsPolled(t *testing.T) {
	np := newNotifyPair(t, false)
	np.subscribe(t, "v/1")
	np.net.run(10 * time.Minute)
	st := np.subCore.NotifyStats()
	if st.Acks != 0 || st.Beats != 0 {
		t.Fatalf("protocol with a publisher that does not run it: %+v", st)
	}
	// Backing off to PollInterval: 1+2+4+...+64 s, then every 2 minutes.
	polls := np.count(EventSubscribe, 0)
	if polls < 8 || polls > 12 {
		t.Errorf("%d polls in 10 minutes", polls)
	}
	np.grow("v/1", "one")
	np.net.run(10*time.Minute + PollInterval + time.Second)
	if len(np.got) != 1 || string(np.got[0].Data) != "one" || np.got[0].Notified {
		t.Fatalf("got %+v", np.got)
	}
}

func TestNotifyPeekIgnoresNotifications(t *testing.T) {
	// A requester that does not run the protocol (plain Peek) is never
	// acked: its request is for the path only, and a page at the path is
	// always the value.
	np := newNotifyPair(t, true)
	np.net.do(np.sub, func(now time.Duration) []Datagram {
		out, _ := np.subCore.Peek(np.pShip, "v/1", now, func(r Response) { np.got = append(np.got, r) }, nil)
		return out
	})
	np.net.run(5 * time.Second)
	if ps := np.pubCore.NotifyStats(); ps.AcksSent != 0 || ps.Sessions != 0 {
		t.Fatalf("plain peek acked: %+v", ps)
	}
	np.grow("v/1", "one")
	np.net.run(7 * time.Second)
	if len(np.got) != 1 || string(np.got[0].Data) != "one" {
		t.Fatalf("got %+v", np.got)
	}
}

// forgedPage returns a page at name carrying m signed with key.
func forgedPage(name []byte, m scry.NotifyMessage, key ed25519.PrivateKey) []byte {
	c := &Core{cfg: Config{Key: key}}
	return c.notifyPageWire(name, &m)
}

func TestNotifyForgeriesIgnoredAndCounted(t *testing.T) {
	np := newNotifyPair(t, true)
	// The publisher is unreachable: only forged answers arrive.
	np.net.remove(bLane)
	np.subscribe(t, "v/1")
	s := np.subCore.links[np.pShip].subs["v/1"]
	name := []byte(s.ackKey)
	good := scry.NotifyMessage{Kind: scry.NotifyAck, Publisher: np.pShip, Subscriber: np.subShip, Session: 5,
		Entries: []scry.NotifyEntry{{Status: scry.NotifyValue, Path: []byte("v/1"), Value: []byte("forged")}}}
	other := testKey(66)
	wrongPub, wrongSub, wrongPath, wrongKind := good, good, good, good
	wrongPub.Publisher = mustShip(t, "~zod")
	wrongSub.Subscriber = mustShip(t, "~zod")
	wrongPath.Entries = []scry.NotifyEntry{{Status: scry.NotifyValue, Path: []byte("v/2"), Value: []byte("forged")}}
	wrongKind.Kind = scry.NotifyBeat
	wrongKind.Entries = nil
	cases := []struct {
		page []byte
		want func(NotifyStats) uint64
	}{
		{forgedPage(name, good, other), func(s NotifyStats) uint64 { return s.ForgedSignature }},
		{forgedPage(name, wrongPub, testKey(2)), func(s NotifyStats) uint64 { return s.ForgedShip }},
		{forgedPage(name, wrongSub, testKey(2)), func(s NotifyStats) uint64 { return s.ForgedShip }},
		{forgedPage(name, wrongPath, testKey(2)), func(s NotifyStats) uint64 { return s.ForgedPath }},
		{forgedPage(name, wrongKind, testKey(2)), func(s NotifyStats) uint64 { return s.ForgedPath }},
	}
	for i, tc := range cases {
		before := tc.want(np.subCore.NotifyStats())
		np.subCore.Handle(tc.page, bLane, time.Millisecond, nil)
		if got := tc.want(np.subCore.NotifyStats()); got != before+1 {
			t.Errorf("case %d: counter %d, want %d", i, got, before+1)
		}
	}
	// A corrupted signature byte of a good ack.
	pg := forgedPage(name, good, testKey(2))
	pg[len(pg)-1] ^= 1
	scry.FixMug(pg)
	np.subCore.Handle(pg, bLane, time.Millisecond, nil)
	st := np.subCore.NotifyStats()
	if st.ForgedSignature != 2 || st.Acks != 0 || len(np.got) != 0 {
		t.Fatalf("stats %+v, got %d", st, len(np.got))
	}
	// The forgeries taught no route either.
	if info, ok := np.subCore.Routes().Info(np.pShip); ok && info.Direct.AddrPort().IsValid() {
		t.Errorf("forgery taught a direct lane: %+v", info)
	}
	// The subscription still polls.
	if s.state != subPolling {
		t.Fatalf("state %d", s.state)
	}
	// The genuine ack is taken.
	np.subCore.Handle(forgedPage(name, good, testKey(2)), bLane, time.Millisecond, nil)
	if len(np.got) != 1 || string(np.got[0].Data) != "forged" {
		t.Fatalf("genuine ack not taken: %+v", np.got)
	}
}

func TestNotifyForgedHeartbeatAnswer(t *testing.T) {
	np := newNotifyPair(t, true)
	np.subscribe(t, "v/1")
	np.net.run(time.Second)
	lk := np.subCore.links[np.pShip]
	counter, ok := lk.l.Beating()
	if !ok {
		t.Fatal("not heartbeating")
	}
	np.net.remove(bLane)
	name := []byte(lk.beatKey)
	m := scry.NotifyMessage{Kind: scry.NotifyBeat, Publisher: np.pShip, Subscriber: np.subShip,
		Session: uint64(lk.l.Session()), Counter: counter,
		Entries: []scry.NotifyEntry{{Status: scry.NotifyValue, Path: []byte("v/1"), Value: []byte("x")}}}
	wrongCounter := m
	wrongCounter.Counter++
	np.subCore.Handle(forgedPage(name, m, testKey(66)), bLane, 2*time.Second, nil)
	np.subCore.Handle(forgedPage(name, wrongCounter, testKey(2)), bLane, 2*time.Second, nil)
	st := np.subCore.NotifyStats()
	if st.ForgedSignature != 1 || st.ForgedPath != 1 || len(np.got) != 0 || st.BeatAnswers != 0 {
		t.Fatalf("stats %+v got %d", st, len(np.got))
	}
	np.subCore.Handle(forgedPage(name, m, testKey(2)), bLane, 2*time.Second, nil)
	if len(np.got) != 1 {
		t.Fatal("genuine answer not taken")
	}
}

func TestNotifyBadRequestsCounted(t *testing.T) {
	np := newNotifyPair(t, true)
	for _, path := range []string{"~notify/1/sub/zod/v", "~notify/1/hb/~zod/12/1", "~notify/1/xx/~zod/v"} {
		w, _ := peekWire(np.pShip, []byte(path))
		if out := np.pubCore.Handle(w, aLane, 0, nil); len(out) != 0 {
			t.Errorf("%s answered", path)
		}
	}
	if st := np.pubCore.NotifyStats(); st.BadRequests != 3 {
		t.Errorf("bad requests %d", st.BadRequests)
	}
}

func TestNotifySubscribeRejectsBadPaths(t *testing.T) {
	np := newNotifyPair(t, true)
	for _, p := range []string{"", "~notify/1/sub/~zod/x", string(bytes.Repeat([]byte("a"), MaxSubscribePath+1))} {
		if _, err := np.subCore.Subscribe(np.pShip, p, 0, func(Response) {}, nil); err != ErrBadSubscribePath {
			t.Errorf("%q: %v", p, err)
		}
	}
}

func TestNotifyPublishDefersToTick(t *testing.T) {
	np := newNotifyPair(t, true)
	np.subscribe(t, "v/1")
	np.net.run(time.Second)
	// Core.Publish has no clock: the notification it owes goes out with
	// the next Tick, which NextDeadline asks for at once.
	np.pubCore.Publish("v/1", []byte("one"))
	if d := np.pubCore.NextDeadline(); d != 0 {
		t.Fatalf("next deadline %v after Publish", d)
	}
	np.net.schedule(np.pub)
	np.net.run(time.Second + 100*time.Millisecond)
	if len(np.got) != 1 || string(np.got[0].Data) != "one" || !np.got[0].Notified {
		t.Fatalf("got %+v", np.got)
	}
	if d := np.pubCore.NextDeadline(); d == 0 {
		t.Fatal("deferred notifications not flushed")
	}
}
