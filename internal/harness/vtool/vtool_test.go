package vtool

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

func TestParseLineMatch(t *testing.T) {
	l := ParseLine(`EVENT {"kind":"heer","lane":"127.0.0.1:13338","hops":0,"galaxies":{"~nec":"127.0.0.1:13338"}}`)
	if l.Word != "EVENT" || l.Str("lane") != "127.0.0.1:13338" {
		t.Fatalf("parsed %+v", l)
	}
	if n, ok := l.Num("hops"); !ok || n != 0 {
		t.Fatalf("hops = %v %v", n, ok)
	}
	for _, c := range []struct {
		word string
		want map[string]any
		ok   bool
	}{
		{"EVENT", nil, true},
		{"", map[string]any{"kind": "heer"}, true},
		{"EVENT", map[string]any{"hops": 0}, true},
		{"EVENT", map[string]any{"hops": uint8(0), "kind": "heer"}, true},
		{"EVENT", map[string]any{"hops": 1}, false},
		{"EVENT", map[string]any{"error": nil}, true},
		{"EVENT", map[string]any{"kind": nil}, false},
		{"EVENT", map[string]any{"galaxies": map[string]any{"~nec": "127.0.0.1:13338"}}, true},
		{"RECV", nil, false},
		{"EVENT", map[string]any{"from": "x"}, false},
	} {
		if got := l.Match(c.word, c.want); got != c.ok {
			t.Errorf("Match(%q, %v) = %v, want %v", c.word, c.want, got, c.ok)
		}
	}
	if l := ParseLine("not json"); l.Word != "not" || l.Fields != nil || l.Raw != "not json" {
		t.Errorf("bad line parsed as %+v", l)
	}
}

func TestExitName(t *testing.T) {
	for code, want := range map[int]string{0: "goal met", 3: "could not start", 134: "aborted (SIGABRT)", 137: "killed by signal 9 (killed)", -1: "not exited"} {
		if got := ExitName(code); got != want {
			t.Errorf("ExitName(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestShipReadyAndStop runs vere's drivers as ~nec on a free port, waits for
// READY, stops it with SIGTERM and checks its END line and exit status.
func TestShipReadyAndStop(t *testing.T) {
	var p *Proc
	var port int
	for try := 0; ; try++ {
		port = FreeUDPPort(t)
		p = Start(t, "ship", "~nec", strconv.Itoa(port), "--time-limit", "20")
		if _, ok := p.Next("READY", nil, 10*time.Second); ok {
			break
		}
		if code, _ := p.Wait(); code != ExitStart || try == 4 {
			t.Fatalf("%s: no READY (%s)\n%s", p.Name(), p.State(), p.Tail(20))
		}
	}
	if l := p.All("READY", nil)[0]; l.Str("ship") != "~nec" {
		t.Errorf("READY %s", l)
	}
	if _, ok := p.Next("READY", nil, 50*time.Millisecond); ok {
		t.Errorf("Next returned the READY line twice")
	}
	code, crashed := p.Stop()
	if code != ExitOK || crashed {
		t.Errorf("stopped: exit %d crashed %v", code, crashed)
	}
	end := p.MustNext("END", nil, time.Second)
	if end.Str("reason") != "signal" {
		t.Errorf("END %s", end)
	}
	if p.Alive() || p.Crashed() {
		t.Errorf("after Stop: alive %v crashed %v", p.Alive(), p.Crashed())
	}
}

func TestBuildRelayOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the relay")
	}
	a := BuildRelay(t)
	if b := BuildRelay(t); a != b {
		t.Fatalf("built twice: %s, %s", a, b)
	}
}

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestStartInNetns runs a vere ~nec on its galaxy port 13338 inside a fresh
// network namespace, and a peek for its page from the same namespace: the
// port is the namespace's own, so no other test's use of it matters. It
// needs root and iproute2, and skips without them.
func TestStartInNetns(t *testing.T) {
	Find(t)
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2)")
	}
	ns := fmt.Sprintf("vtooltest-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v %s", err, out)
	}
	ship := StartIn(t, ns, "ship", "~nec", "0", "--time-limit", "20")
	ready := ship.MustNext("READY", nil, 10*time.Second)
	if port, _ := ready.Num("port"); port != 13338 {
		t.Fatalf("READY %s; want ~nec's galaxy port 13338", ready)
	}
	p := StartIn(t, ns, "peek", "~nec", "/c/x/4/hello", "127.0.0.1:13338", "--time-limit", "5")
	if code, crashed := p.Wait(); code != ExitOK || crashed {
		t.Fatalf("peek in %s: exit %d (%s)\n%s", ns, code, ExitName(code), p.Tail(10))
	}
	ship.MustNext("RECV", map[string]any{"type": "peek", "path": "/c/x/4/hello"}, 5*time.Second)
}

// TestAcceptRefusesOtherSenders runs ~nec with --accept ~bud@127.0.0.1:PORT:
// ~bud's poke from that port is acked; the same poke from another port, and
// ~wes's from the accepted port, are refused (an ARVO refuse line, no ack).
func TestAcceptRefusesOtherSenders(t *testing.T) {
	Require(t, FeatureAccept)
	port, from, other := FreeUDPPort(t), FreeUDPPort(t), FreeUDPPort(t)
	ship := Start(t, "ship", "~nec", strconv.Itoa(port), "--accept", "~bud@127.0.0.1:"+strconv.Itoa(from), "--time-limit", "20")
	ship.MustNext("READY", nil, 10*time.Second)
	to := "127.0.0.1:" + strconv.Itoa(port)
	for _, c := range []struct {
		sndr string
		from int
		want int
	}{{"~bud", from, ExitOK}, {"~bud", other, ExitTimeLimit}, {"~wes", from, ExitTimeLimit}} {
		p := Start(t, "poke", "~nec", c.sndr, to, "--from", strconv.Itoa(c.from), "--retry", "0", "--time-limit", "2")
		if code, crashed := p.Wait(); code != c.want || crashed {
			t.Errorf("poke from %s at port %d: exit %d (%s), want %d\n%s", c.sndr, c.from, code, ExitName(code), c.want, p.Tail(5))
		}
		if c.want != ExitOK {
			ship.MustNext("ARVO", map[string]any{"kind": "refuse", "ship": c.sndr, "lane": "127.0.0.1:" + strconv.Itoa(c.from)}, 5*time.Second)
		}
	}
	if n := len(ship.All("ARVO", map[string]any{"kind": "push"})); n != 1 {
		t.Errorf("%d acks pushed, want 1", n)
	}
}
