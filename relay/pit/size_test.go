package pit

import (
	"testing"
	"unsafe"
)

// TestLayoutSizes pins the slab element sizes the package comment and the
// memory budget rely on.
func TestLayoutSizes(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got != 56 {
		t.Errorf("entry is %d bytes, want 56", got)
	}
	if got := unsafe.Sizeof(chunk{}); got != 64 {
		t.Errorf("chunk is %d bytes, want 64", got)
	}
}
