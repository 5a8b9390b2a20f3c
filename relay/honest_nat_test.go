package relay_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/pit"
)

// Users behind one NAT are users (issue 20): a carrier-grade NAT puts
// hundreds of ships behind one address, each its own lane (a port of it).
// The pending table records every requester of a name while the entry has
// room, whatever its source, and shares a full entry max-min fairly by
// source (pit.Config.MaxRequestersPerEntry). These tests run the relay's
// decision core with the default config, synthetic from-addresses and time
// passed in; each party is in its own /16.

// natAddr is the carrier-grade NAT's one public address.
var natAddr = netip.MustParseAddr("192.0.2.77")

// TestHonestNATAllAnswered: 200 ships behind one address all peek one name
// the publisher holds (a subscription none has an answer for yet), over
// two seconds; then the page arrives, and each of the 200 gets it once.
// With a fixed per-source share of an entry (48 of 64) 48 were answered.
func TestHonestNATAllAnswered(t *testing.T) {
	f := newFixture(t, nil)
	const ships = 200
	lanes := make([]netip.AddrPort, ships)
	for i := range lanes {
		lanes[i] = netip.AddrPortFrom(natAddr, uint16(30000+i))
	}
	path := "notify/held/nat"
	pkt := peek(t, "~nec", path, 0)
	forwards := 0
	for _, l := range lanes {
		for _, s := range f.handle(pkt, l) {
			if s.To != necLane {
				t.Fatalf("a peek from %v went to %v", l, s.To)
			}
			forwards++
		}
		f.now += 10 * time.Millisecond
	}
	// The page comes while the last ones still wait (within the TTL).
	f.now += time.Second
	got := map[netip.AddrPort]int{}
	for _, s := range f.handle(page(t, "~nec", path, 0, netip.AddrPort{}), necLane) {
		got[s.To]++
	}
	answered := 0
	for _, l := range lanes {
		if got[l] == 1 {
			answered++
		}
	}
	st := f.r.Pending().Stats()
	t.Logf("%d ships behind %v peek one held name: %d forwarded upstream, %d answered; requesters refused %d",
		ships, natAddr, forwards, answered, st.RequesterCapped)
	if answered != ships || len(got) != ships {
		t.Errorf("the page reached %d of the %d ships (%d lanes in all)", answered, ships, len(got))
	}
	if st.RequesterCapped != 0 || st.Displaced != 0 {
		t.Errorf("requesters refused %d, displaced %d; want none", st.RequesterCapped, st.Displaced)
	}
}

// TestHonestNATBesideFlood is the other half of the rule at the relay: one
// host on 10,000 ports floods the name that 200 ships behind a NAT and six
// single hosts wait on, some asking before the entry is full and some
// after. The flood fills what is free and no more; everyone else gets the
// page: the NAT's 200 (fewer than the flood's share, so each displaces one
// of its requesters) and the six.
func TestHonestNATBesideFlood(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) { c.Pending.Seed = fairSeed })
	const ports, ships = 10_000, 200
	flooder := netip.MustParseAddr("198.18.0.66")
	var honest []netip.AddrPort
	for i := range ships {
		honest = append(honest, netip.AddrPortFrom(natAddr, uint16(30000+i)))
	}
	for i := range 6 {
		// Six hosts, each in its own /16.
		honest = append(honest, netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, byte(10 + i), 113, 9}), 31337))
	}
	path := "notify/held/flooded"
	pkt := peek(t, "~nec", path, 0)
	step := time.Second / ports
	next := 0
	for p := range ports {
		f.handle(pkt, netip.AddrPortFrom(flooder, uint16(20000+p)))
		f.now += step
		// An honest requester every 48 flood packets: about ten before
		// the entry is full (512 requesters), the rest after.
		if p%48 == 0 && next < len(honest) {
			f.handle(pkt, honest[next])
			next++
		}
	}
	for ; next < len(honest); next++ {
		f.handle(pkt, honest[next])
	}
	st := f.r.Pending().Stats()
	got := map[netip.AddrPort]int{}
	for _, s := range f.handle(page(t, "~nec", path, 0, netip.AddrPort{}), necLane) {
		got[s.To]++
	}
	answered, flood := 0, 0
	for _, l := range honest {
		if got[l] == 1 {
			answered++
		}
	}
	for l := range got {
		if l.Addr() == flooder {
			flood++
		}
	}
	t.Logf("%d peeks from one host beside %d honest requesters: %d answered, the flood %d; displaced %d, refused for the entry's share %d",
		ports, len(honest), answered, flood, st.Displaced, st.EntryShareCapped)
	if answered != len(honest) {
		t.Errorf("the page reached %d of %d honest requesters", answered, len(honest))
	}
	if want := pit.DefaultMaxRequestersPerEntry - len(honest); flood != want {
		t.Errorf("the flood got %d pages, want what is left of the entry, %d", flood, want)
	}
	if st.Displaced == 0 || st.EntryShareCapped == 0 {
		t.Errorf("displaced %d, refused %d: the flood never filled the entry", st.Displaced, st.EntryShareCapped)
	}
}
