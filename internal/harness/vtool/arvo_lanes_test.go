package vtool

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The stub arvo's lane rules (--arvo-lanes, docs/arvo-lanes.md) run by
// vere's own drivers on 127.0.0.1. Ships: the publisher ~ralnyt-botdyt
// (sponsor ~marnec, galaxy ~nec), the requester ~linnup-torsyx (galaxy
// ~bud). The galaxy ~nec is a vtool ship on a free port that the others
// reach through --galaxy ~nec=127.0.0.1:PORT.
const (
	rulePub = "~ralnyt-botdyt"
	ruleReq = "~linnup-torsyx"
	// ruleWait bounds the wait for one line: each step is a datagram or
	// two on loopback.
	ruleWait = 5 * time.Second
)

// startRuleShip starts `vtool ship SHIP PORT ARGS...` on a free port
// (retrying when the bind fails) and returns it, READY, with its port.
func startRuleShip(t *testing.T, ship string, args ...string) (*Proc, int) {
	t.Helper()
	for try := 1; ; try++ {
		port := FreeUDPPort(t)
		p := Start(t, append([]string{"ship", ship, strconv.Itoa(port), "--time-limit", "20"}, args...)...)
		if _, ok := p.Next("READY", nil, 10*time.Second); ok {
			return p, port
		}
		if code, _ := p.Wait(); code != ExitStart || try == 5 {
			t.Fatalf("%s: no READY (%s)\n%s", p.Name(), p.State(), p.Tail(20))
		}
	}
}

// lanesOf returns an ARVO push line's "lanes" as one string.
func lanesOf(l Line) string {
	var s []string
	if ls, ok := l.Fields["lanes"].([]any); ok {
		for _, x := range ls {
			s = append(s, fmt.Sprint(x))
		}
	}
	return strings.Join(s, " ")
}

// TestArvoLanesNextHopReplacesDirectLane: the requester holds a direct
// lane for the publisher (--lane) that has gone silent (a socket that
// never answers) and, --dead-ms 0, is judged dead at once, so round 1 asks
// [that lane, ~nec] (P1). The galaxy forwards to where the publisher really
// is, and the page comes back at hop 1 with that next-hop: arvo replaces
// its direct lane with the indirect next-hop (L3), gives %nail (N1), and
// round 2 asks [next-hop, ~nec]; the publisher answers round 2 at hop 0,
// which makes the lane direct again (L1).
func TestArvoLanesNextHopReplacesDirectLane(t *testing.T) {
	Require(t, FeatureArvoLanes)
	silent, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	old := silent.LocalAddr().String()

	var pub *Proc
	var real string
	for try := 1; ; try++ {
		port := FreeUDPPort(t)
		real = "127.0.0.1:" + strconv.Itoa(port)
		pub = Start(t, "publish", rulePub, strconv.Itoa(port), "--time-limit", "20")
		if _, ok := pub.Next("READY", nil, 10*time.Second); ok {
			break
		}
		if code, _ := pub.Wait(); code != ExitStart || try == 5 {
			t.Fatalf("%s: no READY (%s)", pub.Name(), pub.State())
		}
	}
	_, gPort := startRuleShip(t, "~nec", "--arvo-lanes", "--lane", rulePub+"="+real)
	req, _ := startRuleShip(t, ruleReq, "--arvo-lanes", "--galaxy", "~nec=127.0.0.1:"+strconv.Itoa(gPort),
		"--lane", rulePub+"="+old, "--dead-ms", "0", "--push-peek", rulePub+"/c/x/4/l3", "--rounds", "2", "--until", "rounds")
	if code, crashed := req.Wait(); code != ExitOK || crashed {
		t.Fatalf("%s: %s; want both rounds answered\n%s", req.Name(), req.State(), req.Tail(30))
	}
	r1 := req.MustNext("ARVO", map[string]any{"kind": "push", "round": 1}, ruleWait)
	if got := lanesOf(r1); got != old+" ~nec" || r1.Str("rule") != "direct, dead: lane and galaxy" {
		t.Errorf("round 1: %s; want lanes %q (P1, a dead direct lane)", r1, old+" ~nec")
	}
	a1 := req.MustNext("ARVO", map[string]any{"kind": "answer", "round": 1}, ruleWait)
	if h, _ := a1.Num("hops"); h != 1 || a1.Str("next_hop") != real {
		t.Errorf("round 1's answer %s; want hop 1 through ~nec, next_hop %s", a1, real)
	}
	l3 := req.All("ARVO", map[string]any{"kind": "lane", "ship": rulePub, "rule": "L3 next-hop replaces the direct lane"})
	if len(l3) != 1 || l3[0].Str("lane") != real || l3[0].Str("was") != old {
		t.Errorf("lane lines %v; want one L3 replacing direct %s by %s", req.All("ARVO", map[string]any{"kind": "lane"}), old, real)
	}
	if n := req.All("ARVO", map[string]any{"kind": "nail", "ship": rulePub}); len(n) == 0 || lanesOf(n[0]) != real+" ~nec" {
		t.Errorf("nail lines %v; want [%s ~nec] first", n, real)
	}
	r2 := req.MustNext("ARVO", map[string]any{"kind": "push", "round": 2}, ruleWait)
	if got := lanesOf(r2); got != real+" ~nec" || r2.Str("rule") != "indirect: lane and galaxy" {
		t.Errorf("round 2: %s; want lanes %q (P1, an indirect lane)", r2, real+" ~nec")
	}
	for _, l := range req.All("SEND", map[string]any{"type": "peek", "path": "/c/x/4/l3/2"}) {
		if to := l.Str("to"); to != real && to != "127.0.0.1:"+strconv.Itoa(gPort) {
			t.Errorf("round 2 sent to %s: %s", to, l)
		}
	}
}

