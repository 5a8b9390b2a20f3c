package session

import (
	"time"
)

// Every timing and cap of the notification protocol, with its reason. The
// relay's own figures they are measured against are in package relay and
// package pit: a pending entry lives DefaultTTL (30 s) after the last
// request for its name, and a subscriber sends on at most relay/route.MaxTargets
// (2) lanes at once.
const (
	// HoldTime is how long a publisher holds a heartbeat it has nothing to
	// answer with before answering it empty. The answer must reach the
	// subscriber along the relays' pending entries for the heartbeat's
	// name, which live 30 s after the subscriber sent it; 20 s leaves 10 s
	// for the request's and the answer's trips through the relay chain
	// (the seed puts the slow path near 270 ms one way). Holding long
	// keeps idle traffic low: one heartbeat exchange per HoldTime.
	HoldTime = 20 * time.Second

	// HeartbeatResend is how long a subscriber waits for the answer to a
	// heartbeat before sending it again (the same name, so the relays'
	// entries are bumped and the publisher recognises a repeat). It is
	// HoldTime plus 5 s for the round trip, so a held heartbeat is
	// answered before it is re-sent; a lost request, a lost answer or a
	// lost notification costs at most this much.
	HeartbeatResend = HoldTime + 5*time.Second

	// SessionTimeout is how long a publisher keeps a subscriber's session
	// without hearing a heartbeat or a subscription request from it; then
	// it frees the session and the subscriber's pending requests. The
	// seed's "about a minute": with heartbeats every HoldTime and repeats
	// every HeartbeatResend it survives two lost heartbeats in a row.
	SessionTimeout = 60 * time.Second

	// LinkTimeout is how long a subscriber goes without an authenticated
	// ack or heartbeat response from a publisher before it considers the
	// link dead (the seed's minute). It keeps heartbeating, and polls its
	// subscriptions again until the publisher is heard.
	LinkTimeout = 60 * time.Second

	// MaxSessions caps the subscribers one publisher keeps sessions for.
	// A session costs about 300 bytes plus its paths; 65,536 of them stay
	// near 20 MB. Past the cap new subscribers are not acked (they keep
	// polling, which any publisher answers) until a session expires.
	MaxSessions = 1 << 16

	// MaxPathsPerSubscriber caps the subscribed paths a publisher keeps
	// for one subscriber, waiting or grown but not yet delivered. Past it
	// the publisher acks with status refused and the subscriber polls that
	// path instead. 256 paths of at most scry.MaxNotifyPath bytes bound a
	// session near 100 KB.
	MaxPathsPerSubscriber = 256

	// MaxWaits caps the (subscriber, path) subscriptions one publisher
	// keeps across all sessions: about 100 bytes each, so 1<<20 stay near
	// 100 MB however the subscriptions are spread over subscribers.
	MaxWaits = 1 << 20

	// MaxHeldLanes is how many lanes a held heartbeat is answered on: a
	// subscriber sends each request on at most two lanes (the tightest
	// known-good route and the one just tighter), and the answer goes back
	// on each lane a copy came from.
	MaxHeldLanes = 2

	// MaxDeadSessions is how many session ids a subscriber remembers per
	// publisher after moving to a newer one, so that a late ack or answer
	// carrying an old id cannot move it back.
	MaxDeadSessions = 4
)
