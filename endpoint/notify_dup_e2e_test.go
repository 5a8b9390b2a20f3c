package endpoint_test

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
	"github.com/urbit-relay/relay/session"
)

// TestNotifyDuplicateAcksChangeNothing: with a round trip through the
// relay (4 s) longer than the subscriber's first re-sends (1 s, then 2 s),
// the subscription request goes out again before its ack is back, and the
// publisher acks each copy that reaches it: the subscriber takes duplicate
// pending acks. A duplicate ack is a repeat (docs/protocol.md, "How
// anything lost is recovered"): the publisher keeps one session and one
// waiting subscription, the subscriber keeps one heartbeat stream on it,
// the value is delivered once, and heartbeats stop after it. It guards
// against a duplicate ack being taken as a second state change: the
// subscriber counting an acked subscription twice (takeAck moving a
// subscription already acked to acked again, so its link's count never
// returns to 0 and it heartbeats forever), or the publisher answering a
// repeated subscription request on a new session.
func TestNotifyDuplicateAcksChangeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		mem.SetDelay(time.Second)
		n := newNotifyNet(t, mem)
		defer n.close()
		pub := n.addPublisher(0, netip.MustParseAddrPort("127.0.0.1:0"), true)
		n.addSubscribers(1)
		n.waitRelayKnows(0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		got := make(chan endpoint.Response, 2)
		go func() {
			r, err := n.subs[0].Subscribe(ctx, n.pubShip(0), "v/1")
			if err != nil {
				t.Error(err)
			}
			got <- r
		}()
		time.Sleep(10 * time.Second)
		st := n.subs[0].NotifyStats()
		if st.Acks < 2 {
			t.Fatalf("%d acks taken, want duplicates: %+v", st.Acks, st)
		}
		if st.NewSessions != 0 || st.Beats != 1 {
			t.Errorf("duplicate acks: %d session changes, %d heartbeats started, want 0 and 1", st.NewSessions, st.Beats)
		}
		if ps := pub.NotifyStats(); ps.Sessions != 1 || ps.Waiting != 1 || ps.Publisher.Opened != 1 {
			t.Errorf("publisher %+v, want one session with one waiting subscription", ps)
		}
		grow(pub, 1, 1)
		r := <-got
		if string(r.Data) != string(value(1)) || !r.Notified {
			t.Fatalf("got %+v", r)
		}
		time.Sleep(session.HoldTime + 2*session.HeartbeatResend)
		tr := n.subStats[0]
		_, beats, _ := tr.snapshot()
		time.Sleep(5 * time.Minute)
		_, beats2, _ := tr.snapshot()
		if beats2 != beats {
			t.Errorf("%d heartbeats with no subscription left", beats2-beats)
		}
		tr.mu.Lock()
		if c := tr.values["v/1"]; c != 1 {
			t.Errorf("v/1 delivered %d times", c)
		}
		tr.mu.Unlock()
		if len(got) != 0 {
			t.Error("delivered twice")
		}
	})
}
