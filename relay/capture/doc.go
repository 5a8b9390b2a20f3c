// Package capture records UDP datagrams as pcap files that Wireshark, tshark
// and tcpdump open, and reads such files back. The relay writes what it
// receives and sends with a rotating Writer (relay run --capture); the
// replay tool and its fixtures use an Encoder and a Reader. The pcap framing
// (file header, record headers) is written and read by gopacket's pcapgo;
// this package synthesizes the IP and UDP headers around each datagram so
// that the captured lanes appear as the packet's addresses and ports.
//
// # File layout
//
// Classic pcap (not pcapng), little-endian, nanosecond timestamps (magic
// a1 b2 3c 4d), snapshot length Snaplen, link type LINKTYPE_RAW (101): every
// record is an IP packet with no link-layer header, the IP version given by
// its first nibble. Raw IP was chosen over Ethernet because a relay has no
// MAC addresses worth recording: Ethernet framing would add 14 invented
// bytes to every record.
//
//	pcap file header  24 B   magic, version 2.4, snaplen, link type 101
//	per datagram:
//	  record header   16 B   seconds, nanoseconds, captured length, length
//	  IPv4 header     20 B   version 4, IHL 5, DF, TTL 64, protocol 17,
//	                         header checksum; no options
//	  or IPv6 header  40 B   version 6, next header 17, hop limit 64
//	  UDP header       8 B   source port, destination port, length, checksum
//	  payload                the datagram exactly as it travelled
//
// A datagram between two IPv4 lanes gets an IPv4 header; if either lane is
// IPv6 both are written as IPv6 (an IPv4 lane as its IPv4-mapped form).
// The UDP checksum is 0 ("none", legal for IPv4) in IPv4 records, computed
// in IPv6 records, where it is mandatory. Records longer than Snaplen are
// cut to it, with their original length kept in the record header.
//
// # Direction
//
// A Writer is attached to one process's socket. Tap(in, local, remote, b)
// writes remote → local for a datagram read (in) and local → remote for one
// sent, so a capture taken at a relay has the relay's lane as one end of
// every record: the convention replay fixtures follow.
//
// # Cost and bounds
//
// Tap takes one mutex, formats the record into an in-memory chunk (a copy
// of the datagram plus 44 or 64 header bytes, about 150 ns for a 1 KiB
// datagram) and returns; it never does I/O and never allocates. Full chunks
// are written to disk by the Writer's own goroutine. When the writer falls
// behind and every chunk is in use, Tap drops the record and counts it
// (Stats.Dropped): a slow disk costs capture records, never relay latency.
// Files rotate at MaxBytes: path, path.1, ..., path.(MaxFiles-1), oldest
// removed, so a capture never holds more than MaxBytes*MaxFiles bytes. A
// partly filled chunk reaches the disk within FlushInterval.
package capture
