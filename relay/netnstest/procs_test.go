package netnstest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// processStartTimeout bounds how long a relay or endpoint process may
	// take to bind its socket.
	processStartTimeout = 10 * time.Second

	// processStopTimeout is how long a process may take to exit after
	// SIGTERM (a relay) or the end of its stdin (an endpoint) before it is
	// killed.
	processStopTimeout = 5 * time.Second

	// pollInterval is the pause between checks while waiting for a
	// process to bind its socket.
	pollInterval = 10 * time.Millisecond

	// logTail is how many bytes of a process's stderr a failing test
	// prints.
	logTail = 4 << 10
)

// process is a child process: a relay or an endpoint, usually run in a
// namespace with `ip netns exec`, which execs the command in place, so the
// child's PID is the program's own.
type process struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error
}

// startProcess starts argv (in namespace ns, unless ns is empty) with its
// stderr (and stdout, unless the caller set cmd.Stdout) going to a log file.
// prepare may set up pipes and the environment before the start.
func startProcess(t testing.TB, name, ns string, argv []string, prepare func(*exec.Cmd) error) *process {
	t.Helper()
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	logPath := filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "_")+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = logFile
	if prepare != nil {
		if err := prepare(cmd); err != nil {
			t.Fatal(err)
		}
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logFile
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &process{t: t, name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// pid is the process's id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// alive reports whether the process has not exited.
func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *process) kill() {
	if p.alive() {
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.exited
}

// stop asks the process to exit with sig, and kills it if it has not after
// processStopTimeout. It reports whether the process exited on its own.
func (p *process) stop(sig os.Signal) bool {
	if !p.alive() {
		return true
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return true
	case <-time.After(processStopTimeout):
		p.kill()
		return false
	}
}

// tail returns the end of the process's log.
func (p *process) tail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > logTail {
		b = b[len(b)-logTail:]
	}
	return string(b)
}

// waitBound waits until the process has a UDP socket bound to addr, as its
// own /proc/PID/net/udp (which shows its network namespace) says.
func (p *process) waitBound(addr netip.AddrPort) {
	p.t.Helper()
	want := procNetUDPAddr(addr)
	deadline := time.Now().Add(processStartTimeout)
	for {
		if !p.alive() {
			p.t.Fatalf("%s exited (%v) before binding %v:\n%s", p.name, p.waitErr, addr, p.tail())
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/udp", p.pid()))
		if bytes.Contains(b, []byte(" "+want+" ")) {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not bind %v within %v:\n%s", p.name, addr, processStartTimeout, p.tail())
		}
		time.Sleep(pollInterval)
	}
}

// procNetUDPAddr is how /proc/net/udp prints an IPv4 local address: the
// address as a host-order (little-endian here) u32 in hex, then the port.
func procNetUDPAddr(ap netip.AddrPort) string {
	a := ap.Addr().As4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], ap.Port())
}

// relayProc is a running `relay run`, restartable with the same arguments.
type relayProc struct {
	t      testing.TB
	name   string
	ns     string
	bin    string
	args   []string
	listen netip.AddrPort
	p      *process
}

// startRelay runs `relay run --listen listen args...` in ns and waits until
// its socket is bound. The relay is stopped (SIGTERM) at cleanup.
func startRelay(t testing.TB, name, ns, bin string, listen netip.AddrPort, args ...string) *relayProc {
	t.Helper()
	base := []string{"run", "--listen", listen.String(), "--hint-net", "10.77.0.0/16"}
	if !slices.Contains(args, "--ship-lane") && !slices.Contains(args, "--front-netns") {
		// A ship that answers nothing (the discard port): a relay learns a
		// sponsee's lane only from a ping it hands to its ship.
		base = append(base, "--ship-lane", "127.0.0.1:9")
	}
	r := &relayProc{t: t, name: name, ns: ns, bin: bin, listen: listen, args: append(base, args...)}
	r.start()
	t.Cleanup(func() {
		if !r.p.stop(syscall.SIGTERM) {
			t.Errorf("%s did not exit within %v of SIGTERM", name, processStopTimeout)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, r.p.tail())
		}
	})
	return r
}

func (r *relayProc) start() {
	r.t.Helper()
	r.p = startProcess(r.t, r.name, r.ns, append([]string{r.bin}, r.args...), nil)
	r.p.waitBound(r.listen)
}

// kill kills the relay with SIGKILL: no draining, all soft state lost.
func (r *relayProc) kill() { r.p.kill() }

// restart starts a new relay process with the same arguments.
func (r *relayProc) restart() {
	r.t.Helper()
	if r.p.alive() {
		r.t.Fatalf("%s restarted while running", r.name)
	}
	r.start()
}

// endpointProc is a running endpoint process (see doc.go).
type endpointProc struct {
	t     testing.TB
	name  string
	p     *process
	addr  netip.AddrPort
	stdin io.WriteCloser

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan report // id → its reply
	events  []report            // every send and page
	errs    []string            // error reports

	ready      chan report
	readerDone chan struct{}
}

