package interop

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

// The galaxy-and-star topology, all in one WORLD (netns_test.go).
const (
	topoG       = "10.88.0.1:13338" // relay G: ~nec's public lane (galaxy 1: 13337 + 1)
	topoGMetric = "10.88.0.1:19338"
	topoS       = "10.88.0.2:13337" // relay S: ~marnec's public lane
	topoBudIP   = "10.88.0.3"       // ~bud, a galaxy outside, a publish
	topoBud     = "10.88.0.3:13339"
	topoShipIP  = "169.254.13.37" // a fronted vere's address in its namespace (fronting.addr)

	topoPlanetG     = "~milrys-soglec" // sponsor ~nec (relay ship ~milrys-soglec)
	topoPlanetGIP   = "10.88.0.4"
	topoPlanetGLane = "10.88.0.4:40000"
	topoPlanetS     = "~ralnyt-botdyt" // sponsor ~marnec, chain ~ralnyt-botdyt ~marnec ~nec
	topoPlanetSIP   = "10.88.0.5"
	topoPlanetSLane = "10.88.0.5:40000"

	// topoLife is the --time-limit of the processes that live through the
	// whole test; the test ends in well under it.
	topoLife = "70"
)

// TestFrontedGalaxyAndStar fronts two veres in one WORLD: galaxy ~nec
// behind relay G (10.88.0.1:13338) and star ~marnec, one of its stars,
// behind relay S (10.88.0.2:13337), each vere in its own namespace whose only
// route is its relay's TUN device. Below them, harness planets: ~milrys-soglec
// (sponsor ~nec) at 10.88.0.4:40000, ~ralnyt-botdyt (sponsor ~marnec) at
// 10.88.0.5:40000; ~bud, a galaxy outside, at 10.88.0.3:13339; requesters on
// 10.88.0.9 and up.
//
// The processes that live through the test are started here, in order, and
// the subtests read their lines and send probes of their own:
//
//   - ~bud's publish, then relay G and ~nec's vere (--push-peek ~bud: its own
//     request; --lane ~milrys-soglec=10.88.0.4:40000: arvo's knowledge of its
//     sponsee, which vere's forwarding uses).
//   - relay S and ~marnec's vere with --push-peek ~nec/c/x/4/hello, until the
//     page comes (a request to its galaxy, through both relays), then ~marnec's
//     vere again, on the same port in the same namespace, with --push-peek ~bud.
//   - ~milrys-soglec pings ~nec once (a poke from its port, then silence: a
//     publish without --ping), and ~ralnyt-botdyt publishes with --ping ~marnec.
//
// Relay G runs with routes.direct-lane-expiry 2s: the relay's own soft state of a
// lane learned from the wire lapses after 2 s instead of 2 minutes, which
// compresses the five minutes of sponsee silence into the 3 s wait of
// SilentSponseeStillReachable. What must hold is that reaching the sponsee
// does not depend on the relay's soft state: vere keeps the lane, and the
// relay either keeps what vere vouched for or hands the request to vere.
// RelayRestartLosesNoShipLane goes further: relay G is killed and a new one,
// knowing nothing, fronts the same vere.
//
// Both relays run on one host (WORLD), so each declares the other's lane
// as one its vere may reach there (--front-host-lane): the star's vere
// reaches its galaxy, and the galaxy's its star, through the host.
func TestFrontedGalaxyAndStar(t *testing.T) {
	requireFrontNetns(t)
	all := &outsideLog{}
	w := newFrontWorld(t, all)

	bud := w.outside("publish", "~bud", "13339", "--bind", topoBudIP, "--time-limit", topoLife)
	bud.MustNext("READY", nil, readyTimeout)

	g := w.front(frontSpec{
		ship:   "~nec",
		listen: topoG,
		relay: append([]string{"--galaxy", "~nec=" + topoG, "--metrics", topoGMetric, "--front-host-lane", topoS},
			relayConfig(t, `{"routes": {"direct-lane-expiry": "2s"}}`)...),
		vere: []string{"--galaxy", "~bud=" + topoBudIP, "--lane", topoPlanetG + "=" + topoPlanetGLane,
			"--push-peek", "~bud/c/x/4/hello", "--time-limit", topoLife},
	})
	starVere := []string{"--galaxy", "~nec=" + topoG, "--galaxy", "~bud=" + topoBudIP}
	s := w.front(frontSpec{
		ship:   "~marnec",
		listen: topoS,
		relay:  []string{"--galaxy", "~nec=" + topoG, "--front-host-lane", topoG},
		vere:   append([]string{"--push-peek", "~nec/c/x/4/hello", "--until", "heer", "--time-limit", "10"}, starVere...),
	})
	// The star's first run ends at the page from its galaxy (or its time
	// limit: StarLearnedAtRelayPublicLane says which).
	star1 := s.ship
	star1.WaitTimeout(15 * time.Second)
	s.ship = s.startShip(t, append([]string{"--push-peek", "~bud/c/x/4/hello", "--time-limit", topoLife}, starVere...)...)

	// ~milrys-soglec pings once, from its own port, then only answers.
	ping := w.outside("poke", "~nec", topoPlanetG, topoG, "--from", "40000", "--bind", topoPlanetGIP, "--time-limit", "5")
	pingCode, _, _ := ping.WaitTimeout(10 * time.Second)
	planetG := w.outside("publish", topoPlanetG, "40000", "--bind", topoPlanetGIP, "--time-limit", topoLife)
	planetG.MustNext("READY", nil, readyTimeout)
	planetS := w.outside("publish", topoPlanetS, "40000", "--bind", topoPlanetSIP,
		"--ping", "~marnec@"+topoS, "--time-limit", topoLife)
	planetS.MustNext("READY", nil, readyTimeout)

	// peekFrom sends a peek for ship's path to lane from 10.88.0.IP:PORT
	// and fails t unless a page for it comes back from lane with data hello.
	peekFrom := func(t *testing.T, ship, path, lane, ip, port string) vtool.Line {
		t.Helper()
		p := w.outsideT(t, "peek", ship, path, lane, "--bind", ip, "--from", port, "--time-limit", "5")
		waitOK(t, p)
		page := mustNext(t, p, "RECV", map[string]any{"type": "page", "ship": ship, "path": path}, time.Second)
		if page.Str("from") != lane || page.Str("data") != "hello" {
			t.Errorf("the page came as %s; want from %s, data hello", page, lane)
		}
		t.Logf("requester: %s", page)
		return page
	}

	// pinged checks a sponsee's ping of its fronted sponsor f: the sponsee
	// (the vtool that pinged) read the ack from f's public lane, and f's
	// vere gave arvo the ping with the sponsee's true lane.
	pinged := func(t *testing.T, sponsee *vtool.Proc, f *frontPair, planet, lane string) {
		t.Helper()
		ack := firstLine(t, sponsee, "RECV", map[string]any{"type": "page", "path": "/a/x/1//ack/1"}, eventTimeout)
		if ack.Str("from") != f.spec.listen {
			t.Errorf("%s read the ack as %s; want from %s", planet, ack, f.spec.listen)
		}
		ev := firstLine(t, f.ship, "EVENT", map[string]any{"kind": "heer", "type": "poke", "payload_ship": planet}, eventTimeout)
		if ev.Str("lane") != lane {
			t.Errorf("%s's vere gave arvo the ping as %s; want lane %s", f.spec.ship, ev, lane)
		}
		t.Logf("%s: %s", planet, ack)
		t.Logf("%s: %s", f.spec.ship, ev)
	}

	// A planet STUNs its galaxy ~nec at relay G: the relay answers with the
	// planet's lane as the world sees it.
	t.Run("PlanetSTUNThroughFrontedGalaxy", func(t *testing.T) {
		p := w.outsideT(t, "ship", topoPlanetG, "0", "--stun-galaxy", "~nec", "--galaxy", "~nec="+topoG,
			"--until", "stun", "--time-limit", "10")
		ready := mustNext(t, p, "READY", nil, readyTimeout)
		waitOK(t, p)
		stun := mustNext(t, p, "STUN", nil, time.Second)
		port, _ := ready.Num("port")
		mapped, err := netip.ParseAddrPort(stun.Str("mapped"))
		if stun.Str("result") != "ok" || err != nil || int(mapped.Port()) != int(port) ||
			!netip.MustParsePrefix(frontWorldNet).Contains(mapped.Addr()) {
			t.Errorf("STUN: %s; want result ok, mapped %s:%v (READY %s)", stun, frontWorldNet, port, ready)
		}
		t.Logf("planet: %s", ready)
		t.Logf("planet: %s", stun)
	})

	// The star's request to its galaxy reaches the galaxy's vere from relay
	// S's public lane; nothing the galaxy's vere read or gave arvo names the
	// star's in-namespace address.
	t.Run("StarLearnedAtRelayPublicLane", func(t *testing.T) {
		if code, crashed := star1.Wait(); code != vtool.ExitOK || crashed {
			t.Errorf("%s: %s; want exit 0 at the galaxy's page\n%s", star1.Name(), star1.State(), star1.Tail(20))
		}
		recv := firstLine(t, g.ship, "RECV", map[string]any{"type": "peek", "ship": "~nec", "path": "/c/x/4/hello"}, eventTimeout)
		if recv.Str("from") != topoS {
			t.Errorf("~nec's vere read the star's peek as %s; want from relay S %s", recv, topoS)
		}
		sent := firstLine(t, g.ship, "SEND", map[string]any{"type": "page", "ship": "~nec", "path": "/c/x/4/hello"}, eventTimeout)
		if sent.Str("to") != topoS {
			t.Errorf("~nec's vere sent its page as %s; want to %s", sent, topoS)
		}
		if ev, ok := star1.Next("EVENT", map[string]any{"kind": "heer", "type": "page", "ship": "~nec"}, time.Second); !ok {
			t.Errorf("the star's vere heard no page from ~nec\n%s", star1.Tail(20))
		} else if ev.Str("lane") != topoG {
			t.Errorf("the star's vere heard ~nec's page as %s; want lane %s", ev, topoG)
		} else {
			t.Logf("star: %s", ev)
		}
		for _, l := range g.ship.Lines() {
			if (l.Word == "RECV" || l.Word == "EVENT") &&
				(strings.HasPrefix(l.Str("from"), topoShipIP+":") || strings.HasPrefix(l.Str("lane"), topoShipIP+":")) {
				t.Errorf("~nec's vere saw the star's in-namespace address: %s", l)
			}
		}
		t.Logf("galaxy: %s", recv)
		t.Logf("galaxy: %s", sent)
	})

	// A peek from outside for ~milrys-soglec, which pinged ~nec once, is
	// answered through relay G.
	t.Run("OutsidePeekForGalaxyPlanetAnswered", func(t *testing.T) {
		if pingCode != vtool.ExitOK {
			t.Fatalf("%s: %s; want the ping acked (exit 0)\n%s", ping.Name(), ping.State(), ping.Tail(20))
		}
		pinged(t, ping, g, topoPlanetG, topoPlanetGLane)
		peekFrom(t, topoPlanetG, "/c/x/4/first", topoG, "10.88.0.9", "41009")
	})

	// Both fronted veres' own requests leave from their relay's public
	// lane and are answered.
	t.Run("FrontedShipsOwnPeeksLeaveFromPublicLane", func(t *testing.T) {
		for _, f := range []*frontPair{g, s} {
			recv := firstLine(t, bud, "RECV", map[string]any{"type": "peek", "ship": "~bud", "from": f.spec.listen}, eventTimeout)
			ev := firstLine(t, f.ship, "EVENT", map[string]any{"kind": "heer", "type": "page", "ship": "~bud"}, eventTimeout)
			if ev.Str("lane") != topoBud || ev.Str("data") != "hello" {
				t.Errorf("%s's vere heard ~bud's page as %s; want lane %s, data hello", f.spec.ship, ev, topoBud)
			}
			t.Logf("~bud: %s", recv)
			t.Logf("%s: %s", f.spec.ship, ev)
		}
		for _, l := range bud.All("RECV", map[string]any{"type": "peek"}) {
			if from := l.Str("from"); from != topoG && from != topoS {
				t.Errorf("~bud read a peek from %s, not a relay's public lane: %s", from, l)
			}
		}
	})

	// The star's sponsee pings it through relay S, and a peek for it from
	// outside is answered through relay S.
	t.Run("StarSponseeReachable", func(t *testing.T) {
		pinged(t, planetS, s, topoPlanetS, topoPlanetSLane)
		peekFrom(t, topoPlanetS, "/c/x/4/star", topoS, "10.88.0.10", "41010")
	})

	// ~milrys-soglec has been silent since its one ping and the page of
	// the peek above: past relay G's 2 s routes.direct-lane-expiry (standing for
	// the five minutes), a peek from outside is still answered.
	t.Run("SilentSponseeStillReachable", func(t *testing.T) {
		last := planetG.All("SEND", nil)
		if len(last) == 0 {
			t.Log("~milrys-soglec has sent nothing since its ping")
		} else {
			t.Logf("~milrys-soglec's last datagram: %s", last[len(last)-1])
		}
		<-time.After(3 * time.Second)
		peekFrom(t, topoPlanetG, "/c/x/4/silent", topoG, "10.88.0.11", "41011")
		if l := g.ship.All("SEND", map[string]any{"type": "peek", "path": "/c/x/4/silent"}); len(l) > 0 {
			t.Logf("relay G handed the peek to vere, which forwarded it: %s", l[0])
		} else {
			t.Log("relay G forwarded the peek itself (vere sent no peek for /c/x/4/silent)")
		}
		logRelayLines(t, "relay G", g.relay, "/c/x/4/silent")
		if m, err := scrapeIn(w.name, "http://"+topoGMetric+"/metrics"); err == nil {
			t.Logf("relay G: relay_vouched_lanes_total %v, relay_to_ship_total %v", m["relay_vouched_lanes_total"], m["relay_to_ship_total"])
		}
	})

	// Relay G dies (SIGKILL) and a new one fronts the same namespace and
	// vere: it knows nothing of ~milrys-soglec, hands the peek to vere, and
	// vere forwards it from its own knowledge of the sponsee's lane.
	t.Run("RelayRestartLosesNoShipLane", func(t *testing.T) {
		g.relay.Kill()
		g.relay = g.startRelay(t)
		peekFrom(t, topoPlanetG, "/c/x/4/restart", topoG, "10.88.0.12", "41012")
		fwd := firstLine(t, g.ship, "SEND", map[string]any{"type": "peek", "ship": topoPlanetG, "path": "/c/x/4/restart"}, eventTimeout)
		if fwd.Str("to") != topoPlanetGLane {
			t.Errorf("~nec's vere forwarded the peek as %s; want to %s", fwd, topoPlanetGLane)
		}
		for _, l := range g.ship.Lines() {
			if l.Str("path") == "/c/x/4/restart" {
				t.Logf("galaxy: %s", l)
			}
		}
		logRelayLines(t, "new relay G", g.relay, "/c/x/4/restart")
		logRelayLines(t, "new relay G", g.relay, `"level":"warn"`)
		logRelayLines(t, "new relay G", g.relay, `"level":"error"`)
	})

	// Nothing any outside vtool received names loopback or link-local space.
	t.Run("NoPrivateHints", func(t *testing.T) { checkNoPrivateHints(t, all) })
}
