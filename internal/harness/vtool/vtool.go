// Package vtool drives vere's real network drivers from Go tests: the vtool
// harness (urbit/vere's io/mesa.c, io/ames.c and STUN code, unmodified,
// under a stub pier and arvo; ours in c/, built from ../shared/vere's
// sources, or ../shared/vere's prebuilt), and the relay binary built from
// this module, so that interop tests put the real relay in front of the real
// runtime.
//
// Find locates vtool (building c/vtool.c once per version into the user's
// cache directory where gcc and the -dev packages are present: Build) and
// skips the test where it is absent or cannot run; Require also skips a
// test needing a feature only ours has (FeatureAccept). Start
// runs one vtool mode as a child process and parses every line it prints (a
// word and a JSON object, see ../shared/vere/README.md) into a Line; Next waits
// for a line, Wait for the exit, and a crash (vere aborting: killed by a
// signal, or exit 134, with no END line) is told apart from vtool's own exit
// codes. Nothing here sleeps to synchronise: tests wait on lines (READY, RECV,
// EVENT) with timeouts, and every mode is bounded by --time-limit.
//
// When a test fails, each Proc it started logs its last lines, and t.Cleanup
// kills and reaps it. BuildRelay builds ./cmd/relay once per test process.
// Test binaries that call it should end with Main in TestMain, which removes
// the build directory.
package vtool

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvPath names the environment variable that overrides where vtool is.
const EnvPath = "RELAY_VTOOL"

// Install is the Debian packages vtool needs at run time.
const Install = "libuv1 libgmp10 libsigsegv2 libunwind8 libssl3 zlib1g"

// vtool's exit codes (../shared/vere/README.md, "Exit codes"), and the code of
// a process killed by SIGABRT, as vere's u3_assert and vtool's backstop end it.
const (
	ExitOK        = 0   // the mode's goal was met
	ExitTimeLimit = 1   // the time limit passed first (or STUN failed with --until stun)
	ExitUsage     = 2   // bad command line
	ExitStart     = 3   // could not start: a port in use (END bail or bind), or an unsupported answer
	ExitAbort     = 134 // 128 + SIGABRT: vere aborted
)

// ExitName says what a vtool exit code means, for failure messages.
func ExitName(code int) string {
	switch code {
	case ExitOK:
		return "goal met"
	case ExitTimeLimit:
		return "time limit"
	case ExitUsage:
		return "bad command line"
	case ExitStart:
		return "could not start"
	case ExitAbort:
		return "aborted (SIGABRT)"
	}
	if code > 128 && code < 128+65 {
		return fmt.Sprintf("killed by signal %d (%v)", code-128, syscall.Signal(code-128))
	}
	if code < 0 {
		return "not exited"
	}
	return fmt.Sprintf("exit %d", code)
}

// dumpLines is how many of a Proc's last lines a failed test logs.
const dumpLines = 40

var (
	moduleOnce sync.Once
	moduleDir  string
	moduleErr  error
)

// ModuleRoot returns the directory holding go.mod, found by walking up from
// the working directory (a test's package directory).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	moduleOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			moduleErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				moduleDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				moduleErr = errors.New("no go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	if moduleErr != nil {
		t.Fatalf("vtool: module root: %v", moduleErr)
	}
	return moduleDir
}

// Shared returns <module root>/../shared/rel, where the harness and the
// reference vectors live beside a checkout. It does not check that it exists.
func Shared(t testing.TB, rel string) string {
	t.Helper()
	return filepath.Join(filepath.Dir(ModuleRoot(t)), "shared", rel)
}

// FeatureAccept is the feature of the harness built from this module
// (c/vtool.c) that ../shared/vere's prebuilt vtool lacks: `vtool ship ...
// --accept SHIP[@IP[:PORT]]`, a stub arvo that acks only the pokes of the
// senders and lanes it accepts (as real arvo drops a forged ping).
const FeatureAccept = "accept"

// FeatureUnanswered is ours too: `vtool ship ... --unanswered PREFIX`, a
// stub arvo that gives no page for names under PREFIX (not grown yet).
const FeatureUnanswered = "unanswered"

