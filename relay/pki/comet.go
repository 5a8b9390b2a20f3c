package pki

import (
	"bytes"
	"crypto/ed25519"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// cometProofPath starts the path of a comet's attestation page: the
// %publ life-1 page /a/x/1//pawn/proof/<receiver>/<receiver's life>
// (ames.hoon's +al-read-proof, served by +peek-pawn).
const cometProofPath = "publ/1/a/x/1//pawn/proof/"

// LearnComet reads datagram pkt as a comet's attestation page and, if it
// is one, records the comet's key (AddComet). It returns the comet and
// whether its key was recorded. ames.hoon's +al-take-proof and
// +al-register-comet accept the same page: one leaf whose message is
// (jam [%message %proof (jam [sig (jam open-packet)])]), open-packet
// being [pass sndr sndr-life rcvr rcvr-life], the page signed with the
// pass's key, sndr the page's ship, sndr-life 1, and the pass hashing to
// the comet (CometShip). The inner signature, which +al-register-comet
// calls redundant, is not checked. The receiver fields are not either: a
// relay learns a comet's key from an attestation meant for anyone.
func (v *Verifier) LearnComet(pkt []byte) (lane.Ship, bool) {
	var p scry.Packet
	if p.Parse(pkt) != nil {
		return lane.Ship{}, false
	}
	pass, ok := readCometProof(&p)
	if !ok {
		return p.Name.Ship, false
	}
	return v.AddComet(&pass)
}

// readCometProof returns the pass a comet's attestation page carries, if p
// is one and every check above holds.
func readCometProof(p *scry.Packet) (pass Pass, ok bool) {
	n := &p.Name
	if n.Ship.Class() != lane.Comet || !bytes.HasPrefix(n.Path, []byte(cometProofPath)) {
		return pass, false
	}
	var a pageAuth
	if readPageAuth(p, &a) != ReasonVerified || p.Data.Total > chunkLen {
		return pass, false
	}
	var msg [chunkLen]byte
	copy(msg[:], p.Data.Frag)
	gage, err := cue(msg[:p.Data.Total])
	if err != nil || !gage.cell || !gage.head.isTerm("message") ||
		!gage.tail.cell || !gage.tail.head.isTerm("proof") || gage.tail.tail.cell {
		return pass, false
	}
	signed, err := cue(gage.tail.tail.atom)
	if err != nil || !signed.cell || signed.tail.cell {
		return pass, false
	}
	op, err := cue(signed.tail.atom)
	if err != nil {
		return pass, false
	}
	var f [5]*noun // pass, sndr, sndr-life, rcvr, rcvr-life
	for i := 0; i < 4; i++ {
		if !op.cell || op.head.cell {
			return pass, false
		}
		f[i], op = op.head, op.tail
	}
	if op.cell {
		return pass, false
	}
	f[4] = op
	if len(f[0].atom) > PassLen || len(f[0].atom) == 0 || f[0].atom[0] != passTag ||
		len(f[1].atom) > lane.MaxShipBytes || lane.ShipFromBytesLE(f[1].atom) != n.Ship ||
		!f[2].isTerm("\x01") {
		return pass, false
	}
	copy(pass[:], f[0].atom)
	if CometShip(&pass) != n.Ship {
		return pass, false
	}
	var buf [maxSignedLen]byte
	if !ed25519.Verify(pass.SignKey(), appendSigned(buf[:0], a.ship, a.path, &a.root), a.sig) {
		return pass, false
	}
	return pass, true
}
