package pki

import (
	"bytes"
	"crypto/ed25519"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// pageAuth is what a first-fragment page's signature covers, read from the
// page. Its slices alias the packet.
type pageAuth struct {
	ship lane.Ship
	rift uint32
	path []byte // the name's path, as on the wire
	sig  []byte // ed25519.SignatureSize bytes
	root hash
	life uint32 // the life a %publ path names; 0 for paths that name none
}

// readPageAuth fills a from a parsed packet, or says why the packet carries
// no signature the verifier can check. Every length is checked before use;
// nothing is allocated.
func readPageAuth(p *scry.Packet, a *pageAuth) Reason {
	if p.Header.Type != scry.TypePage {
		return ReasonMalformed
	}
	n, d := &p.Name, &p.Data
	if !n.Init {
		return ReasonNotFirst
	}
	if d.AuthKind != scry.AuthSign || len(d.Auth) != ed25519.SignatureSize {
		return ReasonNotSigned
	}
	if n.Bloq != scry.DefaultBloq || d.Total == 0 {
		return ReasonMalformed // vere asserts bloq 13; an empty message has no leaves
	}
	leaves := (d.Total-1)/chunkLen + 1
	if leaves == 1 {
		// The page holds the whole message: the root is its one leaf, the
		// fragment zero-padded to Total bytes as Hoon's
		// (root:lss tob.data^dat.data) reads it.
		if uint64(len(d.Frag)) > d.Total {
			return ReasonMalformed
		}
		var leaf [chunkLen]byte
		copy(leaf[:], d.Frag)
		a.root = leafRoot(leaf[:d.Total])
	} else {
		// The page holds the proof; vere's _mesa_req_pact_init drops an
		// init page whose data is not exactly the proof.
		if len(d.Frag) != proofLen(leaves)*HashLen {
			return ReasonMalformed
		}
		a.root = proofRoot(d.Frag)
	}
	a.ship, a.rift, a.path, a.sig = n.Ship, n.Rift, n.Path, d.Auth
	a.life = 0
	if rest, ok := bytes.CutPrefix(n.Path, []byte("publ/")); ok {
		seg, _, _ := bytes.Cut(rest, []byte{'/'})
		life, ok := parseUD(seg)
		if !ok || life == 0 {
			return ReasonMalformed
		}
		a.life = life
	}
	return ReasonVerified
}

// maxSignedLen bounds the signed message: "/", a comet's @p, "//1/", a path
// no longer than a datagram, and the root.
const maxSignedLen = 1 + lane.MaxPatpLen + 4 + scry.MesaMaxPacket + HashLen

// appendSigned appends the bytes mesa signs for a page of ship at path with
// Merkle root root: ames.hoon's +etch-binding of [path root], that is
// (spat path) then the root's 32 bytes, where path is +en-beam of
// [[ship %$ ud+1] path]: "/~ship//1/" and the name's path.
func appendSigned(dst []byte, ship lane.Ship, path []byte, root *hash) []byte {
	dst = append(dst, '/')
	dst = ship.AppendPatp(dst)
	dst = append(dst, "//1"...)
	if len(path) > 0 {
		dst = append(dst, '/')
		dst = append(dst, path...)
	}
	return append(dst, root[:]...)
}

// parseUD reads Hoon's @ud as +scot writes it: decimal, a dot before every
// group of three digits from the right ("1.000"), no leading zeros.
func parseUD(b []byte) (uint32, bool) {
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var v uint64
	digits := 0 // digits since the last dot, or from the start
	for i, c := range b {
		switch {
		case c == '.':
			if digits == 0 || (i > digits && digits != 3) || digits > 3 {
				return 0, false
			}
			digits = 0
			continue
		case c < '0' || c > '9':
			return 0, false
		}
		v = v*10 + uint64(c-'0')
		if v > 1<<32-1 {
			return 0, false
		}
		digits++
	}
	dotted := bytes.IndexByte(b, '.') >= 0
	if dotted && digits != 3 || !dotted && digits > 3 {
		return 0, false
	}
	return uint32(v), true
}
