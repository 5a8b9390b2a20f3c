package eventq

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestOrder(t *testing.T) {
	var q Queue[string]
	if _, ok := q.Next(); ok || q.Due(1<<62) {
		t.Fatal("empty queue has a next value")
	}
	q.Push(3, "c1")
	q.Push(1, "a")
	q.PushTie(3, 7, "c-tie7")
	q.Push(3, "c2")
	q.PushTie(3, 2, "c-tie2")
	q.Push(2, "b")
	if at, ok := q.Next(); !ok || at != 1 {
		t.Fatalf("Next = %v, %v", at, ok)
	}
	if !q.Due(1) || q.Due(0) {
		t.Fatal("Due wrong at the first value's time")
	}
	var got []string
	var times []time.Duration
	for q.Len() > 0 {
		at, v := q.Pop()
		got = append(got, v)
		times = append(times, at)
	}
	want := []string{"a", "b", "c1", "c2", "c-tie2", "c-tie7"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if !slices.Equal(times, []time.Duration{1, 2, 3, 3, 3, 3}) {
		t.Fatalf("times %v", times)
	}
}

// TestRandom checks the queue against a sort of the same values, with
// pushes interleaved with pops.
func TestRandom(t *testing.T) {
	type rec struct {
		at  time.Duration
		tie uint64
		n   int
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var q Queue[int]
	var all, popped []rec
	for n := range 5000 {
		r := rec{at: time.Duration(rng.IntN(100)), tie: uint64(rng.IntN(3)), n: n}
		all = append(all, r)
		q.PushTie(r.at, r.tie, n)
		if rng.IntN(3) == 0 {
			at, v := q.Pop()
			popped = append(popped, rec{at: at, tie: all[v].tie, n: v})
		}
	}
	for q.Len() > 0 {
		at, v := q.Pop()
		popped = append(popped, rec{at: at, tie: all[v].tie, n: v})
	}
	if len(popped) != len(all) {
		t.Fatalf("popped %d of %d", len(popped), len(all))
	}
	// Between pushes the pops are in order; check every value comes out
	// once, and a full drain of a fresh queue is sorted.
	seen := make([]bool, len(all))
	for _, r := range popped {
		if seen[r.n] {
			t.Fatalf("value %d popped twice", r.n)
		}
		seen[r.n] = true
	}
	for _, r := range all {
		q.PushTie(r.at, r.tie, r.n)
	}
	sorted := slices.Clone(all)
	slices.SortStableFunc(sorted, func(a, b rec) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(a.tie) - int(b.tie)
	})
	for i, r := range sorted {
		at, v := q.Pop()
		if v != r.n || at != r.at {
			t.Fatalf("pop %d = (%v, %d), want (%v, %d)", i, at, v, r.at, r.n)
		}
	}
}

func TestPopClearsSlot(t *testing.T) {
	var q Queue[*int]
	x := 1
	q.Push(1, &x)
	q.Push(2, &x)
	q.Pop()
	if q.h[:cap(q.h)][1] != (item[*int]{}) {
		t.Fatal("popped slot still holds its value")
	}
}

func TestNoAllocsOnceGrown(t *testing.T) {
	var q Queue[int]
	for i := range 64 {
		q.Push(time.Duration(i), i)
	}
	for q.Len() > 0 {
		q.Pop()
	}
	allocs := testing.AllocsPerRun(100, func() {
		for i := range 64 {
			q.PushTie(time.Duration(64-i), uint64(i), i)
		}
		for q.Len() > 0 {
			q.Pop()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

func BenchmarkPushPop(b *testing.B) {
	var q Queue[int]
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1024 {
		q.Push(time.Duration(rng.IntN(1<<20)), i)
	}
	for b.Loop() {
		at, v := q.Pop()
		q.Push(at+time.Duration(rng.IntN(1<<10)), v)
	}
}
