// Package scry holds the wire codecs for mesa (directed messaging) and
// legacy ames packets, the two packet formats that share an Urbit ship's UDP
// socket. The codecs do no I/O: Parse decodes a datagram into a
// caller-owned value whose byte fields alias the datagram, Append encodes,
// and neither allocates on the hot path. Both follow vere (the Urbit
// runtime) byte for byte; the vectors in testdata/, written by vere's own C
// codec, are the authority. Mug is the hash both formats carry.
//
// A datagram of 8 or more bytes with the mesa cookie at bytes 4-7 is mesa
// (IsMesa); anything else is legacy ames, whose layout is documented in
// ames.go (AmesPacket).
//
// # Mesa layout
//
// All integers are little-endian; bit fields fill from the least
// significant bit up. A packet is a header, the cookie and a body:
//
//	 0               1               2               3      byte
//	 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7   bit
//	+---+---+-----+---+-----+---------------------------------------+
//	|rsv|nxt| ver |typ| hop |              mug (20 bits)            |  header: LE u32
//	+---+---+-----+---+-----+-------+---------------+---------------+
//	|      00       |      02       |      e0       |      67       |  cookie 0x67e00200
//	+---------------+---------------+---------------+---------------+
//	| body ...                                                         mugged: offset 8 to the end of the body
//
//	rsv  bits 0-1    reserved; written 0, never checked
//	nxt  bits 2-3    next-hop type: 0 none, 1 SHORT, 2 LONG, 3 MANY
//	ver  bits 4-6    version, must be 1
//	typ  bits 7-8    type: 1 page, 2 peek, 3 poke, 0 reserved
//	hop  bits 9-11   hop count, saturating at 7
//	mug  bits 12-31  Mug(body) & 0xfffff
//
// Body by type:
//
//	peek   name
//	poke   name, payload name, data
//	page   name, data, next-hop
//	0      nothing (vere accepts type 0 only with an empty body)
//
// Name:
//
//	+------+--------------+----------+------+--------------+---------+----------+
//	| meta | ship         | rift     | bloq | frag number  | pathlen | path     |
//	| 1    | 2<<rank      | rift+1   | 1    | 1<<gaf       | u16     | pathlen  |
//	+------+--------------+----------+------+--------------+---------+----------+
//	                                         absent when init
//
//	meta bits 0-1  rank: ship width 2, 4, 8 or 16 bytes
//	     bits 2-3  rift: rift width minus one (1-4 bytes)
//	     bit  4    init: no fragment number
//	     bit  5    tau: 1 %auth, 0 %data
//	     bits 6-7  gaf: fragment number width 1, 2, 4 or 8 bytes
//
// The path has no leading '/' and no terminator.
//
// Data:
//
//	+------+---------+------------+---------+------------+----------+
//	| meta | total   | auth       | [width] | length     | fragment |
//	| 1    | 1<<bot  | 0/16/64    | 1       | width      | length   |
//	+------+---------+------------+---------+------------+----------+
//	                               only when men = 3
//
//	meta bits 0-1  bot: total width 1, 2, 4 or 8 bytes
//	     bits 2-3  auth kind: 0 SIGN (64-byte signature), 1 NONE (no bytes),
//	               2 HMAC (16 bytes), 3 PAIR (two 32-byte Merkle hashes)
//	     bits 4-5  reserved; written 0, never checked
//	     bits 6-7  men: the length takes men bytes when men < 3; when men = 3
//	               an extra byte gives the width, at most 4
//
// Total is the byte size of the whole message. A fragment length of 0
// takes no bytes.
//
// Next-hop, pages only, by the header's next-hop type:
//
//	none   no bytes
//	SHORT  6 bytes: IPv4 address as a host-order u32 written LE, then the
//	       port LE (127.0.0.1:13337 is 01 00 00 7f 19 34)
//	LONG   rejected by the parser
//	MANY   rejected by the parser
//
// Peek and poke parsing ignores the header's next-hop type.
//
// Vere's serializer writes the smallest widths: rank 0 for galaxies and
// stars, 1 for planets, 2 for moons, 3 for comets; the smallest rift,
// fragment-number, total and length widths (men = min(bytes of length, 3));
// tau and gaf clear on init names. Its parser accepts wider widths and set
// reserved bits; Packet keeps them so such input re-encodes unchanged, and
// Canonicalize (or the NewPeek, NewPage and NewPoke constructors) gives the
// serializer's form.
//
// # Mesa receive path
//
// Vere's _mesa_hear passes a datagram to the parser only if it is mesa
// (IsMesa; otherwise it goes to ames) and at most MesaMaxPacket bytes long.
// The parser then checks, keeping the first failure: version, cookie, the
// body field by field, the mug, and that no bytes follow the body.
// Packet.Parse does all of this and returns one MesaError per verdict.
//
// The relay rewrites forwarded packets in place with SetHops, BumpHops,
// SetNextHop, ClearNextHop and FixMug (mesa_edit.go).
package scry
