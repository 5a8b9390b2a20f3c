package front

import (
	"net/netip"
	"time"
)

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

	// DefaultReadBatch is the number of packets one ReadBatch may read
	// from the TUN in one wake-up (and so the number of MTU-sized read
	// buffers a Conn holds): as many as the relay's own batch
	// (transport.DefaultBatchSize), so that a burst from the ship is read
	// in one go. At DefaultMTU this is 4 MiB per Conn.
	DefaultReadBatch = 64

	// DefaultWriteBatch is the number of packets written to the TUN in
	// one wake-up of the poller, and the number of MTU-sized write
	// buffers a Conn holds (4 MiB at DefaultMTU).
	DefaultWriteBatch = 64

	// DefaultTxQueueLen is the TUN's transmit queue length: the packets
	// the ship's kernel holds for the relay to read before dropping them
	// (counted in Conn.Drops). The kernel's default for a TUN is 500; 1024
	// matches transporttest.DefaultMemQueueLen and a default socket buffer of
	// small datagrams.
	DefaultTxQueueLen = 1024

	// HostAddrsRefresh is how often the relay lists the host's own
	// addresses again for Conn.SetHostAddrs: addresses come and go (DHCP,
	// a VPN), and a new one is refused the ship within this long. Listing
	// them is one netlink dump, cheap at this rate.
	HostAddrsRefresh = 30 * time.Second

	// hostRoutesCacheSize bounds the cache of the kernel's answers to
	// "is this address the host's own?" (hostRoutes): a ship speaks to at
	// most a few thousand peers, and past the bound an arbitrary answer is
	// dropped, so a ship that sends to ever new addresses costs a route
	// lookup per datagram (tens of microseconds), never memory.
	hostRoutesCacheSize = 4096

	// hostRoutesTTL is the longest an answer is kept. The cache is dropped
	// on every change to the kernel's local routing table, so this only
	// matters should that subscription fail: then a newly local address
	// is refused the ship within this long, as the address list's refresh.
	hostRoutesTTL = HostAddrsRefresh

	// hostRoutesUpdates is the queue of route changes between the kernel's
	// subscription and the goroutine that drops the cache on them.
	hostRoutesUpdates = 64

	// HostRefusalCheck is how often the relay looks whether the ship has
	// sent to the host's own addresses (Stats.SkippedToHost), to warn the
	// operator soon after the first such datagram; the warning comes at
	// most once a HostAddrsRefresh. Two atomic loads a second.
	HostRefusalCheck = time.Second

	// NotifyBarrierTimeout bounds `relay front setup`'s wait for systemd to
	// confirm it has read the device's files into the unit's file
	// descriptor store (BARRIER=1, sd_notify_barrier(3), whose own default
	// is 5 s): systemd answers at once, so this long means it never will.
	NotifyBarrierTimeout = 5 * time.Second

	// netlinkTimeout bounds a Drops query on the namespace's netlink
	// socket (a metrics scrape): the kernel answers at once, so a second
	// means it never will, and the scrape reports 0 rather than hang.
	netlinkTimeout = time.Second

	// netlinkReadBytes is the buffer a Drops answer is read into: one
	// RTM_NEWLINK message of a TUN device is about 1.5 KiB.
	netlinkReadBytes = 16 << 10

	// vnetHdrLen is the virtio_net_hdr a TUN with IFF_VNET_HDR puts in
	// front of every packet (the kernel's default vnet_hdr_sz).
	vnetHdrLen = 10

	// gsoMaxSegments caps the datagrams of one UDP GSO super-packet the
	// relay writes into the TUN: UDP_MAX_SEGMENTS of kernels before 6.9
	// (128 since), and the relay's write batch.
	gsoMaxSegments = 64

	// The virtio_net_hdr values coalesce writes: flags
	// VIRTIO_NET_HDR_F_NEEDS_CSUM, gso_type VIRTIO_NET_HDR_GSO_UDP_L4,
	// and VIRTIO_NET_HDR_GSO_NONE (what a packet read must carry).
	virtioNeedsCsum = 1
	virtioGSOUDPL4  = 5
	virtioGSONone   = 0

	// udpChecksumOffset is the UDP checksum's offset in the UDP header,
	// the virtio header's csum_offset for a UDP packet.
	udpChecksumOffset = 6

	// tunOffset is the headroom left at the front of every buffer handed
	// to a device: a device with a virtio_net_hdr (wireguard's tun, whose
	// in-memory TUN the tests use) writes 10 bytes there; 16 keeps the IP
	// header 8-byte aligned, as wireguard-go's own offset does. Prepare's
	// device has no header and reads and writes from the offset on.
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
