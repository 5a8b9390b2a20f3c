package pki

import (
	"crypto/ed25519"
	"errors"

	"github.com/urbit-relay/relay/scry"
)

// ErrPageTooLong is NewSignedPage's error for a message whose first page
// would not fit a datagram.
var ErrPageTooLong = errors.New("pki: signed page longer than a mesa datagram")

// NewSignedPage returns the first page of message msg published at name,
// signed with priv as ames.hoon's +peek-publ signs it (the publisher's
// side of Verify): for a message of one leaf (at most 1024 bytes) the page holds
// msg, else the Merkle proof. name must be an init name of bloq 13 (Init
// and Bloq are set here). It is for tests and simulations; ships sign
// their own pages. The packet aliases name.Path and msg.
func NewSignedPage(priv ed25519.PrivateKey, name scry.Name, msg []byte) (scry.Packet, error) {
	name.Init, name.Bloq, name.Frag = true, scry.DefaultBloq, 0
	data := scry.Data{Total: uint64(len(msg)), AuthKind: scry.AuthSign}
	var root hash
	if len(msg) <= chunkLen {
		root, data.Frag = leafRoot(msg), msg
	} else {
		data.Frag = appendProof(nil, msg)
		root = proofRoot(data.Frag)
	}
	var buf [maxSignedLen]byte
	if len(name.Path) > scry.MesaMaxPacket {
		return scry.Packet{}, ErrPageTooLong
	}
	data.Auth = ed25519.Sign(priv, appendSigned(buf[:0], name.Ship, name.Path, &root))
	p := scry.NewPage(name, data)
	if p.Size() > scry.MesaMaxPacket {
		return scry.Packet{}, ErrPageTooLong
	}
	return p, nil
}
