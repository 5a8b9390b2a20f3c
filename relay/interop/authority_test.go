package interop

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

// Issue 21's fronting rows, with vere's drivers in the loop: the fronted
// ~nec's stub arvo acks only the sponsee's own pings (--accept
// ~milrys-soglec@ its host), as real arvo acks only a ping it decrypts. The
// sponsee P is ~milrys-soglec; the attacker sends from authAttacker, and
// the honest requester peeks for P from authRequester.
const (
	authSponsee   = "~milrys-soglec"
	authPIP       = "10.88.0.4"  // P's host
	authAttacker  = "10.88.0.9"  // the attacker's host
	authAttPort   = "41009"      // the attacker's port: it pings, peeks and answers there
	authRequester = "10.88.0.5"  // an honest requester
	authBaiter    = "10.88.0.10" // the attacker's second socket, asking names of P
	authPeeks     = 20           // honest peeks per measurement
)

// authCount is where a run of honest peeks for P went: answered by P, by
// the attacker, or by nobody.
type authCount struct{ p, attacker, none, n int }

func (c authCount) String() string {
	return fmt.Sprintf("%d/%d reached P, %d/%d the attacker, %d/%d unanswered", c.p, c.n, c.attacker, c.n, c.none, c.n)
}

// honestPeeks sends n peeks for P (each a fresh name, from its own port of
// authRequester) one after another and counts who answered each: P pages
// "from-P" (pdata), the attacker "from-attacker".
func honestPeeks(t *testing.T, w *frontWorld, tag string, n int, pdata string) authCount {
	t.Helper()
	c := authCount{n: n}
	for i := 0; i < n; i++ {
		port := strconv.Itoa(42000 + 100*int(tag[0]%10) + i)
		p := w.outsideT(t, "peek", authSponsee, fmt.Sprintf("/c/x/4/%s%d", tag, i), frontRelayLane,
			"--bind", authRequester, "--from", port, "--time-limit", "1")
		p.WaitTimeout(5 * time.Second)
		switch got := p.All("RECV", map[string]any{"type": "page"}); {
		case len(got) == 0:
			c.none++
		case got[0].Str("data") == pdata:
			c.p++
		default:
			c.attacker++
		}
	}
	return c
}

// authFront builds a world and fronts ~nec in it, accepting only P's pings from P's hosts (authPIP,
// and frontBudIP for the vere planet, which sends from OUTSIDE's first
// address), with the
// relay's direct-lane expiry at 2 s (standing for the 2 minutes: a lane
// learned from the wire is stale long before the test ends).
func authFront(t *testing.T, all *outsideLog) (*frontWorld, *frontPair) {
	t.Helper()
	vtool.Require(t, vtool.FeatureAccept)
	w := newFrontWorld(t, all)
	return w, w.front(frontSpec{
		ship:   "~nec",
		listen: frontRelayLane,
		relay:  append([]string{"--metrics", frontMetricsAddr}, relayConfig(t, `{"routes": {"direct-lane-expiry": "2s"}}`)...),
		vere: []string{"--galaxy", "~bud=" + frontBudIP, "--accept", authSponsee + "@" + authPIP,
			"--accept", authSponsee + "@" + frontBudIP, "--time-limit", "60"},
	})
}

// startP starts P on its host at port, pinging ~nec and answering every
// peek with data, and waits for the ship's ack of its first ping. With
// seq > 0 its pings are messages seq, seq+1, ... (each named as its own, as
// mesa names them); else each is message 1.
func startP(t *testing.T, w *frontWorld, port, data string, seq int) *vtool.Proc {
	t.Helper()
	args := []string{"publish", authSponsee, port, "--bind", authPIP, "--ping", "~nec@" + frontRelayLane,
		"--data", data, "--time-limit", "40"}
	first := "/a/x/1//ack/1"
	if seq > 0 {
		vtool.Require(t, vtool.FeaturePingSeq)
		args = append(args, "--ping-seq", strconv.Itoa(seq))
		first = fmt.Sprintf("/a/x/1//ack/%d", seq)
	}
	p := w.outsideT(t, args...)
	p.MustNext("READY", nil, readyTimeout)
	mustNext(t, p, "RECV", map[string]any{"type": "page", "path": first}, eventTimeout)
	return p
}

