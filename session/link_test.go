package session

import (
	"testing"
	"time"
)

func TestLinkSessions(t *testing.T) {
	l := NewLink(100)
	if l.Alive(0) {
		t.Fatal("alive before hearing anything")
	}
	if h := l.Hear(7, time.Second); h != HeardFirst || l.Session() != 7 {
		t.Fatalf("first: %v %v", h, l.Session())
	}
	if h := l.Hear(7, 2*time.Second); h != HeardSame {
		t.Fatalf("same: %v", h)
	}
	if h := l.Hear(9, 3*time.Second); h != HeardNew || l.Session() != 9 {
		t.Fatalf("new: %v %v", h, l.Session())
	}
	// A late message on the old session must not move the link back.
	if h := l.Hear(7, 4*time.Second); h != HeardStale || l.Session() != 9 {
		t.Fatalf("stale: %v %v", h, l.Session())
	}
	if h := l.Hear(0, 4*time.Second); h != HeardStale {
		t.Fatalf("zero id: %v", h)
	}
	// Stale messages do not count as hearing the publisher.
	if !l.Alive(3*time.Second+LinkTimeout-1) || l.Alive(3*time.Second+LinkTimeout) {
		t.Fatal("liveness not measured from the last fresh message")
	}
}

func TestLinkRemembersDeadSessions(t *testing.T) {
	l := NewLink(0)
	for id := ID(1); id <= MaxDeadSessions+1; id++ {
		l.Hear(id, 0)
	}
	// Sessions 1..MaxDeadSessions were left behind, in order.
	for id := ID(1); id <= MaxDeadSessions; id++ {
		if h := l.Hear(id, 0); h != HeardStale {
			t.Errorf("session %d: %v", id, h)
		}
	}
	// Memory is bounded: the oldest is forgotten when one more is left.
	l.Hear(MaxDeadSessions+2, 0)
	if h := l.Hear(1, 0); h == HeardStale {
		t.Error("remembered more than MaxDeadSessions ids")
	}
}

func TestLinkHeartbeats(t *testing.T) {
	l := NewLink(41)
	if _, ok := l.Deadline(); ok {
		t.Fatal("deadline before any heartbeat")
	}
	n := l.Beat(0)
	if n != 42 {
		t.Fatalf("first counter %d", n)
	}
	if l.Resend(HeartbeatResend - 1) {
		t.Fatal("re-sent before HeartbeatResend")
	}
	if !l.Resend(HeartbeatResend) || l.Resend(HeartbeatResend) {
		t.Fatal("repeat not scheduled once")
	}
	if d, _ := l.Deadline(); d != 2*HeartbeatResend {
		t.Fatalf("next repeat at %v", d)
	}
	if l.Answered(41) {
		t.Fatal("an answer to another heartbeat was taken")
	}
	if !l.Answered(42) || l.Answered(42) {
		t.Fatal("answer not taken exactly once")
	}
	if l.Resend(time.Hour) {
		t.Fatal("answered heartbeat re-sent")
	}
	if l.Beat(time.Hour) != 43 {
		t.Fatal("counter did not advance")
	}
	l.Stop()
	if _, ok := l.Beating(); ok {
		t.Fatal("still beating after Stop")
	}
}

func TestIDSource(t *testing.T) {
	a, b := NewIDSource(1), NewIDSource(2)
	seen := map[ID]bool{}
	for i := 0; i < 1000; i++ {
		x, y := a.Next(), b.Next()
		if x == 0 || y == 0 || seen[x] || seen[y] || x == y {
			t.Fatalf("id repeated or zero at %d", i)
		}
		seen[x], seen[y] = true, true
	}
	if got := ID(0xab).String(); got != "00000000000000ab" {
		t.Errorf("String %q", got)
	}
}
