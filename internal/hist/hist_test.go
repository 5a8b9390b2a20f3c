package hist

import (
	"sync"
	"testing"
	"time"
)

func TestQuantileBuckets(t *testing.T) {
	var h Histogram
	h.Observe(100*time.Nanosecond, 1) // below the first bucket's floor
	h.Observe(10*time.Microsecond, 97)
	h.Observe(3*time.Millisecond, 2)
	snap := h.Snapshot(make([]uint64, Buckets))
	for _, c := range []struct {
		q        float64
		lo, want time.Duration // the quantile's value and the bound above it
	}{
		{0, 100 * time.Nanosecond, 320 * time.Nanosecond},
		{0.5, 10 * time.Microsecond, 10 * time.Microsecond * 119 / 100},
		{0.99, 3 * time.Millisecond, 3 * time.Millisecond * 119 / 100},
	} {
		got := Quantile(snap, c.q)
		if got <= c.lo || got > c.want {
			t.Errorf("quantile %v = %v, want in (%v, %v]", c.q, got, c.lo, c.want)
		}
	}
	if got := Quantile(make([]uint64, Buckets), 0.5); got != 0 {
		t.Errorf("empty histogram quantile = %v, want 0", got)
	}
	// Every duration lands in a bucket whose bounds hold it, and the
	// bucket is at most 1/BucketsPerOctave wide.
	for d := time.Duration(300); d < time.Minute; d = d*9/8 + 1 {
		var one Histogram
		one.Observe(d, 1)
		s := one.Snapshot(make([]uint64, Buckets))
		up := Quantile(s, 0)
		if up <= d || up > d*5/4+1 {
			t.Fatalf("%v recorded under bound %v", d, up)
		}
		i := Bucket(d)
		if lo := Lower(i); lo > d || d >= Upper(i) || Upper(i)-lo > lo/BucketsPerOctave+1 {
			t.Fatalf("%v in bucket %d [%v, %v)", d, i, lo, Upper(i))
		}
	}
	if Bucket(1<<62) != Buckets-1 || Bucket(-1) != 0 {
		t.Fatal("the extremes have no bucket")
	}
}

// TestOctaveBounds pins the bounds a per-octave export takes (the relay's
// relay_service_seconds buckets): every octave's last bucket ends on the
// next power of two, from 512 ns to 2^36 ns, as before the histogram had
// more than 4 buckets per octave.
func TestOctaveBounds(t *testing.T) {
	for k := range Buckets / BucketsPerOctave {
		i := k*BucketsPerOctave + BucketsPerOctave - 1
		if got, want := Upper(i), time.Duration(1)<<(9+k); got != want {
			t.Fatalf("octave %d ends at %v, want %v", k, got, want)
		}
	}
	if Upper(Buckets-1) != 1<<36 {
		t.Fatalf("last bucket ends at %v", Upper(Buckets-1))
	}
}

func TestObserveAllocatesNothing(t *testing.T) {
	var h Histogram
	d := time.Duration(1)
	if a := testing.AllocsPerRun(1000, func() {
		h.Observe(d, 3)
		d = d*3 + 7
	}); a != 0 {
		t.Fatalf("Observe allocates %v times", a)
	}
}

func TestConcurrentObserveAndMerge(t *testing.T) {
	var h, all Histogram
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				h.Observe(time.Duration(g*1000+i)*time.Microsecond, 1)
			}
		}()
	}
	wg.Wait()
	all.Merge(&h)
	all.Merge(&h)
	if got := Total(all.Snapshot(make([]uint64, Buckets))); got != 8000 {
		t.Fatalf("merged %d samples, want 8000", got)
	}
	snap := h.Snapshot(make([]uint64, Buckets))
	if b := RankBucket(snap, 3999); b != Bucket(3999*time.Microsecond) {
		t.Fatalf("the largest sample in bucket %d, want %d", b, Bucket(3999*time.Microsecond))
	}
	if RankBucket(snap, 4000) != -1 {
		t.Fatal("a rank past the samples has a bucket")
	}
}

func BenchmarkObserve(b *testing.B) {
	var h Histogram
	d := time.Duration(1)
	for b.Loop() {
		h.Observe(d, 1)
		d = d*3 + 7&(1<<30-1)
	}
}