// rebound is every row's honest twin: P's NAT rebinds (a new port on its
// host) and it pings from there, every 25 s as a planet does; the ship's
// ack of a ping of P's own from there vouches for the new lane, and every
// honest peek reaches P there. P's pings from there are new messages
// (100, 101), named as their own: an ack of a name acked before (message
// 1) at another lane is a dupe, which moves nothing (relay/vouch.go).
// The twin waits for P's second ping from the new lane, as it did when
// the first could be contested.
func rebound(t *testing.T, w *frontWorld, f *frontPair, old *vtool.Proc) {
	t.Helper()
	old.Stop()
	p := startP(t, w, "40001", "from-P-rebound", 100)
	mustNext(t, p, "RECV", map[string]any{"type": "page", "path": "/a/x/1//ack/101"}, 30*time.Second)
	c := honestPeeks(t, w, "r", authPeeks, "from-P-rebound")
	t.Logf("twin: after P's NAT rebinding (two pings from %s:40001, 25 s apart, acked there): %v", authPIP, c)
	if c.p != c.n {
		t.Errorf("twin: %v; want every peek to reach P at its new lane", c)
	}
	for _, l := range f.ship.All("SEND", map[string]any{"type": "page"}) {
		t.Logf("vere: %s", l)
	}
	if m, err := scrapeIn(w.name, "http://"+frontMetricsAddr+"/metrics"); err == nil {
		t.Logf("relay: vouched %v, contested %v, refused %v", m["relay_vouched_lanes_total"], m["relay_vouch_contested_total"], m["relay_vouch_refused_total"])
	}
}

// refused checks that vere's stub arvo refused the attacker's ping.
func refused(t *testing.T, f *frontPair) {
	t.Helper()
	l := mustNext(t, f.ship, "ARVO", map[string]any{"kind": "refuse", "ship": authSponsee}, eventTimeout)
	t.Logf("vere: %s", l)
}

