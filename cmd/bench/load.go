package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

const (
	// pairOffset separates a pair's publisher port from its requester
	// port, so that the baseline forwarder maps one to the other by
	// arithmetic alone.
	pairOffset = 1000
	// ringBits sizes the ring of send times: requests in flight at once
	// must stay far below 1<<ringBits.
	ringBits = 20
	// stallAfter declares the window's requests lost when no page has
	// come back for this long (kernel drops under overload).
	stallAfter = 100 * time.Millisecond
)

var loopback = netip.MustParseAddr("127.0.0.1")

// publisherShip is pair i's publisher: planets under ~zod's stars.
func publisherShip(i int) lane.Ship { return lane.ShipFromUint64(0x1_0100 + uint64(i)<<16) }

// pair is one requester socket and the publisher socket it asks.
// Requests go from the requester through the server to the publisher,
// pages come back. Several requesters may share a publisher.
type pair struct {
	idx  int
	req  transport.Conn
	pub  *publisher
	ship lane.Ship
}

// publisher is one publisher socket, answering the requesters that ask it.
type publisher struct {
	conn transport.Conn
	ship lane.Ship
}

// loadGen drives requester sockets against a server, which forwards their
// requests to the publisher sockets.
type loadGen struct {
	server   netip.AddrPort
	pairs    []*pair      // the requesters, one a socket
	pubs     []*publisher // requester i asks pubs[i%len(pubs)]
	pageSize int
	opts     transport.Options // for every generator socket
	// stall is how long the closed loop waits for a page before it
	// writes its window off: stallAfter, or more where the server is
	// paused between turns (measureTogether).
	stall time.Duration

	sendTime []atomic.Int64 // ring: send time (ns since start) by sequence number
	start    time.Time
	seq      atomic.Uint64 // next request sequence number
	answered atomic.Uint64
	lost     atomic.Uint64

	mu   sync.Mutex
	rtts []time.Duration // guarded by mu; recorded only while measuring latency
	rec  atomic.Bool
}

// newLoadGen opens requesters requester sockets at basePort on and
// publishers publisher sockets at basePort+pairOffset on.
func newLoadGen(server netip.AddrPort, requesters, publishers, basePort, pageSize int, opts transport.Options) (*loadGen, error) {
	if requesters > maxRequesters || publishers < 1 {
		return nil, fmt.Errorf("%d requesters on %d publishers: at most %d requesters, at least one publisher", requesters, publishers, maxRequesters)
	}
	// The generator stands for vere ships, whose sockets do not set
	// UDP_GRO (pkg/vere/io/mesa.c reads with uv_udp_recv_start): on
	// loopback a GRO receiver also spares the sender's system call the
	// splitting of its GSO sends, which would flatter every server alike.
	opts.DisableGRO = true
	g := &loadGen{server: server, pageSize: pageSize, opts: opts, stall: stallAfter, sendTime: make([]atomic.Int64, 1<<ringBits), start: time.Now()}
	for i := 0; i < publishers; i++ {
		pub, err := transport.ListenUDP(netip.AddrPortFrom(loopback, uint16(basePort+pairOffset+i)), opts)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("publisher socket: %w", err)
		}
		g.pubs = append(g.pubs, &publisher{conn: pub, ship: publisherShip(i)})
	}
	for i := 0; i < requesters; i++ {
		req, err := transport.ListenUDP(netip.AddrPortFrom(loopback, uint16(basePort+i)), opts)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("requester socket: %w", err)
		}
		pub := g.pubs[i%publishers]
		g.pairs = append(g.pairs, &pair{idx: i, req: req, pub: pub, ship: pub.ship})
	}
	return g, nil
}

func (g *loadGen) close() {
	for _, p := range g.pairs {
		p.req.Close()
	}
	for _, p := range g.pubs {
		p.conn.Close()
	}
}

// peek returns the request datagram for path on pair p's publisher. The
// path ends in the requester's index (requesterTag), which the bare
// forwarder reads from the page to send it back.
func (p *pair) peek(dst []byte, path []byte) []byte {
	path = appendRequesterTag(path, p.idx)
	pkt := scry.NewPeek(scry.Name{Ship: p.ship, Bloq: scry.DefaultBloq, Path: path})
	return pkt.Append(dst)
}

// requesterTag is the width of the requester index that ends every path:
// "/" and three decimal digits.
const requesterTag = 4

