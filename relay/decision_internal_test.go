package relay

import (
	"net/netip"
	"reflect"
	"testing"
	"unsafe"

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

// TestBeginClearsEveryField: begin, which sets a Decision's fields one by
// one rather than assigning a literal, leaves after any earlier decision
// exactly what the literal would (with finish's Sends, Ports and ToShip):
// every field is set non-zero by reflection first, so a field added to
// Decision and not cleared by begin fails here.
func TestBeginClearsEveryField(t *testing.T) {
	out := NewReader(4)
	out.add([]byte{1}, netip.MustParseAddrPort("203.0.113.9:9"))
	addr := netip.MustParseAddrPort("203.0.113.10:5000")
	for _, fromShip := range []bool{false, true} {
		v := reflect.ValueOf(&out.d).Elem()
		for i := range v.NumField() {
			f := v.Field(i)
			f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			switch f.Kind() {
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Int:
				f.SetInt(7)
			case reflect.Uint8:
				f.SetUint(3)
			case reflect.String:
				f.SetString("stale")
			case reflect.Slice:
				f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			case reflect.Struct:
				f.Set(reflect.ValueOf(netip.MustParseAddrPort("198.51.100.1:1")))
			default:
				t.Fatalf("field %s of kind %s: teach this test to set it", v.Type().Field(i).Name, f.Kind())
			}
		}
		out.begin(fromShip, addr, 99)
		got := *out.finish()
		want := Decision{FromShip: fromShip, Len: 99, Kind: KindOther, sends0: 1, ships0: 0,
			Sends: out.Sends[1:1:1], Ports: out.Ports[1:1:1]}
		if fromShip {
			want.To = addr
		} else {
			want.From = addr
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("fromShip %v: begin left %+v, want %+v", fromShip, got, want)
		}
	}
}
