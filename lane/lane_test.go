package lane

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestShortMesaVectors checks EncodeShort and DecodeShort against every
// SHORT next hop vere wrote into testdata/mesa.
func TestShortMesaVectors(t *testing.T) {
	seen := 0
	for _, v := range readJSONL[mesaVector](t, mesaVectorsPath) {
		if v.Next == nil || v.Next.Type != "short" {
			continue
		}
		seen++
		checkShort(t, v.ID, v.Next.Raw, v.Next.IP, v.Next.Port)
	}
	if seen == 0 {
		t.Fatal("no SHORT next hops in the mesa vectors")
	}
}

// TestShortAmesOrigins checks the legacy ames origin, which has the SHORT
// layout, against every relayed vere-made ames packet.
func TestShortAmesOrigins(t *testing.T) {
	seen := 0
	for _, v := range readJSONL[amesVector](t, amesVectorsPath) {
		if !v.Relayed || v.Origin == nil {
			continue
		}
		seen++
		checkShort(t, v.ID, v.OriginHex, v.Origin.IP, v.Origin.Port)
	}
	if seen == 0 {
		t.Fatal("no relayed packets in the ames vectors")
	}
}

func checkShort(t *testing.T, id int, rawHex, ip string, port uint16) {
	t.Helper()
	raw, err := hex.DecodeString(rawHex)
	if err != nil || len(raw) != ShortLen {
		t.Fatalf("vector %d: bad raw %q", id, rawHex)
	}
	want := netip.AddrPortFrom(netip.MustParseAddr(ip), port)
	var b [ShortLen]byte
	copy(b[:], raw)
	if got := DecodeShort(b); got != want {
		t.Errorf("vector %d: DecodeShort(%x) = %v, want %v", id, raw, got, want)
	}
	enc, ok := EncodeShort(want)
	if !ok || enc != b {
		t.Errorf("vector %d: EncodeShort(%v) = %x, %v; want %x", id, want, enc, ok, raw)
	}
	mapped := netip.AddrPortFrom(netip.AddrFrom16(want.Addr().As16()), port)
	if enc, ok := EncodeShort(mapped); !ok || enc != b {
		t.Errorf("vector %d: EncodeShort(%v) = %x, %v; want %x", id, mapped, enc, ok, raw)
	}
	k := KeyOf(want)
	if enc, ok := k.Short(); !ok || enc != b {
		t.Errorf("vector %d: Key.Short(%v) = %x, %v; want %x", id, want, enc, ok, raw)
	}
}

func TestShortLayout(t *testing.T) {
	b, ok := EncodeShort(netip.MustParseAddrPort("127.0.0.1:13337"))
	if want := [ShortLen]byte{0x01, 0x00, 0x00, 0x7f, 0x19, 0x34}; !ok || b != want {
		t.Errorf("EncodeShort(127.0.0.1:13337) = %x, %v; want %x", b, ok, want)
	}
	// The origin a forwarding galaxy inserts for 1.2.3.4:13337 (ames README).
	b, ok = EncodeShort(netip.MustParseAddrPort("1.2.3.4:13337"))
	if want := [ShortLen]byte{0x04, 0x03, 0x02, 0x01, 0x19, 0x34}; !ok || b != want {
		t.Errorf("EncodeShort(1.2.3.4:13337) = %x, %v; want %x", b, ok, want)
	}
	for _, ap := range []netip.AddrPort{
		netip.MustParseAddrPort("[2001:db8::1]:13337"),
		netip.MustParseAddrPort("[::1]:1"),
		{},
	} {
		if b, ok := EncodeShort(ap); ok || b != ([ShortLen]byte{}) {
			t.Errorf("EncodeShort(%v) = %x, %v; want zero, false", ap, b, ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		b, _ := EncodeShort(netip.MustParseAddrPort("10.1.2.3:4"))
		_ = DecodeShort(b)
	}); n != 0 {
		t.Errorf("EncodeShort/DecodeShort: %v allocs per run, want 0", n)
	}
}

func TestCanon(t *testing.T) {
	for _, v := range []struct{ in, want string }{
		{"[::ffff:1.2.3.4]:5", "1.2.3.4:5"},
		{"1.2.3.4:5", "1.2.3.4:5"},
		{"[2001:db8::1]:5", "[2001:db8::1]:5"},
		{"[fe80::1%eth0]:5", "[fe80::1]:5"},
	} {
		got := Canon(netip.MustParseAddrPort(v.in))
		if got != netip.MustParseAddrPort(v.want) {
			t.Errorf("Canon(%s) = %v, want %s", v.in, got, v.want)
		}
		if KeyOf(got).AddrPort() != got {
			t.Errorf("KeyOf(Canon(%s)).AddrPort() = %v, want %v", v.in, KeyOf(got).AddrPort(), got)
		}
	}
	if got := Canon(netip.AddrPort{}); got.IsValid() {
		t.Errorf("Canon(invalid) = %v", got)
	}
}

func TestParseLane(t *testing.T) {
	for _, v := range []struct{ in, want string }{
		{"127.0.0.1:13337", "127.0.0.1:13337"},
		{"[::ffff:127.0.0.1]:13337", "127.0.0.1:13337"},
		{"[2001:db8::1]:443", "[2001:db8::1]:443"},
	} {
		got, err := ParseLane(v.in)
		if err != nil || got != netip.MustParseAddrPort(v.want) {
			t.Errorf("ParseLane(%q) = %v, %v; want %s", v.in, got, err, v.want)
		}
	}
	for _, in := range []string{"", "1.2.3.4", "1.2.3.4:0", "1.2.3.4:65536", "host:1", "1.2.3.4:x"} {
		if got, err := ParseLane(in); !errors.Is(err, ErrInvalidLane) {
			t.Errorf("ParseLane(%q) = %v, %v; want ErrInvalidLane", in, got, err)
		}
	}
}

func FuzzShortRoundTrip(f *testing.F) {
	f.Add([]byte{0x01, 0x00, 0x00, 0x7f, 0x19, 0x34})
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) < ShortLen {
			return
		}
		var b [ShortLen]byte
		copy(b[:], raw)
		ap := DecodeShort(b)
		if !ap.Addr().Is4() {
			t.Fatalf("DecodeShort(%x) = %v, not IPv4", b, ap)
		}
		again, ok := EncodeShort(ap)
		if !ok || again != b {
			t.Fatalf("EncodeShort(DecodeShort(%x)) = %x, %v", b, again, ok)
		}
	})
}

