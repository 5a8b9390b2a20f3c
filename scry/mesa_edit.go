package scry

import "encoding/binary"

// In-place edits of a mesa datagram, for the relay's forwarding path. They
// change only the bytes concerned and never re-serialize or allocate
// (SetNextHop allocates only when b lacks ShortHopLen bytes of spare
// capacity).
//
// Buffer contract: b must hold exactly one datagram that Parse accepted
// (the edits rely on that: no trailing bytes, so a page's next-hop bytes are
// its last bytes and the mugged body runs from offset 8 to len(b)). The
// edits operate on b's backing array; SetNextHop and ClearNextHop return
// the edited datagram, which starts at &b[0] and may be up to ShortHopLen
// bytes longer or shorter than b. Any Packet parsed from b is stale after
// an edit. On an input that breaks the contract the edits do not panic, but
// their result is unspecified.

// Header bit positions used by the edits.
const (
	mesaNextHopShift = 2 // header bits 2-3, in byte 0
	mesaTypeShift    = 7 // header bits 7-8
	mesaHopsShift    = 9 // header bits 9-11
	mesaMugShift     = 12
)

// Hops returns the hop count of the datagram b (0 if b is shorter than the
// header word).
func Hops(b []byte) int {
	if len(b) < 4 {
		return 0
	}
	return int(binary.LittleEndian.Uint32(b) >> mesaHopsShift & MesaMaxHops)
}

// SetHops sets the hop count of b to n, clamped to 0..MesaMaxHops. The hop
// count is not mugged, so the mug stays valid.
func SetHops(b []byte, n int) {
	if len(b) < 4 {
		return
	}
	n = min(max(n, 0), MesaMaxHops)
	w := binary.LittleEndian.Uint32(b)
	w = w&^(MesaMaxHops<<mesaHopsShift) | uint32(n)<<mesaHopsShift
	binary.LittleEndian.PutUint32(b, w)
}

// BumpHops adds one to the hop count of b, saturating at MesaMaxHops as
// vere's inc_hopcount does, and returns the new count.
func BumpHops(b []byte) int {
	n := min(Hops(b)+1, MesaMaxHops)
	SetHops(b, n)
	return n
}

// mesaPageNextHop returns the next-hop type of the page b, or an error if b
// is not a page.
func mesaPageNextHop(b []byte) (NextHopType, error) {
	if !IsMesa(b) {
		return 0, ErrMesaNotMesa
	}
	w := binary.LittleEndian.Uint32(b)
	if Type(w>>mesaTypeShift&3) != TypePage {
		return 0, ErrMesaNotPage
	}
	return NextHopType(w >> mesaNextHopShift & 3), nil
}

// mesaSetNextHopType writes t into the header of b.
func mesaSetNextHopType(b []byte, t NextHopType) {
	b[0] = b[0]&^(3<<mesaNextHopShift) | byte(t)<<mesaNextHopShift
}

// SetNextHop gives the page b the SHORT next-hop hop (from
// lane.EncodeShort) and recomputes the mug. A page that already has one is
// overwritten in place; a page with none grows by ShortHopLen bytes, within
// cap(b) when there is room (append semantics otherwise). It returns b
// unchanged with ErrMesaNotPage for peeks, pokes and type 0, and with
// ErrMesaTooLarge if growing would take the packet past MesaMaxPacket.
func SetNextHop(b []byte, hop [ShortHopLen]byte) ([]byte, error) {
	b, err := mesaSetNextHopBytes(b, hop)
	if err == nil {
		FixMug(b)
	}
	return b, err
}

// mesaSetNextHopBytes is SetNextHop without the mug.
func mesaSetNextHopBytes(b []byte, hop [ShortHopLen]byte) ([]byte, error) {
	t, err := mesaPageNextHop(b)
	if err != nil {
		return b, err
	}
	switch t {
	case NextHopShort:
		if len(b) < MesaHeaderLen+ShortHopLen {
			return b, ErrMesaUnexpectedEOF
		}
		copy(b[len(b)-ShortHopLen:], hop[:])
	case NextHopNone:
		if len(b)+ShortHopLen > MesaMaxPacket {
			return b, ErrMesaTooLarge
		}
		b = append(b, hop[:]...)
		mesaSetNextHopType(b, NextHopShort)
	case NextHopLong:
		return b, ErrMesaHopLong
	default:
		return b, ErrMesaHopMany
	}
	return b, nil
}

// ClearNextHop removes the SHORT next-hop of the page b, shrinking it by
// ShortHopLen bytes, and recomputes the mug. A page without a next-hop is
// returned unchanged. Errors as for SetNextHop.
func ClearNextHop(b []byte) ([]byte, error) {
	b, changed, err := mesaClearNextHopBytes(b)
	if changed {
		FixMug(b)
	}
	return b, err
}

// mesaClearNextHopBytes is ClearNextHop without the mug; changed reports
// whether bytes were removed.
func mesaClearNextHopBytes(b []byte) ([]byte, bool, error) {
	t, err := mesaPageNextHop(b)
	if err != nil {
		return b, false, err
	}
	switch t {
	case NextHopNone:
		return b, false, nil
	case NextHopShort:
		if len(b) < MesaHeaderLen+ShortHopLen {
			return b, false, ErrMesaUnexpectedEOF
		}
		b = b[:len(b)-ShortHopLen]
		mesaSetNextHopType(b, NextHopNone)
		return b, true, nil
	case NextHopLong:
		return b, false, ErrMesaHopLong
	}
	return b, false, ErrMesaHopMany
}

// EditPageNextHop sets (set) or clears the next-hop of page b, and fixes
// its mug, like SetNextHop and ClearNextHop; but p must be the Packet that
// Parse filled from these bytes (b itself, or a copy of it made before any
// edit), and the mug is resumed from the hash state p saved at the end of
// the page's data, so only the last few bytes are hashed again. A page of
// 1 KiB costs a few nanoseconds instead of a full pass. Hop counts may be
// changed freely before or after (they are not mugged). Without a saved
// state (p built in memory) it falls back to a full pass.
func EditPageNextHop(b []byte, p *Packet, hop [ShortHopLen]byte, set bool) ([]byte, error) {
	var err error
	if set {
		b, err = mesaSetNextHopBytes(b, hop)
	} else {
		b, _, err = mesaClearNextHopBytes(b)
	}
	if err != nil {
		return b, err
	}
	if p.mugMidLen == 0 || len(b) < MesaHeaderLen+p.mugMidLen {
		FixMug(b)
		return b, nil
	}
	body := b[MesaHeaderLen:]
	m := mugResume(p.mugMid, p.mugMidLen, body) & mesaMugMask
	w := binary.LittleEndian.Uint32(b)
	binary.LittleEndian.PutUint32(b, w&(1<<mesaMugShift-1)|m<<mesaMugShift)
	return b, nil
}

// FixMug recomputes the header mug of b over b[8:], the whole body of a
// datagram without trailing bytes. Call it after editing body bytes other
// than through SetNextHop and ClearNextHop, which call it themselves.
func FixMug(b []byte) {
	if len(b) < MesaHeaderLen {
		return
	}
	m := Mug(b[MesaHeaderLen:]) & mesaMugMask
	w := binary.LittleEndian.Uint32(b)
	binary.LittleEndian.PutUint32(b, w&(1<<mesaMugShift-1)|m<<mesaMugShift)
}
