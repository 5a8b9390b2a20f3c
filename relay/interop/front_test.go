package interop

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

// The fronting topology's addresses, all on one interface of the WORLD
// namespace (netns_test.go): the relay's public lane and the outside
// parties' addresses.
const (
	frontRelayLane   = "10.88.0.1:13338" // ~nec's public lane: the relay
	frontMetricsAddr = "10.88.0.1:19338"
	frontBudIP       = "10.88.0.3" // ~bud, a galaxy outside
)

// startFront fronts ~nec in w: the relay on 10.88.0.1:13338 with metrics,
// and `vtool ship ~nec 13338 --galaxy ~bud=10.88.0.3 --time-limit 30 EXTRA`.
func startFront(t *testing.T, w *frontWorld, extra ...string) *frontPair {
	t.Helper()
	return w.front(frontSpec{
		ship:   "~nec",
		listen: frontRelayLane,
		relay:  []string{"--metrics", frontMetricsAddr},
		vere:   append([]string{"--galaxy", "~bud=" + frontBudIP, "--time-limit", "30"}, extra...),
	})
}

// TestFrontedVere runs the relay in fronting mode in front of vere: the
// relay in WORLD on 10.88.0.1:13338, vere (~nec) in its own namespace whose
// only route is the relay's TUN device, and the outside parties on
// 10.88.0.3 and up in OUTSIDE. Each subtest builds a fresh WORLD and
// relay+ship pair.
func TestFrontedVere(t *testing.T) {
	requireFrontNetns(t)
	all := &outsideLog{}

	// A peek from outside is answered by vere, which reads it from the
	// requester's true lane and answers that lane.
	t.Run("OutsidePeekAnswered", func(t *testing.T) {
		w := newFrontWorld(t, all)
		f := startFront(t, w)
		const from = "10.88.0.10:41002"
		p := w.outside("peek", "~nec", "/c/x/4/hello", frontRelayLane, "--bind", "10.88.0.10", "--from", "41002", "--time-limit", "5")
		waitOK(t, p)
		page := p.MustNext("RECV", map[string]any{"type": "page", "path": "/c/x/4/hello"}, time.Second)
		if page.Str("from") != frontRelayLane || page.Str("data") != "hello" {
			t.Errorf("the page came as %s; want from the relay %s, data hello", page, frontRelayLane)
		}
		recv := f.ship.MustNext("RECV", map[string]any{"type": "peek", "path": "/c/x/4/hello"}, eventTimeout)
		if recv.Str("from") != from {
			t.Errorf("vere read the peek as %s; want from the true source %s", recv, from)
		}
		sent := f.ship.MustNext("SEND", map[string]any{"type": "page", "path": "/c/x/4/hello"}, eventTimeout)
		if sent.Str("to") != from {
			t.Errorf("vere sent its page as %s; want to %s", sent, from)
		}
		t.Logf("vere: %s", recv)
		t.Logf("vere: %s", sent)
	})

	// vere's own peek for ~bud's page leaves from the relay's public lane,
	// and the page reaches vere from ~bud's true lane.
	t.Run("ShipOwnPeekLeavesFromPublicLane", func(t *testing.T) {
		w := newFrontWorld(t, all)
		bud := frontBudIP + ":13339"
		pub := w.outside("publish", "~bud", "13339", "--bind", frontBudIP, "--time-limit", "15")
		pub.MustNext("READY", nil, readyTimeout)
		f := startFront(t, w, "--push-peek", "~bud/c/x/4/hello")
		recv := pub.MustNext("RECV", map[string]any{"type": "peek", "path": "/c/x/4/hello"}, eventTimeout)
		if recv.Str("from") != frontRelayLane {
			t.Errorf("~bud read vere's peek as %s; want from the relay's public lane %s", recv, frontRelayLane)
		}
		ev := f.ship.MustNext("EVENT", map[string]any{"kind": "heer", "type": "page", "path": "/c/x/4/hello"}, eventTimeout)
		if ev.Str("lane") != bud || ev.Str("data") != "hello" {
			t.Errorf("vere heard the page as %s; want lane %s, data hello", ev, bud)
		}
		t.Logf("~bud: %s", recv)
		t.Logf("vere: %s", ev)
	})

	// A planet STUNs its galaxy ~nec, the fronted vere: the relay answers
	// with the planet's lane as seen, and vere receives no STUN datagram.
	t.Run("PlanetSTUNThroughFrontedGalaxy", func(t *testing.T) {
		w := newFrontWorld(t, all)
		f := startFront(t, w)
		p := w.outside("ship", "~milrys-soglec", "0", "--stun-galaxy", "~nec", "--galaxy", "~nec=10.88.0.1",
			"--until", "stun", "--time-limit", "10")
		ready := p.MustNext("READY", nil, readyTimeout)
		waitOK(t, p)
		stun := p.MustNext("STUN", nil, time.Second)
		port, _ := ready.Num("port")
		mapped, err := netip.ParseAddrPort(stun.Str("mapped"))
		if stun.Str("result") != "ok" || err != nil || int(mapped.Port()) != int(port) ||
			!netip.MustParsePrefix(frontWorldNet).Contains(mapped.Addr()) {
			t.Errorf("STUN: %s; want result ok, mapped %s:%v (READY %s)", stun, frontWorldNet, port, ready)
		}
		// A peek after it is a barrier: vere reads datagrams from the
		// device in order, so a STUN datagram handed to it would come first.
		b := w.outside("peek", "~nec", "/c/x/4/hello", frontRelayLane, "--bind", "10.88.0.6", "--from", "41006", "--time-limit", "5")
		waitOK(t, b)
		f.ship.MustNext("RECV", map[string]any{"type": "peek", "from": "10.88.0.6:41006"}, eventTimeout)
		for _, l := range f.ship.All("RECV", map[string]any{"proto": "stun"}) {
			t.Errorf("the fronted vere received a STUN datagram: %s", l)
		}
		t.Logf("planet: %s", stun)
	})

	// A sponsee's ping reaches vere from the sponsee's true lane and is
	// acked through the relay; then a peek for the sponsee is forwarded by
	// the relay, whose page names the sponsee's lane as next hop.
	t.Run("SponseePingReachesVereFromTrueLane", func(t *testing.T) {
		w := newFrontWorld(t, all)
		f := startFront(t, w)
		const sponsee = "10.88.0.4:40000"
		pub := w.outside("publish", "~milrys-soglec", "40000", "--bind", "10.88.0.4",
			"--ping", "~nec@"+frontRelayLane, "--time-limit", "10")
		pub.MustNext("READY", nil, readyTimeout)
		ack := pub.MustNext("RECV", map[string]any{"type": "page", "path": "/a/x/1//ack/1"}, eventTimeout)
		if ack.Str("from") != frontRelayLane {
			t.Errorf("the sponsee read the ack as %s; want from %s", ack, frontRelayLane)
		}
		ev := f.ship.MustNext("EVENT", map[string]any{"kind": "heer", "type": "poke", "payload_ship": "~milrys-soglec"}, eventTimeout)
		if ev.Str("lane") != sponsee {
			t.Errorf("vere gave arvo the ping as %s; want lane %s", ev, sponsee)
		}
		t.Logf("vere: %s", ev)
		t.Logf("sponsee: %s", ack)

		p := w.outside("peek", "~milrys-soglec", "/c/x/4/hello", frontRelayLane, "--bind", "10.88.0.5", "--from", "41005", "--time-limit", "5")
		waitOK(t, p)
		page := p.MustNext("RECV", map[string]any{"type": "page", "path": "/c/x/4/hello"}, time.Second)
		if page.Str("from") != frontRelayLane || page.Str("data") != "hello" {
			t.Errorf("the sponsee's page came as %s; want from %s, data hello", page, frontRelayLane)
		}
		t.Logf("requester: %s", page)
	})

	// A sponsee on the operator's LAN (10.77.0.5, outside --hint-net)
	// pings vere, which acks it there through the relay; a peek for it
	// from outside is forwarded there and answered, and no next-hop the
	// requester reads names the LAN.
	t.Run("LANSponseeAcked", func(t *testing.T) {
		w := newFrontWorld(t, all)
		f := startFront(t, w)
		sponsee := frontLANIP + ":40000"
		pub := w.outside("publish", "~milrys-soglec", "40000", "--bind", frontLANIP,
			"--ping", "~nec@"+frontRelayLane, "--time-limit", "10")
		pub.MustNext("READY", nil, readyTimeout)
		ack := pub.MustNext("RECV", map[string]any{"type": "page", "path": "/a/x/1//ack/1"}, eventTimeout)
		if ack.Str("from") != frontRelayLane {
			t.Errorf("the LAN sponsee read the ack as %s; want from %s", ack, frontRelayLane)
		}
		sent := f.ship.MustNext("SEND", map[string]any{"type": "page", "path": "/a/x/1//ack/1"}, eventTimeout)
		if sent.Str("to") != sponsee {
			t.Errorf("vere sent the ack as %s; want to %s", sent, sponsee)
		}
		p := w.outside("peek", "~milrys-soglec", "/c/x/4/hello", frontRelayLane, "--bind", "10.88.0.8", "--from", "41008", "--time-limit", "5")
		waitOK(t, p)
		page := p.MustNext("RECV", map[string]any{"type": "page", "path": "/c/x/4/hello"}, time.Second)
		if page.Str("from") != frontRelayLane || page.Str("data") != "hello" || strings.HasPrefix(page.Str("next_hop"), "10.77.") {
			t.Errorf("the sponsee's page came as %s; want from %s, data hello, no LAN next-hop", page, frontRelayLane)
		}
		m, err := scrapeIn(w.name, "http://"+frontMetricsAddr+"/metrics")
		if err != nil {
			t.Fatalf("scrape in %s: %v", w.name, err)
		}
		if v := m[`relay_from_ship_dropped_total{reason="bad_target"}`]; v != 0 {
			t.Errorf("bad_target drops %v; want 0 (nonzero: %v)", v, vtool.Nonzero(m, "relay_"))
		}
		t.Logf("sponsee: %s", ack)
		t.Logf("vere: %s", sent)
		t.Logf("requester: %s", page)
	})

	// vere's datagrams to the relay's host itself (a UDP service on
	// 10.88.0.2, WORLD's own address, bound 0.0.0.0 as vere binds) are
	// refused, and the relay warns; declared with --front-host-lane, that
	// lane is reached, from the relay's public lane.
	t.Run("HostRefusedUnlessDeclared", func(t *testing.T) {
		for _, declared := range []bool{false, true} {
			w := newFrontWorld(t, all)
			host := vtool.StartIn(t, w.name, "publish", "~bud", "13339", "--bind", "0.0.0.0", "--time-limit", "15")
			host.MustNext("READY", nil, readyTimeout)
			relay := []string{"--metrics", frontMetricsAddr}
			if declared {
				relay = append(relay, "--front-host-lane", "10.88.0.2:13339")
			}
			f := w.front(frontSpec{ship: "~nec", listen: frontRelayLane, relay: relay,
				vere: []string{"--galaxy", "~bud=10.88.0.2", "--push-peek", "~bud/c/x/4/hello", "--time-limit", "15"}})
			firstLine(t, f.ship, "SEND", map[string]any{"type": "peek", "to": "10.88.0.2:13339"}, eventTimeout)
			if declared {
				recv := host.MustNext("RECV", map[string]any{"type": "peek"}, eventTimeout)
				if recv.Str("from") != frontRelayLane {
					t.Errorf("the declared host lane read vere's peek as %s; want from %s", recv, frontRelayLane)
				}
				t.Logf("declared: %s", recv)
				continue
			}
			deadline := time.Now().Add(eventTimeout)
			for !strings.Contains(f.relay.Log(), "sent to this host's own addresses") && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			logRelayLines(t, "relay", f.relay, "this host's own addresses")
			if !strings.Contains(f.relay.Log(), "sent to this host's own addresses") {
				t.Errorf("the relay did not warn of the refused datagrams")
			}
			if l := host.All("RECV", nil); len(l) != 0 {
				t.Errorf("the host's own service received from vere: %s", l[0])
			}
		}
	})

	// The relay counts what the ship sent through its device.
	t.Run("MetricsFromShip", func(t *testing.T) {
		w := newFrontWorld(t, all)
		f := startFront(t, w)
		p := w.outside("peek", "~nec", "/c/x/4/hello", frontRelayLane, "--bind", "10.88.0.7", "--from", "41007", "--time-limit", "5")
		waitOK(t, p)
		f.ship.MustNext("SEND", map[string]any{"type": "page", "to": "10.88.0.7:41007"}, eventTimeout)
		m, err := scrapeIn(w.name, "http://"+frontMetricsAddr+"/metrics")
		if err != nil {
			t.Fatalf("scrape in %s: %v", w.name, err)
		}
		if v := m["relay_from_ship_total"]; v <= 0 {
			t.Errorf("relay_from_ship_total = %v; want > 0 (nonzero: %v)", v, vtool.Nonzero(m, "relay_"))
		}
		t.Logf("relay_from_ship_total %v", m["relay_from_ship_total"])
	})

	// Nothing the outside world received names a loopback address or the
	// ship's in-namespace link-local address.
	t.Run("NoPrivateOrLoopbackLeaves", func(t *testing.T) { checkNoPrivateHints(t, all) })
}
