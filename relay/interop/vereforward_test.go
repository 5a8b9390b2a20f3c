package interop

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/urbit-relay/relay/internal/harness/vtool"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// The measurement of BENCHMARKS.md's "vere forwarding for its sponsee"
// section (issue 30, "the peer an operator would otherwise run"): off
// unless -vere-forward is given (it is a measurement, not a test).
var (
	vereForward            = flag.Bool("vere-forward", false, "TestVereForwardCPU: measure the CPU vere (a galaxy forwarding for its sponsee) and the relay spend per forwarded round trip (BENCHMARKS.md)")
	vereForwardTrips       = flag.Int("vere-forward-trips", 30000, "TestVereForwardCPU: round trips through each forwarder in each round")
	vereForwardRounds      = flag.Int("vere-forward-rounds", 5, "TestVereForwardCPU: rounds, each measuring both forwarders in turn (which goes first alternates); medians are reported")
	vereForwardSockets     = flag.Int("vere-forward-sockets", 4, "TestVereForwardCPU: requester sockets")
	vereForwardWindow      = flag.Int("vere-forward-window", 16, "TestVereForwardCPU: peeks in flight per requester socket")
	vereForwardPrinting    = flag.Bool("vere-forward-printing", true, "TestVereForwardCPU: also measure a vere whose harness prints every datagram (as TestFrontSpeed runs it), beside the --quiet one")
	vereForwardRelayConfig = flag.String("vere-forward-relay-config", "", "TestVereForwardCPU: a config file for the relay (`relay run --config FILE`), such as {\"io\": {\"gso\": false}}")
	vereForwardPage        = flag.Int("vere-forward-page", 1024, "TestVereForwardCPU: bytes of each page's fragment, 1 to 1024 (one fragment: vere's harness forwards no more)")
)

const (
	// vfGalaxy forwards for vfSponsee, a planet under it (sein:title of
	// ~milrys-soglec is ~nec, as ../shared/vere/README.md's examples use).
	vfGalaxy  = "~nec"
	vfSponsee = "~milrys-soglec"
	// vfRefill is how long a requester socket waits for a page before it
	// counts its peeks in flight as lost and sends new ones in their place.
	vfRefill = 50 * time.Millisecond
	// vfReadyTimeout bounds the wait for a forwarder's first page (vere
	// drops the first peek for a ship it has not met while it scries for
	// its lanes: _mesa_forward_request).
	vfReadyTimeout = 10 * time.Second
	// vfWarmup is the round trips each forwarder does before the rounds.
	vfWarmup = 3000
	// vfMaxFrag is the largest fragment of a one-fragment page (bloq 13).
	vfMaxFrag = 1024
	// vfRoundTimeout bounds one forwarder's round: far above the few
	// seconds a round takes on a loaded 2-core machine.
	vfRoundTimeout = 120 * time.Second
	// clockTick is /proc/PID/stat's unit for utime and stime (USER_HZ,
	// 100 on Linux, as cpuTimes assumes).
	clockTick = 10 * time.Millisecond
)

