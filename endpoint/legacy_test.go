package endpoint

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

func legacyPair(t *testing.T) (a, b *Core, bShip lane.Ship) {
	return pairWith(t, func(c *Config) { c.MaxTries = 3; c.Life = 2 },
		func(c *Config) { c.Legacy = true; c.Life = 5; c.FragmentSize = 1000 })
}

func amesOf(t *testing.T, d Datagram) *scry.AmesPacket {
	t.Helper()
	var p scry.AmesPacket
	if err := p.Parse(d.Buf); err != nil {
		t.Fatalf("not a legacy ames packet: %v", err)
	}
	return &p
}

func TestCoreLegacyMessageIsAcked(t *testing.T) {
	a, b, bShip := legacyPair(t)
	msg := []byte("\x01\x02\x03\x04\x05\x06\x07\x08hello")
	var got []Response
	out, err := a.Message(bShip, 5, msg, 0, func(r Response) { got = append(got, r) }, nil)
	if err != nil || len(out) != 1 || out[0].To != bLane {
		t.Fatalf("sends %v, err %v", out, err)
	}
	if p := amesOf(t, out[0]); p.Class() != scry.AmesClassAmes || p.SndrTick != 2 || p.RcvrTick != 5 || !bytes.Equal(p.Content, msg) {
		t.Fatalf("sent %+v", p)
	}
	// The first copy is lost; the retry is acked.
	again := a.Tick(DefaultRetryInterval, nil)
	acks := deliver(b, again, aLane, bLane, DefaultRetryInterval)
	if len(acks) != 1 || acks[0].To != aLane {
		t.Fatalf("acks %v", acks)
	}
	ack := amesOf(t, acks[0])
	if ack.Sndr != bShip || ack.SndrTick != 5 || ack.RcvrTick != 2 || !bytes.Equal(ack.Content[:AmesMsgIDLen], msg[:AmesMsgIDLen]) ||
		len(ack.Content) != amesAckLen || ack.Content[len(ack.Content)-1] == 0 {
		t.Fatalf("ack %+v", ack)
	}
	if r := deliver(a, acks, bLane, aLane, DefaultRetryInterval); len(r) != 0 {
		t.Fatal("the requester answered the ack")
	}
	if len(got) != 1 || got[0].Tries != 2 || !bytes.Equal(got[0].Data, ack.Content) {
		t.Fatalf("got %+v", got)
	}
	if out := a.Tick(2*DefaultRetryInterval, nil); len(out) != 0 {
		t.Fatal("re-sent an acked message")
	}
}

func TestCoreLegacyMessageGivesUp(t *testing.T) {
	a, _, bShip := legacyPair(t)
	var got []Response
	a.Message(bShip, 5, []byte("12345678x"), 0, func(r Response) { got = append(got, r) }, nil)
	sent := 1
	for i := 1; i <= 4; i++ {
		sent += len(a.Tick(time.Duration(i)*DefaultRetryInterval, nil))
	}
	if sent != 3 || len(got) != 1 || !errors.Is(got[0].Err, ErrGaveUp) {
		t.Fatalf("sent %d, got %+v", sent, got)
	}
	if _, err := a.Message(bShip, 5, []byte("short"), 0, func(Response) {}, nil); !errors.Is(err, ErrBadValue) {
		t.Errorf("a message shorter than its number: %v", err)
	}
}

func TestCoreLegacyWailIsAnsweredByAPurr(t *testing.T) {
	a, b, bShip := legacyPair(t)
	value := bytes.Repeat([]byte("abcdefghij"), 250) // 2,500 bytes: 3 fragments of 1,000
	b.Publish("/c/x/1/v", value)
	var got []Response
	out, _ := a.Wail(bShip, 5, "/c/x/1/v", 2, 0, func(r Response) { got = append(got, r) }, nil)
	if p := amesOf(t, out[0]); p.Class() != scry.AmesClassWail {
		t.Fatalf("sent class %v", p.Class())
	}
	purrs := deliver(b, out, aLane, bLane, 0)
	if len(purrs) != 1 {
		t.Fatalf("%d purrs", len(purrs))
	}
	var pr scry.AmesPurr
	if err := pr.Parse(amesOf(t, purrs[0]).Content); err != nil || pr.Frag != 2 || pr.Num != 3 || !bytes.Equal(pr.Data, value[2000:]) {
		t.Fatalf("purr %+v, %v", pr, err)
	}
	deliver(a, purrs, bLane, aLane, 0)
	if len(got) != 1 || !bytes.Equal(got[0].Data, value[2000:]) {
		t.Fatalf("got %+v", got)
	}
	// A wail past the last fragment, or for a path not published, is
	// not answered.
	for _, w := range []struct {
		path string
		frag uint32
	}{{"/c/x/1/v", 3}, {"/nothing", 0}} {
		out, _ := a.Wail(bShip, 5, w.path, w.frag, 0, func(Response) {}, nil)
		if r := deliver(b, out, aLane, bLane, 0); len(r) != 0 {
			t.Errorf("answered a wail for %s fragment %d", w.path, w.frag)
		}
	}
}

func TestCoreLegacyOnlyWhenAsked(t *testing.T) {
	// A ship without Config.Legacy neither acks messages nor serves wails.
	a, b, bShip := pairWith(t, nil, nil)
	b.Publish("/v", []byte("v"))
	m, _ := a.Message(bShip, 0, []byte("12345678x"), 0, func(Response) {}, nil)
	w, _ := a.Wail(bShip, 0, "/v", 0, 0, func(Response) {}, nil)
	if r := deliver(b, append(m, w...), aLane, bLane, 0); len(r) != 0 {
		t.Fatalf("a mesa-only ship answered %d legacy packets", len(r))
	}
}

func TestCoreLegacyShipsDoNotAckAcks(t *testing.T) {
	// Two Legacy ships: a late copy of an ack is not taken for a message
	// by the ship whose message it acks, so acks do not bounce for ever.
	a, b, bShip := pairWith(t, func(c *Config) { c.Legacy = true }, func(c *Config) { c.Legacy = true })
	out, _ := a.Message(bShip, 0, []byte("12345678x"), 0, func(Response) {}, nil)
	acks := deliver(b, out, aLane, bLane, 0)
	deliver(a, acks, bLane, aLane, 0)
	if r := deliver(a, acks, bLane, aLane, time.Millisecond); len(r) != 0 {
		t.Fatalf("a late ack was acked: %d datagrams", len(r))
	}
}

func TestCoreLegacyPing(t *testing.T) {
	moon := mustShip(t, "~mister-ritpub-sipsyl")
	planet := moon.Sponsor()
	c, err := NewCore(Config{Ship: moon, Legacy: true, Life: 3, Seed: 1, Lanes: map[lane.Ship]netip.AddrPort{planet: gLane}}, aLane)
	if err != nil {
		t.Fatal(err)
	}
	out := c.Tick(0, nil)
	if len(out) != 1 || out[0].To != gLane {
		t.Fatalf("ping sent %v", out)
	}
	p := amesOf(t, out[0])
	if p.Class() != scry.AmesClassAmes || p.Sndr != moon || p.Rcvr != planet || p.SndrTick != 3 || len(p.Content) != amesPingLen ||
		!bytes.Equal(p.Content[:AmesMsgIDLen], make([]byte, AmesMsgIDLen)) {
		t.Fatalf("ping %+v", p)
	}
}
