//go:build unix

package transport

import "syscall"

// msgTrunc is the read flag saying a datagram was longer than the buffer
// it was read into.
const msgTrunc = syscall.MSG_TRUNC
