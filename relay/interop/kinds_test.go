package interop

import (
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

// The addresses of the star and planet tests: the fronted ship's relay in
// WORLD, its galaxy ~nec, vere's drivers without a relay, in OUTSIDE.
const (
	kindsGalaxyIP   = "10.88.0.3"
	kindsGalaxyLane = "10.88.0.3:13338" // ~nec: 13337 + 1
	kindsStarLane   = "10.88.0.1:13337" // relay S, fronting ~marnec
	kindsPlanet     = "~milrys-soglec"  // sponsor ~nec
	kindsPlanetLane = "10.88.0.1:40000" // relay P, fronting the planet
)

// startGalaxy runs ~nec, vere's drivers on their own, in OUTSIDE on its
// galaxy port, and waits for it; extra are more options (--lane).
func startGalaxy(t *testing.T, w *frontWorld, extra ...string) *vtool.Proc {
	t.Helper()
	g := w.outside(append([]string{"ship", "~nec", "13338", "--time-limit", "30"}, extra...)...)
	g.MustNext("READY", nil, readyTimeout)
	g.MustNext("EVENT", map[string]any{"kind": "born"}, readyTimeout)
	return g
}

// checkSTUN checks a fronted ship's own STUN toward its galaxy g: vere's
// client accepted the answer, and the lane it was told is the relay's
// public lane; the galaxy read the request from that lane and answered it.
func checkSTUN(t *testing.T, ship, g *vtool.Proc, public string) {
	t.Helper()
	stun := ship.MustNext("STUN", nil, 15*time.Second)
	if stun.Str("result") != "ok" || stun.Str("mapped") != public {
		t.Errorf("the fronted ship's STUN: %s; want result ok, mapped %s (the relay's public lane)", stun, public)
	}
	req := firstLine(t, g, "RECV", map[string]any{"proto": "stun", "type": "request"}, eventTimeout)
	resp := firstLine(t, g, "SEND", map[string]any{"proto": "stun", "type": "response"}, eventTimeout)
	if req.Str("from") != public || resp.Str("to") != public || resp.Str("mapped") != public {
		t.Errorf("the galaxy read %s and sent %s; want both at %s", req, resp, public)
	}
	ev := firstLine(t, ship, "EVENT", map[string]any{"kind": "stun"}, eventTimeout)
	if ev.Str("lane") != public {
		t.Errorf("vere gave arvo %s; want lane %s", ev, public)
	}
	t.Logf("ship: %s", stun)
	t.Logf("galaxy: %s", resp)
}

// TestFrontedStarSTUN fronts the star ~marnec (relay S on 10.88.0.1:13337)
// and runs vere's own STUN client toward its galaxy ~nec, vere's drivers
// in OUTSIDE: the request leaves through the relay from its public lane,
// the galaxy's answer is handed to the star, and the star's client learns
// the relay's public lane as its own.
func TestFrontedStarSTUN(t *testing.T) {
	requireFrontNetns(t)
	w := newFrontWorld(t, &outsideLog{})
	g := startGalaxy(t, w)
	f := w.front(frontSpec{ship: "~marnec", listen: kindsStarLane, relay: []string{"--galaxy", "~nec=" + kindsGalaxyLane},
		vere: []string{"--stun-galaxy", "~nec", "--galaxy", "~nec=" + kindsGalaxyIP, "--until", "stun", "--time-limit", "20"}})
	checkSTUN(t, f.ship, g, kindsStarLane)
}

// TestFrontedPlanet fronts the planet ~milrys-soglec (relay P on
// 10.88.0.1:40000), sponsored by the galaxy ~nec, vere's drivers in
// OUTSIDE, and shows each thing a planet does:
//
//   - its own STUN toward ~nec (vere's client): ok, mapped the relay's
//     public lane;
//   - its pings to its sponsor (the %ping app's poke, played by vtool's
//     publish inside the planet's namespace, as vere's harness has no
//     ping of its own): ~nec reads them from the relay's public lane, and
//     ~nec's acks come back through the relay;
//   - a peek for it from outside, straight to its public lane and through
//     its galaxy (which knows its lane, --lane, as arvo would from the
//     pings): vere answers, and the requester gets the page.
func TestFrontedPlanet(t *testing.T) {
	requireFrontNetns(t)
	all := &outsideLog{}
	w := newFrontWorld(t, all)
	g := startGalaxy(t, w, "--lane", kindsPlanet+"="+kindsPlanetLane)
	f := w.front(frontSpec{ship: kindsPlanet, listen: kindsPlanetLane, relay: []string{"--galaxy", "~nec=" + kindsGalaxyLane},
		vere: []string{"--stun-galaxy", "~nec", "--galaxy", "~nec=" + kindsGalaxyIP, "--until", "stun", "--time-limit", "20"}})

	t.Run("STUN", func(t *testing.T) { checkSTUN(t, f.ship, g, kindsPlanetLane) })
	f.ship.WaitTimeout(5 * time.Second)

	t.Run("PingsSponsor", func(t *testing.T) {
		ping := vtool.StartIn(t, f.shipNS, "publish", kindsPlanet, "40000", "--bind", "0.0.0.0",
			"--ping", "~nec@"+kindsGalaxyLane, "--time-limit", "5")
		ack := mustNext(t, ping, "RECV", map[string]any{"type": "page", "path": "/a/x/1//ack/1"}, eventTimeout)
		if ack.Str("from") != kindsGalaxyLane {
			t.Errorf("the planet read the ack as %s; want from its galaxy %s", ack, kindsGalaxyLane)
		}
		ev := firstLine(t, g, "EVENT", map[string]any{"kind": "heer", "type": "poke", "payload_ship": kindsPlanet}, eventTimeout)
		if ev.Str("lane") != kindsPlanetLane {
			t.Errorf("the galaxy gave arvo the ping as %s; want lane %s (the relay's public lane)", ev, kindsPlanetLane)
		}
		t.Logf("galaxy: %s", ev)
		t.Logf("planet: %s", ack)
		ping.WaitTimeout(10 * time.Second)
	})

	f.ship = f.startShip(t, "--galaxy", "~nec="+kindsGalaxyIP, "--time-limit", "20")
	for _, c := range []struct{ name, lane, ip, port string }{
		{"PeekAtPublicLane", kindsPlanetLane, "10.88.0.10", "41010"},
		{"PeekThroughGalaxy", kindsGalaxyLane, "10.88.0.11", "41011"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := w.outsideT(t, "peek", kindsPlanet, "/c/x/4/hello", c.lane, "--bind", c.ip, "--from", c.port, "--time-limit", "8")
			waitOK(t, p)
			page := mustNext(t, p, "RECV", map[string]any{"type": "page", "path": "/c/x/4/hello"}, time.Second)
			if page.Str("from") != c.lane || page.Str("data") != "hello" {
				t.Errorf("the page came as %s; want from %s, data hello", page, c.lane)
			}
			sent := mustNext(t, f.ship, "SEND", map[string]any{"type": "page", "path": "/c/x/4/hello"}, eventTimeout)
			t.Logf("requester: %s", page)
			t.Logf("planet: %s", sent)
		})
	}
	t.Run("NoPrivateOrLoopbackLeaves", func(t *testing.T) { checkNoPrivateHints(t, all) })
}
