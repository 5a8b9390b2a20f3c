package endpoint

import (
	"crypto/ed25519"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/session"
)

// Tests of the subscriber's link behaviour, each named for the behaviour
// and guarding against one change to notify.go or core.go that every other
// test let pass (issue 13, item 6).

// TestNotifyHeartbeatAnswersTightenTheRoute: a subscriber that knows the
// publisher only through the relay fronting its sponsor is acked through
// the relay (at hop 1, offering the publisher's lane as next-hop); from
// then on only heartbeats and their answers flow, and the first answer to
// come back at hop 0 from that lane must teach the subscriber the direct
// lane, so that the next heartbeat goes to the publisher alone, not
// through the relay. It guards against the subscriber not learning routes
// from heartbeat answers (Core.page skipping Routes.Heard and
// Routes.Answered for a page at a heartbeat's name): the direct lane is
// then never learned and the next heartbeat crosses the relay again.
func TestNotifyHeartbeatAnswersTightenTheRoute(t *testing.T) {
	net := newSimNet(3)
	star := lane.ShipFromUint64(256)        // ~marzod
	pubShip := lane.ShipFromUint64(0x10100) // a planet under ~marzod
	subShip := lane.ShipFromUint64(0x20200)
	relayAt := netip.MustParseAddrPort("198.51.100.1:13337")
	pubAt := netip.MustParseAddrPort("198.51.100.2:40000")
	subAt := netip.MustParseAddrPort("198.51.100.3:50000")
	r, err := relay.New(relay.Config{Ship: star, Self: []netip.AddrPort{relayAt},
		Pinned: map[lane.Ship]netip.AddrPort{pubShip: pubAt}})
	if err != nil {
		t.Fatal(err)
	}
	net.addRelay(relayAt, r)
	pubCore, err := NewCore(Config{Ship: pubShip, Lanes: map[lane.Ship]netip.AddrPort{star: relayAt}, Key: testKey(2), Seed: 1}, pubAt)
	if err != nil {
		t.Fatal(err)
	}
	net.addCore(pubAt, pubCore)
	var events []Event
	subCore, err := NewCore(Config{Ship: subShip, PingInterval: -1, Seed: 2,
		Lanes:    map[lane.Ship]netip.AddrPort{star: relayAt},
		PeerKeys: map[lane.Ship]ed25519.PublicKey{pubShip: pubKey(testKey(2))},
		Observe:  func(e Event) { events = append(events, e) },
	}, subAt)
	if err != nil {
		t.Fatal(err)
	}
	sub := net.addCore(subAt, subCore)
	var got []Response
	net.do(sub, func(now time.Duration) []Datagram {
		out, err := subCore.Subscribe(pubShip, "v/1", now, func(r Response) { got = append(got, r) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
	net.run(time.Second)
	if st := subCore.NotifyStats(); st.Acks != 1 {
		t.Fatalf("not acked through the relay: %+v", st)
	}
	if info, _ := subCore.Routes().Info(pubShip); info.Direct.IsValid() {
		t.Fatalf("direct lane known before any heartbeat answer: %+v", info)
	}
	// The first heartbeat went through the relay and, as a probe, to the
	// next-hop the ack offered; the publisher holds it HoldTime and answers
	// on both lanes. Only that answer can teach the direct lane.
	mark := len(events)
	net.run(time.Second + session.HoldTime + time.Second)
	info, _ := subCore.Routes().Info(pubShip)
	if info.Direct.AddrPort() != pubAt || !info.DirectProven || info.DirectHeard < session.HoldTime {
		t.Fatalf("route after the first heartbeat answer: %+v, want the direct lane %v heard from it", info, pubAt)
	}
	var next *Event
	for i := range events[mark:] {
		if e := &events[mark+i]; e.Kind == EventBeat {
			next = e
		}
	}
	if next == nil || len(next.Targets) != 1 || next.Targets[0] != pubAt {
		t.Fatalf("next heartbeat %+v, want it sent to the publisher's direct lane %v alone", next, pubAt)
	}
	if len(got) != 0 {
		t.Fatalf("got %+v before anything grew", got)
	}
}

// TestNotifyDeadLinkKeepsHeartbeating: the publisher falls silent for
// longer than LinkTimeout; the subscriber goes on repeating its heartbeat
// every HeartbeatResend while the link is dead (docs/protocol.md,
// behaviour 6), so the publisher is heard again as soon as it is back. It
// guards against heartbeats being stopped while a link is dead.
func TestNotifyDeadLinkKeepsHeartbeating(t *testing.T) {
	np := newNotifyPair(t, true)
	np.subscribe(t, "v/1")
	np.net.run(time.Second)
	if st := np.subCore.NotifyStats(); st.Acks != 1 || st.Beats != 1 {
		t.Fatalf("after a round trip: %+v", st)
	}
	np.net.remove(bLane) // the publisher falls silent
	np.net.run(time.Second + session.LinkTimeout + time.Second)
	if st := np.subCore.NotifyStats(); st.LinkDeaths != 1 {
		t.Fatalf("link deaths %d, want 1", st.LinkDeaths)
	}
	mark := len(np.events)
	const dead = 4 * time.Minute
	np.net.run(time.Second + session.LinkTimeout + time.Second + dead)
	beats := np.count(EventBeat, mark)
	if want := int(dead / session.HeartbeatResend); beats < want-1 || beats > want+1 {
		t.Errorf("%d heartbeats in %v with the link dead, want about %d", beats, dead, want)
	}
	// The publisher comes back (its session has expired, so it answers
	// the repeated heartbeat with a new session): the subscriber hears it
	// within one HeartbeatResend and gets the value.
	np.pub = np.net.addCore(bLane, np.pubCore)
	back := np.net.now
	np.grow("v/1", "one")
	np.net.run(back + session.HeartbeatResend + time.Second)
	if len(np.got) != 1 || string(np.got[0].Data) != "one" {
		t.Fatalf("got %+v after the publisher came back", np.got)
	}
}

// TestNotifyDeadLinkPollsReplacedPublisher: the publisher is replaced, on
// the same lane, by a process that does not run the protocol; it ignores
// heartbeats, so the link dies after LinkTimeout, and the subscriber must
// poll its acked subscription again (docs/protocol.md, behaviour 6): the
// plain peek gets the value. It guards against the dead-link re-poll
// being removed (tickNotify no longer calling repoll when a link with
// acked subscriptions dies): the subscription then stays acked, unsent,
// and the value never arrives.
func TestNotifyDeadLinkPollsReplacedPublisher(t *testing.T) {
	np := newNotifyPair(t, true)
	np.subscribe(t, "v/1")
	np.net.run(time.Second)
	if st := np.subCore.NotifyStats(); st.Acks != 1 {
		t.Fatalf("not acked: %+v", st)
	}
	plain, err := NewCore(Config{Ship: np.pShip, Seed: 8}, bLane)
	if err != nil {
		t.Fatal(err)
	}
	np.net.remove(bLane)
	np.pub = np.net.addCore(bLane, plain)
	np.net.do(np.pub, func(now time.Duration) []Datagram { return plain.Grow("v/1", []byte("one"), now, nil) })
	np.net.run(session.LinkTimeout)
	if len(np.got) != 0 {
		t.Fatalf("delivered before the link died: %+v", np.got)
	}
	np.net.run(session.LinkTimeout + 2*time.Second)
	if len(np.got) != 1 || string(np.got[0].Data) != "one" || np.got[0].Notified {
		t.Fatalf("got %+v, want the value once as a plain page", np.got)
	}
	if st := np.subCore.NotifyStats(); st.LinkDeaths != 1 {
		t.Errorf("link deaths %d, want 1", st.LinkDeaths)
	}
}
