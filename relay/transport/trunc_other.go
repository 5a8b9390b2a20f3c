//go:build !unix

package transport

// msgTrunc is zero where the platform reports no truncation flag: the
// portable Conn then leaves Message.Trunc false, and the length
// convention of the package comment still catches a truncated datagram.
const msgTrunc = 0
