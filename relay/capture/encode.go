package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Record is one datagram in a capture: when it was seen, where it came from
// and went to, and its UDP payload.
type Record struct {
	Time     time.Time
	Src, Dst netip.AddrPort
	Payload  []byte
	// Truncated is set by Reader when the file holds only part of the
	// datagram (its snapshot length was smaller); Payload is then the part.
	Truncated bool
}

// ErrInvalidLane reports a record whose source or destination is not a
// valid address and port.
var ErrInvalidLane = errors.New("capture: invalid lane")

// packetLen returns the length of the IP packet carrying a payload of n
// bytes between src and dst, and whether it is IPv6.
func packetLen(src, dst netip.AddrPort, n int) (int, bool) {
	v6 := !src.Addr().Unmap().Is4() || !dst.Addr().Unmap().Is4()
	if v6 {
		return IPv6HeaderLen + UDPHeaderLen + n, true
	}
	return IPv4HeaderLen + UDPHeaderLen + n, false
}

// appendPacket appends to b the IP packet (IPv4 or IPv6 header, UDP header,
// payload) that carries payload from src to dst, as the package comment
// lays out. The caller has checked that both lanes are valid. It allocates
// only if b lacks capacity.
func appendPacket(b []byte, src, dst netip.AddrPort, payload []byte) []byte {
	total, v6 := packetLen(src, dst, len(payload))
	udpLen := UDPHeaderLen + len(payload)
	if v6 {
		var h [IPv6HeaderLen + UDPHeaderLen]byte
		h[0] = 6 << 4
		binary.BigEndian.PutUint16(h[4:6], uint16(udpLen))
		h[6] = 17 // next header: UDP
		h[7] = ipTTL
		// As16 gives an IPv4 address in its IPv4-mapped form.
		s, d := src.Addr().As16(), dst.Addr().As16()
		copy(h[8:24], s[:])
		copy(h[24:40], d[:])
		u := h[IPv6HeaderLen:]
		binary.BigEndian.PutUint16(u[0:2], src.Port())
		binary.BigEndian.PutUint16(u[2:4], dst.Port())
		binary.BigEndian.PutUint16(u[4:6], uint16(udpLen))
		// Checksum over the pseudo-header (addresses, length, next
		// header), the UDP header and the payload.
		sum := uint32(0)
		sum = sumBytes(sum, h[8:40])
		sum += uint32(udpLen>>16) + uint32(udpLen&0xffff) + 17
		sum = sumBytes(sum, u[:UDPHeaderLen])
		sum = sumBytes(sum, payload)
		c := ^fold(sum)
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(u[6:8], c)
		b = append(b, h[:]...)
	} else {
		var h [IPv4HeaderLen + UDPHeaderLen]byte
		h[0] = 4<<4 | IPv4HeaderLen/4
		binary.BigEndian.PutUint16(h[2:4], uint16(total))
		h[6] = 0x40 // don't fragment
		h[8] = ipTTL
		h[9] = 17 // protocol: UDP
		s, d := src.Addr().Unmap().As4(), dst.Addr().Unmap().As4()
		copy(h[12:16], s[:])
		copy(h[16:20], d[:])
		binary.BigEndian.PutUint16(h[10:12], ^fold(sumBytes(0, h[:IPv4HeaderLen])))
		u := h[IPv4HeaderLen:]
		binary.BigEndian.PutUint16(u[0:2], src.Port())
		binary.BigEndian.PutUint16(u[2:4], dst.Port())
		binary.BigEndian.PutUint16(u[4:6], uint16(udpLen))
		// u[6:8]: checksum 0, "not computed", legal for UDP over IPv4.
		b = append(b, h[:]...)
	}
	return append(b, payload...)
}

// sumBytes adds b to the one's-complement running sum as big-endian 16-bit
// words, an odd last byte padded with zero.
func sumBytes(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	// Fold now and then so the sum cannot overflow on long inputs.
	return (sum >> 16) + (sum & 0xffff)
}

func fold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = (sum >> 16) + (sum & 0xffff)
	}
	return uint16(sum)
}

// Encoder writes a pcap file, one record per Encode call, synchronously and
// in order. It is for tools that make captures (replay gen, tests); a
// running relay uses Writer. An Encoder is not safe for concurrent use and
// does not buffer: wrap a file in a bufio.Writer.
type Encoder struct {
	pw  *pcapgo.Writer
	buf []byte
}

// NewEncoder writes a pcap file header to w and returns an Encoder for the
// records that follow.
func NewEncoder(w io.Writer) (*Encoder, error) {
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(Snaplen, layers.LinkTypeRaw); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	return &Encoder{pw: pw}, nil
}

// Encode writes r. A zero r.Time is written as the current time (pcapgo's
// rule); a payload too long for Snaplen is cut, keeping its length.
func (e *Encoder) Encode(r Record) error {
	if !validLane(r.Src) || !validLane(r.Dst) {
		return ErrInvalidLane
	}
	e.buf = appendPacket(e.buf[:0], r.Src, r.Dst, r.Payload)
	return writeRecord(e.pw, r.Time, e.buf)
}

func validLane(ap netip.AddrPort) bool { return ap.IsValid() }

// writeRecord writes pkt (a whole IP packet) as one record stamped t,
// cutting it to Snaplen.
func writeRecord(pw *pcapgo.Writer, t time.Time, pkt []byte) error {
	ci := gopacket.CaptureInfo{Timestamp: t, Length: len(pkt), CaptureLength: min(len(pkt), Snaplen)}
	if err := pw.WritePacket(ci, pkt[:ci.CaptureLength]); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	return nil
}
