// Command bench measures the relay against the machine's limit.
//
// It runs a bare forwarder (the same sockets and batching as the relay, no
// decision: the limit this machine allows) and the relay with its pending
// table empty, at 100,000 and at 1,000,000 entries, each as a separate
// child process driven by the same load generator with the same packets.
// The children run side by side and are measured in turn, several rounds,
// so that the machine's drift falls on all of them alike. For each it
// reports request/response round trips per second (closed loop; median and
// range of the rounds), CPU time per datagram (user and system), the ratio
// to the baseline, latency percentiles at half the relay's rate (open loop:
// round trip, and time inside the server), allocations per datagram,
// resident memory and bytes per pending entry; then how throughput grows
// with GOMAXPROCS and with --sockets (several SO_REUSEPORT sockets). It
// writes BENCHMARKS.md and SVG plots.
//
//	go run ./cmd/bench                                # full run, ~6 minutes
//	go run ./cmd/bench -duration 2s -rounds 1 -quick  # a smoke run
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

func main() {
	if childMain() {
		return
	}
	var (
		pairs    = flag.Int("pairs", 2, "requester sockets in the load generator (with -publishers 0, requester/publisher pairs)")
		pubs     = flag.Int("publishers", 0, "publisher sockets, requester i asking publisher i%N; 0: one for each requester")
		variants = flag.String("variants", "", "compare mode: measure the forwarder and the relay in each of these comma-separated configurations (\"\" the bench's; see relayVariant, e.g. \"default\" or \"default+nodup\"; \"+nogro\" turns the sockets' UDP GRO off; \"fwd:V\" adds a forwarder, V \"codec\", \"codec+batchmug\" or \"nogro\"), print a table and write nothing")
		old      = flag.String("old", "", "compare mode: also run each relay configuration from this executable (a cmd/bench built before a change), side by side")
		download = flag.Int("download", 0, "download mode: fetch this many fragments through the relay (default configuration) and directly, side by side, print a table and write nothing")
		base     = flag.Int("base-port", 42000, "first requester port; publishers at +1000")
		duration = flag.Duration("duration", 4*time.Second, "length of each measurement")
		rounds   = flag.Int("rounds", 5, "closed-loop rounds per configuration, interleaved; the median is reported")
		window   = flag.Int("window", 256, "requests in flight per pair in the closed loop")
		page     = flag.Int("page", 1024, "page fragment bytes")
		quick    = flag.Bool("quick", false, "skip the 1M-entry and scaling runs")
		out      = flag.String("out", "BENCHMARKS.md", "report file")
		plots    = flag.String("plots", "docs/bench", "directory for the SVG plots")
		slot     = flag.Duration("slot", 0, "compare mode: measure a round's configurations at once, each with a load generator of its own, their server children taking turns on their core for this long each (paused by SIGSTOP between turns), so that the machine's drift falls on all alike; 0: one after another, -duration each")
		rate     = flag.Float64("rate", 0, "compare mode with -slot: hold each configuration's load to this many round trips a second (still at most -window a pair in flight), so that every server is measured at the same load, below its saturation; 0: each as fast as its closed loop goes")
		pin      = flag.Bool("pin", false, "Linux, 2 CPUs or more: run the load generator on CPU 0 and every server child on CPU 1, so that a server's core is its own and the kernel work its sends cause (loopback delivery) is done and charged there, whatever the scheduler would have placed")
	)
	flag.Parse()
	if *pin {
		if cpus() < 2 {
			fmt.Fprintln(os.Stderr, "bench: -pin needs two CPUs")
			os.Exit(2)
		}
		if _, err := exec.LookPath("taskset"); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -pin starts the server children with taskset(1):", err)
			os.Exit(2)
		}
		if err := pinProcess(0); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Setenv(childCPUEnv, "1")
	}
	cfg := benchConfig{pairs: *pairs, publishers: *pubs, base: *base, duration: *duration, window: *window, page: *page, rate: *rate}
	if *download > 0 {
		if err := downloadMain(cfg, *download, max(*rounds, 1)); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if isSet("variants") || *old != "" {
		if err := compareMain(cfg, strings.Split(*variants, ","), *old, max(*rounds, 1), *slot); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	rep, err := runAll(cfg, max(*rounds, 1), *quick)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if err := rep.write(*out, *plots); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s and plots in %s\n", *out, *plots)
}

// isSet reports whether the flag name was given.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type benchConfig struct {
	pairs, base, window, page int // pairs: requester sockets
	publishers                int // publisher sockets; 0: one for each requester
	// rate, when above 0, holds each configuration's load to this many
	// round trips a second (loadGen.pacedLoop), at most window a pair in
	// flight; measured at once (-slot) only.
	rate     float64
	duration time.Duration
	noGSO    bool // every socket, the generator's too, sends without UDP GSO
}

