package interop

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urbit-relay/relay/internal/harness/vtool"
	"github.com/urbit-relay/relay/relay/front"
)

// TestFrontNamespaceTrap starts fronting mode under `ip netns exec` (a
// mount namespace of its own) for a namespace that does not exist: relay
// front setup, relay run (which would make it itself) and relay check each
// refuse with one line that says why and what to run instead, exit 2, and
// nothing is made. A file left under /run/netns that is no namespace (what
// a relay made in a private mount namespace leaves the host) is reported
// by relay check too.
func TestFrontNamespaceTrap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the namespace trap needs root (ip netns exec): test skipped")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2): test skipped")
	}
	bin := vtool.BuildRelay(t)
	outer := frontNetnsName("rtw")
	newNetns(t, outer)
	absent := frontNetnsName("rta")
	flags := []string{"--ship", "~nec", "--listen", "127.0.0.1:13338", "--front-netns", absent}
	runIn := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command("ip", append([]string{"netns", "exec", outer, bin}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), strings.TrimSpace(string(out))
	}
	for _, args := range [][]string{
		append(append([]string{"front", "setup"}, flags...), "--user", frontRelayUser, "--", bin, "run"),
		append([]string{"run"}, flags...),
		append([]string{"check"}, flags...),
	} {
		code, out := runIn(args...)
		if code != 2 || strings.Count(out, "\n") > 0 || !strings.Contains(out, front.ErrHiddenNetns.Error()) ||
			!strings.Contains(out, "relay front setup") || !strings.Contains(out, "ip netns add "+absent) {
			t.Errorf("relay %s under ip netns exec: exit %d, %q; want exit 2 and one line saying why and what to run instead", args[0], code, out)
		}
		t.Logf("relay %s: %s", args[0], out)
	}
	if _, err := os.Stat(filepath.Join(front.NetnsDir, absent)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: %v; want nothing made", filepath.Join(front.NetnsDir, absent), err)
	}
	stale := filepath.Join(front.NetnsDir, absent)
	if err := os.WriteFile(stale, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(stale)
	cmd := exec.Command(bin, append([]string{"check"}, flags...)...)
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "ip netns delete "+absent) {
		t.Errorf("relay check with a stale %s: exit %d, %q; want exit 2 and what to do", stale, cmd.ProcessState.ExitCode(), out)
	}
	t.Logf("relay check: %s", strings.TrimSpace(string(out)))
}
