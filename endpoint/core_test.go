package endpoint

import (
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

var (
	aLane = netip.MustParseAddrPort("192.0.2.1:1000")
	bLane = netip.MustParseAddrPort("192.0.2.2:2000")
	gLane = netip.MustParseAddrPort("192.0.2.9:13337")
)

func mustShip(t *testing.T, s string) lane.Ship {
	t.Helper()
	v, err := lane.ParseShip(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// pair is two cores, a requester (~sampel-palnet) and a publisher (~nec, a
// galaxy, so it never pings), that reach each other directly.
func pair(t *testing.T) (a, b *Core, bShip lane.Ship) {
	t.Helper()
	bShip = mustShip(t, "~nec")
	a, err := NewCore(Config{Ship: mustShip(t, "~sampel-palnet"), PingInterval: -1,
		Lanes: map[lane.Ship]netip.AddrPort{bShip: bLane}}, aLane)
	if err != nil {
		t.Fatal(err)
	}
	b, err = NewCore(Config{Ship: bShip}, bLane)
	if err != nil {
		t.Fatal(err)
	}
	return a, b, bShip
}

// deliver hands each datagram addressed to `to` to core, as heard from
// `from`, and returns core's replies.
func deliver(core *Core, ds []Datagram, from, to netip.AddrPort, now time.Duration) []Datagram {
	var out []Datagram
	for _, d := range ds {
		if d.To == to {
			out = core.Handle(d.Buf, from, now, out)
		}
	}
	return out
}

func TestCorePeekAnsweredDirectly(t *testing.T) {
	a, b, bShip := pair(t)
	b.Publish("a/b", []byte("value"))
	var got []Response
	sends, err := a.Peek(bShip, "a/b", 0, func(r Response) { got = append(got, r) }, nil)
	if err != nil || len(sends) != 1 || sends[0].To != bLane {
		t.Fatalf("sends %v, err %v", sends, err)
	}
	replies := deliver(b, sends, aLane, bLane, 0)
	if len(replies) != 1 || replies[0].To != aLane {
		t.Fatalf("replies %v", replies)
	}
	deliver(a, replies, bLane, aLane, time.Millisecond)
	if len(got) != 1 || string(got[0].Data) != "value" || got[0].Tries != 1 || got[0].Hops != 0 {
		t.Fatalf("got %+v", got)
	}
	if a.Pending() != 0 {
		t.Errorf("%d requests still pending", a.Pending())
	}
	// The hop-0 page taught the publisher's direct lane.
	if k, ok := a.Routes().DirectLane(bShip, time.Millisecond); !ok || k.AddrPort() != bLane {
		t.Errorf("direct lane %v %v", k.AddrPort(), ok)
	}
}

func TestCoreRetriesUntilAnswered(t *testing.T) {
	a, b, bShip := pair(t)
	b.Publish("p", []byte("v"))
	var got []Response
	first, _ := a.Peek(bShip, "p", 0, func(r Response) { got = append(got, r) }, nil)
	_ = first // lost on the wire
	if d := a.NextDeadline(); d != DefaultRetryInterval {
		t.Fatalf("next deadline %v, want %v", d, DefaultRetryInterval)
	}
	if again := a.Tick(DefaultRetryInterval/2, nil); len(again) != 0 {
		t.Fatal("re-sent before the retry interval")
	}
	again := a.Tick(DefaultRetryInterval, nil)
	if len(again) != 1 {
		t.Fatalf("retry sent %d datagrams", len(again))
	}
	deliver(a, deliver(b, again, aLane, bLane, DefaultRetryInterval), bLane, aLane, DefaultRetryInterval)
	if len(got) != 1 || got[0].Tries != 2 {
		t.Fatalf("got %+v", got)
	}
}

func TestCoreJoinsIdenticalRequests(t *testing.T) {
	a, b, bShip := pair(t)
	b.Publish("p", []byte("v"))
	n := 0
	s1, _ := a.Peek(bShip, "p", 0, func(Response) { n++ }, nil)
	s2, _ := a.Peek(bShip, "p", 0, func(Response) { n++ }, nil)
	if len(s2) != 0 {
		t.Error("second identical request sent again")
	}
	deliver(a, deliver(b, s1, aLane, bLane, 0), bLane, aLane, 0)
	if n != 2 {
		t.Errorf("%d waiters answered, want 2", n)
	}
}

func TestCorePokeIsAcked(t *testing.T) {
	a, b, bShip := pair(t)
	var got []Response
	sends, _ := a.Poke(bShip, []byte("hello"), 0, func(r Response) { got = append(got, r) }, nil)
	deliver(a, deliver(b, sends, aLane, bLane, 0), bLane, aLane, 0)
	if len(got) != 1 {
		t.Fatal("poke not acked")
	}
	// The hop-0 poke taught the publisher the requester's lane.
	if k, ok := b.Routes().DirectLane(mustShip(t, "~sampel-palnet"), 0); !ok || k.AddrPort() != aLane {
		t.Errorf("publisher learned %v %v", k.AddrPort(), ok)
	}
}

func TestCorePingsItsSponsor(t *testing.T) {
	moon := mustShip(t, "~mister-ritpub-sipsyl")
	planet := moon.Sponsor()
	c, err := NewCore(Config{Ship: moon, Lanes: map[lane.Ship]netip.AddrPort{planet: gLane}}, aLane)
	if err != nil {
		t.Fatal(err)
	}
	out := c.Tick(0, nil)
	if len(out) != 1 || out[0].To != gLane {
		t.Fatalf("ping sent %v", out)
	}
	if out = c.Tick(DefaultPingInterval-time.Second, nil); len(out) != 0 {
		t.Fatal("pinged early")
	}
	if out = c.Tick(DefaultPingInterval, nil); len(out) != 1 {
		t.Fatal("no second ping")
	}
}

func TestCoreIgnoresOthersAndGarbage(t *testing.T) {
	_, b, _ := pair(t)
	b.Publish("p", []byte("v"))
	if out := b.Handle([]byte{1, 2, 3}, aLane, 0, nil); len(out) != 0 {
		t.Error("answered garbage")
	}
	a2, _, _ := pair(t)
	// A peek for another ship is not answered.
	sends, _ := a2.Peek(mustShip(t, "~zod"), "p", 0, func(Response) {}, nil)
	if len(sends) != 0 {
		t.Error("sent with no route to ~zod")
	}
}

// TestForgedPageTeachesNothing is the row "the ship endpoint learns routes
// from pages it never asked for: one forged page sent all its later
// requests for ~nec to the attacker". A page nobody asked for, or one at a
// pending name from a lane the request never went to, teaches no lane.
func TestForgedPageTeachesNothing(t *testing.T) {
	a, _, bShip := pair(t)
	attacker := netip.MustParseAddrPort("198.51.100.66:6666")
	forged := func(path string, next netip.AddrPort) []byte {
		p := scry.NewPage(scry.Name{Ship: bShip, Bloq: scry.DefaultBloq, Path: []byte(path)},
			scry.Data{Total: 1, AuthKind: scry.AuthNone, Frag: []byte("x")})
		if next.IsValid() && !p.SetNextHopAddr(next) {
			t.Fatal("next-hop not encodable")
		}
		return p.Append(nil)
	}
	a.Handle(forged("never/asked", attacker), attacker, time.Millisecond, nil)
	sends, err := a.Peek(bShip, "asked", 0, func(Response) {}, nil)
	if err != nil || len(sends) != 1 || sends[0].To != bLane {
		t.Fatalf("after an unsolicited page, sends %v, err %v; want one to %v", sends, err, bLane)
	}
	// The attacker knows the pending name: its page completes the request
	// (the core cannot tell) but teaches nothing.
	a.Handle(forged("asked", attacker), attacker, 2*time.Millisecond, nil)
	if info, ok := a.Routes().Info(bShip); ok && (info.Direct.IsValid() || info.Hint.IsValid() || info.Challenger.IsValid()) {
		t.Fatalf("a forged page taught %+v", info)
	}
	sends, err = a.Peek(bShip, "later", 3*time.Millisecond, func(Response) {}, nil)
	if err != nil || len(sends) != 1 || sends[0].To != bLane {
		t.Fatalf("later sends %v, err %v; want one to %v", sends, err, bLane)
	}
}
