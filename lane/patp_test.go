package lane

import (
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// shipVectors are the reference names of urbit-network.md ("Ships"), from
// urbit/urbit tests/sys/hoon/auras.hoon and ob.hoon and urbit/urbit-ob test/.
var shipVectors = []struct {
	patp string
	n    uint64
}{
	{"~zod", 0},
	{"~lex", 200},
	{"~marzod", 256},
	{"~binzod", 512},
	{"~samzod", 1024},
	{"~fipfes", 65535},
	{"~dapnep-ronmyl", 65536},
	{"~poldec-tonteg", 9896704},
	{"~nidsut-tomdun", 15663360},
	{"~morlyd-mogmev", 3108299008},
	{"~fipfes-morlyd", 479733505},
	{"~dilwes-fadnel", 23554048},
	{"~fipfes-dilwes", 529511092},
	{"~hossev-roppec", 1859915444},
	{"~fipfes-hossev", 145391618},
	{"~dostec-risfen", 4294967295},
	{"~sampel-palnet", 1624961343},
}

func TestShipVectors(t *testing.T) {
	for _, v := range shipVectors {
		s := ShipFromUint64(v.n)
		if got := s.String(); got != v.patp {
			t.Errorf("ShipFromUint64(%d).String() = %q, want %q", v.n, got, v.patp)
		}
		for _, in := range []string{v.patp, strings.TrimPrefix(v.patp, "~")} {
			got, err := ParseShip(in)
			if err != nil || got != s {
				t.Errorf("ParseShip(%q) = %v, %v; want %d", in, got.Decimal(), err, v.n)
			}
		}
	}
}

func TestObVectors(t *testing.T) {
	// urbit/urbit tests/sys/hoon/ob.hoon and urbit-network.md.
	if got := fein32(123456789); got != 1897766331 {
		t.Errorf("fein(123456789) = %d, want 1897766331", got)
	}
	if got := fein32(15663360); got != 1208402137 {
		t.Errorf("fein(15663360) = %d, want 1208402137", got)
	}
	if got := feis(123456789); got != 2060458291 {
		t.Errorf("feis(123456789) = %d, want 2060458291", got)
	}
	if got := fynd32(1897766331); got != 123456789 {
		t.Errorf("fynd(1897766331) = %d, want 123456789", got)
	}
	if got := tail(2060458291); got != 123456789 {
		t.Errorf("tail(2060458291) = %d, want 123456789", got)
	}
	// (muk 0xb76d.5eed 2 0) and (muk 0xb76d.5eed 2 1) in Hoon.
	if got := murmur3x86_32Of2(0xb76d5eed, 0); got != 3187942399 {
		t.Errorf("muk(0xb76d5eed, 2, 0) = %d, want 3187942399", got)
	}
	if got := murmur3x86_32Of2(0xb76d5eed, 1); got != 1952606156 {
		t.Errorf("muk(0xb76d5eed, 2, 1) = %d, want 1952606156", got)
	}
}

// TestFeistelLegacyCases checks that the arvo#1105 branch is taken and
// inverted: inputs whose last right half equals a (0xffff) would otherwise
// collide with another input.
func TestFeistelLegacyCases(t *testing.T) {
	hits := 0
	for m := uint64(0); m < feistelK && hits < 3; m += 7919 {
		// Re-run the rounds to see which branch fe takes.
		ell, arr := m%feistelA, m/feistelA
		for j := 1; j <= feistelRounds; j++ {
			f := uint64(feistelRound(j-1, arr))
			if j%2 != 0 {
				ell, arr = arr, (f+ell)%feistelA
			} else {
				ell, arr = arr, (f+ell)%feistelB
			}
		}
		if arr != feistelA {
			continue
		}
		hits++
		c := feistelEncrypt(m)
		if c != arr*feistelA+ell {
			t.Errorf("fe(%d) = %d, want legacy arr*a+ell = %d", m, c, arr*feistelA+ell)
		}
		if back := feistelDecrypt(c); back != m {
			t.Errorf("fen(fe(%d)) = %d", m, back)
		}
	}
	if hits == 0 {
		t.Fatal("no input took the arvo#1105 branch; widen the search")
	}
}

func TestFeisInverseSample(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(m uint32) {
		c := feis(m)
		if c >= feistelK {
			t.Fatalf("feis(%d) = %d, outside the domain", m, c)
		}
		if back := tail(c); back != m {
			t.Fatalf("tail(feis(%d)) = %d", m, back)
		}
	}
	for m := uint32(0); m < 1<<16; m++ {
		check(m)
	}
	for m := uint32(feistelK - 1<<16); m < feistelK; m++ {
		check(m)
	}
	for range 200_000 {
		check(r.Uint32N(feistelK))
	}
}

// TestFeisPermutationExhaustive checks that feis is a permutation of
// [0, 0xffff0000) and tail its inverse, on every input. It takes minutes,
// so it runs only with LANE_EXHAUSTIVE=1.
func TestFeisPermutationExhaustive(t *testing.T) {
	if os.Getenv("LANE_EXHAUSTIVE") == "" {
		t.Skip("set LANE_EXHAUSTIVE=1 to run")
	}
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	errs := make(chan uint32, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := uint64(w); m < feistelK; m += uint64(workers) {
				if c := feis(uint32(m)); c >= feistelK || tail(c) != uint32(m) {
					errs <- uint32(m)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for m := range errs {
		t.Errorf("feis(%d) = %d: outside the domain, or tail does not invert it", m, feis(m))
	}
}

func TestSyllableTables(t *testing.T) {
	if len(prefixSyllables) != 768 || len(suffixSyllables) != 768 {
		t.Fatalf("syllable tables are %d and %d bytes, want 768", len(prefixSyllables), len(suffixSyllables))
	}
	if !strings.HasPrefix(prefixSyllables, "dozmarbinwan") || !strings.HasPrefix(suffixSyllables, "zodnecbudwes") {
		t.Fatal("syllable tables start wrongly")
	}
	for _, tab := range []struct {
		syllables string
		index     *syllableIndex
	}{{prefixSyllables, prefixIndex}, {suffixSyllables, suffixIndex}} {
		seen := map[string]bool{}
		for i := range 256 {
			syl := tab.syllables[3*i : 3*i+3]
			if seen[syl] {
				t.Errorf("syllable %q repeated", syl)
			}
			seen[syl] = true
			if v, ok := tab.index.lookup(syl); !ok || int(v) != i {
				t.Errorf("lookup(%q) = %d, %v; want %d", syl, v, ok, i)
			}
		}
	}
	if _, ok := prefixIndex.lookup("zod"); ok {
		t.Error("zod is a suffix, not a prefix")
	}
	if _, ok := suffixIndex.lookup("doz"); ok {
		t.Error("doz is a prefix, not a suffix")
	}
}

func TestShipBoundaries(t *testing.T) {
	for _, v := range []struct {
		s    Ship
		patp string
		dec  string
	}{
		{ShipFromUint64(255), "~fes", "255"},
		{ShipFromUint64(256), "~marzod", "256"},
		{ShipFromUint64(65535), "~fipfes", "65535"},
		{ShipFromUint64(65536), "~dapnep-ronmyl", "65536"},
		{ShipFromUint64(1<<32 - 1), "~dostec-risfen", "4294967295"},
		// A moon's high 32 bits are not scrambled; its low 32 bits (0) are
		// below 0x10000 and are not scrambled either.
		{ShipFromUint64(1 << 32), "~doznec-dozzod-dozzod", "4294967296"},
		{ShipFromUint64(1<<64 - 1), "~fipfes-fipfes-dostec-risfen", "18446744073709551615"},
		// Comets are not scrambled at all.
		{Ship{Hi: 1}, "~doznec--dozzod-dozzod-dozzod-dozzod", "18446744073709551616"},
		{Ship{Hi: ^uint64(0), Lo: ^uint64(0)},
			"~fipfes-fipfes-fipfes-fipfes--fipfes-fipfes-fipfes-fipfes",
			"340282366920938463463374607431768211455"},
	} {
		if got := v.s.String(); got != v.patp {
			t.Errorf("%s.String() = %q, want %q", v.dec, got, v.patp)
		}
		if got := v.s.Decimal(); got != v.dec {
			t.Errorf("Decimal() = %q, want %q", got, v.dec)
		}
		for _, in := range []string{v.patp, v.dec} {
			if got, err := ParseShip(in); err != nil || got != v.s {
				t.Errorf("ParseShip(%q) = %s, %v; want %s", in, got.Decimal(), err, v.dec)
			}
		}
	}
	if len("~fipfes-fipfes-fipfes-fipfes--fipfes-fipfes-fipfes-fipfes") != MaxPatpLen {
		t.Errorf("MaxPatpLen = %d, want the length of the longest name", MaxPatpLen)
	}
}

func TestMoonsAndComets(t *testing.T) {
	// urbit-ob test/co.test.js (clan).
	for _, v := range []struct {
		patp  string
		class Class
	}{
		{"~doznec-bannux-nopfen", Moon},
		{"~dozryt--wolmep-racmyl-padpeg-mocryp", Comet},
		{"~dacsem-fipwex", Planet},
		{"~fassec", Star},
		{"~fes", Galaxy},
	} {
		s, err := ParseShip(v.patp)
		if err != nil {
			t.Errorf("ParseShip(%q): %v", v.patp, err)
			continue
		}
		if s.Class() != v.class {
			t.Errorf("%s.Class() = %s, want %s", v.patp, s.Class(), v.class)
		}
		if got := s.String(); got != v.patp {
			t.Errorf("round trip of %q gave %q", v.patp, got)
		}
	}
	// A moon prints as its high 32 bits, unscrambled, then the name of the
	// planet in its low 32 bits.
	planet, _ := ParseShip("~sampel-palnet")
	for _, v := range []struct {
		high uint64
		want string
	}{
		{1, "~doznec-sampel-palnet"},
		{0xffffffff, "~fipfes-fipfes-sampel-palnet"},
		{0x0101, "~marnec-sampel-palnet"},
	} {
		moon := ShipFromUint64(v.high<<32 | planet.Lo)
		if got := moon.String(); got != v.want {
			t.Errorf("moon %#x: String() = %q, want %q", v.high, got, v.want)
		}
		if moon.Sponsor() != planet {
			t.Errorf("moon %s: sponsor %s, want %s", moon, moon.Sponsor(), planet)
		}
	}
	// Random round trips in every class.
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20_000 {
		var s Ship
		switch i % 5 {
		case 0:
			s = ShipFromUint64(r.Uint64N(256))
		case 1:
			s = ShipFromUint64(256 + r.Uint64N(1<<16-256))
		case 2:
			s = ShipFromUint64(1<<16 + r.Uint64N(1<<32-1<<16))
		case 3:
			s = ShipFromUint64(1<<32 + r.Uint64N(1<<64-1<<32))
		case 4:
			s = Ship{Hi: 1 + r.Uint64N(1<<63), Lo: r.Uint64()}
		}
		name := s.String()
		got, err := ParseShip(name)
		if err != nil || got != s {
			t.Fatalf("ParseShip(%q) = %s, %v; want %s", name, got.Decimal(), err, s.Decimal())
		}
		got, err = ParseShip(s.Decimal())
		if err != nil || got != s {
			t.Fatalf("ParseShip(%q) = %s, %v", s.Decimal(), got.Decimal(), err)
		}
	}
}

func TestParseShipRejects(t *testing.T) {
	for _, in := range []string{
		"", "~", "~~zod", "~zo", "~zodd", "~xxx", "~doz", "~zodmar",
		"~Zod", "~ZOD", " ~zod", "~zod ", "~zod\n",
		"~marzod-", "-marzod", "~-marzod", "~marzod--", "~marzodnec",
		"~nidsut-tomdzn", "~sut-tomdun", "~nidsut-dun", "~nid-tomdun",
		"~nidsut_tomdun", "~nidsuttomdun", "~nidsut--tomdun", "~nidsut---tomdun",
		"~dozzod", "~doznec", "~dozzod-marzod", "~dozzod-sampel-palnet", "~dozzod-doznec-dozzod",
		"~dozryt-wolmep-racmyl-padpeg-mocryp",                              // comet needs "--"
		"~dozryt--wolmep-racmyl--padpeg-mocryp",                            // "--" in the wrong place
		"~doznec--bannux-nopfen",                                           // moon has no "--"
		"~fipfes-fipfes-fipfes-fipfes-fipfes--fipfes-fipfes-fipfes-fipfes", // 9 words
		"~123", "12a", "1.2345", "1.23", ".123", "123.", "1..234", "0.123", "1,234",
		"340282366920938463463374607431768211456",    // 2^128
		"999999999999999999999999999999999999999999", // far too big
		"-1", "+1", "0x10",
		strings.Repeat("a", 1000),
	} {
		s, err := ParseShip(in)
		if err == nil {
			t.Errorf("ParseShip(%q) = %s, want an error", in, s)
			continue
		}
		if !errors.Is(err, ErrInvalidShip) {
			t.Errorf("ParseShip(%q) error %v does not wrap ErrInvalidShip", in, err)
		}
	}
}

func TestParseShipDecimal(t *testing.T) {
	for _, v := range []struct {
		in   string
		want Ship
	}{
		{"0", Ship{}},
		{"000", Ship{}},
		{"1624961343", ShipFromUint64(1624961343)},
		{"1.624.961.343", ShipFromUint64(1624961343)},
		{"65.536", ShipFromUint64(65536)},
		{"18446744073709551616", Ship{Hi: 1}},
		{"340282366920938463463374607431768211455", Ship{Hi: ^uint64(0), Lo: ^uint64(0)}},
		{"340.282.366.920.938.463.463.374.607.431.768.211.455", Ship{Hi: ^uint64(0), Lo: ^uint64(0)}},
	} {
		got, err := ParseShip(v.in)
		if err != nil || got != v.want {
			t.Errorf("ParseShip(%q) = %s, %v; want %s", v.in, got.Decimal(), err, v.want.Decimal())
		}
	}
}

func TestPatpAllocs(t *testing.T) {
	ships := []Ship{{}, ShipFromUint64(1624961343), {Hi: ^uint64(0), Lo: ^uint64(0)}}
	buf := make([]byte, 0, MaxPatpLen)
	if n := testing.AllocsPerRun(100, func() {
		for _, s := range ships {
			buf = s.AppendPatp(buf[:0])
		}
	}); n != 0 {
		t.Errorf("AppendPatp: %v allocs per run, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = ships[1].String() }); n > 1 {
		t.Errorf("String: %v allocs per run, want at most 1", n)
	}
	names := []string{"~zod", "~sampel-palnet", "dozryt--wolmep-racmyl-padpeg-mocryp", "1624961343"}
	if n := testing.AllocsPerRun(100, func() {
		for _, name := range names {
			if _, err := ParseShip(name); err != nil {
				t.Fatal(err)
			}
		}
	}); n != 0 {
		t.Errorf("ParseShip: %v allocs per run, want 0", n)
	}
	dec := make([]byte, 0, MaxDecimalLen)
	if n := testing.AllocsPerRun(100, func() {
		for _, s := range ships {
			dec = s.AppendDecimal(dec[:0])
		}
	}); n != 0 {
		t.Errorf("AppendDecimal: %v allocs per run, want 0", n)
	}
}

func FuzzParseShip(f *testing.F) {
	for _, v := range shipVectors {
		f.Add(v.patp)
		f.Add(strings.TrimPrefix(v.patp, "~"))
	}
	for _, s := range []string{
		"~doznec-bannux-nopfen", "~dozryt--wolmep-racmyl-padpeg-mocryp",
		"~fipfes-fipfes-fipfes-fipfes--fipfes-fipfes-fipfes-fipfes",
		"0", "1.624.961.343", "340282366920938463463374607431768211455",
		"~dozzod-marzod", "~marzod-", "~nidsut--tomdun", "1..2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseShip(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidShip) {
				t.Fatalf("ParseShip(%q): error %v does not wrap ErrInvalidShip", in, err)
			}
			return
		}
		name := s.String()
		again, err := ParseShip(name)
		if err != nil || again != s {
			t.Fatalf("ParseShip(%q) = %s, but ParseShip(%q) = %s, %v", in, s.Decimal(), name, again.Decimal(), err)
		}
		if in[0] < '0' || in[0] > '9' {
			// @p input is accepted only in canonical form.
			if "~"+strings.TrimPrefix(in, "~") != name {
				t.Fatalf("ParseShip accepted %q, which prints as %q", in, name)
			}
		} else if dec, err := ParseShip(s.Decimal()); err != nil || dec != s {
			t.Fatalf("Decimal %q does not re-parse: %s, %v", s.Decimal(), dec.Decimal(), err)
		}
	})
}

var benchShips = []Ship{
	ShipFromUint64(200),
	ShipFromUint64(256),
	ShipFromUint64(1624961343),
	ShipFromUint64(0x0000_0101_60da_f13f),
	{Hi: 0x0011_8a3d_5c2e_99f0, Lo: 0x1234_5678_9abc_def0},
}

// benchSink keeps benchmark results alive.
var benchSink string

func BenchmarkString(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchSink = benchShips[i%len(benchShips)].String()
	}
}

func BenchmarkAppendPatp(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, MaxPatpLen)
	for i := 0; b.Loop(); i++ {
		buf = benchShips[i%len(benchShips)].AppendPatp(buf[:0])
	}
}

func BenchmarkParseShip(b *testing.B) {
	names := make([]string, len(benchShips))
	for i, s := range benchShips {
		names[i] = s.String()
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := ParseShip(names[i%len(names)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseShipDecimal(b *testing.B) {
	names := make([]string, len(benchShips))
	for i, s := range benchShips {
		names[i] = s.Decimal()
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := ParseShip(names[i%len(names)]); err != nil {
			b.Fatal(err)
		}
	}
}
