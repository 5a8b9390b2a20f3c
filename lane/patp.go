package lane

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"strings"
)

// @p (hoon.hoon ++po, ++co): printing and parsing ship names.

// prefixSyllables holds the 256 three-letter prefix syllables of @p, in
// order: syllable i is prefixSyllables[3*i : 3*i+3].
const prefixSyllables = "" +
	"dozmarbinwansamlitsighidfidlissogdirwacsabwissib" + // 0-15
	"rigsoldopmodfoglidhopdardorlorhodfolrintogsilmir" + // 16-31
	"holpaslacrovlivdalsatlibtabhanticpidtorbolfosdot" + // 32-47
	"losdilforpilramtirwintadbicdifrocwidbisdasmidlop" + // 48-63
	"rilnardapmolsanlocnovsitnidtipsicropwitnatpanmin" + // 64-79
	"ritpodmottamtolsavposnapnopsomfinfonbanmorworsip" + // 80-95
	"ronnorbotwicsocwatdolmagpicdavbidbaltimtasmallig" + // 96-111
	"sivtagpadsaldivdactansidfabtarmonranniswolmispal" + // 112-127
	"lasdismaprabtobrollatlonnodnavfignomnibpagsopral" + // 128-143
	"bilhaddocridmocpacravripfaltodtiltinhapmicfanpat" + // 144-159
	"taclabmogsimsonpinlomrictapfirhasbosbatpochactid" + // 160-175
	"havsaplindibhosdabbitbarracparloddosbortochilmac" + // 176-191
	"tomdigfilfasmithobharmighinradmashalraglagfadtop" + // 192-207
	"mophabnilnosmilfopfamdatnoldinhatnacrisfotribhoc" + // 208-223
	"nimlarfitwalrapsarnalmoslandondanladdovrivbacpol" + // 224-239
	"laptalpitnambonrostonfodponsovnocsorlavmatmipfip" // 240-255

// suffixSyllables holds the 256 three-letter suffix syllables of @p, in
// order: syllable i is suffixSyllables[3*i : 3*i+3].
const suffixSyllables = "" +
	"zodnecbudwessevpersutletfulpensytdurwepserwylsun" + // 0-15
	"rypsyxdyrnuphebpeglupdepdysputlughecryttyvsydnex" + // 16-31
	"lunmeplutseppesdelsulpedtemledtulmetwenbynhexfeb" + // 32-47
	"pyldulhetmevruttylwydtepbesdexsefwycburderneppur" + // 48-63
	"rysrebdennutsubpetrulsynregtydsupsemwynrecmegnet" + // 64-79
	"secmulnymtevwebsummutnyxrextebfushepbenmuswyxsym" + // 80-95
	"selrucdecwexsyrwetdylmynmesdetbetbeltuxtugmyrpel" + // 96-111
	"syptermebsetdutdegtexsurfeltudnuxruxrenwytnubmed" + // 112-127
	"lytdusnebrumtynseglyxpunresredfunrevrefmectedrus" + // 128-143
	"bexlebduxrynnumpyxrygryxfeptyrtustyclegnemfermer" + // 144-159
	"tenlusnussyltecmexpubrymtucfyllepdebbermughuttun" + // 160-175
	"bylsudpemdevlurdefbusbeprunmelpexdytbyttyplevmyl" + // 176-191
	"wedducfurfexnulluclennerlexrupnedlecrydlydfenwel" + // 192-207
	"nydhusrelrudneshesfetdesretdunlernyrsebhulryllud" + // 208-223
	"remlysfynwerrycsugnysnyllyndyndemluxfedsedbecmun" + // 224-239
	"lyrtesmudnytbyrsenwegfyrmurtelreptegpecnelnevfes" // 240-255

// MaxPatpLen is the length of the longest @p: "~" and eight six-letter words
// with seven separators, one of them "--" (57 bytes).
const MaxPatpLen = 1 + 8*6 + 7 + 1

// maxShipInputLen bounds what ParseShip looks at: longer input is rejected
// unread. Every canonical @p and every decimal ship without leading zeros
// (39 digits, or 51 characters dotted) fits.
const maxShipInputLen = MaxPatpLen

// wordsPerComet is the number of 16-bit words in the widest ship.
const wordsPerComet = MaxShipBytes / 2

// ErrInvalidShip is wrapped by every error ParseShip returns.
var ErrInvalidShip = errors.New("lane: invalid ship")

// String returns s as @p, exactly as Urbit prints it ("~zod",
// "~sampel-palnet", "~dozryt--wolmep-racmyl-padpeg-mocryp").
// It allocates only the returned string.
func (s Ship) String() string {
	var buf [MaxPatpLen]byte
	return string(s.AppendPatp(buf[:0]))
}

