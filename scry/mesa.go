package scry

import (
	"encoding/binary"
	"math/bits"
	"net/netip"

	"github.com/urbit-relay/relay/lane"
)

// Mesa wire constants. The layout they belong to is drawn in doc.go.
const (
	// MesaCookie is bytes 4-7 of every mesa packet, read as a LE u32
	// (wire bytes 00 02 e0 67). Datagrams without it are legacy ames.
	MesaCookie uint32 = 0x67e00200

	// MesaVersion is the only protocol version vere's parser accepts, and the
	// one Append writes.
	MesaVersion = 1

	// MesaHeaderLen is the header word plus the cookie; the mugged body
	// starts here.
	MesaHeaderLen = 8

	// MesaMaxPacket is the largest datagram vere's receive gate lets through
	// to the mesa parser (_mesa_hear drops longer ones). It is the largest
	// UDP payload that fits a 1500-byte Ethernet MTU after IPv4 and UDP
	// headers.
	MesaMaxPacket = 1472

	// MesaMaxHops is the largest hop count the 3-bit header field holds;
	// vere's inc_hopcount saturates here.
	MesaMaxHops = 7

	// ShortHopLen is the size of a SHORT next-hop: an IPv4 address and a
	// port, both little-endian (lane.EncodeShort and lane.DecodeShort).
	ShortHopLen = lane.ShortLen

	// DefaultBloq is the bloq of ordinary names: 2^13 bits, 1024-byte
	// fragments.
	DefaultBloq = 13

	// mesaMugMask keeps the 20 mug bits the header carries.
	mesaMugMask = 0xFFFFF
)

// Type is the packet type in header bits 7-8.
type Type uint8

const (
	TypeReserved Type = 0 // accepted by vere only with an empty body
	TypePage     Type = 1 // a response: name, data, next-hop
	TypePeek     Type = 2 // a request: name
	TypePoke     Type = 3 // a request carrying data: name, payload name, data
)

// String returns "resv", "page", "peek" or "poke", the names the test
// vectors use.
func (t Type) String() string {
	switch t & 3 {
	case TypePage:
		return "page"
	case TypePeek:
		return "peek"
	case TypePoke:
		return "poke"
	}
	return "resv"
}

// NextHopType is the next-hop kind in header bits 2-3. Only pages carry
// next-hop bytes; peek and poke parsing ignores the field (but Append keeps
// it, as vere's serializer does).
type NextHopType uint8

const (
	NextHopNone  NextHopType = 0 // no next-hop bytes
	NextHopShort NextHopType = 1 // 6 bytes: IPv4 address and port
	NextHopLong  NextHopType = 2 // vere writes it but its parser rejects it
	NextHopMany  NextHopType = 3 // vere writes it but its parser rejects it
)

// String returns "none", "short", "long" or "many".
func (t NextHopType) String() string {
	switch t & 3 {
	case NextHopShort:
		return "short"
	case NextHopLong:
		return "long"
	case NextHopMany:
		return "many"
	}
	return "none"
}

// AuthKind is the kind of authenticator in a data section: data meta bits
// 2-3 read as a number. The values are the wire codes.
type AuthKind uint8

const (
	AuthSign AuthKind = 0 // 64-byte signature
	AuthNone AuthKind = 1 // nothing
	AuthHMAC AuthKind = 2 // 16-byte HMAC
	AuthPair AuthKind = 3 // two 32-byte Merkle hashes, first then second
)

// Len is the number of authenticator bytes on the wire for kind k.
func (k AuthKind) Len() int {
	switch k & 3 {
	case AuthSign, AuthPair:
		return 64
	case AuthHMAC:
		return 16
	}
	return 0
}

// String returns "sign", "none", "hmac" or "pair".
func (k AuthKind) String() string {
	switch k & 3 {
	case AuthSign:
		return "sign"
	case AuthHMAC:
		return "hmac"
	case AuthPair:
		return "pair"
	}
	return "none"
}

