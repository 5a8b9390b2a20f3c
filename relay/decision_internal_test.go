package relay

import (
	"net/netip"
	"testing"

	"github.com/urbit-relay/relay/lane"
)

// TestDecisionProbeAllocs: working out a datagram's decision for the debug
// log (a reader's probe around Handle) allocates nothing, so a debug log
// adds no garbage per datagram it explains.
func TestDecisionProbeAllocs(t *testing.T) {
	r, err := New(Config{Ship: lane.ShipFromUint64(256), Self: []netip.AddrPort{netip.MustParseAddrPort("203.0.113.1:13337")}})
	if err != nil {
		t.Fatal(err)
	}
	out := r.NewOut(4)
	from := netip.MustParseAddrPort("203.0.113.10:5000")
	junk := make([]byte, 5, 5+GrowRoom)
	var p decisionProbe
	var d *Decision
	allocs := testing.AllocsPerRun(1000, func() {
		out.Reset()
		p.start(out, false, from, len(junk))
		r.Handle(junk, from, 0, out)
		d = p.finish(out)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per explained datagram", allocs)
	}
	if d.Action != ActionDropped || d.Reason != "malformed_ames" || d.From != from || d.Kind != KindOther {
		t.Errorf("decision %+v", d)
	}
}
