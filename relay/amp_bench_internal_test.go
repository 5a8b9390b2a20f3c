package relay

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// The amplification table's cost per call, which every request and every
// page pays: no allocation, and readers on different sockets do not queue
// on one lock (the table is striped, amp.go).

// ampKey returns the lane key of the i'th test address: IPv4-mapped,
// counting up from 198.18.0.0.
func ampKey(i uint32) lane.Key {
	var k lane.Key
	k.IP[10], k.IP[11] = 0xff, 0xff
	binary.BigEndian.PutUint32(k.IP[12:], 0xc6120000+i)
	return k
}

func newTestAmp(t testing.TB, cfg AmpConfig) *ampTable {
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
	a := newTestAmp(t, AmpConfig{})
	k := ampKey(1)
	now := time.Second
	if n := testing.AllocsPerRun(1000, func() {
		now += time.Millisecond
		a.credit(k, 60, now)
		a.spend(k, 500, now)
	}); n != 0 {
		t.Fatalf("%v allocations per credit and spend", n)
	}
}

// BenchmarkAmpParallelWithin is BenchmarkAmpParallel with every spend
// inside both budgets (400 bytes of page per 60-byte request), the
// honest case: one credit and one spend, each on an address and a
// network, and no refund.
func BenchmarkAmpParallelWithin(b *testing.B) { benchAmp(b, 400) }

// BenchmarkAmpParallel is the relay's readers, one per socket, each
// crediting a request and spending its page for addresses of its own.
func BenchmarkAmpParallel(b *testing.B) { benchAmp(b, 500) }

// benchAmp runs readers each crediting 60-byte requests and spending
// pages of `page` bytes for 1,024 addresses of their own.
func benchAmp(b *testing.B, page int) {
	a := newTestAmp(b, AmpConfig{})
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
			a.credit(k, 60, now)
			a.spend(k, page, now)
		}
	})
}
