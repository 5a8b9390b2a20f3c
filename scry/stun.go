// STUN binding requests and responses (RFC 8489), as vere's
// pkg/vere/io/ames/stun.c reads and writes them.
//
// Every ship under a galaxy STUNs the galaxy every 25 s on the ames socket,
// to learn its own public lane; the galaxy answers. This file is the codec
// for both ends; the vectors in testdata/stun (vere's own client requests and
// its galaxy's responses) are the authority.
//
// All integers are big-endian (network order). A message is a 20-byte
// header and attributes:
//
//	 0               1               2               3
//	+-------------------------------+-------------------------------+
//	|0 0|   message type (14 bits)  |  message length (bytes after  |
//	|   |                           |  the header, a multiple of 4) |
//	+-------------------------------+-------------------------------+
//	|                  magic cookie 21 12 a4 42                     |
//	+---------------------------------------------------------------+
//	|                transaction id (12 bytes)                      |
//	+---------------------------------------------------------------+
//	| attributes: type u16, length u16, value padded to 4 bytes ... |
//
// Message types: 00 01 binding request, 01 01 binding success response.
//
// A request vere sends (u3_stun_make_request) is 28 bytes: the header, with
// length 8, and a FINGERPRINT attribute:
//
//	80 28 00 04  crc32  FINGERPRINT: CRC-32 (IEEE) of every byte before the
//	                    attribute, XOR 0x5354554e
//
// A response vere's galaxy sends (u3_stun_make_response) is 40 bytes: the
// request's header with type 01 01 and length 20 (cookie and transaction id
// kept), then
//
//	00 20 00 08  00 01  xport  xaddr   XOR-MAPPED-ADDRESS, IPv4: family 1,
//	                                   port XOR 0x2112, address XOR the cookie
//	80 28 00 04  crc32                 FINGERPRINT, as above
//
// Vere's client takes a response only if it is exactly 40 bytes, has type
// 01 01, the cookie, its transaction id, and a FINGERPRINT at the first
// 80 28 00 04 after the header that is right and ends the message; it then
// reads the mapped lane from the first 00 20 00 08. So an IPv4 response can
// have no other layout. (Like vere's galaxy, STUNResponse.Append cannot help
// the one lane in 2^32 whose XOR'd bytes contain 80 28 00 04, from which
// vere's client rejects the answer: port 41274 on 33.22.0.0/16, and any port
// of 161.58.164.70.) An IPv6 lane, which vere does not have, takes family 2
// and 16 address bytes XOR the cookie and the transaction id, as RFC 8489
// says: 52 bytes.
//
// Vere answers any datagram IsSTUN accepts and ignores its attributes.
// STUNRequest.Parse is stricter about the frame, not the content: the length
// field must be the datagram's, every attribute must fit, and FINGERPRINT
// must be the last one and right. Other attributes (SOFTWARE, USERNAME,
// MESSAGE-INTEGRITY, ...) are skipped, as vere skips them: there is no
// authentication to check and no error response to send.

package scry

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// STUN message sizes.
const (
	// STUNHeaderLen is the STUN header: type, length, cookie, transaction id.
	STUNHeaderLen = amesSTUNHeaderLen
	// STUNRequestMinLen is the shortest request Parse accepts (and the
	// request vere sends): the header and a FINGERPRINT.
	STUNRequestMinLen = amesSTUNMinRequestLen
	// STUNResponseLen4 is a response for an IPv4 lane, vere's layout.
	STUNResponseLen4 = STUNHeaderLen + stunXorAttrLen4 + amesSTUNFingerprintLen
	// STUNResponseLen6 is a response for an IPv6 lane.
	STUNResponseLen6 = STUNHeaderLen + stunXorAttrLen6 + amesSTUNFingerprintLen
	// STUNResponseMaxLen is the largest response Append writes; at most
	// STUNResponseMaxLen/STUNRequestMinLen (under 2) times the request.
	STUNResponseMaxLen = STUNResponseLen6

	stunAttrHeaderLen   = 4
	stunXorAttrLen4     = stunAttrHeaderLen + 8  // reserved, family, port, 4 address bytes
	stunXorAttrLen6     = stunAttrHeaderLen + 20 // reserved, family, port, 16 address bytes
	stunTypeRequest     = 0x0001                 // binding request
	stunTypeResponse    = 0x0101                 // binding success response
	stunAttrXorMapped   = 0x0020
	stunAttrFingerprint = 0x8028
	stunFamilyIPv4      = 0x01
	stunFamilyIPv6      = 0x02
	stunCookie          = 0x2112a442
)

// STUNError is why a STUN message was rejected. Like AmesError, the values
// are comparable sentinels, and converting one to error does not allocate.
type STUNError uint8

