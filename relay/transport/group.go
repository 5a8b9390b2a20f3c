package transport

// groupStackMax is the largest batch GroupByAddr groups with fixed-size
// index tables on the stack (indices and group numbers fit a byte).
const groupStackMax = 256

// GroupByAddr reorders msgs in place so that messages to the same Addr are
// adjacent, ordering the groups by each address's first appearance and
// keeping every address's messages in their original relative order (a
// stable grouping). Call it before WriteBatch so that runs to one
// destination can share one GSO send (see the package comment, "Cost").
//
// Reordering across destinations is harmless for UDP: datagrams to
// different destinations have no order to keep, and nothing orders them
// on the wire anyway, while each destination still receives its datagrams
// in the order given. Messages are compared by Addr alone (1.2.3.4:5 and
// [::ffff:1.2.3.4]:5 are different addresses here); invalid messages are
// grouped like any other and still fail in WriteBatch.
//
// GroupByAddr allocates nothing. For len(msgs) <= 256 it costs
// O(len(msgs) × destinations) address comparisons plus at most len(msgs)
// swaps; longer slices fall back to an insertion pass that moves more.
func GroupByAddr(msgs []Message) {
	if len(msgs) > groupStackMax {
		groupByAddrLong(msgs)
		return
	}
	var (
		group [groupStackMax]uint8  // group[i]: group number of msgs[i]
		first [groupStackMax]uint8  // first[g]: index of group g's first message
		next  [groupStackMax]uint16 // next[g]: where group g's next message goes (a count, then an offset)
		dest  [groupStackMax]uint8  // dest[i]: where msgs[i] ends up
	)
	groups := 0
	prev := 0
	for i := range msgs {
		a := msgs[i].Addr
		g := prev // runs are common: try the previous message's group first
		if i == 0 || msgs[first[g]].Addr != a {
			g = 0
			for g < groups && msgs[first[g]].Addr != a {
				g++
			}
			if g == groups {
				first[g] = uint8(i)
				groups++
			}
		}
		group[i] = uint8(g)
		next[g]++
		prev = g
	}
	if groups <= 1 {
		return
	}
	// Counts to starting offsets.
	off := uint16(0)
	for g := range groups {
		off, next[g] = off+next[g], off
	}
	moved := false
	for i := range msgs {
		g := group[i]
		dest[i] = uint8(next[g])
		next[g]++
		moved = moved || int(dest[i]) != i
	}
	if !moved {
		return
	}
	// Apply the permutation by following its cycles: each swap puts one
	// message in its final place.
	for i := range msgs {
		for int(dest[i]) != i {
			j := dest[i]
			msgs[i], msgs[j] = msgs[j], msgs[i]
			dest[i], dest[j] = dest[j], dest[i]
		}
	}
}

// groupByAddrLong is GroupByAddr without index tables: for each group, in
// order of first appearance, it moves the group's later messages up to the
// end of the group so far, shifting the messages in between down by one.
func groupByAddrLong(msgs []Message) {
	for i := 0; i < len(msgs); {
		a := msgs[i].Addr
		end := i + 1 // msgs[i:end] is a's group so far
		for j := end; j < len(msgs); j++ {
			if msgs[j].Addr == a {
				m := msgs[j]
				copy(msgs[end+1:j+1], msgs[end:j])
				msgs[end] = m
				end++
			}
		}
		i = end
	}
}
