package interop

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
	"github.com/urbit-relay/relay/relay/front"
)

// TestFrontedVereFromFDStore runs fronting mode as relay-front.service
// does under systemd: `relay front setup` (ExecStartPre=+, NOTIFY_SOCKET
// set) makes the device and stores its files in the unit's file
// descriptor store (here the test, playing systemd), and relay run gets
// them (LISTEN_FDS) as an unprivileged user with no capabilities. An
// outside peek is answered by vere; the relay is then SIGKILLed and
// started again from the same store: the device never went away, vere
// was not restarted, and the next peek is answered too. A second setup
// (systemd's restart runs ExecStartPre=+ again) finds the device held.
func TestFrontedVereFromFDStore(t *testing.T) {
	requireFrontNetns(t)
	all := &outsideLog{}
	w := newFrontWorld(t, all)
	shipNS := frontNetnsName("rfs")
	newNetns(t, shipNS)
	sock, msgs := vtool.NotifySocket(t)
	args := []string{"--ship", "~nec", "--listen", frontRelayLane, "--front-netns", shipNS,
		"--hint-net", frontHintNet, "--metrics", frontMetricsAddr}
	setup := func() string {
		t.Helper()
		cmd := exec.Command("ip", append([]string{"netns", "exec", w.name, vtool.BuildRelay(t), "front", "setup"}, args...)...)
		cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("relay front setup: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Logf("setup: %s", setup())
	stored := map[string]*os.File{}
	for len(msgs) > 0 {
		if m := <-msgs; m.Fields["FDSTORE"] == "1" && len(m.FDs) == 1 {
			stored[m.Fields["FDNAME"]] = os.NewFile(uintptr(m.FDs[0]), m.Fields["FDNAME"])
		}
	}
	tun, nl := stored[front.TUNFileName], stored[front.NetlinkFileName]
	if tun == nil || nl == nil {
		t.Fatalf("stored %v; want %s and %s", stored, front.TUNFileName, front.NetlinkFileName)
	}
	defer tun.Close()
	defer nl.Close()
	start := func() *vtool.Relay {
		t.Helper()
		return vtool.StartStoredRelayIn(t, w.name, frontRelayUser, []*os.File{tun, nl},
			[]string{front.TUNFileName, front.NetlinkFileName}, args...)
	}
	r := start()
	ship := vtool.StartIn(t, shipNS, "ship", "~nec", "13338", "--galaxy", "~bud="+frontBudIP, "--time-limit", "30")
	ship.MustNext("READY", nil, readyTimeout)
	ship.MustNext("EVENT", map[string]any{"kind": "born"}, readyTimeout)
	peek := func(port string) {
		t.Helper()
		p := w.outside("peek", "~nec", "/c/x/4/hello", frontRelayLane, "--bind", "10.88.0.10", "--from", port, "--time-limit", "5")
		waitOK(t, p)
		if page := p.MustNext("RECV", map[string]any{"type": "page"}, time.Second); page.Str("from") != frontRelayLane {
			t.Errorf("page %s; want from %s", page, frontRelayLane)
		}
		ship.MustNext("SEND", map[string]any{"type": "page", "to": "10.88.0.10:" + port}, eventTimeout)
	}
	peek("41002")
	m, err := scrapeIn(w.name, "http://"+frontMetricsAddr+"/metrics")
	if err != nil || m["relay_from_ship_total"] <= 0 {
		t.Errorf("relay_from_ship_total %v (%v)", m["relay_from_ship_total"], err)
	}
	r.Kill()
	if err := ipCmd("-n", shipNS, "link", "show", front.DefaultDevice); err != nil {
		t.Fatalf("the device went with the relay, though the store holds it: %v", err)
	}
	if msg := setup(); !strings.Contains(msg, "held already") {
		t.Errorf("setup again: %q; want the device found held", msg)
	}
	start()
	peek("41003")
	if !ship.Alive() || bytes.Contains([]byte(ship.Stderr()), []byte("bail")) {
		t.Errorf("vere did not live through the relay's restart: %s", ship.State())
	}
}
