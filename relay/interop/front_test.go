package interop

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/urbit-relay/relay/internal/vtool"
)

// The fronting topology's addresses, all on one interface of the WORLD
// namespace: the relay's public lane and the outside parties' addresses.
const (
	frontRelayLane   = "10.88.0.1:13338" // ~nec's public lane: the relay
	frontMetricsAddr = "10.88.0.1:19338"
	frontBudIP       = "10.88.0.3" // ~bud, a galaxy outside
	frontWorldNet    = "10.88.0.0/24"
)

// frontSeq numbers the namespaces one test process creates.
var frontSeq atomic.Int32

// frontWorld is a fresh network namespace, WORLD, holding the outside
// parties and the relay: lo up and one interface, d0, with 10.88.0.1/24 to
// 10.88.0.9/24. Every vtool started in it through outside is kept, so that
// a later check can read everything the outside world received.
type frontWorld struct {
	t    *testing.T
	name string
	all  *outsideLog
}

// outsideLog collects the outside vtools of a whole test.
type outsideLog struct {
	mu    sync.Mutex
	procs []*vtool.Proc
}

func (o *outsideLog) add(p *vtool.Proc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.procs = append(o.procs, p)
}

func (o *outsideLog) list() []*vtool.Proc {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*vtool.Proc(nil), o.procs...)
}

// requireFrontNetns skips the test where fronting mode cannot run: vtool
// absent or unable to run, not root, no ip command.
func requireFrontNetns(t *testing.T) {
	t.Helper()
	vtool.Find(t)
	if os.Geteuid() != 0 {
		t.Skip("fronting mode needs root (network namespaces and a TUN device): test skipped")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2): fronting test skipped")
	}
}

