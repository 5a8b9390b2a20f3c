//go:build lockcount

package amp

import "sync/atomic"

// locksTaken counts lockTaken's marks (lockcount.go).
var locksTaken atomic.Uint64

func lockTaken() { locksTaken.Add(1) }

// LocksTaken returns how many of the budget's locks were taken since the
// process began (built with -tags lockcount only).
func LocksTaken() uint64 { return locksTaken.Load() }
