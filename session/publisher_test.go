package session

import (
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

var (
	laneA = netip.MustParseAddrPort("192.0.2.1:1")
	laneB = netip.MustParseAddrPort("192.0.2.2:2")
	laneC = netip.MustParseAddrPort("192.0.2.3:3")
)

const room = 1000

func sub(n uint64) lane.Ship { return lane.ShipFromUint64(0x10000 + n) }

// collect returns an emit function appending copies of replies to *rs.
func collect(rs *[]Reply) func(Reply) {
	return func(r Reply) {
		r.Name = append([]byte(nil), r.Name...)
		r.To = append([]netip.AddrPort(nil), r.To...)
		r.Entries = append([]Entry(nil), r.Entries...)
		*rs = append(*rs, r)
	}
}

func TestPublisherAckThenNotify(t *testing.T) {
	p := NewPublisher(NewIDSource(1))
	id, st := p.Subscribe(sub(1), "v/1", 0)
	if st != scry.NotifyPending || id == 0 {
		t.Fatalf("subscribe: %v %v", id, st)
	}
	// A duplicate subscription gets the same session.
	if id2, st2 := p.Subscribe(sub(1), "v/1", time.Second); id2 != id || st2 != scry.NotifyPending {
		t.Fatalf("duplicate: %v %v", id2, st2)
	}
	if p.Waiting() != 1 || p.Sessions() != 1 {
		t.Fatalf("waiting %d sessions %d", p.Waiting(), p.Sessions())
	}
	// The first heartbeat is held.
	if _, ok := p.Heartbeat(sub(1), id, 5, []byte("hb5"), laneA, room, time.Second); ok {
		t.Fatal("heartbeat answered with nothing grown")
	}
	// A copy through a second lane is answered on both.
	p.Heartbeat(sub(1), id, 5, []byte("hb5"), laneB, room, time.Second)
	var rs []Reply
	p.Grow("v/1", []byte("one"), collect(&rs))
	if len(rs) != 1 {
		t.Fatalf("%d replies on grow", len(rs))
	}
	r := rs[0]
	if r.Counter != 5 || r.Session != id || string(r.Name) != "hb5" || len(r.To) != 2 ||
		len(r.Entries) != 1 || r.Entries[0].Path != "v/1" || string(r.Entries[0].Value) != "one" ||
		r.Entries[0].Status != scry.NotifyValue {
		t.Fatalf("reply %+v", r)
	}
	if p.Waiting() != 0 {
		t.Fatalf("still waiting: %d", p.Waiting())
	}
	// The answer was lost: the repeat of heartbeat 5 gets it again.
	r2, ok := p.Heartbeat(sub(1), id, 5, []byte("hb5"), laneA, room, 30*time.Second)
	if !ok || len(r2.Entries) != 1 || r2.Entries[0].Path != "v/1" || r2.To[0] != laneA {
		t.Fatalf("repeat: %v %+v", ok, r2)
	}
	// Heartbeat 6 acknowledges answer 5: it is held, empty.
	if _, ok := p.Heartbeat(sub(1), id, 6, []byte("hb6"), laneA, room, 31*time.Second); ok {
		t.Fatal("heartbeat 6 answered at once")
	}
	// A stale repeat of 5 is ignored now.
	if _, ok := p.Heartbeat(sub(1), id, 5, []byte("hb5"), laneA, room, 32*time.Second); ok {
		t.Fatal("stale heartbeat answered")
	}
	if d, ok := p.NextDeadline(); !ok || d > 31*time.Second+HoldTime {
		t.Fatalf("next deadline %v %v", d, ok)
	}
	rs = nil
	p.Tick(31*time.Second+HoldTime-1, collect(&rs))
	if len(rs) != 0 {
		t.Fatal("held heartbeat answered before HoldTime")
	}
	p.Tick(31*time.Second+HoldTime, collect(&rs))
	if len(rs) != 1 || rs[0].Counter != 6 || len(rs[0].Entries) != 0 {
		t.Fatalf("hold expiry: %+v", rs)
	}
	if s := p.Stats(); s.HeldEmpty != 1 || s.Repeated != 1 || s.Stale != 1 || s.Notified != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestPublisherGrownBeforeHeartbeat(t *testing.T) {
	p := NewPublisher(NewIDSource(1))
	id, _ := p.Subscribe(sub(1), "a", 0)
	p.Subscribe(sub(1), "b", 0)
	var rs []Reply
	p.Grow("a", []byte("A"), collect(&rs))
	p.Grow("b", []byte("B"), collect(&rs))
	if len(rs) != 0 {
		t.Fatal("answered without a held heartbeat")
	}
	r, ok := p.Heartbeat(sub(1), id, 1, []byte("hb1"), laneA, room, 2*time.Second)
	if !ok || len(r.Entries) != 2 || r.Entries[0].Path != "a" || r.Entries[1].Path != "b" {
		t.Fatalf("reply %v %+v", ok, r)
	}
}

func TestPublisherPacksEntriesIntoRoom(t *testing.T) {
	p := NewPublisher(NewIDSource(1))
	id, _ := p.Subscribe(sub(1), "big", 0)
	p.Subscribe(sub(1), "x", 0)
	p.Subscribe(sub(1), "y", 0)
	var rs []Reply
	p.Grow("big", make([]byte, 2*room), collect(&rs))
	p.Grow("x", make([]byte, room-20), collect(&rs))
	p.Grow("y", make([]byte, room-20), collect(&rs))
	r, _ := p.Heartbeat(sub(1), id, 1, nil, laneA, room, 0)
	// The value too big for any answer goes as grown; the first that fits
	// rides along; the next waits for the next heartbeat.
	if len(r.Entries) != 2 || r.Entries[0].Status != scry.NotifyGrown || r.Entries[0].Value != nil ||
		r.Entries[1].Path != "x" || r.Entries[1].Status != scry.NotifyValue {
		t.Fatalf("first answer %+v", r.Entries)
	}
	r, _ = p.Heartbeat(sub(1), id, 2, nil, laneA, room, 0)
	if len(r.Entries) != 1 || r.Entries[0].Path != "y" {
		t.Fatalf("second answer %+v", r.Entries)
	}
}

func TestPublisherNewSession(t *testing.T) {
	p := NewPublisher(NewIDSource(1))
	// A heartbeat on a session the publisher does not know (it restarted)
	// is answered at once with a new session.
	r, ok := p.Heartbeat(sub(1), 12345, 9, []byte("hb"), laneA, room, 0)
	if !ok || r.Session == 0 || r.Session == 12345 || r.Counter != 9 || len(r.Entries) != 0 {
		t.Fatalf("reply %v %+v", ok, r)
	}
	id, _ := p.Session(sub(1))
	if id != r.Session {
		t.Fatal("reply names a session the publisher does not keep")
	}
	// Again for a repeat on the old id; the same new id.
	r2, _ := p.Heartbeat(sub(1), 12345, 9, []byte("hb"), laneA, room, time.Second)
	if r2.Session != id || p.Stats().WrongSession != 2 || p.Stats().Opened != 1 {
		t.Fatalf("repeat %+v %+v", r2, p.Stats())
	}
}

func TestPublisherExpiresSilentSubscribers(t *testing.T) {
	p := NewPublisher(NewIDSource(1))
	id, _ := p.Subscribe(sub(1), "a", 0)
	p.Subscribe(sub(2), "a", 0)
	p.Subscribe(sub(2), "b", 0)
	// sub(1) keeps heartbeating; sub(2) falls silent.
	var rs []Reply
	for now := time.Duration(0); now <= 3*SessionTimeout; now += time.Second {
		if now%(HoldTime) == 0 {
			p.Heartbeat(sub(1), id, uint64(now/time.Second)+1, nil, laneA, room, now)
		}
		p.Tick(now, collect(&rs))
	}
	if p.Sessions() != 1 || p.Waiting() != 1 || p.Stats().Expired != 1 {
		t.Fatalf("sessions %d waiting %d stats %+v", p.Sessions(), p.Waiting(), p.Stats())
	}
	if _, ok := p.Session(sub(2)); ok {
		t.Fatal("silent subscriber's session kept")
	}
	// Growing a path only the expired session waited for touches nothing.
	p.Grow("b", []byte("B"), collect(&rs))
	if len(p.waiting) != 1 {
		t.Fatalf("index holds %d paths", len(p.waiting))
	}
	// The timer heap holds at most one timer of each kind per session.
	if p.timers.Len() > 2*p.Sessions() {
		t.Fatalf("%d timers for %d sessions", p.timers.Len(), p.Sessions())
	}
}

func TestPublisherCaps(t *testing.T) {
	p := NewPublisher(NewIDSource(1))
	for i := 0; i < MaxPathsPerSubscriber; i++ {
		if _, st := p.Subscribe(sub(1), string(rune('a'+i%26))+string(rune(i)), 0); st != scry.NotifyPending {
			t.Fatalf("path %d refused", i)
		}
	}
	id, st := p.Subscribe(sub(1), "one too many", 0)
	if st != scry.NotifyRefused || id == 0 {
		t.Fatalf("past the cap: %v %v", id, st)
	}
	if p.Stats().Refused != 1 || p.Waiting() != MaxPathsPerSubscriber {
		t.Fatalf("stats %+v waiting %d", p.Stats(), p.Waiting())
	}
}

func TestPublisherHeldLanesBounded(t *testing.T) {
	p := NewPublisher(NewIDSource(1))
	id, _ := p.Subscribe(sub(1), "a", 0)
	for _, l := range []netip.AddrPort{laneA, laneB, laneA, laneC} {
		p.Heartbeat(sub(1), id, 1, nil, l, room, 0)
	}
	var rs []Reply
	p.Grow("a", nil, collect(&rs))
	if len(rs) != 1 || len(rs[0].To) != MaxHeldLanes || rs[0].To[0] != laneB || rs[0].To[1] != laneC {
		t.Fatalf("lanes %+v", rs)
	}
}

func TestPublisherNewSessionNeverRepeatsTheOldID(t *testing.T) {
	// A publisher restarted with the same seed draws the same ids; the
	// session it opens for a heartbeat must still differ from the
	// heartbeat's, or the subscriber would not notice the restart.
	first := NewIDSource(5)
	old := first.Next()
	p := NewPublisher(NewIDSource(5))
	r, ok := p.Heartbeat(sub(1), old, 3, nil, laneA, room, 0)
	if !ok || r.Session == old || r.Session == 0 {
		t.Fatalf("answer names session %v, the heartbeat's was %v", r.Session, old)
	}
}

// TestPublisherRestartedSubscriberKeepsSession pins the rule a restarted
// subscriber relies on (doc.go, "Heartbeat counters"): on a live session a
// higher counter is a new heartbeat whatever the gap, so the restarted
// run's first heartbeat replaces the one its previous run left held; a
// lower counter, such as a replay of the previous run's, changes nothing.
func TestPublisherRestartedSubscriberKeepsSession(t *testing.T) {
	p := NewPublisher(NewIDSource(1))
	id, _ := p.Subscribe(sub(1), "v/1", 0)
	// The previous run's heartbeat is held.
	p.Heartbeat(sub(1), id, 1000, []byte("hb1000"), laneA, room, time.Second)
	// The new run, acked on the same session, starts far above it.
	id2, _ := p.Subscribe(sub(1), "v/1", 5*time.Second)
	if id2 != id {
		t.Fatalf("session changed: %v %v", id2, id)
	}
	if _, ok := p.Heartbeat(sub(1), id, 1<<40, []byte("hbnew"), laneB, room, 5*time.Second); ok {
		t.Fatal("new run's heartbeat answered with nothing grown")
	}
	// A replay of the previous run's heartbeats: ignored, the hold stays.
	for _, n := range []uint64{1000, 999, 1001} {
		if _, ok := p.Heartbeat(sub(1), id, n, []byte("old"), laneC, room, 6*time.Second); ok {
			t.Fatalf("replayed counter %d answered", n)
		}
	}
	var rs []Reply
	p.Grow("v/1", []byte("one"), collect(&rs))
	if len(rs) != 1 || rs[0].Counter != 1<<40 || string(rs[0].Name) != "hbnew" ||
		len(rs[0].To) != 1 || rs[0].To[0] != laneB || len(rs[0].Entries) != 1 {
		t.Fatalf("replies %+v", rs)
	}
	if s := p.Stats(); s.Stale != 3 || s.Opened != 1 {
		t.Fatalf("stats %+v", s)
	}
}
