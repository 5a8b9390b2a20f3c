package front

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// NetnsDir is where `ip netns` keeps its named namespaces: each is a bind
// mount of a namespace onto a file of this directory.
const NetnsDir = "/run/netns"

// ErrHiddenNetns reports a namespace that the host's `ip netns` could not
// see (CheckVisible).
var ErrHiddenNetns = errors.New("hidden from the host's ip netns")

// CheckVisible reports whether namespace name, as this process sees it, is
// one the host's `ip netns exec NAME` can enter, or, if it does not exist
// yet, whether one made here would be. A named namespace is a bind mount,
// and a mount made in a private mount namespace stays there: a process
// started under `ip netns exec` (which makes its own mount namespace, a
// slave of the host's) or in a unit with PrivateMounts= would make one the
// host never sees, and vere could not be started in it ("setting the
// network namespace ... failed: Invalid argument"). The error, wrapping
// ErrHiddenNetns, is one line that says what to run instead.
//
// It reads /proc/self/mountinfo and, where it may, compares this process's
// mount namespace with init's (/proc/1/ns/mnt).
func CheckVisible(name string) error {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("front: netns %s: %w", name, err)
	}
	path := filepath.Join(NetnsDir, name)
	var st unix.Statfs_t
	exists, isNS := false, false
	switch err := unix.Statfs(path, &st); {
	case err == nil:
		exists, isNS = true, st.Type == unix.NSFS_MAGIC
	case !errors.Is(err, unix.ENOENT):
		return fmt.Errorf("front: netns %s: %w", name, err)
	}
	return checkVisible(name, parseMountinfo(info), exists, isNS, sameMountNSAsInit())
}

// mountEntry is what CheckVisible needs of a line of /proc/self/mountinfo.
type mountEntry struct {
	point          string // the mount point
	shared, master bool   // its propagation: "shared:N", "master:N"
}

// slaveOnly reports whether a mount made under e stays in this mount
// namespace: e receives mounts from a master but propagates none back.
func (e mountEntry) slaveOnly() bool { return e.master && !e.shared }

// parseMountinfo reads the mount point and the optional fields of each
// line of mountinfo (proc(5)); malformed lines are skipped.
func parseMountinfo(b []byte) []mountEntry {
	var out []mountEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 7 {
			continue
		}
		e := mountEntry{point: unescapeMount(f[4])}
		for _, opt := range f[6:] {
			if opt == "-" {
				break
			}
			e.shared = e.shared || strings.HasPrefix(opt, "shared:")
			e.master = e.master || strings.HasPrefix(opt, "master:")
		}
		out = append(out, e)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	octal := func(c byte) bool { return c >= '0' && c <= '7' }
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && octal(s[i+1]) && octal(s[i+2]) && octal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountOf returns the last entry (the one on top) whose mount point is
// path or its nearest ancestor.
func mountOf(mounts []mountEntry, path string) (mountEntry, bool) {
	best, found := mountEntry{}, false
	for _, m := range mounts {
		under := m.point == "/" || path == m.point || strings.HasPrefix(path, m.point+"/")
		if under && (!found || len(m.point) >= len(best.point)) {
			best, found = m, true
		}
	}
	return best, found
}

// sameMountNSAsInit reports +1 if this process shares init's mount
// namespace, -1 if it does not, 0 if it cannot tell (no access to
// /proc/1).
func sameMountNSAsInit() int {
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	init, err2 := os.Readlink("/proc/1/ns/mnt")
	switch {
	case err1 != nil || err2 != nil:
		return 0
	case self == init:
		return 1
	}
	return -1
}

// checkVisible is CheckVisible's rule, on what it read: exists and isNS
// describe /run/netns/NAME; withInit is sameMountNSAsInit's answer.
func checkVisible(name string, mounts []mountEntry, exists, isNS bool, withInit int) error {
	path := filepath.Join(NetnsDir, name)
	hidden := func(why, instead string) error {
		return fmt.Errorf("front: netns %s: %s: %w; %s", name, why, ErrHiddenNetns, instead)
	}
	const fromHost = `run "relay front setup" from the host's own mount namespace (as the unit's ExecStartPre=+ does), or make the namespace there first with "ip netns add ` // + name
	parent, _ := mountOf(mounts, NetnsDir)
	switch {
	case exists && !isNS:
		return hidden(path+" is not a network namespace in this mount namespace (a relay started under \"ip netns exec\" or with PrivateMounts= made it where only it could see it)",
			`remove it ("ip netns delete `+name+`") and `+fromHost+name+`"`)
	case exists:
		if m, ok := mountOf(mounts, path); ok && m.point == path && (m.shared || m.master || !parent.slaveOnly()) {
			return nil // propagated from, or shared with, the host's
		}
		return hidden(path+" was made in this process's own mount namespace",
			`stop this process, delete the namespace, and `+fromHost+name+`"`)
	case parent.slaveOnly() || (withInit < 0 && !parent.shared):
		return hidden("this process is in a mount namespace of its own (started under \"ip netns exec\", unshare, or a unit with PrivateMounts=), where a namespace made under "+NetnsDir+" would be invisible to the host",
			fromHost+name+`"`)
	}
	return nil
}
