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

func (o *Out) add(b []byte, to netip.AddrPort) {
	o.Sends = append(o.Sends, transport.Message{Buf: b, N: len(b), Addr: to})
	o.Ports = append(o.Ports, PortPublic)
}

// addShip hands b to the fronted ship's device as sent from lane from.
func (o *Out) addShip(b []byte, from netip.AddrPort) {
	o.Sends = append(o.Sends, transport.Message{Buf: b, N: len(b), Addr: from})
	o.Ports = append(o.Ports, PortShip)
	o.nShip++
}

// Split returns o's sends by port, each in decision order: those for the
// public socket and those for the fronted ship's device. With none for the
// ship, public is Sends itself. Both alias o's buffers until Reset.
func (o *Out) Split() (public, ship []transport.Message) {
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
