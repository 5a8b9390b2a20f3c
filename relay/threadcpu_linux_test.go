//go:build linux

package relay_test

import (
	"syscall"
	"time"
)

// threadCPU returns the calling thread's user and system CPU time
// (RUSAGE_THREAD), or 0 if it cannot be read.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(1, &ru) != nil { // RUSAGE_THREAD
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
