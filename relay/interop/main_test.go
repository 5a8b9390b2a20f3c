package interop

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

func TestMain(m *testing.M) { os.Exit(vtool.Main(m)) }

const (
	// readyTimeout bounds vtool's start-up, from exec to READY.
	readyTimeout = 10 * time.Second
	// portTries is how many free ports a start tries before giving up: a
	// port found free may be taken before vtool binds it.
	portTries = 5
	// shipTimeLimit is a ship's --time-limit: longer than any test here.
	shipTimeLimit = "50"
)

// fronted is a vere ship (~nec) behind a relay on 127.0.0.1.
type fronted struct {
	ship     *vtool.Proc
	shipPort int
	relay    *vtool.Relay
}

// startShip runs `vtool ship ~nec PORT` on a free port and waits for READY,
// retrying with another port when the bind fails.
func startShip(t *testing.T, extra ...string) (*vtool.Proc, int) {
	t.Helper()
	for try := 1; ; try++ {
		port := vtool.FreeUDPPort(t)
		args := append([]string{"ship", "~nec", strconv.Itoa(port), "--time-limit", shipTimeLimit}, extra...)
		p := vtool.Start(t, args...)
		if _, ok := p.Next("READY", nil, readyTimeout); ok {
			// The born event follows READY; by then vere has its protocol
			// version from arvo and its version filter is on.
			p.MustNext("EVENT", map[string]any{"kind": "born"}, readyTimeout)
			return p, port
		}
		code, _, _ := p.WaitTimeout(time.Second)
		if code != vtool.ExitStart || try == portTries {
			t.Fatalf("%s: no READY (%s)\n%s", p.Name(), p.State(), p.Tail(20))
		}
	}
}

// startFronted starts ~nec's vere and a relay fronting it: the relay on a
// port the kernel picks, --ship-lane vere's port.
func startFronted(t *testing.T) *fronted {
	t.Helper()
	ship, port := startShip(t)
	r := vtool.StartRelay(t, "--ship", "~nec", "--listen", "127.0.0.1:0",
		"--ship-lane", fmt.Sprintf("127.0.0.1:%d", port), "--metrics", "127.0.0.1:0")
	return &fronted{ship: ship, shipPort: port, relay: r}
}

// vector is one record of the reference vectors.
type vector struct {
	File     string // e.g. "ames-malformed.jsonl"
	ID       int    `json:"id"`
	Hex      string `json:"hex"`
	Category string `json:"category"`
	Verdict  string `json:"verdict"`
	Bytes    []byte
}

func (v vector) String() string {
	s := fmt.Sprintf("%s id %d (%d bytes", v.File, v.ID, len(v.Bytes))
	if v.Category != "" {
		s += ", " + v.Category
	}
	if len(v.Bytes) <= 16 {
		s += ", " + v.Hex
	}
	return s + ")"
}

// loadVectors reads every record of ../shared/reference/{ames,mesa}/*.jsonl,
// in file order, skipping the test when the folder is absent.
func loadVectors(t *testing.T) []vector {
	t.Helper()
	dir := vtool.Shared(t, "reference")
	var files []string
	for _, sub := range []string{"ames", "mesa"} {
		m, _ := filepath.Glob(filepath.Join(dir, sub, "*.jsonl"))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skipf("no reference vectors at %s/{ames,mesa}/*.jsonl (a fresh clone has no ../shared/reference): interop test skipped", dir)
	}
	var out []vector
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var v vector
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			v.File = filepath.Base(f)
			if v.Bytes, err = hex.DecodeString(v.Hex); err != nil {
				t.Fatalf("%s id %d: %v", f, v.ID, err)
			}
			out = append(out, v)
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return out
}

// udpSocket is a UDP socket on 127.0.0.1, closed by t.Cleanup.
func udpSocket(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func addrPort(c *net.UDPConn) netip.AddrPort {
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}
