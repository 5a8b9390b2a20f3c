package interop

// The namespace topology that the fronting tests share: WORLD (the relays'
// host, on 10.88.0.1 and .2), OUTSIDE (the outside parties, on 10.88.0.3 and
// up and 10.77.0.5), joined by a veth pair, and one namespace per fronted
// vere, whose only route is its relay's TUN device. The relays' host is
// not the outside parties': a fronted vere may reach them, not WORLD's own
// addresses (front.Conn refuses those unless declared, --front-host-lane).

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

const (
	frontWorldNet   = "10.88.0.0/24" // the addresses of WORLD and OUTSIDE
	frontWorldHosts = 20             // 10.88.0.1 to 10.88.0.20
	frontRelayHosts = 2              // WORLD has 10.88.0.1 and .2; OUTSIDE the rest
	frontHintNet    = "10.88.0.0/16" // the relays' --hint-net: WORLD counts as public
	// frontRelayUser is the user the fronting relays run as, with no
	// capabilities: relay front setup makes their devices and drops to it.
	frontRelayUser = "nobody"
	// frontLANIP is a host on the operator's LAN, also on d0: private, and
	// outside every relay's --hint-net.
	frontLANIP = "10.77.0.5"
)

// frontSeq numbers the namespaces one test process creates.
var frontSeq atomic.Int32

// frontNetnsName returns a namespace name unique to this process and call.
func frontNetnsName(prefix string) string {
	return fmt.Sprintf("%s%d-%d", prefix, os.Getpid(), frontSeq.Add(1))
}

