package endpoint_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
	"github.com/urbit-relay/relay/session"
)

// The scry-notification tests run subscriber and publisher Endpoints
// through a real relay of this project (relay.New + relay.NewServer): on a
// transporttest.MemNetwork inside a testing/synctest bubble (virtual time, so
// minutes of heartbeats take milliseconds), and the first also on real UDP.
//
// The network: one relay fronting the star ~marzod; publishers are planets
// under ~marzod, behind NAT-style firewalls (a subscriber cannot reach them
// directly, so every notification crosses the relay and depends on its
// pending entries); subscribers are planets that know ~marzod's lane.

// notifyNet is the test network.
type notifyNet struct {
	t       *testing.T
	mem     *transporttest.MemNetwork // nil for real UDP
	star    lane.Ship
	relayAt netip.AddrPort
	server  *relay.Server
	// starEP is the star's own process behind the relay (its ship lane):
	// the relay learns a publisher's lane by handing its ping to it.
	starEP   *endpoint.Endpoint
	starAt   netip.AddrPort
	pubs     []*endpoint.Endpoint
	pubKeys  map[lane.Ship]ed25519.PublicKey
	subs     []*endpoint.Endpoint
	subStats []*subTrace
	boots    int
}

// subTrace counts one subscriber's events.
type subTrace struct {
	mu         sync.Mutex
	subscribes int            // EventSubscribe: subscription requests sent
	beats      int            // EventBeat
	acks       int            // EventAck
	values     map[string]int // EventValue per path: must never exceed 1
}

func (s *subTrace) observe(e endpoint.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Kind {
	case endpoint.EventSubscribe:
		s.subscribes++
	case endpoint.EventBeat:
		s.beats++
	case endpoint.EventAck:
		s.acks++
	case endpoint.EventValue:
		s.values[e.Path]++
	}
}

func (s *subTrace) snapshot() (subscribes, beats, acks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subscribes, s.beats, s.acks
}

func shipOf(t testing.TB, s string) lane.Ship {
	t.Helper()
	v, err := lane.ParseShip(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func key(n int) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0], seed[1] = byte(n), byte(n>>8)
	return ed25519.NewKeyFromSeed(seed)
}

func newNotifyNet(t *testing.T, mem *transporttest.MemNetwork) *notifyNet {
	n := &notifyNet{t: t, mem: mem, star: shipOf(t, "~marzod"), pubKeys: map[lane.Ship]ed25519.PublicKey{}}
	c := n.listen(netip.MustParseAddrPort("127.0.0.1:0"))
	n.relayAt = c.LocalAddr()
	sc := n.listen(netip.MustParseAddrPort("127.0.0.1:0"))
	n.starAt = sc.LocalAddr()
	ep, err := endpoint.New(endpoint.Config{Ship: n.star, PingInterval: -1, HintNets: loopbackNets}, sc)
	if err != nil {
		t.Fatal(err)
	}
	n.starEP = ep
	ep.Start()
	n.startRelay(c)
	return n
}

func (n *notifyNet) listen(addr netip.AddrPort) transport.Conn {
	n.t.Helper()
	var c transport.Conn
	var err error
	if n.mem != nil {
		c, err = n.mem.Listen(addr)
	} else {
		c, err = transport.ListenUDP(addr, transport.Options{})
	}
	if err != nil {
		n.t.Fatal(err)
	}
	return c
}

// startRelay runs a fresh relay for ~marzod on c.
func (n *notifyNet) startRelay(c transport.Conn) {
	r, err := relay.New(relay.Config{HintNets: loopbackNets, Ship: n.star, ShipLane: n.starAt, Self: []netip.AddrPort{c.LocalAddr()}})
	if err != nil {
		n.t.Fatal(err)
	}
	n.server = relay.NewServer(r, []transport.Conn{c}, relay.ServerConfig{})
	n.server.Start()
}

// restartRelay closes the relay and starts a new one on the same address:
// every pending entry and learned lane is lost.
func (n *notifyNet) restartRelay(down time.Duration) {
	n.server.Close()
	time.Sleep(down)
	n.startRelay(n.listen(n.relayAt))
}

// pubShip returns publisher i's ship: a planet under ~marzod.
func (n *notifyNet) pubShip(i int) lane.Ship { return lane.ShipFromUint64(uint64(0x10100 + i<<16)) }

