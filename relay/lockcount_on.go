//go:build lockcount

package relay

import "sync/atomic"

// locksTaken counts lockTaken's marks (lockcount.go).
var locksTaken atomic.Uint64

func lockTaken() { locksTaken.Add(1) }
