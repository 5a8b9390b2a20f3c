// Legacy ames packets.
//
// Legacy ames is the packet format that predates mesa. It shares the UDP
// socket with mesa and STUN; a datagram is legacy ames when it carries neither
// the mesa cookie nor a STUN binding request (see Parse for the order of
// checks). This file decodes, re-encodes, classifies and forwards such
// packets exactly as vere's pkg/vere/io/ames.c does; the vectors in
// testdata/ames (written by vere) are the authority.
//
// All integers are little-endian. Header, bytes 0-3, one u32:
//
//	bits  0-1   reserved: never checked, not mugged
//	bit   2     req: 0 = request (wail), 1 = response (purr); fine only
//	bit   3     sam: 0 = ames packet, 1 = fine (remote scry) packet
//	bits  4-6   version; only 0 is accepted
//	bits  7-8   sender rank r: the sender takes 2<<r bytes (2, 4, 8, 16)
//	bits  9-10  receiver rank
//	bits 11-30  mug: the low 20 bits of Mug(body)
//	bit   31    rel: 0 = relayed (an origin follows), 1 = not relayed
//
// Bits 2, 3 and 31 are loobeans: 0 means yes. AmesPacket holds them as Go
// booleans where true means yes.
//
// Body, in order:
//
//	origin   6 bytes, only when relayed: the IPv4 address as a host-order
//	         u32 written LE, then the port as LE u16
//	         (1.2.3.4:13337 is 04 03 02 01 19 34)
//	ticks    1 byte: sender's life tick in the low nibble, receiver's in the
//	         high nibble
//	sender   2<<sender rank bytes
//	receiver 2<<receiver rank bytes
//	content  the rest of the datagram
//
// The mug is Mug (vere's u3r_mug_bytes) of every byte from offset 4, or 10
// when relayed, to the end of the datagram, trailing zero bytes included.
// Neither the header nor the origin is covered, so a relay can insert or
// rewrite the origin and the mug still holds.
//
// Ranks need not be the smallest that fit the ship: vere accepts a wider rank
// (Arvo later rejects the ship as an impostor), so Parse does too. NewAmes and
// NewAmesFine always pick the smallest rank: 0 below 2^16, 1 below 2^32, 2
// below 2^64, else 3.
//
// Content by class (Class):
//
//	ames  opaque, encrypted for Arvo; the runtime never looks inside
//	wail  fine request:  tag u8 (0), fragment u32, path length u16, path;
//	      nothing may follow (AmesWail)
//	purr  fine response: fragment u32, path length u16, path, signature
//	      (64 bytes), fragment count, data (AmesPurr). The count takes 4
//	      bytes when data follows; with no data only the bytes the count
//	      needs (none for 0). Data is at most 1024 bytes.
//
// Only the addressee checks wail and purr content; a forwarding galaxy
// forwards any class without looking at it, which is why the content parsers
// are separate from Parse.
//
// Forwarding. A galaxy forwarding a packet that is not relayed and whose
// sender is not a galaxy (NeedsOrigin) inserts the 6-byte origin it heard the
// datagram from (InsertOrigin): bit 31 is cleared, reserved bits 0-1 become 0
// (vere re-writes the header from its parsed fields), the origin goes after
// the header and bytes 4 onward move up unchanged. Any other packet is
// forwarded as it is.
//
// Where this code deliberately differs from vere:
//
//   - Vere's forwarding path turns the packet into an atom and back, which
//     drops trailing zero bytes; the shortened packet then fails the mug check
//     at the next hop. That is a vere bug and InsertOrigin does not reproduce
//     it: it keeps every byte.
//   - Vere crashes on a 4-9 byte datagram with bit 31 = 0 (an unsigned
//     underflow when computing the mug range). Parse rejects it with
//     ErrAmesShortOrigin.
//   - Vere only filters non-zero versions once Arvo has told it the protocol
//     version (and asserts on them when re-writing a header before that).
//     Parse always rejects them.
//   - Vere drops a wail whose body is under 6 bytes and, with exactly 6,
//     reads one byte past the datagram before dropping it on the total-length
//     check. AmesWail.Parse needs the 7 fixed bytes and reports a 6-byte body
//     as ErrAmesWailShort.
//
// The mesa cookie. Vere's dispatcher hands every datagram of 8+ bytes whose
// bytes 4-7 are the mesa cookie (00 02 e0 67, IsMesa) to mesa before legacy
// ames sees it, and mesa rejects a legacy packet as "bad protocol". A valid
// legacy packet can carry those bytes: unrelayed, ticks 0 followed by ship
// bytes 02 e0 67 (star 0xe002 to a ship whose low byte is 0x67); relayed,
// an origin of 103.224.2.0. Parse rejects such datagrams as
// ErrAmesMesaCookie, so the codec and the dispatcher agree on what is ames.
// InsertOrigin does not refuse the origin 103.224.2.0; the next hop will
// drop that forward, as vere would.

