package scry

import (
	"bytes"
	"crypto/ed25519"
	"net/netip"
	"strings"
	"testing"

	"github.com/urbit-relay/relay/lane"
)

func notifyTestKey(n byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{n}, ed25519.SeedSize))
}

func mustShipT(tb testing.TB, s string) lane.Ship {
	tb.Helper()
	v, err := lane.ParseShip(s)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func TestNotifyPathRoundTrip(t *testing.T) {
	sub := mustShipT(t, "~sampel-palnet")
	cases := []struct {
		p    NotifyPath
		wire string
	}{
		{NotifyPath{Kind: NotifyAck, Subscriber: sub, Path: []byte("c/x/4/hello")},
			"~notify/1/sub/~sampel-palnet/c/x/4/hello"},
		{NotifyPath{Kind: NotifyBeat, Subscriber: sub, Session: 0x0123456789abcdef, Counter: 42},
			"~notify/1/hb/~sampel-palnet/0123456789abcdef/42"},
		{NotifyPath{Kind: NotifyBeat, Subscriber: lane.Ship{}, Session: 1, Counter: 0},
			"~notify/1/hb/~zod/0000000000000001/0"},
		{NotifyPath{Kind: NotifyBeat, Subscriber: mustShipT(t, "~mister-ritpub-sipsyl"), Session: ^uint64(0), Counter: ^uint64(0)},
			"~notify/1/hb/~mister-ritpub-sipsyl/ffffffffffffffff/18446744073709551615"},
	}
	for _, tc := range cases {
		got := tc.p.Append(nil)
		if string(got) != tc.wire {
			t.Errorf("Append: %q, want %q", got, tc.wire)
		}
		var p NotifyPath
		if err := p.Parse([]byte(tc.wire)); err != nil {
			t.Errorf("Parse(%q): %v", tc.wire, err)
			continue
		}
		if p.Kind != tc.p.Kind || p.Subscriber != tc.p.Subscriber || p.Session != tc.p.Session ||
			p.Counter != tc.p.Counter || !bytes.Equal(p.Path, tc.p.Path) {
			t.Errorf("Parse(%q) = %+v", tc.wire, p)
		}
	}
}

func TestNotifyPathRejects(t *testing.T) {
	long := "~notify/1/sub/~zod/" + strings.Repeat("a", MaxNotifyPath+1)
	for _, in := range []string{
		"", "c/x/4/hello", "~notify/2/sub/~zod/x", "~notify/1/", "~notify/1/sub", "~notify/1/sub/~zod",
		"~notify/1/sub/~zod/", "~notify/1/sub/zod/x", "~notify/1/sub/0/x", "~notify/1/sub/~sampel-zod/x",
		"~notify/1/sub/~zoD/x", long,
		"~notify/1/hb/~zod/0123456789abcdef", "~notify/1/hb/~zod/0123456789abcdef/", "~notify/1/hb/~zod/0123456789ABCDEF/1",
		"~notify/1/hb/~zod/123456789abcdef/1", "~notify/1/hb/~zod/0123456789abcdef/01", "~notify/1/hb/~zod/0123456789abcdef/1/",
		"~notify/1/hb/~zod/0123456789abcdef/18446744073709551616", "~notify/1/hb/~zod/0123456789abcdef/-1",
		"~notify/1/xx/~zod/0123456789abcdef/1",
	} {
		var p NotifyPath
		if err := p.Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) accepted: %+v", in, p)
		}
	}
	if IsNotifyPath([]byte("~notify/1")) || !IsNotifyPath([]byte(NotifyPrefix)) {
		t.Error("IsNotifyPath")
	}
}

func sampleMessages(tb testing.TB) []NotifyMessage {
	pub, sub := mustShipT(tb, "~nec"), mustShipT(tb, "~sampel-palnet")
	return []NotifyMessage{
		{Kind: NotifyAck, Publisher: pub, Subscriber: sub, Session: 0xfeed,
			Entries: []NotifyEntry{{Status: NotifyPending, Path: []byte("c/x/4/hello")}}},
		{Kind: NotifyAck, Publisher: pub, Subscriber: sub, Session: 7,
			Entries: []NotifyEntry{{Status: NotifyValue, Path: []byte("v/1"), Value: []byte("one")}}},
		{Kind: NotifyAck, Publisher: pub, Subscriber: sub, Session: 7,
			Entries: []NotifyEntry{{Status: NotifyRefused, Path: []byte("v/1")}}},
		{Kind: NotifyBeat, Publisher: pub, Subscriber: sub, Session: 7, Counter: 99},
		{Kind: NotifyBeat, Publisher: pub, Subscriber: sub, Session: 7, Counter: 100, Entries: []NotifyEntry{
			{Status: NotifyValue, Path: []byte("v/2"), Value: []byte("two")},
			{Status: NotifyGrown, Path: []byte("big")},
			{Status: NotifyValue, Path: []byte("empty")},
		}},
	}
}

