package interop

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

// The seed's example with the requesters that exist (issue 27): vere's
// drivers under a stub arvo that follows stock arvo's lane rules
// (`vtool ship --arvo-lanes`, docs/arvo-lanes.md) as the requester and as
// the publisher, the publisher public or behind a NAT; the publisher's
// galaxy and star either stock (vtool ships, vere's own forwarding) or
// fronted by relays. Round after round the requester asks the publisher for
// a new name; each round's %push names the lanes +make-lanes gives, and the
// answer says which way it came.
//
// Every party but the fronted veres runs in a host namespace of its own
// hanging off OUTSIDE (newArvoHost), which routes between them and WORLD
// and, for the host behind the NAT, rewrites its source to arvoNATIP
// (iptables SNAT; Linux conntrack then drops what arrives at the mapped
// port from anyone the host has not sent to).
const (
	arvoRequester = "~linnup-torsyx" // a planet under ~bud: not the publisher's galaxy
	arvoPublisher = "~ralnyt-botdyt" // sponsor ~marnec, galaxy ~nec
	arvoPubPort   = "40000"
	arvoNATIP     = "10.88.0.16" // the NAT's public address, on OUTSIDE's o0
	arvoRounds    = 5
	// arvoMs compresses arvo's periods so a round table fits in seconds:
	// dead after 3 s silent (arvo: 30 s), retries every 5 s (2 min), pings
	// every 2 s (25 s). Each scenario ends well before any of them matters
	// except the pings, which keep the sponsors' lanes fresh.
	arvoDeadMs  = "3000"
	arvoRetryMs = "5000"
	arvoPingMs  = "2000"
	arvoLife    = "30"
)

// arvoHosts numbers the host namespaces of one WORLD (10.88.K.0/24).
type arvoHosts struct {
	w *frontWorld
	k int
}

