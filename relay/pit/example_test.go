package pit_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/pit"
)

func Example() {
	table, err := pit.New(pit.Config{}) // defaults: 1M entries, 30 s TTL
	if err != nil {
		panic(err)
	}
	alice := lane.KeyOf(netip.MustParseAddrPort("192.0.2.1:13337"))
	bob := lane.KeyOf(netip.MustParseAddrPort("198.51.100.7:31337"))
	const name = 0x5eed // the relay's seeded hash of the request name

	v, _ := table.Add(name, alice, 0)
	fmt.Println(v, v.Forward())
	v, _ = table.Add(name, bob, 100*time.Millisecond)
	fmt.Println(v, v.Forward())

	// The response arrives: send it to every requester.
	to, ok := table.Take(name, nil, 300*time.Millisecond)
	for _, l := range to {
		fmt.Println(ok, l.AddrPort())
	}
	// Output:
	// forward-new true
	// aggregated false
	// true 192.0.2.1:13337
	// true 198.51.100.7:31337
}
