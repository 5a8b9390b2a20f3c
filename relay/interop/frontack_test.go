package interop

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

// Issue 27's fronting row: the relay vouches for a sponsee's lane from the
// fronted ship's ack of the sponsee's ping (relay/vouch.go, rule (a)),
// checked with acks named as real mesa names them. Each ping of
// `vtool ship --arvo-lanes --ping-sponsors` is message n on flow 0, and its
// ack's name is /a/x/1//flow/0/ack/bak/~SNDR/n sealed into the pair's
// /chum/ namespace (docs/arvo-lanes.md, A1; urbit/urbit ames.hoon
// +make-space-path), so no two pings share an ack name; the fronted
// galaxy's stub arvo acks each ping's own name.
//
// The sponsee P is the star ~marnec, behind a NAT in a host namespace of
// its own (newArvoHost: 10.66.K.2, SNAT to arvoNATIP), pinging ~nec through
// the relay. Its NAT rebinds once: OUTSIDE starts a new conntrack zone for
// P's traffic and maps it to fackNewPort, so the entries of the old mapping
// are never matched again (Linux keeps them until they time out).
const (
	fackSponsee   = "~marnec" // P, sponsored by ~nec
	fackPort      = "40000"   // P's own port, and its first mapped port
	fackNewPort   = "41000"   // P's mapped port after its NAT rebinds
	fackPingMs    = "3000"    // P's ping period (arvo: 25 s)
	fackPings     = 3         // acked pings before the first measurement
	fackPeeks     = 10        // honest peeks per measurement
	fackAttacker  = "10.88.0.9"
	fackAttPort   = "41009"
	fackRequester = "10.88.0.5"
	// fackReplayPort is the replayer's port on fackAttacker, and
	// fackReplayPeeks the honest peeks after its replay: few, so that they
	// all go before P's next ping (fackPingMs) even when each is lost (1 s).
	fackReplayPort  = "41010"
	fackReplayPeeks = 2
)

// lastPing returns the bytes of the last hop-0 poke to ~nec that the
// relay fronting f read from lane from (its debug log prints each
// datagram's hex).
func lastPing(t *testing.T, f *frontPair, from string) []byte {
	t.Helper()
	var last []byte
	for _, l := range strings.Split(f.relay.Log(), "\n") {
		var d struct{ Msg, Remote, Packet, Hex string }
		if json.Unmarshal([]byte(l), &d) != nil || d.Msg != "datagram read" || d.Remote != from ||
			!strings.HasPrefix(d.Packet, "mesa poke hops 0 ~nec ") {
			continue
		}
		b, err := hex.DecodeString(d.Hex)
		if err != nil {
			t.Fatalf("relay log: %v: %s", err, l)
		}
		last = b
	}
	if last == nil {
		t.Fatalf("the relay read no ping to ~nec from %s", from)
	}
	return last
}

// fackReplayer is the attacker's socket that replayed a ping: it counts the
// peeks for P that reach it.
type fackReplayer struct {
	mu sync.Mutex
	n  int
}