// HeaderOf decodes the header word of b, which must be at least
// MesaHeaderLen bytes (false otherwise). It checks nothing else: a look
// ahead, like NameWire.
func HeaderOf(b []byte) (Header, bool) {
	if len(b) < MesaHeaderLen {
		return Header{}, false
	}
	return mesaHeaderOf(binary.LittleEndian.Uint32(b)), true
}

// NameShip returns the ship of a name in its wire form, as NameWire
// returns it (meta byte, then the ship in 2<<rank bytes, little-endian).
func NameShip(nameWire []byte) (lane.Ship, bool) {
	if len(nameWire) < 1 {
		return lane.Ship{}, false
	}
	n := 2 << (nameWire[0] & 3)
	if len(nameWire) < 1+n {
		return lane.Ship{}, false
	}
	return lane.ShipFromBytesLE(nameWire[1 : 1+n]), true
}

// Header is the decoded header word (bytes 0-3).
type Header struct {
	Reserved uint8       // bits 0-1; never checked, kept for round trips
	NextHop  NextHopType // bits 2-3
	Version  uint8       // bits 4-6; Parse accepts only MesaVersion, Append always writes it
	Type     Type        // bits 7-8
	Hops     uint8       // bits 9-11: hop count, 0-7
	Mug      uint32      // bits 12-31: low 20 bits of Mug(body); Append computes it
}

// mesaHeaderOf decodes the header word w.
func mesaHeaderOf(w uint32) Header {
	return Header{
		Reserved: uint8(w & 3),
		NextHop:  NextHopType(w >> 2 & 3),
		Version:  uint8(w >> 4 & 7),
		Type:     Type(w >> 7 & 3),
		Hops:     uint8(w >> 9 & 7),
		Mug:      w >> 12,
	}
}

// Word returns the header as the LE u32 on the wire. Fields wider than their
// bit field are truncated to it.
func (h Header) Word() uint32 {
	return uint32(h.Reserved&3) |
		uint32(h.NextHop&3)<<2 |
		uint32(h.Version&7)<<4 |
		uint32(h.Type&3)<<7 |
		uint32(h.Hops&7)<<9 |
		(h.Mug&mesaMugMask)<<12
}

// Name is a mesa name: a ship's scry path at a rift, bloq and fragment.
//
// The value fields say what the name is. The width fields say how it is
// written: Append writes each number in the width recorded here, or in the
// smallest width that holds it if that is wider, so the zero widths give
// vere's canonical (smallest) encoding and the widths Parse records
// reproduce the input byte for byte.
type Name struct {
	Ship lane.Ship
	Rift uint32
	Bloq uint8
	Init bool   // no fragment number (the "init" overlay)
	Auth bool   // meta tau: %auth if true, %data if false; vere writes false for init names
	Frag uint64 // fragment number; not on the wire (and 0 after Parse) when Init
	Path []byte // the path bytes: no leading '/', no terminator; at most 65535 bytes are written

	Rank      uint8 // ship width is 2<<Rank bytes (2, 4, 8, 16); 0 = smallest
	RiftWidth uint8 // rift width in bytes, 1-4; 0 = smallest
	FragTag   uint8 // meta gaf: the fragment number takes 1<<FragTag bytes; kept raw for init names, where it is not used

	// Wire is the name's exact bytes in the datagram Parse read, a sub-slice
	// of it; nil for names built in memory. Append ignores it.
	Wire []byte
}

// rank returns the rank Append writes: the recorded one, or the ship's own
// if that is larger. Galaxies and stars take rank 0, planets 1, moons 2,
// comets 3, as in vere's _mesa_rank.
func (n *Name) rank() uint8 {
	r := n.Rank & 3
	var need uint8
	switch {
	case n.Ship.Hi != 0:
		need = 3
	case n.Ship.Lo > 0xFFFFFFFF:
		need = 2
	case n.Ship.Lo > 0xFFFF:
		need = 1
	}
	return max(r, need)
}