// frontWorld is two fresh network namespaces: WORLD, holding the relays
// (d0: 10.88.0.1/24 and .2, 10.77.0.1/24), and OUTSIDE, holding the outside
// parties (o0: 10.88.0.3/24 to .20, frontLANIP/24), d0 and o0 the ends of
// one veth pair. Every vtool started in OUTSIDE through outside is kept, so
// that a later check can read everything the outside world received.
type frontWorld struct {
	t       *testing.T
	name    string // WORLD
	outName string // OUTSIDE
	all     *outsideLog
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

// checkNoPrivateHints fails t for every RECV line of every outside vtool
// whose next_hop, origin or from names loopback (127.0.0.0/8) or link-local
// (169.254.0.0/16, where the fronted veres live) space, and skips it when
// there are no RECV lines to check.
func checkNoPrivateHints(t *testing.T, all *outsideLog) {
	t.Helper()
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
	if _, err := user.Lookup(frontRelayUser); err != nil {
		t.Skipf("no user %s to run the unprivileged relay as: %v", frontRelayUser, err)
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

// newFrontWorld builds WORLD and OUTSIDE.
func newFrontWorld(t *testing.T, all *outsideLog) *frontWorld {
	t.Helper()
	w := &frontWorld{t: t, name: frontNetnsName("rfw"), outName: frontNetnsName("rfo"), all: all}
	newNetns(t, w.name)
	newNetns(t, w.outName)
	must := func(ns string, args ...string) {
		t.Helper()
		if err := ipCmd(append([]string{"-n", ns}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	must(w.name, "link", "add", "d0", "type", "veth", "peer", "name", "o0", "netns", w.outName)
	for i := 1; i <= frontWorldHosts; i++ {
		ns, dev := w.name, "d0"
		if i > frontRelayHosts {
			ns, dev = w.outName, "o0"
		}
		must(ns, "addr", "add", fmt.Sprintf("10.88.0.%d/24", i), "dev", dev)
	}
	must(w.name, "addr", "add", "10.77.0.1/24", "dev", "d0")
	must(w.outName, "addr", "add", frontLANIP+"/24", "dev", "o0")
	for _, x := range [][2]string{{w.name, "d0"}, {w.outName, "o0"}} {
		must(x[0], "link", "set", "lo", "up")
		must(x[0], "link", "set", x[1], "up")
	}
	return w
}

// outside starts vtool ARGS in OUTSIDE (pass --time-limit) and records it.
// It is the WORLD's test that owns the process, unless the caller passes
// its own (a subtest's) t.
func (w *frontWorld) outside(args ...string) *vtool.Proc {
	w.t.Helper()
	return w.outsideT(w.t, args...)
}

// outsideT is outside owned by t: t's cleanup ends the process, and a
// failure to start fails t.
func (w *frontWorld) outsideT(t *testing.T, args ...string) *vtool.Proc {
	t.Helper()
	p := vtool.StartIn(t, w.outName, args...)
	w.all.add(p)
	return p
}

// frontSpec is one fronted ship: `relay run --ship SHIP --listen LISTEN
// --front-netns SHIPNS --hint-net 10.88.0.0/16 --log-level debug RELAY...`
// in WORLD, and `vtool ship SHIP PORT VERE...` in SHIPNS, PORT being
// LISTEN's (the relay's default fronting.port). VERE includes --time-limit.
type frontSpec struct {
	ship   string
	listen string
	relay  []string
	vere   []string
}

// frontPair is a relay in fronting mode in WORLD and the vere it fronts, in
// the namespace SHIPNS.
type frontPair struct {
	w      *frontWorld
	spec   frontSpec
	shipNS string
	relay  *vtool.Relay
	ship   *vtool.Proc
}

// front creates SHIPNS, starts the relay in w and vere in SHIPNS, and waits
// for vere's READY and born event. The processes belong to w's test.
//
// SHIPNS is created here, before the relay: `ip netns exec WORLD relay
// front setup ...` runs in a mount namespace of its own, where a namespace
// it made under /run/netns would be invisible outside it, so it refuses to
// make one (front.CheckVisible) and asks for `ip netns add` first.
func (w *frontWorld) front(spec frontSpec) *frontPair {
	w.t.Helper()
	f := &frontPair{w: w, spec: spec, shipNS: frontNetnsName("rfs")}
	newNetns(w.t, f.shipNS)
	f.relay = f.startRelay(w.t)
	f.ship = f.startShip(w.t, spec.vere...)
	return f
}

// startRelay starts (or, once the previous one has ended, restarts) the
// relay, owned by t. SHIPNS and whatever runs in it survive a relay: the
// new one recreates the TUN device in it.
func (f *frontPair) startRelay(t *testing.T) *vtool.Relay {
	t.Helper()
	args := append([]string{"--ship", f.spec.ship, "--listen", f.spec.listen,
		"--front-netns", f.shipNS, "--hint-net", frontHintNet, "--log-level", "debug"}, f.spec.relay...)
	return vtool.StartUnprivilegedRelayIn(t, f.w.name, frontRelayUser, args...)
}

// startShip starts `vtool ship SHIP PORT VERE...` in SHIPNS, owned by t,
// and waits for its READY and born event.
func (f *frontPair) startShip(t *testing.T, vere ...string) *vtool.Proc {
	t.Helper()
	_, port, _ := strings.Cut(f.spec.listen, ":")
	if _, err := strconv.Atoi(port); err != nil {
		t.Fatalf("front %s: listen %q has no port", f.spec.ship, f.spec.listen)
	}
	ship := vtool.StartIn(t, f.shipNS, append([]string{"ship", f.spec.ship, port}, vere...)...)
	ship.MustNext("READY", nil, readyTimeout)
	ship.MustNext("EVENT", map[string]any{"kind": "born"}, readyTimeout)
	return ship
}

// waitOK waits for p to exit and fails t unless it met its goal.
func waitOK(t *testing.T, p *vtool.Proc) {
	t.Helper()
	if code, crashed, ok := p.WaitTimeout(15 * time.Second); !ok || code != vtool.ExitOK || crashed {
		t.Fatalf("%s: %s; want exit 0\n%s", p.Name(), p.State(), p.Tail(20))
	}
}

// mustNext is p.MustNext failing t, not the test that started p: a
// subtest reading a process its parent owns must not FailNow the parent.
func mustNext(t *testing.T, p *vtool.Proc, word string, want map[string]any, timeout time.Duration) vtool.Line {
	t.Helper()
	l, ok := p.Next(word, want, timeout)
	if !ok {
		t.Fatalf("%s: no %s line with %v within %v (%s)\n%s", p.Name(), word, want, timeout, p.State(), p.Tail(40))
	}
	return l
}

// firstLine returns p's first line with word and the fields in want,
// among the lines read so far or, when none matches yet, the next to come
// within timeout (failing t): for a process several subtests read, whose
// Next cursor an earlier subtest may have moved past the line.
func firstLine(t *testing.T, p *vtool.Proc, word string, want map[string]any, timeout time.Duration) vtool.Line {
	t.Helper()
	if l := p.All(word, want); len(l) > 0 {
		return l[0]
	}
	return mustNext(t, p, word, want, timeout)
}

// logRelayLines logs, as evidence, the lines of r's log (--log-level debug:
// one line per datagram) that contain substr, such as a probe's path.
func logRelayLines(t *testing.T, who string, r *vtool.Relay, substr string) {
	t.Helper()
	for _, l := range strings.Split(r.Log(), "\n") {
		if strings.Contains(l, substr) {
			t.Logf("%s: %s", who, l)
		}
	}
}

// scrapeIn GETs url from inside the network namespace name: the TCP socket
// is made there (inNetns), and the request is written by hand, as
// http.Client dials from goroutines of its own.
func scrapeIn(name, url string) (map[string]float64, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Close = true
	var c net.Conn
	if err := inNetns(name, func() (err error) {
		c, err = net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
		return err
	}); err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := req.Write(c); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return vtool.ParseMetrics(resp.Body)
}

// inNetns runs fn on a thread inside the network namespace name: sockets
// it makes keep that namespace. The thread returns to its own namespace
// after, or, if it cannot, dies with its goroutine.
func inNetns(name string, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- err
			return
		}
		defer orig.Close()
		ns, err := netns.GetFromName(name)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- err
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			ch <- err
			return
		}
		err = fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}
