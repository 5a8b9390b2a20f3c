package front

import (
	"errors"
	"strings"
	"testing"
)

// Mount tables as /proc/self/mountinfo shows them: the host's (after `ip
// netns add`, /run/netns is shared), and a process's under `ip netns exec`
// (every mount a slave of the host's; hidden0 made in there).
const (
	hostMountinfo = `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
42 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw
44 42 0:4 net:[4026532178] /run/netns/urbit rw shared:3 - nsfs nsfs rw
`
	execMountinfo = `46 45 254:0 / / rw,relatime - ext4 /dev/vda rw
66 46 254:0 /run/netns /run/netns rw,relatime master:1 - ext4 /dev/vda rw
67 66 0:4 net:[4026532178] /run/netns/urbit rw master:3 - nsfs nsfs rw
68 66 0:4 net:[4026532199] /run/netns/hidden0 rw - nsfs nsfs rw
`
	// A host with a private root and no /run/netns mount yet.
	privateMountinfo = `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
28 27 0:25 / /mnt/with\040space ro - tmpfs x ro
`
)

func TestCheckVisible(t *testing.T) {
	host, exec, private := parseMountinfo([]byte(hostMountinfo)), parseMountinfo([]byte(execMountinfo)), parseMountinfo([]byte(privateMountinfo))
	if got := private[1].point; got != "/mnt/with space" {
		t.Fatalf("mount point %q, want the space unescaped", got)
	}
	for _, c := range []struct {
		name          string
		mounts        []mountEntry
		ns            string
		exists, isNS  bool
		withInit      int
		hidden        bool
		wantInMessage string
	}{
		{"host, exists", host, "urbit", true, true, 1, false, ""},
		{"host, absent", host, "new", false, false, 1, false, ""},
		{"host, cannot read init", host, "new", false, false, 0, false, ""},
		{"private root, absent", private, "new", false, false, 0, false, ""},
		{"under ip netns exec, made by the host", exec, "urbit", true, true, 0, false, ""},
		{"under ip netns exec, absent", exec, "new", false, false, 0, true, `"ip netns exec"`},
		{"under ip netns exec, made in there", exec, "hidden0", true, true, 0, true, "own mount namespace"},
		{"another mount namespace than init's, private", private, "new", false, false, -1, true, "relay front setup"},
		{"a leftover file, not a namespace", host, "stale", true, false, 1, true, `ip netns delete stale`},
	} {
		err := checkVisible(c.ns, c.mounts, c.exists, c.isNS, c.withInit)
		if c.hidden != (err != nil) || (err != nil && !errors.Is(err, ErrHiddenNetns)) {
			t.Errorf("%s: %v, want hidden %v", c.name, err, c.hidden)
			continue
		}
		if err == nil {
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.wantInMessage) || !strings.Contains(msg, "relay front setup") || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q: want one line naming %s and what to run instead", c.name, msg, c.wantInMessage)
		}
	}
}