// riftWidth returns the rift width in bytes that Append writes, 1-4.
func (n *Name) riftWidth() int {
	return max(min(int(n.RiftWidth), 4), mesaByteLen(uint64(n.Rift)), 1)
}

// fragTag returns the gaf bits Append writes.
func (n *Name) fragTag() uint8 {
	if n.Init {
		return n.FragTag & 3
	}
	return max(n.FragTag&3, mesaChubTag(n.Frag))
}

// pathLen returns the number of path bytes Append writes.
func (n *Name) pathLen() int { return min(len(n.Path), 0xFFFF) }

// Meta returns the name's meta byte as Append writes it: rank in bits 0-1,
// rift width minus one in bits 2-3, init in bit 4, tau in bit 5, gaf in bits
// 6-7.
func (n *Name) Meta() byte {
	m := n.rank() | byte(n.riftWidth()-1)<<2 | n.fragTag()<<6
	if n.Init {
		m |= 1 << 4
	}
	if n.Auth {
		m |= 1 << 5
	}
	return m
}

// ShipLen returns the width of the ship on the wire, 2<<rank.
func (n *Name) ShipLen() int { return 2 << n.rank() }

// FragLen returns the width of the fragment number on the wire: 0 for init
// names, else 1<<gaf.
func (n *Name) FragLen() int {
	if n.Init {
		return 0
	}
	return 1 << n.fragTag()
}

// Size returns the number of bytes Append writes for n.
func (n *Name) Size() int {
	return 1 + n.ShipLen() + n.riftWidth() + 1 + n.FragLen() + 2 + n.pathLen()
}

// Append appends n's wire form to dst. Its bytes equal Wire for a name Parse
// read; for a name with zero widths they are vere's canonical encoding,
// which is what keys a name independently of how a peer wrote it.
func (n *Name) Append(dst []byte) []byte {
	dst = append(dst, n.Meta())
	dst = n.Ship.AppendLE(dst, n.ShipLen())
	dst = mesaAppendLE(dst, uint64(n.Rift), n.riftWidth())
	dst = append(dst, n.Bloq)
	if !n.Init {
		dst = mesaAppendLE(dst, n.Frag, n.FragLen())
	}
	pl := n.pathLen()
	dst = binary.LittleEndian.AppendUint16(dst, uint16(pl))
	return append(dst, n.Path[:pl]...)
}

// canonicalize makes n's encoding vere's: smallest widths, and tau and gaf
// clear on init names.
func (n *Name) canonicalize() {
	n.Rank, n.RiftWidth, n.FragTag = 0, 0, 0
	if n.Init {
		n.Auth = false
		n.Frag = 0
	}
	n.Wire = nil
}

// Data is the data section of a page or poke: the message size, the
// authenticator and one fragment.
//
// As for Name, Append writes the widths recorded here or the smallest that
// hold the value, whichever is wider; zero widths are canonical.
type Data struct {
	// Total is the byte size of the whole message (vere's tob_d). The codec
	// does not relate it to Frag or to the name's fragment number.
	Total    uint64
	AuthKind AuthKind
	// Auth holds the authenticator: AuthKind.Len() bytes (for AuthPair the
	// first hash then the second). Append zero-pads a shorter Auth and
	// ignores bytes past AuthKind.Len().
	Auth []byte
	// Frag is the fragment; its length must fit in 32 bits.
	Frag []byte

	TotalTag     uint8 // meta bot: Total takes 1<<TotalTag bytes; 0 = smallest
	LenWidth     uint8 // width of the fragment length in bytes, 0-4; 0 = smallest
	LenWidthByte bool  // the width is written in an extra byte (meta men = 3) even though it is below 3
	Reserved     uint8 // meta bits 4-5; never checked, kept for round trips
}