// maxRequesters is the most requester sockets: their index must fit the
// tag, and their ports must stay below the publishers'.
const maxRequesters = min(1000, pairOffset)

func appendRequesterTag(path []byte, idx int) []byte {
	return append(path, '/', byte('0'+idx/100), byte('0'+idx/10%10), byte('0'+idx%10))
}

// requesterOf returns the requester index that ends name, a name's wire
// bytes (the path is its last field), or -1.
func requesterOf(name []byte) int {
	if len(name) < requesterTag {
		return -1
	}
	t := name[len(name)-requesterTag:]
	if t[0] != '/' {
		return -1
	}
	n := 0
	for _, c := range t[1:] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// runPublishers answers every peek for a "b/" path with a page of pageSize
// bytes; "fill/" peeks are left unanswered so that they stay pending.
func (g *loadGen) runPublishers(wg *sync.WaitGroup) {
	for _, p := range g.pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := newMessages(transport.DefaultBatchSize, relay.MaxPacket, relay.MaxPacket)
			out := newMessages(transport.DefaultBatchSize, 0, relay.MaxPacket)
			frag := make([]byte, g.pageSize)
			var pkt scry.Packet
			readLoop(p.conn, in, func(n int) {
				k := 0
				for i := 0; i < n; i++ {
					if pkt.Parse(in[i].Buf[:in[i].N]) != nil || pkt.Header.Type != scry.TypePeek ||
						len(pkt.Name.Path) < 2 || pkt.Name.Path[0] != 'b' {
						continue
					}
					page := scry.Packet{
						Header: scry.Header{Version: scry.MesaVersion, Type: scry.TypePage},
						Name:   pkt.Name,
						Data:   scry.Data{Total: uint64(len(frag)), AuthKind: scry.AuthNone, Frag: frag},
					}
					out[k].Buf = page.Append(out[k].Buf[:0])
					out[k].N = len(out[k].Buf)
					out[k].Addr = in[i].Addr
					k++
				}
				writeAll(p.conn, out[:k])
			})
		}()
	}
}

// readLoop reads batches into in from c until c is closed, handing each
// batch's length to each.
func readLoop(c transport.Conn, in []transport.Message, each func(n int)) {
	for {
		n, err := c.ReadBatch(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		each(n)
	}
}

func writeAll(c transport.Conn, msgs []transport.Message) {
	for len(msgs) > 0 {
		n, err := c.WriteBatch(msgs)
		if err == nil || errors.Is(err, net.ErrClosed) {
			return
		}
		msgs = msgs[min(n+1, len(msgs)):]
	}
}

// send sends requests for the next sequence numbers on pair p.
func (g *loadGen) send(p *pair, n int, msgs []transport.Message) {
	path := make([]byte, 0, 24)
	for i := 0; i < n; i++ {
		seq := g.seq.Add(1)
		path = strconv.AppendUint(append(path[:0], 'b', '/'), seq, 36)
		msgs[i].Buf = p.peek(msgs[i].Buf[:0], path)
		msgs[i].N = len(msgs[i].Buf)
		msgs[i].Addr = g.server
		g.sendTime[seq&(1<<ringBits-1)].Store(int64(time.Since(g.start)))
	}
	writeAll(p.req, msgs[:n])
}

// runRequesters reads pages on every pair; each answered request calls
// onAnswer (which may send the next one).
func (g *loadGen) runRequesters(wg *sync.WaitGroup, onAnswer func(p *pair, msgs []transport.Message, n int)) {
	for _, p := range g.pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := newMessages(transport.DefaultBatchSize, relay.MaxPacket, relay.MaxPacket)
			out := newMessages(transport.DefaultBatchSize, 0, 128)
			var pkt scry.Packet
			readLoop(p.req, in, func(n int) {
				now := time.Since(g.start)
				fresh := 0
				for i := 0; i < n; i++ {
					b := in[i].Buf[:in[i].N]
					if scry.IsSTUN(b) {
						answerProbe(p.req, b, in[i].Addr)
						continue
					}
					if pkt.Parse(b) != nil || pkt.Header.Type != scry.TypePage || len(pkt.Name.Path) < 3+requesterTag {
						continue
					}
					path := pkt.Name.Path
					seq, err := strconv.ParseUint(string(path[2:len(path)-requesterTag]), 36, 64)
					if err != nil {
						continue
					}
					sent := g.sendTime[seq&(1<<ringBits-1)].Swap(0)
					if sent == 0 {
						continue // a duplicate, or a request already written off
					}
					fresh++
					if g.rec.Load() {
						g.mu.Lock()
						g.rtts = append(g.rtts, now-time.Duration(sent))
						g.mu.Unlock()
					}
				}
				g.answered.Add(uint64(fresh))
				if fresh > 0 && onAnswer != nil {
					onAnswer(p, out, fresh)
				}
			})
		}()
	}
}

