// Package netnstest tests the relay over real networks between hosts, and
// holds its soak. It has no API: everything is in its tests.
//
// # Hosts
//
// Each test builds its own hosts out of Linux network namespaces: a switch
// namespace holding a bridge, and one namespace per host joined to the bridge
// by a veth pair, all on 10.77.0.0/24 (a private range that exists only
// inside the test's namespaces; nothing is routed to the outside). A NAT
// router host has a second veth into a private 192.168.77.0/24 behind it.
// Namespace names carry the test process's PID, so concurrent runs do not
// collide, and every namespace and process is removed by t.Cleanup, also when
// a test fails. The tests need root, iproute2 (`ip`) and nftables (`nft`);
// without them they skip and say why (NETNSTEST_REQUIRE=1 turns the skip into
// a failure, for CI machines that must run them).
//
// # Processes
//
// Relays are the real binary, built from ./cmd/relay by the test and run with
// `ip netns exec`. Endpoints (requesters and publishers) are the test binary
// itself, re-executed with NETNSTEST_ENDPOINT set to a JSON endpointSpec:
// TestMain then runs an endpoint.Endpoint on a real UDP socket instead of the
// tests. The endpoint process speaks JSON lines: it reads commands on stdin,
// one object per line,
//
//	{"id":1,"op":"peek","ship":"~dapnep-sipsyl","path":"v/3","timeout":15000000000}
//	{"id":2,"op":"routes","ship":"~dapnep-sipsyl"}
//
// and writes reports on stdout, one object per line, "ev" saying which:
//
//	{"ev":"ready","addr":"10.77.0.10:31337"}
//	{"ev":"send","ship":"~dapnep-sipsyl","path":"v/3","targets":["10.77.0.1:13337"],"try":1}
//	{"ev":"page","ship":"~dapnep-sipsyl","path":"v/3","from":"10.77.0.1:13337","next":"10.77.0.2:13337","hops":2,"fresh":true}
//	{"ev":"result","id":1,"path":"v/3","ok":true,"data":"...","tries":1,"from":"...","next":"...","hops":2,"ms":4.1}
//	{"ev":"routes","id":2,"ship":"~dapnep-sipsyl","direct":"...","hint":"...","base":"..."}
//
// "send" and "page" come from endpoint.Config.Observe, so the tests see every
// lane the requester chose. Closing stdin stops the process.
//
// # Soak
//
// TestSoak (run only with SOAK=1) drives a -race build of the relay with
// generated traffic for SOAK_DURATION and samples its resident memory,
// goroutines and file descriptors; see docs/reliability.md.
package netnstest