// startEndpoint runs an endpoint process for spec in ns and waits until it
// is ready. It is stopped at cleanup.
func startEndpoint(t testing.TB, name, ns string, spec endpointSpec) *endpointProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	e := &endpointProc{t: t, name: name, waiting: map[int]chan report{}, ready: make(chan report, 1), readerDone: make(chan struct{})}
	var stdout io.ReadCloser
	e.p = startProcess(t, name, ns, []string{exe}, func(cmd *exec.Cmd) error {
		cmd.Env = append(os.Environ(), endpointEnv+"="+string(specJSON))
		var err error
		if e.stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
		stdout, err = cmd.StdoutPipe()
		return err
	})
	go e.read(stdout)
	t.Cleanup(e.stop)
	select {
	case r := <-e.ready:
		if e.addr, err = netip.ParseAddrPort(r.Addr); err != nil {
			t.Fatalf("%s: ready with address %q: %v", name, r.Addr, err)
		}
	case <-e.readerDone:
		t.Fatalf("%s exited before it was ready:\n%s", name, e.p.tail())
	case <-time.After(processStartTimeout):
		t.Fatalf("%s not ready within %v:\n%s", name, processStartTimeout, e.p.tail())
	}
	return e
}

// read dispatches the process's reports until its stdout closes.
func (e *endpointProc) read(stdout io.Reader) {
	defer close(e.readerDone)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r report
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			e.mu.Lock()
			e.errs = append(e.errs, fmt.Sprintf("unreadable report %q: %v", sc.Text(), err))
			e.mu.Unlock()
			continue
		}
		e.mu.Lock()
		switch r.Ev {
		case "ready":
			e.ready <- r
		case "send", "page":
			e.events = append(e.events, r)
		case "error":
			e.errs = append(e.errs, r.Err)
		}
		if ch, ok := e.waiting[r.ID]; ok && r.ID != 0 {
			delete(e.waiting, r.ID)
			ch <- r
		}
		e.mu.Unlock()
	}
}

// stop closes the process's stdin, which ends it, and waits for it.
func (e *endpointProc) stop() {
	e.stdin.Close()
	select {
	case <-e.readerDone:
	case <-time.After(processStopTimeout):
		e.t.Errorf("%s did not exit within %v of its stdin closing", e.name, processStopTimeout)
		e.p.kill()
		<-e.readerDone
	}
	<-e.p.exited
	e.mu.Lock()
	errs := e.errs
	e.mu.Unlock()
	if len(errs) > 0 {
		e.t.Errorf("%s reported errors: %v", e.name, errs)
	}
	if e.t.Failed() {
		e.t.Logf("%s log:\n%s", e.name, e.p.tail())
	}
}

// do sends c (its ID assigned here) and returns the channel its reply will
// arrive on.
func (e *endpointProc) do(c command) <-chan report {
	e.t.Helper()
	ch := make(chan report, 1)
	e.mu.Lock()
	e.nextID++
	c.ID = e.nextID
	e.waiting[c.ID] = ch
	b, _ := json.Marshal(c)
	_, err := e.stdin.Write(append(b, '\n'))
	e.mu.Unlock()
	if err != nil {
		e.t.Fatalf("%s: writing command: %v", e.name, err)
	}
	return ch
}

// wait waits for a reply, failing the test if the process dies or the
// reply takes longer than within.
func (e *endpointProc) wait(ch <-chan report, within time.Duration) report {
	e.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-e.readerDone:
		e.t.Fatalf("%s exited:\n%s", e.name, e.p.tail())
	case <-time.After(within):
		e.t.Fatalf("%s: no reply within %v", e.name, within)
	}
	return report{}
}

// peekTimeoutSlack is how much longer than a peek's own timeout the test
// waits for its result line.
const peekTimeoutSlack = 5 * time.Second

// peekAsync starts a peek; the result comes on the returned channel.
func (e *endpointProc) peekAsync(ship, path string, timeout time.Duration) <-chan report {
	e.t.Helper()
	return e.do(command{Op: "peek", Ship: ship, Path: path, Timeout: timeout})
}

// peek asks ship for path and waits for the result.
func (e *endpointProc) peek(ship, path string, timeout time.Duration) report {
	e.t.Helper()
	return e.wait(e.peekAsync(ship, path, timeout), timeout+peekTimeoutSlack)
}

// routes returns the endpoint's route for ship.
func (e *endpointProc) routes(ship string) report {
	e.t.Helper()
	return e.wait(e.do(command{Op: "routes", Ship: ship}), processStartTimeout)
}

// sends returns the targets of every send of ship's path, in order.
func (e *endpointProc) sends(ship, path string) [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out [][]string
	for _, r := range e.events {
		if r.Ev == "send" && r.Ship == ship && r.Path == path {
			out = append(out, r.Targets)
		}
	}
	return out
}

// sendsTo counts the datagrams sent to lane to, for any path.
func (e *endpointProc) sendsTo(to string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.events {
		for _, t := range r.Targets {
			if t == to {
				n++
			}
		}
	}
	return n
}