// answerProbe answers a STUN binding request as every vere ship does, so
// that a relay with its amplification budget on proves the requester's
// lane (amp.Config) and exempts it.
func answerProbe(c transport.Conn, b []byte, from netip.AddrPort) {
	var q scry.STUNRequest
	if q.Parse(b) != nil {
		return
	}
	resp := scry.STUNResponse{TxID: q.TxID, Mapped: c.LocalAddr()}
	rb := resp.Append(nil)
	writeAll(c, []transport.Message{{Buf: rb, N: len(rb), Addr: from}})
}

// closedLoop keeps window requests in flight on each pair for d and
// returns the round trips per second.
func (g *loadGen) closedLoop(window int, d time.Duration) float64 {
	var wg sync.WaitGroup
	var stop atomic.Bool
	g.runRequesters(&wg, func(p *pair, msgs []transport.Message, n int) {
		if !stop.Load() {
			g.send(p, n, msgs)
		}
	})
	msgs := newMessages(window, 0, 128)
	start := g.answered.Load()
	t0 := time.Now()
	for _, p := range g.pairs {
		for sent := 0; sent < window; sent += transport.DefaultBatchSize {
			g.send(p, min(transport.DefaultBatchSize, window-sent), msgs)
		}
	}
	// Requests lost to full socket buffers would shrink the window for
	// good: when pages stop coming, write the window off and refill it.
	last, lastT := g.answered.Load(), time.Now()
	for time.Since(t0) < d {
		time.Sleep(g.stall / 4)
		if a := g.answered.Load(); a != last {
			last, lastT = a, time.Now()
		} else if time.Since(lastT) > g.stall {
			g.lost.Add(uint64(window * len(g.pairs)))
			for _, p := range g.pairs {
				for sent := 0; sent < window; sent += transport.DefaultBatchSize {
					g.send(p, min(transport.DefaultBatchSize, window-sent), msgs)
				}
			}
			lastT = time.Now()
		}
	}
	stop.Store(true)
	rate := float64(g.answered.Load()-start) / time.Since(t0).Seconds()
	g.quiesce(&wg)
	return rate
}

// pacedLoop is closedLoop held to rate round trips a second: requests go
// out on the pairs in turn, at rate, while fewer than window a pair (window
// times the pairs in all) are in flight, for d. It returns the round trips
// per second. With every configuration's generator at one rate below each
// server's capacity, their CPU a round trip is compared at equal load, not
// each at its own saturation (-rate). Ticks are 100 µs: a millisecond's
// due at once measured as bursts that filled the servers' reads.
func (g *loadGen) pacedLoop(window int, rate float64, d time.Duration) float64 {
	var wg sync.WaitGroup
	g.runRequesters(&wg, nil)
	const tick = 100 * time.Microsecond
	perTick := rate * tick.Seconds()
	capacity := window * len(g.pairs)
	msgs := newMessages(transport.DefaultBatchSize, 0, 128)
	ans0, lost0 := g.answered.Load(), g.lost.Load()
	sent := uint64(0)
	due := 0.0
	last, lastT := ans0, time.Now()
	t0 := time.Now()
	next := 0
	for k := 0; time.Since(t0) < d; k++ {
		answered := g.answered.Load()
		inFlight := sent - min(sent, answered-ans0+g.lost.Load()-lost0)
		if answered != last {
			last, lastT = answered, time.Now()
		} else if time.Since(lastT) > g.stall {
			// No page for stall: what is in flight was lost (a full
			// socket buffer), as closedLoop writes its window off.
			g.lost.Add(inFlight)
			inFlight = 0
			lastT = time.Now()
		}
		var n int
		n, due = paceStep(due, perTick, capacity-int(inFlight))
		for n > 0 {
			b := min(n, transport.DefaultBatchSize)
			g.send(g.pairs[next%len(g.pairs)], b, msgs)
			next++
			sent += uint64(b)
			n -= b
		}
		time.Sleep(time.Until(t0.Add(time.Duration(k+1) * tick)))
	}
	carried := float64(g.answered.Load()-ans0) / time.Since(t0).Seconds()
	g.quiesce(&wg)
	return carried
}

