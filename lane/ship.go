package lane

import (
	"math/bits"
	"strconv"
)

// Ship is an Urbit identity: an unsigned integer of up to 128 bits, held as
// two 64-bit halves. The zero value is ~zod. Ship is comparable and holds no
// pointers, so it can key maps and sit in pointer-free tables.
type Ship struct {
	Hi uint64 // bits 64-127
	Lo uint64 // bits 0-63
}

// MaxShipBytes is the widest ship, in bytes (a comet).
const MaxShipBytes = 16

// ShipFromUint64 returns the ship whose number is n.
func ShipFromUint64(n uint64) Ship { return Ship{Lo: n} }

// ShipFromBytesLE returns the ship whose little-endian encoding is b, as the
// wire codecs carry it (2, 4, 8 or 16 bytes). Bytes past the first
// MaxShipBytes are ignored; an empty b is ~zod. Trailing zero bytes are
// allowed and do not change the number.
func ShipFromBytesLE(b []byte) Ship {
	var s Ship
	for i, c := range b[:min(len(b), MaxShipBytes)] {
		if i < 8 {
			s.Lo |= uint64(c) << (8 * i)
		} else {
			s.Hi |= uint64(c) << (8 * (i - 8))
		}
	}
	return s
}

// AppendLE appends the low width bytes of s, little-endian, to dst. Bytes
// past MaxShipBytes are written as zeros. The caller must pick
// width >= s.ByteLen(); a narrower width drops the ship's high bytes (the
// wire codecs choose the width from the ship, so this cannot happen there).
// A width of zero or less appends nothing.
func (s Ship) AppendLE(dst []byte, width int) []byte {
	for i := 0; i < width; i++ {
		switch {
		case i < 8:
			dst = append(dst, byte(s.Lo>>(8*i)))
		case i < MaxShipBytes:
			dst = append(dst, byte(s.Hi>>(8*(i-8))))
		default:
			dst = append(dst, 0)
		}
	}
	return dst
}

// ByteLen returns the number of bytes needed to hold s (Hoon's (met 3 s)):
// 0 for ~zod, 1 for the other galaxies, up to 16 for the largest comets.
func (s Ship) ByteLen() int {
	if s.Hi != 0 {
		return 8 + (bits.Len64(s.Hi)+7)/8
	}
	return (bits.Len64(s.Lo) + 7) / 8
}

// Compare returns -1, 0 or +1 as s is numerically less than, equal to or
// greater than t. The method expression Ship.Compare suits slices.SortFunc.
func (s Ship) Compare(t Ship) int {
	switch {
	case s.Hi < t.Hi:
		return -1
	case s.Hi > t.Hi:
		return 1
	case s.Lo < t.Lo:
		return -1
	case s.Lo > t.Lo:
		return 1
	}
	return 0
}

// Less reports whether s is numerically less than t.
func (s Ship) Less(t Ship) bool { return s.Compare(t) < 0 }

// Uint64 returns s as a uint64 and whether it fits (s < 2^64).
func (s Ship) Uint64() (uint64, bool) { return s.Lo, s.Hi == 0 }

// decimalChunk is the largest power of ten below 2^64; a 128-bit number is
// printed as at most three chunks of up to 19 digits.
const (
	decimalChunk       = 10_000_000_000_000_000_000
	decimalChunkDigits = 19
)

// MaxDecimalLen is the length of the longest decimal ship (2^128-1 has 39
// digits).
const MaxDecimalLen = 39

// Decimal returns s as a plain decimal number, without Hoon's dot grouping
// ("1624961343", not "1.624.961.343").
func (s Ship) Decimal() string {
	var buf [MaxDecimalLen]byte
	return string(s.AppendDecimal(buf[:0]))
}

// AppendDecimal appends s as a plain decimal number to dst. It allocates only
// if dst must grow.
func (s Ship) AppendDecimal(dst []byte) []byte {
	if s.Hi == 0 {
		return strconv.AppendUint(dst, s.Lo, 10)
	}
	// s = q*10^19 + low, q = qHi:qLo.
	qHi, r := s.Hi/decimalChunk, s.Hi%decimalChunk
	qLo, low := bits.Div64(r, s.Lo, decimalChunk)
	if qHi == 0 {
		dst = strconv.AppendUint(dst, qLo, 10)
		return appendPaddedChunk(dst, low)
	}
	// qHi < 10^19, so the quotient fits in 64 bits.
	top, mid := bits.Div64(qHi, qLo, decimalChunk)
	dst = strconv.AppendUint(dst, top, 10)
	dst = appendPaddedChunk(dst, mid)
	return appendPaddedChunk(dst, low)
}

// appendPaddedChunk appends v (< 10^19) as exactly 19 decimal digits.
func appendPaddedChunk(dst []byte, v uint64) []byte {
	var digits [decimalChunkDigits]byte
	for i := decimalChunkDigits - 1; i >= 0; i-- {
		digits[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, digits[:]...)
}
