package relay_test

// Issue 28's row "200 ships behind one NAT wait on one name; 2,000 forged
// one-datagram peeks for it": a full entry is shared max-min fairly by
// source, and each forged peek, from an address of its own, counted as a
// source as real as the NAT's, so the flood levelled the NAT down to one
// requester: 1/200 of its ships got the page. A requester now counts as
// receiving once its lane answered a STUN probe of the relay's (amp.Config's
// proofs): a full entry probes the newcomers it refuses, a proven one asks
// again as such (pit.AddProven) and takes a one-shot requester's place,
// and no one-shot newcomer displaces a proven requester. The twins: 500
// askers of one name, each its own address, all answered (with the flood
// and without), and the NAT's 200 with no flood.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/scry"
)

// natPublic is the one public address of the NAT the 200 ships are behind.
var natPublic = netip.MustParseAddr("203.0.113.200")

// natShip is the lane of the i-th ship behind the NAT.
func natShip(i int) netip.AddrPort { return netip.AddrPortFrom(natPublic, uint16(20000+i)) }

// askerLane is the lane of the i-th of the 500 askers, each its own
// address.
func askerLane(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}), 31337)
}

// forgedLane is the i-th forged source, each its own address: the
// attacker never sees what is sent there.
func forgedLane(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 4000)
}

// stunAnswerer answers, from the lanes in it, every binding request the
// relay sends them, as vere's driver does for any ship; the others (forged
// lanes) never answer.
type stunAnswerer struct {
	f       *fixture
	live    map[netip.AddrPort]bool
	pending []send
	probed  int
}

func (a *stunAnswerer) handle(pkt []byte, from netip.AddrPort) []send {
	sends := a.f.handle(pkt, from)
	for _, s := range sends {
		if a.live[s.To] && scry.IsSTUN(s.Buf) {
			a.pending = append(a.pending, s)
		}
	}
	return sends
}

// answer delivers the answers to the probes seen since the last call,
// one round trip later.
func (a *stunAnswerer) answer(t *testing.T) {
	t.Helper()
	a.f.now += 20 * time.Millisecond
	for _, s := range a.pending {
		var q scry.STUNRequest
		if q.Parse(s.Buf) != nil {
			continue
		}
		r := scry.STUNResponse{TxID: q.TxID, Mapped: s.To}
		a.f.handle(r.Append(nil), s.To)
		a.probed++
	}
	a.pending = a.pending[:0]
}

// heldRounds is how many times the askers ask again, a second apart,
// before the page comes. A forged lane's probe holds its slot of the proof
// table for a ProbeInterval (1 s), so an asker whose lane's two slots both
// hold one is probed a round later: two rounds proved and rejoined all in
// every seed tried; three for a margin.
const heldRounds = 3

// heldAsk runs one waiting-on-a-held-name scene: the askers ask for one
// name of ~nec (a held one: the page comes seconds later), forged
// one-shot peeks for it arrive (half before the askers' first
// retransmission, half after), the askers ask again once a second as ames
// does, answering the relay's probes, and the page comes after heldRounds
// seconds. It returns how many askers got the page.
func heldAsk(t *testing.T, askers []netip.AddrPort, forged int) (reached int, a *stunAnswerer) {
	t.Helper()
	f := newFixture(t, nil)
	a = &stunAnswerer{f: f, live: map[netip.AddrPort]bool{}}
	for _, q := range askers {
		a.live[q] = true
	}
	const path = "held/sub"
	pkt := peek(t, "~nec", path, 0)
	for _, q := range askers {
		a.handle(pkt, q)
		f.now += 100 * time.Microsecond
	}
	sent := 0
	flood := func(n int) {
		for ; n > 0; n-- {
			a.handle(pkt, forgedLane(sent))
			sent++
			f.now += 50 * time.Microsecond
		}
	}
	flood(forged / 2)
	for round := 0; round < heldRounds; round++ {
		f.now += time.Second
		for _, q := range askers {
			a.handle(pkt, q)
			f.now += 100 * time.Microsecond
		}
		a.answer(t)
		if round == 0 {
			flood(forged - forged/2)
		}
	}
	got := map[netip.AddrPort]int{}
	for _, s := range f.handle(page(t, "~nec", path, 0, netip.AddrPort{}), necLane) {
		got[s.To]++
	}
	for _, q := range askers {
		if got[q] == 1 {
			reached++
		}
	}
	return reached, a
}