func TestNotifyMessageRoundTripAndVerify(t *testing.T) {
	k := notifyTestKey(1)
	pub := k.Public().(ed25519.PublicKey)
	other := notifyTestKey(2).Public().(ed25519.PublicKey)
	for i, m := range sampleMessages(t) {
		b := m.AppendSigned(nil, k)
		if len(b) != m.Size() {
			t.Errorf("%d: size %d, Size %d", i, len(b), m.Size())
		}
		if !m.Verify(pub) || m.Verify(other) || m.Verify(pub[:5]) {
			t.Errorf("%d: Verify of the built message", i)
		}
		var got NotifyMessage
		if err := got.Parse(b); err != nil {
			t.Fatalf("%d: Parse: %v", i, err)
		}
		if !got.Verify(pub) || got.Verify(other) {
			t.Errorf("%d: Verify of the parsed message", i)
		}
		if re := got.Append(nil); !bytes.Equal(re, b) {
			t.Errorf("%d: re-Append differs", i)
		}
		if got.Kind != m.Kind || got.Publisher != m.Publisher || got.Subscriber != m.Subscriber ||
			got.Session != m.Session || got.Counter != m.Counter || len(got.Entries) != len(m.Entries) {
			t.Errorf("%d: fields %+v", i, got)
		}
		// Any flipped bit either fails to parse or fails to verify.
		for j := range b {
			c := bytes.Clone(b)
			c[j] ^= 0x10
			var f NotifyMessage
			if f.Parse(c) == nil && f.Verify(pub) {
				t.Fatalf("%d: flipping byte %d still verifies", i, j)
			}
		}
	}
}

func TestNotifyMessageRejects(t *testing.T) {
	k := notifyTestKey(1)
	ms := sampleMessages(t)
	good := ms[4].AppendSigned(nil, k)
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"short":     {good[:NotifyHeaderLen+NotifySigLen-1], ErrNotifyShort},
		"version":   {mut(func(b []byte) []byte { b[0] = 2; return b }), ErrNotifyVersion},
		"kind":      {mut(func(b []byte) []byte { b[1] = 3; return b }), ErrNotifyKind},
		"session":   {mut(func(b []byte) []byte { clear(b[34:42]); return b }), ErrNotifySession},
		"count":     {mut(func(b []byte) []byte { b[50] = 4; return b }), ErrNotifyEntry},
		"fewer":     {mut(func(b []byte) []byte { b[50] = 2; return b }), ErrNotifyTrailing},
		"status":    {mut(func(b []byte) []byte { b[52] = 9; return b }), ErrNotifyEntry},
		"pending":   {mut(func(b []byte) []byte { b[52] = byte(NotifyPending); return b }), ErrNotifyEntry},
		"pathlen0":  {mut(func(b []byte) []byte { b[53], b[54] = 0, 0; return b }), ErrNotifyBadLength},
		"toolarge":  {make([]byte, MesaMaxPacket+1), ErrNotifyTooLarge},
		"truncated": {good[:len(good)-1], ErrNotifyEntry},
	}
	// An ack must carry exactly one entry.
	ack0 := ms[3]
	ack0.Kind = NotifyAck
	cases["ack-no-entry"] = struct {
		b    []byte
		want error
	}{ack0.AppendSigned(nil, k), ErrNotifyEntries}
	// A grown entry carries no value.
	grownValue := ms[4]
	grownValue.Entries = []NotifyEntry{{Status: NotifyGrown, Path: []byte("x"), Value: []byte("v")}}
	cases["grown-value"] = struct {
		b    []byte
		want error
	}{grownValue.AppendSigned(nil, k), ErrNotifyEntry}
	for name, tc := range cases {
		m := NotifyMessage{Entries: make([]NotifyEntry, 0, 4)}
		if err := m.Parse(tc.b); err != tc.want {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		if m.Kind != 0 || len(m.Entries) != 0 || cap(m.Entries) != 4 {
			t.Errorf("%s: not zeroed (or capacity lost): %+v", name, m)
		}
	}
}