// addPublisher starts publisher i on addr (port 0 for any), running the
// protocol if withKey. Its key pair is key(1000+i) either way, so its
// subscribers know its public key.
func (n *notifyNet) addPublisher(i int, addr netip.AddrPort, withKey bool) *endpoint.Endpoint {
	ship := n.pubShip(i)
	k := key(1000 + i)
	n.pubKeys[ship] = k.Public().(ed25519.PublicKey)
	n.boots++ // a restarted publisher draws new session ids
	cfg := endpoint.Config{Ship: ship, Lanes: map[lane.Ship]netip.AddrPort{n.star: n.relayAt}, Seed: uint64(n.boots), HintNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if withKey {
		cfg.Key = k
	}
	c := n.listen(addr)
	if n.mem != nil {
		n.mem.SetFirewall(c.LocalAddr(), true)
	}
	e, err := endpoint.New(cfg, c)
	if err != nil {
		n.t.Fatal(err)
	}
	e.Start()
	for len(n.pubs) <= i {
		n.pubs = append(n.pubs, nil)
	}
	n.pubs[i] = e
	return e
}

// addSubscribers starts count subscribers.
func (n *notifyNet) addSubscribers(count int) {
	for i := 0; i < count; i++ {
		tr := &subTrace{values: map[string]int{}}
		e := n.startSubscriber(lane.ShipFromUint64(uint64(0x20200+len(n.subs)<<16)),
			netip.MustParseAddrPort("127.0.0.1:0"), uint64(100+len(n.subs)), tr.observe)
		n.subs = append(n.subs, e)
		n.subStats = append(n.subStats, tr)
	}
}

// startSubscriber starts a subscriber endpoint for ship on addr that knows
// the relay and the publishers' keys; the caller closes it.
func (n *notifyNet) startSubscriber(ship lane.Ship, addr netip.AddrPort, seed uint64, observe func(endpoint.Event)) *endpoint.Endpoint {
	e, err := endpoint.New(endpoint.Config{
		HintNets:     []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Ship:         ship,
		PingInterval: -1,
		Lanes:        map[lane.Ship]netip.AddrPort{n.star: n.relayAt},
		PeerKeys:     n.pubKeys,
		Seed:         seed,
		Observe:      observe,
	}, n.listen(addr))
	if err != nil {
		n.t.Fatal(err)
	}
	e.Start()
	return e
}

func (n *notifyNet) close() {
	for _, s := range n.subs {
		s.Close()
	}
	for _, p := range n.pubs {
		if p != nil {
			p.Close()
		}
	}
	n.server.Close()
	n.starEP.Close()
}

// waitRelayKnows waits until the relay has learned publisher i's lane from
// its pings.
func (n *notifyNet) waitRelayKnows(i int) {
	n.t.Helper()
	for try := 0; try < 300; try++ {
		if k, ok := n.server.Relay().Routes().Placed(n.pubShip(i)); ok && k.AddrPort() == n.pubs[i].Addr() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.t.Fatalf("relay never learned publisher %d's lane", i)
}

// follow makes every subscriber follow the sequence v/1..v/last on
// publisher pubOf(subscriber): it subscribes to v/k, and to v/k+1 once v/k
// arrives. It returns a function that waits for them all and checks that
// each got every value, in order, once.
func (n *notifyNet) follow(ctx context.Context, last int, pubOf func(int) int) (wait func()) {
	var wg sync.WaitGroup
	errs := make([]error, len(n.subs))
	for i, s := range n.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pub := n.pubShip(pubOf(i))
			for k := 1; k <= last; k++ {
				path := fmt.Sprintf("v/%d", k)
				r, err := s.Subscribe(ctx, pub, path)
				if err != nil {
					errs[i] = fmt.Errorf("subscriber %d, %s: %w", i, path, err)
					return
				}
				if want := value(k); !bytes.Equal(r.Data, want) {
					errs[i] = fmt.Errorf("subscriber %d, %s: got %q, want %q", i, path, r.Data, want)
					return
				}
			}
		}()
	}
	return func() {
		n.t.Helper()
		wg.Wait()
		failed := 0
		for _, err := range errs {
			if err != nil && failed < 5 {
				n.t.Error(err)
			}
			if err != nil {
				failed++
			}
		}
		if failed > 0 {
			n.t.Fatalf("%d of %d subscribers failed", failed, len(n.subs))
		}
		for i, tr := range n.subStats {
			tr.mu.Lock()
			for k := 1; k <= last; k++ {
				if c := tr.values[fmt.Sprintf("v/%d", k)]; c != 1 {
					n.t.Errorf("subscriber %d got v/%d as new %d times", i, k, c)
				}
			}
			tr.mu.Unlock()
		}
	}
}