package scry

import (
	"bytes"
	"encoding/binary"
	"net/netip"

	"github.com/urbit-relay/relay/lane"
)

// Sizes and limits of the legacy ames wire format.
const (
	// AmesHeaderLen is the fixed header: one little-endian u32.
	AmesHeaderLen = 4
	// AmesOriginLen is the origin a relaying galaxy inserts after the
	// header: IPv4 address and port. InsertOrigin grows a packet by this
	// much, so receive buffers meant to be forwarded in place need this
	// much spare capacity.
	AmesOriginLen = 6
	// AmesWailPathMax is the longest wail path vere's addressee accepts
	// (FINE_PATH_MAX).
	AmesWailPathMax = 384
	// AmesPurrSigLen is the length of the signature in a purr.
	AmesPurrSigLen = 64
	// AmesPurrDataMax is the most data a purr carries (one 1 KiB fragment).
	AmesPurrDataMax = 1024
)

const (
	// amesMugMask keeps the 20 mug bits the header carries.
	amesMugMask = 0xfffff
	// amesWailFixedLen is a wail's tag, fragment number and path length.
	amesWailFixedLen = 1 + 4 + 2
	// amesPurrFixedLen is a purr's fragment number and path length.
	amesPurrFixedLen = 4 + 2
	// amesPurrNumLen is the width of a purr's fragment count when data
	// follows it.
	amesPurrNumLen = 4
	// amesGalaxyLimit: ships below it are galaxies.
	amesGalaxyLimit = 256
)

// STUN constants (RFC 8489) for IsSTUN.
const (
	amesSTUNHeaderLen      = 20
	amesSTUNMinRequestLen  = amesSTUNHeaderLen + amesSTUNFingerprintLen
	amesSTUNFingerprintLen = 8
	amesSTUNMagicCookie    = "\x21\x12\xa4\x42"
	amesSTUNFingerprintHdr = "\x80\x28\x00\x04" // type 0x8028, length 4
	amesSTUNFingerprintXor = 0x5354554e
)

// AmesError is why a legacy ames datagram, or its fine content, was
// rejected. The values are comparable sentinels (compare with == or
// errors.Is), and converting one to error does not allocate. Reason gives a
// stable snake_case label for metrics; values run from 1 to AmesErrorCount-1,
// so they can index a counter array of length AmesErrorCount.
type AmesError uint8

// Errors returned by AmesPacket.Parse, InsertOrigin, AmesWail.Parse and
// AmesPurr.Parse.
const (
	// ErrAmesShortHeader: fewer than the 4 header bytes.
	ErrAmesShortHeader AmesError = iota + 1
	// ErrAmesMesaCookie: bytes 4-7 are the mesa cookie; the datagram
	// belongs to mesa.
	ErrAmesMesaCookie
	// ErrAmesSTUN: the datagram is a STUN binding request (IsSTUN).
	ErrAmesSTUN
	// ErrAmesBadVersion: header version is not 0.
	ErrAmesBadVersion
	// ErrAmesShortOrigin: bit 31 says relayed but the datagram is shorter
	// than header + origin (10 bytes). Vere crashes on this input.
	ErrAmesShortOrigin
	// ErrAmesBadMug: the header mug does not match the body.
	ErrAmesBadMug
	// ErrAmesTruncatedPrelude: shorter than origin + ticks + the ship
	// widths the ranks promise.
	ErrAmesTruncatedPrelude
	// ErrAmesAlreadyRelayed: InsertOrigin on a packet that has an origin.
	ErrAmesAlreadyRelayed
	// ErrAmesWailShort: wail content shorter than tag, fragment and path
	// length (7 bytes).
	ErrAmesWailShort
	// ErrAmesWailBadTag: wail tag is not 0.
	ErrAmesWailBadTag
	// ErrAmesWailPathTooLong: wail path length over AmesWailPathMax.
	ErrAmesWailPathTooLong
	// ErrAmesWailLengthMismatch: 7 + path length is not the content length.
	ErrAmesWailLengthMismatch
	// ErrAmesPurrShort: purr content ends before its path or signature.
	ErrAmesPurrShort
	// ErrAmesPurrCountNotMinimal: a purr with no data whose fragment count
	// takes more bytes than it needs.
	ErrAmesPurrCountNotMinimal
	// ErrAmesPurrDataTooLong: purr data over AmesPurrDataMax.
	ErrAmesPurrDataTooLong

	amesErrorEnd
)

