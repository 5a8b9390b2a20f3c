package sim

import (
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

const testShips = 400

func newNet(t *testing.T, cfg Config) *Network {
	t.Helper()
	if cfg.Ships == 0 {
		cfg.Ships = testShips
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pick returns the first ship satisfying ok, failing the test if none does.
func pick(t *testing.T, n *Network, ok func(i int, s *Ship) bool) int {
	t.Helper()
	for i := range n.Ships() {
		if ok(i, &n.Ships()[i]) {
			return i
		}
	}
	t.Fatal("no such ship")
	return -1
}

func TestTopologyFollowsDefaultSponsorship(t *testing.T) {
	n := newNet(t, Config{Ships: 2000, NATFraction: 0.5})
	ships := n.Ships()
	if len(ships) != 2000 {
		t.Fatalf("%d ships", len(ships))
	}
	var count [4]int
	stars := map[int]int{}
	for i := range ships {
		s := &ships[i]
		count[s.Class]++
		if got := s.ID.Sponsor(); got != ships[s.Sponsor].ID {
			t.Fatalf("%s: default sponsor %s, tree sponsor %s", s.ID, got, ships[s.Sponsor].ID)
		}
		if ships[s.Galaxy].Class != lane.Galaxy {
			t.Fatalf("%s: galaxy %s is a %s", s.ID, ships[s.Galaxy].ID, ships[s.Galaxy].Class)
		}
		if chain := s.ID.AppendChain(nil); chain[len(chain)-1] != ships[s.Galaxy].ID {
			t.Fatalf("%s: chain ends at %s, not its galaxy %s", s.ID, chain[len(chain)-1], ships[s.Galaxy].ID)
		}
		if s.NAT && (s.Host || s.Class == lane.Galaxy || s.Class == lane.Star) {
			t.Fatalf("%s is a host behind a NAT", s.ID)
		}
		if s.Class == lane.Star {
			stars[s.Sponsor]++
		}
		if s.Class == lane.Moon && !ships[s.Sponsor].Host {
			t.Fatalf("moon %s's planet is not a relay host", s.ID)
		}
	}
	for g, k := range stars {
		if k > MaxStarsPerGalaxy {
			t.Errorf("galaxy %s sponsors %d stars", ships[g].ID, k)
		}
	}
	if count[lane.Galaxy] != 2000/ShipsPerGalaxy || count[lane.Star] == 0 || count[lane.Planet] == 0 || count[lane.Moon] == 0 {
		t.Errorf("class counts %v", count)
	}
	// The same seed gives the same network.
	m := newNet(t, Config{Ships: 2000, NATFraction: 0.5})
	for i := range ships {
		if ships[i] != m.Ships()[i] {
			t.Fatalf("ship %d differs between two builds: %+v, %+v", i, ships[i], m.Ships()[i])
		}
	}
}

func TestLinkLatencyMeanMatchesPreset(t *testing.T) {
	for _, m := range []LatencyModel{Fast(), Slow()} {
		n := newNet(t, Config{Ships: 2000, Latency: m})
		rng := rand.New(rand.NewPCG(3, 4))
		var sum time.Duration
		const samples = 20000
		for range samples {
			a, b := rng.IntN(2000), rng.IntN(2000)
			if ab, ba := n.LinkLatency(a, b), n.LinkLatency(b, a); ab != ba {
				t.Fatalf("latency %v one way, %v the other", ab, ba)
			}
			sum += n.LinkLatency(a, b)
		}
		got := sum / samples
		if got < m.Mean*9/10 || got > m.Mean*11/10 {
			t.Errorf("%s: mean link latency %v, want about %v", m.Name, got, m.Mean)
		}
	}
}

// conversation runs k requests in turn from requester to rcvr and returns
// their results.
func conversation(t *testing.T, n *Network, requester, rcvr, k int) []Result {
	t.Helper()
	var out []Result
	for i := range k {
		path := fmt.Sprintf("t/%d/%d/%d", requester, rcvr, i)
		n.Publish(rcvr, path, []byte(path))
		var got *Result
		if err := n.Peek(requester, rcvr, path, 30*time.Second, func(r Result) { got = &r }); err != nil {
			t.Fatal(err)
		}
		for got == nil {
			n.RunUntil(n.Now() + 100*time.Millisecond)
		}
		out = append(out, *got)
		n.RunUntil(n.Now() + time.Second)
	}
	return out
}

// TestMoonRouteTightensToTheMoonsOwnLane is the seed's example: a moon
// behind its planet's relay, reached from another galaxy's planet, is
// answered through galaxy, star and planet relays, whose page names the
// moon's own lane (the planet relay heard it at hop 0 and every relay above
// passes it on: a next-hop never names a relay, since stock arvo stores it
// as the peer's lane, docs/arvo-lanes.md L3), then directly, and no request
// is lost on the way.
func TestMoonRouteTightensToTheMoonsOwnLane(t *testing.T) {
	n := newNet(t, Config{})
	ships := n.Ships()
	moon := pick(t, n, func(_ int, s *Ship) bool { return s.Class == lane.Moon && !s.NAT })
	req := pick(t, n, func(i int, s *Ship) bool {
		return s.Class == lane.Planet && !s.Host && !s.NAT && s.Galaxy != ships[moon].Galaxy
	})
	n.RunUntil(30 * time.Second)
	res := conversation(t, n, req, moon, 6)
	wantHops := []int{3, 0, 0, 0, 0, 0}
	for i, r := range res {
		if r.Lost || r.Tries != 1 {
			t.Errorf("request %d: lost %v, tries %d; tightening must lose nothing", i, r.Lost, r.Tries)
		}
		if r.Hops != wantHops[i] {
			t.Errorf("request %d: %d hops, want %d", i, r.Hops, wantHops[i])
		}
	}
	if last := res[len(res)-1]; last.From != n.Lane(moon) {
		t.Errorf("last answer from %v, want the moon's lane %v", last.From, n.Lane(moon))
	}
}

func TestNATKeepsRouteOnSponsor(t *testing.T) {
	n := newNet(t, Config{NATFraction: 1})
	ships := n.Ships()
	p := pick(t, n, func(_ int, s *Ship) bool { return s.Class == lane.Planet && s.NAT })
	req := pick(t, n, func(i int, s *Ship) bool {
		return s.Class == lane.Planet && !s.Host && s.Galaxy != ships[p].Galaxy
	})
	n.RunUntil(30 * time.Second)
	for i, r := range conversation(t, n, req, p, 8) {
		if r.Lost || r.Tries != 1 {
			t.Errorf("request %d: lost %v, tries %d", i, r.Lost, r.Tries)
		}
		if r.Direct() {
			t.Errorf("request %d answered directly by a ship behind a NAT that never sent to the requester", i)
		}
	}
	if n.Counters().NATDropped == 0 {
		t.Error("no datagram was dropped by a NAT: the requester never tried the tighter lane")
	}
}

func TestGalaxyOnlyRoutesThroughGalaxies(t *testing.T) {
	n := newNet(t, Config{Strategy: Strategy{GalaxyOnly: true}})
	for _, s := range n.Ships() {
		if s.Relay != (s.Class == lane.Galaxy) {
			t.Fatalf("%s (%s) relay %v under galaxy-only", s.ID, s.Class, s.Relay)
		}
	}
	ships := n.Ships()
	moon := pick(t, n, func(_ int, s *Ship) bool { return s.Class == lane.Moon && !s.NAT })
	req := pick(t, n, func(i int, s *Ship) bool {
		return s.Class == lane.Planet && !s.Host && !s.NAT && s.Galaxy != ships[moon].Galaxy
	})
	n.RunUntil(30 * time.Second)
	res := conversation(t, n, req, moon, 3)
	if res[0].Hops != 1 || res[0].From != n.Lane(ships[moon].Galaxy) {
		t.Errorf("first answer: %d hops from %v, want 1 hop from the galaxy %v", res[0].Hops, res[0].From, n.Lane(ships[moon].Galaxy))
	}
	if !res[2].Direct() {
		t.Errorf("third answer not direct: %+v", res[2])
	}
}

func TestRebindLosesTheOldLaneUntilThePing(t *testing.T) {
	n := newNet(t, Config{})
	ships := n.Ships()
	p := pick(t, n, func(_ int, s *Ship) bool { return s.Class == lane.Planet && !s.Host && !s.NAT })
	req := pick(t, n, func(i int, s *Ship) bool {
		return s.Class == lane.Planet && !s.Host && !s.NAT && s.Galaxy != ships[p].Galaxy
	})
	n.RunUntil(30 * time.Second)
	conversation(t, n, req, p, 4)
	old := n.Lane(p)
	if err := n.Rebind(p); err != nil {
		t.Fatal(err)
	}
	if n.Lane(p) == old {
		t.Fatal("rebinding kept the lane")
	}
	stale := n.Counters().Stale
	r := conversation(t, n, req, p, 1)[0]
	if r.Lost || r.Delay() > endpointPing+5*time.Second {
		t.Errorf("after rebinding: lost %v, delay %v; want an answer within a ping interval", r.Lost, r.Delay())
	}
	if n.Counters().Stale == stale {
		t.Error("nothing was sent to the old lane after rebinding")
	}
	if err := n.Rebind(ships[p].Sponsor); err == nil {
		t.Error("rebinding a relay's lane succeeded")
	}
}

// endpointPing is the endpoints' ping interval (endpoint.DefaultPingInterval).
const endpointPing = 25 * time.Second

func TestSameSeedSameRun(t *testing.T) {
	run := func() (Counters, []Result) {
		n := newNet(t, Config{Loss: 0.05, NATFraction: 0.3})
		ships := n.Ships()
		rng := rand.New(rand.NewPCG(9, 9))
		var res []Result
		for k := range 60 {
			a, b := rng.IntN(len(ships)), rng.IntN(len(ships))
			if ships[a].Class < lane.Planet || ships[a].Host || a == b {
				continue
			}
			path := fmt.Sprintf("d/%d", k)
			n.Publish(b, path, []byte(path))
			n.At(30*time.Second+time.Duration(k)*300*time.Millisecond, func() {
				if err := n.Peek(a, b, path, 30*time.Second, func(r Result) { res = append(res, r) }); err != nil {
					t.Error(err)
				}
			})
		}
		n.RunUntil(2 * time.Minute)
		return n.Counters(), res
	}
	c1, r1 := run()
	c2, r2 := run()
	if c1 != c2 {
		t.Errorf("counters differ between runs:\n%+v\n%+v", c1, c2)
	}
	if fmt.Sprint(r1) != fmt.Sprint(r2) {
		t.Errorf("results differ between runs")
	}
	if c1.Lost == 0 {
		t.Error("no datagram lost at 5% loss")
	}
}

func TestOfflineHostDropsEverything(t *testing.T) {
	n := newNet(t, Config{})
	ships := n.Ships()
	p := pick(t, n, func(_ int, s *Ship) bool { return s.Class == lane.Planet && !s.Host && !s.NAT })
	req := pick(t, n, func(i int, s *Ship) bool {
		return s.Class == lane.Planet && !s.Host && !s.NAT && s.Galaxy != ships[p].Galaxy
	})
	n.RunUntil(30 * time.Second)
	if err := n.SetOffline(p, true); err != nil {
		t.Fatal(err)
	}
	path := "offline"
	n.Publish(p, path, []byte(path))
	var got Result
	if err := n.Peek(req, p, path, 5*time.Second, func(r Result) { got = r }); err != nil {
		t.Fatal(err)
	}
	n.RunUntil(n.Now() + 6*time.Second)
	if !got.Lost || n.Counters().Offline == 0 {
		t.Errorf("request to an offline ship: %+v, offline drops %d", got, n.Counters().Offline)
	}
	if err := n.SetOffline(p, false); err != nil {
		t.Fatal(err)
	}
	if r := conversation(t, n, req, p, 1)[0]; r.Lost {
		t.Error("no answer after the ship came back")
	}
}

func TestNotificationsDeliverOnGrow(t *testing.T) {
	n := newNet(t, Config{})
	ships := n.Ships()
	pub := pick(t, n, func(_ int, s *Ship) bool { return s.Class == lane.Planet && !s.Host && !s.NAT })
	sub := pick(t, n, func(i int, s *Ship) bool {
		return s.Class == lane.Planet && !s.Host && i != pub && s.Galaxy != ships[pub].Galaxy
	})
	key := make([]byte, 32)
	if err := n.SetKey(pub, edKey(key)); err != nil {
		t.Fatal(err)
	}
	n.RunUntil(30 * time.Second)
	var got *Result
	if err := n.Subscribe(sub, pub, "feed/1", 0, func(r Result) { got = &r }); err != nil {
		t.Fatal(err)
	}
	n.RunUntil(n.Now() + time.Minute)
	if got != nil {
		t.Fatal("answered before the path grew")
	}
	grown := n.Now()
	n.Grow(pub, "feed/1", []byte("v"))
	n.RunUntil(n.Now() + 5*time.Second)
	if got == nil || !got.Notified {
		t.Fatalf("not notified within 5 s of the grow: %+v", got)
	}
	if d := got.End - grown; d > time.Second {
		t.Errorf("notified %v after the grow; a held heartbeat should be answered at once", d)
	}
	if n.Counters().SentBy[TrafficNotify] == 0 {
		t.Error("no notification-protocol traffic counted")
	}
	if err := n.SetKey(pub, edKey(key)); err == nil {
		t.Error("SetKey after boot succeeded")
	}
}

func edKey(seed []byte) ed25519.PrivateKey { return ed25519.NewKeyFromSeed(seed) }

// TestPingsAreKeepaliveTraffic: pings at their per-sponsee names
// ("ping/<ship>") and their acks are classed as keepalive traffic. Over two
// ping intervals every ship under a galaxy pings twice (it boots within the
// first), and at least its second ping is acked (its first may reach a
// sponsor that has not booted yet).
func TestPingsAreKeepaliveTraffic(t *testing.T) {
	n := newNet(t, Config{})
	n.RunUntil(2*endpointPing + time.Second)
	pingers := 0
	for i := range n.Ships() {
		if n.Ships()[i].Class != lane.Galaxy {
			pingers++
		}
	}
	c := n.Counters()
	if got := c.SentBy[TrafficKeepalive]; got < uint64(3*pingers) {
		t.Errorf("%d keepalive datagrams over two ping intervals, want at least %d (two pings and an ack per ship under a galaxy)", got, 3*pingers)
	}
	if c.SentBy[TrafficOther] != 0 {
		t.Errorf("%d datagrams of no class before any workload", c.SentBy[TrafficOther])
	}
	for _, tc := range []struct {
		path string
		want bool
	}{{"ping", true}, {"ping/~zod", true}, {"ping/", true}, {"pings", false}, {"pin", false}, {"feed/ping", false}} {
		if got := isPingPath([]byte(tc.path)); got != tc.want {
			t.Errorf("isPingPath(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
