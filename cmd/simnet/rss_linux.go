package main

import "syscall"

// peakRSS returns the process's peak resident set size in bytes, 0 if it
// cannot tell.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss << 10 // kilobytes on Linux
}
