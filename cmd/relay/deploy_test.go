package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeployUnitsVerify checks the fronting-mode unit pair in docs/deploy
// with systemd-analyze verify (skipped where systemd-analyze is absent),
// with the binaries they name replaced by /bin/true, since neither is
// installed here. It also checks that the pair is wired as the docs say:
// the relay creates the namespace the ship's unit joins, and the ship's
// unit is ordered after the relay without being restarted with it.
func TestDeployUnitsVerify(t *testing.T) {
	dir := t.TempDir()
	units := map[string]string{}
	for _, name := range []string{"relay-front.service", "urbit-front.service"} {
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
	relayUnit, shipUnit := units["relay-front.service"], units["urbit-front.service"]
	for _, want := range []string{"--front-netns urbit", "CAP_NET_ADMIN CAP_SYS_ADMIN", "RestartPreventExitStatus=2"} {
		if !strings.Contains(relayUnit, want) {
			t.Errorf("relay-front.service lacks %q", want)
		}
	}
	for _, want := range []string{"NetworkNamespacePath=/run/netns/urbit", "After=relay-front.service", "Wants=relay-front.service"} {
		if !strings.Contains(shipUnit, want) {
			t.Errorf("urbit-front.service lacks %q", want)
		}
	}
	if strings.Contains(shipUnit, "BindsTo=") || strings.Contains(shipUnit, "PartOf=") {
		t.Error("urbit-front.service restarts with the relay; vere must outlive a relay restart")
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: unit syntax not verified")
	}
	cmd := exec.Command(sa, "verify", "./relay-front.service", "./urbit-front.service")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