func (r *fackReplayer) peeks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// fackReplay sends b to the relay from lane from (in OUTSIDE) and keeps
// the socket open until t ends, counting the peeks for P it receives.
func fackReplay(t *testing.T, w *frontWorld, from string, b []byte) *fackReplayer {
	t.Helper()
	var c *net.UDPConn
	if err := inNetns(w.outName, func() (err error) {
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(from)))
		return err
	}); err != nil {
		t.Fatalf("replayer: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.WriteToUDPAddrPort(b, netip.MustParseAddrPort(frontRelayLane)); err != nil {
		t.Fatalf("replay: %v", err)
	}
	r := &fackReplayer{}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			// a peek for one of the names fackPeek asks after the replay
			if bytes.Contains(buf[:n], []byte("c/x/4/e")) {
				r.mu.Lock()
				r.n++
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// fackCount is where a run of honest peeks for P went.
type fackCount struct{ p, attacker, none, n int }

func (c fackCount) String() string {
	return fmt.Sprintf("%d/%d reached P, %d/%d the attacker, %d/%d unanswered", c.p, c.n, c.attacker, c.n, c.none, c.n)
}

// fackPeek sends n peeks for P through the relay (each a fresh name, from
// its own port of fackRequester) one after another and counts who
// answered: P pages "from-P", the attacker "from-attacker".
func fackPeek(t *testing.T, w *frontWorld, tag string, base, n int) fackCount {
	t.Helper()
	c := fackCount{n: n}
	for i := 0; i < n; i++ {
		p := w.outsideT(t, "peek", fackSponsee, fmt.Sprintf("/c/x/4/%s%d", tag, i), frontRelayLane,
			"--bind", fackRequester, "--from", strconv.Itoa(base+i), "--time-limit", "1")
		p.WaitTimeout(5 * time.Second)
		switch got := p.All("RECV", map[string]any{"type": "page"}); {
		case len(got) == 0:
			c.none++
		case got[0].Str("data") == "from-P":
			c.p++
		default:
			c.attacker++
		}
	}
	return c
}

// fackMetrics is the relay's vouching counters.
type fackMetrics struct{ vouched, contested, refused float64 }

func (m fackMetrics) String() string {
	return fmt.Sprintf("vouched %v, contested %v, refused %v", m.vouched, m.contested, m.refused)
}

func fackScrape(t *testing.T, w *frontWorld) fackMetrics {
	t.Helper()
	m, err := scrapeIn(w.name, "http://"+frontMetricsAddr+"/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return fackMetrics{m["relay_vouched_lanes_total"], m["relay_vouch_contested_total"], m["relay_vouch_refused_total"]}
}

// fackAcks returns P's acked pings to ~nec so far.
func fackAcks(p *vtool.Proc) []vtool.Line {
	return p.All("ARVO", map[string]any{"kind": "acked", "ship": "~nec"})
}

// checkVouched fails t unless the relay's vouches are P's acked pings:
// every ack P had printed before the scrape (a) vouched, and none but
// those and one more on its way (b+1, the relay counts an ack as it passes
// it on) did; and nothing was contested.
func checkVouched(t *testing.T, when string, w *frontWorld, p *vtool.Proc) fackMetrics {
	t.Helper()
	a := len(fackAcks(p))
	m := fackScrape(t, w)
	b := len(fackAcks(p))
	t.Logf("%s: P's acked pings %d..%d; relay: %v", when, a, b, m)
	if m.vouched < float64(a) || m.vouched > float64(b+1) {
		t.Errorf("%s: relay vouched %v times for %d..%d acked pings of P; want one vouch per acked ping", when, m.vouched, a, b)
	}
	if m.contested != 0 {
		t.Errorf("%s: %v acks contested; each of P's pings has its own ack name, sent to one lane", when, m.contested)
	}
	return m
}

// TestFrontedVouchPerMessageAcks: the relay fronts ~nec (vere, with arvo's
// lane rules, acking only ~marnec's pings from the NAT's address); P pings
// ~nec every fackPingMs with per-message ack names. Each acked ping
// vouches once and nothing is contested; honest peeks for P reach P; after
// P's NAT rebinds they reach P at its new lane from its next acked ping on;
// a forged ping naming P from an attacker's lane (refused by ~nec) vouches
// nothing and moves no peek.
func TestFrontedVouchPerMessageAcks(t *testing.T) {
	requireFrontNetns(t)
	vtool.Require(t, vtool.FeatureArvoLanes)
	vtool.Require(t, vtool.FeatureAccept)
	all := &outsideLog{}
	w := newFrontWorld(t, all)
	f := w.front(frontSpec{
		ship:   "~nec",
		listen: frontRelayLane,
		relay:  []string{"--metrics", frontMetricsAddr},
		vere:   []string{"--arvo-lanes", "--accept", fackSponsee + "@" + arvoNATIP, "--time-limit", "90"},
	})
	hosts := &arvoHosts{w: w}
	pns, _ := hosts.host(t, true)
	p := vtool.StartIn(t, pns, "ship", fackSponsee, fackPort, "--galaxy", "~nec=10.88.0.1",
		"--arvo-lanes", "--ping-sponsors", "--ping-ms", fackPingMs, "--page", "from-P", "--time-limit", "90")
	all.add(p)
	p.MustNext("READY", nil, readyTimeout)
	oldLane := arvoNATIP + ":" + fackPort
	newLane := arvoNATIP + ":" + fackNewPort

	// Pings 1..fackPings, each acked under its own name.
	var inner []string
	for i := 1; i <= fackPings; i++ {
		l := mustNext(t, p, "ARVO", map[string]any{"kind": "acked", "ship": "~nec"}, 2*eventTimeout)
		if n, _ := l.Num("seq"); int(n) != i {
			t.Fatalf("P's ack %d is of message %v: %s", i, n, l)
		}
		inner = append(inner, l.Str("inner"))
	}
	slices.Sort(inner)
	if len(slices.Compact(slices.Clone(inner))) != fackPings {
		t.Fatalf("P's acks share names: %v; the test needs per-message names", inner)
	}
	t.Logf("P's first %d acks: %v", fackPings, inner)
	if got := f.ship.All("EVENT", map[string]any{"kind": "heer", "lane": oldLane}); len(got) == 0 {
		t.Fatalf("~nec heard nothing from P at %s\n%s", oldLane, f.ship.Tail(20))
	}
	checkVouched(t, "after P's first pings", w, p)
	c := fackPeek(t, w, "a", 42000, fackPeeks)
	t.Logf("honest peeks for P at %s: %v", oldLane, c)
	if c.p != c.n {
		t.Errorf("%v; want every honest peek to reach P", c)
	}

	// P's NAT rebinds just after an ack: P's next ping leaves from newLane.
	mustNext(t, p, "ARVO", map[string]any{"kind": "acked", "ship": "~nec"}, 2*eventTimeout)
	before := fackScrape(t, w)
	ackedBefore := len(fackAcks(p))
	for _, cmd := range []string{
		"iptables -t raw -A PREROUTING -i h1 -j CT --zone 1",
		"iptables -t raw -A PREROUTING -i o0 -d " + arvoNATIP + " -j CT --zone 1",
		"iptables -t nat -I POSTROUTING 1 -p udp -s 10.66.1.0/24 ! -d 10.66.1.0/24 -j SNAT --to-source " + newLane,
	} {
		sh(t, w.outName, cmd)
	}
	rebound := time.Now()
	// Before P pings again the relay holds its old lane, where the NAT
	// now drops what arrives: one peek shows it (a figure, not a rule).
	early := fackPeek(t, w, "b", 42100, 1)
	earlyIn := time.Since(rebound)
	// P's first ping from newLane: a ping may have left from the old
	// mapping while the rules went in (P pings every few seconds), so wait
	// for ~nec to hear one from newLane, then for P's ack of a ping after it.
	mustNext(t, f.ship, "EVENT", map[string]any{"kind": "heer", "lane": newLane}, 4*eventTimeout)
	mustNext(t, f.ship, "SEND", map[string]any{"to": newLane, "type": "page"}, 2*eventTimeout)
	l := mustNext(t, p, "ARVO", map[string]any{"kind": "acked", "ship": "~nec"}, 2*eventTimeout)
	for l2, ok := p.Next("ARVO", map[string]any{"kind": "acked", "ship": "~nec"}, 0); ok; l2, ok = p.Next("ARVO", map[string]any{"kind": "acked", "ship": "~nec"}, 0) {
		l = l2 // the newest ack read so far: the new lane's
	}
	seq, _ := l.Num("seq")
	after := checkVouched(t, "after the rebinding", w, p)
	c = fackPeek(t, w, "c", 42200, fackPeeks)
	t.Logf("P's NAT rebound to %s; a peek %v after (before P's next ping): %v; after ping %v (the first from %s) was acked: %v",
		newLane, earlyIn.Round(100*time.Millisecond), early, seq, newLane, c)
	if c.p != c.n {
		t.Errorf("after P's first acked ping from %s: %v; want every honest peek to reach P there", newLane, c)
	}
	if d := after.vouched - before.vouched; d < 1 || d > float64(len(fackAcks(p))-ackedBefore+1) {
		t.Errorf("the rebinding's pings vouched %v times", d)
	}

	// A forged ping naming P from the attacker's lane: ~nec refuses it (it
	// is not from P), so no ack goes there; the attacker answers whatever
	// it is sent.
	fb := fackScrape(t, w)
	fa := len(fackAcks(p))
	w.outsideT(t, "poke", "~nec", fackSponsee, frontRelayLane, "--bind", fackAttacker, "--from", fackAttPort,
		"--retry", "0", "--time-limit", "0").WaitTimeout(5 * time.Second)
	ref := mustNext(t, f.ship, "ARVO", map[string]any{"kind": "refuse", "ship": fackSponsee}, eventTimeout)
	t.Logf("~nec: %s", ref)
	att := w.outsideT(t, "publish", fackSponsee, fackAttPort, "--bind", fackAttacker, "--data", "from-attacker", "--time-limit", "30")
	att.MustNext("READY", nil, readyTimeout)
	c = fackPeek(t, w, "d", 42300, fackPeeks)
	fm := checkVouched(t, "after the forged ping", w, p)
	t.Logf("forged ping naming P from %s:%s: %v; relay vouched %v times meanwhile for P's %d acked pings",
		fackAttacker, fackAttPort, c, fm.vouched-fb.vouched, len(fackAcks(p))-fa)
	if c.p != c.n {
		t.Errorf("after the forged ping: %v; want every honest peek to reach P", c)
	}
	for _, s := range f.ship.All("SEND", map[string]any{"type": "page"}) {
		if s.Str("to") == fackAttacker+":"+fackAttPort {
			t.Errorf("~nec sent a page to the attacker's lane: %s", s)
		}
	}

	// A replay: the attacker, having seen P's last ping on the wire, sends
	// its bytes again from its own lane just after ~nec acked it. arvo acks
	// a message it acked before again, from any lane (ames.hoon
	// +sink:fo-call, "send dupe ack"; the stub's ARVO dupe), and vere sends
	// that ack to the lane its pit took from the replay (_mesa_hear_poke):
	// one ack name now went to two lanes, seconds apart. It vouches
	// nothing: honest peeks still reach P, and nothing reaches the replayer.
	vtool.Require(t, vtool.FeatureDupe)
	mustNext(t, p, "ARVO", map[string]any{"kind": "acked", "ship": "~nec"}, 2*eventTimeout)
	rb := fackScrape(t, w)
	ra := len(fackAcks(p))
	ping := lastPing(t, f, newLane)
	replayer := fackReplay(t, w, fackAttacker+":"+fackReplayPort, ping)
	dupe := mustNext(t, f.ship, "ARVO", map[string]any{"kind": "dupe", "ship": fackSponsee}, eventTimeout)
	c = fackPeek(t, w, "e", 42400, fackReplayPeeks)
	rm := fackScrape(t, w)
	got := replayer.peeks()
	t.Logf("replay of P's ping (%d bytes) from %s:%s: ~nec %s; honest peeks %v; the replayer got %d peeks for P; relay: vouched %v times meanwhile for P's %d acked pings, contested %v",
		len(ping), fackAttacker, fackReplayPort, dupe, c, got, rm.vouched-rb.vouched, len(fackAcks(p))-ra, rm.contested-rb.contested)
	if c.p != c.n || got != 0 {
		t.Errorf("after a replay of P's ping: %v, %d peeks for P reached the replayer; want every honest peek to reach P", c, got)
	}
	if d := rm.vouched - rb.vouched; d > float64(len(fackAcks(p))-ra+1) {
		t.Errorf("the replay's ack vouched: %v vouches for P's %d acked pings", d, len(fackAcks(p))-ra)
	}
	if d := rm.contested - rb.contested; d != 1 {
		t.Errorf("contested %v times by the replay's ack; want once (one ack name, a second lane)", d)
	}
	t.Logf("P pinged %d times, %d acked; relay: %v", len(p.All("ARVO", map[string]any{"kind": "push", "what": "poke"})), len(fackAcks(p)), fackScrape(t, w))
	t.Run("NoPrivateHints", func(t *testing.T) { checkNoPrivateHints(t, all) })
}
