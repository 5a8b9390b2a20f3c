package relay

import (
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// TestDecisionAllocs: deciding a datagram and returning its decision
// allocates nothing, so a debug log adds no garbage per datagram it
// explains.
func TestDecisionAllocs(t *testing.T) {
	r, err := New(Config{Ship: lane.ShipFromUint64(256), Self: []netip.AddrPort{netip.MustParseAddrPort("203.0.113.1:13337")}})
	if err != nil {
		t.Fatal(err)
	}
	out := r.NewReader(4)
	from := netip.MustParseAddrPort("203.0.113.10:5000")
	junk := make([]byte, 5, 5+GrowRoom)
	var d *Decision
	allocs := testing.AllocsPerRun(1000, func() {
		out.Reset()
		d = r.Handle(junk, from, 0, out)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per decided datagram", allocs)
	}
	if d.Action != ActionDropped || d.Reason != "malformed_ames" || d.From != from || d.Kind != KindOther || !d.decided {
		t.Errorf("decision %+v", d)
	}
}

// Decided reports whether an action was recorded for d (for FuzzDecide's
// invariant that every datagram has one).
func (d *Decision) Decided() bool { return d.decided }
