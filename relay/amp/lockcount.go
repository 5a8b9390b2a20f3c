//go:build !lockcount

package amp

// lockTaken marks a lock of the budget's taken: nothing unless built with
// -tags lockcount (lockcount_on.go), for relay's TestLocksPerDatagram.
func lockTaken() {}
