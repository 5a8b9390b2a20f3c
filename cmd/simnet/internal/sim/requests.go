package sim

import (
	"crypto/ed25519"
	"fmt"
	"github.com/urbit-relay/relay/relay/route"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
)

// Result is the outcome of one request made with Peek.
type Result struct {
	Start, End time.Duration
	// Lost is set when no answer came within the request's timeout; the
	// request was then cancelled.
	Lost bool
	// Tries is how many times the requester sent the request: 1 means no
	// retransmission was needed.
	Tries int
	// Hops is the page's hop count on arrival: 0 when it came straight from
	// the publisher.
	Hops int
	From netip.AddrPort // lane the page came from
	Next netip.AddrPort // its next-hop, if any
	// Notified is set for a subscription's value that came in a signed
	// ack or heartbeat answer rather than in the path's own page.
	Notified bool
}

// Delay is the time from the request to its answer.
func (r Result) Delay() time.Duration { return r.End - r.Start }

// Direct reports whether the answer came straight from the publisher.
func (r Result) Direct() bool { return !r.Lost && r.Hops == 0 }

// Track registers path as tracked traffic and returns its counters. Peek
// tracks its paths itself; Track is for reading a path's counters.
func (n *Network) Track(path string) *PathStats {
	ps, ok := n.tracked[path]
	if !ok {
		ps = &PathStats{}
		n.tracked[path] = ps
	}
	return ps
}

// Peek makes ship requester ask ship rcvr for path, now. done runs (as an
// event, at the time of the answer) with the result; with timeout > 0, a
// request unanswered for that long is cancelled and reported Lost. Paths
// are tracked (Track): every datagram carrying one is counted.
func (n *Network) Peek(requester, rcvr int, path string, timeout time.Duration, done func(Result)) error {
	return n.request(requester, rcvr, path, timeout, done, (*endpoint.Core).Peek)
}

// Subscribe makes ship subscriber follow path on ship pub with scry
// notifications (endpoint.Core.Subscribe): if pub has a key (SetKey) the
// subscriber is acked and heartbeats, otherwise it polls. done and timeout
// are as for Peek.
func (n *Network) Subscribe(subscriber, pub int, path string, timeout time.Duration, done func(Result)) error {
	return n.request(subscriber, pub, path, timeout, done, (*endpoint.Core).Subscribe)
}

type startFunc func(c *endpoint.Core, rcvr lane.Ship, path string, now time.Duration, done func(endpoint.Response), out []endpoint.Datagram) ([]endpoint.Datagram, error)

func (n *Network) request(requester, rcvr int, path string, timeout time.Duration, done func(Result), start startFunc) error {
	s := &n.ships[requester]
	id := s.core
	nd := &n.nodes[id]
	if nd.offline {
		return fmt.Errorf("sim: %s is offline", s.ID)
	}
	if !nd.born {
		n.boot(id)
	}
	if nd.stock != nil {
		return n.stockRequest(requester, rcvr, path, timeout, done)
	}
	// The requester resolves the receiver's galaxy, as a ship looks a
	// galaxy up by DNS.
	g := &n.ships[n.ships[rcvr].Galaxy]
	nd.core.Routes().SetStaticLane(g.ID, lane.KeyOf(n.nodes[g.front].lane))
	n.Track(path)
	began := n.now
	finished := false
	rid := n.ships[rcvr].ID
	cb := func(resp endpoint.Response) {
		if finished {
			return
		}
		finished = true
		r := Result{Start: began, End: n.now, Tries: resp.Tries, Hops: resp.Hops, From: resp.From, Next: resp.Next, Notified: resp.Notified}
		n.At(n.now, func() { done(r) })
	}
	var err error
	n.dg, err = start(nd.core, rid, path, n.now, cb, n.dg[:0])
	if err != nil {
		return fmt.Errorf("sim: request: %w", err)
	}
	n.emit(id, n.dg)
	n.reschedule(id)
	if timeout > 0 {
		n.At(n.now+timeout, func() {
			if finished {
				return
			}
			finished = true
			if nd := &n.nodes[id]; nd.core != nil {
				nd.core.Cancel(rid, path)
				n.reschedule(id)
			}
			done(Result{Start: began, End: n.now, Lost: true})
		})
	}
	return nil
}