func value(k int) []byte { return []byte(fmt.Sprintf("value %d", k)) }

// grow publishes v/from..v/to on publisher p.
func grow(p *endpoint.Endpoint, from, to int) {
	for k := from; k <= to; k++ {
		p.Publish(fmt.Sprintf("v/%d", k), value(k))
	}
}

// waitAcked waits until every subscriber has taken at least n acks.
func (n *notifyNet) waitAcked(atLeast int, limit time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		all := true
		for _, tr := range n.subStats {
			if _, _, acks := tr.snapshot(); acks < atLeast {
				all = false
				break
			}
		}
		if all {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.t.Fatalf("subscribers not acked within %v", limit)
}

// TestNotifySubscribeBeforeGrow: a subscriber asks for a value that does
// not exist yet; the publisher acks; the subscriber stops re-sending and
// heartbeats; the value grows and arrives at once, through the relay.
func TestNotifySubscribeBeforeGrow(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := transporttest.NewMemNetwork()
			mem.SetDelay(5 * time.Millisecond)
			testSubscribeBeforeGrow(t, mem, 5*time.Minute)
		})
	})
	t.Run("udp", func(t *testing.T) {
		transporttest.CheckGoroutineLeaks(t)
		testSubscribeBeforeGrow(t, nil, 300*time.Millisecond)
	})
}

func testSubscribeBeforeGrow(t *testing.T, mem *transporttest.MemNetwork, idle time.Duration) {
	n := newNotifyNet(t, mem)
	defer n.close()
	pub := n.addPublisher(0, netip.MustParseAddrPort("127.0.0.1:0"), true)
	n.addSubscribers(1)
	n.waitRelayKnows(0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	got := make(chan endpoint.Response, 1)
	go func() {
		r, err := n.subs[0].Subscribe(ctx, n.pubShip(0), "v/1")
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	n.waitAcked(1, 10*time.Second)
	tr := n.subStats[0]
	subscribes, beats, _ := tr.snapshot()
	if subscribes != 1 {
		t.Errorf("%d subscription sends before the ack, want 1", subscribes)
	}
	time.Sleep(idle)
	subscribes2, beats2, _ := tr.snapshot()
	if subscribes2 != subscribes {
		t.Errorf("subscriber re-sent its subscription %d times after the ack", subscribes2-subscribes)
	}
	if mem != nil {
		want := int(idle / session.HoldTime)
		if b := beats2 - beats; b < want-1 || b > want+1 {
			t.Errorf("%d heartbeats in %v, want about %d", b, idle, want)
		}
		if st := n.pubs[0].NotifyStats(); st.Sessions != 1 || st.Waiting != 1 {
			t.Errorf("publisher state %+v", st)
		}
	}
	grewAt := time.Now()
	grow(pub, 1, 1)
	r := <-got
	if !bytes.Equal(r.Data, value(1)) || !r.Notified {
		t.Fatalf("got %+v", r)
	}
	if mem != nil {
		// The held heartbeat's answer crosses the relay: two links of 5 ms.
		if d := time.Since(grewAt); d > 20*time.Millisecond {
			t.Errorf("value took %v after growing", d)
		}
		if r.Hops != 1 {
			t.Errorf("value came at hop %d, want 1 (through the relay)", r.Hops)
		}
	}
}

// TestNotifyThousandSubscribersLossy: 1,000 subscribers of two publishers
// through one relay, 20% loss on every link in both directions, values
// grown in bursts: every subscriber gets every value, none twice as new.
func TestNotifyThousandSubscribersLossy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const subscribers, bursts, perBurst = 1000, 2, 3
		mem := transporttest.NewMemNetwork()
		mem.SetDelay(5 * time.Millisecond)
		mem.SetQueueLen(1 << 14)
		n := newNotifyNet(t, mem)
		defer n.close()
		for i := 0; i < 2; i++ {
			n.addPublisher(i, netip.MustParseAddrPort("127.0.0.1:0"), true)
		}
		n.addSubscribers(subscribers)
		n.waitRelayKnows(0)
		n.waitRelayKnows(1)
		mem.SetLossRate(0.2)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		start := time.Now()
		wait := n.follow(ctx, bursts*perBurst, func(i int) int { return i % 2 })
		for b := 0; b < bursts; b++ {
			time.Sleep(40 * time.Second)
			for _, p := range n.pubs {
				grow(p, b*perBurst+1, (b+1)*perBurst)
			}
		}
		wait()
		var acks, beats, repeats, newSessions, notified uint64
		for _, s := range n.subs {
			st := s.NotifyStats()
			notified += st.Notified
			acks += st.Acks
			beats += st.Beats
			repeats += st.BeatRepeats
			newSessions += st.NewSessions
		}
		// Most values come in notifications (acks carrying them, or
		// heartbeat answers); the rest as plain pages, to subscriptions
		// polling because no ack had got through yet or because a link
		// went a minute without an answer (at 20% loss a round trip
		// crosses four lossy links and fails 59% of the time).
		if total := uint64(subscribers * bursts * perBurst); notified < total/2 {
			t.Errorf("only %d of %d values came in notifications", notified, total)
		}
		snap := n.server.Relay().Counters().Snapshot()
		t.Logf("all values delivered after %v (virtual); %d in notifications; acks %d heartbeats %d repeats %d new sessions %d; relay drops %v",
			time.Since(start), notified, acks, beats, repeats, newSessions, snap.Drops)
	})
}

