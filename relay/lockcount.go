//go:build !lockcount

package relay

// lockTaken marks a lock taken on a datagram's path: after a Lock of this
// package's, before a call into the route or pending table that takes
// theirs (each takes one). It is nothing unless built with -tags
// lockcount, when it counts (lockcount_on.go) for
// TestLocksPerDatagram, which pins the figures of the package comment
// ("Acquisitions per datagram").
func lockTaken() {}