// newArvoHost makes a namespace for one party, joined to OUTSIDE by a veth
// pair: public, the party is 10.88.K.2 (WORLD routes 10.88.K.0/24 to
// OUTSIDE); behind the NAT, it is 10.66.K.2 and OUTSIDE rewrites its source
// to arvoNATIP. It returns the namespace and the party's address.
func (h *arvoHosts) host(t *testing.T, nat bool) (string, string) {
	t.Helper()
	h.k++
	ns := frontNetnsName("rah")
	newNetns(t, ns)
	must := func(args ...string) {
		t.Helper()
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	out := h.w.outName
	dev := fmt.Sprintf("h%d", h.k)
	net := fmt.Sprintf("10.88.%d", h.k)
	if nat {
		net = fmt.Sprintf("10.66.%d", h.k)
	}
	must("-n", out, "link", "add", dev, "type", "veth", "peer", "name", "e0", "netns", ns)
	must("-n", out, "addr", "add", net+".1/24", "dev", dev)
	must("-n", out, "link", "set", dev, "up")
	must("-n", ns, "addr", "add", net+".2/24", "dev", "e0")
	must("-n", ns, "link", "set", "lo", "up")
	must("-n", ns, "link", "set", "e0", "up")
	must("-n", ns, "route", "add", "default", "via", net+".1")
	if h.k == 1 {
		sh(t, out, "sysctl -qw net.ipv4.ip_forward=1")
	}
	if nat {
		sh(t, out, fmt.Sprintf("iptables -t nat -A POSTROUTING -s %s.0/24 ! -d %s.0/24 -j SNAT --to-source %s", net, net, arvoNATIP))
	} else {
		must("-n", h.w.name, "route", "add", net+".0/24", "via", "10.88.0.3")
	}
	return ns, net + ".2"
}

// sh runs a shell command in namespace ns, failing t (skipping it when the
// tool is missing: iptables).
func sh(t *testing.T, ns, cmd string) {
	t.Helper()
	if out, err := execIn(ns, cmd); err != nil {
		if strings.Contains(out, "not found") {
			t.Skipf("%s: %s: test skipped", cmd, strings.TrimSpace(out))
		}
		t.Fatalf("%s in %s: %v: %s", cmd, ns, err, out)
	}
}

// arvoRound is one round of the requester: what it pushed and how the
// answer came.
type arvoRound struct {
	n       int
	rule    string   // +make-lanes's case
	lanes   []string // the lanes the %push named
	from    string   // the answer's source
	hops    int
	nextHop string
	ms      float64
	lane    string // the lane arvo held after the answer
	laneHop int
	// pFrom is where the publisher's vere read this round's request from,
	// in order: R (straight from the requester), the galaxy or a relay
	pFrom   string
	pDirect bool // P read it straight from R
}

func (r arvoRound) direct() bool { return r.hops == 0 }

// arvoScenario is one side of the comparison.
type arvoScenario struct {
	name   string
	relays bool // the galaxy and the star fronted by relays; else stock vtool ships
	nat    bool // the publisher behind the NAT
}

// TestArvoLanesSeedExample runs the seed's example four ways (stock
// galaxies or relays, public or NATed publisher) and logs, round by round,
// the lanes each request went to and how it was answered.
func TestArvoLanesSeedExample(t *testing.T) {
	requireFrontNetns(t)
	vtool.Require(t, vtool.FeatureArvoLanes)
	scenarios := []arvoScenario{
		{name: "StockPublic"},
		{name: "RelaysPublic", relays: true},
		{name: "StockNAT", nat: true},
		{name: "RelaysNAT", relays: true, nat: true},
	}
	tables := map[string][]arvoRound{}
	all := &outsideLog{}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			rounds := runArvoScenario(t, all, sc)
			tables[sc.name] = rounds
			t.Logf("%s:\n%s", sc.name, arvoTable(rounds))
			checkArvoRounds(t, sc, rounds)
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | rounds until direct | lanes of round 1 | round 2 | round %d |\n|---|---|---|---|---|\n", arvoRounds)
	for _, sc := range scenarios {
		r := tables[sc.name]
		if len(r) < arvoRounds {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", sc.name, untilDirect(r),
			strings.Join(r[0].lanes, " "), strings.Join(r[1].lanes, " "), strings.Join(r[arvoRounds-1].lanes, " "))
	}
	t.Logf("side by side:\n%s", b.String())
}

// untilDirect is the number of round trips through the galaxy (or relays)
// before the first answer at hop 0, or "never".
func untilDirect(rs []arvoRound) string {
	for i, r := range rs {
		if r.direct() {
			return fmt.Sprint(i)
		}
	}
	return "never"
}

func arvoTable(rs []arvoRound) string {
	var b strings.Builder
	b.WriteString("| round | rule | lanes pushed | P read it from | answered from | hops | next-hop | ms | lane held after |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %d | %s | %.0f | %s (hop %d) |\n", r.n, r.rule,
			strings.Join(r.lanes, " "), r.pFrom, r.from, r.hops, r.nextHop, r.ms, r.lane, r.laneHop)
	}
	return b.String()
}