// TestNotifyPublisherRestart: the publisher restarts (a new process on the
// same address, new session ids) with values grown before and after:
// subscribers notice the new session, subscribe again, and get every value
// once.
func TestNotifyPublisherRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		mem.SetDelay(5 * time.Millisecond)
		n := newNotifyNet(t, mem)
		defer n.close()
		pub := n.addPublisher(0, netip.MustParseAddrPort("127.0.0.1:0"), true)
		addr := pub.Addr()
		n.addSubscribers(20)
		n.waitRelayKnows(0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		wait := n.follow(ctx, 4, func(int) int { return 0 })
		n.waitAcked(1, 10*time.Second)
		grow(pub, 1, 1)
		time.Sleep(30 * time.Second)
		// Crash: the process and its sessions are gone; a new one
		// starts 10 s later on the same address with what it had
		// published (it is in its event log) and new session ids.
		pub.Close()
		time.Sleep(10 * time.Second)
		pub = n.addPublisher(0, addr, true)
		grow(pub, 1, 2) // v/2 grew while it was down
		time.Sleep(90 * time.Second)
		grow(pub, 3, 4)
		wait()
		var newSessions uint64
		for _, s := range n.subs {
			newSessions += s.NotifyStats().NewSessions
		}
		if newSessions < uint64(len(n.subs)) {
			t.Errorf("%d session changes seen by %d subscribers", newSessions, len(n.subs))
		}
	})
}

// TestNotifySubscriberSilent: a subscriber that falls silent (its process
// is gone) is forgotten by the publisher after the session timeout.
func TestNotifySubscriberSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		mem.SetDelay(5 * time.Millisecond)
		n := newNotifyNet(t, mem)
		defer n.close()
		pub := n.addPublisher(0, netip.MustParseAddrPort("127.0.0.1:0"), true)
		n.addSubscribers(2)
		n.waitRelayKnows(0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, s := range n.subs {
			for _, path := range []string{"v/1", "v/2", "w"} {
				go s.Subscribe(ctx, n.pubShip(0), path)
			}
		}
		n.waitAcked(3, 10*time.Second)
		if st := pub.NotifyStats(); st.Sessions != 2 || st.Waiting != 6 {
			t.Fatalf("publisher before: %+v", st)
		}
		n.subs[1].Close()
		time.Sleep(session.SessionTimeout + session.HoldTime + time.Second)
		st := pub.NotifyStats()
		if st.Sessions != 1 || st.Waiting != 3 || st.Publisher.Expired != 1 {
			t.Fatalf("publisher after the silent subscriber's timeout: sessions %d waiting %d expired %d",
				st.Sessions, st.Waiting, st.Publisher.Expired)
		}
	})
}

// TestNotifyRelayRestart: the relay restarts in the middle, losing every
// pending entry (the held heartbeats' among them) and learned lane; values
// grow while it is down and after: nothing is lost.
func TestNotifyRelayRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		mem.SetDelay(5 * time.Millisecond)
		n := newNotifyNet(t, mem)
		defer n.close()
		pub := n.addPublisher(0, netip.MustParseAddrPort("127.0.0.1:0"), true)
		n.addSubscribers(20)
		n.waitRelayKnows(0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		wait := n.follow(ctx, 3, func(int) int { return 0 })
		n.waitAcked(1, 10*time.Second)
		time.Sleep(7 * time.Second) // heartbeats held mid-way
		done := make(chan struct{})
		go func() {
			n.restartRelay(15 * time.Second)
			close(done)
		}()
		time.Sleep(5 * time.Second)
		grow(pub, 1, 1) // the answers die at the closed relay
		<-done
		time.Sleep(time.Second)
		grow(pub, 2, 2) // the new relay has no entries for the held heartbeats
		time.Sleep(45 * time.Second)
		grow(pub, 3, 3)
		wait()
		// v/1's notifications died with the old relay: every subscriber
		// got v/1 by repeating its heartbeat.
		for i, s := range n.subs {
			if st := s.NotifyStats(); st.BeatRepeats == 0 {
				t.Errorf("subscriber %d never repeated a heartbeat: %+v", i, st)
			}
		}
	})
}

