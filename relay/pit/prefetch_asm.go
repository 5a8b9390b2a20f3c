//go:build amd64 || arm64

package pit

import "unsafe"

// prefetch hints that the cache line holding addr will be read soon
// (PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64). It never faults, blocks
// or reads memory in the Go memory model's sense.
//
//go:noescape
func prefetch(addr unsafe.Pointer)
