package interop

import (
	"strconv"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

// eventTimeout bounds the wait for a line vere prints about a datagram
// that has already been answered or sent.
const eventTimeout = 5 * time.Second

// runFrom runs a vtool mode that sends (peek, poke, send) from a free port
// on 127.0.0.1 (--from), retrying with another port when the bind fails, and
// returns it exited, with the lane it sent from.
func runFrom(t *testing.T, args ...string) (*vtool.Proc, string) {
	t.Helper()
	for try := 1; ; try++ {
		port := strconv.Itoa(vtool.FreeUDPPort(t))
		p := vtool.Start(t, append(args, "--from", port)...)
		if code, _ := p.Wait(); code != vtool.ExitStart || try == portTries {
			return p, "127.0.0.1:" + port
		}
	}
}

// TestVereShipBehindRelayAnswersPeek runs today's deployment: a vere galaxy
// (~nec) behind `relay run --ship ~nec --ship-lane`. A peek for ~nec's page
// sent to the relay is answered by vere through the relay; then a poke and a
// legacy ames packet for ~nec go the same way. vere's lines show the limit of
// --ship-lane mode: it reads every one of them from the relay's lane, and
// its EVENT lines give arvo the relay's lane as the source, never the
// requester's, so arvo can learn no sender's real lane from them.
func TestVereShipBehindRelayAnswersPeek(t *testing.T) {
	f := startFronted(t)
	relay := f.relay.Listen.String()

	// The peek: answered with vere's page, through the relay.
	p, from := runFrom(t, "peek", "~nec", "/c/x/4/hello", relay, "--time-limit", "5")
	if code, crashed := p.Wait(); code != vtool.ExitOK || crashed {
		t.Fatalf("vtool peek ~nec /c/x/4/hello %s: exit %d (%s)", relay, code, vtool.ExitName(code))
	}
	page := p.MustNext("RECV", map[string]any{"type": "page", "path": "/c/x/4/hello"}, time.Second)
	if page.Str("from") != relay || page.Str("data") != "hello" {
		t.Errorf("the page came as %s; want from the relay %s, data hello", page, relay)
	}
	recv := f.ship.MustNext("RECV", map[string]any{"type": "peek", "path": "/c/x/4/hello"}, eventTimeout)
	if recv.Str("from") != relay {
		t.Errorf("vere read the peek from %s; want the relay's lane %s (the requester is %s)", recv.Str("from"), relay, from)
	}
	f.ship.MustNext("SCRY", map[string]any{"path": "/ax/mess/~nec/c/x/4/hello", "answer": "page"}, eventTimeout)
	sent := f.ship.MustNext("SEND", map[string]any{"type": "page", "path": "/c/x/4/hello"}, eventTimeout)
	if sent.Str("to") != relay {
		t.Errorf("vere sent its page to %s; want the relay %s", sent.Str("to"), relay)
	}
	t.Logf("peek from %s: vere read it from %s and answered %s", from, recv.Str("from"), sent.Str("to"))

	// A poke (the %ping app's): acked through the relay; arvo hears it from
	// the relay's lane.
	p, from = runFrom(t, "poke", "~nec", "~milrys-soglec", relay, "--time-limit", "5")
	if code, crashed := p.Wait(); code != vtool.ExitOK || crashed {
		t.Fatalf("vtool poke ~nec ~milrys-soglec %s: exit %d (%s)", relay, code, vtool.ExitName(code))
	}
	ev := f.ship.MustNext("EVENT", map[string]any{"kind": "heer", "type": "poke", "payload_ship": "~milrys-soglec"}, eventTimeout)
	if ev.Str("lane") != relay || ev.Str("lane") == from {
		t.Errorf("vere gave arvo the poke from %s as %s; want the relay's lane %s", from, ev, relay)
	}
	if hops, _ := ev.Num("hops"); hops != 0 {
		t.Errorf("the poke reached vere at hop %v; want 0 (as if the relay were the sender)", hops)
	}
	t.Logf("poke from %s: arvo told lane %s", from, ev.Str("lane"))

	// A legacy ames packet, ames-vectors.jsonl id 0 (~fipnev to ~nec): vere
	// reports it from the relay's lane, with no origin.
	p, from = runFrom(t, "send", relay, "0420149830feff0100", "--time-limit", "1")
	if code, _ := p.Wait(); code != vtool.ExitTimeLimit {
		t.Errorf("vtool send: exit %d (%s); want 1, nothing answers an ames packet", code, vtool.ExitName(code))
	}
	ev = f.ship.MustNext("EVENT", map[string]any{"kind": "hear", "sender": "~fipnev", "receiver": "~nec"}, eventTimeout)
	if ev.Str("lane") != relay || ev.Str("lane") == from {
		t.Errorf("vere gave arvo the ames packet from %s as %s; want the relay's lane %s", from, ev, relay)
	}
	if o := ev.Str("origin"); o != "" {
		t.Errorf("the ames packet reached vere with origin %s; today the relay forwards it unchanged", o)
	}
	t.Logf("ames from %s: arvo told lane %s, origin %q", from, ev.Str("lane"), ev.Str("origin"))

	// Every event vere gave arvo about the three requesters named the relay.
	for _, l := range f.ship.All("EVENT", nil) {
		if lane := l.Str("lane"); lane != "" && lane != relay {
			t.Errorf("vere attributed %s to a lane other than the relay's", l)
		}
	}
	if code, crashed := f.ship.Stop(); code != vtool.ExitOK || crashed {
		t.Errorf("vere stopped with exit %d, crashed %v", code, crashed)
	}
}
