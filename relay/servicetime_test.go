package relay_test

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urbit-relay/relay/internal/hist"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/relay/transport/transporttest"
)

// steppingClock advances by step at every reading.
type steppingClock struct {
	step time.Duration
	now  atomic.Int64
}

func (c *steppingClock) Now() time.Duration { return time.Duration(c.now.Add(int64(c.step))) }

// TestServerServiceTime checks that the server records, per datagram read,
// the time from the read to the batch's last write.
func TestServerServiceTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := transporttest.NewMemNetwork()
		srvConn, err := mem.Listen(netip.MustParseAddrPort("10.0.0.1:1"))
		if err != nil {
			t.Fatal(err)
		}
		peer, err := mem.Listen(netip.MustParseAddrPort("10.0.0.2:1"))
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Close()
		r, err := relay.New(relay.Config{HintNets: loopbackNets, Ship: lane.ShipFromUint64(0), Self: []netip.AddrPort{srvConn.LocalAddr()}})
		if err != nil {
			t.Fatal(err)
		}
		srv := relay.NewServer(r, []transport.Conn{srvConn}, relay.ServerConfig{Clock: &steppingClock{step: 40 * time.Microsecond}})
		srv.Start()
		defer srv.Close()
		msgs := []transport.Message{
			{Buf: []byte("junk one"), N: 8, Addr: srvConn.LocalAddr()},
			{Buf: []byte("junk two"), N: 8, Addr: srvConn.LocalAddr()},
		}
		if _, err := peer.WriteBatch(msgs); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		_, read := srv.BatchStats()
		snap := srv.ServiceTimes().Snapshot(make([]uint64, hist.Buckets))
		var total uint64
		for _, c := range snap {
			total += c
		}
		if total != read || read != 2 {
			t.Fatalf("histogram holds %d datagrams, server read %d, want 2", total, read)
		}
		if got := hist.Quantile(snap, 1); got <= 40*time.Microsecond || got > 50*time.Microsecond {
			t.Errorf("service time bound %v, want just above 40µs (one clock step per batch)", got)
		}
	})
}