// totalTag returns the bot bits Append writes.
func (d *Data) totalTag() uint8 { return max(d.TotalTag&3, mesaChubTag(d.Total)) }

// lenWidth returns the men bits and the fragment-length width Append writes.
func (d *Data) lenWidth() (men uint8, width int) {
	width = max(min(int(d.LenWidth), 4), mesaByteLen(uint64(len(d.Frag))))
	if d.LenWidthByte || width >= 3 {
		return 3, width
	}
	return uint8(width), width
}

// Meta returns the data meta byte as Append writes it: bot in bits 0-1, the
// auth code in bits 2-3, the reserved bits in 4-5, men in bits 6-7.
func (d *Data) Meta() byte {
	men, _ := d.lenWidth()
	return d.totalTag() | byte(d.AuthKind&3)<<2 | (d.Reserved&3)<<4 | men<<6
}

// TotalLen returns the width of Total on the wire, 1<<bot.
func (d *Data) TotalLen() int { return 1 << d.totalTag() }

// Pair returns the two Merkle hashes of an AuthPair authenticator; nil, nil
// if d is not AuthPair or Auth is short.
func (d *Data) Pair() (first, second []byte) {
	if d.AuthKind != AuthPair || len(d.Auth) < 64 {
		return nil, nil
	}
	return d.Auth[:32:32], d.Auth[32:64:64]
}

// Size returns the number of bytes Append writes for d.
func (d *Data) Size() int {
	men, w := d.lenWidth()
	n := 1 + d.TotalLen() + d.AuthKind.Len() + w + len(d.Frag)
	if men == 3 {
		n++
	}
	return n
}

// Append appends d's wire form to dst.
func (d *Data) Append(dst []byte) []byte {
	men, w := d.lenWidth()
	dst = append(dst, d.Meta())
	dst = mesaAppendLE(dst, d.Total, d.TotalLen())
	al := d.AuthKind.Len()
	a := d.Auth[:min(len(d.Auth), al)]
	dst = append(dst, a...)
	for range al - len(a) {
		dst = append(dst, 0)
	}
	if men == 3 {
		dst = append(dst, byte(w))
	}
	dst = mesaAppendLE(dst, uint64(len(d.Frag)), w)
	return append(dst, d.Frag...)
}

// canonicalize makes d's encoding vere's.
func (d *Data) canonicalize() {
	d.TotalTag, d.LenWidth, d.LenWidthByte, d.Reserved = 0, 0, false, 0
}

// Packet is a mesa packet. Parse fills one in place without allocating; its
// slices then point into the parsed datagram, so the Packet is valid only as
// long as that buffer is not reused. Which sections are meaningful depends
// on Header.Type:
//
//	page: Name, Data, NextHop (when Header.NextHop is NextHopShort)
//	peek: Name
//	poke: Name, PayloadName, Data
type Packet struct {
	Header      Header
	Name        Name
	PayloadName Name
	Data        Data
	// NextHop is a page's SHORT next-hop as on the wire: IPv4 address as a
	// host-order u32 written LE, then the port LE (lane.EncodeShort). See
	// NextHopAddr.
	NextHop [ShortHopLen]byte

	// mugMid is the mug's running hash over the first mugMidLen body bytes
	// (whole 4-byte blocks, up to the end of a page's data), saved by Parse
	// so that EditPageNextHop re-hashes only what follows; mugMidLen is 0
	// when nothing was saved.
	mugMid    uint32
	mugMidLen int
}

// NewPeek returns a canonical peek for name (hops 0). The packet shares
// name's Path.
func NewPeek(name Name) Packet {
	p := Packet{Header: Header{Version: MesaVersion, Type: TypePeek}, Name: name}
	p.Canonicalize()
	return p
}

