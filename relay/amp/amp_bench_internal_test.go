package amp

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// The amplification table's cost per call, which every page pays: no
// allocation, and readers on different sockets do not queue on one lock
// (the table is striped, amp.go).

// ampKey returns the lane key of the i'th test address: IPv4-mapped,
// counting up from 198.18.0.0.
func ampKey(i uint32) lane.Key {
	var k lane.Key
	k.IP[10], k.IP[11] = 0xff, 0xff
	binary.BigEndian.PutUint32(k.IP[12:], 0xc6120000+i)
	k.Port = 4444
	return k
}

func newTestAmp(t testing.TB, cfg Config) *Budget {
	t.Helper()
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	a, err := newAmpTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAmpZeroAllocs(t *testing.T) {
	a := newTestAmp(t, Config{})
	k := ampKey(1)
	now := time.Second
	if n := testing.AllocsPerRun(1000, func() {
		now += time.Millisecond
		a.Spend(k, 500, now)
	}); n != 0 {
		t.Fatalf("%v allocations per spend", n)
	}
	// Probing and proving allocate nothing either.
	if n := testing.AllocsPerRun(100, func() {
		now += 2 * DefaultProbeInterval
		if tx, ok := a.Probe(k, now); ok {
			a.Answer(k, tx, now)
		}
		a.Spend(k, 500, now)
	}); n != 0 {
		t.Fatalf("%v allocations per probe, answer and proven spend", n)
	}
}

// BenchmarkAmpParallel is the relay's readers, one per socket, each
// spending pages for 1,024 addresses of their own: one spend on an
// address and a network per page.
func BenchmarkAmpParallel(b *testing.B) { benchAmp(b, 500) }

// benchAmp runs readers each spending pages of `page` bytes for 1,024
// addresses of their own.
func benchAmp(b *testing.B, page int) {
	a := newTestAmp(b, Config{})
	var next atomic.Uint32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		base := next.Add(1) << 12
		var i uint32
		now := time.Second
		for pb.Next() {
			k := ampKey(base + i&1023)
			i++
			now += time.Microsecond
			a.Spend(k, page, now)
		}
	})
}

// BenchmarkAmpSpend is one reader's spend per page, by path: "unproven"
// spends from the address's and the network's buckets, which never run
// out (as in the relay's BenchmarkDecide, but probing on); "proven" is a lane that answered the relay's probe,
// as vere's requesters are once busy (cmd/bench); "proven-nat" is 16
// proven lanes of one address (ships behind one NAT, or cmd/bench's
// requesters on one host). The clock moves on every 32 spends, as a
// reader's batch of datagrams shares one reading (relay.Server).
func BenchmarkAmpSpend(b *testing.B) {
	for _, c := range []struct {
		name   string
		lanes  int
		sameIP bool
		proven bool
	}{
		{"unproven", 1024, false, false},
		{"proven", 1024, false, true},
		{"proven-nat", 16, true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			a := newTestAmp(b, Config{Rate: MaxRate, Burst: MaxBurst, NetRate: MaxRate, NetBurst: MaxBurst})
			now := time.Second
			// Lanes proven, if c.proven: a lane whose ways other
			// lanes' proofs all hold (about one run in thirty of 1,024
			// lanes) is left out.
			var keys []lane.Key
			for j := 0; len(keys) < c.lanes; j++ {
				k := ampKey(uint32(j))
				if c.sameIP {
					k = ampKey(0)
					k.Port = uint16(4000 + j)
				}
				if c.proven {
					if tx, ok := a.Probe(k, now); !ok || !a.Answer(k, tx, now) {
						continue
					}
				}
				keys = append(keys, k)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%32 == 0 {
					now += 32 * time.Microsecond
				}
				a.Spend(keys[i&(c.lanes-1)], 500, now)
			}
		})
	}
}