// FeatureArvoLanes is ours too: `vtool ship ... --arvo-lanes`, a stub arvo
// that learns lanes, names a request's lanes and pings its sponsors by stock
// arvo's rules (docs/arvo-lanes.md), with --rounds, --ping-sponsors and the
// periods --dead-ms, --retry-ms and --ping-ms.
const FeatureArvoLanes = "arvo-lanes"

// FeatureQuiet is ours too: `vtool ship ... --quiet` prints no RECV or SEND
// line, so that the process's CPU is vere's own (TestVereForwardCPU).
const FeatureQuiet = "quiet"

// FeatureDupe is ours too: with --arvo-lanes, a poke for a name the stub
// arvo acked before (a replayed message) is acked again from any lane, as
// arvo acks a dupe (docs/arvo-lanes.md, A2).
const FeatureDupe = "dupe"

// FeaturePingSeq is ours too: `vtool publish ... --ping ... --ping-seq N`
// pings with messages N, N+1, ..., each with a name of its own (ack
// /a/x/1//ack/N), not message 1 every time.
const FeaturePingSeq = "ping-seq"

var (
	findOnce     sync.Once
	findPath     string
	findSkip     string          // why the tests skip; "" when vtool runs
	findFeatures map[string]bool // what `vtool version` lists in "features"
	findBuilt    string          // why the module's harness was not used; "" when it was
)

// Find returns vtool's path: $RELAY_VTOOL, else the harness of c/vtool.c
// built from ../shared/vere's sources into the user's cache directory
// (Build; once per C file), else <module root>/../shared/vere/bin/vtool
// (which lacks FeatureAccept: see Require). It skips the test when there is
// no file there or `vtool version` fails (missing libraries, not x86_64
// Linux). The check runs once per test process.
func Find(t testing.TB) string {
	t.Helper()
	root := ""
	if os.Getenv(EnvPath) == "" {
		root = ModuleRoot(t)
	}
	findOnce.Do(func() {
		findPath = os.Getenv(EnvPath)
		if findPath == "" {
			var err error
			if findPath, err = Build(root); err != nil {
				findBuilt = err.Error()
				findPath = filepath.Join(filepath.Dir(root), "shared", "vere", "bin", "vtool")
			}
		}
		if _, err := os.Stat(findPath); err != nil {
			findSkip = fmt.Sprintf("vere harness not found at %s (a fresh clone has no ../shared/vere): interop test skipped", findPath)
			return
		}
		var err error
		if findFeatures, err = version(findPath); err != nil {
			findSkip = fmt.Sprintf("vtool cannot run here: %v (install %s)", err, Install)
		}
	})
	if findSkip != "" {
		t.Skip(findSkip)
	}
	return findPath
}

// Require is Find for a test that needs feature (FeatureAccept): it skips,
// saying why, when the vtool found lacks it.
func Require(t testing.TB, feature string) string {
	t.Helper()
	p := Find(t)
	if !findFeatures[feature] {
		why := "it was given as $" + EnvPath
		if findBuilt != "" {
			why = "the harness of internal/harness/vtool/c was not built: " + findBuilt
		}
		t.Skipf("vtool at %s has no %q feature (%s): test skipped", p, feature, why)
	}
	return p
}

// Has is Find, reporting whether the vtool found has feature (for a test
// that can run without it, differently).
func Has(t testing.TB, feature string) bool {
	t.Helper()
	Find(t)
	return findFeatures[feature]
}

// version runs `vtool version` and returns the features it lists.
func version(path string) (map[string]bool, error) {
	out, err := exec.Command(path, "version").CombinedOutput()
	if err == nil && !bytes.HasPrefix(out, []byte("VERSION ")) {
		err = fmt.Errorf("unexpected output %q", firstLine(out))
	}
	if err != nil {
		if msg := firstLine(out); msg != "" {
			err = fmt.Errorf("%v: %s", err, msg)
		}
		return nil, err
	}
	var v struct{ Features []string }
	json.Unmarshal(bytes.TrimPrefix([]byte(firstLine(out)), []byte("VERSION ")), &v)
	f := map[string]bool{}
	for _, s := range v.Features {
		f[s] = true
	}
	return f, nil
}

