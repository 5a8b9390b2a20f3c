//go:build !amd64 && !arm64

package pit

import "unsafe"

// prefetch does nothing on architectures without an assembly hint here.
func prefetch(unsafe.Pointer) {}
