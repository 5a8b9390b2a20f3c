package interop

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/scry"
)

// TestProbeProvesAVereRequester: the amplification budget's return
// routability works with stock vere unchanged. A relay core sends pages to
// vere's lane (as if vere had asked), which makes it probe that lane with
// a STUN binding request; vere's driver answers it, as it answers any
// binding request (io/ames.c _ames_hear), and the answer, from vere's lane
// with the probe's transaction id, proves the lane: relay_lanes_proven
// counts it.
func TestProbeProvesAVereRequester(t *testing.T) {
	ship, port := startShip(t) // vere, here the requester
	vereLane := loopback(port)
	pub := udpSocket(t)  // the relay's ship, which answers its pages
	sock := udpSocket(t) // the relay's socket
	r, err := relay.New(relay.Config{
		Ship:     lane.ShipFromUint64(0x100), // ~marzod, a star
		ShipLane: laneOf(pub),
		Self:     []netip.AddrPort{laneOf(sock)},
		HintNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Amp:      amp.Config{ProbeAfter: 1}, // probe at the first page
	})
	if err != nil {
		t.Fatal(err)
	}
	out := r.NewReader(4)
	now := time.Second
	decide := func(b []byte, from netip.AddrPort) {
		buf := make([]byte, len(b), len(b)+relay.GrowRoom)
		copy(buf, b)
		out.Reset()
		r.Handle(buf, from, now, out)
	}
	name := scry.Name{Ship: lane.ShipFromUint64(0x100), Bloq: scry.DefaultBloq, Path: []byte("probe/me")}
	peekWire := scry.NewPeek(name)
	decide(peekWire.Append(nil), vereLane)
	page := scry.NewPage(name, scry.Data{Total: 5, AuthKind: scry.AuthNone, Frag: []byte("hello")})
	decide(page.Append(nil), laneOf(pub))
	probes := 0
	for _, m := range out.Sends {
		if m.Addr != vereLane {
			t.Fatalf("a send to %v, want only vere's lane", m.Addr)
		}
		if scry.IsSTUN(m.Buf[:m.N]) {
			probes++
		}
		if _, err := sock.WriteToUDPAddrPort(m.Buf[:m.N], m.Addr); err != nil {
			t.Fatal(err)
		}
	}
	if probes != 1 || len(out.Sends) != 2 {
		t.Fatalf("%d sends, %d probes: want the page and one probe", len(out.Sends), probes)
	}
	ship.MustNext("SEND", map[string]any{"proto": "stun", "type": "response"}, probeTimeout)
	buf := make([]byte, 2048)
	sock.SetReadDeadline(time.Now().Add(probeTimeout))
	for {
		n, from, err := sock.ReadFromUDPAddrPort(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("no STUN answer from vere\n%s", ship.Tail(20))
		}
		if err != nil {
			t.Fatal(err)
		}
		if from != vereLane {
			continue
		}
		decide(buf[:n], lane.Canon(from))
		break
	}
	if n := r.Counters().Snapshot().Events[relay.EventLanesProven]; n != 1 {
		t.Fatalf("lanes proven %d, want 1 (vere's answer not taken)", n)
	}
}

// laneOf returns c's local lane.
func laneOf(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }
