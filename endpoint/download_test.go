package endpoint

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// pairWith is pair with the requester's and publisher's configs changed by
// ra and rb.
func pairWith(t *testing.T, ra, rb func(*Config)) (a, b *Core, bShip lane.Ship) {
	t.Helper()
	bShip = mustShip(t, "~nec")
	ca := Config{Ship: mustShip(t, "~sampel-palnet"), PingInterval: -1, Seed: 1,
		Lanes: map[lane.Ship]netip.AddrPort{bShip: bLane}}
	cb := Config{Ship: bShip, Seed: 2}
	if ra != nil {
		ra(&ca)
	}
	if rb != nil {
		rb(&cb)
	}
	a, err := NewCore(ca, aLane)
	if err != nil {
		t.Fatal(err)
	}
	b, err = NewCore(cb, bLane)
	if err != nil {
		t.Fatal(err)
	}
	return a, b, bShip
}

// frags returns the fragment numbers of the peeks in ds.
func frags(t *testing.T, ds []Datagram) []uint64 {
	t.Helper()
	var out []uint64
	for _, d := range ds {
		var p scry.Packet
		if err := p.Parse(d.Buf); err != nil || p.Header.Type != scry.TypePeek {
			t.Fatalf("not a peek: %v", err)
		}
		out = append(out, p.Name.Frag)
	}
	return out
}