// TestVereForwardCPU measures, side by side in one run, the CPU that vere's
// own drivers spend to forward a peek for a sponsee and its page back, and
// the CPU the relay spends for the same traffic.
//
// vere: `vtool ship ~nec PORT --lane ~milrys-soglec=PUB`, a galaxy whose
// stub arvo knows its sponsee's lane (it answers /chums/~milrys-soglec/lanes
// as arvo does), so vere's _mesa_forward_request sends each peek for the
// sponsee at hop 1 to that direct lane and _mesa_hear_page sends the page
// back to the requester in its pit, with the lane it heard the page from as
// next-hop (urbit/vere io/mesa.c 859fd5c). Arvo is not involved in a
// forward: after the first peek (dropped while vere scries for the lanes)
// no event and no scry happen per round trip.
//
// The relay: `relay run --ship ~nec --listen 127.0.0.1:0 --lane
// ~milrys-soglec=PUB --hint-net 127.0.0.0/8`, its default configuration
// with the sponsee's lane pinned (the relay's counterpart of what arvo knows;
// --hint-net lets it write the loopback next-hop as vere does), requesters
// answering its STUN probes as vere ships do.
//
// PUB is one publisher in the test process answering every peek for
// ~milrys-soglec with a page of -vere-forward-page bytes (a zero signature,
// as vtool publish signs). Requesters in the test process run a closed loop
// (-vere-forward-window peeks in flight on each of -vere-forward-sockets
// sockets, every peek for a path of its own, so neither forwarder
// aggregates or caches) for exactly -vere-forward-trips round trips per
// forwarder per round; the rounds alternate which forwarder goes first.
// Each forwarder's CPU is its process's utime+stime from /proc/PID/stat over
// its round. vere's figure is that of `vtool ship --quiet` (FeatureQuiet:
// the harness prints no line per datagram, so the process's CPU is vere's
// drivers, libuv and the kernel's work for its socket); with
// -vere-forward-printing (the default) a second vere that prints a line for
// every datagram it reads and sends, to /dev/null as in TestFrontSpeed, is
// measured beside it, which says what the harness's printing adds. With
// ../shared/vere's prebuilt vtool (no --quiet) only the printing vere runs.
//
//	go test ./relay/interop -run TestVereForwardCPU -vere-forward -v
func TestVereForwardCPU(t *testing.T) {
	if !*vereForward {
		t.Skip("a CPU measurement: run with -vere-forward (BENCHMARKS.md, vere forwarding for its sponsee)")
	}
	if *vereForwardPage < 1 || *vereForwardPage > vfMaxFrag {
		t.Fatalf("-vere-forward-page %d: want 1 to %d", *vereForwardPage, vfMaxFrag)
	}
	bin := vtool.Find(t) // skips, saying why, where vtool cannot run
	sponsee, err := lane.ParseShip(vfSponsee)
	if err != nil {
		t.Fatal(err)
	}
	pub := newVFPublisher(t, sponsee, *vereForwardPage)

	// Every forwarder stays up through every round.
	limit := strconv.Itoa(int((time.Duration(*vereForwardRounds+2) * vfRoundTimeout).Seconds()) + 60)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	var vereErr vtool.SyncBuffer
	// startVere runs vere's drivers as the galaxy, knowing the sponsee's
	// lane as arvo would, and returns its pid and port.
	startVere := func(extra ...string) (int, int) {
		port := vtool.FreeUDPPort(t)
		args := append([]string{"ship", vfGalaxy, strconv.Itoa(port), "--lane", vfSponsee + "=" + pub.addr.String(), "--time-limit", limit}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = null, &vereErr
		if err := cmd.Start(); err != nil {
			t.Fatalf("vtool %s: %v", strings.Join(args, " "), err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process.Pid, port
	}
	loopback := netip.MustParseAddr("127.0.0.1")

	type fwd struct {
		name string
		pid  int
		lane netip.AddrPort
		vere bool
	}
	var fwds []fwd
	if vtool.Has(t, vtool.FeatureQuiet) {
		pid, port := startVere("--quiet")
		fwds = append(fwds, fwd{"vere (vtool ship " + vfGalaxy + " --quiet)", pid, netip.AddrPortFrom(loopback, uint16(port)), true})
	} else {
		t.Logf("vtool has no %q feature (../shared/vere's prebuilt): vere's figure includes the harness printing every datagram", vtool.FeatureQuiet)
	}
	if *vereForwardPrinting || len(fwds) == 0 {
		pid, port := startVere()
		fwds = append(fwds, fwd{"vere printing every datagram (as TestFrontSpeed)", pid, netip.AddrPortFrom(loopback, uint16(port)), true})
	}
	relayArgs := []string{"--ship", vfGalaxy, "--listen", "127.0.0.1:0", "--lane", vfSponsee + "=" + pub.addr.String(),
		"--hint-net", "127.0.0.0/8", "--metrics", "127.0.0.1:0"}
	relayName := "relay (default config)"
	if *vereForwardRelayConfig != "" {
		relayArgs = append(relayArgs, "--config", *vereForwardRelayConfig)
		relayName = "relay (--config " + *vereForwardRelayConfig + ")"
	}
	relay := vtool.StartRelay(t, relayArgs...)
	fwds = append(fwds, fwd{relayName, relay.Pid(), relay.Listen, false})
	rel := len(fwds) - 1

	gen := newVFGen(t, sponsee, *vereForwardSockets, *vereForwardWindow)
	for _, f := range fwds {
		// A forwarded page: hop 1, the sponsee's lane as next-hop
		// (vere's _mesa_hear_page writes the lane it heard the page
		// from), so the forwarder did not answer by itself.
		hops, next, ok := gen.ready(f.lane, vfReadyTimeout)
		if !ok {
			t.Fatalf("%s at %v: no page for %s within %v\nvere's stderr:\n%s", f.name, f.lane, vfSponsee, vfReadyTimeout, vereErr.String())
		}
		if hops != 1 || next != pub.addr {
			t.Fatalf("%s: page at hop %d with next-hop %v, want hop 1 and %v (the sponsee)", f.name, hops, next, pub.addr)
		}
		if _, lost := gen.run(f.lane, vfWarmup, vfRoundTimeout); lost > 0 {
			t.Logf("%s: warm-up lost %d peeks", f.name, lost)
		}
	}

	type tally struct {
		user, sys time.Duration
		trips     uint64
		lost      uint64
		perTrip   []float64 // µs per round trip, per round
		ratios    []float64 // this over the relay's CPU per round trip, per round
	}
	res := make([]tally, len(fwds))
	var loads []float64
	for r := 0; r < *vereForwardRounds; r++ {
		got := make([]float64, len(fwds))
		for k := range fwds {
			i := (k + r) % len(fwds) // rotate which goes first
			loads = append(loads, loadAvg(t))
			u0, s0 := procCPU(t, fwds[i].pid)
			trips, lost := gen.run(fwds[i].lane, uint64(*vereForwardTrips), vfRoundTimeout)
			u1, s1 := procCPU(t, fwds[i].pid)
			if trips == 0 {
				t.Fatalf("round %d: %s answered nothing", r+1, fwds[i].name)
			}
			res[i].user += u1 - u0
			res[i].sys += s1 - s0
			res[i].trips += trips
			res[i].lost += lost
			got[i] = float64(u1-u0+s1-s0) / float64(time.Microsecond) / float64(trips)
			res[i].perTrip = append(res[i].perTrip, got[i])
		}
		loads = append(loads, loadAvg(t))
		line := fmt.Sprintf("round %d, CPU per round trip:", r+1)
		for i, f := range fwds {
			res[i].ratios = append(res[i].ratios, got[i]/got[rel])
			line += fmt.Sprintf(" %s %.2fµs", f.name, got[i])
			if f.vere {
				line += fmt.Sprintf(" (%.2fx the relay)", got[i]/got[rel])
			}
			line += ";"
		}
		t.Log(line)
	}
	t.Logf("%d rounds of %d round trips per forwarder, %d-byte fragment, %d sockets x %d in flight, load average (1 min) %.1f to %.1f",
		*vereForwardRounds, *vereForwardTrips, *vereForwardPage, *vereForwardSockets, *vereForwardWindow, slices.Min(loads), slices.Max(loads))
	t.Logf("| forwarder | CPU per round trip, median | min-max | user + sys, all rounds | over the relay's, median of rounds (min-max) | round trips | lost peeks |")
	for i, f := range fwds {
		n := time.Duration(max(1, res[i].trips))
		ratio := "-"
		if f.vere {
			ratio = fmt.Sprintf("%.2f (%.2f-%.2f)", median(res[i].ratios), slices.Min(res[i].ratios), slices.Max(res[i].ratios))
		}
		t.Logf("| %s | %.2fµs | %.2f-%.2fµs | %v + %v | %s | %d | %d |", f.name, median(res[i].perTrip),
			slices.Min(res[i].perTrip), slices.Max(res[i].perTrip), res[i].user/n, res[i].sys/n, ratio, res[i].trips, res[i].lost)
	}
	t.Logf("publisher: %d peeks answered", pub.answered.Load())
	t.Logf("relay: %v", vtool.Nonzero(relay.Metrics(t), "relay_drops_total"))
}

// procCPU returns a process's user and system CPU time so far, all threads,
// from /proc/PID/stat (in clock ticks of 10 ms).
func procCPU(t *testing.T, pid int) (user, sys time.Duration) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	// The fields after the command name, in parentheses: utime and stime
	// are the 12th and 13th of them.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(ut) * clockTick, time.Duration(st) * clockTick
}

// loadAvg returns the machine's one-minute load average.
func loadAvg(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// vfPublisher is the sponsee: one socket on 127.0.0.1 answering every peek
// for its ship with a hop-0 page of a fixed fragment, and every STUN
// request as vere does.
type vfPublisher struct {
	addr     netip.AddrPort
	answered atomic.Uint64
}

func newVFPublisher(t *testing.T, ship lane.Ship, size int) *vfPublisher {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(4 << 20)
	c.SetWriteBuffer(4 << 20)
	p := &vfPublisher{addr: c.LocalAddr().(*net.UDPAddr).AddrPort()}
	frag := make([]byte, size)
	for i := range frag {
		frag[i] = 'a' + byte(i%26)
	}
	auth := make([]byte, scry.AuthSign.Len()) // a zero signature, as vtool publish
	done := make(chan struct{})
	go func() {
		defer close(done)
		pc := ipv4.NewPacketConn(c)
		in, out := vfMessages(64, 2048), vfMessages(64, 2048)
		var pkt scry.Packet
		for {
			n, err := pc.ReadBatch(in, 0)
			if err != nil {
				return
			}
			k := 0
			for _, m := range in[:n] {
				b := m.Buffers[0][:m.N]
				if scry.IsSTUN(b) {
					if a, ok := stunAnswer(b, p.addr); ok {
						out[k].Buffers[0], out[k].Addr = append(out[k].Buffers[0][:0], a...), m.Addr
						k++
					}
					continue
				}
				if pkt.Parse(b) != nil || pkt.Header.Type != scry.TypePeek || pkt.Name.Ship != ship {
					continue
				}
				page := scry.NewPage(pkt.Name, scry.Data{Total: uint64(size), AuthKind: scry.AuthSign, Auth: auth, Frag: frag})
				out[k].Buffers[0] = page.Append(out[k].Buffers[0][:0])
				out[k].Addr = m.Addr
				k++
			}
			p.answered.Add(uint64(k))
			for sent := 0; sent < k; {
				w, err := pc.WriteBatch(out[sent:k], 0)
				if err != nil {
					break
				}
				sent += w
			}
			for i := range out[:k] {
				out[i].Buffers[0] = out[i].Buffers[0][:cap(out[i].Buffers[0])]
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return p
}

// stunAnswer returns the binding response a vere ship gives to the STUN
// request b (mapped: the address the ship sees itself at), as cmd/bench's
// requesters answer the relay's probe.
func stunAnswer(b []byte, mapped netip.AddrPort) ([]byte, bool) {
	var q scry.STUNRequest
	if q.Parse(b) != nil {
		return nil, false
	}
	resp := scry.STUNResponse{TxID: q.TxID, Mapped: mapped}
	return resp.Append(nil), true
}

func vfMessages(n, size int) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, size)}
	}
	return ms
}

// vfGen is the closed-loop requester: sockets on 127.0.0.1, each with a
// window of peeks in flight, read and written with recvmmsg/sendmmsg.
type vfGen struct {
	ship   lane.Ship
	conns  []*net.UDPConn
	window int
	seq    atomic.Uint64
}

func newVFGen(t *testing.T, ship lane.Ship, sockets, window int) *vfGen {
	t.Helper()
	g := &vfGen{ship: ship, window: window}
	for range sockets {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadBuffer(4 << 20)
		g.conns = append(g.conns, c)
	}
	t.Cleanup(func() {
		for _, c := range g.conns {
			c.Close()
		}
	})
	return g
}

// peek appends to buf[:0] a peek for the sponsee's page at a path no other
// peek names.
func (g *vfGen) peek(buf []byte) []byte {
	p := scry.NewPeek(scry.Name{Ship: g.ship, Bloq: scry.DefaultBloq,
		Path: fmt.Appendf(nil, "/c/x/4/p%09d", g.seq.Add(1))})
	return p.Append(buf[:0])
}

// ready sends a peek to to every vfRefill until a page for it comes back,
// or timeout, and returns that page's hop count and next-hop.
func (g *vfGen) ready(to netip.AddrPort, timeout time.Duration) (hops uint8, next netip.AddrPort, ok bool) {
	c := g.conns[0]
	buf := make([]byte, 2048)
	var want, pkt scry.Packet
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		peek := g.peek(nil)
		if want.Parse(peek) != nil {
			return 0, next, false
		}
		c.WriteToUDPAddrPort(peek, to)
		c.SetReadDeadline(time.Now().Add(vfRefill))
		for {
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				break
			}
			if pkt.Parse(buf[:n]) == nil && pkt.Header.Type == scry.TypePage && string(pkt.Name.Path) == string(want.Name.Path) {
				c.SetReadDeadline(time.Time{})
				next, _ = pkt.NextHopAddr()
				return pkt.Header.Hops, next, true
			}
		}
	}
	c.SetReadDeadline(time.Time{})
	return 0, next, false
}