func TestPublicAddr(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
	}{
		{"203.0.113.7", true}, {"8.8.8.8", true}, {"2001:db8::1", true}, {"2a00:1450::1", true},
		{"127.0.0.1", false}, {"127.0.0.53", false}, {"10.1.2.3", false}, {"172.16.0.1", false},
		{"192.168.1.1", false}, {"169.254.13.37", false}, {"0.0.0.0", false}, {"0.1.2.3", false},
		{"100.64.0.1", false}, {"224.0.0.1", false}, {"239.1.2.3", false}, {"255.255.255.255", false},
		{"240.0.0.1", false}, {"198.18.0.1", false}, {"192.0.0.8", false},
		{"::1", false}, {"::", false}, {"fe80::1", false}, {"fd00::1", false}, {"ff02::1", false},
		{"::ffff:127.0.0.1", false}, {"::ffff:203.0.113.7", true}, {"100::1", false},
	} {
		if got := PublicAddr(netip.MustParseAddr(c.addr)); got != c.public {
			t.Errorf("PublicAddr(%s) = %v, want %v", c.addr, got, c.public)
		}
	}
}

// TestPublic4MatchesPrefixes: the octet fast path agrees with netip's
// predicates and the prefix table on every /16 (and every address of the
// blocks smaller than that).
func TestPublic4MatchesPrefixes(t *testing.T) {
	slow := func(a netip.Addr) bool {
		if a.IsUnspecified() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() ||
			a.IsLinkLocalMulticast() || a.IsMulticast() || a.IsInterfaceLocalMulticast() {
			return false
		}
		for _, p := range nonPublic {
			if p.Contains(a) {
				return false
			}
		}
		return true
	}
	for hi := 0; hi < 1<<16; hi++ {
		for _, lo := range []int{0, 1, 255 << 8, 0xFFFF} {
			b := [4]byte{byte(hi >> 8), byte(hi), byte(lo >> 8), byte(lo)}
			if a := netip.AddrFrom4(b); public4(b) != slow(a) {
				t.Fatalf("%v: fast %v, prefixes %v", a, public4(b), slow(a))
			}
		}
	}
}

// TestKeySource: an IPv4 lane's source is its address, an IPv6 lane's its
// /64; the port never counts.
func TestKeySource(t *testing.T) {
	k := func(s string) Key { return KeyOf(netip.MustParseAddrPort(s)) }
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"198.51.100.1:1000", "198.51.100.1:2000", true},
		{"198.51.100.1:1000", "198.51.100.2:1000", false},
		{"[2001:db8:1:2::1]:1000", "[2001:db8:1:2:ffff::9]:2000", true},
		{"[2001:db8:1:2::1]:1000", "[2001:db8:1:3::1]:1000", false},
		{"[::ffff:198.51.100.1]:1000", "198.51.100.1:1000", true},
		{"[::198.51.100.1]:1000", "198.51.100.1:1000", false}, // IPv4-compatible is IPv6
	} {
		if got := k(c.a).Source() == k(c.b).Source(); got != c.same {
			t.Errorf("%s and %s one source: %v, want %v", c.a, c.b, got, c.same)
		}
	}
	if !k("198.51.100.1:1").Is4() || k("[2001:db8::1]:1").Is4() || k("[::198.51.100.1]:1").Is4() {
		t.Error("Is4 wrong")
	}
}

