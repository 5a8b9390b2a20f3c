package netnstest

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/seednet"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

// Timings of the network tests, short so the package runs in seconds; each
// is a fraction of its production default.
const (
	// retryInterval: a requester re-sends an unanswered request after this.
	retryInterval = 250 * time.Millisecond
	// pingInterval: publishers ping their sponsor's relay this often, so a
	// relay that restarts or a NAT that rebinds is re-taught within it.
	pingInterval = 200 * time.Millisecond
	// probeTimeout: an unanswered route counts a failure after this at the
	// requester (route.DefaultCandidateFailures of them drop a candidate).
	probeTimeout = 300 * time.Millisecond
	// endpointTick is the endpoints' timer resolution.
	endpointTick = 10 * time.Millisecond
	// roundGap separates the rounds of a sequential test: long enough for
	// a round's duplicate answers (the looser route's) to land first.
	roundGap = 100 * time.Millisecond
	// requestTimeout: a request not answered within this is lost.
	requestTimeout = 15 * time.Second
	// publishedPaths is how many paths each publisher serves (v/0 ...).
	publishedPaths = 1000
)

// seedHosts is the tests' network, after the seed's example (internal/harness/seednet,
// whose names it takes): a requester, relays fronting the galaxy ~syl and its
// star ~sipsyl, and three planets under ~sipsyl (real hosts in place of the
// example's ~ritpub-sipsyl relay and moon): one on the open network, one behind a firewall that drops
// unsolicited inbound UDP, one behind a NAT router.
type seedHosts struct {
	net                                        *network
	gal, star, req, req2, pub, fw, router, nat host
	galRelay, starRelay                        *relayProc

	syl, sipsyl, rov, pubShip, fwShip, natShip string
	galLane, starLane                          string
}

func newSeedHosts(t *testing.T, tag string) *seedHosts {
	t.Helper()
	n := newNetwork(t, tag)
	bin := relayBinary(t, false)
	s := &seedHosts{net: n, syl: seednet.Syl, sipsyl: seednet.Sipsyl, rov: seednet.Rovnys}
	sipsyl, err := lane.ParseShip(s.sipsyl)
	if err != nil {
		t.Fatal(err)
	}
	// Planets whose default sponsor is ~sipsyl: its number in the low 16
	// bits.
	planet := func(k uint64) string { return lane.ShipFromUint64(k<<16 | sipsyl.Lo).String() }
	s.pubShip, s.fwShip, s.natShip = planet(1), planet(2), planet(3)

	s.gal = n.addHost("gal", galaxyIP)
	s.star = n.addHost("star", starIP)
	s.req = n.addHost("req", requesterIP)
	s.req2 = n.addHost("req2", requester2IP)
	s.pub = n.addHost("pub", publisherIP)
	s.fw = n.addHost("fw", firewalledIP)
	n.firewall(s.fw)
	s.router, s.nat = n.addNATHost("nat")

	galAddr := netip.AddrPortFrom(galaxyIP, relayPort)
	starAddr := netip.AddrPortFrom(starIP, relayPort)
	s.galLane, s.starLane = galAddr.String(), starAddr.String()
	// The galaxy knows its star at a fixed address; the star knows its
	// galaxy. Planets' lanes are learned from their pings.
	s.galRelay = startRelay(t, "relay-"+s.syl, s.gal.ns, bin, galAddr,
		"--ship", s.syl, "--lane", s.sipsyl+"="+s.starLane)
	s.starRelay = startRelay(t, "relay-"+s.sipsyl, s.star.ns, bin, starAddr,
		"--ship", s.sipsyl, "--galaxy", s.syl+"="+s.galLane)
	return s
}

// publisher starts ship's endpoint on h: it publishes v/0 ... and pings its
// sponsor's relay every pingInterval.
func (s *seedHosts) publisher(t *testing.T, h host, ship string) *endpointProc {
	t.Helper()
	return startEndpoint(t, "publisher-"+ship, h.ns, endpointSpec{
		Ship: ship, Listen: netip.AddrPortFrom(h.ip, endpointPort).String(),
		Lanes: map[string]string{s.syl: s.galLane, s.sipsyl: s.starLane},
		Retry: retryInterval, Ping: pingInterval, Tick: endpointTick, Publish: publishedPaths,
	})
}