// ipCmd runs `ip ARGS`, returning its combined output on failure.
func ipCmd(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetns creates namespace name (skipping the test when namespaces
// cannot be made) and deletes it at cleanup.
func newNetns(t *testing.T, name string) {
	t.Helper()
	if err := ipCmd("netns", "add", name); err != nil {
		t.Skipf("cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := ipCmd("netns", "delete", name); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
}

// newFrontWorld builds WORLD. d0 is a dummy interface where the kernel has
// the dummy driver, else one end of a veth pair (both ends up, the peer
// unaddressed): only d0's local addresses matter.
func newFrontWorld(t *testing.T, all *outsideLog) *frontWorld {
	t.Helper()
	name := fmt.Sprintf("rfw%d-%d", os.Getpid(), frontSeq.Add(1))
	newNetns(t, name)
	must := func(args ...string) {
		t.Helper()
		if err := ipCmd(append([]string{"-n", name}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	must("link", "set", "lo", "up")
	if err := ipCmd("-n", name, "link", "add", "d0", "type", "dummy"); err != nil {
		t.Logf("no dummy interface (%v): using a veth pair", err)
		must("link", "add", "d0", "type", "veth", "peer", "name", "d0p")
		must("link", "set", "d0p", "up")
	}
	must("link", "set", "d0", "up")
	for i := 1; i <= 9; i++ {
		must("addr", "add", fmt.Sprintf("10.88.0.%d/24", i), "dev", "d0")
	}
	return &frontWorld{t: t, name: name, all: all}
}

// outside starts vtool ARGS in WORLD (pass --time-limit) and records it.
func (w *frontWorld) outside(args ...string) *vtool.Proc {
	w.t.Helper()
	p := vtool.StartIn(w.t, w.name, args...)
	w.all.add(p)
	return p
}

// frontPair is a relay in fronting mode in WORLD and the vere (~nec) it
// fronts, in the namespace SHIPNS.
type frontPair struct {
	shipNS string
	relay  *vtool.Relay
	ship   *vtool.Proc
}

// startFront starts `relay run --front-netns SHIPNS` in w and `vtool ship
// ~nec 13338 --galaxy ~bud=10.88.0.3 EXTRA` in SHIPNS, and waits for the
// ship's READY and born event.
//
// SHIPNS is created here, before the relay, though the relay would create
// it: `ip netns exec WORLD relay ...` runs the relay in a mount namespace of
// its own, so the bind mount it makes under /run/netns is invisible outside
// it, and `ip netns exec SHIPNS` fails ("setting the network namespace ...
// failed: Invalid argument"). A relay started from the host's own namespace
// does not have that problem.
func startFront(t *testing.T, w *frontWorld, extra ...string) *frontPair {
	t.Helper()
	shipNS := fmt.Sprintf("rfs%d-%d", os.Getpid(), frontSeq.Add(1))
	newNetns(t, shipNS)
	r := vtool.StartRelayIn(t, w.name, "--ship", "~nec", "--listen", frontRelayLane,
		"--front-netns", shipNS, "--hint-net", "10.88.0.0/16",
		"--metrics", frontMetricsAddr, "--log-level", "debug")
	args := append([]string{"ship", "~nec", "13338", "--galaxy", "~bud=" + frontBudIP, "--time-limit", "30"}, extra...)
	ship := vtool.StartIn(t, shipNS, args...)
	ship.MustNext("READY", nil, readyTimeout)
	ship.MustNext("EVENT", map[string]any{"kind": "born"}, readyTimeout)
	return &frontPair{shipNS: shipNS, relay: r, ship: ship}
}

// waitOK waits for p to exit and fails the test unless it met its goal.
func waitOK(t *testing.T, p *vtool.Proc) {
	t.Helper()
	if code, crashed, ok := p.WaitTimeout(15 * time.Second); !ok || code != vtool.ExitOK || crashed {
		t.Fatalf("%s: %s; want exit 0\n%s", p.Name(), p.State(), p.Tail(20))
	}
}

// TestFrontedVere runs the relay in fronting mode in front of vere: the
// relay in WORLD on 10.88.0.1:13338, vere (~nec) in its own namespace whose
// only route is the relay's TUN device, and the outside parties on
// 10.88.0.2-9. Each subtest builds a fresh WORLD and relay+ship pair.
func TestFrontedVere(t *testing.T) {
	requireFrontNetns(t)
	all := &outsideLog{}

	// A peek from outside is answered by vere, which reads it from the
	// requester's true lane and answers that lane.
	t.Run("OutsidePeekAnswered", func(t *testing.T) {
		w := newFrontWorld(t, all)
		f := startFront(t, w)
		const from = "10.88.0.2:41002"
		p := w.outside("peek", "~nec", "/c/x/4/hello", frontRelayLane, "--bind", "10.88.0.2", "--from", "41002", "--time-limit", "5")
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
	t.Run("NoPrivateOrLoopbackLeaves", func(t *testing.T) {
		n := 0
		for _, p := range all.list() {
			for _, l := range p.All("RECV", nil) {
				n++
				for _, k := range []string{"next_hop", "origin", "from"} {
					v := l.Str(k)
					if strings.HasPrefix(v, "127.") || strings.HasPrefix(v, "169.254.") {
						t.Errorf("%s received %s: %s names %s", p.Name(), l, k, v)
					}
				}
			}
		}
		if n == 0 {
			t.Skip("no RECV lines from outside vtools: the scenarios above did not run")
		}
		t.Logf("%d RECV lines of %d outside vtools checked", n, len(all.list()))
	})
}

// scrapeIn GETs url from inside the network namespace name: the TCP socket
// is made on a thread that entered it (a socket keeps the namespace it was
// made in), and the request is written by hand, as http.Client dials from
// goroutines of its own.
func scrapeIn(name, url string) (map[string]float64, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Close = true
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer orig.Close()
		ns, err := netns.GetFromName(name)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		c, err := net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
		// A thread left in another namespace must die with its goroutine:
		// unlock only once it is back.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	defer r.c.Close()
	r.c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := req.Write(r.c); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(r.c), req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return vtool.ParseMetrics(resp.Body)
}