// AppendPatp appends s as @p to dst, allocating only if dst must grow (at
// most MaxPatpLen bytes are appended).
//
// The number is first scrambled with +fein; a result below 256 prints as "~"
// and one suffix syllable. Otherwise each 16-bit word, most significant
// first, prints as prefix[high byte] + suffix[low byte]; words are joined by
// "-", except that "--" follows every word whose index counted from the
// least significant word (0) is a non-zero multiple of 4. Only comets have
// such a word: "--" separates their fourth and fifth words from the right.
func (s Ship) AppendPatp(dst []byte) []byte {
	sxz := fein(s)
	dst = append(dst, '~')
	if sxz.Hi == 0 && sxz.Lo < 256 {
		i := 3 * int(sxz.Lo)
		return append(dst, suffixSyllables[i:i+3]...)
	}
	words := (sxz.bitLen() + 15) / 16
	for imp := words - 1; imp >= 0; imp-- {
		w := sxz.word(imp)
		p, q := 3*int(w>>8), 3*int(w&0xff)
		dst = append(dst, prefixSyllables[p:p+3]...)
		dst = append(dst, suffixSyllables[q:q+3]...)
		switch {
		case imp == 0:
		case imp%4 == 0:
			dst = append(dst, '-', '-')
		default:
			dst = append(dst, '-')
		}
	}
	return dst
}

// bitLen returns the number of bits needed to hold s.
func (s Ship) bitLen() int {
	if s.Hi != 0 {
		return 64 + bits.Len64(s.Hi)
	}
	return bits.Len64(s.Lo)
}

// word returns the i-th 16-bit word of s, counting from the least
// significant (0 <= i < 8).
func (s Ship) word(i int) uint16 {
	if i < 4 {
		return uint16(s.Lo >> (16 * i))
	}
	return uint16(s.Hi >> (16 * (i - 4)))
}

// ParseShip parses a ship written as @p or as a decimal number.
//
// @p is accepted with or without the leading "~" ("~sampel-palnet",
// "sampel-palnet"), but otherwise only in the exact form Urbit prints
// (lower-case syllables, "-" and "--" where String puts them, no leading
// "dozzod" words, "~nec" rather than "~doznec"), so
// ParseShip(s.String()) == s for every ship and a name that parses prints back
// unchanged (up to the "~"). Decimal is plain digits ("1624961343") or
// Hoon's @ud with dots every three digits ("1.624.961.343"); leading zeros
// are accepted in the plain form. Values of 2^128 or more, and input longer
// than MaxPatpLen bytes, are rejected.
//
// Every error wraps ErrInvalidShip. On success ParseShip allocates nothing.
func ParseShip(s string) (Ship, error) {
	if len(s) > maxShipInputLen {
		return Ship{}, shipError(s, "too long")
	}
	body := s
	tilde := len(body) > 0 && body[0] == '~'
	if tilde {
		body = body[1:]
	}
	if body == "" {
		return Ship{}, shipError(s, "empty")
	}
	if body[0] >= '0' && body[0] <= '9' {
		if tilde {
			return Ship{}, shipError(s, "a number cannot follow ~")
		}
		return parseDecimal(s)
	}
	return parsePatp(s, body)
}

// parsePatp parses body, a @p without its "~"; s is the whole input, for
// error messages.
func parsePatp(s, body string) (Ship, error) {
	var sxz Ship
	if len(body) == 3 {
		i, ok := suffixIndex.lookup(body)
		if !ok {
			return Ship{}, shipError(s, fmt.Sprintf("%q is not a suffix syllable", body))
		}
		sxz.Lo = uint64(i)
	} else {
		words := 0
		for pos := 0; ; {
			if len(body)-pos < 6 {
				if w := wordAt(body, pos); w != "" {
					return Ship{}, shipError(s, fmt.Sprintf("%q is not a six-letter word", w))
				}
				return Ship{}, shipError(s, "a word is missing after -")
			}
			pre, ok := prefixIndex.lookup(body[pos : pos+3])
			if !ok {
				return Ship{}, shipError(s, fmt.Sprintf("%q is not a prefix syllable", body[pos:pos+3]))
			}
			suf, ok := suffixIndex.lookup(body[pos+3 : pos+6])
			if !ok {
				return Ship{}, shipError(s, fmt.Sprintf("%q is not a suffix syllable", body[pos+3:pos+6]))
			}
			if words++; words > wordsPerComet {
				return Ship{}, shipError(s, "more than 8 words (128 bits)")
			}
			sxz = Ship{Hi: sxz.Hi<<16 | sxz.Lo>>48, Lo: sxz.Lo<<16 | uint64(pre)<<8 | uint64(suf)}
			pos += 6
			if pos == len(body) {
				break
			}
			if c := body[pos]; c >= 'a' && c <= 'z' {
				return Ship{}, shipError(s, fmt.Sprintf("%q is not a six-letter word", wordAt(body, pos-6)))
			}
			if body[pos] != '-' {
				return Ship{}, shipError(s, "words must be separated by - or --")
			}
			pos++
			if pos < len(body) && body[pos] == '-' {
				pos++
			}
		}
	}
	ship := fynd(sxz)
	// The word parse above accepts any separators and leading zero words;
	// only the form Urbit prints is a valid @p. Printing is a bijection from
	// numbers to canonical names, so comparing with it checks everything.
	var buf [MaxPatpLen]byte
	canon := ship.AppendPatp(buf[:0])
	if string(canon[1:]) != body {
		return Ship{}, shipError(s, "not in canonical form (Urbit writes "+string(canon)+")")
	}
	return ship, nil
}

