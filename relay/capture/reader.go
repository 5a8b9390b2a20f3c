package capture

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// pcapngMagic is the first word of a pcapng file (its section header block
// type), the same in either byte order.
const pcapngMagic = 0x0a0d0d0a

// Reader reads the UDP datagrams of a capture: a pcap file (gzip-compressed
// or not) or a pcapng file, of any link type gopacket decodes (raw IP as
// this package writes, Ethernet, Linux cooked SLL/SLL2 as tcpdump -i any
// writes, BSD loopback, ...). Records that are not UDP over IPv4 or IPv6, or
// are IP fragments, are skipped and counted.
type Reader struct {
	closer  io.Closer
	read    func() ([]byte, gopacket.CaptureInfo, error)
	decoder gopacket.Decoder
	skipped uint64
}

// Open opens the capture at path.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	r, err := NewReader(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("capture: %s: %w", path, err)
	}
	r.closer = f
	return r, nil
}

// NewReader reads a capture from rd.
func NewReader(rd io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(rd, 1<<16)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("capture: reading the file header: %w", err)
	}
	r := &Reader{}
	var link layers.LinkType
	if binary.LittleEndian.Uint32(magic) == pcapngMagic {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		r.read, link = ng.ReadPacketData, ng.LinkType()
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		r.read, link = pr.ReadPacketData, pr.LinkType()
	}
	switch link {
	case layers.LinkTypeIPv4:
		r.decoder = layers.LayerTypeIPv4
	case layers.LinkTypeIPv6:
		r.decoder = layers.LayerTypeIPv6
	default:
		r.decoder = link
	}
	return r, nil
}

// Next returns the next UDP datagram, or io.EOF after the last. The
// record's Payload is its own (not reused by later calls).
func (r *Reader) Next() (Record, error) {
	for {
		data, ci, err := r.read()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				// A capture cut short (a relay killed mid-write)
				// ends at its last whole record.
				return Record{}, io.EOF
			}
			return Record{}, fmt.Errorf("capture: %w", err)
		}
		src, dst, payload, ok := decodeUDP(r.decoder, data)
		if !ok {
			r.skipped++
			continue
		}
		return Record{
			Time: ci.Timestamp, Src: src, Dst: dst, Payload: payload,
			Truncated: ci.CaptureLength < ci.Length,
		}, nil
	}
}

// Skipped returns how many records Next has passed over as not UDP.
func (r *Reader) Skipped() uint64 { return r.skipped }

// Close closes the file Open opened; it does nothing for NewReader.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// decodeUDP decodes one captured packet with dec and returns its UDP lanes
// and payload (a sub-slice of data); false if it is not a whole, unfragmented
// UDP datagram over IP. It never panics.
func decodeUDP(dec gopacket.Decoder, data []byte) (src, dst netip.AddrPort, payload []byte, ok bool) {
	p := gopacket.NewPacket(data, dec, gopacket.DecodeOptions{NoCopy: true, Lazy: true})
	var sa, da netip.Addr
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		if ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0 {
			return src, dst, nil, false
		}
		sa, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		da, _ = netip.AddrFromSlice(ip.DstIP.To4())
	case *layers.IPv6:
		sa, _ = netip.AddrFromSlice(ip.SrcIP.To16())
		da, _ = netip.AddrFromSlice(ip.DstIP.To16())
		sa, da = sa.Unmap(), da.Unmap()
	default:
		return src, dst, nil, false
	}
	u, isUDP := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if !isUDP || !sa.IsValid() || !da.IsValid() {
		return src, dst, nil, false
	}
	return netip.AddrPortFrom(sa, uint16(u.SrcPort)), netip.AddrPortFrom(da, uint16(u.DstPort)), u.Payload, true
}
