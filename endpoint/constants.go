package endpoint

import (
	"time"

	"github.com/urbit-relay/relay/scry"
)

// Every timing and cap of the endpoint, with its reason. The notification
// protocol's own timings (heartbeat hold and repeat, session and link
// timeouts) and caps are in package session.
const (
	// DefaultRetryInterval is how long a request waits for its response
	// before it is sent again. One second covers a round trip through a
	// full relay chain on the fast overlay preset (~65 ms a link) and a
	// direct one on the slow preset (~270 ms one way; a full chain there
	// takes about 2 s, so untightened requests are sent twice), and keeps
	// a lost packet's cost to about a second. A subscription's first
	// re-send waits this long too, and an unacked subscription then backs
	// off (see PollInterval).
	DefaultRetryInterval = time.Second

	// PollInterval is the longest a subscription waits between re-sends
	// while it is not acked: its interval starts at RetryInterval and
	// doubles up to this. Two minutes is UIP-0102's re-send backoff, so a
	// subscriber of a publisher that does not run the notification
	// protocol ends up polling it the way plain requesters do; the quick
	// first re-sends make a lost request or ack cost seconds, not minutes.
	PollInterval = 2 * time.Minute

	// DefaultPingInterval is how often an endpoint pokes its sponsor so
	// the sponsor's relay keeps its lane: the 25 s ships use today to keep
	// NAT bindings alive.
	DefaultPingInterval = 25 * time.Second

	// DefaultTick is the resolution of the endpoint's timers: the timer
	// goroutine sleeps until the Core's next deadline, but never less
	// than this, so a busy endpoint batches its timer work.
	DefaultTick = 50 * time.Millisecond

	// maxTimerSleep is the longest the timer goroutine sleeps when the
	// Core has nothing due; every call that adds work wakes it anyway.
	maxTimerSleep = time.Hour

	// MaxPending caps the requests and subscriptions an endpoint has in
	// flight together; Peek, Poke and Subscribe fail with
	// ErrTooManyRequests past it. Every other piece of a subscriber's
	// state (one link per publisher subscribed to) is bounded by it.
	MaxPending = 1 << 16

	// DefaultWindow is how many fragment requests a download keeps in
	// flight: with 1 KiB fragments, 32 KiB a round trip. It is the larger
	// window simnet's download experiment compares (docs/simulation.md:
	// a 2,000-fragment download through relays behind a NAT takes 14.9 s
	// with it, 7 min 45 s stop-and-wait).
	DefaultWindow = 32

	// MaxFragments is the most fragments a download takes: a first page
	// stating more is not believed (ErrBadValue). 1 << 16 fragments of
	// 1 KiB is 64 MiB, past which one buffer per download is the wrong
	// tool.
	MaxFragments = 1 << 16

	// MaxSubscribePath is the longest path Subscribe takes: the reserved
	// request that carries it must fit in a packet with the ack's copy.
	MaxSubscribePath = scry.MaxNotifyPath

	// pingPath prefixes the path of the keepalive poke's ack name; the
	// pinging ship's @p follows it.
	pingPath = "ping"
)

// MaxDatagram is the largest datagram an endpoint reads: a mesa packet is at
// most scry.MesaMaxPacket (1472) bytes, and the rest of the buffer keeps a
// larger datagram from being mistaken for a whole one.
const MaxDatagram = scry.MesaMaxPacket + 128

// Legacy ames (legacy.go).
const (
	// AmesMsgIDLen is the length of a legacy message's number, the start
	// of its content.
	AmesMsgIDLen = 8
	// amesAckLen is the length of a legacy ack's content: the message
	// number and 32 bytes standing for the encrypted rest, about the size
	// of an Arvo ack.
	amesAckLen = AmesMsgIDLen + 32
	// amesPingLen is the length of a legacy ping's content: message
	// number 0 and 8 bytes of filler.
	amesPingLen = AmesMsgIDLen + 8
	// recentIDCap is how many of its own message numbers a Legacy ship
	// remembers, so that a late ack of one is not taken for a message and
	// acked (two Legacy ships would ack each other's acks for ever).
	recentIDCap = 4096
)
