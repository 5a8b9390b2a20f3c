package relay

import (
	"net/netip"

	"github.com/urbit-relay/relay/relay/transport"
)

// Port is where a decided datagram leaves the relay.
type Port uint8

const (
	// PortPublic: by the relay's public socket, Buf sent to Addr.
	PortPublic Port = iota
	// PortShip: into the fronted ship's device (fronting mode,
	// Config.Front), Buf handed to the ship as sent from Addr, the lane it
	// came from: the source the ship must see.
	PortShip
)

// Batch is what decisions send, in decision order, as messages ready for
// a transport.Conn's WriteBatch: Sends[i] leaves by Ports[i] (Split gives
// them by port). In every message N is len(Buf). Buffers alias the
// datagrams decided or their Reader's scratch buffers, so they are valid
// until a datagram's buffer is reused or the Reader is Reset.
type Batch struct {
	Sends []transport.Message
	Ports []Port // Ports[i] is where Sends[i] leaves
	// nShip counts the PortShip sends; public and ship are Split's
	// partitions, reused.
	nShip        int
	public, ship []transport.Message
}

// reset empties o for the next batch.
func (o *Batch) reset() {
	o.Sends, o.Ports, o.nShip = o.Sends[:0], o.Ports[:0], 0
	o.public, o.ship = o.public[:0], o.ship[:0]
}

// add sends b to lane to by the public socket. The message is written
// field by field in place: a composite literal appended is built on the
// stack and copied, 72 bytes a send.
func (o *Batch) add(b []byte, to netip.AddrPort) {
	n := len(o.Sends)
	if n == cap(o.Sends) {
		o.Sends = append(o.Sends, transport.Message{})
	}
	o.Sends = o.Sends[:n+1]
	m := &o.Sends[n]
	m.Buf, m.N, m.Addr, m.Trunc = b, len(b), to, false
	o.Ports = append(o.Ports, PortPublic)
}

// addShip hands b to the fronted ship's device as sent from lane from.
func (o *Batch) addShip(b []byte, from netip.AddrPort) {
	o.Sends = append(o.Sends, transport.Message{Buf: b, N: len(b), Addr: from})
	o.Ports = append(o.Ports, PortShip)
	o.nShip++
}

// Split returns o's sends by port, each in decision order: those for the
// public socket and those for the fronted ship's device. With none for the
// ship, public is Sends itself. Both alias o's buffers until Reset.
func (o *Batch) Split() (public, ship []transport.Message) {
	if o.nShip == 0 {
		return o.Sends, nil
	}
	o.public, o.ship = o.public[:0], o.ship[:0]
	for i := range o.Sends {
		if o.Ports[i] == PortShip {
			o.ship = append(o.ship, o.Sends[i])
		} else {
			o.public = append(o.public, o.Sends[i])
		}
	}
	return o.public, o.ship
}