// TestArvoLanesPingsNameEachMessage: a planet pings its sponsorship chain
// (--ping-sponsors, K1): the star ~marnec through the galaxy, as it holds
// no lane for it (P1), and the galaxy ~nec at its own lane. The galaxy acks
// each ping, and each ping is a new message whose name the galaxy reads
// differs from the last (A1: the old stub named every ping /a/x/1//ack/1);
// the next ping to ~nec follows its ack after --ping-ms.
func TestArvoLanesPingsNameEachMessage(t *testing.T) {
	Require(t, FeatureArvoLanes)
	g, gPort := startRuleShip(t, "~nec", "--arvo-lanes")
	p, _ := startRuleShip(t, rulePub, "--arvo-lanes", "--galaxy", "~nec=127.0.0.1:"+strconv.Itoa(gPort),
		"--ping-sponsors", "--ping-ms", "200")
	star := p.MustNext("ARVO", map[string]any{"kind": "push", "what": "poke", "ship": "~marnec", "seq": 1}, ruleWait)
	if lanesOf(star) != "~nec" || star.Str("rule") != "no lane: galaxy" {
		t.Errorf("the ping to the star: %s; want lanes [~nec] (no lane: galaxy)", star)
	}
	for seq := 1; seq <= 3; seq++ {
		push := p.MustNext("ARVO", map[string]any{"kind": "push", "what": "poke", "ship": "~nec", "seq": seq}, ruleWait)
		if lanesOf(push) != "~nec" || push.Str("rule") != "galaxy" {
			t.Errorf("ping %d: %s; want lanes [~nec] (a galaxy)", seq, push)
		}
		if want := fmt.Sprintf("/a/x/1//flow/0/ack/bak/%s/%d", rulePub, seq); push.Str("inner") != want {
			t.Errorf("ping %d's ack name before sealing %q; want %q", seq, push.Str("inner"), want)
		}
		p.MustNext("ARVO", map[string]any{"kind": "acked", "ship": "~nec", "seq": seq}, ruleWait)
	}
	// The galaxy's lines are read as they come, and the planet may print
	// its third ack before the test has read the galaxy's third ping:
	// wait for each ping line in turn (MustNext), not for what has been
	// read so far.
	seen := map[string]bool{}
	for len(seen) < 3 {
		l := g.MustNext("EVENT", map[string]any{"kind": "heer", "type": "poke", "payload_ship": rulePub}, ruleWait)
		if seen[l.Str("path")] {
			t.Fatalf("the galaxy read two pings named %s", l.Str("path"))
		}
		seen[l.Str("path")] = true
	}
	// L6: the galaxy learned the planet's lane from its hop-0 poke
	if l := g.All("ARVO", map[string]any{"kind": "lane", "ship": rulePub, "rule": "L1 hop 0", "heard": "poke"}); len(l) == 0 {
		t.Errorf("the galaxy learned no lane from the planet's ping\n%s", g.Tail(20))
	}
}

// TestArvoLanesGalaxyAddedBackWhenDead: the requester holds a direct lane
// for the publisher that never answers. Its first request, the peer live,
// names that lane alone (P1); arvo's retry (R2, --retry-ms 500), after the
// peer has been silent past --dead-ms 200 (L8), names the lane and the
// galaxy. vere ignores that retry while its own 9 re-sends of the name run
// (mesa.c _mesa_ef_send): arvo's real period, 2 minutes, is past them.
func TestArvoLanesGalaxyAddedBackWhenDead(t *testing.T) {
	Require(t, FeatureArvoLanes)
	silent, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	lane := silent.LocalAddr().String()
	req, _ := startRuleShip(t, ruleReq, "--arvo-lanes", "--galaxy", "~nec=127.0.0.1:"+strconv.Itoa(FreeUDPPort(t)),
		"--lane", rulePub+"="+lane, "--dead-ms", "200", "--retry-ms", "500", "--push-peek", rulePub+"/c/x/4/dead")
	first := req.MustNext("ARVO", map[string]any{"kind": "push", "round": 1, "retry": nil}, ruleWait)
	if got := lanesOf(first); got != lane || first.Str("rule") != "direct, live: lane" {
		t.Errorf("first push %s; want lanes %q (direct, live)", first, lane)
	}
	retry := req.MustNext("ARVO", map[string]any{"kind": "push", "round": 1, "retry": true}, ruleWait)
	if got := lanesOf(retry); got != lane+" ~nec" || retry.Str("rule") != "direct, dead: lane and galaxy" {
		t.Errorf("retry %s; want lanes %q (direct, dead)", retry, lane+" ~nec")
	}
}