func TestCorePublisherServesFragments(t *testing.T) {
	a, b, bShip := pairWith(t, nil, func(c *Config) { c.FragmentSize = 4 })
	value := []byte("0123456789")
	b.Publish("v", value)
	b.Publish("small", []byte("abc"))
	page := func(path string, frag uint64) *scry.Packet {
		pk := scry.NewPeek(scry.Name{Ship: bShip, Bloq: scry.DefaultBloq, Frag: frag, Path: []byte(path)})
		out := b.Handle(pk.Append(nil), aLane, 0, nil)
		if len(out) == 0 {
			return nil
		}
		var p scry.Packet
		if err := p.Parse(out[0].Buf); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	for frag, want := range []string{"0123", "4567", "89"} {
		p := page("v", uint64(frag))
		if p == nil || string(p.Data.Frag) != want || p.Data.Total != 10 || p.Name.Frag != uint64(frag) {
			t.Fatalf("fragment %d: %+v", frag, p)
		}
	}
	if p := page("v", 3); p != nil {
		t.Errorf("answered fragment 3 of 3: %q", p.Data.Frag)
	}
	if p := page("small", 0); p == nil || string(p.Data.Frag) != "abc" || p.Data.Total != 3 {
		t.Errorf("a value within a fragment: %+v", p)
	}
	_ = a
}

func TestCoreDownloadsFragmentsInAWindow(t *testing.T) {
	a, b, bShip := pairWith(t, func(c *Config) { c.Window = 2 }, func(c *Config) { c.FragmentSize = 4 })
	value := []byte("abcdefghijklmnopqrs") // 19 bytes: 5 fragments
	b.Publish("v", value)
	var got []Response
	out, err := a.Peek(bShip, "v", 0, func(r Response) { got = append(got, r) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := frags(t, out); fmt.Sprint(f) != "[0]" {
		t.Fatalf("first sends ask for %v, want fragment 0 alone", f)
	}
	// Fragment 0's page gives the size: the window's two go out.
	out = deliver(a, deliver(b, out, aLane, bLane, 0), bLane, aLane, time.Millisecond)
	if f := frags(t, out); fmt.Sprint(f) != "[1 2]" {
		t.Fatalf("after fragment 0, asked for %v, want [1 2]", f)
	}
	// Each page frees a place in the window for the next fragment.
	pages := deliver(b, out, aLane, bLane, 2*time.Millisecond)
	next := deliver(a, pages[:1], bLane, aLane, 3*time.Millisecond)
	if f := frags(t, next); fmt.Sprint(f) != "[3]" {
		t.Fatalf("after fragment 1, asked for %v, want [3]", f)
	}
	next = append(next, deliver(a, pages[1:], bLane, aLane, 3*time.Millisecond)...)
	if f := frags(t, next); fmt.Sprint(f) != "[3 4]" {
		t.Fatalf("after fragment 2, asked for %v, want [3 4]", f)
	}
	if len(got) != 0 {
		t.Fatal("answered before every fragment was in")
	}
	deliver(a, deliver(b, next, aLane, bLane, 4*time.Millisecond), bLane, aLane, 5*time.Millisecond)
	if len(got) != 1 || !bytes.Equal(got[0].Data, value) || got[0].Tries != 1 || got[0].Err != nil {
		t.Fatalf("got %+v", got)
	}
	if a.Pending() != 0 {
		t.Errorf("%d requests left", a.Pending())
	}
}

func TestCoreDownloadRetriesALostFragment(t *testing.T) {
	a, b, bShip := pairWith(t, nil, func(c *Config) { c.FragmentSize = 4 })
	b.Publish("v", []byte("0123456789"))
	var got []Response
	out, _ := a.Peek(bShip, "v", 0, func(r Response) { got = append(got, r) }, nil)
	out = deliver(a, deliver(b, out, aLane, bLane, 0), bLane, aLane, 0)
	// Fragment 2's request is lost; fragment 1 comes.
	deliver(a, deliver(b, out[:1], aLane, bLane, 0), bLane, aLane, 0)
	again := a.Tick(DefaultRetryInterval, nil)
	if f := frags(t, again); fmt.Sprint(f) != "[2]" {
		t.Fatalf("retried %v, want [2]", f)
	}
	deliver(a, deliver(b, again, aLane, bLane, DefaultRetryInterval), bLane, aLane, DefaultRetryInterval)
	if len(got) != 1 || string(got[0].Data) != "0123456789" || got[0].Tries != 2 {
		t.Fatalf("got %+v", got)
	}
}

func TestCoreDownloadRejectsImpossibleSize(t *testing.T) {
	a, _, bShip := pairWith(t, nil, nil)
	var got []Response
	out, _ := a.Peek(bShip, "v", 0, func(r Response) { got = append(got, r) }, nil)
	var p scry.Packet
	if err := p.Parse(out[0].Buf); err != nil {
		t.Fatal(err)
	}
	page := scry.NewPage(p.Name, scry.Data{Total: 1 << 40, AuthKind: scry.AuthNone, Frag: []byte("x")})
	if more := a.Handle(page.Append(nil), bLane, 0, nil); len(more) != 0 {
		t.Fatalf("asked for %d fragments of a terabyte value", len(more))
	}
	if len(got) != 1 || !errors.Is(got[0].Err, ErrBadValue) || a.Pending() != 0 {
		t.Fatalf("got %+v, %d pending", got, a.Pending())
	}
}

func TestCoreGivesUpAfterMaxTries(t *testing.T) {
	a, _, bShip := pairWith(t, func(c *Config) { c.MaxTries = 3 }, nil)
	var got []Response
	a.Peek(bShip, "v", 0, func(r Response) { got = append(got, r) }, nil)
	a.Poke(bShip, []byte("x"), 0, func(r Response) { got = append(got, r) }, nil)
	for i := 1; i <= 2; i++ {
		if out := a.Tick(time.Duration(i)*DefaultRetryInterval, nil); len(out) != 2 {
			t.Fatalf("retry %d sent %d datagrams, want 2", i, len(out))
		}
	}
	if len(got) != 0 {
		t.Fatal("gave up early")
	}
	if out := a.Tick(3*DefaultRetryInterval, nil); len(out) != 0 {
		t.Fatalf("sent a fourth time: %d datagrams", len(out))
	}
	if len(got) != 2 || !errors.Is(got[0].Err, ErrGaveUp) || !errors.Is(got[1].Err, ErrGaveUp) || got[0].Tries != 3 {
		t.Fatalf("got %+v", got)
	}
	if a.Pending() != 0 || a.NextDeadline() != never {
		t.Errorf("%d pending, next deadline %v", a.Pending(), a.NextDeadline())
	}
}

func TestCoreFetchGivesUpAfterUntil(t *testing.T) {
	a, _, bShip := pairWith(t, nil, nil)
	var got []Response
	a.Fetch(bShip, "v", Limit{Until: 2500 * time.Millisecond}, 0, func(r Response) { got = append(got, r) }, nil)
	sent := 1
	for now := DefaultRetryInterval; now <= 4*DefaultRetryInterval; now += DefaultRetryInterval {
		sent += len(a.Tick(now, nil))
	}
	if sent != 3 || len(got) != 1 || !errors.Is(got[0].Err, ErrGaveUp) {
		t.Fatalf("sent %d times (want 3: at 0, 1 s, 2 s), got %+v", sent, got)
	}
}

func TestCoreTickSendsInTheOrderRequestsWereMade(t *testing.T) {
	a, _, bShip := pairWith(t, nil, nil)
	var want []string
	for i := range 50 {
		out, _ := a.Peek(bShip, fmt.Sprintf("p/%d", i), 0, func(Response) {}, nil)
		want = append(want, string(out[0].Buf))
	}
	for round := 1; round <= 3; round++ {
		out := a.Tick(time.Duration(round)*DefaultRetryInterval, nil)
		if len(out) != len(want) {
			t.Fatalf("round %d: %d sends", round, len(out))
		}
		for i := range out {
			if string(out[i].Buf) != want[i] {
				t.Fatalf("round %d: send %d out of order", round, i)
			}
		}
	}
}

func TestCoreThinkDelaysAnswers(t *testing.T) {
	think := []time.Duration{30 * time.Millisecond, 10 * time.Millisecond}
	a, b, bShip := pairWith(t, nil, func(c *Config) {
		c.Think = func() time.Duration { d := think[0]; think = think[1:]; return d }
	})
	b.Publish("v", []byte("v"))
	p1, _ := a.Peek(bShip, "v", 0, func(Response) {}, nil)
	p2, _ := a.Poke(bShip, []byte("x"), 0, func(Response) {}, nil)
	if out := deliver(b, append(p1, p2...), aLane, bLane, 0); len(out) != 0 {
		t.Fatalf("answered at once: %d datagrams", len(out))
	}
	if d := b.NextDeadline(); d != 10*time.Millisecond {
		t.Fatalf("next deadline %v, want the poke's 10ms", d)
	}
	if out := b.Tick(9*time.Millisecond, nil); len(out) != 0 {
		t.Fatal("answered before its think time")
	}
	if out := b.Tick(10*time.Millisecond, nil); len(out) != 1 || out[0].To != aLane {
		t.Fatalf("at 10ms sent %v, want the poke's ack", out)
	}
	if out := b.Tick(30*time.Millisecond, nil); len(out) != 1 {
		t.Fatalf("at 30ms sent %d, want the page", len(out))
	}
}

func TestCoreHoldsPeeksUntilGrown(t *testing.T) {
	a, b, bShip := pairWith(t, nil, func(c *Config) { c.Think = func() time.Duration { return 5 * time.Millisecond } })
	b.Hold("later")
	var got []Response
	out, _ := a.Peek(bShip, "later", 0, func(r Response) { got = append(got, r) }, nil)
	if r := deliver(b, out, aLane, bLane, 0); len(r) != 0 {
		t.Fatal("answered a peek for a value not grown")
	}
	again := a.Tick(DefaultRetryInterval, nil)
	deliver(b, again, aLane, bLane, DefaultRetryInterval) // the same peek again: held once
	if r := b.Grow("later", []byte("grown"), 1500*time.Millisecond, nil); len(r) != 0 {
		t.Fatal("a held peek answered before its think time")
	}
	r := b.Tick(1505*time.Millisecond, nil)
	if len(r) != 1 {
		t.Fatalf("grown: %d answers, want 1", len(r))
	}
	deliver(a, r, bLane, aLane, 1510*time.Millisecond)
	if len(got) != 1 || string(got[0].Data) != "grown" {
		t.Fatalf("got %+v", got)
	}
	// Peeks for a path nobody holds are ignored, as before.
	out, _ = a.Peek(bShip, "unheld", 2*time.Second, func(Response) {}, nil)
	deliver(b, out, aLane, bLane, 2*time.Second)
	b.Grow("unheld", []byte("x"), 2*time.Second, nil)
	if r := b.Tick(3*time.Second, nil); len(r) != 0 {
		t.Errorf("answered an unheld peek on growth: %d", len(r))
	}
}
