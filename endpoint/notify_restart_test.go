package endpoint_test

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
	"github.com/urbit-relay/relay/session"
)

// TestNotifySubscriberRestartWithinSessionTimeout: a subscriber restarts
// (a new process, the same ship and address, a new seed) while the
// publisher still holds its session. The new process's subscription is
// acked on that live session, so its heartbeats must be taken as newer
// than its previous run's: a value grown after the restart arrives in the
// held heartbeat's answer, one one-way trip through the relay, not when
// the link dies a minute later. Twenty seeded runs: before heartbeat
// counters were made to increase across restarts, a new run drew a
// random counter below its previous run's in about half of them, and
// every heartbeat was ignored as stale.
func TestNotifySubscriberRestartWithinSessionTimeout(t *testing.T) {
	const runs = 20
	late := 0
	var slowest time.Duration
	for run := 1; run <= runs; run++ {
		var took time.Duration
		synctest.Test(t, func(t *testing.T) {
			took = subscriberRestartRun(t, uint64(2*run+1), uint64(2*run+2))
		})
		slowest = max(slowest, took)
		// Through the relay: two links of 5 ms each way; a round trip
		// is 20 ms.
		if took > 20*time.Millisecond {
			late++
			t.Errorf("run %d: the value grown after the restart took %v", run, took)
		}
	}
	if late > 0 {
		t.Errorf("%d of %d runs late", late, runs)
	}
	t.Logf("%d runs; slowest value after the restart took %v", runs, slowest)
}

// subscriberRestartRun runs one restart with the two processes' seeds and
// returns how long the value took to arrive after it grew.
func subscriberRestartRun(t *testing.T, seed1, seed2 uint64) time.Duration {
	mem := transporttest.NewMemNetwork()
	mem.SetDelay(5 * time.Millisecond)
	n := newNotifyNet(t, mem)
	defer n.close()
	pub := n.addPublisher(0, netip.MustParseAddrPort("127.0.0.1:0"), true)
	n.waitRelayKnows(0)
	// Both runs: the same ship on the same address, a seed of their own.
	ship, addr := lane.ShipFromUint64(0x20200), netip.MustParseAddrPort("127.0.0.1:40000")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The first run subscribes, is acked and heartbeats for a while (a
	// few heartbeats, so its counter has moved on from its start).
	first := n.startSubscriber(ship, addr, seed1, nil)
	go first.Subscribe(ctx, n.pubShip(0), "v/1")
	time.Sleep(70 * time.Second)
	if st := first.NotifyStats(); st.Acks != 1 || st.Beats < 3 {
		t.Fatalf("first run: %+v", st)
	}
	// It dies and a new run starts 5 s later, well within
	// SessionTimeout: the publisher still holds the session.
	first.Close()
	time.Sleep(5 * time.Second)
	if st := pub.NotifyStats(); st.Sessions != 1 {
		t.Fatalf("publisher lost the session: %+v", st)
	}
	second := n.startSubscriber(ship, addr, seed2, nil)
	defer second.Close()
	got := make(chan endpoint.Response, 1)
	go func() {
		r, err := second.Subscribe(ctx, n.pubShip(0), "v/1")
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	// Acked on the live session, then heartbeating on it.
	time.Sleep(10 * time.Second)
	if st := second.NotifyStats(); st.Acks != 1 || st.NewSessions != 0 {
		t.Fatalf("second run: %+v", st)
	}
	if ps := pub.NotifyStats(); ps.Publisher.Opened != 1 {
		t.Fatalf("the restart opened a new session: %+v", ps.Publisher)
	}
	grewAt := time.Now()
	grow(pub, 1, 1)
	r := <-got
	took := time.Since(grewAt)
	if !bytes.Equal(r.Data, value(1)) {
		t.Fatalf("got %q", r.Data)
	}
	if took < session.LinkTimeout && !r.Notified {
		t.Errorf("value came as a plain page after %v", took)
	}
	return took
}
