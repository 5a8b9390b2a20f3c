package scry

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzMesaParse checks, on any input, that Parse does not panic and
// returns nil or a MesaError; that every accepted input (and every input
// only the size gate rejects) re-appends to itself, canonicalizes to a
// packet with the same values, and survives the forwarding edits with a
// valid mug. Each input is tried as given and with its mug fixed, so that
// mutations reach the checks past the mug.
func FuzzMesaParse(f *testing.F) {
	for _, file := range []string{"mesa-vectors.jsonl", "mesa-malformed.jsonl", "mesa-quirks.jsonl"} {
		for _, r := range loadMesaRecords(f, file) {
			f.Add(r.Wire)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkMesaInput(t, b)
		if len(b) >= MesaHeaderLen {
			fixed := bytes.Clone(b)
			FixMug(fixed)
			checkMesaInput(t, fixed)
		}
	})
}

// checkMesaInput runs the FuzzMesaParse checks on one input.
func checkMesaInput(t *testing.T, b []byte) {
	var p Packet
	err := p.Parse(b)
	var me MesaError
	if err != nil && !errors.As(err, &me) {
		t.Fatalf("Parse returned %T %v", err, err)
	}
	if err == ErrMesaTooLarge {
		err = p.sift(b, MugPrefix{}) // the parser alone; oversize input must still round-trip
	}
	if err != nil {
		return
	}
	if len(b) <= MesaMaxPacket {
		typ, wire, ok := NameWire(b)
		switch p.Header.Type {
		case TypePeek, TypePoke, TypePage:
			if !ok || typ != p.Header.Type || !bytes.Equal(wire, p.Name.Wire) {
				t.Fatalf("NameWire = %v %x %v, Parse gave type %v name %x", typ, wire, ok, p.Header.Type, p.Name.Wire)
			}
		default:
			if ok {
				t.Fatalf("NameWire found a name in a %v datagram", p.Header.Type)
			}
		}
	}
	if got := p.Append(nil); !bytes.Equal(got, b) {
		t.Fatalf("Append differs from accepted input:\n got  %x\n want %x", got, b)
	}
	if p.Size() != len(b) {
		t.Fatalf("Size %d, input %d", p.Size(), len(b))
	}
	checkCanonical(t, &p, b)
	if len(b) <= MesaMaxPacket {
		checkEdits(t, &p, b)
		checkFastEdits(t, &p, b)
	}
}

// checkFastEdits checks that EditPageNextHop gives exactly the bytes of
// SetNextHop and ClearNextHop.
func checkFastEdits(t *testing.T, p *Packet, b []byte) {
	if p.Header.Type != TypePage {
		return
	}
	hop := [ShortHopLen]byte{1, 0, 0, 127, 0x19, 0x34}
	for _, set := range []bool{true, false} {
		slow := make([]byte, len(b), len(b)+ShortHopLen)
		fast := make([]byte, len(b), len(b)+ShortHopLen)
		copy(slow, b)
		copy(fast, b)
		var errSlow, errFast error
		if set {
			slow, errSlow = SetNextHop(slow, hop)
		} else {
			slow, errSlow = ClearNextHop(slow)
		}
		fast, errFast = EditPageNextHop(fast, p, hop, set)
		if errSlow != errFast || !bytes.Equal(slow, fast) {
			t.Fatalf("EditPageNextHop(set=%v) = %x, %v; SetNextHop/ClearNextHop = %x, %v", set, fast, errFast, slow, errSlow)
		}
	}
}

// checkCanonical checks that the canonical form of p is no longer than b,
// parses, carries the same values, and is a fixed point of Canonicalize.
func checkCanonical(t *testing.T, p *Packet, b []byte) {
	q := *p
	q.Canonicalize()
	c := q.Append(nil)
	if len(c) > len(b) {
		t.Fatalf("canonical form is longer (%d) than the input (%d)", len(c), len(b))
	}
	var r Packet
	if err := r.sift(c, MugPrefix{}); err != nil {
		t.Fatalf("canonical form %x does not parse: %v", c, err)
	}
	if r.Header.Type != p.Header.Type || r.Header.Hops != p.Header.Hops || r.Header.NextHop != p.Header.NextHop ||
		!sameNameValue(&r.Name, &p.Name) || !sameNameValue(&r.PayloadName, &p.PayloadName) ||
		r.Data.Total != p.Data.Total || r.Data.AuthKind != p.Data.AuthKind ||
		!bytes.Equal(r.Data.Auth, p.Data.Auth) || !bytes.Equal(r.Data.Frag, p.Data.Frag) || r.NextHop != p.NextHop {
		t.Fatalf("canonical form changes values:\n in  %+v\n out %+v", p, r)
	}
	r.Canonicalize()
	if again := r.Append(nil); !bytes.Equal(again, c) {
		t.Fatalf("Canonicalize is not idempotent:\n %x\n %x", c, again)
	}
}

// sameNameValue reports whether a and b name the same thing; an init
// name's tau bit is not part of its value (vere's serializer drops it).
func sameNameValue(a, b *Name) bool {
	return a.Ship == b.Ship && a.Rift == b.Rift && a.Bloq == b.Bloq && a.Init == b.Init &&
		(a.Init || a.Auth == b.Auth) && a.Frag == b.Frag && bytes.Equal(a.Path, b.Path)
}

// checkEdits applies the forwarding edits to a copy of the accepted b (a
// p) and checks that each result parses with a valid mug and the edit made.
func checkEdits(t *testing.T, p *Packet, b []byte) {
	buf := make([]byte, len(b), len(b)+ShortHopLen)
	copy(buf, b)
	want := min(int(p.Header.Hops)+1, MesaMaxHops)
	if got := BumpHops(buf); got != want {
		t.Fatalf("BumpHops = %d, want %d", got, want)
	}
	var r Packet
	if err := r.Parse(buf); err != nil || int(r.Header.Hops) != want {
		t.Fatalf("after BumpHops: %v, hops %d", err, r.Header.Hops)
	}
	hop := [ShortHopLen]byte{4, 3, 2, 1, 0x19, 0x34}
	s, err := SetNextHop(buf, hop)
	switch {
	case p.Header.Type != TypePage:
		if err != ErrMesaNotPage || !bytes.Equal(s, buf) {
			t.Fatalf("SetNextHop on %v: %v", p.Header.Type, err)
		}
		return
	case err == ErrMesaTooLarge && p.Header.NextHop == NextHopNone && len(buf)+ShortHopLen > MesaMaxPacket:
		return
	case err != nil:
		t.Fatalf("SetNextHop: %v", err)
	}
	if err := r.Parse(s); err != nil {
		t.Fatalf("after SetNextHop: %v", err)
	}
	if ap, ok := r.NextHopAddr(); !ok || ap.String() != "1.2.3.4:13337" {
		t.Fatalf("next hop after set: %v %v", ap, ok)
	}
	c, err := ClearNextHop(s)
	if err != nil {
		t.Fatalf("ClearNextHop: %v", err)
	}
	if err := r.Parse(c); err != nil || r.Header.NextHop != NextHopNone {
		t.Fatalf("after ClearNextHop: %v, next hop %v", err, r.Header.NextHop)
	}
}