// requester starts ~rovnys on h, knowing only the galaxy's lane.
func (s *seedHosts) requester(t *testing.T, h host) *endpointProc {
	t.Helper()
	return startEndpoint(t, "requester-"+h.ns, h.ns, endpointSpec{
		Ship: s.rov, Listen: netip.AddrPortFrom(h.ip, endpointPort).String(),
		Lanes: map[string]string{s.syl: s.galLane},
		Retry: retryInterval, Ping: -1, Tick: endpointTick, ProbeTimeout: probeTimeout,
	})
}

// checkAnswer fails the test unless r answers path of ship.
func checkAnswer(t *testing.T, r report, ship, path string) {
	t.Helper()
	if !r.OK {
		t.Fatalf("%s %s: not answered: %s", ship, path, r.Err)
	}
	if want := publishedValue(ship, path); r.Data != want {
		t.Fatalf("%s %s: answered %q, want %q", ship, path, r.Data, want)
	}
}

// TestNetnsTightRouteBehindFirewall: a requester asks two publishers under
// ~sipsyl for a value a round, through the galaxy's relay at first. The
// first answer names the publisher's own lane (the star's relay heard it at
// hop 0 and the galaxy's relay passes it on: a next-hop never names a
// relay, docs/arvo-lanes.md L3). For the open publisher the route ends at
// the publisher itself; for the publisher behind a firewall the direct lane
// is tried, every datagram to it is dropped by the firewall, and the
// requester abandons it for the galaxy's relay it held, losing no request:
// every round is answered at its first try.
func TestNetnsTightRouteBehindFirewall(t *testing.T) {
	transporttest.CheckGoroutineLeaks(t)
	s := newSeedHosts(t, "fw")
	pub := s.publisher(t, s.pub, s.pubShip)
	fw := s.publisher(t, s.fw, s.fwShip)
	req := s.requester(t, s.req)
	pubLane, fwLane := pub.addr.String(), fw.addr.String()

	t.Run("open", func(t *testing.T) {
		want := [][]string{
			{s.galLane},
			{pubLane, s.galLane},
			{pubLane},
			{pubLane},
		}
		wantNext := []string{pubLane, "", "", ""}
		for i := range want {
			path := fmt.Sprintf("v/%d", i)
			r := req.peek(s.pubShip, path, requestTimeout)
			checkAnswer(t, r, s.pubShip, path)
			if r.Tries != 1 {
				t.Errorf("round %d: %d tries; tightening must lose no request", i, r.Tries)
			}
			if sends := req.sends(s.pubShip, path); len(sends) == 0 || !slices.Equal(sends[0], want[i]) {
				t.Errorf("round %d: sent to %v, want %v", i, sends, want[i])
			}
			if r.Next != wantNext[i] {
				t.Errorf("round %d: next-hop %q, want %q (from %s, %d hops)", i, r.Next, wantNext[i], r.From, r.Hops)
			}
			time.Sleep(roundGap)
		}
		if rt := req.routes(s.pubShip); rt.Direct != pubLane || !rt.DirectProven {
			t.Errorf("route to the open publisher: %+v, want its proven direct lane %s", rt, pubLane)
		}
	})

	t.Run("firewalled", func(t *testing.T) {
		const rounds, settled = 30, 5
		var last [][]string
		tried := -1
		for i := 0; i < rounds; i++ {
			path := fmt.Sprintf("v/%d", i)
			r := req.peek(s.fwShip, path, requestTimeout)
			checkAnswer(t, r, s.fwShip, path)
			if r.Tries != 1 {
				t.Errorf("round %d: %d tries; a dead tight route must cost no request", i, r.Tries)
			}
			if r.From == fwLane {
				t.Fatalf("round %d: answered from the firewalled lane %s", i, fwLane)
			}
			sends := req.sends(s.fwShip, path)
			if len(sends) == 0 {
				t.Fatalf("round %d: no send recorded", i)
			}
			if tried < 0 && slices.Contains(sends[0], fwLane) {
				tried = i
			}
			last = append(last, sends[0])
			time.Sleep(roundGap)
		}
		// The first rounds tighten as for the open publisher, up to its
		// direct lane.
		for i, want := range [][]string{{s.galLane}, {fwLane, s.galLane}} {
			if !slices.Equal(last[i], want) {
				t.Errorf("round %d: sent to %v, want %v", i, last[i], want)
			}
		}
		if tried < 0 {
			t.Fatalf("the direct lane %s was never tried: sends %v", fwLane, last)
		}
		for _, sends := range last[rounds-settled:] {
			if !slices.Equal(sends, []string{s.galLane}) {
				t.Fatalf("the last %d rounds sent to %v; want the dead lane abandoned, only %s", settled, last[rounds-settled:], s.galLane)
			}
		}
		probes := req.sendsTo(fwLane)
		drops := s.net.firewallDrops(s.fw)
		if drops != probes {
			t.Errorf("the firewall dropped %d datagrams, the requester sent %d to the direct lane", drops, probes)
		}
		abandoned := tried
		for abandoned < rounds && slices.Contains(last[abandoned], fwLane) {
			abandoned++
		}
		t.Logf("direct lane first tried in round %d, %d probes dropped by the firewall, abandoned by round %d; all %d rounds answered at the first try",
			tried, drops, abandoned, rounds)
		rt := req.routes(s.fwShip)
		if rt.Direct == fwLane || rt.Hint == fwLane || rt.Base == fwLane {
			t.Errorf("the requester's route still holds the dead lane %s: %+v", fwLane, rt)
		}
		t.Logf("requester's route to the firewalled publisher: direct %q hint %q (proven %v) base %q (proven %v)",
			rt.Direct, rt.Hint, rt.HintProven, rt.Base, rt.BaseProven)
	})
}