// NewPage returns a canonical page answering name with data, with no
// next-hop (see SetNextHopAddr) and hops 0. The packet shares the slices of
// name and data.
func NewPage(name Name, data Data) Packet {
	p := Packet{Header: Header{Version: MesaVersion, Type: TypePage}, Name: name, Data: data}
	p.Canonicalize()
	return p
}

// NewPoke returns a canonical poke of payload (the poking ship's name for
// the message) to name, carrying data, with hops 0. The packet shares the
// slices of its arguments.
func NewPoke(name, payload Name, data Data) Packet {
	p := Packet{Header: Header{Version: MesaVersion, Type: TypePoke}, Name: name, PayloadName: payload, Data: data}
	p.Canonicalize()
	return p
}

// Canonicalize sets every width to the smallest, clears the reserved bits
// and the tau and gaf bits of init names, and sets the version, so that
// Append writes what vere's serializer writes for the same packet. It keeps
// Header.NextHop, which vere writes as given even on peeks and pokes.
func (p *Packet) Canonicalize() {
	p.Header.Reserved = 0
	p.Header.Version = MesaVersion
	p.Name.canonicalize()
	p.PayloadName.canonicalize()
	p.Data.canonicalize()
}

// NameBytes returns the wire bytes of the packet's (first) name, a
// sub-slice of the parsed datagram; nil for packets built in memory (use
// Name.Append).
func (p *Packet) NameBytes() []byte { return p.Name.Wire }

// NextHopAddr returns a page's SHORT next-hop as an address and port; false
// if the packet is not a page or has no SHORT next-hop.
func (p *Packet) NextHopAddr() (netip.AddrPort, bool) {
	if p.Header.Type != TypePage || p.Header.NextHop != NextHopShort {
		return netip.AddrPort{}, false
	}
	return lane.DecodeShort(p.NextHop), true
}

// SetNextHopAddr gives a page the SHORT next-hop ap, or none if ap is the
// zero AddrPort. It reports false, changing nothing, if p is not a page or
// ap is not IPv4 (IPv4-mapped IPv6 is accepted).
func (p *Packet) SetNextHopAddr(ap netip.AddrPort) bool {
	if p.Header.Type != TypePage {
		return false
	}
	if ap == (netip.AddrPort{}) {
		p.Header.NextHop = NextHopNone
		p.NextHop = [ShortHopLen]byte{}
		return true
	}
	h, ok := lane.EncodeShort(ap)
	if !ok {
		return false
	}
	p.Header.NextHop = NextHopShort
	p.NextHop = h
	return true
}

// bodySize returns the number of body bytes Append writes.
func (p *Packet) bodySize() int {
	switch p.Header.Type & 3 {
	case TypePeek:
		return p.Name.Size()
	case TypePoke:
		return p.Name.Size() + p.PayloadName.Size() + p.Data.Size()
	case TypePage:
		n := p.Name.Size() + p.Data.Size()
		if p.Header.NextHop == NextHopShort {
			n += ShortHopLen
		}
		return n
	}
	return 0
}

// Size returns the number of bytes Append writes.
func (p *Packet) Size() int { return MesaHeaderLen + p.bodySize() }

// Append appends the packet's wire form to dst and returns the extended
// slice. It writes version MesaVersion and the mug of the body it writes,
// whatever Header says. A page's LONG or MANY next-hop type is written
// without hop bytes (such packets do not parse); a type 0 packet has no
// body. For a packet Parse accepted, Append reproduces the input exactly.
func (p *Packet) Append(dst []byte) []byte {
	n := p.Size()
	if cap(dst)-len(dst) < n {
		grown := make([]byte, len(dst), len(dst)+n)
		copy(grown, dst)
		dst = grown
	}
	start := len(dst)
	dst = append(dst, make([]byte, MesaHeaderLen)...)
	switch p.Header.Type & 3 {
	case TypePeek:
		dst = p.Name.Append(dst)
	case TypePoke:
		dst = p.Name.Append(dst)
		dst = p.PayloadName.Append(dst)
		dst = p.Data.Append(dst)
	case TypePage:
		dst = p.Name.Append(dst)
		dst = p.Data.Append(dst)
		if p.Header.NextHop == NextHopShort {
			dst = append(dst, p.NextHop[:]...)
		}
	}
	h := p.Header
	h.Version = MesaVersion
	h.Mug = Mug(dst[start+MesaHeaderLen:])
	binary.LittleEndian.PutUint32(dst[start:], h.Word())
	binary.LittleEndian.PutUint32(dst[start+4:], MesaCookie)
	return dst
}

