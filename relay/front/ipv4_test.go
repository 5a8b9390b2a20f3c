package front

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strconv"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var (
	testSrc = netip.MustParseAddrPort("10.99.0.7:4001")
	testDst = netip.MustParseAddrPort("10.99.0.5:4000")
)

// fixIPChecksum recomputes the IPv4 header checksum of p after a test
// edited the header, so that only the edited field is wrong.
func fixIPChecksum(p []byte) []byte {
	ihl := int(p[0]&0x0f) * 4
	p[10], p[11] = 0, 0
	binary.BigEndian.PutUint16(p[10:], ^checksum(p[:ihl], 0))
	return p
}

// fixUDPChecksum recomputes the UDP checksum of p (no IP options).
func fixUDPChecksum(p []byte) []byte {
	udp := p[IPv4HeaderLen:]
	udp[6], udp[7] = 0, 0
	binary.BigEndian.PutUint16(udp[6:], ^checksum(udp, pseudoHeaderSum(p[12:20], len(udp))))
	return p
}

func testPacket(payload string) []byte {
	return AppendUDP4(nil, testSrc, testDst, []byte(payload))
}

// withOptions returns the packet with an n-word IP options field inserted
// (no-op options), both checksums valid.
func withOptions(words int) []byte {
	p := testPacket("opts")
	opts := bytes.Repeat([]byte{1}, 4*words) // NOP
	q := append(append(append([]byte{}, p[:IPv4HeaderLen]...), opts...), p[IPv4HeaderLen:]...)
	q[0] = 4<<4 | byte(5+words)
	binary.BigEndian.PutUint16(q[2:], uint16(len(q)))
	return fixIPChecksum(q)
}

// parseErrorCase is a packet ParseUDP4 must refuse, and why.
type parseErrorCase struct {
	name string
	b    []byte
	want error
}

// parseErrorCases has a packet for every error ParseUDP4 returns; they
// are also FuzzParseUDP4's seeds.
func parseErrorCases() []parseErrorCase {
	edit := func(f func(p []byte) []byte) []byte { return f(testPacket("hello")) }
	return []parseErrorCase{
		{"empty", nil, ErrShort},
		{"short ipv4", testPacket("hello")[:19], ErrShort},
		{"ipv6", append([]byte{0x60}, make([]byte, 47)...), ErrVersion},
		{"short ipv6", []byte{0x60, 0}, ErrVersion},
		{"version 5", edit(func(p []byte) []byte { p[0] = 5<<4 | 5; return fixIPChecksum(p) }), ErrVersion},
		{"ihl 4", edit(func(p []byte) []byte { p[0] = 4<<4 | 4; return p }), ErrHeaderLength},
		{"ihl past end", withOptions(10)[:40], ErrShort},
		{"total > len", testPacket("hello")[:30], ErrTotalLength},
		{"total < ihl", edit(func(p []byte) []byte { binary.BigEndian.PutUint16(p[2:], 19); return fixIPChecksum(p) }), ErrTotalLength},
		{"more fragments", edit(func(p []byte) []byte { p[6] |= 0x20; return fixIPChecksum(p) }), ErrFragment},
		{"fragment offset", edit(func(p []byte) []byte { p[7] = 1; return fixIPChecksum(p) }), ErrFragment},
		{"icmp", edit(func(p []byte) []byte { p[9] = 1; return fixIPChecksum(p) }), ErrProtocol},
		{"header checksum", edit(func(p []byte) []byte { p[8]--; return p }), ErrHeaderChecksum},
		{"no udp header", edit(func(p []byte) []byte {
			binary.BigEndian.PutUint16(p[2:], 24)
			return fixIPChecksum(p)
		}), ErrShort},
		{"udp length short", edit(func(p []byte) []byte {
			binary.BigEndian.PutUint16(p[24:], 12)
			return fixUDPChecksum(p)
		}), ErrUDPLength},
		{"udp length long", edit(func(p []byte) []byte {
			binary.BigEndian.PutUint16(p[24:], 14)
			return fixUDPChecksum(p)
		}), ErrUDPLength},
		{"udp checksum", edit(func(p []byte) []byte { p[len(p)-1] ^= 1; return p }), ErrUDPChecksum},
	}
}

