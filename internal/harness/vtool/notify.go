package vtool

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// NotifyMsg is one datagram a NotifySocket read: systemd's notify protocol
// (sd_notify(3)), its fields and the file descriptors it carried, now this
// process's.
type NotifyMsg struct {
	Text   string
	Fields map[string]string
	FDs    []int
}

// NotifySocket listens as systemd's notify socket does (for the
// NOTIFY_SOCKET of a process under test) and sends every datagram it reads
// to the returned channel. A BARRIER=1 message's pipe is closed at once,
// as systemd closes it once it has read what came before.
func NotifySocket(t testing.TB) (string, <-chan NotifyMsg) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	msgs := make(chan NotifyMsg, 16)
	go func() {
		defer close(msgs)
		buf, oob := make([]byte, 4096), make([]byte, 4096)
		for {
			n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			m := NotifyMsg{Text: string(buf[:n]), Fields: map[string]string{}}
			for _, l := range strings.Split(m.Text, "\n") {
				k, v, _ := strings.Cut(l, "=")
				m.Fields[k] = v
			}
			if scms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, scm := range scms {
					fds, _ := unix.ParseUnixRights(&scm)
					m.FDs = append(m.FDs, fds...)
				}
			}
			if m.Fields["BARRIER"] == "1" {
				for _, fd := range m.FDs {
					unix.Close(fd)
				}
			}
			msgs <- m
		}
	}()
	return path, msgs
}