// AmesErrorCount is one more than the largest AmesError.
const AmesErrorCount = int(amesErrorEnd)

// text returns the error's label and the stage of vere's receive path
// where vere makes the same decision.
func (e AmesError) text() (reason, stage string) {
	switch e {
	case ErrAmesShortHeader:
		return "short-header", "header"
	case ErrAmesMesaCookie:
		return "mesa-cookie", "mesa-gate"
	case ErrAmesSTUN:
		return "stun", "stun"
	case ErrAmesBadVersion:
		return "bad-version", "version"
	case ErrAmesShortOrigin:
		return "short-origin", "mug" // where vere crashes
	case ErrAmesBadMug:
		return "bad-mug", "mug"
	case ErrAmesTruncatedPrelude:
		return "truncated-prelude", "prelude"
	case ErrAmesAlreadyRelayed:
		return "already-relayed", "forward"
	case ErrAmesWailShort:
		return "wail-short", "wail"
	case ErrAmesWailBadTag:
		return "wail-bad-tag", "wail"
	case ErrAmesWailPathTooLong:
		return "wail-path-too-long", "wail"
	case ErrAmesWailLengthMismatch:
		return "wail-length-mismatch", "wail"
	case ErrAmesPurrShort:
		return "purr-short", "purr"
	case ErrAmesPurrCountNotMinimal:
		return "purr-count-not-minimal", "purr"
	case ErrAmesPurrDataTooLong:
		return "purr-data-too-long", "purr"
	}
	return "unknown", "unknown"
}

// Reason returns the error's metric label, e.g. "bad-mug". Labels are
// stable; an unknown value gives "unknown".
func (e AmesError) Reason() string { r, _ := e.text(); return r }

// Stage returns where vere decides the same: "header", "mesa-gate", "stun",
// "version", "mug", "prelude" or "wail" (the stage names of the vectors in
// testdata/ames); "forward" for InsertOrigin's refusal and "purr" for the
// purr parser, which vere does not have.
func (e AmesError) Stage() string { _, s := e.text(); return s }

// Error returns "ames: " and the reason. It allocates; count by Reason or by
// the value itself on hot paths.
func (e AmesError) Error() string { return "ames: " + e.Reason() }

// AmesClass is what a legacy packet carries, from header bits 3 and 2.
type AmesClass uint8

// Packet classes.
const (
	AmesClassAmes AmesClass = iota // bit 3 = 0: ames message, opaque to the runtime
	AmesClassWail                  // bit 3 = 1, bit 2 = 0: fine request
	AmesClassPurr                  // bit 3 = 1, bit 2 = 1: fine response
)

// String returns "ames", "wail" or "purr" (the vectors' type names).
func (c AmesClass) String() string {
	switch c {
	case AmesClassAmes:
		return "ames"
	case AmesClassWail:
		return "wail"
	case AmesClassPurr:
		return "purr"
	}
	return "unknown"
}

