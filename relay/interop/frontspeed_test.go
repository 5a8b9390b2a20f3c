package interop

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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

// The throughput measurement of BENCHMARKS.md's fronting section: off
// unless -front-speed is given (it is a measurement, not a test).
var (
	frontSpeed         = flag.Bool("front-speed", false, "TestFrontSpeed: measure a fronted vere's peeks answered per second against the same vere bound directly (BENCHMARKS.md)")
	frontSpeedDuration = flag.Duration("front-speed-duration", 3*time.Second, "TestFrontSpeed: length of each measurement")
	frontSpeedRounds   = flag.Int("front-speed-rounds", 5, "TestFrontSpeed: rounds, each measuring both veres in turn; medians are reported")
	frontSpeedSockets  = flag.Int("front-speed-sockets", 4, "TestFrontSpeed: requester sockets")
	frontSpeedWindow   = flag.Int("front-speed-window", 64, "TestFrontSpeed: peeks in flight per requester socket")
	frontSpeedPerf     = flag.Bool("front-speed-perf", false, "TestFrontSpeed: count each relay's syscalls and context switches per page with `perf stat` during its measurements")
	frontSpeedRelay    = flag.String("front-speed-relay", "", "TestFrontSpeed: another relay binary to front vere with, run as `relay run --front-netns` with privileges, and to run before it in ship-lane mode (to compare builds)")
)

const (
	// speedDirectLane is the directly bound vere's lane: WORLD's second
	// address, where a vtool ship binds 0.0.0.0:23338.
	speedDirectLane = "10.88.0.2:23338"
	// speedLaneRelay is the unfronted relay's public lane: a relay in
	// ship-lane mode (--ship-lane speedDirectLane) before the same vere.
	speedLaneRelay = "10.88.0.2:13339"
	// speedRefill is how long a requester waits for pages before it
	// counts its peeks in flight as lost and sends a window again.
	speedRefill = 50 * time.Millisecond
	// speedWarmup is run against each vere before the rounds.
	speedWarmup = 500 * time.Millisecond
)

