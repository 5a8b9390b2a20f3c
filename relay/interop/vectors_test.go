package interop

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

// probePrefix starts the paths of the liveness peeks, which vere prints
// with a leading '/'.
const probePrefix = "interop/probe/"

// killed is a vector after which vere was dead or mute.
type killed struct {
	v   vector
	how string // "crashed: exit 134 ...", "exited ...", "alive but not answering ..."
}

// sweepResult is what sweep saw.
type sweepResult struct {
	killed []killed
	// reached counts, by file, the vectors after which vere read anything
	// besides the liveness peeks; short lists those under 10 bytes.
	reached, sent map[string]int
	short         []string
	// last is the front the sweep ended with, alive.
	last *fronted
}

// sweep sends each vector in vs, one at a time, to a fronted ship: to the
// relay when direct is false, else straight to vere's port. A peek for
// ~nec's page at a fresh path follows each vector to the same address; its
// answer shows vere alive after the vector, and since vere reads its socket
// in order, the RECV lines between two peeks are what vere read of the vector
// between them. After a vector that leaves vere dead or mute, sweep records
// how, in what vere last read, and goes on with a fresh vere and relay, so
// that one sweep names every such vector.
func sweep(t *testing.T, vs []vector, direct bool) sweepResult {
	t.Helper()
	res := sweepResult{reached: map[string]int{}, sent: map[string]int{}}
	f := startFronted(t)
	target := func() netip.AddrPort {
		if direct {
			return loopback(f.shipPort)
		}
		return f.relay.Listen
	}
	sender, prober := udpSocket(t), udpSocket(t)
	seen := 0 // ship lines before this index are accounted for
	isProbe := func(l vtool.Line) bool { return strings.HasPrefix(l.Str("path"), "/"+probePrefix) }

	for i, v := range vs {
		res.sent[v.File]++
		if _, err := sender.WriteToUDPAddrPort(v.Bytes, target()); err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		path := fmt.Sprintf("%s%d", probePrefix, i)
		data, _, err := peek(prober, target(), path, probeTimeout, f.ship)
		if err == nil && string(data) == "hello" && f.ship.Alive() {
			if _, ok := f.ship.Next("RECV", map[string]any{"path": "/" + path}, probeTimeout); !ok {
				t.Fatalf("%v: the peek was answered but vere printed no RECV for it\n%s", v, f.ship.Tail(20))
			}
			lines, n := f.ship.Lines(), 0
			for ; seen < len(lines); seen++ {
				l := lines[seen]
				if l.Word == "RECV" && l.Str("path") == "/"+path {
					seen++
					break
				}
				if l.Word == "RECV" && !isProbe(l) {
					n++
				}
			}
			if n > 0 {
				res.reached[v.File]++
				if len(v.Bytes) < 10 {
					res.short = append(res.short, v.String())
				}
			}
			continue
		}

		code, crashed, exited := f.ship.WaitTimeout(crashTimeout)
		how := "alive but not answering the peek"
		if exited {
			how = fmt.Sprintf("exited %d (%s)", code, vtool.ExitName(code))
			if crashed {
				how = fmt.Sprintf("crashed: exit %d (%s), no END line", code, vtool.ExitName(code))
			}
		}
		var read []string
		for _, l := range f.ship.Lines()[seen:] {
			if l.Word == "RECV" && !isProbe(l) {
				read = append(read, l.Raw)
			}
		}
		res.killed = append(res.killed, killed{v, how})
		t.Logf("after %v, vere %s (peek: %q %v); it had read:\n  %s\nrelay counters: %v",
			v, how, data, err, strings.Join(read, "\n  "), vtool.Nonzero(f.relay.Metrics(t), "relay_"))
		f.ship.Stop()
		f.relay.Stop(time.Second)
		f = startFronted(t)
		seen = 0
	}
	res.last = f
	return res
}

// summary prints reached/sent by file.
func (r sweepResult) summary() string {
	files := make([]string, 0, len(r.sent))
	for k := range r.sent {
		files = append(files, k)
	}
	sort.Strings(files)
	var out []string
	for _, k := range files {
		out = append(out, fmt.Sprintf("%s %d/%d", k, r.reached[k], r.sent[k]))
	}
	return strings.Join(out, ", ")
}

// TestVectorsNeverCrashFrontedVere sends every reference vector
// (../shared/reference/{ames,mesa}/*.jsonl: valid, malformed and quirks) to
// a relay fronting a vere ~nec (`relay run --ship ~nec --ship-lane`), each
// followed by a peek through the relay (see sweep). Every vector after which
// vere is dead or mute fails the test, by name. At the end `vtool peek ~nec
// /c/x/4/hello RELAY` must exit 0 with vere still running.
//
// vere aborts on the datagrams shortRelayed describes (ames-malformed.jsonl
// ids 10, 15, 20; TestVereCrashesOnShortRelayedAmes), so a relay that hands
// any of them to its ship fails here.
func TestVectorsNeverCrashFrontedVere(t *testing.T) {
	vs := loadVectors(t)
	res := sweep(t, vs, false)
	for _, k := range res.killed {
		t.Errorf("through the relay, %v left vere %s", k.v, k.how)
	}
	t.Logf("vectors the relay handed vere, by file (reached/sent): %s", res.summary())
	t.Logf("of them under 10 bytes: %v", res.short)
	f := res.last
	t.Logf("relay drops (last relay): %v", vtool.Nonzero(f.relay.Metrics(t), "relay_drops_total"))

	p := vtool.Start(t, "peek", "~nec", "/c/x/4/hello", f.relay.Listen.String(), "--time-limit", "5")
	if code, crashed := p.Wait(); code != vtool.ExitOK || crashed {
		t.Errorf("vtool peek ~nec /c/x/4/hello %v: exit %d (%s)\n%s", f.relay.Listen, code, vtool.ExitName(code), p.Tail(10))
	}
	if !f.ship.Alive() {
		t.Fatalf("vere %s", f.ship.State())
	}
	if code, crashed := f.ship.Stop(); code != vtool.ExitOK || crashed {
		t.Errorf("vere stopped with exit %d, crashed %v", code, crashed)
	}
}