// AmesPacket is a decoded legacy ames datagram. Append rebuilds the wire
// bytes from the fields below Head; Head itself is only what Parse read.
type AmesPacket struct {
	// Head is the raw header word as parsed (or as built by NewAmes). Append
	// does not read it; it writes HeaderWord.
	Head uint32
	// Reserved holds header bits 0-1, kept so Append is byte-exact.
	Reserved uint8
	// Req, IsAmes and Relayed are header bits 2, 3 and 31 with true meaning
	// yes (on the wire, 0 means yes).
	Req, IsAmes, Relayed bool
	// Version is header bits 4-6; Parse accepts only 0.
	Version uint8
	// SndrRank and RcvrRank are 0-3; a ship takes 2<<rank bytes.
	SndrRank, RcvrRank uint8
	// Mug is the 20-bit header mug.
	Mug uint32
	// Origin is OriginBytes decoded (lane.DecodeShort); valid only when
	// Relayed.
	Origin netip.AddrPort
	// OriginBytes is the origin as on the wire; Append writes it when
	// Relayed.
	OriginBytes [AmesOriginLen]byte
	// SndrTick and RcvrTick are the life ticks, 0-15.
	SndrTick, RcvrTick uint8
	// Sndr and Rcvr are the ships; Append writes each in its rank's width.
	Sndr, Rcvr lane.Ship
	// Content is everything after the prelude. After Parse it is a view
	// into the parsed buffer: valid only while that buffer is unchanged.
	Content []byte
}

// Parse decodes the legacy ames datagram b into p, checking in vere's order:
//
//  1. 8+ bytes with the mesa cookie at 4-7: ErrAmesMesaCookie
//  2. a STUN binding request (IsSTUN): ErrAmesSTUN
//  3. under 4 bytes: ErrAmesShortHeader
//  4. version not 0: ErrAmesBadVersion
//  5. relayed but under 10 bytes: ErrAmesShortOrigin (vere crashes here)
//  6. mug mismatch: ErrAmesBadMug
//  7. shorter than the prelude: ErrAmesTruncatedPrelude
//
// It does not look at the content: a forwarding galaxy forwards any class,
// and the addressee checks wails with AmesWail.Parse. p.Content aliases b.
// On error p is zeroed. Parse never panics and does not allocate.
func (p *AmesPacket) Parse(b []byte) error {
	*p = AmesPacket{}
	if IsMesa(b) {
		return ErrAmesMesaCookie
	}
	if IsSTUN(b) {
		return ErrAmesSTUN
	}
	if err := p.parseLegacy(b); err != nil {
		*p = AmesPacket{}
		return err
	}
	return nil
}

// parseLegacy is Parse without the mesa and STUN gates (steps 3-7).
func (p *AmesPacket) parseLegacy(b []byte) error {
	if len(b) < AmesHeaderLen {
		return ErrAmesShortHeader
	}
	head := binary.LittleEndian.Uint32(b)
	p.Head = head
	p.Reserved = uint8(head & 3)
	p.Req = head>>2&1 == 0
	p.IsAmes = head>>3&1 == 0
	p.Version = uint8(head >> 4 & 7)
	p.SndrRank = uint8(head >> 7 & 3)
	p.RcvrRank = uint8(head >> 9 & 3)
	p.Mug = head >> 11 & amesMugMask
	p.Relayed = head>>31 == 0
	if p.Version != 0 {
		return ErrAmesBadVersion
	}
	off := AmesHeaderLen
	if p.Relayed {
		off += AmesOriginLen
		if len(b) < off {
			return ErrAmesShortOrigin
		}
	}
	if Mug(b[off:])&amesMugMask != p.Mug {
		return ErrAmesBadMug
	}
	sw, rw := 2<<p.SndrRank, 2<<p.RcvrRank
	if len(b) < off+1+sw+rw {
		return ErrAmesTruncatedPrelude
	}
	if p.Relayed {
		p.OriginBytes = [AmesOriginLen]byte(b[AmesHeaderLen:off])
		p.Origin = lane.DecodeShort(p.OriginBytes)
	}
	p.SndrTick = b[off] & 0xf
	p.RcvrTick = b[off] >> 4
	off++
	p.Sndr = lane.ShipFromBytesLE(b[off : off+sw])
	off += sw
	p.Rcvr = lane.ShipFromBytesLE(b[off : off+rw])
	off += rw
	p.Content = b[off:]
	return nil
}

// HeaderWord returns the header word Append writes: the fields of p encoded
// as on the wire, each masked to its width.
func (p *AmesPacket) HeaderWord() uint32 {
	w := uint32(p.Reserved & 3)
	if !p.Req {
		w |= 1 << 2
	}
	if !p.IsAmes {
		w |= 1 << 3
	}
	w |= uint32(p.Version&7) << 4
	w |= uint32(p.SndrRank&3) << 7
	w |= uint32(p.RcvrRank&3) << 9
	w |= (p.Mug & amesMugMask) << 11
	if !p.Relayed {
		w |= 1 << 31
	}
	return w
}

