package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/urbit-relay/relay/relay/transport"
)

// requireSystemdEnv, when set (CI sets it), makes the unit tests fail
// rather than skip where systemd-analyze is absent.
const requireSystemdEnv = "RELAY_REQUIRE_SYSTEMD_ANALYZE"

// maxRelayExposure is the most `systemd-analyze security` may rate
// relay.service, which needs no privilege; maxFrontExposure that of
// relay-front.service, whose long-running relay needs none either (its
// privileged step is ExecStartPre=+).
const (
	maxRelayExposure = 2.0
	maxFrontExposure = 2.0
)

// deployUnits are the unit files in docs/deploy.
var deployUnits = []string{"relay.service", "relay-front.service", "urbit-front.service"}

// systemdAnalyze returns systemd-analyze's path, skipping t (or failing it,
// under requireSystemdEnv) where it is not installed.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv(requireSystemdEnv) != "" {
			t.Fatalf("systemd-analyze not installed, and %s is set", requireSystemdEnv)
		}
		t.Skip("systemd-analyze not installed: unit files not checked")
	}
	return sa
}

// readUnits reads the units in docs/deploy and writes copies into a fresh
// directory with the binaries they name replaced by /bin/true (neither is
// installed here). It returns the directory and the units' texts.
func readUnits(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	units := map[string]string{}
	for _, name := range deployUnits {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		units[name] = string(b)
		text := strings.NewReplacer("/usr/local/bin/relay", "/bin/true", "/usr/local/bin/urbit", "/bin/true").Replace(string(b))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, units
}

// unitSettings returns the [Service] settings of a unit, each key's values
// in order ("" for an empty assignment).
func unitSettings(text string) map[string][]string {
	m := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			m[k] = append(m[k], v)
		}
	}
	return m
}

// TestDeployUnitsVerify checks the units in docs/deploy with
// systemd-analyze verify, and that they are wired as the docs say: the
// relays are Type=notify, validate their config first with relay check (the
// same file and mode they run with), are not restarted on exit 2, keep
// captures in a StateDirectory with a private umask; neither relay has
// any capability; the fronting unit's privileged step (ExecStartPre=+
// relay front setup, with the same flags) makes the namespace the ship's
// unit joins and hands the device to the relay through the unit's file
// descriptor store; the ship's unit is ordered after it without being
// restarted with it.
func TestDeployUnitsVerify(t *testing.T) {
	dir, units := readUnits(t)
	for _, name := range []string{"relay.service", "relay-front.service"} {
		s := unitSettings(units[name])
		one := func(key, want string) {
			t.Helper()
			if v := s[key]; len(v) != 1 || v[0] != want {
				t.Errorf("%s: %s=%q, want %q", name, key, v, want)
			}
		}
		one("Type", "notify")
		one("Restart", "on-failure")
		one("RestartPreventExitStatus", "2")
		one("StateDirectory", "relay")
		one("UMask", "0077")
		one("NoNewPrivileges", "yes")
		start, pre := s["ExecStart"], s["ExecStartPre"]
		wantPre := 1
		if name == "relay-front.service" {
			wantPre = 2
		}
		if len(start) != 1 || len(pre) != wantPre {
			t.Fatalf("%s: ExecStart %q ExecStartPre %q", name, start, pre)
		}
		args, ok := strings.CutPrefix(start[0], "/usr/local/bin/relay run ")
		if check := pre[len(pre)-1]; !ok || check != "/usr/local/bin/relay check "+args {
			t.Errorf("%s: ExecStartPre %q does not check what ExecStart %q runs", name, check, start[0])
		}
		if wantPre == 2 && pre[0] != "+/usr/local/bin/relay front setup "+args {
			t.Errorf("%s: first ExecStartPre %q, want the privileged step for what ExecStart %q runs (+/usr/local/bin/relay front setup %s)", name, pre[0], start[0], args)
		}
		for _, key := range []string{"CapabilityBoundingSet", "AmbientCapabilities"} {
			if v := s[key]; len(v) != 1 || v[0] != "" {
				t.Errorf("%s: %s=%q, want it empty (no capabilities)", name, key, v)
			}
		}
	}
	front := unitSettings(units["relay-front.service"])
	if !strings.Contains(front["ExecStart"][0], "--front-netns urbit") {
		t.Errorf("relay-front.service: ExecStart %q lacks --front-netns urbit", front["ExecStart"])
	}
	for key, want := range map[string]string{"NotifyAccess": "exec", "FileDescriptorStoreMax": "2", "DynamicUser": "yes", "PrivateDevices": "yes"} {
		if v := front[key]; len(v) != 1 || v[0] != want {
			t.Errorf("relay-front.service: %s=%q, want %s (the device comes from the setup step through the store)", key, v, want)
		}
	}
	shipUnit := units["urbit-front.service"]
	for _, want := range []string{"NetworkNamespacePath=/run/netns/urbit", "After=relay-front.service", "Wants=relay-front.service"} {
		if !strings.Contains(shipUnit, want) {
			t.Errorf("urbit-front.service lacks %q", want)
		}
	}
	if strings.Contains(shipUnit, "BindsTo=") || strings.Contains(shipUnit, "PartOf=") {
		t.Error("urbit-front.service restarts with the relay; vere must outlive a relay restart")
	}
	sa := systemdAnalyze(t)
	cmd := exec.Command(sa, append([]string{"verify"}, prefixAll("./", deployUnits)...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func prefixAll(p string, s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = p + v
	}
	return out
}

// overallExposure matches systemd-analyze security's summary line.
var overallExposure = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+) `)

// TestDeployUnitsSecurity rates the relays' units with systemd-analyze
// security --offline: relay.service at maxRelayExposure or better,
// relay-front.service at maxFrontExposure.
func TestDeployUnitsSecurity(t *testing.T) {
	dir, _ := readUnits(t)
	sa := systemdAnalyze(t)
	for name, limit := range map[string]float64{"relay.service": maxRelayExposure, "relay-front.service": maxFrontExposure} {
		cmd := exec.Command(sa, "security", "--offline=yes", "--no-pager", "./"+name)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		m := overallExposure.FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s: systemd-analyze security: %v, no overall exposure in\n%s", name, err, out)
		}
		exposure, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: exposure %.1f", name, exposure)
		if exposure > limit {
			t.Errorf("%s: exposure %.1f, want %.1f or better:\n%s", name, exposure, limit, out)
		}
	}
}

// TestDeploySysctl checks docs/deploy/99-urbit-relay.conf: it raises
// net.core.rmem_max and wmem_max to at least the socket buffers the relay
// asks for, which without CAP_NET_ADMIN the kernel caps at those.
func TestDeploySysctl(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy", "99-urbit-relay.conf"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || err != nil {
			t.Fatalf("line %q is not KEY = NUMBER", line)
		}
		got[strings.TrimSpace(k)] = n
	}
	for _, key := range []string{"net.core.rmem_max", "net.core.wmem_max"} {
		if got[key] < transport.DefaultSocketBufferBytes {
			t.Errorf("%s = %d, want at least %d (transport.DefaultSocketBufferBytes)", key, got[key], transport.DefaultSocketBufferBytes)
		}
	}
}
