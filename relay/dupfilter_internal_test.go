package relay

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

func newTestDups(t testing.TB, cfg DupConfig) *dupFilter {
	t.Helper()
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	d, err := newDupFilter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sameSet returns n fingerprints (odd, as fingerprint makes them) that
// fall in one set of d.
func sameSet(d *dupFilter, n int) []uint64 {
	var out []uint64
	s0, _ := d.set(1)
	for fp := uint64(1); len(out) < n; fp += 2 {
		if s, _ := d.set(fp); s == s0 {
			out = append(out, fp)
		}
	}
	return out
}

// The tags of two lanes: a packet's first, and another.
const tagFirst, tagOther uint32 = 0x1111, 0x2222

// TestDupFilterSets: the filter is fixed memory: a set holds dupWays
// fingerprints, a fifth replaces the one forwarded longest ago (which is
// then forgotten, the others kept), an expired one is reused, and a
// fingerprint is a loop's copy from another lane for exactly the window,
// while from its first lane it is forwarded every time.
func TestDupFilterSets(t *testing.T) {
	d := newTestDups(t, DupConfig{Window: time.Second, Slots: 64})
	if len(d.sets) != 64/dupWays {
		t.Fatalf("%d sets, want %d", len(d.sets), 64/dupWays)
	}
	fps := sameSet(d, dupWays+1)
	for i, fp := range fps[:dupWays] {
		if !d.add(fp, tagFirst, time.Duration(i+1)*time.Millisecond) {
			t.Fatalf("fresh fingerprint %d refused", i)
		}
	}
	for i, fp := range fps[:dupWays] {
		if !d.looped(fp, tagOther, 10*time.Millisecond) || d.add(fp, tagOther, 10*time.Millisecond) {
			t.Fatalf("fingerprint %d from another lane not a loop's copy within the window", i)
		}
		if d.looped(fp, tagFirst, 10*time.Millisecond) {
			t.Fatalf("fingerprint %d from its first lane taken for a loop's copy", i)
		}
	}
	if !d.add(fps[dupWays], tagFirst, 20*time.Millisecond) {
		t.Fatal("fifth fingerprint of a full set refused")
	}
	if d.looped(fps[0], tagOther, 20*time.Millisecond) {
		t.Error("the oldest of a full set not replaced")
	}
	for i, fp := range fps[1:] {
		if !d.looped(fp, tagOther, 20*time.Millisecond) {
			t.Errorf("fingerprint %d forgotten, not the oldest", i+1)
		}
	}
	// The window: a loop's copy until 1 s after it was forwarded, not at 1 s.
	if !d.looped(fps[1], tagOther, time.Second+time.Millisecond) || d.looped(fps[1], tagOther, time.Second+2*time.Millisecond) {
		t.Error("window not exactly DupConfig.Window")
	}
	if !d.add(fps[1], tagOther, 2*time.Second) || !d.looped(fps[1], tagFirst, 2*time.Second) {
		t.Error("an expired fingerprint not forwarded and recorded again with its new lane")
	}
	var nilFilter *dupFilter
	if nilFilter.looped(1, 0, 0) || !nilFilter.add(1, 0, 0) {
		t.Error("a disabled filter drops")
	}
	if err := (&DupConfig{Slots: 6}).fill(); err == nil {
		t.Error("6 slots accepted")
	}
}

// TestDupRetransmissionsPass: a packet sent again and again from its first
// lane is forwarded every time, within the window or not, and each time
// renews its record, so that a loop's copy arriving from elsewhere later
// is still caught.
func TestDupRetransmissionsPass(t *testing.T) {
	d := newTestDups(t, DupConfig{Window: 2 * time.Second})
	const fp = 0xabc1
	for i, at := range []time.Duration{0, 300 * time.Millisecond, time.Second, 2500 * time.Millisecond, 4 * time.Second} {
		at += time.Millisecond
		if d.looped(fp, tagFirst, at) || !d.add(fp, tagFirst, at) {
			t.Fatalf("retransmission %d at %v dropped", i, at)
		}
	}
	if !d.looped(fp, tagOther, 5900*time.Millisecond) {
		t.Error("a loop's copy 1.9 s after the last retransmission not caught")
	}
}

// TestDupFingerprint: the fingerprint changes with each of mug, length,
// sender, receiver and the content's ends, not with the origin or the
// relayed bit (what forwarding changes).
func TestDupFingerprint(t *testing.T) {
	d := newTestDups(t, DupConfig{})
	base := scry.NewAmes(lane.Ship{Lo: 0x10203}, lane.Ship{Lo: 7}, 1, 1, make([]byte, 64))
	fp := d.fingerprint(&base)
	for name, mod := range map[string]func(p *scry.AmesPacket){
		"mug":      func(p *scry.AmesPacket) { p.Mug ^= 1 },
		"length":   func(p *scry.AmesPacket) { p.Content = p.Content[:63] },
		"sender":   func(p *scry.AmesPacket) { p.Sndr.Lo++ },
		"receiver": func(p *scry.AmesPacket) { p.Rcvr.Hi++ },
		"head":     func(p *scry.AmesPacket) { p.Content = append([]byte{1}, p.Content[1:]...) },
		"tail":     func(p *scry.AmesPacket) { p.Content = append(append([]byte{}, p.Content[:63]...), 1) },
	} {
		p := base
		mod(&p)
		if d.fingerprint(&p) == fp {
			t.Errorf("%s changed, fingerprint did not", name)
		}
	}
	p := base
	p.Relayed, p.OriginBytes = true, [6]byte{1, 2, 3, 4, 5, 6}
	if d.fingerprint(&p) != fp {
		t.Error("the origin changed the fingerprint")
	}
}

// TestDupFilterConcurrent: readers racing to forward one packet heard from
// as many lanes (go test -race): exactly one is told to.
func TestDupFilterConcurrent(t *testing.T) {
	d := newTestDups(t, DupConfig{})
	for round := uint64(0); round < 200; round++ {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if d.add(round*2+1, uint32(g+1)<<dupCountBits, time.Second) {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d readers forwarded one packet", round, wins.Load())
		}
	}
}

func TestDupFilterAllocs(t *testing.T) {
	d := newTestDups(t, DupConfig{})
	p := scry.NewAmes(lane.Ship{Lo: 0x10203}, lane.Ship{Lo: 7}, 1, 1, make([]byte, 64))
	now := time.Duration(0)
	if n := testing.AllocsPerRun(1000, func() {
		now += time.Millisecond
		p.Mug++
		fp := d.fingerprint(&p)
		if !d.looped(fp, tagFirst, now) {
			d.add(fp, tagFirst, now)
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// TestDupFilterUndo: a record undone with nothing between leaves the
// filter as it was, whether it began a record (a free way, or replacing
// the way forwarded longest ago in a full set) or renewed one (a
// retransmission); a refused record changes nothing and has nothing to
// undo; an undo finding its way changed since (another reader's record)
// leaves it. Relay.amesPrecheck records a legacy packet before it is
// planned and admitted, and undoes the record when it is not sent.
func TestDupFilterUndo(t *testing.T) {
	d := newTestDups(t, DupConfig{Window: time.Second, Slots: 64})
	fps := sameSet(d, dupWays+1)
	snap := func() []dupSet { return append([]dupSet(nil), d.sets...) }
	same := func(what string, before []dupSet) {
		t.Helper()
		for i := range before {
			if d.sets[i] != before[i] {
				t.Fatalf("%s: set %d is %+v after the undo, was %+v", what, i, d.sets[i], before[i])
			}
		}
	}
	try := func(what string, fp uint64, tag uint32, at time.Duration, wantOK bool) {
		t.Helper()
		before := snap()
		ok, u := d.record(fp, tag, at)
		if ok != wantOK {
			t.Fatalf("%s: record %v, want %v", what, ok, wantOK)
		}
		if !ok && u.s != nil {
			t.Fatalf("%s: refused, with something to undo", what)
		}
		if ok {
			changed := false
			for i := range before {
				changed = changed || d.sets[i] != before[i]
			}
			if !changed {
				t.Fatalf("%s: recorded, and nothing changed", what)
			}
		}
		d.undo(&u)
		same(what, before)
		d.undo(&u) // a second undo does nothing
		same(what+" (again)", before)
	}
	try("a new packet in an empty set", fps[0], tagFirst, time.Millisecond, true)
	for i, fp := range fps[:dupWays] {
		if !d.add(fp, tagFirst, time.Duration(i+1)*time.Millisecond) {
			t.Fatalf("fill %d refused", i)
		}
	}
	try("a retransmission", fps[1], tagFirst, 300*time.Millisecond, true)
	try("a new packet replacing the oldest", fps[dupWays], tagFirst, 300*time.Millisecond, true)
	try("a copy from another lane", fps[2], tagOther, 300*time.Millisecond, false)
	try("a record past its window", fps[3], tagOther, 5*time.Second, true)

	// Another reader's record in the way since: left as it is.
	ok, u := d.record(fps[1], tagFirst, 400*time.Millisecond)
	if !ok || !d.add(fps[1], tagFirst, 700*time.Millisecond) {
		t.Fatal("retransmissions refused")
	}
	after := snap()
	d.undo(&u)
	same("an undo after another record", after)
}
