package relay_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// TestMassMoveFollowedWithinAPing is issue 30's mass move: 100 planets
// under the relay's star sit behind one NAT, each pinging its sponsor every
// 25 s (phases spread over the interval) and answering every peek at its
// current lane; alice peeks each once a second. The NAT gateway restarts:
// every ship's public port changes at once. The fronted ship acks nothing
// here (its lane is a discard port), so no ack vouches for a new lane: the
// relay has only the ships' own pings. Each ship must be reached at its new
// lane from its first ping after the restart (a ship's ping interval at
// most), losing no peek after that ping.
func TestMassMoveFollowedWithinAPing(t *testing.T) {
	const (
		ships    = 1000
		ping     = 25 * time.Second
		step     = 100 * time.Millisecond
		restart  = 60 * time.Second
		end      = restart + 2*ping + 10*time.Second
		peekGap  = time.Second
		slack    = 2 * time.Second // the first peeks after a ping: the new lane's probe
		natAddr  = "203.0.113.77"
		oldPorts = 10000
		newPorts = 20000
	)
	f := laneFixture(t)
	marzod := ship(t, "~marzod")
	type nat struct {
		s        lane.Ship
		phase    time.Duration
		pings    int
		firstNew time.Duration // its first ping after the restart
		reached  time.Duration // the first peek after the restart that reached it
		lost     int           // peeks after its first new ping that missed it
	}
	ns := make([]*nat, ships)
	for i := range ns {
		ns[i] = &nat{s: lane.Ship{Lo: uint64(10+i)<<16 | 0x0100}, phase: time.Duration(i) * ping / ships, firstNew: -1, reached: -1}
	}
	laneOf := func(i int, now time.Duration) netip.AddrPort {
		port := oldPorts
		if now >= restart {
			port = newPorts
		}
		return netip.AddrPortFrom(netip.MustParseAddr(natAddr), uint16(port+i))
	}
	start := f.now
	for t0 := time.Duration(0); t0 < end; t0 += step {
		f.now = start + t0
		for i, n := range ns {
			if t0 >= n.phase && (t0-n.phase)%ping < step {
				f.handle(pokeFrom(n.s, marzod, fmt.Sprintf("ping/%d/%d", i, n.pings)), laneOf(i, t0))
				n.pings++
				if t0 >= restart && n.firstNew < 0 {
					n.firstNew = t0
				}
			}
			if (t0+time.Duration(i)*peekGap/ships)%peekGap >= step {
				continue
			}
			path := fmt.Sprintf("v/%d/%d", i, t0/step)
			cur := laneOf(i, t0)
			got := sentTo(f.handle(peekOf(n.s, path), alice), cur) > 0
			if got {
				f.handle(pageOf(t, n.s, path), cur)
			}
			if t0 >= restart {
				if got && n.reached < 0 {
					n.reached = t0
				}
				if !got && n.firstNew >= 0 && t0 >= n.firstNew+slack {
					n.lost++
				}
			}
		}
	}
	worst, lost := time.Duration(0), 0
	for i, n := range ns {
		if n.reached < 0 {
			t.Errorf("ship %d never reached at its new lane", i)
			continue
		}
		worst = max(worst, n.reached-restart)
		lost += n.lost
		if n.reached > n.firstNew+slack {
			t.Errorf("ship %d: first ping from the new lane %v after the restart, first reached %v after", i, n.firstNew-restart, n.reached-restart)
		}
	}
	t.Logf("%d ships behind one NAT, restarted: reached at their new lanes at most %v after the restart (ping interval %v); %d peeks lost after a ship's first new ping",
		ships, worst, ping, lost)
	if worst > ping+slack {
		t.Errorf("a ship was reached %v after the restart; want at most its ping interval %v", worst, ping)
	}
	if lost != 0 {
		t.Errorf("%d peeks missed a ship after its first ping from the new lane", lost)
	}
}
