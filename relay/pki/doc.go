// Package pki checks the signatures mesa pages carry, against a snapshot
// of Azimuth's networking keys. The relay uses it where a page would prove
// a new lane for the ship that published it: a page signed with the ship's
// key came from the ship (or from someone replaying the ship's page), not
// from an attacker who made it up. It is not used per datagram.
//
// The codecs (ParseSnapshot, the page's signed fields) do no I/O; Load is
// the one function that reads a file. docs/protocol.md ("Signed pages")
// gives the sources of everything below.
//
// # What a page's signature covers
//
// A message's first page (an init name: no fragment number) carries the
// publisher's authenticator: data auth kind SIGN, 64 bytes, an ed25519
// signature (RFC 8032) by the signing half of the ship's networking key
// over
//
//	"/" @p "//1/" path root
//
// where @p is the name's ship as Urbit writes it ("~sampel-palnet"), path
// the name's path as on the wire (no leading '/'), and root the message's
// 32-byte Merkle root. That is ames.hoon's +etch-binding of
// [(en-beam [[ship %$ ud+1] path]) root]: +spat of the path, then the root.
// The name's rift is not signed; the life is, in a %publ path
// ("publ/<life>/...", the life in Hoon's @ud form, "1.000" for 1000).
//
// The root is the message's BLAKE3 hash (zuse.hoon's +root:lss, which
// ames.hoon's +peek-publ and +peek-shut sign). A message of one leaf
// (Total <= 1024) sends it whole on its first page: the root is BLAKE3 of
// the fragment zero-padded to Total bytes. A longer message's first page
// holds instead its Merkle proof: proof[0] and proof[1] the chaining
// values of leaves 0 and 1, proof[i] that of the subtree right of
// everything before it, 1 + bitlen(leaves-1) hashes of 32 bytes; zuse's
// +recover-root folds them into the root with BLAKE3's ROOT flag on the
// last parent, which is BLAKE3 of the whole message. vere's lss.c folds
// the same proof without ROOT; arvo signs and checks the BLAKE3 value, so
// that is the one verified here.
//
// # Snapshot file
//
// "relay pki fetch" writes it from the roller's getPoint or from Azimuth's
// points(uint32) (azimuth.go's codecs: ParseRollerPoint, ParseAzimuthPoint,
// PassFromChain). UTF-8 text, one ship per line; blank lines and lines starting '#' are
// skipped. A line is four fields separated by spaces or tabs:
//
//	@p life rift pass
//	~sampel-palnet 2 1 62<64 hex digits: signing key><64: encryption key>
//
//	@p    the ship, as Urbit prints it (ParseShip also takes decimal)
//	life  the key's life (Azimuth keyRevisionNumber), 1 to 2^32-1
//	rift  the ship's rift (Azimuth continuityNumber), 0 to 2^32-1
//	pass  the 65-byte networking public key as hex, in the byte order of
//	      Hoon's atom: 62 ('b'), the 32-byte ed25519 signing key, the
//	      32-byte encryption key
//
// A ship appears once. A comet may be listed (life 1) only with its own
// key: its @p must be CometShip(pass). Comets need no line: their key
// certifies their name. LearnComet reads a comet's attestation page (the
// one ames.hoon peeks a comet for, a jammed noun: cue is in noun.go) and
// records its key, as Signed does on the way; AddComet records a pass got
// otherwise.
// Limits: DefaultMaxEntries ships, MaxLineLen bytes a line, MaxFileBytes
// a file. The first bad line fails the whole file, with its line number.
package pki