// pubs returns the publisher sockets.
func (c benchConfig) pubs() int {
	if c.publishers > 0 {
		return c.publishers
	}
	return c.pairs
}

// child is a running server process.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr netip.AddrPort
}

// childEnv names the environment variable that makes this executable (the
// command, or its test binary) a server child:
// ROLE,SOCKETS,PUBLISHERS,BASEPORT,GSO,VARIANT with GSO "gso" or "nogso"
// and VARIANT the relay's configuration (relayVariant).
const childEnv = "RELAY_BENCH_CHILD"

// childCPUEnv, if set, is the CPU server children are started on (-pin),
// by taskset(1), so that a child of an older build (-old) is pinned too.
const childCPUEnv = "RELAY_BENCH_CPU"

// childMain runs the process as a server child if childEnv says so, and
// reports whether it did.
func childMain() bool {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false
	}
	var role, variant string
	var sockets, pubs, base int
	gso := true
	f := strings.Split(spec, ",")
	if len(f) == 6 {
		role = f[0]
		sockets, _ = strconv.Atoi(f[1])
		pubs, _ = strconv.Atoi(f[2])
		base, _ = strconv.Atoi(f[3])
		gso = f[4] != "nogso"
		variant = f[5]
	}
	if err := serve(role, sockets, pubs, base, gso, variant); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(1)
	}
	return true
}

// startChild starts sc's server child: this executable, or sc.bin.
func startChild(sc scenario, cfg benchConfig) (*child, error) {
	role, sockets, gomaxprocs := sc.role, sc.sockets, sc.procs
	bin := os.Args[0]
	if sc.bin != "" {
		bin = sc.bin
	}
	cmd := exec.Command(bin)
	if cpu := os.Getenv(childCPUEnv); cpu != "" {
		cmd = exec.Command("taskset", "-c", cpu, bin)
	}
	gso := "gso"
	if cfg.noGSO {
		gso = "nogso"
	}
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(gomaxprocs),
		fmt.Sprintf("%s=%s,%d,%d,%d,%s,%s", childEnv, role, sockets, cfg.pubs(), cfg.base, gso, sc.variant))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(outR)}
	if !c.out.Scan() {
		c.stop()
		return nil, fmt.Errorf("%s child did not start", role)
	}
	if c.addr, err = netip.ParseAddrPort(strings.TrimSpace(c.out.Text())); err != nil {
		c.stop()
		return nil, fmt.Errorf("%s child printed %q", role, c.out.Text())
	}
	return c, nil
}

// stats asks the child for a snapshot.
func (c *child) stats() (serverStats, error) {
	var s serverStats
	if _, err := io.WriteString(c.in, "stats\n"); err != nil {
		return s, err
	}
	if !c.out.Scan() {
		return s, fmt.Errorf("child stats: %v", c.out.Err())
	}
	return s, json.Unmarshal(c.out.Bytes(), &s)
}

func (c *child) stop() {
	c.in.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// cpuTime returns the process's user and system CPU time.
func (c *child) cpuTime() (user, sys time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line, in clock ticks (100 Hz).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut) * 10 * time.Millisecond, time.Duration(st) * 10 * time.Millisecond
}

// rss returns the process's resident memory in bytes.
func (c *child) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