// run sends exactly trips peeks to to (more in place of any given up as
// lost), keeping each socket's window in flight, until trips pages came
// back or timeout passed; it returns the pages and the peeks given up.
func (g *vfGen) run(to netip.AddrPort, trips uint64, timeout time.Duration) (pages, lost uint64) {
	var wg sync.WaitGroup
	var issued, total, gaveUp atomic.Uint64
	// take reserves up to n of the round's peeks and returns how many.
	take := func(n int) int {
		for {
			cur := issued.Load()
			if cur >= trips {
				return 0
			}
			k := min(uint64(n), trips-cur)
			if issued.CompareAndSwap(cur, cur+k) {
				return int(k)
			}
		}
	}
	// giveBack returns n peeks given up as lost to the round, so that
	// others are sent in their place.
	giveBack := func(n int) { issued.Add(^uint64(n - 1)) }
	stop := time.Now().Add(timeout)
	dst := net.UDPAddrFromAddrPort(to)
	for _, c := range g.conns {
		wg.Go(func() {
			gaveUp.Add(g.loop(ipv4.NewPacketConn(c), c, dst, take, giveBack, trips, &total, stop))
		})
	}
	wg.Wait()
	for _, c := range g.conns {
		g.drain(ipv4.NewPacketConn(c), c)
	}
	return total.Load(), gaveUp.Load()
}

