package sim

import "runtime"

// Footprint builds the network cfg describes and returns the heap it holds
// once built (the bytes New allocated that are still live) and its number
// of relays. It collects garbage before and after, so the figure is only
// right while nothing else allocates: no other simulation may run.
func Footprint(cfg Config) (bytes int64, relays int, err error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := New(cfg)
	if err != nil {
		return 0, 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	for _, s := range n.ships {
		if s.Relay {
			relays++
		}
	}
	runtime.KeepAlive(n)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), relays, nil
}
