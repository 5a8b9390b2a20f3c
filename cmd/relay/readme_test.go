package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeLoadTestLimit bounds the README's load test: two builds (cached
// after go vet) and a one-second replay.
const readmeLoadTestLimit = 3 * time.Minute

// TestReadmeLoadTest runs the README's load-test block with bash, on free
// ports and in a temporary directory, and checks that it works and tears
// down: the replay reports its requests answered, and once the script has
// exited the relay it started is gone and its UDP port free again.
func TestReadmeLoadTest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the relay and replay")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Load testing\n")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no sh block under ## Load testing")
	}
	udp, tcp := freePort(t, "udp4"), freePort(t, "tcp4")
	dir := t.TempDir()
	// The ship's lane is the discard port, which answers nothing; it stays.
	known := []string{"--ship-lane 127.0.0.1:9 ", "--ship-lane 127.0.0.1:9 ",
		"127.0.0.1:13337", "127.0.0.1:" + udp, "127.0.0.1:9337", "127.0.0.1:" + tcp,
		"/tmp/relay", filepath.Join(dir, "relay"), "/tmp/steady.pcap", filepath.Join(dir, "steady.pcap")}
	rest := block
	for i := 0; i < len(known); i += 2 {
		rest = strings.ReplaceAll(rest, known[i], "")
	}
	if strings.Contains(rest, "127.0.0.1:") || strings.Contains(rest, "/tmp/") {
		t.Fatalf("the block names ports or paths this test does not replace:\n%s", block)
	}
	script := strings.NewReplacer(known...).Replace(block)
	// The relay's pid, printed last, before the EXIT trap runs.
	script = "set -e\n" + script + "echo relay_pid=$relay_pid\n"
	ctx, cancel := context.WithTimeout(context.Background(), readmeLoadTestLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", script)
	cmd.Dir = filepath.Join("..", "..")
	// A relay left running would hold the output pipes open.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	m := regexp.MustCompile(`relay_pid=(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no relay pid in the output (%v):\n%s", err, out)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	if kerr := syscall.Kill(pid, 0); !errors.Is(kerr, syscall.ESRCH) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the relay (pid %d) outlived the script (kill 0: %v; script: %v):\n%s", pid, kerr, err, out)
	}
	if err != nil {
		t.Fatalf("the README's load test: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`answered \d+ .*missing 0`).Match(out) {
		t.Errorf("the replay's report has no answered requests with none missing:\n%s", out)
	}
	c, err := net.ListenPacket("udp4", "127.0.0.1:"+udp)
	if err != nil {
		t.Fatalf("the relay's port is still taken: %v", err)
	}
	c.Close()
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T, network string) string {
	t.Helper()
	var addr net.Addr
	if network == "udp4" {
		c, err := net.ListenPacket(network, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = c.LocalAddr()
		c.Close()
	} else {
		l, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = l.Addr()
		l.Close()
	}
	_, port, _ := net.SplitHostPort(addr.String())
	return port
}
