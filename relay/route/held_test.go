package route

import (
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// TestHoldRecordReplacesTheOldest: a set keeps HeldWays holds; one more
// replaces the hold made longest ago, and only that one; a lane held again
// keeps its entry (its time moves on, never back).
func TestHoldRecordReplacesTheOldest(t *testing.T) {
	h := newHoldRecord(HeldWays, 7) // one set: every lane shares it
	ks := make([]lane.Key, HeldWays+1)
	for i := range ks {
		ks[i] = lane.KeyOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, 1}), uint16(7000+i)))
	}
	for i, k := range ks[:HeldWays] {
		h.hold(k, time.Duration(10+i)*sec)
	}
	h.hold(ks[1], 5*sec) // earlier than its hold: kept at 11 s
	for i, k := range ks[:HeldWays] {
		if !h.heldSince(k, time.Duration(10+i)*sec) || h.heldSince(k, time.Duration(11+i)*sec) {
			t.Fatalf("lane %d: held since %v, not after", i, time.Duration(10+i)*sec)
		}
	}
	h.hold(ks[HeldWays], 20*sec)
	if h.heldSince(ks[0], 0) {
		t.Fatal("the oldest hold was kept past a full set")
	}
	for _, k := range ks[1:] {
		if !h.heldSince(k, 0) {
			t.Fatalf("%v forgotten; only the oldest hold may be", k.AddrPort())
		}
	}
}

// TestSquattersSharingAHoldSetStayHeld: HeldWays lanes whose holds share
// one set of the held record each claim the challenger slot in turn and
// lose it; every one stays held for BadLaneHold, and the ship's own new
// lane then takes the slot. With one entry a set, each loss forgot the
// last lane's hold, and such lanes took the slot in turns for as long as
// they liked (TestChallengerSlotCannotBeSquatted's failing seeds).
func TestSquattersSharingAHoldSetStayHeld(t *testing.T) {
	rt := newTable(t)
	rec := newHoldRecord(max(MinHeldSlots, rt.cfg.LaneClockSlots/HeldSlotsDivisor), rt.srcSeed^heldSeedMix)
	bySet := map[*holdSet][]lane.Key{}
	var squatters []lane.Key
	for port := 1; squatters == nil && port < 65536; port++ {
		k := lane.KeyOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, 66}), uint16(port)))
		set := rec.setOf(rec.hashOf(holdHash(planet, k)))
		if bySet[set] = append(bySet[set], k); len(bySet[set]) == HeldWays {
			squatters = bySet[set]
		}
	}
	if squatters == nil {
		t.Fatal("no set shared by enough lanes")
	}
	now := sec
	rt.Contacted(planet, planetKey, now)
	for _, k := range squatters {
		rt.Contacted(planet, planetKey, now)
		rt.Contacted(planet, k, now)
		if i := info(t, rt, planet); i.Challenger != k {
			t.Fatalf("squatter %v did not claim the slot: %+v", k.AddrPort(), i)
		}
		rt.Select(planet, alice, now) // its probe, never answered
		now += DefaultProbeTimeout
		rt.Select(planet, alice, now)
		if i := info(t, rt, planet); i.Challenger.IsValid() {
			t.Fatalf("squatter %v kept the slot: %+v", k.AddrPort(), i)
		}
	}
	for _, k := range squatters {
		rt.Contacted(planet, k, now)
		if i := info(t, rt, planet); i.Challenger.IsValid() {
			t.Fatalf("squatter %v claimed again within BadLaneHold (a forgotten hold): %+v", k.AddrPort(), i)
		}
	}
	rt.Contacted(planet, otherKey, now)
	if i := info(t, rt, planet); i.Challenger != otherKey {
		t.Fatalf("the ship's new lane did not take the free slot: %+v", i)
	}
}