// IsMesa reports whether b passes the cookie half of vere's receive gate
// (mesa_is_new_pact): at least 8 bytes with the mesa cookie at bytes 4-7.
// Datagrams that fail it are legacy ames.
func IsMesa(b []byte) bool {
	return len(b) >= MesaHeaderLen && binary.LittleEndian.Uint32(b[4:]) == MesaCookie
}

// Parse decodes the datagram b into p, applying vere's receive gate first
// (ErrMesaNotMesa, then ErrMesaTooLarge) and then vere's parser checks in
// its order: version, cookie, body, mug, trailing bytes. It returns nil or
// one of the MesaError values, and never allocates. On success p's slices
// alias b; on error p's contents are unspecified.
func (p *Packet) Parse(b []byte) error {
	if !IsMesa(b) {
		return ErrMesaNotMesa
	}
	if len(b) > MesaMaxPacket {
		return ErrMesaTooLarge
	}
	return p.sift(b, MugPrefix{})
}

// ParseWithPrefix is Parse given pre, the MugPrefix (MugPrefixes) of the
// first MesaMugPrefixLen(b) bytes of b's body b[MesaHeaderLen:]: the mug
// check then hashes only what follows. It returns exactly what Parse
// returns, provided pre was computed from these bytes: a stale pre makes
// the mug check wrong, so a caller must tie pre to the buffer it was
// computed from and compute it after the buffer's last write. A pre whose
// N does not fit the parse (longer than the part it stands for) is
// ignored and the body hashed whole.
func (p *Packet) ParseWithPrefix(b []byte, pre MugPrefix) error {
	if !IsMesa(b) {
		return ErrMesaNotMesa
	}
	if len(b) > MesaMaxPacket {
		return ErrMesaTooLarge
	}
	return p.sift(b, pre)
}

// MesaMugPrefixLen returns how many bytes of the body of datagram b (the
// bytes after the header) Parse hashes before the part a relay's next-hop
// edit changes: for a page, its body without the next-hop the header
// announces; for anything else, the whole body. It reads only the header
// word; it is what MugPrefixes should be given for ParseWithPrefix.
func MesaMugPrefixLen(b []byte) int {
	if len(b) < MesaHeaderLen {
		return 0
	}
	n := len(b) - MesaHeaderLen
	w := binary.LittleEndian.Uint32(b)
	if Type(w>>mesaTypeShift&3) == TypePage && NextHopType(w>>mesaNextHopShift&3) == NextHopShort {
		n -= ShortHopLen
	}
	return max(n, 0)
}