func TestNotifyRoomFitsAPacket(t *testing.T) {
	// The largest message a page can carry, with the largest name and a
	// relay's next-hop added, is a valid packet of at most MesaMaxPacket.
	comet := lane.Ship{Hi: ^uint64(0), Lo: ^uint64(0)}
	np := NotifyPath{Kind: NotifyAck, Subscriber: comet, Path: bytes.Repeat([]byte("p"), MaxNotifyPath)}
	name := Name{Ship: comet, Rift: ^uint32(0), Bloq: DefaultBloq, Path: np.Append(nil)}
	nameSize := name.Size()
	room := NotifyRoom(nameSize)
	m := NotifyMessage{Kind: NotifyAck, Publisher: comet, Subscriber: comet, Session: 1,
		Entries: []NotifyEntry{{Status: NotifyValue, Path: np.Path, Value: make([]byte, room-NotifyEntrySize(len(np.Path), 0))}}}
	payload := m.AppendSigned(nil, notifyTestKey(1))
	page := NewPage(name, Data{Total: uint64(len(payload)), AuthKind: AuthNone, Frag: payload})
	if !page.SetNextHopAddr(netip.MustParseAddrPort("203.0.113.7:13337")) {
		t.Fatal("next-hop")
	}
	b := page.Append(nil)
	if len(b) != MesaMaxPacket {
		t.Errorf("fullest page is %d bytes, want exactly %d", len(b), MesaMaxPacket)
	}
	var p Packet
	if err := p.Parse(b); err != nil {
		t.Fatal(err)
	}
	// One byte more would not fit.
	if room < NotifyEntrySize(MaxNotifyPath, 0) {
		t.Errorf("room %d cannot carry a grown entry", room)
	}
}

func TestNotifyParseAllocations(t *testing.T) {
	b := sampleMessages(t)[4].AppendSigned(nil, notifyTestKey(1))
	m := NotifyMessage{Entries: make([]NotifyEntry, 0, 8)}
	if n := testing.AllocsPerRun(100, func() {
		if m.Parse(b) != nil {
			t.Fatal("parse failed")
		}
	}); n != 0 {
		t.Errorf("NotifyMessage.Parse: %v allocations", n)
	}
	// The path parser hands the @p to lane.ParseShip, which takes a
	// string: one allocation, nothing else.
	var np NotifyPath
	path := []byte("~notify/1/hb/~sampel-palnet/0123456789abcdef/42")
	if n := testing.AllocsPerRun(100, func() {
		if np.Parse(path) != nil {
			t.Fatal("parse failed")
		}
	}); n > 1 {
		t.Errorf("NotifyPath.Parse: %v allocations", n)
	}
}

// FuzzNotifyMessage checks that Parse never panics, that what it accepts
// re-appends to itself, and that an accepted message's entries obey the
// layout's rules.
func FuzzNotifyMessage(f *testing.F) {
	k := notifyTestKey(1)
	for _, m := range sampleMessages(f) {
		f.Add(m.AppendSigned(nil, k))
	}
	// Page fragments from vere's vectors: arbitrary bytes in the place a
	// payload would be.
	for i, r := range loadMesaRecords(f, "mesa-vectors.jsonl") {
		if i%10 != 0 {
			continue
		}
		var p Packet
		if p.Parse(r.Wire) == nil && p.Header.Type == TypePage {
			f.Add(bytes.Clone(p.Data.Frag))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m NotifyMessage
		if m.Parse(b) != nil {
			return
		}
		if re := m.Append(nil); !bytes.Equal(re, b) {
			t.Fatalf("re-Append differs:\n%x\n%x", re, b)
		}
		if m.Kind == NotifyAck && len(m.Entries) != 1 {
			t.Fatal("ack without exactly one entry")
		}
		for _, e := range m.Entries {
			if len(e.Path) == 0 || len(e.Path) > MaxNotifyPath || (e.Status != NotifyValue && len(e.Value) != 0) {
				t.Fatalf("entry %+v", e)
			}
		}
	})
}

// FuzzNotifyPath checks that Parse never panics and that an accepted path
// is the one form Append writes.
func FuzzNotifyPath(f *testing.F) {
	for _, s := range []string{
		"~notify/1/sub/~sampel-palnet/c/x/4/hello", "~notify/1/hb/~sampel-palnet/0123456789abcdef/42",
		"~notify/1/hb/~zod/0000000000000001/0", "~notify/1/sub/~zod/x", "c/x/4/hello",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p NotifyPath
		if p.Parse(b) != nil {
			return
		}
		if re := p.Append(nil); !bytes.Equal(re, b) {
			t.Fatalf("Append(Parse(%q)) = %q", b, re)
		}
	})
}

func BenchmarkNotifyParse(b *testing.B) {
	buf := sampleMessages(b)[4].AppendSigned(nil, notifyTestKey(1))
	m := NotifyMessage{Entries: make([]NotifyEntry, 0, 8)}
	b.ReportAllocs()
	for b.Loop() {
		if m.Parse(buf) != nil {
			b.Fatal("parse")
		}
	}
}

func BenchmarkNotifySign(b *testing.B) {
	m := sampleMessages(b)[3]
	k := notifyTestKey(1)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = m.AppendSigned(buf[:0], k)
	}
}

func BenchmarkNotifyVerify(b *testing.B) {
	k := notifyTestKey(1)
	buf := sampleMessages(b)[3].AppendSigned(nil, k)
	var m NotifyMessage
	if m.Parse(buf) != nil {
		b.Fatal("parse")
	}
	pub := k.Public().(ed25519.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		if !m.Verify(pub) {
			b.Fatal("verify")
		}
	}
}
