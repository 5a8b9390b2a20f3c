// Package interop holds tests of the relay in front of vere's real network
// drivers: the `relay run` binary built from this module, with the vtool
// harness of ../shared/vere (urbit/vere's io/mesa.c and io/ames.c, unmodified,
// under a stub arvo) as the fronted ship, all on 127.0.0.1. It has no API.
//
// The tests skip where ../shared/vere is absent (a fresh clone) or vtool
// cannot run (see internal/harness/vtool); the vectors come from
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
//     The relay runs in a namespace WORLD on 10.88.0.1:13338, the outside
//     parties in OUTSIDE on 10.88.0.3 and up (a veth pair between them),
//     vere in the relay's ship namespace. vere reads
//     outside requests and pings from their true lanes and answers those
//     lanes; its own peeks leave from the relay's public lane; the relay
//     answers a planet's STUN for vere, which sees none; nothing the outside
//     receives names a loopback or the ship's link-local address; and
//     relay_from_ship_total counts vere's sends; a sponsee on the operator's
//     LAN (outside --hint-net) is acked; vere's datagrams to the relay host's
//     own addresses are refused unless declared (--front-host-lane). The
//     relays run unprivileged (relay front setup --user nobody -- relay run).
//     It needs root and iproute2 and skips without them.
//   - TestFrontedStarSTUN, TestFrontedPlanet: a fronted star's and a fronted
//     planet's own STUN toward their galaxy (vere's drivers, unfronted) is
//     answered with the relay's public lane; the planet's pings reach its
//     sponsor from that lane and are acked; a peek for the planet, at its
//     public lane or through its galaxy, is answered by its vere.
//   - TestFrontedVereFromFDStore: fronting mode as relay-front.service runs
//     it: relay front setup stores the device in a (test-played) systemd
//     file descriptor store, and an unprivileged relay started from it, then
//     SIGKILLed and started again, serves vere, which never notices.
//   - TestFrontNamespaceTrap: under ip netns exec, relay front setup, relay
//     run and relay check refuse to make a namespace the host could not see.
package interop