// Errors returned by STUNRequest.Parse and STUNResponse.Parse.
const (
	// ErrSTUNShort: shorter than the 20-byte header.
	ErrSTUNShort STUNError = iota + 1
	// ErrSTUNType: not a binding request (Parse of a request) or binding
	// success response (of a response).
	ErrSTUNType
	// ErrSTUNCookie: bytes 4-7 are not the magic cookie.
	ErrSTUNCookie
	// ErrSTUNLength: the length field is not the bytes after the header, or
	// not a multiple of 4.
	ErrSTUNLength
	// ErrSTUNAttribute: an attribute runs past the end of the message.
	ErrSTUNAttribute
	// ErrSTUNFingerprint: a request without FINGERPRINT as its last
	// attribute, a FINGERPRINT elsewhere, or one whose CRC is wrong.
	ErrSTUNFingerprint
	// ErrSTUNNoMapped: a response with no XOR-MAPPED-ADDRESS.
	ErrSTUNNoMapped
	// ErrSTUNMapped: an XOR-MAPPED-ADDRESS of unknown family or the wrong
	// length for its family.
	ErrSTUNMapped
)

// Reason returns the error's label, e.g. "fingerprint". Labels are stable;
// an unknown value gives "unknown".
func (e STUNError) Reason() string {
	switch e {
	case ErrSTUNShort:
		return "short"
	case ErrSTUNType:
		return "type"
	case ErrSTUNCookie:
		return "cookie"
	case ErrSTUNLength:
		return "length"
	case ErrSTUNAttribute:
		return "attribute"
	case ErrSTUNFingerprint:
		return "fingerprint"
	case ErrSTUNNoMapped:
		return "no-mapped-address"
	case ErrSTUNMapped:
		return "bad-mapped-address"
	}
	return "unknown"
}

// Error returns "stun: " and the reason. It allocates; compare the value on
// hot paths.
func (e STUNError) Error() string { return "stun: " + e.Reason() }

// STUNRequest is a binding request.
type STUNRequest struct {
	// TxID is the transaction id, which the response repeats.
	TxID [12]byte
	// Attrs are the attributes before FINGERPRINT, each whole; after
	// Parse a view into the datagram.
	Attrs []byte
}

// Parse decodes b as a binding request: the header (type 00 01, the cookie,
// a length that is len(b)-20 and a multiple of 4), attributes that each fit,
// and FINGERPRINT last and right. It does not allocate.
func (q *STUNRequest) Parse(b []byte) error {
	fp, err := stunFrame(b, stunTypeRequest)
	if err != nil {
		return err
	}
	if fp < 0 {
		return ErrSTUNFingerprint
	}
	copy(q.TxID[:], b[8:STUNHeaderLen])
	q.Attrs = b[STUNHeaderLen:fp]
	return nil
}

// Append appends the request to dst: the header, Attrs and a FINGERPRINT.
// With no Attrs it is the 28-byte request vere sends. Attrs must be whole
// attributes, a multiple of 4 bytes long, for Parse to take the result.
func (q *STUNRequest) Append(dst []byte) []byte {
	start := len(dst)
	dst = stunAppendHeader(dst, stunTypeRequest, len(q.Attrs)+amesSTUNFingerprintLen, &q.TxID)
	dst = append(dst, q.Attrs...)
	return stunAppendFingerprint(dst, start)
}

// STUNResponse is a binding success response.
type STUNResponse struct {
	// TxID is the transaction id of the request answered.
	TxID [12]byte
	// Mapped is the lane the request came from (XOR-MAPPED-ADDRESS).
	Mapped netip.AddrPort
}

// Len returns the length Append writes: STUNResponseLen4 for an IPv4 (or
// IPv4-mapped) lane, else STUNResponseLen6.
func (p *STUNResponse) Len() int {
	if p.Mapped.Addr().Unmap().Is4() {
		return STUNResponseLen4
	}
	return STUNResponseLen6
}

// Append appends the response to dst in vere's layout: the header,
// XOR-MAPPED-ADDRESS and FINGERPRINT. For an IPv4 lane it is byte for byte
// what vere's galaxy sends; an IPv4-mapped IPv6 lane is written as IPv4, and
// an invalid one as the IPv6 address :: port 0. It does not allocate when dst
// has room.
func (p *STUNResponse) Append(dst []byte) []byte {
	start := len(dst)
	ip := p.Mapped.Addr().Unmap()
	attr := stunXorAttrLen6
	if ip.Is4() {
		attr = stunXorAttrLen4
	}
	dst = stunAppendHeader(dst, stunTypeResponse, attr+amesSTUNFingerprintLen, &p.TxID)
	dst = binary.BigEndian.AppendUint16(dst, stunAttrXorMapped)
	dst = binary.BigEndian.AppendUint16(dst, uint16(attr-stunAttrHeaderLen))
	family := byte(stunFamilyIPv6)
	if ip.Is4() {
		family = stunFamilyIPv4
	}
	dst = append(dst, 0, family) // reserved, family
	dst = binary.BigEndian.AppendUint16(dst, p.Mapped.Port()^stunCookie>>16)
	if ip.Is4() {
		a := ip.As4()
		dst = binary.BigEndian.AppendUint32(dst, binary.BigEndian.Uint32(a[:])^stunCookie)
	} else {
		// XOR with the cookie and the transaction id: bytes 4-19 of the
		// header just written.
		a := ip.As16()
		key := dst[start+4 : start+STUNHeaderLen]
		for i := range a {
			dst = append(dst, a[i]^key[i])
		}
	}
	return stunAppendFingerprint(dst, start)
}

