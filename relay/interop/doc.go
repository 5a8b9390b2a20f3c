// Package interop holds tests of the relay in front of vere's real network
// drivers: the `relay run` binary built from this module, with the vtool
// harness of ../shared/vere (urbit/vere's io/mesa.c and io/ames.c, unmodified,
// under a stub arvo) as the fronted ship, all on 127.0.0.1. It has no API.
//
// The tests skip where ../shared/vere is absent (a fresh clone) or vtool
// cannot run (see internal/vtool); the vectors come from
// ../shared/reference/{ames,mesa}/*.jsonl and their tests skip without them.
//
// What the tests show:
//
//   - TestVereCrashesOnShortRelayedAmes: vere itself aborts on a legacy ames
//     datagram of 4-9 bytes with the relayed bit set (ames-malformed.jsonl ids
//     10, 15, 20), sent straight to it. It is why the relay must drop them.
//     Sent every vector straight, vere dies of those and, now and then, of a
//     mesa packet of the reserved type 0 (mesa-quirks.jsonl type-resv-empty),
//     which it handles as a poke it never parsed; the relay must drop those
//     too (it does: drop reason reserved_type).
//   - TestVectorsNeverCrashFrontedVere: every reference vector sent to a relay
//     fronting vere leaves vere alive and answering; each vector that kills it
//     is named.
//   - TestVereShipBehindRelayAnswersPeek: a peek through the relay is answered
//     by vere, and vere attributes every request it hears through the relay to
//     the relay's lane, not the requester's: the limit of --ship-lane mode.
//   - TestFrontedVere: fronting mode (--front-netns), which lifts that limit.
//     The relay runs in a namespace WORLD on 10.88.0.1:13338 with the outside
//     parties on 10.88.0.2-9, vere in the relay's ship namespace. vere reads
//     outside requests and pings from their true lanes and answers those
//     lanes; its own peeks leave from the relay's public lane; the relay
//     answers a planet's STUN for vere, which sees none; nothing the outside
//     receives names a loopback or the ship's link-local address; and
//     relay_from_ship_total counts vere's sends. It needs root and iproute2
//     and skips without them.
package interop
