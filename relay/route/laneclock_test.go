package route

import (
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// TestLaneClockSpreadsASubnet: the lanes of one /24 and a few ports land in
// distinct slots nearly always (a weak hash once put them all in one).
func TestLaneClockSpreadsASubnet(t *testing.T) {
	c := newLaneClock(DefaultLaneClockSlots, 0x5eed)
	used := map[uint64]bool{}
	n := 0
	for host := 0; host < 256; host++ {
		for _, port := range []uint16{5000, 8000, 13337, 40000} {
			k := lane.KeyOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(host)}), port))
			used[c.laneHash(&k)&c.mask] = true
			n++
		}
	}
	if len(used) < n*97/100 { // about 8 collisions expected at random
		t.Fatalf("%d lanes in %d slots", n, len(used))
	}
}

// TestLaneClock: a lane heard is known from then on; a lane never heard,
// or heard before the time asked, is not.
func TestLaneClock(t *testing.T) {
	c := newLaneClock(64, 1)
	a := lane.KeyOf(netip.MustParseAddrPort("203.0.113.1:1"))
	b := lane.KeyOf(netip.MustParseAddrPort("203.0.113.2:1"))
	c.hear(&a, 10)
	c.hear(&a, 5) // an older reading never moves it back
	if !c.heardSince(&a, 10) || c.heardSince(&a, 11) || c.heardSince(&b, 0) {
		t.Fatalf("heardSince wrong: %v %v %v", c.heardSince(&a, 10), c.heardSince(&a, 11), c.heardSince(&b, 0))
	}
	if n := testing.AllocsPerRun(100, func() { c.hear(&b, 20) }); n != 0 {
		t.Fatalf("hear allocates %v", n)
	}
}