// sift is vere's mesa_sift_pact_from_buf without the receive gate. Inputs
// shorter than the header get the verdict vere's bit reader gives when the
// buffer is followed by zero bytes (it reads past a 3-byte buffer).
func (p *Packet) sift(b []byte, pre MugPrefix) error {
	*p = Packet{}
	switch {
	case len(b) < 3:
		// The fifth header bit field finds the buffer empty.
		return ErrMesaUnexpectedEnd
	case len(b) < 4:
		if b[0]>>4&7 != MesaVersion {
			return ErrMesaBadProtocol
		}
		return ErrMesaBadCookie
	}
	p.Header = mesaHeaderOf(binary.LittleEndian.Uint32(b))
	if p.Header.Version != MesaVersion {
		return ErrMesaBadProtocol
	}
	if len(b) < MesaHeaderLen {
		return ErrMesaUnexpectedEOF
	}
	if binary.LittleEndian.Uint32(b[4:]) != MesaCookie {
		return ErrMesaBadCookie
	}
	s := mesaSifter{b: b, off: MesaHeaderLen}
	var err error
	dataEnd := 0 // a page's offset after its data
	switch p.Header.Type {
	case TypePeek:
		err = s.name(&p.Name)
	case TypePoke:
		if err = s.name(&p.Name); err == nil {
			if err = s.name(&p.PayloadName); err == nil {
				err = s.data(&p.Data)
			}
		}
	case TypePage:
		if err = s.name(&p.Name); err == nil {
			if err = s.data(&p.Data); err == nil {
				dataEnd = s.off
				err = s.nextHop(p.Header.NextHop, &p.NextHop)
			}
		}
	}
	if err != nil {
		return err
	}
	body := b[MesaHeaderLen:s.off]
	var mug uint32
	if p.Header.Type == TypePage {
		// Save the hash state at the end of the data: a relay rewriting
		// the next-hop then re-hashes only the bytes after it.
		p.mugMidLen = (dataEnd - MesaHeaderLen) &^ 3
		p.mugMid = pre.stateAt(body, p.mugMidLen)
		mug = mugResume(p.mugMid, p.mugMidLen, body)
	} else {
		mug = pre.Mug(body)
	}
	if mug&mesaMugMask != p.Header.Mug {
		return ErrMesaBadMug
	}
	if s.off != len(b) {
		return ErrMesaTrailingBytes
	}
	return nil
}

// mesaSifter reads fields from b at off, with vere's sifter's failure
// rules.
type mesaSifter struct {
	b   []byte
	off int
}

// take returns the next n bytes (capacity limited to them).
func (s *mesaSifter) take(n int) ([]byte, error) {
	if n > len(s.b)-s.off {
		return nil, ErrMesaUnexpectedEOF
	}
	v := s.b[s.off : s.off+n : s.off+n]
	s.off += n
	return v, nil
}

// le reads an n-byte (n <= 8) little-endian number.
func (s *mesaSifter) le(n int) (uint64, error) {
	v, err := s.take(n)
	if err != nil {
		return 0, err
	}
	return mesaLE(v), nil
}

// meta reads a meta byte. Vere reads it as several bit fields and fails
// with "unexpected end of packet" when the buffer is empty before any of
// them, so a meta byte that ends the datagram fails as if it were missing.
func (s *mesaSifter) meta() (byte, error) {
	if len(s.b)-s.off < 2 {
		return 0, ErrMesaUnexpectedEnd
	}
	m := s.b[s.off]
	s.off++
	return m, nil
}

// name reads a name into n.
func (s *mesaSifter) name(n *Name) error {
	start := s.off
	m, err := s.meta()
	if err != nil {
		return err
	}
	n.Rank = m & 3
	n.RiftWidth = m>>2&3 + 1
	n.Init = m&(1<<4) != 0
	n.Auth = m&(1<<5) != 0
	n.FragTag = m >> 6
	ship, err := s.take(2 << n.Rank)
	if err != nil {
		return err
	}
	n.Ship = lane.ShipFromBytesLE(ship)
	rift, err := s.le(int(n.RiftWidth))
	if err != nil {
		return err
	}
	n.Rift = uint32(rift)
	bloq, err := s.take(1)
	if err != nil {
		return err
	}
	n.Bloq = bloq[0]
	if !n.Init {
		if n.Frag, err = s.le(1 << n.FragTag); err != nil {
			return err
		}
	}
	pl, err := s.le(2)
	if err != nil {
		return err
	}
	if n.Path, err = s.take(int(pl)); err != nil {
		return err
	}
	n.Wire = s.b[start:s.off:s.off]
	return nil
}

