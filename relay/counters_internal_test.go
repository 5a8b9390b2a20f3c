package relay

import (
	"testing"
	"unsafe"
)

// TestCounterBlockPadded: a block's counts are a cache line clear of
// whatever is allocated beside it.
func TestCounterBlockPadded(t *testing.T) {
	var b counterBlock
	first := unsafe.Offsetof(b.v)
	last := first + unsafe.Sizeof(b.v)
	if first < cacheLine || unsafe.Sizeof(b)-last < cacheLine {
		t.Errorf("counts at %d..%d of %d bytes: not padded by a %d-byte line", first, last, unsafe.Sizeof(b), cacheLine)
	}
}

// TestTallyFlushesEveryCount: a flush adds each count to the block at the
// same index, once: the tally is empty after it, and a second flush adds
// nothing.
func TestTallyFlushesEveryCount(t *testing.T) {
	var tl tally
	var b counterBlock
	for i := range numCounts {
		tl.bump(i, uint64(i+1))
		if i%3 == 0 {
			tl.bump(i, 1000)
		}
	}
	tl.flushTo(&b)
	if tl.dirty != [len(tl.dirty)]uint64{} {
		t.Fatalf("tally not empty after a flush: %v", tl.dirty)
	}
	tl.flushTo(&b)
	for i := range numCounts {
		want := uint64(i + 1)
		if i%3 == 0 {
			want += 1000
		}
		if got := b.v[i].Load(); got != want || tl.v[i] != 0 {
			t.Errorf("count %d: block %d (want %d), tally left %d", i, got, want, tl.v[i])
		}
	}
	// Only what was added since is added again.
	tl.bump(numCounts-1, 7)
	tl.flushTo(&b)
	if got := b.v[numCounts-1].Load(); got != uint64(numCounts)+7 {
		t.Errorf("last count %d after a second add of 7, want %d", got, numCounts+7)
	}
	if got := b.v[0].Load(); got != 1001 {
		t.Errorf("first count %d after a flush that did not touch it, want 1001", got)
	}
}

// TestTallyCountsLandInTheirSnapshotFields: each of a tally's count
// methods reaches the Snapshot field that names it, and no other.
func TestTallyCountsLandInTheirSnapshotFields(t *testing.T) {
	var tl tally
	tl.countIn(KindPage, 1100)
	tl.countOut(KindPeek, 2, 300)
	tl.shipBytes(45)
	tl.drop(DropLegacyThrottled)
	tl.shipDrop(ShipDropPrivateHint)
	tl.add(EventSignatureChecksRefused, 6)
	tl.add(EventRequestsForwarded, 7)
	var b counterBlock
	tl.flushTo(&b)
	var got Snapshot
	b.addTo(&got)
	var want Snapshot
	want.In[KindPage], want.InBytes[KindPage] = 1, 1100
	want.Out[KindPeek], want.OutBytes[KindPeek] = 2, 300
	want.FromShipSentBytes = 45
	want.Drops[DropLegacyThrottled] = 1
	want.ShipDrops[ShipDropPrivateHint] = 1
	want.Events[EventSignatureChecksRefused] = 6
	want.Events[EventRequestsForwarded] = 7
	if got != want {
		t.Errorf("snapshot\n got %+v\nwant %+v", got, want)
	}
}