// Parse decodes b as a binding success response: the header as for a
// request (type 01 01), attributes that each fit, a FINGERPRINT if any last
// and right, and the first XOR-MAPPED-ADDRESS, IPv4 or IPv6. Other
// attributes are skipped. It reads any such response, not only vere's
// layout; see the file comment for what vere's client takes. It does not
// allocate.
func (p *STUNResponse) Parse(b []byte) error {
	fp, err := stunFrame(b, stunTypeResponse)
	if err != nil {
		return err
	}
	end := len(b)
	if fp >= 0 {
		end = fp
	}
	for at := STUNHeaderLen; at < end; {
		typ := binary.BigEndian.Uint16(b[at:])
		n := int(binary.BigEndian.Uint16(b[at+2:]))
		v := b[at+stunAttrHeaderLen : at+stunAttrHeaderLen+n] // stunFrame checked the bounds
		at += stunAttrHeaderLen + (n+3)&^3
		if typ != stunAttrXorMapped {
			continue
		}
		var ip netip.Addr
		switch {
		case n == stunXorAttrLen4-stunAttrHeaderLen && v[1] == stunFamilyIPv4:
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(v[4:])^stunCookie)
			ip = netip.AddrFrom4(a)
		case n == stunXorAttrLen6-stunAttrHeaderLen && v[1] == stunFamilyIPv6:
			var a [16]byte
			for i := range a {
				a[i] = v[4+i] ^ b[4+i]
			}
			ip = netip.AddrFrom16(a)
		default:
			return ErrSTUNMapped
		}
		copy(p.TxID[:], b[8:STUNHeaderLen])
		p.Mapped = netip.AddrPortFrom(ip, binary.BigEndian.Uint16(v[2:])^stunCookie>>16)
		return nil
	}
	return ErrSTUNNoMapped
}

// stunFrame checks b's header (message type typ, the cookie, the length)
// and that its attributes tile the rest, and returns the offset of its
// FINGERPRINT, or -1 if it has none. A FINGERPRINT must be last and right.
func stunFrame(b []byte, typ uint16) (fp int, err error) {
	if len(b) < STUNHeaderLen {
		return 0, ErrSTUNShort
	}
	if binary.BigEndian.Uint16(b) != typ {
		return 0, ErrSTUNType
	}
	if binary.BigEndian.Uint32(b[4:]) != stunCookie {
		return 0, ErrSTUNCookie
	}
	if n := int(binary.BigEndian.Uint16(b[2:])); n != len(b)-STUNHeaderLen || n%4 != 0 {
		return 0, ErrSTUNLength
	}
	fp = -1
	for at := STUNHeaderLen; at < len(b); {
		if len(b)-at < stunAttrHeaderLen {
			return 0, ErrSTUNAttribute
		}
		n := int(binary.BigEndian.Uint16(b[at+2:]))
		next := at + stunAttrHeaderLen + (n+3)&^3
		if next > len(b) {
			return 0, ErrSTUNAttribute
		}
		if binary.BigEndian.Uint16(b[at:]) == stunAttrFingerprint {
			if n != 4 || next != len(b) ||
				binary.BigEndian.Uint32(b[at+stunAttrHeaderLen:]) != stunFingerprint(b[:at]) {
				return 0, ErrSTUNFingerprint
			}
			fp = at
		}
		at = next
	}
	return fp, nil
}

// stunAppendHeader appends a STUN header.
func stunAppendHeader(dst []byte, typ uint16, length int, txid *[12]byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, typ)
	dst = binary.BigEndian.AppendUint16(dst, uint16(length))
	dst = binary.BigEndian.AppendUint32(dst, stunCookie)
	return append(dst, txid[:]...)
}

// stunAppendFingerprint appends the FINGERPRINT of the message that begins at
// dst[start].
func stunAppendFingerprint(dst []byte, start int) []byte {
	crc := stunFingerprint(dst[start:])
	dst = append(dst, amesSTUNFingerprintHdr...)
	return binary.BigEndian.AppendUint32(dst, crc)
}

// stunFingerprint returns the FINGERPRINT value of a message whose bytes
// before the attribute are b.
func stunFingerprint(b []byte) uint32 { return crc32.ChecksumIEEE(b) ^ amesSTUNFingerprintXor }
