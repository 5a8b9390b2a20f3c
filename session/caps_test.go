package session

import (
	"testing"

	"github.com/urbit-relay/relay/scry"
)

// TestPublisherSessionCap: at MaxSessions live sessions a new subscriber
// gets no session: Open reports false and Subscribe refuses with id 0 and
// counts it, while a subscriber that has a session keeps being served. It
// kills the mutants gremlins found uncovered in Open (the nil check
// negated) and Subscribe (the Refused count).
func TestPublisherSessionCap(t *testing.T) {
	p := NewPublisher(NewIDSource(1))
	for i := range MaxSessions {
		if _, ok := p.Open(sub(uint64(i)), 0); !ok {
			t.Fatalf("session %d refused below the cap", i)
		}
	}
	if id, ok := p.Open(sub(MaxSessions), 0); ok || id != 0 {
		t.Fatalf("Open past the cap = %v, %v; want 0, false", id, ok)
	}
	if id, st := p.Subscribe(sub(MaxSessions), "v/1", 0); id != 0 || st != scry.NotifyRefused {
		t.Fatalf("Subscribe past the cap = %v, %v; want 0, refused", id, st)
	}
	if got := p.Stats().Refused; got != 1 {
		t.Errorf("refused %d, want 1", got)
	}
	if id, st := p.Subscribe(sub(0), "v/1", 0); id == 0 || st != scry.NotifyPending {
		t.Errorf("existing subscriber at the cap: %v, %v; want its session, pending", id, st)
	}
	if p.Sessions() != MaxSessions || p.Stats().Opened != MaxSessions {
		t.Errorf("sessions %d opened %d, want %d", p.Sessions(), p.Stats().Opened, MaxSessions)
	}
}
