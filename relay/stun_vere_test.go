package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
)

// vtoolPath returns vere's harness (shared/vere/bin/vtool beside the
// module root, or $RELAY_VTOOL), skipping the test where it is absent or
// cannot run here.
func vtoolPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("RELAY_VTOOL")
	if path == "" {
		dir, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				t.Fatal("no go.mod above the test's directory")
			}
			dir = parent
		}
		path = filepath.Join(dir, "..", "shared", "vere", "bin", "vtool")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, path, "version").CombinedOutput(); err != nil {
		t.Skipf("vere harness not found at %s: interop test skipped (%v %s)", path, err, bytes.TrimSpace(out))
	}
	return path
}

// vtoolLines returns vtool's stdout lines as word and JSON object.
func vtoolLines(t *testing.T, out []byte) map[string][]map[string]any {
	t.Helper()
	lines := map[string][]map[string]any{}
	for _, l := range strings.Split(string(out), "\n") {
		w, obj, ok := strings.Cut(l, " ")
		var m map[string]any
		if !ok || json.Unmarshal([]byte(obj), &m) != nil {
			continue
		}
		lines[w] = append(lines[w], m)
	}
	return lines
}

// TestSTUNVereClient runs vere's own STUN client (vtool as the planet
// ~milrys-soglec, sponsored by ~nec) against a relay fronting ~nec on
// 127.0.0.1: the client must accept the relay's answer, with its own lane,
// and the fronted ship must see nothing.
func TestSTUNVereClient(t *testing.T) {
	vt := vtoolPath(t)
	conn, err := transport.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nec := ship(t, "~nec")
	shipConn, err := transport.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer shipConn.Close()
	r, err := relay.New(relay.Config{
		Ship:     nec,
		ShipLane: shipConn.LocalAddr(), // where ~nec's process would be
		Self:     []netip.AddrPort{conn.LocalAddr()},
		Galaxies: map[lane.Ship]netip.AddrPort{nec: conn.LocalAddr()},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := relay.NewServer(r, []transport.Conn{conn}, relay.ServerConfig{})
	srv.Start()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, vt, "ship", "~milrys-soglec", "0", "--stun-galaxy", "~nec",
		"--galaxy", fmt.Sprintf("~nec=127.0.0.1:%d", conn.LocalAddr().Port()),
		"--until", "stun", "--time-limit", "10")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Logf("vtool:\n%s", stdout.String())
	if runErr != nil {
		t.Fatalf("vtool: %v (want exit 0); stderr:\n%s", runErr, stderr.String())
	}
	lines := vtoolLines(t, stdout.Bytes())
	if len(lines["READY"]) != 1 {
		t.Fatalf("READY lines %v", lines["READY"])
	}
	port, ok := lines["READY"][0]["port"].(float64)
	if !ok || port == 0 {
		t.Fatalf("READY without a port: %v", lines["READY"][0])
	}
	mapped := "127.0.0.1:" + strconv.Itoa(int(port))
	if got := lines["STUN"]; len(got) != 1 || got[0]["result"] != "ok" || got[0]["mapped"] != mapped {
		t.Errorf("STUN lines %v, want one {\"result\":\"ok\",\"mapped\":%q}", got, mapped)
	}
	for _, recv := range lines["RECV"] {
		if recv["proto"] == "stun" && recv["bytes"] != 40.0 {
			t.Errorf("vere received a %v-byte STUN response, vere's galaxy sends 40", recv["bytes"])
		}
	}
	sn := r.Counters().Snapshot()
	if sn.Events[relay.EventSTUNAnswered] < 1 || sn.In[relay.KindSTUN] != sn.Events[relay.EventSTUNAnswered] || sn.Events[relay.EventToShip] != 0 || sn.TotalDrops() != 0 {
		t.Errorf("relay counters %+v", sn)
	}
}
