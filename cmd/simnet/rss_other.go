//go:build !linux

package main

// peakRSS returns 0: the process's peak resident set size is read on Linux
// only.
func peakRSS() int64 { return 0 }