// parseDecimal parses s as plain decimal digits or Hoon's dotted @ud.
func parseDecimal(s string) (Ship, error) {
	var n Ship
	dotted := false
	group := 0 // digits since the last dot, or since the start
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			// Hoon's @ud: 1-3 digits, then groups of exactly 3.
			if (dotted && group != 3) || (!dotted && (group == 0 || group > 3)) {
				return Ship{}, shipError(s, "misplaced . in a dotted number")
			}
			dotted, group = true, 0
			continue
		}
		if c < '0' || c > '9' {
			return Ship{}, shipError(s, fmt.Sprintf("unexpected %q in a number", c))
		}
		if dotted && group == 3 {
			return Ship{}, shipError(s, "misplaced . in a dotted number")
		}
		group++
		// n = n*10 + digit, failing past 2^128-1.
		hiProd, hi := bits.Mul64(n.Hi, 10)
		carry, lo := bits.Mul64(n.Lo, 10)
		hi, c1 := bits.Add64(hi, carry, 0)
		lo, c2 := bits.Add64(lo, uint64(c-'0'), 0)
		hi, c3 := bits.Add64(hi, 0, c2)
		if hiProd != 0 || c1 != 0 || c3 != 0 {
			return Ship{}, shipError(s, "number is 2^128 or more")
		}
		n = Ship{Hi: hi, Lo: lo}
	}
	if dotted && group != 3 {
		return Ship{}, shipError(s, "misplaced . in a dotted number")
	}
	if dotted && s[0] == '0' {
		return Ship{}, shipError(s, "leading zero in a dotted number")
	}
	return n, nil
}

// wordAt returns the word of body starting at pos: up to the next '-'.
func wordAt(body string, pos int) string {
	w := body[pos:]
	if i := strings.IndexByte(w, '-'); i >= 0 {
		w = w[:i]
	}
	return w
}

// maxErrorInput bounds how much of a rejected input an error message quotes.
const maxErrorInput = 64

// shipError builds an error wrapping ErrInvalidShip.
func shipError(input, reason string) error {
	if len(input) > maxErrorInput {
		input = input[:maxErrorInput] + "..."
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidShip, input, reason)
}

// syllableIndex maps a three-letter syllable to its number, 0-255. It is
// built once, at package initialisation, and never modified.
type syllableIndex struct {
	keys  [256]uint32 // syllables packed as c0<<16 | c1<<8 | c2, ascending
	value [256]uint8  // value[i] is the number of the syllable keys[i]
}

// Lookup tables for parsing; immutable after initialisation.
var (
	prefixIndex = newSyllableIndex(prefixSyllables)
	suffixIndex = newSyllableIndex(suffixSyllables)
)

// newSyllableIndex indexes the 256 syllables packed in syllables.
func newSyllableIndex(syllables string) *syllableIndex {
	type entry struct {
		key   uint32
		value uint8
	}
	entries := make([]entry, 256)
	for i := range entries {
		entries[i] = entry{packSyllable(syllables[3*i : 3*i+3]), uint8(i)}
	}
	sort.Slice(entries, func(a, b int) bool { return entries[a].key < entries[b].key })
	var x syllableIndex
	for i, e := range entries {
		x.keys[i], x.value[i] = e.key, e.value
	}
	return &x
}

// packSyllable packs a three-byte string into a uint32.
func packSyllable(syl string) uint32 {
	return uint32(syl[0])<<16 | uint32(syl[1])<<8 | uint32(syl[2])
}

// lookup returns the number of the syllable syl (which must be 3 bytes) and
// whether it is one.
func (x *syllableIndex) lookup(syl string) (uint8, bool) {
	k := packSyllable(syl)
	lo, hi := 0, len(x.keys)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if x.keys[mid] < k {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(x.keys) && x.keys[lo] == k {
		return x.value[lo], true
	}
	return 0, false
}
