// Package session holds the state machines of scry notifications
// (docs/protocol.md): session ids, heartbeats and liveness, on both sides.
// It carries no bytes of its own (the wire forms are in package scry,
// notify.go) and does no I/O: time is passed in, and every decision is
// returned to the caller, the endpoint Core, which encodes, signs and sends.
//
// A subscriber keeps one Link per publisher: the session id it believes
// in, the ids it has moved away from, when it last heard an authenticated
// answer (Alive, LinkTimeout), and its heartbeat stream, one heartbeat in
// flight at a time, re-sent every HeartbeatResend until answered.
//
// A publisher keeps one Publisher: a session per subscriber with the paths
// it waits for, the paths that have grown and not yet been delivered, and
// at most one held heartbeat. A heartbeat is a long poll: the publisher
// answers it at once if something has grown, holds it otherwise, and
// answers it when a path grows (Grow) or after HoldTime, which is shorter
// than a relay's pending-entry lifetime so that the answer still finds the
// relays' entries for the heartbeat's name. The answer to heartbeat n is
// kept until heartbeat n+1 arrives, so a lost answer is sent again when the
// subscriber repeats n: a notification lost on the wire is recovered
// within HeartbeatResend. A session unheard for SessionTimeout is freed with
// everything it holds; a heartbeat on an unknown session is answered at
// once with a new session id, which tells the subscriber to subscribe again.
//
// Heartbeat counters. On a live session the publisher takes a heartbeat
// with a counter above the newest it has heard as new (whatever the gap),
// answers a repeat of the newest, and ignores a lower one. Heartbeat names
// are not secret (a relay on the path sees them), so the rule keeps a
// replayed old heartbeat from displacing a live subscriber's held one or
// from dropping an answer it has not received. A subscriber that restarts
// within SessionTimeout is acked on its previous run's session, which the
// publisher still holds; its heartbeats are taken only because every link
// starts its counter above every counter the subscriber sent before
// (NewLink; the endpoint starts it at the wall clock in nanoseconds, and a
// link sends far fewer than one heartbeat a nanosecond). The restarted
// run's first heartbeat then replaces the one its previous run left held,
// and replays of the previous run's heartbeats are stale. The publisher is
// not told of the restart and needs no rule for it: accepting a lower
// counter as a resync would let anyone who saw an old heartbeat's name
// drop the live subscriber's held heartbeat.
//
// Memory is bounded by named caps (constants.go): MaxSessions per
// publisher, MaxPathsPerSubscriber per session, MaxWaits per publisher,
// MaxHeldLanes per held heartbeat, MaxDeadSessions per link.
package session
