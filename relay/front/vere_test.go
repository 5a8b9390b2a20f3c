package front

import (
	"bufio"
	"encoding/json"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/urbit-relay/relay/relay/transport"
)

// vtoolPath is the vere harness (shared/vere/README.md), relative to this
// package's folder.
const vtoolPath = "../../../shared/vere/bin/vtool"

// vtoolLines starts vtool with args (skipping the test where it cannot
// run), killed at cleanup, and returns its output lines; vtool's
// --time-limit bounds every wait on them.
func vtoolLines(t *testing.T, args ...string) <-chan string {
	t.Helper()
	if err := exec.Command(vtoolPath, "version").Run(); err != nil {
		t.Skipf("vtool cannot run here: %v", err)
	}
	return startLines(t, exec.Command(vtoolPath, args...))
}

// startLines starts cmd and returns its stdout lines, closed at EOF.
func startLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// nextLine returns the fields of the next line whose word is word and
// whose fields include want, failing if the output ends first.
func nextLine(t *testing.T, lines <-chan string, word string, want map[string]any) map[string]any {
	t.Helper()
	for line := range lines {
		w, obj, _ := strings.Cut(line, " ")
		var m map[string]any
		if w != word || json.Unmarshal([]byte(obj), &m) != nil {
			continue
		}
		match := true
		for k, v := range want {
			match = match && m[k] == v
		}
		if match {
			return m
		}
	}
	t.Fatalf("no %s line with %v", word, want)
	return nil
}

// TestVereFronted runs vere (vtool's ship mode, ~nec) in the namespace and
// a publisher of ~bud's page on the host's loopback, and relays between
// them by hand, as the relay's loop will: vere's peek for ~bud, addressed
// to ~bud's galaxy lane 10.99.0.5:13339, comes out of ReadBatch with that
// Addr; it goes to the publisher; the page comes back and is written into
// the TUN from 10.99.0.5:13339. vere must hear the page from that lane.
func TestVereFronted(t *testing.T) {
	c, ns := setupConn(t, Config{})
	host, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	watchdog(t, c, host)
	// A free port for the publisher (vtool reports no port it picked).
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	pubLane := probe.LocalAddr().(*net.UDPAddr).AddrPort()
	probe.Close()

	pub := vtoolLines(t, "publish", "~bud", itoa(pubLane.Port()), "--bind", "127.0.0.1", "--time-limit", "20")
	nextLine(t, pub, "READY", nil)
	ship := startLines(t, exec.Command("ip", "netns", "exec", ns, vtoolPath, "ship", "~nec", itoa(nsShipPort),
		"--galaxy", "~bud=10.99.0.5", "--push-peek", "~bud/c/x/4/hello", "--until", "heer", "--time-limit", "15"))
	nextLine(t, ship, "READY", nil)

	budLane := netip.MustParseAddrPort("10.99.0.5:13339") // ~bud is galaxy 2: port 13337+2
	msgs := []transport.Message{{Buf: make([]byte, DefaultMTU)}}
	n, err := c.ReadBatch(msgs)
	if err != nil || n != 1 {
		t.Fatalf("ReadBatch = %d, %v", n, err)
	}
	if msgs[0].Addr != budLane {
		t.Fatalf("vere's peek addressed to %v, want ~bud's galaxy lane %v", msgs[0].Addr, budLane)
	}
	if _, err := host.WriteToUDPAddrPort(msgs[0].Buf[:msgs[0].N], pubLane); err != nil {
		t.Fatal(err)
	}
	page := make([]byte, 65536)
	k, from, err := host.ReadFromUDPAddrPort(page)
	if err != nil || from != pubLane {
		t.Fatalf("publisher's answer: %v from %v", err, from)
	}
	if n, err := c.WriteBatch([]transport.Message{{Buf: page, N: k, Addr: budLane}}); n != 1 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	ev := nextLine(t, ship, "EVENT", map[string]any{"kind": "heer", "type": "page"})
	if ev["lane"] != budLane.String() {
		t.Fatalf("vere heard the page on lane %v, want %v", ev["lane"], budLane)
	}
	t.Logf("vere: %v", ev)
}

func itoa(port uint16) string { return strconv.Itoa(int(port)) }
