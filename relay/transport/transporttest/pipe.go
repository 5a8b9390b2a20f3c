package transporttest

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/urbit-relay/relay/relay/transport"
)

// NewPipe returns the two ends of an in-memory fronted ship, for testing
// fronting without a TUN (relay/front's Conn is the real relaySide).
//
// relaySide is what the relay holds: a WriteBatch on it with Addr R
// delivers the datagram to shipSide, whose ReadBatch reports Addr R (the
// ship hears it from R, the true remote lane); a ReadBatch on it returns
// what shipSide wrote, with Addr the destination the ship addressed.
// shipSide is the ship's socket: a WriteBatch on it with Addr D delivers to
// relaySide with Addr D. Both LocalAddr() return shipLane.
//
// Each end has a receive queue of queue datagrams (DefaultMemQueueLen if
// queue < 1); a datagram arriving at a full queue is dropped and counted
// in that end's Drops (both ends implement DropCounter). WriteBatch copies
// the bytes, so the caller may reuse its buffers at once. Addr must be
// valid, with a non-zero port, and of shipLane's IP family (IPv4-mapped
// addresses count as IPv4), else ErrInvalidAddr, as on the real TUN.
//
// Close closes one end, as MemNetwork's conns do: its ReadBatch and
// WriteBatch return net.ErrClosed (a blocked ReadBatch returns at once),
// and datagrams written to it by the other end, which stays open, are
// discarded.
func NewPipe(shipLane netip.AddrPort, queue int) (relaySide, shipSide transport.Conn) {
	if queue < 1 {
		queue = DefaultMemQueueLen
	}
	shipLane = unmapAddrPort(shipLane)
	r := newPipeEnd(shipLane, queue)
	s := newPipeEnd(shipLane, queue)
	r.peer, s.peer = s, r
	return r, s
}

// pipeEnd is one end of a pipe. peer is set once by NewPipe.
type pipeEnd struct {
	local netip.AddrPort
	peer  *pipeEnd
	queue chan memPacket // bounded receive queue; never closed
	done  chan struct{}  // closed by Close
	once  sync.Once
	drops atomic.Uint64
}

func newPipeEnd(local netip.AddrPort, queue int) *pipeEnd {
	return &pipeEnd{local: local, queue: make(chan memPacket, queue), done: make(chan struct{})}
}

func (p *pipeEnd) closed() bool { return isDone(p.done) }

func (p *pipeEnd) ReadBatch(msgs []transport.Message) (int, error) {
	return readQueue(p.done, p.queue, msgs)
}

func (p *pipeEnd) WriteBatch(msgs []transport.Message) (int, error) {
	for i := range msgs {
		if p.closed() {
			return i, net.ErrClosed
		}
		m := &msgs[i]
		if err := transport.CheckWrite(m); err != nil {
			return i, err
		}
		addr := unmapAddrPort(m.Addr)
		if addr.Addr().Is4() != p.local.Addr().Is4() {
			return i, transport.ErrInvalidAddr
		}
		p.peer.deliver(memPacket{from: addr, b: bytes.Clone(m.Buf[:m.N])})
	}
	return len(msgs), nil
}

// deliver queues pkt, or drops it if p is closed or its queue is full.
func (p *pipeEnd) deliver(pkt memPacket) {
	if p.closed() {
		return
	}
	select {
	case p.queue <- pkt:
	default:
		p.drops.Add(1)
	}
}

func (p *pipeEnd) LocalAddr() netip.AddrPort { return p.local }

// Drops implements transport.DropCounter: datagrams dropped because this end's queue
// was full.
func (p *pipeEnd) Drops() uint64 { return p.drops.Load() }

func (p *pipeEnd) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}