// TestFrontSpeed measures, side by side in one run, how many peeks per
// second vere answers fronted (relay in WORLD on 10.88.0.1:13338, vere in
// its namespace behind the relay's TUN device) and bound directly on an
// address of WORLD (the same vtool ship, on 10.88.0.2:23338), and what the
// relay's CPU per page costs fronted against the same relay unfronted: in
// ship-lane mode on 10.88.0.2:13339 (--ship-lane 10.88.0.2:23338) before
// the directly bound vere, the four datagrams of a page through its public
// socket where the fronted relay has two there and two on the TUN. Requesters
// in OUTSIDE run a closed loop (-front-speed-window peeks in flight on each
// of -front-speed-sockets sockets, each peek for a path of its own); the
// rounds alternate the order of the two, and the report is the median of
// each and of the per-round ratios. Both veres print nothing (stdout is
// /dev/null), as a ship's log would be quiet.
//
//	go test ./relay/interop -run TestFrontSpeed -front-speed -v
func TestFrontSpeed(t *testing.T) {
	if !*frontSpeed {
		t.Skip("a throughput measurement: run with -front-speed (BENCHMARKS.md, fronting)")
	}
	requireFrontNetns(t)
	w := newFrontWorld(t, &outsideLog{})
	limit := strconv.Itoa(int((time.Duration(*frontSpeedRounds*2+4) * (*frontSpeedDuration + time.Second)).Seconds()) + 30)
	quiet := func(ns string, args ...string) int {
		t.Helper()
		cmd := exec.Command("ip", append([]string{"netns", "exec", ns, vtool.Find(t)}, args...)...)
		null, _ := os.Open(os.DevNull)
		cmd.Stdout, cmd.Stderr = null, null
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); null.Close() })
		return cmd.Process.Pid
	}
	directPid := quiet(w.name, "ship", "~nec", "23338", "--time-limit", limit)
	var relayPid int
	shipNS := frontNetnsName("rfs")
	newNetns(t, shipNS)
	f := &frontPair{w: w, spec: frontSpec{ship: "~nec", listen: frontRelayLane}, shipNS: shipNS}
	if *frontSpeedRelay != "" {
		r := exec.Command("ip", "netns", "exec", w.name, *frontSpeedRelay, "run", "--ship", "~nec", "--listen", frontRelayLane,
			"--front-netns", shipNS, "--hint-net", frontHintNet, "--metrics", frontMetricsAddr)
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Process.Kill(); r.Wait() })
		relayPid = r.Process.Pid
		time.Sleep(time.Second)
	} else {
		// As an operator runs it: unprivileged, info level (the fronting
		// tests' relays log every datagram at debug).
		f.relay = vtool.StartUnprivilegedRelayIn(t, w.name, frontRelayUser, "--ship", "~nec", "--listen", frontRelayLane,
			"--front-netns", shipNS, "--hint-net", frontHintNet, "--metrics", frontMetricsAddr)
		relayPid = f.relay.Pid()
	}
	frontedPid := quiet(shipNS, "ship", "~nec", "13338", "--time-limit", limit)
	// The unfronted relay: the same build, as root (it needs no device),
	// at the same (info) level.
	bin := vtool.BuildRelay(t)
	if *frontSpeedRelay != "" {
		bin = *frontSpeedRelay
	}
	lr := exec.Command("ip", "netns", "exec", w.name, bin, "run", "--ship", "~nec", "--listen", speedLaneRelay,
		"--ship-lane", speedDirectLane, "--hint-net", frontHintNet)
	if err := lr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lr.Process.Kill(); lr.Wait() })
	pids := [][]int{{directPid}, {directPid, lr.Process.Pid}, {frontedPid, relayPid}}

	gen := newSpeedGen(t, w.outName, *frontSpeedSockets, *frontSpeedWindow)
	targets := []struct {
		name string
		lane netip.AddrPort
	}{
		{"vere bound directly", netip.MustParseAddrPort(speedDirectLane)},
		{"vere at a lane (relay --ship-lane)", netip.MustParseAddrPort(speedLaneRelay)},
		{"vere fronted", netip.MustParseAddrPort(frontRelayLane)},
	}
	const direct, atLane, fronted = 0, 1, 2
	for _, tg := range targets {
		if !gen.ready(tg.lane, 10*time.Second) {
			t.Fatalf("%s at %v: no page within 10 s", tg.name, tg.lane)
		}
		gen.run(tg.lane, speedWarmup)
	}
	rates := make([][]float64, len(targets))
	var ratios []float64
	lost := make([]uint64, len(targets))
	cpu := make([][]time.Duration, len(targets)) // per process of the target
	pagesOf := make([]uint64, len(targets))
	for i := range cpu {
		cpu[i] = make([]time.Duration, len(pids[i]))
	}
	var counts [3]perfCounts // the relay's, with -front-speed-perf
	for r := 0; r < *frontSpeedRounds; r++ {
		var got [3]float64
		for k := range targets {
			i := (k + r) % len(targets) // alternate who goes first
			var stop func() perfCounts
			if *frontSpeedPerf && len(pids[i]) > 1 {
				stop = perfStat(t, pids[i][1])
			}
			before := cpuTimes(t, pids[i])
			pages, l := gen.run(targets[i].lane, *frontSpeedDuration)
			for j, c := range cpuTimes(t, pids[i]) {
				cpu[i][j] += c - before[j]
			}
			if stop != nil {
				counts[i].add(stop())
			}
			pagesOf[i] += pages
			got[i] = float64(pages) / frontSpeedDuration.Seconds()
			rates[i] = append(rates[i], got[i])
			lost[i] += l
		}
		ratios = append(ratios, got[fronted]/got[direct])
		t.Logf("round %d: direct %.0f pages/s, at a lane %.0f pages/s, fronted %.0f pages/s, fronted/direct %.3f",
			r+1, got[direct], got[atLane], got[fronted], got[fronted]/got[direct])
	}
	t.Logf("| ship | pages/s | min-max | pages | lost | vere CPU/page | relay CPU/page |")
	for i, tg := range targets {
		lo, hi := slices.Min(rates[i]), slices.Max(rates[i])
		per := func(d time.Duration) string {
			return (d / time.Duration(max(1, pagesOf[i]))).String()
		}
		relayCPU := "-"
		if len(cpu[i]) > 1 {
			relayCPU = per(cpu[i][1])
		}
		t.Logf("| %s | %.0f | %.0f-%.0f | %d | %d | %s | %s |", tg.name, median(rates[i]), lo, hi, pagesOf[i], lost[i], per(cpu[i][0]), relayCPU)
	}
	t.Logf("fronted/direct, median of rounds: %.3f (min %.3f, max %.3f)", median(ratios), slices.Min(ratios), slices.Max(ratios))
	perPage := func(i int) float64 { return float64(cpu[i][1]) / float64(max(1, pagesOf[i])) }
	t.Logf("relay CPU per page, fronted/at a lane: %.2f", perPage(fronted)/max(1, perPage(atLane)))
	if *frontSpeedPerf {
		for _, i := range []int{atLane, fronted} {
			p := float64(max(1, pagesOf[i]))
			named := ""
			for j, sc := range perfSyscalls {
				named += fmt.Sprintf(", %s %.2f", sc, float64(counts[i].named[j])/p)
			}
			t.Logf("%s: relay syscalls/page %.2f%s; context switches/page %.2f (perf stat)", targets[i].name,
				float64(counts[i].syscalls)/p, named, float64(counts[i].switches)/p)
		}
	}
	m, err := scrapeIn(w.name, "http://"+frontMetricsAddr+"/metrics")
	if err == nil {
		t.Logf("relay: %v", vtool.Nonzero(m, "relay_drops_total"))
	}
}

