//go:build lockcount

package relay_test

import (
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

// TestLocksPerDatagram counts the locks each datagram path takes (built
// with -tags lockcount: every Lock of this package's and of relay/amp's,
// and every call into the route or pending table, each of which takes
// one; the verifier's, with --pki, is not counted), and pins them to the
// figures of the package comment, "Acquisitions per datagram".
//
//	go test -tags lockcount -run TestLocksPerDatagram ./relay/
func TestLocksPerDatagram(t *testing.T) {
	f := newFixture(t, nil)
	carol := netip.MustParseAddrPort("198.18.7.7:6000")
	count := func(what string, pkt []byte, from netip.AddrPort, wantSends, want int) {
		t.Helper()
		before := relay.LocksTaken()
		sends := f.handle(pkt, from)
		got := int(relay.LocksTaken() - before)
		t.Logf("%-40s %d sends, %d locks", what, len(sends), got)
		if len(sends) != wantSends {
			t.Errorf("%s: %d sends, want %d", what, len(sends), wantSends)
		}
		if got != want {
			t.Errorf("%s: %d locks, want %d", what, got, want)
		}
	}
	// ~nec's lane is configured and it has no route: the commit would
	// change nothing and is skipped (route.Plan.Touches).
	count("a forwarded peek", peek(t, "~nec", "locks/path", 0), alice, 1, 2)
	count("its page, to one requester", page(t, "~nec", "locks/path", 0, netip.AddrPort{}), necLane, 1, 4)
	// Nothing has moved the route table's quiet epoch since: the plan
	// for ~nec is kept (route.Table.PlanFor), and its page's answer
	// taken from the Reader (Reader.quiet), each without the table's lock.
	count("another peek, its plan kept", peek(t, "~nec", "locks/kept", 0), alice, 1, 1)
	count("its page, the table's answer held", page(t, "~nec", "locks/kept", 0, netip.AddrPort{}), necLane, 1, 3)
	// carol's lane learned for ~sampel-palnet (a legacy packet it sent
	// to ~nec, forwarded to ~nec's configured lane).
	count("a legacy forward to a configured lane", legacy(t, "~sampel-palnet", "~nec", 50, 0), carol, 1, 2)
	count("a legacy forward to a learned lane", legacy(t, "~dapnep-ronmyl", "~sampel-palnet", 50, 0), alice, 1, 5)
	count("its duplicate from another lane", legacy(t, "~dapnep-ronmyl", "~sampel-palnet", 50, 0), bob, 0, 1)
	// ~sampel-palnet has a route (its lane learned): the commit records
	// the probe of its lane.
	count("a peek to a learned lane", peek(t, "~sampel-palnet", "locks/learned", 0), alice, 1, 3)
	count("a legacy packet with no route", legacy(t, "~dapnep-ronmyl", "~ripfed-waldet", 50, 0), alice, 0, 3)
	count("a peek, forwarded", peek(t, "~nec", "locks/two", 0), alice, 1, 2)
	count("the same peek from another, aggregated", peek(t, "~nec", "locks/two", 0), bob, 0, 1)
	count("its page, to two requesters", page(t, "~nec", "locks/two", 0, netip.AddrPort{}), necLane, 2, 6)
	stun := scry.STUNRequest{TxID: [12]byte{1}}
	count("a STUN request", stun.Append(nil), alice, 1, 3)
}
