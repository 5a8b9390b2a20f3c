package main

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
	"github.com/urbit-relay/relay/scry"
)

// notifyWait bounds each wait for a notification or an answer.
const notifyWait = 10 * time.Second

// TestSystemdNotify runs the relay binary as a Type=notify unit would, with
// NOTIFY_SOCKET naming a unixgram socket the test reads: the first
// notification is READY=1, and when it arrives the UDP socket already
// answers (a STUN binding request sent then, once, is answered); a SIGHUP
// reload sends RELOADING=1 (with MONOTONIC_USEC) then READY=1; SIGTERM
// sends STOPPING=1 and the relay exits 0. At --log-level debug the STUN
// request's decision is logged.
func TestSystemdNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := buildRelay(t, dir)
	sockPath := filepath.Join(dir, "notify.sock")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	next := func(what string) string {
		t.Helper()
		notify.SetReadDeadline(time.Now().Add(notifyWait))
		buf := make([]byte, 4096)
		n, err := notify.Read(buf)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		return string(buf[:n])
	}

	// A port free a moment ago; the relay binds it.
	listen := netip.MustParseAddrPort("127.0.0.1:" + freePort(t, "udp4"))
	config := writeConfig(t, `{"ship": "~sipsyl", "log": {"format": "json", "level": "debug"}, "listen": "`+listen.String()+`"}`)
	stderr := &vtool.SyncBuffer{}
	cmd := exec.Command(bin, "run", "--config", config)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sockPath)
	cmd.Stderr = stderr
	startProcess(t, cmd)

	if got, want := next("READY=1"), "READY=1\nSTATUS=serving on "+listen.String(); got != want {
		t.Fatalf("first notification %q, want %q\n%s", got, want, stderr)
	}
	if !stunAnswered(t, listen) {
		t.Fatalf("READY=1 arrived and the socket did not answer\n%s", stderr)
	}

	cmd.Process.Signal(syscall.SIGHUP)
	if got := next("RELOADING=1"); !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Fatalf("on SIGHUP %q, want RELOADING=1 with MONOTONIC_USEC", got)
	}
	if got := next("READY=1 after reload"); got != "READY=1" {
		t.Fatalf("after the reload %q, want READY=1", got)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if got := next("STOPPING=1"); got != "STOPPING=1" {
		t.Fatalf("on SIGTERM %q, want STOPPING=1", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr.String(), `"msg":"decision","action":"stun_answered","kind":"stun"`) {
		t.Errorf("no decision line for the STUN request in\n%s", stderr)
	}
}

// stunAnswered sends one STUN binding request to the relay at to and
// reports whether its answer arrives.
func stunAnswered(t *testing.T, to netip.AddrPort) bool {
	t.Helper()
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := scry.STUNRequest{TxID: [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
	if _, err := c.Write(req.Append(nil)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(notifyWait))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return false
	}
	var resp scry.STUNResponse
	return resp.Parse(buf[:n]) == nil && resp.TxID == req.TxID
}