// paceStep is one tick of pacedLoop: due requests carried from the last
// tick, perTick more due at this one, room free places in the window. It
// returns how many to send now, the whole requests due but at most room,
// and what is carried to the next tick: the fraction left, or nothing when
// the window is full (room caps n), so that a server paused between turns
// (measureTogether) is met with at most a full window, not a burst of all
// that came due meanwhile.
func paceStep(due, perTick float64, room int) (n int, carry float64) {
	due += perTick
	n = int(due)
	if n >= room {
		return max(room, 0), 0
	}
	return n, due - float64(n)
}

// openLoop sends at rate requests per second for d, recording round trips,
// and returns their sorted latencies and the fraction answered.
func (g *loadGen) openLoop(rate float64, d time.Duration) ([]time.Duration, float64) {
	var wg sync.WaitGroup
	g.mu.Lock()
	g.rtts = g.rtts[:0]
	g.mu.Unlock()
	g.rec.Store(true)
	g.runRequesters(&wg, nil)
	const tick = time.Millisecond
	perTick := rate * tick.Seconds()
	msgs := newMessages(transport.DefaultBatchSize, 0, 128)
	seq0, ans0 := g.seq.Load(), g.answered.Load()
	t0 := time.Now()
	due := 0.0
	for k := 0; time.Since(t0) < d; k++ {
		due += perTick
		for due >= 1 {
			n := min(int(due), transport.DefaultBatchSize)
			g.send(g.pairs[k%len(g.pairs)], n, msgs)
			due -= float64(n)
		}
		time.Sleep(time.Until(t0.Add(time.Duration(k+1) * tick)))
	}
	time.Sleep(200 * time.Millisecond) // the last answers
	g.rec.Store(false)
	sent := g.seq.Load() - seq0
	answered := g.answered.Load() - ans0
	g.quiesce(&wg)
	g.mu.Lock()
	rtts := slices.Clone(g.rtts)
	g.mu.Unlock()
	slices.Sort(rtts)
	return rtts, float64(answered) / float64(max(sent, 1))
}

// quiesce stops the requester readers by closing and reopening their
// sockets on the same ports, so the next phase starts clean.
func (g *loadGen) quiesce(wg *sync.WaitGroup) {
	time.Sleep(50 * time.Millisecond)
	for _, p := range g.pairs {
		addr := p.req.LocalAddr()
		p.req.Close()
		c, err := transport.ListenUDP(addr, g.opts)
		if err != nil {
			panic(fmt.Sprintf("reopening %v: %v", addr, err))
		}
		p.req = c
	}
	wg.Wait()
	for i := range g.sendTime {
		g.sendTime[i].Store(0)
	}
}

// prefill makes the server hold n pending entries: peeks for "fill/" paths
// that the publishers never answer. It sends in paced batches and returns
// when the server reports n entries (or gives up after several rounds).
func (g *loadGen) prefill(n int, pending func() int) error {
	msgs := newMessages(transport.DefaultBatchSize, 0, 128)
	path := make([]byte, 0, 24)
	next := 0
	for round := 0; round < 20; round++ {
		have := pending()
		if have >= n*995/1000 {
			return nil
		}
		for sent := 0; sent < n-have; {
			k := min(transport.DefaultBatchSize, n-have-sent)
			p := g.pairs[next%len(g.pairs)]
			for i := 0; i < k; i++ {
				path = strconv.AppendInt(append(path[:0], "fill/"...), int64(next), 36)
				next++
				msgs[i].Buf = p.peek(msgs[i].Buf[:0], path)
				msgs[i].N = len(msgs[i].Buf)
				msgs[i].Addr = g.server
			}
			writeAll(p.req, msgs[:k])
			sent += k
			if sent%(64*transport.DefaultBatchSize) == 0 {
				time.Sleep(time.Millisecond) // let the server keep up
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if have := pending(); have < n*9/10 {
		return fmt.Errorf("prefill reached %d of %d entries", have, n)
	}
	return nil
}

// newMessages returns n messages, each with a buffer of length size and
// capacity capacity.
func newMessages(n, size, capacity int) []transport.Message {
	msgs := make([]transport.Message, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, size, capacity)
	}
	return msgs
}
