package scry

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"path/filepath"
	"testing"
)

// stunVector is one line of testdata/stun/stun-vectors.jsonl: a request
// (vere's client's, or RFC 5769's), the lane it was sent from, and what
// vere's galaxy answered.
type stunVector struct {
	ID       int
	What     string
	From     string
	Request  string
	Response string
}

func stunVectors(tb testing.TB) []stunVector {
	tb.Helper()
	return amesReadJSONL[stunVector](tb, filepath.Join("..", "stun", "stun-vectors.jsonl"))
}

// The sample responses of RFC 5769 sections 2.2 and 2.3, to the request
// amesRFC5769Request: SOFTWARE, XOR-MAPPED-ADDRESS, MESSAGE-INTEGRITY and
// FINGERPRINT, mapped to 192.0.2.1:32853 and
// [2001:db8:1234:5678:11:2233:4455:6677]:32853.
const (
	stunRFC5769Response4 = "0101003c2112a442b7e7a701bc34d686fa87dfae8022000b7465737420766563746f7220" +
		"002000080001a147e112a643000800142b91f599fd9e90c38c7489f92af9ba53f06be7d780280004c07d4c96"
	stunRFC5769Response6 = "010100482112a442b7e7a701bc34d686fa87dfae8022000b7465737420766563746f7220" +
		"002000140002a1470113a9faa5d3f179bc25f4b5bed2b9d900080014a382954e4be67bf11784c97c8292c275" +
		"bfe3ed4180280004c8fb0b4c"
)

// TestSTUNVectors: every request vere's galaxy answered parses, and the
// response built for its lane is vere's byte for byte.
func TestSTUNVectors(t *testing.T) {
	vs := stunVectors(t)
	if len(vs) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range vs {
		req, want := amesUnhex(t, v.Request), amesUnhex(t, v.Response)
		from := netip.MustParseAddrPort(v.From)
		if !IsSTUN(req) {
			t.Errorf("%d: IsSTUN false", v.ID)
		}
		var q STUNRequest
		if err := q.Parse(req); err != nil {
			t.Errorf("%d: Parse: %v", v.ID, err)
			continue
		}
		if !bytes.Equal(q.TxID[:], req[8:20]) {
			t.Errorf("%d: txid %x", v.ID, q.TxID)
		}
		if got := q.Append(nil); !bytes.Equal(got, req) {
			t.Errorf("%d: request re-encodes as %x", v.ID, got)
		}
		resp := STUNResponse{TxID: q.TxID, Mapped: from}
		got := resp.Append(nil)
		if !bytes.Equal(got, want) {
			t.Errorf("%d: response\n got %x\nwant %x (vere)", v.ID, got, want)
		}
		if len(got) != resp.Len() || len(got) != STUNResponseLen4 {
			t.Errorf("%d: %d bytes, Len %d", v.ID, len(got), resp.Len())
		}
		var p STUNResponse
		if err := p.Parse(want); err != nil || p != resp {
			t.Errorf("%d: vere's response parses as %+v, %v; want %+v", v.ID, p, err, resp)
		}
	}
	// vere's request is the 28-byte one with no attributes.
	q := STUNRequest{TxID: [12]byte{1, 2, 3}}
	if b := q.Append(nil); len(b) != STUNRequestMinLen || !IsSTUN(b) {
		t.Errorf("bare request %x", b)
	}
}

// TestSTUNRFC5769Responses: the RFC's sample responses decode to its
// lanes, and Append writes the same XOR-MAPPED-ADDRESS bytes for them.
func TestSTUNRFC5769Responses(t *testing.T) {
	for _, c := range []struct {
		hex, lane string
		attrAt    int // offset of XOR-MAPPED-ADDRESS
	}{
		{stunRFC5769Response4, "192.0.2.1:32853", 36},
		{stunRFC5769Response6, "[2001:db8:1234:5678:11:2233:4455:6677]:32853", 36},
	} {
		b := amesUnhex(t, c.hex)
		want := netip.MustParseAddrPort(c.lane)
		var p STUNResponse
		if err := p.Parse(b); err != nil || p.Mapped != want || !bytes.Equal(p.TxID[:], b[8:20]) {
			t.Errorf("%s: %+v, %v", c.lane, p, err)
			continue
		}
		ours := p.Append(nil)
		n := p.Len() - STUNHeaderLen - 8
		if !bytes.Equal(ours[STUNHeaderLen:STUNHeaderLen+n], b[c.attrAt:c.attrAt+n]) {
			t.Errorf("%s: XOR-MAPPED-ADDRESS %x, RFC %x", c.lane, ours[20:20+n], b[c.attrAt:c.attrAt+n])
		}
		var back STUNResponse
		if err := back.Parse(ours); err != nil || back != p {
			t.Errorf("%s: round trip %+v, %v", c.lane, back, err)
		}
	}
	// An IPv4-mapped lane is written as IPv4.
	p := STUNResponse{Mapped: netip.MustParseAddrPort("[::ffff:192.0.2.1]:80")}
	if b := p.Append(nil); len(b) != STUNResponseLen4 || b[25] != 1 {
		t.Errorf("4in6: %x", b)
	}
}