func TestParseUDP4Errors(t *testing.T) {
	for _, tt := range parseErrorCases() {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := ParseUDP4(tt.b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseUDP4 = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseUDP4Accepts(t *testing.T) {
	noSum := testPacket("no checksum")
	noSum[26], noSum[27] = 0, 0
	trailing := append(testPacket("trailing"), 0xde, 0xad)
	tests := []struct {
		name    string
		b       []byte
		payload string
	}{
		{"plain", testPacket("hello"), "hello"},
		{"empty payload", testPacket(""), ""},
		{"odd length", testPacket("abc"), "abc"},
		{"zero udp checksum", noSum, "no checksum"},
		{"options", withOptions(3), "opts"},
		{"max options", withOptions(10), "opts"},
		{"trailing bytes", trailing, "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, dst, payload, err := ParseUDP4(tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if src != testSrc || dst != testDst || string(payload) != tt.payload {
				t.Fatalf("got %v → %v %q, want %v → %v %q", src, dst, payload, testSrc, testDst, tt.payload)
			}
		})
	}
}

// TestAppendUDP4MatchesGopacket checks the encoding byte for byte against
// gopacket's serialiser and its checksum verification.
func TestAppendUDP4MatchesGopacket(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 8, 31, 32, 33, 1000, 4000, MaxUDP4Payload} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i*7 + 3)
		}
		got := AppendUDP4([]byte("prefix"), testSrc, testDst, payload)
		if string(got[:6]) != "prefix" {
			t.Fatalf("n=%d: prefix overwritten", n)
		}
		got = got[6:]

		ip := &layers.IPv4{
			Version: 4, IHL: 5, TTL: 64, Flags: layers.IPv4DontFragment,
			Protocol: layers.IPProtocolUDP,
			SrcIP:    testSrc.Addr().AsSlice(), DstIP: testDst.Addr().AsSlice(),
		}
		udp := &layers.UDP{SrcPort: layers.UDPPort(testSrc.Port()), DstPort: layers.UDPPort(testDst.Port())}
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		buf := gopacket.NewSerializeBuffer()
		opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
		if err := gopacket.SerializeLayers(buf, opts, ip, udp, gopacket.Payload(payload)); err != nil {
			t.Fatal(err)
		}
		want := buf.Bytes()
		if binary.BigEndian.Uint16(want[26:]) == 0 {
			want[26], want[27] = 0xff, 0xff // RFC 768: a computed 0 is sent as 0xffff
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("n=%d: AppendUDP4\n%x\nwant (gopacket)\n%x", n, got[:min(len(got), 64)], want[:min(len(want), 64)])
		}

		pkt := gopacket.NewPacket(got, layers.LayerTypeIPv4, gopacket.Default)
		ip4, udp4 := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4), pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if err := udp4.SetNetworkLayerForChecksum(ip4); err != nil {
			t.Fatal(err)
		}
		for _, l := range []interface {
			VerifyChecksum() (error, gopacket.ChecksumVerificationResult)
		}{ip4, udp4} {
			if err, res := l.VerifyChecksum(); err != nil || !res.Valid {
				t.Fatalf("n=%d: gopacket says checksum invalid: %v %+v", n, err, res)
			}
		}
		src, dst, p, err := ParseUDP4(got)
		if err != nil || src != testSrc || dst != testDst || !bytes.Equal(p, payload) {
			t.Fatalf("n=%d: round trip: %v %v %v", n, src, dst, err)
		}
	}
}

