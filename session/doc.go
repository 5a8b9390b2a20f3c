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
// Memory is bounded by named caps (constants.go): MaxSessions per
// publisher, MaxPathsPerSubscriber per session, MaxWaits per publisher,
// MaxHeldLanes per held heartbeat, MaxDeadSessions per link.
package session