// SetKey gives ship i a signing key, so that it runs the publisher side of
// scry notifications, and makes its public key known to every ship. It must
// be called before any ship boots (before RunUntil).
func (n *Network) SetKey(i int, key ed25519.PrivateKey) error {
	if n.booted > 0 {
		return fmt.Errorf("sim: SetKey after ships booted")
	}
	s := &n.ships[i]
	n.nodes[s.core].coreCfg.Key = key
	n.peerKeys[s.ID] = key.Public().(ed25519.PublicKey)
	return nil
}

// Grow makes value the answer to path on ship i and sends at once the
// notifications it owes subscribers (endpoint.Core.Grow).
func (n *Network) Grow(i int, path string, value []byte) {
	id := n.ships[i].core
	if !n.nodes[id].born {
		n.boot(id)
	}
	n.dg = n.nodes[id].core.Grow(path, value, n.now, n.dg[:0])
	n.emit(id, n.dg)
	n.reschedule(id)
}

// Publish makes value the answer to path on ship i.
func (n *Network) Publish(i int, path string, value []byte) {
	id := n.ships[i].core
	if !n.nodes[id].born {
		n.boot(id)
		n.reschedule(id)
	}
	n.nodes[id].core.Publish(path, value)
}

// Lane returns ship i's public lane.
func (n *Network) Lane(i int) netip.AddrPort { return n.nodes[n.ships[i].front].lane }

// Routes returns the route table of ship i's endpoint core (nil before it
// boots).
func (n *Network) Routes(i int) *route.Table {
	if c := n.nodes[n.ships[i].core].core; c != nil {
		return c.Routes()
	}
	return nil
}

// Rebind gives ship i, which must not run a relay, a new public lane, as a
// NAT does when its binding changes: its pinholes close and datagrams to the
// old lane are lost.
func (n *Network) Rebind(i int) error {
	s := &n.ships[i]
	if s.Relay {
		return fmt.Errorf("sim: %s runs a relay; its lane is fixed", s.ID)
	}
	nd := &n.nodes[s.front]
	delete(n.byLane, nd.lane)
	nd.rebinds++
	nd.lane = netip.AddrPortFrom(nd.lane.Addr(), uint16(RebindPort+nd.rebinds))
	n.byLane[nd.lane] = s.front
	nd.pinholes = nd.pinholes[:0]
	return nil
}

// RestartRelay replaces ship i's relay with a new one, as a restarted
// process: pending requests and learned lanes are gone, configured lanes
// remain.
func (n *Network) RestartRelay(i int) error {
	s := &n.ships[i]
	if !s.Relay {
		return fmt.Errorf("sim: %s runs no relay", s.ID)
	}
	nd := &n.nodes[s.front]
	n.relayDrops = addSnapshots(n.relayDrops, nd.relay.Counters().Snapshot())
	r, err := relay.New(nd.relayCfg)
	if err != nil {
		return err
	}
	nd.relay = r
	return nil
}

// SetOffline takes ship i's host off the network (every datagram to it is
// dropped and its timers stop) or brings it back. A relay comes back
// restarted; a ship's core keeps its state, as a ship's does across a
// restart of its runtime.
func (n *Network) SetOffline(i int, off bool) error {
	s := &n.ships[i]
	for _, id := range []int32{s.front, s.core} {
		n.nodes[id].offline = off
	}
	if off {
		return nil
	}
	if s.Relay {
		if err := n.RestartRelay(i); err != nil {
			return err
		}
	}
	if n.nodes[s.core].born {
		n.reschedule(s.core)
	}
	return nil
}
