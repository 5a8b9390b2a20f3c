package scry

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// amesFuzzSeeds returns every datagram in the three vector files: the
// packets, vere's forwards and responses, the malformed and the quirk inputs.
func amesFuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, r := range amesReadJSONL[amesVectorJSON](tb, "ames-vectors.jsonl") {
		seeds = append(seeds, amesUnhex(tb, r.Hex), amesUnhex(tb, r.ForwardedHex))
		if r.Response != nil {
			seeds = append(seeds, amesUnhex(tb, r.Response.Hex))
		}
	}
	for _, name := range []string{"ames-malformed.jsonl", "ames-quirks.jsonl"} {
		for _, r := range amesReadJSONL[amesOddJSON](tb, name) {
			seeds = append(seeds, amesUnhex(tb, r.Hex))
		}
	}
	return append(seeds, amesSTUNRequest([12]byte{}), nil)
}

// FuzzAmesParse: Parse never panics; what it accepts Append reproduces; and
// forwarding an accepted packet that needs an origin gives a packet that
// parses as relayed from that origin with the same mug, ships and content.
func FuzzAmesParse(f *testing.F) {
	for i, s := range amesFuzzSeeds(f) {
		f.Add(s, uint64(0x3419_01020304)+uint64(i))
	}
	f.Fuzz(func(t *testing.T, b []byte, originBits uint64) {
		var origin [AmesOriginLen]byte
		binary.LittleEndian.PutUint32(origin[:], uint32(originBits))
		binary.LittleEndian.PutUint16(origin[4:], uint16(originBits>>32))
		_ = IsSTUN(b)

		var p AmesPacket
		err := p.Parse(b)
		if err == ErrAmesBadMug {
			// Random bytes almost never carry a matching 20-bit mug; fix
			// it so the checks below see the accepted path too.
			b = amesFuzzFixMug(b)
			err = p.Parse(b)
			if err == ErrAmesBadMug {
				t.Fatalf("mug fixed, still %v", err)
			}
		}
		if err != nil {
			if _, ok := err.(AmesError); !ok {
				t.Fatalf("error %v of type %T", err, err)
			}
			return
		}
		amesFuzzAccepted(t, b, &p, origin)
	})
}

// amesFuzzFixMug returns a copy of b (a datagram that reached the mug check)
// with the header mug set to the mug of its body.
func amesFuzzFixMug(b []byte) []byte {
	c := bytes.Clone(b)
	off := AmesHeaderLen
	if c[3]&0x80 == 0 {
		off += AmesOriginLen
	}
	head := binary.LittleEndian.Uint32(c)
	head = head&^(amesMugMask<<11) | (Mug(c[off:])&amesMugMask)<<11
	binary.LittleEndian.PutUint32(c, head)
	return c
}

// amesFuzzAccepted checks the properties of a datagram b that Parse accepted
// into p, forwarding it from origin when it needs an origin.
func amesFuzzAccepted(t *testing.T, b []byte, p *AmesPacket, origin [AmesOriginLen]byte) {
	if got := p.Append(nil); !bytes.Equal(got, b) {
		t.Fatalf("Append = %x, parsed %x", got, b)
	}
	if p.HeaderWord() != p.Head || p.Len() != len(b) || p.Version != 0 {
		t.Fatalf("header %#08x vs %#08x, len %d vs %d", p.HeaderWord(), p.Head, p.Len(), len(b))
	}
	switch p.Class() {
	case AmesClassWail:
		var w AmesWail
		if w.Parse(p.Content) == nil && !bytes.Equal(w.Append(nil), p.Content) {
			t.Fatalf("wail Append differs")
		}
	case AmesClassPurr:
		var pr AmesPurr
		if pr.Parse(p.Content) == nil && !bytes.Equal(pr.Append(nil), p.Content) {
			t.Fatalf("purr Append differs")
		}
	}
	if !NeedsOrigin(p) {
		return
	}

	out, err := InsertOrigin(bytes.Clone(b), origin)
	if err != nil {
		t.Fatalf("InsertOrigin: %v", err)
	}
	var fwd AmesPacket
	err = fwd.Parse(out)
	switch {
	case binary.LittleEndian.Uint32(origin[:]) == MesaCookie:
		// An origin of 103.224.2.0 puts the mesa cookie at bytes 4-7:
		// the next hop hands the forward to mesa.
		if err != ErrAmesMesaCookie {
			t.Fatalf("cookie origin: %v", err)
		}
		return
	case IsSTUN(out):
		return
	case err != nil:
		t.Fatalf("forward of %x: %v", b, err)
	}
	wantOrigin := netip.AddrPortFrom(netip.AddrFrom4([4]byte{origin[3], origin[2], origin[1], origin[0]}),
		binary.LittleEndian.Uint16(origin[4:]))
	if !fwd.Relayed || fwd.OriginBytes != origin || fwd.Origin != wantOrigin || fwd.Mug != p.Mug || fwd.Reserved != 0 ||
		fwd.Sndr != p.Sndr || fwd.Rcvr != p.Rcvr || !bytes.Equal(fwd.Content, p.Content) {
		t.Fatalf("forward parsed as %+v from %+v", fwd, *p)
	}
	if NeedsOrigin(&fwd) {
		t.Fatalf("forward still needs an origin")
	}
}
