//go:build !linux

package relay_test

import "time"

// threadCPU is not measured here.
func threadCPU() time.Duration { return 0 }