// runArvoScenario builds one world, lets the publisher ping its sponsors
// until both acked, then runs the requester's rounds and reads them back.
func runArvoScenario(t *testing.T, all *outsideLog, sc arvoScenario) []arvoRound {
	w := newFrontWorld(t, all)
	hosts := &arvoHosts{w: w}
	arvo := []string{"--arvo-lanes", "--dead-ms", arvoDeadMs, "--retry-ms", arvoRetryMs, "--ping-ms", arvoPingMs}

	var galaxyIP string
	var sponsors []*vtool.Proc
	if sc.relays {
		galaxyIP = "10.88.0.1"
		g := w.front(frontSpec{
			ship:   "~nec",
			listen: topoG,
			relay:  []string{"--galaxy", "~nec=" + topoG, "--front-host-lane", topoS},
			vere:   append([]string{"--time-limit", arvoLife}, arvo...),
		})
		s := w.front(frontSpec{
			ship:   "~marnec",
			listen: topoS,
			relay:  []string{"--galaxy", "~nec=" + topoG, "--front-host-lane", topoG},
			vere:   append([]string{"--galaxy", "~nec=" + topoG, "--ping-sponsors", "--time-limit", arvoLife}, arvo...),
		})
		sponsors = []*vtool.Proc{g.ship, s.ship}
	} else {
		gns, gip := hosts.host(t, false)
		galaxyIP = gip
		g := vtool.StartIn(t, gns, append([]string{"ship", "~nec", "13338", "--time-limit", arvoLife}, arvo...)...)
		g.MustNext("READY", nil, readyTimeout)
		sns, _ := hosts.host(t, false)
		s := vtool.StartIn(t, sns, append([]string{"ship", "~marnec", "13337", "--galaxy", "~nec=" + galaxyIP,
			"--ping-sponsors", "--time-limit", arvoLife}, arvo...)...)
		s.MustNext("READY", nil, readyTimeout)
		sponsors = []*vtool.Proc{g, s}
	}
	// the star's ping to its galaxy acked: the galaxy has its lane
	mustNext(t, sponsors[1], "ARVO", map[string]any{"kind": "acked", "ship": "~nec"}, eventTimeout)

	pns, pip := hosts.host(t, sc.nat)
	pub := vtool.StartIn(t, pns, append([]string{"ship", arvoPublisher, arvoPubPort, "--galaxy", "~nec=" + galaxyIP,
		"--ping-sponsors", "--time-limit", arvoLife}, arvo...)...)
	all.add(pub)
	pub.MustNext("READY", nil, readyTimeout)
	mustNext(t, pub, "ARVO", map[string]any{"kind": "acked", "ship": "~nec"}, eventTimeout)
	mustNext(t, pub, "ARVO", map[string]any{"kind": "acked", "ship": "~marnec"}, eventTimeout)
	pubLane := pip + ":" + arvoPubPort
	if sc.nat {
		pubLane = arvoNATIP + ":" + arvoPubPort
	}

	rns, rip := hosts.host(t, false)
	req := vtool.StartIn(t, rns, append([]string{"ship", arvoRequester, "0", "--galaxy", "~nec=" + galaxyIP,
		"--push-peek", arvoPublisher + "/c/x/4/seed", "--rounds", fmt.Sprint(arvoRounds), "--until", "rounds",
		"--time-limit", "20"}, arvo...)...)
	all.add(req)
	if code, crashed, ok := req.WaitTimeout(30 * time.Second); !ok || code != vtool.ExitOK || crashed {
		t.Fatalf("%s: %s; want every round answered\n%s", req.Name(), req.State(), req.Tail(40))
	}
	var rounds []arvoRound
	var held vtool.Line
	for _, l := range req.Lines() {
		if l.Word != "ARVO" {
			continue
		}
		switch l.Str("kind") {
		case "push":
			if l.Str("what") != "peek" || l.Fields["retry"] == true {
				continue
			}
			n, _ := l.Num("round")
			r := arvoRound{n: int(n), rule: l.Str("rule")}
			if ls, ok := l.Fields["lanes"].([]any); ok {
				for _, x := range ls {
					r.lanes = append(r.lanes, fmt.Sprint(x))
				}
			}
			rounds = append(rounds, r)
		case "lane":
			if l.Str("ship") == arvoPublisher {
				held = l
			}
		case "answer":
			if len(rounds) == 0 {
				continue
			}
			r := &rounds[len(rounds)-1]
			r.from, r.nextHop = l.Str("from"), l.Str("next_hop")
			h, _ := l.Num("hops")
			r.hops = int(h)
			r.ms, _ = l.Num("ms")
			r.lane = held.Str("lane")
			lh, _ := held.Num("hop")
			r.laneHop = int(lh)
		}
	}
	if len(rounds) != arvoRounds {
		t.Fatalf("%d rounds read; want %d\n%s", len(rounds), arvoRounds, req.Tail(40))
	}
	ready := req.All("READY", nil)[0]
	port, _ := ready.Num("port")
	reqLane := fmt.Sprintf("%s:%d", rip, int(port))
	// Every round was answered, so P read every round's request: wait
	// until the harness has read P's line for the last one (P runs on, and
	// its stdout may lag R's exit under load; a CI run once saw round 5
	// with no reader).
	last := fmt.Sprintf("/c/x/4/seed/%d", rounds[len(rounds)-1].n)
	if _, ok := pub.Next("RECV", map[string]any{"type": "peek", "path": last}, 10*time.Second); !ok {
		t.Fatalf("%s: P never logged reading %s, which was answered\n%s", sc.name, last, pub.Tail(40))
	}
	for i := range rounds {
		path := fmt.Sprintf("/c/x/4/seed/%d", rounds[i].n)
		var from []string
		for _, l := range pub.All("RECV", map[string]any{"type": "peek", "path": path}) {
			f := strings.Replace(l.Str("from"), reqLane, "R", 1)
			if !slices.Contains(from, f) {
				from = append(from, f)
			}
		}
		rounds[i].pFrom = strings.Join(from, " ")
		rounds[i].pDirect = slices.Contains(from, "R")
	}
	for i := range rounds {
		rounds[i].lane = strings.Replace(rounds[i].lane, pubLane, "P", 1)
		rounds[i].from = strings.Replace(rounds[i].from, pubLane, "P", 1)
		rounds[i].nextHop = strings.Replace(rounds[i].nextHop, pubLane, "P", 1)
		for j := range rounds[i].lanes {
			rounds[i].lanes[j] = strings.Replace(rounds[i].lanes[j], pubLane, "P", 1)
		}
	}
	t.Logf("P is %s, R %s; the galaxy ~nec %s", pubLane, reqLane, galaxyIP)
	return rounds
}

