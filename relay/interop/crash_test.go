package interop

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/harness/vtool"
)

// crashTimeout bounds how long vere takes to die of a datagram it has read.
const crashTimeout = 5 * time.Second

// shortRelayed reports whether vere's legacy ames path aborts on b, as
// ../shared/reference/ames/README.md says ("Crash on 4-9 byte datagrams"):
// 4 to 9 bytes, not mesa (bytes 4-7 the cookie, 8 bytes or more), version 0
// and the relayed bit set (bit 31 = 0). vere computes the mug range as the
// length minus 10, unsigned, and reads far past the datagram.
func shortRelayed(b []byte) bool {
	if len(b) < 4 || len(b) > 9 {
		return false
	}
	if len(b) >= 8 && b[4] == 0x00 && b[5] == 0x02 && b[6] == 0xe0 && b[7] == 0x67 {
		return false
	}
	w := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	return w>>31 == 0 && (w>>4)&7 == 0
}

// reservedType reports whether b is a mesa packet of type 0 (reserved), as
// mesa-quirks.jsonl's type-resv-empty vectors are. vere's parser accepts one
// with an empty body, and _mesa_hear's switch hands it, as its default case,
// to _mesa_hear_poke: a poke whose name and payload name were never parsed,
// so they are what the per-packet arena (reset, not cleared, for every
// datagram) holds from earlier packets. Most often vere survives; now and
// then, after enough traffic, it reads a stale pointer and aborts ("loom:
// external fault", SIGABRT). The reference does not record this: its
// vectors were judged by the codec alone.
func reservedType(b []byte) bool {
	return len(b) >= 8 && b[4] == 0x00 && b[5] == 0x02 && b[6] == 0xe0 && b[7] == 0x67 && (b[0]>>7|b[1]<<1)&3 == 0
}

// TestVereCrashesOnShortRelayedAmes documents vere's behaviour, the reason
// the relay must drop such datagrams: each reference vector vere aborts on
// (shortRelayed: ames-malformed.jsonl ids 10, 15 and 20), sent straight to a
// vere ship with no relay, kills it (SIGABRT, exit 134, no END line) after it
// printed the datagram's RECV. Beside them, each other 4-9 byte vector
// leaves it alive, answering a peek.
func TestVereCrashesOnShortRelayedAmes(t *testing.T) {
	var crashers, others []vector
	for _, v := range loadVectors(t) {
		switch {
		case shortRelayed(v.Bytes):
			crashers = append(crashers, v)
		case len(v.Bytes) >= 4 && len(v.Bytes) <= 9:
			others = append(others, v)
		}
	}
	want := map[string]bool{"ames-malformed.jsonl 10": true, "ames-malformed.jsonl 15": true, "ames-malformed.jsonl 20": true}
	for _, v := range crashers {
		delete(want, fmt.Sprintf("%s %d", v.File, v.ID))
		if v.Verdict != "crash" {
			t.Errorf("%v: the reference's verdict is %q, not crash", v, v.Verdict)
		}
	}
	if len(want) != 0 {
		t.Errorf("the reference's crash vectors %v are not short relayed datagrams", want)
	}

	for _, v := range crashers {
		t.Run(fmt.Sprintf("%s/%d", v.File, v.ID), func(t *testing.T) {
			t.Parallel()
			ship, port := startShip(t)
			c := udpSocket(t)
			if _, err := c.WriteToUDPAddrPort(v.Bytes, loopback(port)); err != nil {
				t.Fatal(err)
			}
			code, crashed, ok := ship.WaitTimeout(crashTimeout)
			if !ok {
				t.Fatalf("%v: vere still alive %v after it\n%s", v, crashTimeout, ship.Tail(10))
			}
			if !crashed || code != vtool.ExitAbort {
				t.Fatalf("%v: vere exited %d (%s), crashed %v; want the abort, exit 134 with no END", v, code, vtool.ExitName(code), crashed)
			}
			if len(ship.All("RECV", map[string]any{"bytes": len(v.Bytes), "proto": "ames"})) != 1 {
				t.Errorf("%v: no RECV line for it before the crash\n%s", v, ship.Tail(10))
			}
			t.Logf("%v: vere read it and aborted (exit %d, no END line)", v, code)
		})
	}
	// Every vector straight to vere, each followed by a peek (sweep): the
	// short relayed ones kill it, and nothing else does but, at times, a
	// mesa packet of the reserved type 0 (reservedType).
	t.Run("sweep", func(t *testing.T) {
		t.Parallel()
		res := sweep(t, loadVectors(t), true)
		var short, resv []string
		for _, k := range res.killed {
			id := fmt.Sprintf("%s %d", k.v.File, k.v.ID)
			switch {
			case !strings.HasPrefix(k.how, "crashed: exit 134"):
				t.Errorf("%v left vere %s; want the abort or nothing", k.v, k.how)
			case shortRelayed(k.v.Bytes):
				short = append(short, id)
			case reservedType(k.v.Bytes):
				resv = append(resv, id)
			default:
				t.Errorf("%v crashed vere, which the reference does not say", k.v)
			}
		}
		if w := "ames-malformed.jsonl 10, ames-malformed.jsonl 15, ames-malformed.jsonl 20"; strings.Join(short, ", ") != w {
			t.Errorf("straight to vere, the short relayed vectors that kill it are [%s]; want [%s]", strings.Join(short, ", "), w)
		}
		t.Logf("straight to vere: killed by [%s], and by the reserved-type packets [%s]; read by file (reached/sent): %s",
			strings.Join(short, ", "), strings.Join(resv, ", "), res.summary())
	})
	t.Run("others", func(t *testing.T) {
		t.Parallel()
		ship, port := startShip(t)
		c := udpSocket(t)
		for _, v := range others {
			if _, err := c.WriteToUDPAddrPort(v.Bytes, loopback(port)); err != nil {
				t.Fatal(err)
			}
		}
		probe(t, ship, loopback(port), "interop/others")
		t.Logf("vere alive after the %d other 4-9 byte vectors", len(others))
	})
}