// perfCounts are a process's counts from perfStat: its system calls (all,
// then those named in perfSyscalls) and context switches.
type perfCounts struct {
	syscalls, switches uint64
	named              [len(perfSyscalls)]uint64
}

// perfSyscalls are the system calls perfStat counts one by one: the TUN's
// read and write, the public socket's, and the poller's waits.
var perfSyscalls = [...]string{"read", "write", "recvmmsg", "sendmmsg", "epoll_pwait"}

func (c *perfCounts) add(o perfCounts) {
	c.syscalls += o.syscalls
	c.switches += o.switches
	for i := range c.named {
		c.named[i] += o.named[i]
	}
}

// perfStat starts counting pid's system calls and context switches (`perf
// stat`, all its threads); the function it returns stops the count and
// returns it.
func perfStat(t *testing.T, pid int) func() perfCounts {
	t.Helper()
	out := filepath.Join(t.TempDir(), "perf.csv")
	events := "raw_syscalls:sys_enter,context-switches"
	for _, sc := range perfSyscalls {
		events += ",syscalls:sys_enter_" + sc
	}
	cmd := exec.Command("perf", "stat", "-x,", "-o", out, "-e", events, "-p", strconv.Itoa(pid))
	if err := cmd.Start(); err != nil {
		t.Fatalf("perf stat: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // perf attaches
	return func() perfCounts {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("perf stat: %v", err)
		}
		var c perfCounts
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, ",")
			if len(f) < 3 {
				continue
			}
			n, _ := strconv.ParseUint(f[0], 10, 64)
			switch f[2] {
			case "raw_syscalls:sys_enter":
				c.syscalls = n
			case "context-switches":
				c.switches = n
			}
			for i, sc := range perfSyscalls {
				if f[2] == "syscalls:sys_enter_"+sc {
					c.named[i] = n
				}
			}
		}
		return c
	}
}

// cpuTimes returns each process's CPU time so far (user + system, from
// /proc/PID/stat, in clock ticks of 10 ms).
func cpuTimes(t *testing.T, pids []int) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(pids))
	for i, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// The fields after the command name, in parentheses: utime and
		// stime are the 12th and 13th of them.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		ut, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		out[i] = time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// speedGen is the closed-loop requester: sockets in OUTSIDE, each with a