// TestNATShipsBeatForgedOneShotPeeks is the row: 200 ships behind one NAT
// wait on one name, and 2,000 forged one-datagram peeks for it arrive.
// All 200 get the page; the twin, with no flood, likewise.
func TestNATShipsBeatForgedOneShotPeeks(t *testing.T) {
	ships := make([]netip.AddrPort, 200)
	for i := range ships {
		ships[i] = natShip(i)
	}
	for _, forged := range []int{0, 2000} {
		reached, a := heldAsk(t, ships, forged)
		st := a.f.r.Pending().Stats()
		t.Logf("200 NAT ships, %d forged one-shot peeks: %d/200 got the page (%d probes answered; pending: %d displaced, %d refused for the entry share)",
			forged, reached, a.probed, st.Displaced, st.EntryShareCapped)
		if reached != len(ships) {
			t.Errorf("%d forged peeks: %d/%d of the NAT's ships got the page; want all", forged, reached, len(ships))
		}
	}
}

// TestFiveHundredAskersAllAnswered is the twin "500 askers of one name all
// answered": 500 askers, each its own address, with and without the
// forged flood.
func TestFiveHundredAskersAllAnswered(t *testing.T) {
	askers := make([]netip.AddrPort, 500)
	for i := range askers {
		askers[i] = askerLane(i)
	}
	for _, forged := range []int{0, 2000} {
		reached, _ := heldAsk(t, askers, forged)
		t.Logf("500 askers, %d forged one-shot peeks: %d/500 got the page", forged, reached)
		if reached != len(askers) {
			t.Errorf("%d forged peeks: %d/%d askers got the page; want all", forged, reached, len(askers))
		}
	}
}

// TestProvenAskersOutlastAForgedFlood: once the NAT's ships are proven and
// on the entry, a flood of forged one-shot peeks ten times as long
// displaces none of them, and the flood's refused lanes are probed at most
// once a ProbeInterval each (28 bytes for each forged peek of 60-odd: the
// probes reflect less than the attacker sends).
func TestProvenAskersOutlastAForgedFlood(t *testing.T) {
	ships := make([]netip.AddrPort, 200)
	for i := range ships {
		ships[i] = natShip(i)
	}
	reached, a := heldAsk(t, ships, 2000)
	if reached != len(ships) {
		t.Fatalf("%d/200 reached before the long flood", reached)
	}
	f := a.f
	const path = "held/again"
	pkt := peek(t, "~nec", path, 0)
	for _, q := range ships {
		a.handle(pkt, q)
	}
	// The ships' lanes are proven, but they joined this entry as one-shot
	// requesters: their next ask marks them (a full entry's refusal).
	flood, probeBytes, floodBytes := 20_000, 0, 0
	for i := 0; i < flood; i++ {
		if i == 1000 {
			f.now += time.Second
			for _, q := range ships {
				a.handle(pkt, q)
			}
		}
		for _, s := range a.handle(pkt, forgedLane(10_000+i%5000)) {
			if scry.IsSTUN(s.Buf) {
				probeBytes += len(s.Buf)
			}
		}
		floodBytes += len(pkt)
		f.now += 100 * time.Microsecond
	}
	got := map[netip.AddrPort]int{}
	for _, s := range f.handle(page(t, "~nec", path, 0, netip.AddrPort{}), necLane) {
		got[s.To]++
	}
	n := 0
	for _, q := range ships {
		n += got[q]
	}
	t.Logf("after %d forged peeks from 5,000 lanes: %d/200 NAT ships got the page; %d probe bytes for the flood's %d", flood, n, probeBytes, floodBytes)
	if n != len(ships) {
		t.Errorf("%d/200 NAT ships got the page after the flood", n)
	}
	if probeBytes >= floodBytes {
		t.Errorf("the probes reflected %d bytes for the flood's %d", probeBytes, floodBytes)
	}
}
