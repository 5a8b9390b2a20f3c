// Package dissector holds the tests of the Wireshark dissector in
// docs/wireshark/urbit.lua; it has no code of its own.
//
// The tests run tshark with the dissector over every vector in testdata/
// (mesa, legacy ames, STUN) and every record of the replay fixtures, and
// check that each datagram dissects to the fields `relay decode --json`
// reports for it, named urbit.<protocol>.<key path>, plus the few fields
// the dissector adds (the @p of each ship, legacy header bits and ticks),
// which are checked against the scry and lane codecs. They skip when
// tshark is not installed, and fail instead when CI=true.
package dissector