// TestKeySetIsKeyOf: Set, which writes a Key in place, makes what KeyOf
// returns, over whatever the Key held before.
func TestKeySetIsKeyOf(t *testing.T) {
	k := Key{IP: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Port: 65535}
	for _, s := range []string{"1.2.3.4:5", "[::ffff:1.2.3.4]:5", "[2001:db8::1]:13337", "[fe80::1%eth0]:1", "0.0.0.0:0", "[::]:0"} {
		ap := netip.MustParseAddrPort(s)
		k.Set(ap)
		if k != KeyOf(ap) {
			t.Errorf("%s: Set made %v, KeyOf %v", s, k, KeyOf(ap))
		}
	}
	var zero netip.AddrPort
	k.Set(zero)
	if k != KeyOf(zero) {
		t.Errorf("the zero AddrPort: Set made %v, KeyOf %v", k, KeyOf(zero))
	}
	// Random IPv4 and IPv6 lanes, and IPv4-mapped IPv6 ones (As16's path,
	// which must give the same Key as the IPv4 lane).
	rng := rand.New(rand.NewPCG(3, 5))
	for i := 0; i < 3000; i++ {
		var b [16]byte
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		port := uint16(rng.Uint32())
		var ap netip.AddrPort
		switch i % 3 {
		case 0:
			ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[12:16])), port)
		case 1:
			ap = netip.AddrPortFrom(netip.AddrFrom16(b), port)
		case 2:
			ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[12:16])), port)
			k.Set(netip.AddrPortFrom(netip.AddrFrom16(ap.Addr().As16()), port))
			if k != KeyOf(ap) {
				t.Fatalf("%v, IPv4-mapped: Set made %v, KeyOf of the IPv4 lane %v", ap, k, KeyOf(ap))
			}
		}
		k.Set(ap)
		if k != KeyOf(ap) {
			t.Fatalf("%v: Set made %v, KeyOf %v", ap, k, KeyOf(ap))
		}
	}
}

// TestKeyShortIsEncodeShort: Key.Short is EncodeShort of the Key's lane,
// for IPv4 lanes, IPv6 lanes, near-misses of the IPv4-mapped prefix and
// the zero Key.
func TestKeyShortIsEncodeShort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	keys := []Key{{}, KeyOf(netip.MustParseAddrPort("127.0.0.1:13337")), KeyOf(netip.MustParseAddrPort("[2001:db8::1]:1"))}
	for i := 0; i < 2000; i++ {
		var k Key
		for j := range k.IP {
			k.IP[j] = byte(rng.Uint32())
		}
		k.Port = uint16(rng.Uint32())
		switch i % 4 {
		case 0: // IPv4-mapped
			k.IP = netip.AddrFrom4([4]byte(k.IP[12:16])).As16()
		case 1: // one byte off the mapped prefix
			k.IP = netip.AddrFrom4([4]byte(k.IP[12:16])).As16()
			k.IP[rng.IntN(12)] ^= 1 << rng.IntN(8)
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		got, gotOK := k.Short()
		want, wantOK := EncodeShort(k.AddrPort())
		if got != want || gotOK != wantOK {
			t.Fatalf("%v: Short %x %v, EncodeShort %x %v", k, got, gotOK, want, wantOK)
		}
	}
}

// TestAddrPortOfIsUnmap: AddrPortOf, which reads a Key by words in place,
// gives what netip's own AddrFrom16 and Unmap give for the Key's address:
// for random addresses, IPv4-mapped ones, every near-miss of the mapped
// prefix (one byte of it changed) and the zero Key.
func TestAddrPortOfIsUnmap(t *testing.T) {
	want := func(k *Key) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom16(k.IP).Unmap(), k.Port)
	}
	check := func(k Key) {
		t.Helper()
		if got := AddrPortOf(&k); got != want(&k) {
			t.Fatalf("AddrPortOf(%x:%d) = %v, want %v", k.IP, k.Port, got, want(&k))
		}
		if got := k.AddrPort(); got != want(&k) {
			t.Fatalf("(%x:%d).AddrPort() = %v, want %v", k.IP, k.Port, got, want(&k))
		}
	}
	check(Key{})
	rng := rand.New(rand.NewPCG(13, 17))
	for i := 0; i < 3000; i++ {
		var k Key
		for j := range k.IP {
			k.IP[j] = byte(rng.Uint32())
		}
		k.Port = uint16(rng.Uint32())
		check(k)
		k.IP = netip.AddrFrom4([4]byte(k.IP[12:16])).As16()
		check(k)
		near := k
		near.IP[i%12] ^= byte(1 + rng.IntN(255))
		check(near)
	}
}
