package sim

import (
	"github.com/urbit-relay/relay/relay"
)

// Load is, by ship (indexes of Ships), the datagrams each ship's host
// received over the network, by traffic class.
type Load [][NumTraffic]uint64

// Load returns the datagrams each ship's host has received so far. Take one
// at the start and one at the end of a window and subtract (Sub) to measure
// the window.
func (n *Network) Load() Load {
	l := make(Load, len(n.ships))
	for i := range n.ships {
		s := &n.ships[i]
		l[i] = n.nodes[s.front].netIn
		if s.core != s.front {
			for t := range l[i] {
				l[i][t] += n.nodes[s.core].netIn[t]
			}
		}
	}
	return l
}

// Sub returns l − m, ship by ship.
func (l Load) Sub(m Load) Load {
	d := make(Load, len(l))
	for i := range l {
		for t := range l[i] {
			d[i][t] = l[i][t] - m[i][t]
		}
	}
	return d
}

// Total returns the datagrams ship i received, every class.
func (l Load) Total(i int) uint64 {
	var s uint64
	for _, v := range l[i] {
		s += v
	}
	return s
}

// RelayTotals returns the counters of every relay in the network added up,
// including relays since replaced.
func (n *Network) RelayTotals() relay.Snapshot {
	t := n.relayDrops
	for i := range n.nodes {
		if nd := &n.nodes[i]; nd.relay != nil {
			t = addSnapshots(t, nd.relay.Counters().Snapshot())
		}
	}
	return t
}

// addSnapshots returns a + b (relay.Snapshot.Add, which sums every
// counter of the relay's tables).
func addSnapshots(a, b relay.Snapshot) relay.Snapshot {
	a.Add(&b)
	return a
}
