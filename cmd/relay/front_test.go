package main

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/urbit-relay/relay/internal/harness/vtool"
	"github.com/urbit-relay/relay/relay/front"
	"github.com/urbit-relay/relay/relay/transport"
)

// frontTestNetns returns a fresh namespace name, deleted at cleanup,
// skipping t where namespaces cannot be made (not root, no ip).
func frontTestNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("relay front setup needs root (a network namespace, a TUN device): test skipped")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2): test skipped")
	}
	name := fmt.Sprintf("rfst%d", os.Getpid())
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	return name
}

// TestFrontSetupStoresDevice runs `relay front setup` as a systemd unit's
// ExecStartPre=+ would (NOTIFY_SOCKET set, no command): it makes the
// namespace and the device and stores the device's two files in the
// unit's file descriptor store, named, then waits on a barrier. The files
// serve a Conn in a process that got them (as relay run gets them from
// systemd), while a second setup finds the device held and only
// configures the namespace again.
func TestFrontSetupStoresDevice(t *testing.T) {
	ns := frontTestNetns(t)
	sock, msgs := vtool.NotifySocket(t)
	t.Setenv("NOTIFY_SOCKET", sock)
	args := []string{"--ship", "~nec", "--listen", "127.0.0.1:31338", "--front-netns", ns}
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"front", "setup"}, args...), nil, &stdout, &stderr); code != 0 {
		t.Fatalf("relay front setup: exit %d: %s", code, stderr.String())
	}
	// The notify socket's reader delivers the messages on its own
	// goroutine: wait for the barrier, the last of them, rather than
	// taking what has arrived when setup returns.
	got := map[string]int{}
	barrier := false
	deadline := time.After(10 * time.Second)
	for !barrier {
		var m vtool.NotifyMsg
		var open bool
		select {
		case m, open = <-msgs:
			if !open {
				t.Fatalf("the notify socket closed before the barrier; stored %v", got)
			}
		case <-deadline:
			t.Fatalf("no barrier within 10 s; stored %v", got)
		}
		fields := m.Fields
		switch {
		case fields["FDSTORE"] == "1" && len(m.FDs) == 1 && fields["FDPOLL"] == "0":
			got[fields["FDNAME"]] = m.FDs[0]
		case fields["BARRIER"] == "1":
			barrier = true
		default:
			t.Errorf("unexpected notify message %q with %d fds", m.Text, len(m.FDs))
		}
	}
	if len(got) != 2 || got[front.TUNFileName] == 0 || got[front.NetlinkFileName] == 0 || !barrier {
		t.Fatalf("stored %v, barrier %v; want %s and %s, then a barrier", got, barrier, front.TUNFileName, front.NetlinkFileName)
	}
	t.Logf("setup: %s", strings.TrimSpace(stdout.String()))

	// A second start while the store holds the device.
	stdout.Reset()
	if code := run(append([]string{"front", "setup"}, args...), nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "held already") {
		t.Fatalf("second relay front setup: exit %d: %q %q; want exit 0, held already", code, stdout.String(), stderr.String())
	}
	if len(msgs) != 0 {
		t.Fatalf("the second setup stored more: %q", (<-msgs).Text)
	}

	c, err := front.Open(front.Config{Namespace: ns, ShipPort: 31338}, &front.Files{
		TUN:     os.NewFile(uintptr(got[front.TUNFileName]), front.TUNFileName),
		Netlink: os.NewFile(uintptr(got[front.NetlinkFileName]), front.NetlinkFileName),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// vere's socket in the namespace, sending anywhere: the Conn reads it.
	uc := socketIn(t, ns, 31338)
	dst := netip.MustParseAddrPort("198.51.100.7:4000")
	if _, err := uc.WriteToUDPAddrPort([]byte("hello"), dst); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Close() // ends a ReadBatch that would wait for ever
		}
	}()
	in := []transport.Message{{Buf: make([]byte, 64)}}
	if n, err := c.ReadBatch(in); err != nil || n != 1 || string(in[0].Buf[:in[0].N]) != "hello" || in[0].Addr != dst {
		t.Fatalf("ReadBatch = %d, %v: %q to %v", n, err, in[0].Buf[:in[0].N], in[0].Addr)
	}
	if d := c.Drops(); d != 0 {
		t.Errorf("Drops over the stored netlink socket = %d", d)
	}
}

// socketIn opens a UDP socket on 0.0.0.0:port inside namespace ns, as vere
// binds, closed at cleanup.
func socketIn(t *testing.T, ns string, port int) *net.UDPConn {
	t.Helper()
	type result struct {
		uc  *net.UDPConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // left locked on failure: the thread dies with the goroutine
		orig, err := netns.Get()
		if err != nil {
			ch <- result{err: err}
			return
		}
		h, err := netns.GetFromName(ns)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- result{err: err}
			return
		}
		uc, err := net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{uc, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.uc.Close() })
	return r.uc
}

func TestSplitSetupArgs(t *testing.T) {
	for _, c := range []struct {
		in      []string
		user    string
		run     []string
		command []string
		err     string
	}{
		{in: []string{"--config", "x", "--user", "relay", "--", "relay", "run"}, user: "relay", run: []string{"--config", "x"}, command: []string{"relay", "run"}},
		{in: []string{"--user=relay", "--front-netns", "u", "--", "r"}, user: "relay", run: []string{"--front-netns", "u"}, command: []string{"r"}},
		{in: []string{"--front-netns", "u"}, run: []string{"--front-netns", "u"}},
		{in: []string{"--user", "relay"}, err: "--user without -- COMMAND"},
		{in: []string{"--"}, err: "-- without a command"},
	} {
		user, runArgs, command, err := splitSetupArgs(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || user != c.user || fmt.Sprint(runArgs) != fmt.Sprint(c.run) || fmt.Sprint(command) != fmt.Sprint(c.command) {
			t.Errorf("%q: %q %q %q %v", c.in, user, runArgs, command, err)
		}
	}
}
