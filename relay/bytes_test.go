package relay_test

import (
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// byteStep is one datagram decided, and the kinds its bytes are counted
// under: in for the datagram read, out for what was sent (none when
// nothing is expected out). ship: the datagram came from the fronted ship
// (HandleFromShip), whose sends are counted in FromShipSentBytes.
type byteStep struct {
	name    string
	pkt     []byte
	from    netip.AddrPort
	ship    bool
	in, out relay.Kind
	sends   int // datagrams expected out
}

// checkBytes decides each step on f and checks that the byte counters
// grew by exactly the bytes read (under the step's in kind) and the bytes
// decided to be sent, as sent (under its out kind); no other kind's
// counters move.
func checkBytes(t *testing.T, f *fixture, steps []byteStep) {
	t.Helper()
	for _, st := range steps {
		before := f.snap()
		var sends []send
		if st.ship {
			sends = f.decide(st.pkt, func(b []byte) { f.r.HandleFromShip(b, st.from, f.now, f.out) })
		} else {
			sends = f.handle(st.pkt, st.from)
		}
		after := f.snap()
		if len(sends) != st.sends {
			t.Fatalf("%s: %d sends, want %d", st.name, len(sends), st.sends)
		}
		sent := 0
		for _, s := range sends {
			sent += len(s.Buf)
		}
		for _, k := range relay.Kinds() {
			wantIn, wantOut := uint64(0), uint64(0)
			if k == st.in && !st.ship {
				wantIn = uint64(len(st.pkt))
			}
			if k == st.out && !st.ship {
				wantOut = uint64(sent)
			}
			if d := after.InBytes[k] - before.InBytes[k]; d != wantIn {
				t.Errorf("%s: InBytes[%s] grew %d, want %d", st.name, k, d, wantIn)
			}
			if d := after.OutBytes[k] - before.OutBytes[k]; d != wantOut {
				t.Errorf("%s: OutBytes[%s] grew %d, want %d", st.name, k, d, wantOut)
			}
		}
		wantShip := uint64(0)
		if st.ship {
			wantShip = uint64(sent)
		}
		if d := after.FromShipSentBytes - before.FromShipSentBytes; d != wantShip {
			t.Errorf("%s: FromShipSentBytes grew %d, want %d", st.name, d, wantShip)
		}
	}
}

// TestByteCounters: every datagram's bytes are counted by kind as read,
// and what is sent is counted as sent, grown by a next-hop or an origin,
// once per copy.
func TestByteCounters(t *testing.T) {
	f := newFixture(t, nil)
	const none = relay.KindOther
	a := scry.NewAmes(ship(t, "~sampel-palnet"), ship(t, "~nec"), 1, 2, []byte{1, 2, 3})
	ames := a.Append(nil)
	checkBytes(t, f, []byteStep{
		{name: "peek forwarded", pkt: peek(t, "~nec", "a", 0), from: alice, in: relay.KindPeek, out: relay.KindPeek, sends: 1},
		{name: "peek aggregated", pkt: peek(t, "~nec", "a", 0), from: bob, in: relay.KindPeek, out: none},
		// Answered to alice and bob, each copy with a next-hop added.
		{name: "page answered twice", pkt: page(t, "~nec", "a", 0, netip.AddrPort{}), from: necLane, in: relay.KindPage, out: relay.KindPage, sends: 2},
		{name: "page unsolicited", pkt: page(t, "~nec", "a", 0, netip.AddrPort{}), from: necLane, in: relay.KindPage, out: none},
		{name: "poke forwarded", pkt: poke(t, "~sampel-palnet", "~nec", "p"), from: alice, in: relay.KindPoke, out: relay.KindPoke, sends: 1},
		{name: "stun answered", pkt: stunRequest(7), from: alice, in: relay.KindSTUN, out: relay.KindSTUN, sends: 1},
		{name: "ames with origin", pkt: ames, from: alice, in: relay.KindAmes, out: relay.KindAmes, sends: 1},
		{name: "garbage", pkt: []byte{1, 2, 3}, from: alice, in: relay.KindOther, out: none},
	})
	sn := f.snap()
	// The sums, by hand: what was sent is longer than what was read by
	// the next-hops (2 pages) and the origin (6 bytes).
	if sn.OutBytes[relay.KindAmes] != uint64(len(ames)+6) {
		t.Errorf("ames out %d bytes, want %d", sn.OutBytes[relay.KindAmes], len(ames)+6)
	}
	// Two pages of one length read, two sent, each with a next-hop.
	if sn.OutBytes[relay.KindPage] <= sn.InBytes[relay.KindPage] {
		t.Errorf("pages out %d bytes, no more than the %d read", sn.OutBytes[relay.KindPage], sn.InBytes[relay.KindPage])
	}
	if sn.OutBytes[relay.KindSTUN] != 40 || sn.InBytes[relay.KindSTUN] != 28 {
		t.Errorf("stun %d in, %d out; want 28 and 40", sn.InBytes[relay.KindSTUN], sn.OutBytes[relay.KindSTUN])
	}

	// Fronting mode: a request handed to the ship counts as sent (Out),
	// the ship's own datagrams in FromShipSentBytes.
	f = newFixture(t, func(c *relay.Config) { c.Front, c.ShipLane, c.PublicLane = true, frontShipLane, selfLane })
	checkBytes(t, f, []byteStep{
		{name: "peek to the ship", pkt: peek(t, "~marzod", "x", 0), from: alice, in: relay.KindPeek, out: relay.KindPeek, sends: 1},
		{name: "the ship's page", pkt: page(t, "~marzod", "x", 0, netip.AddrPort{}), from: alice, ship: true, sends: 1},
	})
	var total relay.Snapshot
	total.Add(&sn)
	total.Add(&sn)
	if total.OutBytes[relay.KindAmes] != 2*sn.OutBytes[relay.KindAmes] || total.InBytes[relay.KindSTUN] != 56 {
		t.Errorf("Snapshot.Add does not add bytes: %+v", total)
	}
	fs := f.snap()
	total.Add(&fs)
	if total.FromShipSentBytes != fs.FromShipSentBytes || fs.FromShipSentBytes == 0 {
		t.Errorf("Snapshot.Add: FromShipSentBytes %d, want %d", total.FromShipSentBytes, fs.FromShipSentBytes)
	}
}
