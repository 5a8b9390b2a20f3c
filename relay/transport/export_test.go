package transport

import "net/netip"

// The backend suite (transport_test.go, package transport_test) runs over
// transporttest's MemNetwork as well as real sockets, so it cannot be in
// this package: transporttest imports transport. These are the names it
// uses from here.

// ListenPortable opens the portable one-datagram path, as ListenUDP does
// on a platform without batch I/O.
func ListenPortable(addr netip.AddrPort, opts Options) (Conn, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return listenPortable(addr, o)
}

// This package's test helpers (helpers_test.go).
var (
	Loopback4         = loopback4
	NewReadMsgs       = newReadMsgs
	ReadN             = readN
	Payload           = payload
	WriteAll          = writeAll
	MsgsTo            = msgsTo
	IsClosedErr       = isClosedErr
	WaitReaderBlocked = waitReaderBlocked
)

const (
	TestDatagramCap = testDatagramCap
	TestReadTimeout = testReadTimeout
)