// stunFixFingerprint rewrites b's last 4 bytes as the FINGERPRINT of the
// rest, so a test can change a request and keep it otherwise valid.
func stunFixFingerprint(b []byte) []byte {
	binary.BigEndian.PutUint32(b[len(b)-4:], stunFingerprint(b[:len(b)-8]))
	return b
}

func TestSTUNRequestRejects(t *testing.T) {
	vere := (&STUNRequest{TxID: [12]byte{9, 8, 7}}).Append(nil)
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(vere)) }
	software := []byte{0x80, 0x22, 0x00, 0x03, 'a', 'b', 'c', 0}
	withAttr := (&STUNRequest{Attrs: software}).Append(nil)
	cases := []struct {
		name string
		b    []byte
		want STUNError
	}{
		{"empty", nil, ErrSTUNShort},
		{"19 bytes", vere[:19], ErrSTUNShort},
		{"header only", stunFixLength(bytes.Clone(vere[:20])), ErrSTUNFingerprint},
		{"response", mod(func(b []byte) []byte { b[0] = 1; return stunFixFingerprint(b) }), ErrSTUNType},
		{"indication", mod(func(b []byte) []byte { b[1] = 0x11; return stunFixFingerprint(b) }), ErrSTUNType},
		{"cookie", mod(func(b []byte) []byte { b[4] ^= 1; return stunFixFingerprint(b) }), ErrSTUNCookie},
		{"length +4", mod(func(b []byte) []byte { b[3] += 4; return stunFixFingerprint(b) }), ErrSTUNLength},
		{"length -4", mod(func(b []byte) []byte { b[3] -= 4; return stunFixFingerprint(b) }), ErrSTUNLength},
		{"odd length", stunFixLength(append(bytes.Clone(withAttr), 0)), ErrSTUNLength},
		{"crc", mod(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrSTUNFingerprint},
		{"txid changed", mod(func(b []byte) []byte { b[10] ^= 1; return b }), ErrSTUNFingerprint},
		{"no fingerprint", stunFixLength(append(bytes.Clone(vere[:20]), software...)), ErrSTUNFingerprint},
		{"fingerprint first", stunFixLength(append(bytes.Clone(vere), software...)), ErrSTUNFingerprint},
		{"attribute overruns", mod(func(b []byte) []byte {
			// SOFTWARE claiming 12 bytes where 8 are left.
			b = stunFixLength(append(b[:20], 0x80, 0x22, 0x00, 0x0c, 0, 0, 0, 0))
			return b
		}), ErrSTUNAttribute},
		{"attribute header cut", stunFixLength(append(bytes.Clone(vere), 0x80, 0x22, 0x00, 0x00)[:len(vere)+4]), ErrSTUNFingerprint},
	}
	for _, c := range cases {
		var q STUNRequest
		if err := q.Parse(c.b); err != c.want {
			t.Errorf("%s: Parse %x = %v, want %v", c.name, c.b, err, c.want)
		}
	}
	var q STUNRequest
	if err := q.Parse(withAttr); err != nil || !bytes.Equal(q.Attrs, software) {
		t.Errorf("request with SOFTWARE: %v, attrs %x", err, q.Attrs)
	}
	rfc := amesUnhex(t, amesRFC5769Request)
	if err := q.Parse(rfc); err != nil || len(q.Attrs) != len(rfc)-28 {
		t.Errorf("RFC 5769 request: %v", err)
	}
	for _, e := range []STUNError{ErrSTUNShort, ErrSTUNType, ErrSTUNCookie, ErrSTUNLength, ErrSTUNAttribute, ErrSTUNFingerprint, ErrSTUNNoMapped, ErrSTUNMapped} {
		if r := e.Reason(); r == "unknown" || e.Error() != "stun: "+r {
			t.Errorf("%d: %q %q", e, r, e.Error())
		}
	}
}

// stunFixLength sets b's length field to its length after the header.
func stunFixLength(b []byte) []byte {
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)-STUNHeaderLen))
	return b
}