// data reads a data section into d.
func (s *mesaSifter) data(d *Data) error {
	m, err := s.meta()
	if err != nil {
		return err
	}
	d.TotalTag = m & 3
	d.AuthKind = AuthKind(m >> 2 & 3)
	d.Reserved = m >> 4 & 3
	men := m >> 6
	if d.Total, err = s.le(1 << d.TotalTag); err != nil {
		return err
	}
	if d.Auth, err = s.take(d.AuthKind.Len()); err != nil {
		return err
	}
	width := men
	if men == 3 {
		wb, err := s.take(1)
		if err != nil {
			return err
		}
		width = wb[0]
		d.LenWidthByte = true
	}
	if width > 4 {
		return ErrMesaVarWordTooLong
	}
	d.LenWidth = width
	fl, err := s.le(int(width))
	if err != nil {
		return err
	}
	if fl > uint64(len(s.b)-s.off) {
		return ErrMesaUnexpectedEOF
	}
	d.Frag, _ = s.take(int(fl))
	return nil
}

// nextHop reads a page's next-hop of kind t into h.
func (s *mesaSifter) nextHop(t NextHopType, h *[ShortHopLen]byte) error {
	switch t {
	case NextHopShort:
		v, err := s.take(ShortHopLen)
		if err != nil {
			return err
		}
		copy(h[:], v)
	case NextHopLong:
		return ErrMesaHopLong
	case NextHopMany:
		return ErrMesaHopMany
	}
	return nil
}

// mesaLE decodes up to 8 little-endian bytes.
func mesaLE(b []byte) uint64 {
	var v uint64
	for i, c := range b {
		v |= uint64(c) << (8 * i)
	}
	return v
}

// mesaAppendLE appends the low n bytes (n <= 8) of v, little-endian.
func mesaAppendLE(dst []byte, v uint64, n int) []byte {
	for i := range n {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

// mesaByteLen returns the number of bytes v needs (0 for 0), vere's met3.
func mesaByteLen(v uint64) int { return (bits.Len64(v) + 7) / 8 }

// mesaChubTag returns the smallest tag t with v fitting in 1<<t bytes.
func mesaChubTag(v uint64) uint8 {
	switch {
	case v <= 0xFF:
		return 0
	case v <= 0xFFFF:
		return 1
	case v <= 0xFFFFFFFF:
		return 2
	}
	return 3
}

// NameWire returns the type and the name's wire bytes (a sub-slice of b) of
// a mesa peek, poke or page, reading only the header and the name: no
// checksum, no data. It is a cheap look ahead, for a relay that wants a
// datagram's table key before deciding on it; the decision must still
// Parse. For every peek, poke and page Parse accepts, NameWire returns
// Parse's Name.Wire. It allocates nothing.
func NameWire(b []byte) (Type, []byte, bool) {
	if !IsMesa(b) || len(b) > MesaMaxPacket {
		return 0, nil, false
	}
	h := mesaHeaderOf(binary.LittleEndian.Uint32(b))
	if h.Version != MesaVersion || (h.Type != TypePeek && h.Type != TypePoke && h.Type != TypePage) {
		return 0, nil, false
	}
	// The name's length from its meta byte and path length alone (the
	// layout mesaSifter.name reads), with no fields decoded.
	start := MesaHeaderLen
	if len(b)-start < 2 { // a meta byte that ends the datagram fails in Parse
		return 0, nil, false
	}
	m := b[start]
	off := start + 1 + 2<<(m&3) + int(m>>2&3) + 1 + 1 // meta, ship, rift, bloq
	if m&(1<<4) == 0 {                                // not Init: a fragment number
		off += 1 << (m >> 6)
	}
	if off+2 > len(b) {
		return 0, nil, false
	}
	off += 2 + int(binary.LittleEndian.Uint16(b[off:]))
	if off > len(b) {
		return 0, nil, false
	}
	return h.Type, b[start:off:off], true
}