func TestAppendUDP4Panics(t *testing.T) {
	v6 := netip.MustParseAddrPort("[2001:db8::1]:1")
	for name, f := range map[string]func(){
		"ipv6 source": func() { AppendUDP4(nil, v6, testDst, nil) },
		"ipv6 dest":   func() { AppendUDP4(nil, testSrc, v6, nil) },
		"too long":    func() { AppendUDP4(nil, testSrc, testDst, make([]byte, MaxUDP4Payload+1)) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
	// IPv4-mapped addresses are IPv4.
	mapped := netip.AddrPortFrom(netip.AddrFrom16(testSrc.Addr().As16()), testSrc.Port())
	if src, _, _, err := ParseUDP4(AppendUDP4(nil, mapped, testDst, nil)); err != nil || src != testSrc {
		t.Fatalf("mapped source: %v %v", src, err)
	}
}

func TestChecksumMatchesRFC1071(t *testing.T) {
	// Sum of 16-bit words, the textbook way.
	ref := func(b []byte) uint16 {
		var s uint32
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			s += uint32(b[len(b)-1]) << 8
		}
		for s > 0xffff {
			s = s>>16 + s&0xffff
		}
		return uint16(s)
	}
	b := make([]byte, 300)
	for i := range b {
		b[i] = byte(255 - i) // high bytes: many carries
	}
	for n := range len(b) {
		if got, want := checksum(b[:n], 0), ref(b[:n]); got != want {
			t.Fatalf("len %d: checksum %#x, want %#x", n, got, want)
		}
	}
	ones := bytes.Repeat([]byte{0xff}, 64)
	if got := checksum(ones, 0); got != 0xffff {
		t.Fatalf("all ones: %#x", got)
	}
}

func TestCodecAllocs(t *testing.T) {
	payload := make([]byte, 1200)
	buf := make([]byte, 0, 2048)
	pkt := AppendUDP4(nil, testSrc, testDst, payload)
	if n := testing.AllocsPerRun(100, func() {
		buf = AppendUDP4(buf[:0], testSrc, testDst, payload)
	}); n != 0 {
		t.Errorf("AppendUDP4: %v allocations per run, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, _, _, err := ParseUDP4(pkt); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ParseUDP4: %v allocations per run, want 0", n)
	}
}

func FuzzParseUDP4(f *testing.F) {
	f.Add(testPacket("hello"))
	f.Add(testPacket(""))
	f.Add(withOptions(3))
	for _, tt := range parseErrorCases() {
		f.Add(tt.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		src, dst, payload, err := ParseUDP4(b)
		if err != nil {
			if src.IsValid() || dst.IsValid() || payload != nil {
				t.Fatalf("error %v with results %v %v %d", err, src, dst, len(payload))
			}
			return
		}
		// A packet that parses re-encodes (without options, trailing
		// bytes or a zero checksum) to one that parses the same.
		again := AppendUDP4(nil, src, dst, payload)
		src2, dst2, payload2, err := ParseUDP4(again)
		if err != nil || src2 != src || dst2 != dst || !bytes.Equal(payload2, payload) {
			t.Fatalf("round trip: %v %v %v %v", src2, dst2, len(payload2), err)
		}
		// Any one bit flipped is caught by a checksum or a check, unless
		// it zeroes the UDP checksum, which then means "none".
		for i := range again {
			flipped := bytes.Clone(again)
			flipped[i] ^= 0x10
			if binary.BigEndian.Uint16(flipped[26:]) == 0 {
				continue
			}
			if _, _, _, err := ParseUDP4(flipped); err == nil {
				t.Fatalf("bit 4 of byte %d flipped: still parses", i)
			}
		}
	})
}

func BenchmarkAppendUDP4(b *testing.B) {
	payload := make([]byte, 1200)
	buf := make([]byte, 0, 2048)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendUDP4(buf[:0], testSrc, testDst, payload)
	}
}

func BenchmarkParseUDP4(b *testing.B) {
	for _, n := range []int{100, 1200, 8000} {
		pkt := AppendUDP4(nil, testSrc, testDst, make([]byte, n))
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := ParseUDP4(pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