// Append appends the wire form of p to dst: HeaderWord, OriginBytes when
// Relayed, ticks, ships in their ranks' widths, Content. For a p filled by
// Parse it writes exactly the bytes Parse accepted. It does not recompute
// the mug. It allocates only if dst must grow.
func (p *AmesPacket) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, p.HeaderWord())
	if p.Relayed {
		dst = append(dst, p.OriginBytes[:]...)
	}
	dst = append(dst, p.SndrTick&0xf|p.RcvrTick<<4)
	dst = p.Sndr.AppendLE(dst, 2<<(p.SndrRank&3))
	dst = p.Rcvr.AppendLE(dst, 2<<(p.RcvrRank&3))
	return append(dst, p.Content...)
}

// MugOffset returns where the mugged range starts: 4, or 10 when relayed.
// The range runs to the end of the datagram.
func (p *AmesPacket) MugOffset() int {
	if p.Relayed {
		return AmesHeaderLen + AmesOriginLen
	}
	return AmesHeaderLen
}

// ContentOffset returns where the content starts in the wire form.
func (p *AmesPacket) ContentOffset() int {
	return p.MugOffset() + 1 + 2<<(p.SndrRank&3) + 2<<(p.RcvrRank&3)
}

// Len returns the length of the wire form.
func (p *AmesPacket) Len() int { return p.ContentOffset() + len(p.Content) }

// Class returns what the packet carries.
func (p *AmesPacket) Class() AmesClass {
	switch {
	case p.IsAmes:
		return AmesClassAmes
	case p.Req:
		return AmesClassWail
	}
	return AmesClassPurr
}

// BodyMug returns the full 31-bit Mug of the mugged range of p's wire form
// (ticks, ships, content); its low 20 bits belong in p.Mug. It allocates a
// scratch copy of the body: for building packets, not for the receive path,
// where Parse checks the mug in place.
func (p *AmesPacket) BodyMug() uint32 {
	body := make([]byte, 0, 1+2<<(p.SndrRank&3)+2<<(p.RcvrRank&3)+len(p.Content))
	body = append(body, p.SndrTick&0xf|p.RcvrTick<<4)
	body = p.Sndr.AppendLE(body, 2<<(p.SndrRank&3))
	body = p.Rcvr.AppendLE(body, 2<<(p.RcvrRank&3))
	body = append(body, p.Content...)
	return Mug(body)
}

// NewAmes returns a canonical, unrelayed ames-class packet from sndr to rcvr:
// smallest ranks, reserved bits 0, version 0, Req set (as Arvo sends ames
// packets) and the mug computed. Ticks are taken mod 16. Content is kept, not
// copied. p.Append writes the datagram. It allocates (see BodyMug).
func NewAmes(sndr, rcvr lane.Ship, sndrTick, rcvrTick uint8, content []byte) AmesPacket {
	return amesNew(sndr, rcvr, sndrTick, rcvrTick, true, true, content)
}

// NewAmesFine is NewAmes for fine packets: a wail when req is true (content
// from AmesWail.Append), a purr otherwise (content from AmesPurr.Append).
func NewAmesFine(sndr, rcvr lane.Ship, sndrTick, rcvrTick uint8, req bool, content []byte) AmesPacket {
	return amesNew(sndr, rcvr, sndrTick, rcvrTick, false, req, content)
}

func amesNew(sndr, rcvr lane.Ship, sndrTick, rcvrTick uint8, isAmes, req bool, content []byte) AmesPacket {
	p := AmesPacket{
		Req:      req,
		IsAmes:   isAmes,
		SndrRank: AmesRank(sndr),
		RcvrRank: AmesRank(rcvr),
		SndrTick: sndrTick & 0xf,
		RcvrTick: rcvrTick & 0xf,
		Sndr:     sndr,
		Rcvr:     rcvr,
		Content:  content,
	}
	p.Mug = p.BodyMug() & amesMugMask
	p.Head = p.HeaderWord()
	return p
}