// TestFrontedAuthority: issue 21's fronting rows against vere's drivers.
// Each row measures where authPeeks honest peeks for P go after the attack
// (all to P, or the row fails), then its honest twin (rebound).
func TestFrontedAuthority(t *testing.T) {
	requireFrontNetns(t)
	all := &outsideLog{}

	// Row 1: a forged ping naming P, then a peek for ~nec's own public
	// page, both from the attacker's address: vere answers the peek there,
	// and a page for the ship's own name vouches for nobody.
	t.Run("ForgedPingThenOwnPage", func(t *testing.T) {
		w, f := authFront(t, all)
		p := startP(t, w, "40000", "from-P", 0)
		w.outsideT(t, "poke", "~nec", authSponsee, frontRelayLane, "--bind", authAttacker, "--from", authAttPort,
			"--retry", "0", "--time-limit", "0").WaitTimeout(5 * time.Second)
		own := w.outsideT(t, "peek", "~nec", "/c/x/4/hello", frontRelayLane, "--bind", authAttacker, "--from", authAttPort, "--time-limit", "2")
		waitOK(t, own)
		refused(t, f)
		att := w.outsideT(t, "publish", authSponsee, authAttPort, "--bind", authAttacker, "--data", "from-attacker", "--time-limit", "30")
		att.MustNext("READY", nil, readyTimeout)
		c := honestPeeks(t, w, "a", authPeeks, "from-P")
		t.Logf("forged ping + own page from %s:%s: %v", authAttacker, authAttPort, c)
		if c.p != c.n {
			t.Errorf("%v; want every honest peek for P to reach P", c)
		}
		rebound(t, w, f, p)
	})

	// Row 2: a poke naming P from the attacker's own address (its ping,
	// refused by vere), the attacker answering whatever it is sent: P's
	// own pages are the ones forwarded.
	t.Run("ForgedPokeAnsweredProbe", func(t *testing.T) {
		w, f := authFront(t, all)
		p := startP(t, w, "40000", "from-P", 0)
		att := w.outsideT(t, "publish", authSponsee, authAttPort, "--bind", authAttacker, "--ping", "~nec@"+frontRelayLane,
			"--data", "from-attacker", "--time-limit", "30")
		att.MustNext("READY", nil, readyTimeout)
		refused(t, f)
		c := honestPeeks(t, w, "b", authPeeks, "from-P")
		t.Logf("forged poke from %s:%s, answering what it is sent: %v", authAttacker, authAttPort, c)
		if c.p != c.n {
			t.Errorf("%v; want every honest peek for P to reach P", c)
		}
		// The forger stops: one that keeps pinging with P's ping name, in
		// step with P, keeps every ack contested and P where it was
		// (docs/reliability.md, fronting: what remains).
		att.Stop()
		rebound(t, w, f, p)
	})

	// Rows 3 and 4: P is a vere planet that pinged once and since only
	// STUNs (no ping for longer than the relay's 2 s direct-lane expiry),
	// and never answers names under /bait; the attacker pings naming P
	// (refused), asks 10 such names from a second socket and answers
	// whatever it is sent. P is neither replaced nor lost.
	t.Run("BaitAndSTUNOnlyPlanet", func(t *testing.T) {
		vtool.Require(t, vtool.FeatureUnanswered)
		w, f := authFront(t, all)
		// P's host's first address is 10.88.0.3, its source: it pings from
		// its port once, then runs vere there.
		ping := w.outsideT(t, "poke", "~nec", authSponsee, frontRelayLane, "--bind", frontBudIP, "--from", "40000", "--time-limit", "5")
		waitOK(t, ping)
		pinged := time.Now()
		p := w.outsideT(t, "ship", authSponsee, "40000", "--stun-galaxy", "~nec", "--galaxy", "~nec=10.88.0.1",
			"--page", "from-P", "--unanswered", "/bait", "--time-limit", "40")
		p.MustNext("READY", nil, readyTimeout)
		stun := mustNext(t, p, "STUN", nil, eventTimeout)
		t.Logf("P: %s", stun)
		att := w.outsideT(t, "publish", authSponsee, authAttPort, "--bind", authAttacker, "--ping", "~nec@"+frontRelayLane,
			"--data", "from-attacker", "--time-limit", "30")
		att.MustNext("READY", nil, readyTimeout)
		refused(t, f)
		for i := 0; i < 10; i++ {
			b := w.outsideT(t, "peek", authSponsee, fmt.Sprintf("/bait/%d", i), frontRelayLane,
				"--bind", authBaiter, "--from", strconv.Itoa(43000+i), "--time-limit", "1")
			b.WaitTimeout(5 * time.Second)
		}
		silent := time.Since(pinged)
		if silent < 2*time.Second {
			t.Fatalf("P's last ping only %v ago: the relay's 2 s direct-lane expiry has not passed", silent)
		}
		c := honestPeeks(t, w, "c", authPeeks, "from-P")
		t.Logf("STUN-only P, %v since its only ping, after 10 bait names from %s answered by %s:%s: %v",
			silent.Round(100*time.Millisecond), authBaiter, authAttacker, authAttPort, c)
		if c.p != c.n {
			t.Errorf("%v; want every honest peek for P to reach P", c)
		}
		if n := len(p.All("STUN", map[string]any{"result": "ok"})); n == 0 {
			t.Errorf("P's STUN never succeeded")
		}
		for _, l := range p.All("SEND", map[string]any{"type": "poke"}) {
			t.Errorf("P pinged after its first ping (%s): it must only STUN", l)
		}
	})
	t.Run("NoPrivateHints", func(t *testing.T) { checkNoPrivateHints(t, all) })
}
