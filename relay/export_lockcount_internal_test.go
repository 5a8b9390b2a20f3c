//go:build lockcount

package relay

import "github.com/urbit-relay/relay/relay/amp"

// LocksTaken returns how many locks the relay's datagram paths took since
// the process began: this package's, the route and pending tables' (one a
// call) and the amplification budget's (built with -tags lockcount only).
func LocksTaken() uint64 { return locksTaken.Load() + amp.LocksTaken() }