// AmesRank returns the smallest rank that holds s: 0 (2 bytes) for galaxies
// and stars, 1 (4) for planets, 2 (8) for moons, 3 (16) for comets.
func AmesRank(s lane.Ship) uint8 {
	switch n := s.ByteLen(); {
	case n <= 2:
		return 0
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

// NeedsOrigin reports whether a galaxy forwarding p must insert an origin:
// p is not relayed and its sender is not a galaxy.
func NeedsOrigin(p *AmesPacket) bool {
	return !p.Relayed && (p.Sndr.Hi != 0 || p.Sndr.Lo >= amesGalaxyLimit)
}

// InsertOrigin makes a galaxy's forwarding edit to the unrelayed legacy
// packet b: it clears bit 31 (now relayed), zeroes reserved bits 0-1, and
// inserts origin (the lane the datagram was heard from, from
// lane.EncodeShort, which also says when a lane cannot be carried) after the
// header. Bytes 4 onward are moved
// up unchanged, trailing zeros included, so the mug still holds.
//
// Buffer contract: if cap(b) >= len(b)+AmesOriginLen the edit is made in
// place and the result is b[:len(b)+AmesOriginLen], sharing b's array;
// nothing is allocated. Otherwise a new slice is allocated and b is left
// untouched. Either way the caller must use the returned slice. Any view into
// b (such as AmesPacket.Content from parsing b) no longer points at the same
// bytes after an in-place edit.
//
// The caller is expected to have accepted b with Parse and checked
// NeedsOrigin; InsertOrigin itself checks only what it needs to not corrupt
// the packet: ErrAmesShortHeader if b is under 4 bytes, ErrAmesAlreadyRelayed
// if bit 31 is already clear. On error it returns nil and leaves b
// untouched.
func InsertOrigin(b []byte, origin [AmesOriginLen]byte) ([]byte, error) {
	n := len(b)
	if n < AmesHeaderLen {
		return nil, ErrAmesShortHeader
	}
	if b[3]&0x80 == 0 {
		return nil, ErrAmesAlreadyRelayed
	}
	var out []byte
	if cap(b)-n >= AmesOriginLen {
		out = b[:n+AmesOriginLen]
		copy(out[AmesHeaderLen+AmesOriginLen:], out[AmesHeaderLen:n])
	} else {
		out = make([]byte, n+AmesOriginLen)
		copy(out, b[:AmesHeaderLen])
		copy(out[AmesHeaderLen+AmesOriginLen:], b[AmesHeaderLen:])
	}
	out[0] &^= 3
	out[3] &^= 0x80
	copy(out[AmesHeaderLen:], origin[:])
	return out, nil
}

// IsSTUN reports whether b is a STUN binding request as vere recognises one:
// at least 28 bytes, message type 00 01, the magic cookie at bytes 4-7, and a
// FINGERPRINT attribute (80 28 00 04, then the big-endian CRC-32 of
// everything before the attribute, XOR 0x5354554e) as the last 8 bytes. Like
// vere, it takes the first 80 28 00 04 after the 20-byte STUN header as the
// attribute, so a request in which that pattern also appears earlier is not
// recognised. It does not allocate.
func IsSTUN(b []byte) bool {
	if len(b) < amesSTUNMinRequestLen || b[0] != 0x00 || b[1] != 0x01 ||
		string(b[4:8]) != amesSTUNMagicCookie {
		return false
	}
	at := len(b) - amesSTUNFingerprintLen
	if bytes.Index(b[amesSTUNHeaderLen:], []byte(amesSTUNFingerprintHdr)) != at-amesSTUNHeaderLen {
		return false
	}
	return binary.BigEndian.Uint32(b[at+4:]) == stunFingerprint(b[:at])
}

// AmesWail is the content of a fine request.
type AmesWail struct {
	Tag  uint8  // 0 is the only tag vere knows
	Frag uint32 // fragment number requested
	// Path is the scry path; after Parse a view into the content. Vere's C
	// code checks only its length; Hoon's path parser later wants a leading
	// '/' and printable characters, which Parse does not check.
	Path []byte
}

// Parse decodes wail content (AmesPacket.Content of an AmesClassWail
// packet) as the addressee checks it: at least 7 bytes (ErrAmesWailShort),
// tag 0 (ErrAmesWailBadTag), path length at most AmesWailPathMax
// (ErrAmesWailPathTooLong), and exactly path length bytes after the 7
// (ErrAmesWailLengthMismatch). w.Path aliases content. On error w is zeroed.
// It does not allocate.
func (w *AmesWail) Parse(content []byte) error {
	*w = AmesWail{}
	if len(content) < amesWailFixedLen {
		return ErrAmesWailShort
	}
	if content[0] != 0 {
		return ErrAmesWailBadTag
	}
	n := int(binary.LittleEndian.Uint16(content[5:]))
	if n > AmesWailPathMax {
		return ErrAmesWailPathTooLong
	}
	if amesWailFixedLen+n != len(content) {
		return ErrAmesWailLengthMismatch
	}
	w.Frag = binary.LittleEndian.Uint32(content[1:])
	w.Path = content[amesWailFixedLen:]
	return nil
}

// Append appends the wire form of w: tag, fragment, len(Path) as u16, Path.
// A Path longer than 65535 bytes gets a truncated length field; keep paths
// within AmesWailPathMax.
func (w *AmesWail) Append(dst []byte) []byte {
	dst = append(dst, w.Tag)
	dst = binary.LittleEndian.AppendUint32(dst, w.Frag)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(w.Path)))
	return append(dst, w.Path...)
}