// Build builds the harness of <root>/internal/harness/vtool/c (vtool.c, by
// build.sh there) with the vere sources of <root>/../shared/vere into
// <user cache>/urbit-relay/vtool-HASH/vtool, HASH being that of vtool.c and
// build.sh, unless it is there already, and returns its path. It needs gcc
// and the -dev packages build.sh names; its error says what is missing.
// Concurrent test processes build once (a file lock).
func Build(root string) (string, error) {
	src := filepath.Join(root, "internal", "harness", "vtool", "c")
	vere := filepath.Join(filepath.Dir(root), "shared", "vere")
	h := sha256.New()
	for _, f := range []string{"vtool.c", "build.sh"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	if _, err := os.Stat(filepath.Join(vere, "src", "vere", "pkg")); err != nil {
		return "", fmt.Errorf("no vere sources at %s/src (a fresh clone has no ../shared/vere)", vere)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		return "", errors.New("no gcc on PATH")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	cache = filepath.Join(cache, "urbit-relay")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	dir := filepath.Join(cache, fmt.Sprintf("vtool-%x", h.Sum(nil)[:8]))
	bin := filepath.Join(dir, "vtool")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	unlock, err := lockFile(filepath.Join(cache, "vtool.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // another process built it meanwhile
	}
	tmp, err := os.MkdirTemp(cache, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command("bash", filepath.Join(src, "build.sh"), vere, tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v: %s", filepath.Join(src, "build.sh"), err, strings.TrimSpace(lastLines(out, 3)))
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return bin, nil
}

// lastLines returns the last n lines of b.
func lastLines(b []byte, n int) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// Line is one line of vtool's stdout: a word, a space and a JSON object.
// Numbers in Fields are float64, as encoding/json gives them.
type Line struct {
	Word   string
	Fields map[string]any
	Raw    string
}

// String returns the line as vtool printed it.
func (l Line) String() string { return l.Raw }

// Str returns field k as a string ("" when absent or not a string).
func (l Line) Str(k string) string {
	s, _ := l.Fields[k].(string)
	return s
}

// Num returns field k as a number, and whether it is one.
func (l Line) Num(k string) (float64, bool) {
	f, ok := l.Fields[k].(float64)
	return f, ok
}

// ParseLine parses one line of vtool's output. A line that is not a word and
// a JSON object keeps its text in Word and Raw, with nil Fields.
func ParseLine(s string) Line {
	w, obj, _ := strings.Cut(s, " ")
	l := Line{Word: w, Raw: s}
	var m map[string]any
	if json.Unmarshal([]byte(obj), &m) == nil {
		l.Fields = m
	}
	return l
}

// Match reports whether l has word word (any word when "") and every field
// in want. Want values may be any Go number (compared as float64), strings,
// bools or nil (the field is absent or null); other values compare with
// reflect.DeepEqual against the decoded JSON.
func (l Line) Match(word string, want map[string]any) bool {
	if word != "" && l.Word != word {
		return false
	}
	for k, v := range want {
		got, ok := l.Fields[k]
		if v == nil {
			if ok && got != nil {
				return false
			}
			continue
		}
		if !ok {
			return false
		}
		if f, isNum := number(v); isNum {
			g, gok := got.(float64)
			if !gok || g != f {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(got, v) {
			return false
		}
	}
	return true
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// Proc is a running vtool.
type Proc struct {
	t    testing.TB
	name string // for messages: "vtool ship ~nec 23337"
	cmd  *exec.Cmd

	stderr SyncBuffer

	mu      sync.Mutex
	lines   []Line
	changed chan struct{} // closed and replaced when a line arrives or stdout ends
	eof     bool
	cursor  int // Next resumes here

	exited chan struct{} // closed once the process is reaped
	code   int
	signal syscall.Signal // non-zero when killed by a signal
	killed bool           // the kill was ours (Stop, cleanup)
}

// Start runs vtool with args (a mode and its options; pass --time-limit) and
// skips the test where vtool cannot run. See StartIn.
func Start(t testing.TB, args ...string) *Proc {
	t.Helper()
	return StartIn(t, "", args...)
}

// StartIn runs vtool with args inside the network namespace netns (`ip netns
// exec NETNS vtool ...`, which needs root), or in the test's own when netns is
// "". It returns once the process has started; wait for READY with Next.
// t.Cleanup kills and reaps the process, and when the test has failed logs its
// last lines of stdout and stderr.
func StartIn(t testing.TB, netns string, args ...string) *Proc {
	t.Helper()
	bin := Find(t)
	argv := append([]string{bin}, args...)
	if netns != "" {
		argv = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	p := &Proc{
		t:       t,
		name:    "vtool " + strings.Join(args, " "),
		cmd:     exec.Command(argv[0], argv[1:]...),
		changed: make(chan struct{}),
		exited:  make(chan struct{}),
		code:    -1,
	}
	if netns != "" {
		p.name += " (netns " + netns + ")"
	}
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Dir = t.TempDir() // where a core file would go, were noCore to fail
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	if err := noCore(p.cmd.Process.Pid); err != nil {
		t.Logf("%s: no core limit: %v", p.name, err)
	}
	// Cleanups run last first: kill and reap, then log what it printed.
	t.Cleanup(func() {
		if t.Failed() {
			p.dump()
		}
	})
	t.Cleanup(func() { p.kill(); <-p.exited })
	go p.read(out)
	return p
}

// read collects stdout, then reaps the process.
func (p *Proc) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := ParseLine(sc.Text())
		p.mu.Lock()
		p.lines = append(p.lines, l)
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
	io.Copy(io.Discard, out) // a line over 1 MiB: drain so the child never blocks
	err := p.cmd.Wait()
	p.mu.Lock()
	p.eof = true
	close(p.changed)
	p.changed = make(chan struct{})
	p.code = p.cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.signal = ws.Signal()
			p.code = 128 + int(p.signal)
		}
	}
	p.mu.Unlock()
	close(p.exited)
}

// Name returns the command line, for messages.
func (p *Proc) Name() string { return p.name }

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Lines returns a copy of every line read so far.
func (p *Proc) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// All returns every line read so far with word word and the fields in want
// (see Line.Match).
func (p *Proc) All(word string, want map[string]any) []Line {
	var out []Line
	for _, l := range p.Lines() {
		if l.Match(word, want) {
			out = append(out, l)
		}
	}
	return out
}

// Stderr returns what the process wrote to stderr so far (vere's log).
func (p *Proc) Stderr() string { return p.stderr.String() }

// Next waits up to timeout for the next line, after the one the previous
// successful Next returned, with word word and the fields in want (see
// Line.Match). Lines it passes over stay in Lines but are not returned by a
// later Next. It returns false when timeout passes or vtool's stdout ends
// first, leaving the cursor where it was; the test decides whether that fails.
func (p *Proc) Next(word string, want map[string]any, timeout time.Duration) (Line, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := p.cursor; ; {
		for ; i < len(p.lines); i++ {
			if p.lines[i].Match(word, want) {
				p.cursor = i + 1
				return p.lines[i], true
			}
		}
		if p.eof {
			return Line{}, false
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
			p.mu.Lock()
		case <-deadline.C:
			p.mu.Lock()
			return Line{}, false
		}
	}
}

// MustNext is Next, failing the test with the lines so far when no line
// comes.
func (p *Proc) MustNext(word string, want map[string]any, timeout time.Duration) Line {
	p.t.Helper()
	l, ok := p.Next(word, want, timeout)
	if !ok {
		p.t.Fatalf("%s: no %s line with %v within %v (%s)\n%s", p.name, word, want, timeout, p.State(), p.tail(dumpLines))
	}
	return l
}

// Exited returns a channel closed once the process has exited and its
// output has been read.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Alive reports whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Wait waits for the process to exit (vtool's --time-limit and its backstop
// bound this) and returns its exit code, 128 + the signal's number when a
// signal killed it, and whether it crashed: killed by a signal that was not
// ours, or exit 134 (SIGABRT), with no END line. vtool ends every run it
// controls with END, so a crash is vere dying under it.
func (p *Proc) Wait() (code int, crashed bool) {
	<-p.exited
	return p.status()
}

// WaitTimeout is Wait bounded by timeout; ok is false when the process is
// still running.
func (p *Proc) WaitTimeout(timeout time.Duration) (code int, crashed, ok bool) {
	select {
	case <-p.exited:
		code, crashed = p.status()
		return code, crashed, true
	case <-time.After(timeout):
		return -1, false, false
	}
}

// Crashed reports whether the process has exited by crashing (see Wait).
func (p *Proc) Crashed() bool {
	if p.Alive() {
		return false
	}
	_, crashed := p.status()
	return crashed
}

func (p *Proc) status() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ended := false
	for _, l := range p.lines {
		if l.Word == "END" {
			ended = true
		}
	}
	crashed := !ended && ((p.signal != 0 && !p.killed) || p.code == ExitAbort)
	return p.code, crashed
}

// State describes the process for messages: running, or how it exited.
func (p *Proc) State() string {
	if p.Alive() {
		return "running"
	}
	code, crashed := p.status()
	s := fmt.Sprintf("exited %d, %s", code, ExitName(code))
	if crashed {
		s += ", crashed: no END line"
	}
	return s
}

// Stop sends SIGTERM (vtool prints END {"reason":"signal"} and exits 0) and
// waits for the exit, up to vtool's 5 s backstop and a second more, after
// which it kills the process.
func (p *Proc) Stop() (code int, crashed bool) {
	if p.Alive() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code, crashed, ok := p.WaitTimeout(6 * time.Second); ok {
			return code, crashed
		}
		p.kill()
	}
	return p.Wait()
}

func (p *Proc) kill() {
	if !p.Alive() {
		return
	}
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.cmd.Process.Kill()
}

// tail returns the last n lines of stdout and of stderr, for messages.
func (p *Proc) tail(n int) string {
	var b strings.Builder
	lines := p.Lines()
	if len(lines) > n {
		fmt.Fprintf(&b, "... %d lines before\n", len(lines)-n)
		lines = lines[len(lines)-n:]
	}
	for _, l := range lines {
		b.WriteString(l.Raw)
		b.WriteByte('\n')
	}
	errLines := strings.Split(strings.TrimRight(p.Stderr(), "\n"), "\n")
	if len(errLines) > n {
		errLines = errLines[len(errLines)-n:]
	}
	if s := strings.Join(errLines, "\n"); s != "" {
		b.WriteString("stderr:\n")
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

// Tail returns the last n lines of stdout and stderr, for failure messages.
func (p *Proc) Tail(n int) string { return p.tail(n) }

func (p *Proc) dump() {
	p.t.Logf("%s (%s), last lines:\n%s", p.name, p.State(), p.tail(dumpLines))
}

// SyncBuffer is a bytes.Buffer safe for a writer and readers at once: a
// child process's stderr (vtool's, the relay's log) read while it runs.
// (cmd/relay/demo_test.go has the same type, older than this package.)
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeUDPPort returns a UDP port on 127.0.0.1 that was free a moment ago: it
// binds port 0 and closes the socket. Another process may take the port
// before the caller binds it, so callers retry on a bind failure (vtool: exit
// 3 with END bail or bind).
func FreeUDPPort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// BuildRelay builds ./cmd/relay with the go command on PATH, once per test
// process, into a temporary directory, and returns the binary's path. Main
// removes the directory.
func BuildRelay(t testing.TB) string {
	t.Helper()
	root := ModuleRoot(t)
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("no go command: %v", err)
			return
		}
		if buildDir, err = os.MkdirTemp("", "relay-interop-"); err != nil {
			buildErr = err
			return
		}
		// An unprivileged relay (StartUnprivilegedRelayIn) runs it too.
		if err = os.Chmod(buildDir, 0o755); err != nil {
			buildErr = err
			return
		}
		bin := filepath.Join(buildDir, "relay")
		cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/relay")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/relay: %v\n%s", err, out)
			return
		}
		buildBin = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// Main runs the tests and then removes BuildRelay's directory; call it from
// TestMain as os.Exit(vtool.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	return code
}
