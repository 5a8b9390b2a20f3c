package vtool

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	osuser "os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// relayStartTimeout bounds `relay run` from exec to its "relay started" line.
const relayStartTimeout = 10 * time.Second

// Relay is a `relay run` child process, the binary BuildRelay made.
type Relay struct {
	// Listen is the relay's UDP address, from its "relay started" line (so
	// --listen 127.0.0.1:0 works).
	Listen netip.AddrPort
	// MetricsURL is its /metrics URL, "" without --metrics.
	MetricsURL string

	t      testing.TB
	cmd    *exec.Cmd
	stderr SyncBuffer
	exited chan struct{}
}

// StartRelay runs `relay run ARGS --log-format json` and waits for its
// "relay started" line. Pass --listen 127.0.0.1:0 and --metrics 127.0.0.1:0
// to let the kernel choose the ports. t.Cleanup kills and reaps it, and logs
// its log when the test has failed.
func StartRelay(t testing.TB, args ...string) *Relay {
	t.Helper()
	return StartRelayIn(t, "", args...)
}

// StartRelayIn is StartRelay inside the network namespace netns (`ip netns
// exec NETNS relay run ...`, which needs root), or in the test's own when
// netns is "". The relay then also runs in a mount namespace of its own, as
// `ip netns exec` makes: a namespace it creates under /run/netns (--front-netns)
// is not visible outside it, so create that one first (`ip netns add`).
func StartRelayIn(t testing.TB, netns string, args ...string) *Relay {
	t.Helper()
	bin := BuildRelay(t)
	return startRelay(t, netns, append(append([]string{bin, "run"}, args...), "--log-format", "json"), args)
}

// StartUnprivilegedRelayIn is StartRelayIn for fronting mode as an
// operator runs it without systemd: `relay front setup ARGS --user USER --
// relay run ARGS` makes the namespace and the device with the test's
// privileges, then execs the relay as USER with no capabilities (the same
// process: Kill and Stop reach the relay).
func StartUnprivilegedRelayIn(t testing.TB, netns, user string, args ...string) *Relay {
	t.Helper()
	bin := BuildRelay(t)
	run := append(append([]string{bin, "run"}, args...), "--log-format", "json")
	argv := append(append(append([]string{bin, "front", "setup"}, args...), "--user", user, "--"), run...)
	return startRelay(t, netns, argv, args)
}

// StartStoredRelayIn is StartRelayIn as systemd starts relay-front.service's
// relay once `relay front setup` has filled the unit's file descriptor
// store: as USER with no capabilities (setpriv), and files open from fd 3
// on, named in LISTEN_FDNAMES (sd_listen_fds(3)).
func StartStoredRelayIn(t testing.TB, netns, user string, files []*os.File, names []string, args ...string) *Relay {
	t.Helper()
	bin := BuildRelay(t)
	u, err := osuser.Lookup(user)
	if err != nil {
		t.Fatalf("user %s: %v", user, err)
	}
	argv := append([]string{"setpriv", "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
		"sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, bin, "run"}, args...)
	argv = append(argv, "--log-format", "json")
	return startRelay(t, netns, argv, args, func(c *exec.Cmd) {
		c.ExtraFiles = files
		c.Env = append(os.Environ(), fmt.Sprintf("LISTEN_FDS=%d", len(files)), "LISTEN_FDNAMES="+strings.Join(names, ":"))
	})
}

// startRelay runs argv (in netns, if not "") and waits for the relay's
// "relay started" line; args are the relay's flags, for messages.
func startRelay(t testing.TB, netns string, argv, args []string, prepare ...func(*exec.Cmd)) *Relay {
	t.Helper()
	r := &Relay{t: t, exited: make(chan struct{})}
	if netns != "" {
		argv = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	r.cmd = exec.Command(argv[0], argv[1:]...)
	for _, p := range prepare {
		p(r.cmd)
	}
	pipe, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("relay run: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay run %s, log:\n%s", strings.Join(args, " "), r.Log())
		}
	})
	t.Cleanup(func() { r.cmd.Process.Kill(); <-r.exited })

	started := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			r.stderr.Write(append(sc.Bytes(), '\n'))
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "relay started" {
				select {
				case started <- m:
				default:
				}
			}
		}
		io.Copy(io.Discard, pipe)
		r.cmd.Wait()
		close(r.exited)
	}()
	select {
	case m := <-started:
		if r.Listen, err = netip.ParseAddrPort(fmt.Sprint(m["listen"])); err != nil {
			t.Fatalf("relay started line %v: %v", m, err)
		}
		if u, ok := m["metrics_url"].(string); ok {
			r.MetricsURL = u
		}
	case <-r.exited:
		t.Fatalf("relay run %s exited (%v) before starting:\n%s", strings.Join(args, " "), r.cmd.ProcessState, r.Log())
	case <-time.After(relayStartTimeout):
		t.Fatalf("relay run %s: not started within %v:\n%s", strings.Join(args, " "), relayStartTimeout, r.Log())
	}
	return r
}

// Pid returns the relay's process id.
func (r *Relay) Pid() int { return r.cmd.Process.Pid }

// Log returns what the relay has logged so far, one JSON object a line.
func (r *Relay) Log() string { return r.stderr.String() }

// Alive reports whether the relay is still running.
func (r *Relay) Alive() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and waits up to timeout for the relay to exit, then
// kills it. It reports whether the relay exited by itself.
func (r *Relay) Stop(timeout time.Duration) bool {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
		return true
	case <-time.After(timeout):
		r.cmd.Process.Kill()
		<-r.exited
		return false
	}
}

// Kill sends SIGKILL, as a crash or an OOM kill would end the relay (no
// shutdown, no cleanup of its own), and waits for it to be reaped.
func (r *Relay) Kill() {
	r.cmd.Process.Kill()
	<-r.exited
}

// Metrics scrapes /metrics (the relay needs --metrics) into series → value,
// the series written as in the exposition ("relay_drops_total{reason=\"stun\"}").
func (r *Relay) Metrics(t testing.TB) map[string]float64 {
	t.Helper()
	if r.MetricsURL == "" {
		t.Fatal("relay started without --metrics")
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(r.MetricsURL)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	out, err := ParseMetrics(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return out
}

// ParseMetrics reads a Prometheus text exposition into series → value, the
// series written as in the exposition. Comments and lines without a number
// are skipped.
func ParseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// Nonzero returns the series in m whose names start with prefix and whose
// values are not zero, sorted, for messages.
func Nonzero(m map[string]float64, prefix string) []string {
	var out []string
	for k, v := range m {
		if strings.HasPrefix(k, prefix) && v != 0 {
			out = append(out, fmt.Sprintf("%s %g", k, v))
		}
	}
	slices.Sort(out)
	return out
}
