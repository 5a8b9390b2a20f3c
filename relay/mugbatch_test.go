package relay_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/urbit-relay/relay/relay"
)

// TestMugBatchDecidesAsParse: a batch hashed ahead (Reader.MugBatch) is
// decided exactly as the same datagrams hashed whole, for requests, pages
// (whose next-hop edit resumes from the prefix), a page with a bad mug and
// legacy packets among them; and the hashing allocates nothing.
func TestMugBatchDecidesAsParse(t *testing.T) {
	var batch [][]byte
	for i := 0; i < 6; i++ {
		path := fmt.Sprintf("mug/%d", i)
		batch = append(batch, peekOf(sponsee, path), pageValue(sponsee, path, string(bytes.Repeat([]byte{byte(i)}, 100+300*i))))
	}
	bad := pageValue(sponsee, "mug/0", "x")
	bad[len(bad)-1] ^= 1 // the mug no longer matches
	batch = append(batch, bad, legacy(t, "~dapnep-ronmyl", "~nec", 200, 1), []byte{1, 2, 3})
	run := func(ahead bool) (out []string) {
		f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane })
		f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "ping"), sponseeLn)
		bufs := make([][]byte, len(batch))
		for i, b := range batch {
			bufs[i] = append(make([]byte, 0, len(b)+relay.GrowRoom), b...)
		}
		f.out.Reset()
		if ahead {
			f.out.MugBatch(bufs)
		}
		for i, b := range bufs {
			from := alice
			if i%2 == 1 && i < 12 {
				from = sponseeLn
			}
			d := f.r.Handle(b, from, f.now, f.out)
			out = append(out, fmt.Sprintf("%v/%v", d.Action, d.Reason))
		}
		for _, m := range f.out.Sends {
			out = append(out, fmt.Sprintf("%v %x", m.Addr, m.Buf[:m.N]))
		}
		return out
	}
	whole, ahead := run(false), run(true)
	if len(whole) != len(ahead) {
		t.Fatalf("%d decisions and sends hashed whole, %d hashed ahead", len(whole), len(ahead))
	}
	for i := range whole {
		if whole[i] != ahead[i] {
			t.Errorf("%d: hashed whole %q, hashed ahead %q", i, whole[i], ahead[i])
		}
	}
	// A prefix belongs to the bytes it was computed from: another buffer
	// of the same length, changed within the hashed part, is hashed whole
	// and dropped for its mug, not passed on the batch's prefix.
	g := newFixture(t, nil)
	orig := append(make([]byte, 0, 64+relay.GrowRoom), batch[0]...)
	forged := append(make([]byte, 0, 64+relay.GrowRoom), batch[0]...)
	forged[len(forged)-5] ^= 0x40
	g.out.Reset()
	g.out.MugBatch([][]byte{orig})
	if d := g.r.Handle(forged, alice, g.now, g.out); d.Reason != relay.DropMalformedMesa.String() {
		t.Errorf("a changed copy decided on the batch's prefix: %v/%v", d.Action, d.Reason)
	}
	f := newFixture(t, nil)
	bufs := make([][]byte, 0, len(batch))
	for _, b := range batch {
		bufs = append(bufs, append(make([]byte, 0, len(b)+relay.GrowRoom), b...))
	}
	if n := testing.AllocsPerRun(100, func() { f.out.Reset(); f.out.MugBatch(bufs) }); n != 0 {
		t.Errorf("MugBatch allocates %v times a batch", n)
	}
}
