package front

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// hostRoutes answers whether an address is the relay host's own as its
// kernel routes it: a route lookup (RTM_GETROUTE, `ip route get`) in the
// relay's network namespace whose answer is delivered on the host
// (RTN_LOCAL, and RTN_BROADCAST and RTN_ANYCAST, which are delivered there
// too). That covers what a list of interface addresses misses: a local
// route with no address behind it (AnyIP, `ip route add local
// 198.51.100.0/24 dev lo`, as anycast set-ups use), which the host answers
// on every address of, a 0.0.0.0 listener included (issue 28).
//
// The answers are cached, at most hostRoutesCacheSize, each for at most
// hostRoutesTTL, and the whole cache is dropped whenever the kernel
// reports a route added or removed in its local table (addresses and
// local routes both make such routes), so a newly local address is
// refused from the next datagram on. The per-datagram cost is a map
// lookup under a mutex; a miss costs one netlink round trip (tens of
// microseconds), at most once per destination per hostRoutesTTL while
// routes do not change.
//
// Lookups and the cache are safe from any goroutine.
type hostRoutes struct {
	// Static after construction.
	lookup func(netip.Addr) (bool, error) // the kernel's answer
	now    func() time.Time
	h      *netlink.Handle // nil with a lookup of a test's
	done   chan struct{}   // closed by close: ends the subscription
	ended  chan struct{}   // closed when the subscription's reader has ended; nil without one

	mu    sync.Mutex
	cache map[netip.Addr]hostRoute // guarded by mu
	gen   uint64                   // guarded by mu: flushes so far; an answer asked before one is not kept
}

// hostRoute is one cached answer.
type hostRoute struct {
	local bool
	at    time.Time
}

// newHostRoutes asks the kernel of network namespace ns (netns.None():
// the calling thread's) what is local, and follows its route changes.
func newHostRoutes(ns netns.NsHandle) (*hostRoutes, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("front: host routes: netlink: %w", err)
	}
	r := newHostRoutesWith(func(a netip.Addr) (bool, error) { return routeIsLocal(h, a) }, time.Now)
	r.h = h
	updates := make(chan netlink.RouteUpdate, hostRoutesUpdates)
	opts := netlink.RouteSubscribeOptions{
		Namespace:     &ns,
		ErrorCallback: func(error) { r.flush() },
	}
	if err := netlink.RouteSubscribeWithOptions(updates, r.done, opts); err != nil {
		h.Close()
		return nil, fmt.Errorf("front: host routes: subscribe to route changes: %w", err)
	}
	r.ended = make(chan struct{})
	go func() {
		defer close(r.ended)
		for u := range updates {
			if u.Table == unix.RT_TABLE_LOCAL || deliveredHere(u.Route.Type) {
				r.flush()
			}
		}
	}()
	return r, nil
}

// newHostRoutesWith caches lookup's answers (for tests, and the kernel's
// in newHostRoutes).
func newHostRoutesWith(lookup func(netip.Addr) (bool, error), now func() time.Time) *hostRoutes {
	return &hostRoutes{
		lookup: lookup,
		now:    now,
		done:   make(chan struct{}),
		cache:  make(map[netip.Addr]hostRoute),
	}
}

// routeIsLocal asks h's kernel how it would route a datagram to a.
func routeIsLocal(h *netlink.Handle, a netip.Addr) (bool, error) {
	routes, err := h.RouteGet(a.AsSlice())
	switch {
	case errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH):
		return false, nil // no route: not the host, and not sendable either
	case err != nil:
		return false, err
	}
	for _, rt := range routes {
		if deliveredHere(rt.Type) {
			return true, nil
		}
	}
	return false, nil
}

// deliveredHere reports whether a route of type t delivers to the host
// itself.
func deliveredHere(t int) bool {
	return t == unix.RTN_LOCAL || t == unix.RTN_BROADCAST || t == unix.RTN_ANYCAST
}

// local reports whether the kernel delivers a datagram to a on this
// host. A failed lookup answers false (the address lists of
// Conn.SetHostAddrs still apply) and is not cached.
func (r *hostRoutes) local(a netip.Addr) bool {
	now := r.now()
	r.mu.Lock()
	e, ok := r.cache[a]
	gen := r.gen
	r.mu.Unlock()
	if ok && now.Sub(e.at) < hostRoutesTTL {
		return e.local
	}
	local, err := r.lookup(a)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen {
		return local // the routes changed meanwhile: answer, but do not keep it
	}
	if _, ok := r.cache[a]; !ok && len(r.cache) >= hostRoutesCacheSize {
		for k := range r.cache { // any one: the map's order is random
			delete(r.cache, k)
			break
		}
	}
	r.cache[a] = hostRoute{local: local, at: now}
	return local
}

// flush drops every cached answer.
func (r *hostRoutes) flush() {
	r.mu.Lock()
	clear(r.cache)
	r.gen++
	r.mu.Unlock()
}

// close ends the subscription and closes the netlink handle; idempotent
// only through Conn.Close's once.
func (r *hostRoutes) close() {
	close(r.done)
	if r.ended != nil {
		<-r.ended
	}
	if r.h != nil {
		r.h.Close()
	}
}
