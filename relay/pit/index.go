package pit

// The index maps a hash to an entry slot: open addressing with linear
// probing over []uint32, deletion by backward shift (no tombstones, so probe
// lengths do not degrade under churn). Each slot holds tag<<24 | (entry+1);
// the 8-bit tag (the hash's top byte) rejects most non-matching slots
// without touching the entry slab. The home position is the hash's low bits.

const (
	slotEntryMask = 1<<24 - 1
	slotTagShift  = 24
)

// findLocked looks h up. If found, it returns the index position and the
// entry slot; otherwise the empty position where h would be inserted (valid
// until the index next changes). An empty index yields (0, 0, false) and
// must be grown before inserting.
func (s *shard) findLocked(h uint64) (pos int, i uint32, found bool) {
	slots := s.slots
	mask := len(slots) - 1
	if mask < 0 {
		return 0, 0, false
	}
	pos = int(h) & mask
	for {
		v := slots[pos]
		if v == 0 {
			return pos, 0, false
		}
		if v>>slotTagShift == uint32(h>>56) {
			i = v&slotEntryMask - 1
			if s.entries[i].hash == h {
				return pos, i, true
			}
		}
		pos = (pos + 1) & mask
	}
}

// posOfLocked returns the index position holding live entry i.
func (s *shard) posOfLocked(i uint32) int {
	mask := len(s.slots) - 1
	pos := int(s.entries[i].hash) & mask
	for s.slots[pos]&slotEntryMask != i+1 {
		pos = (pos + 1) & mask
	}
	return pos
}

// deleteSlotLocked empties index position pos and shifts back the entries
// after it in its probe run that may move closer to their home position.
func (s *shard) deleteSlotLocked(pos int) {
	mask := len(s.slots) - 1
	hole := pos
	for j := (pos + 1) & mask; ; j = (j + 1) & mask {
		v := s.slots[j]
		if v == 0 {
			break
		}
		home := int(s.entries[v&slotEntryMask-1].hash) & mask
		// v may fill the hole unless its home lies cyclically in (hole, j].
		if (j-home)&mask < (j-hole)&mask {
			continue
		}
		s.slots[hole] = v
		hole = j
	}
	s.slots[hole] = 0
}

// indexFullLocked reports whether one more entry would exceed the index's
// load factor: growIndexLocked's test, which the insert inlines.
func (s *shard) indexFullLocked() bool {
	return (s.n+1)*indexLoadDen > len(s.slots)*indexLoadNum
}

// growIndexLocked doubles the index, if one more entry would exceed the
// load factor, and reports whether it did. Positions from findLocked are
// invalid after a growth.
func (s *shard) growIndexLocked() bool {
	if !s.indexFullLocked() {
		return false
	}
	old := s.slots
	s.slots = make([]uint32, max(2*len(old), initialIndexSlots))
	view := s.slots
	s.slotsView.Store(&view)
	mask := len(s.slots) - 1
	for _, v := range old {
		if v == 0 {
			continue
		}
		pos := int(s.entries[v&slotEntryMask-1].hash) & mask
		for s.slots[pos] != 0 {
			pos = (pos + 1) & mask
		}
		s.slots[pos] = v
	}
	return true
}