// TestNetnsNATRebinding: a publisher behind a NAT router is asked for a
// value every 50 ms while the router's public port for it changes. Requests
// in flight at the change are re-sent by the requester until the publisher's
// next ping teaches the star's relay the new lane; none is lost. Once the
// star's relay has heard the new lane beside the old one, its pages name
// neither (relay.nextHopFor: the old may be stale, the new a squatter's,
// until MoveSilence settles it), and the galaxy's relay, given no next-hop,
// names the star's relay: no page names the stale lane.
func TestNetnsNATRebinding(t *testing.T) {
	transporttest.CheckGoroutineLeaks(t)
	s := newSeedHosts(t, "nat")
	s.publisher(t, s.nat, s.natShip)
	req := s.requester(t, s.req)
	// Requests go out every streamGap, several per ping interval, so that
	// some reach the star's relay while its lane for the publisher is
	// stale.
	const before, after = 15, 60
	const streamGap = 50 * time.Millisecond

	// stream asks for paths from ... to-1, one every streamGap, calling
	// mid (if set) before request midAt.
	stream := func(from, to, midAt int, mid func()) []report {
		var chans []<-chan report
		for i := from; i < to; i++ {
			if i == midAt && mid != nil {
				mid()
			}
			chans = append(chans, req.peekAsync(s.natShip, fmt.Sprintf("v/%d", i), requestTimeout))
			time.Sleep(streamGap)
		}
		var out []report
		for i, ch := range chans {
			r := req.wait(ch, requestTimeout+peekTimeoutSlack)
			checkAnswer(t, r, s.natShip, fmt.Sprintf("v/%d", from+i))
			out = append(out, r)
		}
		return out
	}
	inRange := func(next string, ports string) bool {
		ap, err := netip.ParseAddrPort(next)
		if err != nil || ap.Addr() != routerIP {
			return false
		}
		var lo, hi uint16
		fmt.Sscanf(ports, "%d-%d", &lo, &hi)
		return ap.Port() >= lo && ap.Port() <= hi
	}

	first := stream(0, before, -1, nil)
	var oldLane string
	for _, r := range first[2:] { // rounds 0 and 1 come through the galaxy
		if !inRange(r.Next, natPortsBefore) {
			t.Fatalf("before the rebinding, a page's next-hop is %q; want the router's %s:%s", r.Next, routerIP, natPortsBefore)
		}
		oldLane = r.Next
	}

	var rebound time.Time
	second := stream(before, before+after, before+10, func() {
		s.net.rebindNAT(s.router)
		rebound = time.Now()
	})

	retried, maxTries, recovered := 0, 0, time.Duration(-1)
	for _, r := range second {
		if r.Tries > 1 {
			retried++
		}
		maxTries = max(maxTries, r.Tries)
		if recovered < 0 && time.Unix(0, r.End).After(rebound) && r.Next != oldLane {
			recovered = time.Unix(0, r.End).Sub(rebound)
		}
	}
	if recovered < 0 {
		t.Fatalf("every page after the rebinding named the stale lane %s; next-hops: %v", oldLane, nextHops(second))
	}
	for _, r := range second[len(second)-5:] {
		if r.Next != s.starLane && !inRange(r.Next, natPortsAfter) {
			t.Errorf("late page's next-hop %q; want the star's relay %s (the lane in dispute there) or the new public lane in %s", r.Next, s.starLane, natPortsAfter)
		}
	}
	t.Logf("public lane %s rebound to %s; pages stopped naming the old lane %v after the rebinding; %d of %d requests re-sent (at most %d tries), none lost",
		oldLane, natPortsAfter, recovered.Round(time.Millisecond), retried, after, maxTries)
}