// window of peeks in flight, read and written with recvmmsg/sendmmsg.
type speedGen struct {
	t      *testing.T
	conns  []*net.UDPConn
	window int
	seq    atomic.Uint64
}

func newSpeedGen(t *testing.T, ns string, sockets, window int) *speedGen {
	t.Helper()
	g := &speedGen{t: t, window: window}
	err := inNetns(ns, func() error {
		for i := range sockets {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 88, 0, byte(10+i%8)), Port: 45000 + i})
			if err != nil {
				return err
			}
			c.SetReadBuffer(4 << 20)
			g.conns = append(g.conns, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range g.conns {
			c.Close()
		}
	})
	return g
}

// peek appends to buf[:0] a peek for ~nec's page at a path no other peek
// names.
func (g *speedGen) peek(buf []byte) []byte {
	p := scry.NewPeek(scry.Name{Ship: lane.ShipFromUint64(1), Bloq: scry.DefaultBloq,
		Path: fmt.Appendf(nil, "/c/x/4/p%09d", g.seq.Add(1))})
	return p.Append(buf[:0])
}

// ready sends peeks to to until a page comes back, or timeout.
func (g *speedGen) ready(to netip.AddrPort, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if pages, _ := g.run(to, 200*time.Millisecond); pages > 0 {
			return true
		}
	}
	return false
}

// run keeps every socket's window of peeks to to in flight for d and
// returns the pages that came back and the peeks given up as lost.
func (g *speedGen) run(to netip.AddrPort, d time.Duration) (pages, lost uint64) {
	var wg sync.WaitGroup
	var total, gaveUp atomic.Uint64
	stop := time.Now().Add(d)
	for _, c := range g.conns {
		wg.Go(func() {
			p, l := g.loop(ipv4.NewPacketConn(c), c, net.UDPAddrFromAddrPort(to), stop)
			total.Add(p)
			gaveUp.Add(l)
		})
	}
	wg.Wait()
	// Let the last answers of this run arrive, and drop them.
	time.Sleep(2 * speedRefill)
	for _, c := range g.conns {
		g.drain(ipv4.NewPacketConn(c), c)
	}
	return total.Load(), gaveUp.Load()
}

func (g *speedGen) messages(size int) []ipv4.Message {
	ms := make([]ipv4.Message, g.window)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, size)}
	}
	return ms
}

// loop is one socket's closed loop until stop.
func (g *speedGen) loop(pc *ipv4.PacketConn, c *net.UDPConn, to *net.UDPAddr, stop time.Time) (pages, lost uint64) {
	out, in := g.messages(64), g.messages(2048)
	send := func(n int) {
		for i := range out[:n] {
			b := g.peek(out[i].Buffers[0][:cap(out[i].Buffers[0])])
			out[i].Buffers[0], out[i].Addr = b, to
		}
		pc.WriteBatch(out[:n], 0)
	}
	inFlight := g.window
	send(g.window)
	for time.Now().Before(stop) {
		c.SetReadDeadline(time.Now().Add(speedRefill))
		n, err := pc.ReadBatch(in, 0)
		if err != nil || n == 0 {
			lost += uint64(inFlight)
			inFlight = g.window
			send(g.window)
			continue
		}
		k := 0
		for _, m := range in[:n] {
			if typ, _, ok := scry.NameWire(m.Buffers[0][:m.N]); ok && typ == scry.TypePage {
				k++
			}
		}
		pages += uint64(k)
		if k > 0 {
			send(min(k, g.window))
		}
	}
	return pages, lost
}

// drain reads what is queued on c without waiting.
func (g *speedGen) drain(pc *ipv4.PacketConn, c *net.UDPConn) {
	in := g.messages(2048)
	for {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if n, err := pc.ReadBatch(in, 0); err != nil || n == 0 {
			c.SetReadDeadline(time.Time{})
			return
		}
	}
}
