package capture

import "time"

const (
	// Snaplen is the snapshot length written in file headers: the most
	// bytes of one record (IP and UDP headers included) a file holds. It is
	// the largest IP packet, so no UDP datagram is ever cut.
	Snaplen = 65535

	// FileHeaderLen is the size of a pcap file header.
	FileHeaderLen = 24

	// RecordHeaderLen is the size of a pcap record header.
	RecordHeaderLen = 16

	// IPv4HeaderLen, IPv6HeaderLen and UDPHeaderLen are the synthesized
	// headers' sizes (no IPv4 options, no IPv6 extension headers).
	IPv4HeaderLen = 20
	IPv6HeaderLen = 40
	UDPHeaderLen  = 8

	// MaxRecordLen is the most bytes one record takes in a file.
	MaxRecordLen = RecordHeaderLen + Snaplen

	// FileMode is the permission of the capture files: owner only, since
	// they hold the traffic itself. A file already at the path is set to
	// it too.
	FileMode = 0o600

	// MinMaxBytes is the smallest file size NewRotating accepts: a file
	// header and one record of the largest size, rounded up, so any
	// datagram fits in a fresh file.
	MinMaxBytes = 128 << 10

	// DefaultMaxBytes and DefaultMaxFiles are suggested limits for an
	// operator's capture (relay run --capture): ten files of 100 MiB,
	// about ten minutes of a relay moving 1.5 MB/s.
	DefaultMaxBytes = 100 << 20
	DefaultMaxFiles = 10

	// ChunkBytes is the size of one in-memory chunk of formatted records
	// (smaller when MaxBytes is small: a chunk never exceeds what fits in a
	// fresh file). 256 KiB is written in one system call, and holds about
	// 240 full-size datagrams.
	ChunkBytes = 256 << 10

	// Chunks is how many chunks a Writer has: one being filled by Tap, the
	// others queued for or being written by the disk goroutine. 16 chunks
	// (4 MiB) absorb a 40 ms stall of the disk at 100 MB/s of traffic
	// before records are dropped.
	Chunks = 16

	// FlushInterval bounds how long a record may sit in a partly filled
	// chunk before it is written: a quiet relay's capture is at most this
	// far behind.
	FlushInterval = time.Second

	// ipTTL is the TTL / hop limit written in synthesized headers.
	ipTTL = 64
)