// loop is one socket's closed loop: it ends when the round's pages are all
// in, or at stop, and returns the peeks it gave up as lost.
func (g *vfGen) loop(pc *ipv4.PacketConn, c *net.UDPConn, to *net.UDPAddr, take func(int) int, giveBack func(int),
	trips uint64, total *atomic.Uint64, stop time.Time) (lost uint64) {
	out, in := vfMessages(g.window, 64), vfMessages(g.window, 2048)
	local := c.LocalAddr().(*net.UDPAddr).AddrPort()
	send := func(n int) int {
		n = take(n)
		for i := range out[:n] {
			b := g.peek(out[i].Buffers[0][:cap(out[i].Buffers[0])])
			out[i].Buffers[0], out[i].Addr = b, to
		}
		for sent := 0; sent < n; {
			w, err := pc.WriteBatch(out[sent:n], 0)
			if err != nil {
				break
			}
			sent += w
		}
		return n
	}
	inFlight := send(g.window)
	for total.Load() < trips && time.Now().Before(stop) {
		c.SetReadDeadline(time.Now().Add(vfRefill))
		n, err := pc.ReadBatch(in, 0)
		if err != nil || n == 0 {
			// Nothing for vfRefill: the peeks in flight are lost (or
			// another socket took the round's last ones and this one
			// waits for the round to end).
			if inFlight > 0 {
				lost += uint64(inFlight)
				giveBack(inFlight)
			}
			inFlight = send(g.window)
			continue
		}
		k := 0
		for _, m := range in[:n] {
			b := m.Buffers[0][:m.N]
			if scry.IsSTUN(b) {
				if a, ok := stunAnswer(b, local); ok {
					c.WriteToUDPAddrPort(a, m.Addr.(*net.UDPAddr).AddrPort())
				}
				continue
			}
			if typ, _, ok := scry.NameWire(b); ok && typ == scry.TypePage {
				k++
			}
		}
		total.Add(uint64(k))
		inFlight -= min(k, inFlight)
		if k > 0 {
			inFlight += send(k)
		}
	}
	return lost
}

// drain reads what is queued on c without waiting.
func (g *vfGen) drain(pc *ipv4.PacketConn, c *net.UDPConn) {
	in := vfMessages(64, 2048)
	for {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if n, err := pc.ReadBatch(in, 0); err != nil || n == 0 {
			c.SetReadDeadline(time.Time{})
			return
		}
	}
}
