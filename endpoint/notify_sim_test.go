package endpoint

import (
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// The measurement of docs/protocol.md: many subscribers of one publisher
// through one relay, driven in virtual time by simNet (Cores and
// relay.Relay.Handle, no goroutines). The publisher is a planet behind a NAT
// (subscribers cannot reach it directly), so every request and answer
// crosses the relay fronting its sponsor. Two scenarios:
//
//   - notify: subscribers Subscribe (scry notifications; the publisher runs
//     them);
//   - poll: subscribers Peek with a two-minute re-send interval, from a
//     publisher that does not run the protocol: UIP-0102's plain polling.
//
// Each subscriber follows v/1, v/2, ...: it asks for v/k+1 once it has v/k.
// After a warm-up, an idle window with nothing growing gives the idle
// traffic; then the publisher grows v/1..v/grows, far enough apart for
// every subscriber to catch up, and each subscriber's delay from growth to
// delivery is a latency sample.

type simScenario struct {
	name        string
	notify      bool          // Subscribe to a protocol publisher; else Peek every PollInterval
	subscribers int           // how many
	stagger     time.Duration // subscribers start uniformly over this
	idleFrom    time.Duration // idle window
	idleTo      time.Duration
	growAt      []time.Duration // when v/1, v/2, ... grow
	end         time.Duration
	loss        float64
}

type simResult struct {
	scenario            simScenario
	idleEndpointPerMin  float64 // datagrams sent by the subscriber and by the publisher for it, per subscriber per minute
	idleWirePerMin      float64 // datagrams on every link (relay forwards included), per subscriber per minute
	idleSubscriberSends float64 // datagrams sent by the subscriber alone, per subscriber per minute
	p50, p99, max       time.Duration
	samples, missing    int
	relayPeakPending    int
}

func (r simResult) String() string {
	return fmt.Sprintf("%-7s n=%-6d loss=%.0f%%  idle/sub/min: endpoints %.2f (subscriber %.2f), wire %.2f  latency p50 %v p99 %v max %v  (%d samples, %d missing, relay pending peak %d)",
		r.scenario.name, r.scenario.subscribers, 100*r.scenario.loss, r.idleEndpointPerMin, r.idleSubscriberSends, r.idleWirePerMin,
		r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.max.Round(time.Millisecond), r.samples, r.missing, r.relayPeakPending)
}

func runSim(t testing.TB, sc simScenario) simResult {
	net := newSimNet(42)
	net.Loss = sc.loss
	rng := rand.New(rand.NewPCG(7, 11))

	star := lane.ShipFromUint64(256)        // ~marzod
	pubShip := lane.ShipFromUint64(0x10100) // a planet under ~marzod
	pubAt := netip.MustParseAddrPort("198.51.100.2:40000")
	relayAt := netip.MustParseAddrPort("198.51.100.1:13337")
	// The operator pins its sponsee's lane. (A lane learned only from
	// pings would be dropped by the relay's route rubric whenever
	// requests to it go unanswered for a few ProbeTimeouts, as polls for
	// a value that does not exist yet always do.)
	r, err := relay.New(relay.Config{HintNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Ship: star, Self: []netip.AddrPort{relayAt},
		Pinned: map[lane.Ship]netip.AddrPort{pubShip: pubAt}})
	if err != nil {
		t.Fatal(err)
	}
	net.addRelay(relayAt, r)

	key := testKey(1)
	pubCfg := Config{Ship: pubShip, Lanes: map[lane.Ship]netip.AddrPort{star: relayAt}, Seed: 1}
	if sc.notify {
		pubCfg.Key = key
	}
	pubCore, err := NewCore(pubCfg, pubAt)
	if err != nil {
		t.Fatal(err)
	}
	pub := net.addCore(pubAt, pubCore)
	net.firewall(pubAt)

	// Subscribers sit 10-60 ms from the relay; the publisher 5 ms.
	subAt := make([]netip.AddrPort, sc.subscribers)
	subDelay := map[netip.AddrPort]time.Duration{pubAt: 5 * time.Millisecond}
	isSub := map[netip.AddrPort]bool{}
	peerKeys := map[lane.Ship]ed25519.PublicKey{pubShip: pubKey(key)}
	subs := make([]*simNode, sc.subscribers)
	for i := range subs {
		subAt[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 50000)
		subDelay[subAt[i]] = time.Duration(10+rng.IntN(51)) * time.Millisecond
		isSub[subAt[i]] = true
		cfg := Config{Ship: lane.ShipFromUint64(uint64(0x20200 + i<<16)), PingInterval: -1,
			Lanes: map[lane.Ship]netip.AddrPort{star: relayAt}, Seed: uint64(1000 + i)}
		if sc.notify {
			cfg.PeerKeys = peerKeys
		} else {
			cfg.RetryInterval = PollInterval
		}
		c, err := NewCore(cfg, subAt[i])
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = net.addCore(subAt[i], c)
	}
	net.Delay = func(from, to netip.AddrPort) time.Duration {
		if d, ok := subDelay[from]; ok && from != relayAt {
			return d
		}
		return subDelay[to]
	}

	// Count idle traffic, pings aside (the publisher keeps its sponsor's
	// relay informed in either scenario).
	var idleEndpoint, idleWire, idleSub int
	net.Tap = func(from, to netip.AddrPort, b []byte) {
		if net.now < sc.idleFrom || net.now >= sc.idleTo {
			return
		}
		var p scry.Packet
		if p.Parse(b) == nil && p.Header.Type == scry.TypePoke && strings.HasPrefix(string(p.Name.Path), pingPath+"/") {
			return
		}
		idleWire++
		if from != relayAt {
			idleEndpoint++
		}
		if isSub[from] {
			idleSub++
		}
	}

	// Each subscriber follows v/1, v/2, ...
	grownAt := make([]time.Duration, len(sc.growAt)+2)
	var latencies []time.Duration
	got := make([]int, sc.subscribers)
	var ask func(i, k int)
	ask = func(i, k int) {
		if k > len(sc.growAt) {
			return
		}
		path := "v/" + strconv.Itoa(k)
		done := func(resp Response) {
			got[i]++
			if grownAt[k] > 0 {
				latencies = append(latencies, net.now-grownAt[k])
			}
			net.at(net.now, func() { ask(i, k+1) })
		}
		c := subs[i].core
		net.do(subs[i], func(now time.Duration) []Datagram {
			var out []Datagram
			var err error
			if sc.notify {
				out, err = c.Subscribe(pubShip, path, now, done, nil)
			} else {
				out, err = c.Peek(pubShip, path, now, done, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			return out
		})
	}
	for i := range subs {
		i := i
		net.at(time.Duration(rng.Int64N(int64(sc.stagger))), func() { ask(i, 1) })
	}
	for k, at := range sc.growAt {
		k := k + 1
		net.at(at, func() {
			grownAt[k] = net.now
			net.do(pub, func(now time.Duration) []Datagram {
				return pubCore.Grow("v/"+strconv.Itoa(k), []byte("value "+strconv.Itoa(k)), now, nil)
			})
		})
	}
	peak := 0
	for step := time.Duration(0); step < sc.end; step += time.Second {
		net.run(step)
		peak = max(peak, r.Pending().Len())
	}
	net.run(sc.end)

	res := simResult{scenario: sc, relayPeakPending: peak}
	mins := float64(sc.idleTo-sc.idleFrom) / float64(time.Minute)
	n := float64(sc.subscribers)
	res.idleEndpointPerMin = float64(idleEndpoint) / n / mins
	res.idleWirePerMin = float64(idleWire) / n / mins
	res.idleSubscriberSends = float64(idleSub) / n / mins
	slices.Sort(latencies)
	res.samples = len(latencies)
	res.missing = sc.subscribers*len(sc.growAt) - len(latencies)
	if len(latencies) > 0 {
		res.p50 = latencies[len(latencies)/2]
		res.p99 = latencies[len(latencies)*99/100]
		res.max = latencies[len(latencies)-1]
	}
	return res
}

func notifyScenario(n int, loss float64) simScenario {
	return simScenario{name: "notify", notify: true, subscribers: n, stagger: 20 * time.Second, loss: loss,
		idleFrom: time.Minute, idleTo: 5 * time.Minute,
		growAt: []time.Duration{5*time.Minute + 20*time.Second, 6*time.Minute + 47*time.Second, 8*time.Minute + 13*time.Second},
		end:    10 * time.Minute}
}

func pollScenario(n int, loss float64) simScenario {
	return simScenario{name: "poll", subscribers: n, stagger: PollInterval, loss: loss,
		idleFrom: 2 * time.Minute, idleTo: 6 * time.Minute,
		growAt: []time.Duration{6*time.Minute + 10*time.Second, 11*time.Minute + 20*time.Second, 16*time.Minute + 30*time.Second},
		end:    22 * time.Minute}
}

// TestNotifySim runs the measurement small, in every test run, and checks
// what the protocol is for: notified subscribers get a value within a
// round trip of it growing where polling ones wait about a minute, every
// value arrives, and idle traffic is the heartbeat rate.
func TestNotifySim(t *testing.T) {
	const n = 40
	nr := runSim(t, notifyScenario(n, 0))
	pr := runSim(t, pollScenario(n, 0))
	t.Log(nr)
	t.Log(pr)
	if nr.missing != 0 || pr.missing != 0 {
		t.Fatalf("values missing: notify %d, poll %d", nr.missing, pr.missing)
	}
	if nr.p99 > 500*time.Millisecond {
		t.Errorf("notify p99 %v", nr.p99)
	}
	if pr.p50 < 20*time.Second {
		t.Errorf("poll p50 %v: polling every two minutes cannot be that quick", pr.p50)
	}
	// One heartbeat and its answer per HoldTime, each crossing the relay.
	wantWire := 4 * float64(time.Minute) / float64(20*time.Second)
	if nr.idleWirePerMin < wantWire*0.9 || nr.idleWirePerMin > wantWire*1.1 {
		t.Errorf("notify idle wire %.2f per subscriber per minute, want about %.0f", nr.idleWirePerMin, wantWire)
	}
}

// TestNotifyMeasure is the full measurement (10,000 subscribers by
// default; NOTIFY_BENCH=<n> for another count), run only with NOTIFY_BENCH
// set. Its figures are in docs/protocol.md.
func TestNotifyMeasure(t *testing.T) {
	v := os.Getenv("NOTIFY_BENCH")
	if v == "" {
		t.Skip("set NOTIFY_BENCH=1 (10,000 subscribers) or NOTIFY_BENCH=<subscribers> to run")
	}
	n := 10000
	if x, err := strconv.Atoi(v); err == nil && x > 1 {
		n = x
	}
	for _, loss := range []float64{0, 0.01} {
		for _, sc := range []simScenario{notifyScenario(n, loss), pollScenario(n, loss)} {
			start := time.Now()
			r := runSim(t, sc)
			t.Logf("%v  [%v]", r, time.Since(start).Round(time.Second))
		}
	}
}
