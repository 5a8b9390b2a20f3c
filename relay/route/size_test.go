package route

import (
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/urbit-relay/relay/lane"
)

// TestRouteMemoryBound fills a table to its cap and checks that what it
// holds per route stays within RouteBytes, the figure DefaultMaxRoutes'
// memory bound is computed from, and that filling it past its cap grows
// nothing.
func TestRouteMemoryBound(t *testing.T) {
	const n = 1 << 16
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	r, err := New(lane.ShipFromUint64(0x100), nil, Config{MaxRoutes: n, SourceDivisor: -1})
	if err != nil {
		t.Fatal(err)
	}
	fill := func(from, to int) {
		for i := from; i < to; i++ {
			k := lane.KeyOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), uint16(1000+i>>16)))
			r.Contacted(lane.ShipFromUint64(uint64(0x1_0000_0000+i)), k, time.Second)
		}
	}
	fill(0, n)
	full := heap()
	per := (full - before) / n
	t.Logf("%d bytes per route (struct %d), %d MiB at DefaultMaxRoutes", per, unsafe.Sizeof(route{}), per*DefaultMaxRoutes>>20)
	if per > RouteBytes {
		t.Errorf("%d bytes per route, more than RouteBytes (%d)", per, RouteBytes)
	}
	fill(n, 3*n)
	if r.Len() != n {
		t.Fatalf("%d routes, cap %d", r.Len(), n)
	}
	if grown := heap(); grown > full+full/20 {
		t.Errorf("filling past the cap grew the heap from %d to %d", full, grown)
	}
	runtime.KeepAlive(r)
}
