package route

import (
	"net/netip"
	"slices"

	"github.com/urbit-relay/relay/lane"
)

// AddSelf records a lane that belongs to this process (its listening
// address as seen by others). Such a lane is never chosen as a target.
func (r *Table) AddSelf(k lane.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.selfKeys.Load()
	if !slices.Contains(old, k) {
		keys := append(slices.Clip(old), k) // a copy: readers hold old
		r.selfKeys.Store(&keys)
		r.quiet.Add(1) // a plan's lane may be this process's now
	}
}

// AddSelfPort records a port this process listens on at a wildcard
// address: every loopback address with that port is then a lane of this
// process (the caller adds the interfaces' addresses with AddSelf).
func (r *Table) AddSelfPort(port uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.selfPorts.Load()
	if !slices.Contains(old, port) {
		ports := append(slices.Clip(old), port)
		r.selfPorts.Store(&ports)
	}
}

// HintAllowed reports whether k may become a target on the word of a
// datagram (a page's next-hop): a valid lane with a nonzero port, not this
// process, on the public internet (lane.PublicAddr: no loopback, private,
// link-local, multicast, broadcast or reserved space) or in a network the
// operator declared (Config.HintNets).
func (r *Table) HintAllowed(k lane.Key) bool {
	return k.IsValid() && !r.IsSelf(&k) && r.TargetAllowed(k.AddrPort())
}

// TargetAllowed reports whether ap's address and port may be sent to or
// named to others as a next-hop or origin: a valid address with a nonzero
// port, on the public internet (lane.PublicAddr) or in a network the
// operator declared (Config.HintNets). HintAllowed adds that it is not
// this process.
func (r *Table) TargetAllowed(ap netip.AddrPort) bool {
	if !ap.IsValid() || ap.Port() == 0 {
		return false
	}
	a := ap.Addr().Unmap()
	if lane.PublicAddr(a) {
		return true
	}
	for _, p := range r.cfg.HintNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// IsSelf reports whether *k is a lane of this process: one added by
// AddSelf, or a loopback address with a port added by AddSelfPort. It
// takes no lock, and reads *k in place (a lane.Key copied whole stalls
// the loads after it: see relay's request).
func (r *Table) IsSelf(k *lane.Key) bool {
	keys := *r.selfKeys.Load()
	for i := range keys {
		if keys[i].IP == k.IP && keys[i].Port == k.Port {
			return true
		}
	}
	ports := *r.selfPorts.Load()
	return len(ports) > 0 && slices.Contains(ports, k.Port) && netip.AddrFrom16(k.IP).Unmap().IsLoopback()
}
