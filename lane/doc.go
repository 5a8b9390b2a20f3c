// Package lane holds the identities the relay routes by: ships (128-bit Urbit
// addresses, printed as @p), their classes and sponsorship chains, and lanes
// (the UDP address and port at which a ship is reached).
//
// # Ships
//
// A Ship is an unsigned number below 2^128. On the wire (mesa names, legacy
// ames preludes) a ship is little-endian, 2, 4, 8 or 16 bytes wide:
// ShipFromBytesLE reads one and Ship.AppendLE writes one. People write ships
// as @p, which String and AppendPatp print and ParseShip parses, exactly as
// hoon.hoon's ++co, ++po and ++ob do:
//
//   - the number is scrambled with +fein: a planet n (0x10000-0xffffffff)
//     becomes 0x10000 + feis(n - 0x10000); a moon keeps its high 32 bits
//     and has its low 32 scrambled the same way; galaxies, stars and comets
//     are left alone. feis is a 4-round Black-Rogaway Feistel cipher over
//     [0, 0xffff0000) (a = 0xffff, b = 0x10000) whose round function is
//     MurmurHash3_x86_32 of the two little-endian bytes of the half, seeded
//     0xb76d5eed, 0xee281300, 0x85bcae01, 0x4b387af7, with the legacy final
//     permutation of urbit/arvo#1105;
//   - a scrambled value below 256 prints as "~" and one suffix syllable
//     (~zod, ~nec, ..., ~fes);
//   - otherwise each 16-bit word, most significant first, prints as the
//     prefix syllable of its high byte and the suffix syllable of its low
//     byte, the words joined by "-" and, in comets, by "--" between the
//     fourth and fifth words from the right.
//
// So 256 is ~marzod, 65536 ~dapnep-ronmyl, 1624961343 ~sampel-palnet.
// ParseShip also takes decimal numbers and inverts the scrambling with
// +fynd; it accepts only the exact form Urbit prints (the "~" is optional).
//
// # Classes and sponsorship
//
// A ship's Class follows from its byte width: Galaxy 0-1 bytes (256 of
// them), Star 2, Planet 3-4, Moon 5-8, Comet 9-16. Every ship has a sponsor
// that forwards for it. By default (zuse.hoon +sein:title) a galaxy
// sponsors itself, and a star's sponsor is its low 8 bits, a planet's its
// low 16, a moon's its low 32 and a comet's its low 16 (the npm package
// urbit-ob still says ~zod for comets; this package follows Hoon). The
// chain from a ship through its sponsors ends at a galaxy and, because each
// step lowers the class, holds at most MaxChainLen ships. Stars and planets
// can escape to another sponsor; Sponsors records such overrides and
// computes chains with them.
//
// # Lanes
//
// A lane is a UDP netip.AddrPort, IPv4 or IPv6, kept in canonical form
// (Canon: IPv4-mapped addresses unmapped, no zone); Key is its compact,
// pointer-free form for large tables.
//
// The SHORT encoding (EncodeShort, DecodeShort) is 6 bytes: the IPv4
// address as a host-order u32 written little-endian, then the UDP port as a
// little-endian u16. 127.0.0.1:13337 is
//
//	01 00 00 7f 19 34
//
// Mesa pages carry it as their next hop (header next-hop type 1); legacy
// ames packets carry the same 6-byte layout as the origin that a forwarding
// galaxy inserts into a relayed packet. IPv6 lanes have no SHORT form.
package lane
