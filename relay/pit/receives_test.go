package pit

import (
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// lanesOf returns n lanes of one IPv4 source a (ports from 1000).
func lanesOf(a byte, n int) []lane.Key {
	out := make([]lane.Key, n)
	for i := range out {
		out[i] = lane.Key{IP: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 51, 14: 100, 15: a}, Port: uint16(1000 + i)}
	}
	return out
}

// oneShots returns n lanes, each its own IPv4 source.
func oneShots(n int) []lane.Key {
	out := make([]lane.Key, n)
	for i := range out {
		out[i] = lane.Key{IP: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 14: byte(i >> 8), 15: byte(i)}, Port: 4000}
	}
	return out
}

// TestOneShotNewcomerNeverDisplacesProven: a full entry of eight, four
// proven lanes of one source (a NAT) and four one-shot sources. However
// many one-shot newcomers ask, the NAT's four stay; without the proof
// (the twin: today's rule alone), the newcomers level it down to one.
func TestOneShotNewcomerNeverDisplacesProven(t *testing.T) {
	for _, proven := range []bool{false, true} {
		tb, err := New(Config{Shards: 1, MaxEntries: 16, MaxRequestersPerEntry: 8, MaxOverflowRequesters: 200, MaxOverflowPerSource: -1})
		if err != nil {
			t.Fatal(err)
		}
		const key = 7
		nat := lanesOf(1, 4)
		for _, q := range nat {
			if proven {
				tb.AddProven(key, q, 0)
			} else {
				tb.Add(key, q, 0)
			}
		}
		for _, q := range oneShots(200) {
			tb.Add(key, q, time.Millisecond)
		}
		reqs, _ := tb.Take(key, nil, 2*time.Millisecond)
		kept := 0
		for _, q := range reqs {
			for _, n := range nat {
				if q == n {
					kept++
				}
			}
		}
		switch {
		case proven && kept != 4:
			t.Errorf("proven: the NAT kept %d of its 4 requesters", kept)
		case !proven && kept != 1:
			t.Errorf("one-shot: the NAT kept %d of its 4 requesters; want 1 (max-min among equals)", kept)
		}
		checkInvariants(t, tb)
	}
}

// TestProvenNewcomerTakesAOneShotPlace: at an entry full of one-shot
// sources, a proven newcomer takes a place (the latest one-shot
// requester of the largest source other than its own), and once all but
// the first are proven, proven newcomers share by max-min.
func TestProvenNewcomerTakesAOneShotPlace(t *testing.T) {
	tb, err := New(Config{Shards: 1, MaxEntries: 16, MaxRequestersPerEntry: 6, MaxOverflowRequesters: 200, MaxOverflowPerSource: -1})
	if err != nil {
		t.Fatal(err)
	}
	const key = 9
	forged := oneShots(6)
	for _, q := range forged {
		tb.Add(key, q, 0)
	}
	nat := lanesOf(1, 8)
	for i, q := range nat {
		v, _ := tb.AddProven(key, q, time.Millisecond)
		want := i < 5 // five places after the first
		if got := v == VerdictAggregated; got != want {
			t.Errorf("proven newcomer %d: %v", i, v)
		}
	}
	reqs, _ := tb.Take(key, nil, 2*time.Millisecond)
	if reqs[0] != forged[0] {
		t.Errorf("the entry's first %v displaced", reqs[0])
	}
	for _, q := range reqs[1:] {
		if q.Source() != nat[0].Source() {
			t.Errorf("requester %v left beside the proven ones", q)
		}
	}
	if st := tb.Stats(); st.Displaced != 5 || st.EntryShareCapped != 3 {
		t.Errorf("displaced %d, refused %d; want 5, 3", st.Displaced, st.EntryShareCapped)
	}
}

// TestRestoreOneCopyPerAsk: a taken entry put back marks every requester
// delivered; the next take reports them so, with the same expiry; a
// requester that asks again is not delivered any more, and a newcomer
// joins undelivered.
func TestRestoreOneCopyPerAsk(t *testing.T) {
	tb, err := New(Config{Shards: 1, MaxEntries: 16, MaxOverflowRequesters: 200, TTL: 10 * time.Second, Tick: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const key = 11
	reqs := oneShots(5)
	for _, q := range reqs {
		tb.Add(key, q, 0)
	}
	var held Held
	var dst []lane.Key
	for round := 0; round < 3; round++ {
		now := time.Duration(round+1) * time.Second
		var ok bool
		dst, ok = tb.TakeHeld(key, dst[:0], &held, now)
		if !ok || len(dst) != len(reqs) {
			t.Fatalf("round %d: took %v %v", round, dst, ok)
		}
		for i := range dst {
			if got, want := held.Delivered(i), round > 0; got != want {
				t.Errorf("round %d: requester %d delivered %v", round, i, got)
			}
		}
		if n := tb.Restore(key, dst, &held, now); n != len(reqs) {
			t.Fatalf("round %d: restored %d", round, n)
		}
		checkInvariants(t, tb)
	}
	tb.Add(key, reqs[2], 4*time.Second)        // asks again
	tb.Add(key, oneShots(6)[5], 4*time.Second) // a newcomer
	dst, _ = tb.TakeHeld(key, dst[:0], &held, 5*time.Second)
	for i, q := range dst {
		want := q != reqs[2] && q != oneShots(6)[5]
		if held.Delivered(i) != want {
			t.Errorf("%v delivered %v, want %v", q, held.Delivered(i), want)
		}
	}
	// The entry kept the expiry of its last ask (4 s + TTL): the pages
	// put back did not prolong it.
	tb.Restore(key, dst, &held, 5*time.Second)
	if _, ok := tb.Take(key, nil, 14*time.Second+100*time.Millisecond); ok {
		t.Error("the entry outlived its last ask's TTL")
	}
	if st := tb.Stats(); st.Restored != 4 {
		t.Errorf("restored %d entries, want 4", st.Restored)
	}
}

// TestReceivesAllocs: AddProven, TakeHeld and Restore allocate nothing
// once the table has grown.
func TestReceivesAllocs(t *testing.T) {
	tb, err := New(Config{Shards: 1, MaxEntries: 64, MaxRequestersPerEntry: 8, MaxOverflowRequesters: 200, MaxOverflowPerSource: -1})
	if err != nil {
		t.Fatal(err)
	}
	reqs := oneShots(12)
	dst := make([]lane.Key, 0, 16)
	var held Held
	now := time.Duration(0)
	cycle := func() {
		for _, q := range reqs {
			tb.Add(1, q, now)
		}
		tb.AddProven(1, lanesOf(1, 1)[0], now)
		dst, _ = tb.TakeHeld(1, dst[:0], &held, now)
		tb.Restore(1, dst, &held, now)
		dst, _ = tb.TakeHeld(1, dst[:0], &held, now)
		now += time.Millisecond
	}
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Errorf("%v allocations a cycle", n)
	}
}
