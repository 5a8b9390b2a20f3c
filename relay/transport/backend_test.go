package transport_test

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

// The package's test helpers, under the names its in-package tests use
// (export_test.go).
var (
	loopback4         = transport.Loopback4
	newReadMsgs       = transport.NewReadMsgs
	readN             = transport.ReadN
	payload           = transport.Payload
	writeAll          = transport.WriteAll
	msgsTo            = transport.MsgsTo
	isClosedErr       = transport.IsClosedErr
	waitReaderBlocked = transport.WaitReaderBlocked
)

const (
	testDatagramCap = transport.TestDatagramCap
	testReadTimeout = transport.TestReadTimeout
)

// backend is one implementation of transport.Conn under test.
type backend int

const (
	memBackend      backend = iota // MemNetwork
	udpBackend                     // transport.ListenUDP: recvmmsg/sendmmsg on Linux
	portableBackend                // the portable one-datagram path
)

var allBackends = []backend{memBackend, udpBackend, portableBackend}

func (b backend) String() string {
	switch b {
	case memBackend:
		return "mem"
	case udpBackend:
		return "udp"
	default:
		return "portable"
	}
}

// batched reports whether one ReadBatch returns every datagram already
// queued (up to the batch size), rather than one.
func (b backend) batched() bool {
	return b == memBackend || (b == udpBackend && runtime.GOOS == "linux")
}

func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range allBackends {
		t.Run(b.String(), func(t *testing.T) { f(t, b) })
	}
}

// listenOn opens one Conn on backend b (all mem conns of one test share
// mem), closed at cleanup.
func listenOn(t testing.TB, b backend, mem *transporttest.MemNetwork, addr netip.AddrPort, opts transport.Options) transport.Conn {
	t.Helper()
	var c transport.Conn
	var err error
	switch b {
	case memBackend:
		c, err = mem.Listen(addr)
	case udpBackend:
		c, err = transport.ListenUDP(addr, opts)
	default:
		c, err = transport.ListenPortable(addr, opts)
	}
	if err != nil {
		t.Fatalf("listen %v on %v: %v", addr, b, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pair returns two Conns on 127.0.0.1 that can reach each other, the
// same test body running over MemNetwork and real sockets (after
// wireguard-go's genTestPair).
func pair(t testing.TB, b backend) (transport.Conn, transport.Conn) {
	t.Helper()
	mem := transporttest.NewMemNetwork()
	return listenOn(t, b, mem, loopback4, transport.Options{}), listenOn(t, b, mem, loopback4, transport.Options{})
}
