package relay

import (
	"testing"
	"unsafe"
)

// TestCounterBlockPadded: a block's counts are a cache line clear of
// whatever is allocated beside it.
func TestCounterBlockPadded(t *testing.T) {
	var b counterBlock
	first := unsafe.Offsetof(b.in)
	last := unsafe.Offsetof(b.events) + unsafe.Sizeof(b.events)
	if first < cacheLine || unsafe.Sizeof(b)-last < cacheLine {
		t.Errorf("counts at %d..%d of %d bytes: not padded by a %d-byte line", first, last, unsafe.Sizeof(b), cacheLine)
	}
}