// TestNotifyPublisherWithoutProtocol: the publisher does not run the
// protocol; subscribers never get an ack, keep polling, and still get the
// value.
func TestNotifyPublisherWithoutProtocol(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		mem.SetDelay(5 * time.Millisecond)
		n := newNotifyNet(t, mem)
		defer n.close()
		pub := n.addPublisher(0, netip.MustParseAddrPort("127.0.0.1:0"), false)
		n.addSubscribers(20)
		n.waitRelayKnows(0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		wait := n.follow(ctx, 1, func(int) int { return 0 })
		time.Sleep(5 * time.Minute)
		var polled atomic.Int64
		for _, tr := range n.subStats {
			subscribes, beats, acks := tr.snapshot()
			if acks != 0 || beats != 0 {
				t.Fatalf("acks %d beats %d from a publisher without the protocol", acks, beats)
			}
			polled.Add(int64(subscribes))
		}
		if p := polled.Load() / int64(len(n.subs)); p < 7 {
			t.Errorf("%d polls per subscriber in 5 minutes", p)
		}
		grewAt := time.Now()
		grow(pub, 1, 1)
		wait()
		// Within two polls: the relay aggregates the subscribers' polls
		// of the same name, at most 16 per pending entry, and the
		// others' polls are dropped until that entry is answered.
		if d := time.Since(grewAt); d > 2*endpoint.PollInterval+time.Second {
			t.Errorf("value took %v", d)
		}
	})
}

// loopbackNets declares loopback a network that next-hops may name: every
// lane here is on 127.0.0.1.
var loopbackNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// TestEndpointDownloadsAndGivesUp runs two Endpoints on an in-memory
// network in virtual time: a Peek of a value served in fragments returns
// the whole value, and a Peek nobody answers fails with ErrGaveUp after
// MaxTries sends.
func TestEndpointDownloadsAndGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		mem.SetDelay(20 * time.Millisecond)
		defer mem.Close()
		pubShip, err := lane.ParseShip("~nec")
		if err != nil {
			t.Fatal(err)
		}
		reqShip, err := lane.ParseShip("~sampel-palnet")
		if err != nil {
			t.Fatal(err)
		}
		listen := func(s string) transport.Conn {
			c, err := mem.Listen(netip.MustParseAddrPort(s))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		pubLane := netip.MustParseAddrPort("10.0.0.9:13337")
		pub, err := endpoint.New(endpoint.Config{Ship: pubShip, FragmentSize: 100, Seed: 1}, listen(pubLane.String()))
		if err != nil {
			t.Fatal(err)
		}
		req, err := endpoint.New(endpoint.Config{Ship: reqShip, PingInterval: -1, MaxTries: 2, Window: 3, Seed: 2,
			Lanes: map[lane.Ship]netip.AddrPort{pubShip: pubLane}}, listen("10.0.0.1:1000"))
		if err != nil {
			t.Fatal(err)
		}
		pub.Start()
		req.Start()
		defer pub.Close()
		defer req.Close()
		value := bytes.Repeat([]byte("0123456789"), 105) // 11 fragments of 100
		pub.Publish("v", value)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := req.Peek(ctx, pubShip, "v")
		if err != nil || !bytes.Equal(r.Data, value) {
			t.Fatalf("peek: %d bytes, err %v", len(r.Data), err)
		}
		start := time.Now()
		_, err = req.Peek(ctx, pubShip, "nothing")
		if !errors.Is(err, endpoint.ErrGaveUp) {
			t.Fatalf("an unanswered peek: %v, want ErrGaveUp", err)
		}
		if took := time.Since(start); took < 2*endpoint.DefaultRetryInterval || took > 3*endpoint.DefaultRetryInterval {
			t.Errorf("gave up after %v, want two retry intervals", took)
		}
	})
}