// checkArvoRounds asserts what the rules imply for each scenario.
func checkArvoRounds(t *testing.T, sc arvoScenario, rs []arvoRound) {
	t.Helper()
	// P1: the first request, with no lane for the publisher, goes to its
	// galaxy alone.
	if got := strings.Join(rs[0].lanes, " "); got != "~nec" || rs[0].direct() {
		t.Errorf("round 1 went to %q, answered at hop %d; want [~nec] only, answered through it", got, rs[0].hops)
	}
	for i := 1; i < len(rs); i++ {
		prev, r := rs[i-1], rs[i]
		// P1 after L1/L3: an indirect lane asks [lane, galaxy]; a direct,
		// live one the lane alone.
		want := prev.lane + " ~nec"
		if prev.laneHop == 0 {
			want = prev.lane
		}
		if got := strings.Join(r.lanes, " "); got != want {
			t.Errorf("round %d went to %q; after round %d's lane %s (hop %d) +make-lanes gives %q", r.n, got, prev.n, prev.lane, prev.laneHop, want)
		}
		// once direct, a stock requester stays direct (nothing answers
		// from elsewhere to un-tighten it)
		if prev.direct() && !r.direct() {
			t.Errorf("round %d was answered at hop %d after round %d came direct: un-tightened", r.n, r.hops, prev.n)
		}
	}
	if sc.nat {
		// the publisher never sent to the requester, so its NAT drops every
		// direct request: P never reads one from R, every answer comes
		// through the galaxy (or its relay) and the lane stays indirect,
		// [P, ~nec] every round
		if untilDirect(rs) != "never" {
			t.Errorf("rounds until direct %s; want never (P behind its NAT)", untilDirect(rs))
		}
		for _, r := range rs {
			if r.pDirect {
				t.Errorf("round %d: P read the request straight from R through its NAT", r.n)
			}
		}
		return
	}
	// public: round 1 reaches P through the galaxy; from round 2 on P reads
	// R's request straight from R (the %push names P's lane). arvo goes
	// direct at the first round whose direct answer wins the race with the
	// galaxy's copy: vere hands arvo only the first page of a name (F2), so
	// that is round 2 or, when the galaxy's copy wins, a later one.
	if rs[0].pDirect {
		t.Errorf("round 1: P read the request straight from R; R had no lane for it")
	}
	for _, r := range rs[1:] {
		if !r.pDirect {
			t.Errorf("round %d: P read the request from %q; want straight from R too", r.n, r.pFrom)
		}
	}
}

// execIn runs `sh -c cmd` in namespace ns and returns its combined output.
func execIn(ns, cmd string) (string, error) {
	out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", cmd).CombinedOutput()
	return string(out), err
}