// AmesPurr is the content of a fine response. Slices are views into the
// parsed content.
type AmesPurr struct {
	Frag uint32 // fragment number
	Path []byte // scry path
	Sig  []byte // AmesPurrSigLen bytes
	Num  uint32 // fragment count
	Data []byte // the fragment, at most AmesPurrDataMax bytes
}

// Parse decodes purr content (AmesPacket.Content of an AmesClassPurr
// packet) per the layout at the top of this file. Vere's runtime hands purrs
// to Arvo without checking them, so neither the addressee's runtime nor a
// forwarder needs this; it is for tools and tests. Errors:
// ErrAmesPurrShort if the content ends before the path or signature,
// ErrAmesPurrCountNotMinimal if there is no data and the count takes more
// bytes than it needs (then Append could not reproduce it),
// ErrAmesPurrDataTooLong if data exceeds AmesPurrDataMax. On error pr is
// zeroed. It does not allocate.
func (pr *AmesPurr) Parse(content []byte) error {
	*pr = AmesPurr{}
	if len(content) < amesPurrFixedLen {
		return ErrAmesPurrShort
	}
	n := int(binary.LittleEndian.Uint16(content[4:]))
	sigAt := amesPurrFixedLen + n
	numAt := sigAt + AmesPurrSigLen
	if len(content) < numAt {
		return ErrAmesPurrShort
	}
	rest := content[numAt:]
	var num uint32
	var data []byte
	if len(rest) > amesPurrNumLen {
		num = binary.LittleEndian.Uint32(rest)
		data = rest[amesPurrNumLen:]
		if len(data) > AmesPurrDataMax {
			return ErrAmesPurrDataTooLong
		}
	} else {
		if len(rest) > 0 && rest[len(rest)-1] == 0 {
			return ErrAmesPurrCountNotMinimal
		}
		for i, c := range rest {
			num |= uint32(c) << (8 * i)
		}
	}
	pr.Frag = binary.LittleEndian.Uint32(content)
	pr.Path = content[amesPurrFixedLen:sigAt]
	pr.Sig = content[sigAt:numAt]
	pr.Num = num
	pr.Data = data
	return nil
}

// NumLen returns how many bytes the fragment count takes on the wire: 4 when
// data follows, else the fewest that hold Num (0 for 0).
func (pr *AmesPurr) NumLen() int {
	if len(pr.Data) > 0 {
		return amesPurrNumLen
	}
	n := 0
	for v := pr.Num; v != 0; v >>= 8 {
		n++
	}
	return n
}

// Append appends the wire form of pr: fragment, len(Path) as u16, Path, Sig
// (padded with zeros or cut to AmesPurrSigLen bytes), the count in NumLen
// bytes, Data.
func (pr *AmesPurr) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, pr.Frag)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(pr.Path)))
	dst = append(dst, pr.Path...)
	var sig [AmesPurrSigLen]byte
	copy(sig[:], pr.Sig)
	dst = append(dst, sig[:]...)
	for i := range pr.NumLen() {
		dst = append(dst, byte(pr.Num>>(8*i)))
	}
	return append(dst, pr.Data...)
}
