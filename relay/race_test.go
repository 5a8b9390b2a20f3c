//go:build race

package relay_test

// raceEnabled scales down the load tests, whose per-packet work the race
// detector slows tenfold; their properties do not depend on the volume.
const raceEnabled = true
