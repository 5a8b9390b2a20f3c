package lane

import (
	"bytes"
	"encoding/hex"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestShipBytesAmesVectors reads the sender and receiver of every vere-made
// ames packet as little-endian bytes and checks them against vere's decimal.
func TestShipBytesAmesVectors(t *testing.T) {
	for _, v := range readJSONL[amesVector](t, amesVectorsPath) {
		raw, err := hex.DecodeString(v.Hex)
		if err != nil {
			t.Fatal(err)
		}
		off := 4 + 1 // header, life ticks
		if v.Relayed {
			off += ShortLen
		}
		for _, ship := range []struct {
			dec   string
			width int
		}{{v.Sndr, v.SndrLen}, {v.Rcvr, v.RcvrLen}} {
			if len(raw) < off+ship.width {
				t.Fatalf("vector %d: too short", v.ID)
			}
			b := raw[off : off+ship.width]
			off += ship.width
			s := ShipFromBytesLE(b)
			if got := s.Decimal(); got != ship.dec {
				t.Errorf("vector %d: ShipFromBytesLE(%x) = %s, want %s", v.ID, b, got, ship.dec)
			}
			if parsed, err := ParseShip(ship.dec); err != nil || parsed != s {
				t.Errorf("vector %d: ParseShip(%s) = %v, %v", v.ID, ship.dec, parsed, err)
			}
			if got := s.AppendLE(nil, ship.width); !bytes.Equal(got, b) {
				t.Errorf("vector %d: AppendLE(%d) = %x, want %x", v.ID, ship.width, got, b)
			}
			if s.ByteLen() > ship.width {
				t.Errorf("vector %d: ByteLen %d exceeds wire width %d", v.ID, s.ByteLen(), ship.width)
			}
		}
	}
}

func TestShipBytesLE(t *testing.T) {
	s := Ship{Hi: 0x0f0e0d0c0b0a0908, Lo: 0x0706050403020100}
	want := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	if got := s.AppendLE(nil, 16); !bytes.Equal(got, want) {
		t.Errorf("AppendLE(16) = %x, want %x", got, want)
	}
	if got := ShipFromBytesLE(want); got != s {
		t.Errorf("ShipFromBytesLE = %#v, want %#v", got, s)
	}
	// Extra bytes are ignored on read and zero on write.
	if got := ShipFromBytesLE(append(slices.Clone(want), 0xff)); got != s {
		t.Errorf("ShipFromBytesLE(17 bytes) = %#v", got)
	}
	if got := s.AppendLE([]byte{0xaa}, 18); !bytes.Equal(got, append(append([]byte{0xaa}, want...), 0, 0)) {
		t.Errorf("AppendLE(18) = %x", got)
	}
	if got := ShipFromUint64(0x1234).AppendLE(nil, 4); !bytes.Equal(got, []byte{0x34, 0x12, 0, 0}) {
		t.Errorf("AppendLE(4) = %x", got)
	}
	if got := ShipFromUint64(5).AppendLE(nil, 0); len(got) != 0 {
		t.Errorf("AppendLE(0) = %x", got)
	}
	if got := ShipFromBytesLE(nil); got != (Ship{}) {
		t.Errorf("ShipFromBytesLE(nil) = %#v", got)
	}
	if got := ShipFromBytesLE([]byte{0x3f, 0xf1, 0xda, 0x60, 0, 0}); got != ShipFromUint64(1624961343) {
		t.Errorf("ShipFromBytesLE with trailing zeros = %#v", got)
	}
}

func TestByteLen(t *testing.T) {
	for _, v := range []struct {
		s    Ship
		want int
	}{
		{Ship{}, 0},
		{ShipFromUint64(1), 1},
		{ShipFromUint64(255), 1},
		{ShipFromUint64(256), 2},
		{ShipFromUint64(65535), 2},
		{ShipFromUint64(65536), 3},
		{ShipFromUint64(1<<32 - 1), 4},
		{ShipFromUint64(1 << 32), 5},
		{ShipFromUint64(1<<64 - 1), 8},
		{Ship{Hi: 1}, 9},
		{Ship{Hi: 1 << 63}, 16},
	} {
		if got := v.s.ByteLen(); got != v.want {
			t.Errorf("%s.ByteLen() = %d, want %d", v.s.Decimal(), got, v.want)
		}
	}
}

func TestDecimalMatchesBig(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 10_000 {
		s := Ship{Hi: r.Uint64() >> (i % 64), Lo: r.Uint64()}
		if i%7 == 0 {
			s.Hi = 0
		}
		b := new(big.Int).SetUint64(s.Hi)
		b.Lsh(b, 64).Or(b, new(big.Int).SetUint64(s.Lo))
		if got, want := s.Decimal(), b.String(); got != want {
			t.Fatalf("Decimal(%#x:%#x) = %s, want %s", s.Hi, s.Lo, got, want)
		}
	}
	// Values around the 10^19 chunk boundaries.
	for _, dec := range []string{
		"10000000000000000000", "99999999999999999999", "100000000000000000000000000000000000000",
		"100000000000000000000000000000000000001", "10000000000000000000000000000000000000",
	} {
		s, err := ParseShip(dec)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Decimal(); got != dec {
			t.Errorf("Decimal of %s = %s", dec, got)
		}
	}
}

func TestCompare(t *testing.T) {
	ships := []Ship{{Hi: 1}, ShipFromUint64(5), {}, {Hi: 1, Lo: 1}, ShipFromUint64(1<<64 - 1)}
	slices.SortFunc(ships, Ship.Compare)
	want := []Ship{{}, ShipFromUint64(5), ShipFromUint64(1<<64 - 1), {Hi: 1}, {Hi: 1, Lo: 1}}
	if !slices.Equal(ships, want) {
		t.Errorf("sorted = %v, want %v", ships, want)
	}
	if !ShipFromUint64(1).Less(Ship{Hi: 1}) || (Ship{Hi: 1}).Less(ShipFromUint64(1)) {
		t.Error("Less is wrong across the halves")
	}
	if (Ship{Hi: 2}).Compare(Ship{Hi: 2}) != 0 {
		t.Error("Compare of equal ships is not 0")
	}
	if n, ok := (Ship{Hi: 1}).Uint64(); ok {
		t.Errorf("Uint64 of 2^64 = %d, true", n)
	}
	if n, ok := ShipFromUint64(7).Uint64(); !ok || n != 7 {
		t.Errorf("Uint64 of 7 = %d, %v", n, ok)
	}
}
