package front

import "net/netip"

// Defaults applied by Setup to zero Config fields, and the limits it
// enforces. Every default, cap and size of the package is here.
const (
	// DefaultNamespace is the named network namespace (/run/netns/NAME) the
	// ship runs in: the operator starts vere with `ip netns exec urbit ...`.
	DefaultNamespace = "urbit"

	// DefaultDevice is the TUN device's name inside the namespace. It is
	// the namespace's only interface besides lo, so the name is free there
	// whatever the host's interfaces are called.
	DefaultDevice = "urbit0"

	// DefaultMTU is the TUN device's MTU, the largest the kernel accepts
	// (IPv4's total-length field is 16 bits). vere's legacy ames packets
	// can be larger than an Ethernet MTU (and a UDP datagram may carry up
	// to 65507 B); with a 1500 B MTU the ship's kernel would cut them into IP fragments,
	// which ReadBatch would have to reassemble. With 65535 every datagram
	// vere can send fits one IP packet, none is fragmented inside the
	// namespace, and the relay's public socket fragments on the real path
	// exactly as vere's own socket would have.
	DefaultMTU = 65535

	// MinMTU is the smallest MTU Setup accepts: 576 B is the datagram every
	// IPv4 host must accept (RFC 791), well above the 28 B of headers.
	MinMTU = 576

	// MaxMTU is the largest MTU: a whole IPv4 packet.
	MaxMTU = 65535

	// DefaultReadBatch is the number of packets one read of the TUN may
	// return (and so the number of MTU-sized read buffers a Conn holds).
	// The kernel hands the TUN one packet per read(2) unless the ship
	// sends with UDP segmentation offload, when one read carries a
	// super-packet the tun library splits into up to 64 segments
	// (UDP_MAX_SEGMENTS on kernels before 6.9); 64 buffers take them all.
	// At DefaultMTU this is 4 MiB per Conn.
	DefaultReadBatch = 64

	// DefaultWriteBatch is the number of packets handed to the TUN per
	// write call, and the number of MTU-sized write buffers a Conn holds
	// (4 MiB at DefaultMTU). On Linux 6.2 and later the tun library
	// coalesces consecutive packets of one flow in a batch into one
	// UDP GSO super-packet, one trip through the ship's kernel.
	DefaultWriteBatch = 64

	// DefaultTxQueueLen is the TUN's transmit queue length: the packets
	// the ship's kernel holds for the relay to read before dropping them
	// (counted in Conn.Drops). The kernel's default for a TUN is 500; 1024
	// matches transport.DefaultMemQueueLen and a default socket buffer of
	// small datagrams.
	DefaultTxQueueLen = 1024

	// tunOffset is the headroom left at the front of every buffer handed
	// to the tun library: with IFF_VNET_HDR (which tun.CreateTUN sets) it
	// writes a 10-byte virtio_net_hdr in front of each packet, so Write
	// needs offset >= 10; 16 keeps the IP header 8-byte aligned, as
	// wireguard-go's own offset does.
	tunOffset = 16
)

// DefaultShipAddr is the ship's address inside its namespace, on the TUN
// device. It is IPv4 link-local (169.254.0.0/16, RFC 3927): by definition
// never routed, so no packet with it as source or destination can leave
// the namespace by accident, it cannot collide with any address the relay
// or its peers use, and its only meaning is "the ship's end of the TUN".
// The ship never learns it matters: every packet it sends goes to the
// relay, which sends the payload from the public address instead.
var DefaultShipAddr = netip.AddrFrom4([4]byte{169, 254, 13, 37})

// Sizes of the IPv4/UDP encoding (see ipv4.go for the layout).
const (
	// IPv4HeaderLen is the length of an IPv4 header without options, the
	// only kind AppendUDP4 writes.
	IPv4HeaderLen = 20

	// UDPHeaderLen is the length of a UDP header.
	UDPHeaderLen = 8

	// HeadersLen is the overhead AppendUDP4 adds in front of a payload.
	HeadersLen = IPv4HeaderLen + UDPHeaderLen

	// MaxUDP4Payload is the largest payload AppendUDP4 encodes: a 65535 B
	// IPv4 packet less the two headers, the same limit as a UDP socket's.
	MaxUDP4Payload = MaxMTU - HeadersLen

	// defaultTTL is the TTL AppendUDP4 writes: the Linux default
	// (net.ipv4.ip_default_ttl). The packet only crosses the TUN, so any
	// value above 1 would do; 64 is what a local sender would write.
	defaultTTL = 64
)