func TestSTUNResponseRejects(t *testing.T) {
	good := (&STUNResponse{Mapped: netip.MustParseAddrPort("192.0.2.1:9")}).Append(nil)
	req := (&STUNRequest{}).Append(nil)
	for _, c := range []struct {
		name string
		b    []byte
		want STUNError
	}{
		{"request", req, ErrSTUNType},
		{"no mapped", stunFixLength(bytes.Clone(good[:20])), ErrSTUNNoMapped},
		{"family 3", func() []byte { b := bytes.Clone(good); b[25] = 3; return stunFixFingerprint(b) }(), ErrSTUNMapped},
		{"crc", func() []byte { b := bytes.Clone(good); b[39] ^= 1; return b }(), ErrSTUNFingerprint},
	} {
		var p STUNResponse
		if err := p.Parse(c.b); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestSTUNAllocatesNothing(t *testing.T) {
	req := (&STUNRequest{TxID: [12]byte{1}}).Append(nil)
	buf := make([]byte, 0, STUNResponseMaxLen)
	for _, lane := range []string{"192.0.2.1:9", "[2001:db8::1]:9"} {
		from := netip.MustParseAddrPort(lane)
		n := testing.AllocsPerRun(1000, func() {
			var q STUNRequest
			if q.Parse(req) != nil {
				t.Fatal("parse")
			}
			p := STUNResponse{TxID: q.TxID, Mapped: from}
			_ = p.Append(buf[:0])
		})
		if n != 0 {
			t.Errorf("%s: %v allocations", lane, n)
		}
	}
}

// FuzzSTUN: neither Parse panics; a request Parse accepts re-encodes as
// itself; the response to it for any lane parses back to that lane and
// transaction id, at most STUNResponseMaxLen bytes.
func FuzzSTUN(f *testing.F) {
	for _, v := range stunVectors(f) {
		f.Add(amesUnhex(f, v.Request), []byte{127, 0, 0, 1, 0x91, 0x2a})
		f.Add(amesUnhex(f, v.Response), []byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0})
	}
	for _, h := range []string{amesRFC5769Request, stunRFC5769Response4, stunRFC5769Response6} {
		f.Add(amesUnhex(f, h), []byte{})
	}
	f.Fuzz(func(t *testing.T, b, laneBytes []byte) {
		var from netip.AddrPort
		if len(laneBytes) >= 18 {
			from = netip.AddrPortFrom(netip.AddrFrom16([16]byte(laneBytes)), binary.BigEndian.Uint16(laneBytes[16:]))
		} else if len(laneBytes) >= 6 {
			from = netip.AddrPortFrom(netip.AddrFrom4([4]byte(laneBytes)), binary.BigEndian.Uint16(laneBytes[4:]))
		}
		var p STUNResponse
		if err := p.Parse(b); err != nil {
			if _, ok := err.(STUNError); !ok {
				t.Fatalf("response error %v of type %T", err, err)
			}
		}
		var q STUNRequest
		err := q.Parse(b)
		if err != nil {
			if _, ok := err.(STUNError); !ok {
				t.Fatalf("request error %v of type %T", err, err)
			}
			return
		}
		if got := q.Append(nil); !bytes.Equal(got, b) {
			t.Fatalf("request %x re-encodes as %x", b, got)
		}
		// vere takes every request Parse takes except those with the
		// FINGERPRINT pattern inside an earlier attribute (the pattern has
		// no border, so it cannot straddle Attrs and the real one).
		if want := !bytes.Contains(q.Attrs, []byte(amesSTUNFingerprintHdr)); IsSTUN(b) != want {
			t.Fatalf("Parse accepts %x; IsSTUN %v, want %v", b, !want, want)
		}
		r := STUNResponse{TxID: q.TxID, Mapped: from}
		out := r.Append(nil)
		if len(out) != r.Len() || len(out) > STUNResponseMaxLen {
			t.Fatalf("response %d bytes, Len %d", len(out), r.Len())
		}
		var back STUNResponse
		if err := back.Parse(out); err != nil || back.TxID != q.TxID || back.Mapped.Port() != from.Port() ||
			back.Mapped.Addr() != from.Addr().Unmap() && from.IsValid() {
			t.Fatalf("response to %v parses as %+v, %v", from, back, err)
		}
	})
}

// BenchmarkSTUN measures parsing vere's request and writing the response.
func BenchmarkSTUN(b *testing.B) {
	req := (&STUNRequest{TxID: [12]byte{1}}).Append(nil)
	buf := make([]byte, 0, STUNResponseMaxLen)
	from := netip.MustParseAddrPort("192.0.2.1:9")
	b.ReportAllocs()
	for b.Loop() {
		var q STUNRequest
		if q.Parse(req) != nil {
			b.Fatal("parse")
		}
		p := STUNResponse{TxID: q.TxID, Mapped: from}
		buf = p.Append(buf[:0])
	}
}