func nextHops(rs []report) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Next)
	}
	return out
}

// TestNetnsRelayRestart: relays are killed (SIGKILL, losing their pending
// requests and learned lanes) and restarted while requests go through them;
// every request is answered once the requester re-sends it.
func TestNetnsRelayRestart(t *testing.T) {
	transporttest.CheckGoroutineLeaks(t)
	s := newSeedHosts(t, "kill")
	s.publisher(t, s.fw, s.fwShip) // reachable only through the star's relay
	s.publisher(t, s.pub, s.pubShip)
	const downtime = 500 * time.Millisecond
	const streamGap = 50 * time.Millisecond

	// stream asks ship for count paths, one every streamGap; before
	// request killAt it kills r, before request killAt+downtime/streamGap
	// it restarts r.
	stream := func(req *endpointProc, ship string, count, killAt int, r *relayProc) []report {
		restartAt := killAt + int(downtime/streamGap)
		var chans []<-chan report
		for i := 0; i < count; i++ {
			switch i {
			case killAt:
				r.kill()
			case restartAt:
				r.restart()
			}
			chans = append(chans, req.peekAsync(ship, fmt.Sprintf("v/%d", i), requestTimeout))
			time.Sleep(streamGap)
		}
		var out []report
		for i, ch := range chans {
			r := req.wait(ch, requestTimeout+peekTimeoutSlack)
			checkAnswer(t, r, ship, fmt.Sprintf("v/%d", i))
			out = append(out, r)
		}
		return out
	}
	summary := func(what string, rs []report) {
		t.Helper()
		retried, maxTries, slowest := 0, 0, 0.0
		for _, r := range rs {
			if r.Tries > 1 {
				retried++
			}
			maxTries, slowest = max(maxTries, r.Tries), max(slowest, r.Millis)
		}
		t.Logf("%s: %d requests all answered; %d re-sent, at most %d tries, slowest %.0f ms", what, len(rs), retried, maxTries, slowest)
		if retried == 0 {
			t.Errorf("%s: no request needed a retry, so the relay was not on the path while it was down", what)
		}
	}

	// The star's relay, on the only path to the firewalled publisher: the
	// requester has tightened its route to it by the time it dies.
	req := s.requester(t, s.req)
	summary("star relay killed mid-stream and restarted", stream(req, s.fwShip, 60, 20, s.starRelay))

	// The galaxy's relay, the only lane a new requester knows.
	req2 := s.requester(t, s.req2)
	summary("galaxy relay killed before a new requester's first request, restarted", stream(req2, s.pubShip, 30, 0, s.galRelay))
}
