// Package hist is the tree's one latency histogram: log-linear buckets
// (BucketsPerOctave linear buckets per power of two, from MinBucket up to
// about 69 s), counted with atomics so that Observe is safe for concurrent
// use and allocates nothing. The relay's service time (relay.ServiceHistogram,
// exported as relay_service_seconds), cmd/bench's server stats and
// cmd/replay's round-trip latencies all count into it.
//
// A bucket's upper bound is at most 1/BucketsPerOctave (1.6%) above its
// lower, so a quantile is known to within that at every scale. Every
// octave's last bucket ends on a power of two (512 ns, 1.02 µs, ... 68.7 s):
// a coarser export (Prometheus buckets) takes those bounds, so its
// boundaries do not depend on BucketsPerOctave.
package hist

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits is the number of linear buckets per power of two, as bits.
const subBits = 6

// BucketsPerOctave is how many buckets span one power of two.
const BucketsPerOctave = 1 << subBits

// minShift: durations below 1<<minShift ns share bucket 0 with the first
// octave's first bucket.
const minShift = 8

// maxShift: durations from 1<<maxShift ns (68.7 s) on fall in the last
// bucket.
const maxShift = 36

// MinBucket is the duration below which everything shares bucket 0.
const MinBucket = time.Duration(1) << minShift

// Buckets is the number of buckets: 256 ns up to 2^36 ns (about 69 s),
// BucketsPerOctave per power of two; longer durations fall in the last.
const Buckets = (maxShift - minShift) << subBits

// Bucket returns the bucket holding d.
func Bucket(d time.Duration) int {
	ns := uint64(max(d, 0))
	if ns < 1<<minShift {
		return 0
	}
	e := bits.Len64(ns) - 1 // ns is in [2^e, 2^(e+1))
	sub := int(ns>>(e-subBits)) & (BucketsPerOctave - 1)
	return min((e-minShift)<<subBits+sub, Buckets-1)
}

// Upper returns the exclusive upper bound of bucket i (the last bucket's is
// nominal: it also holds everything longer).
func Upper(i int) time.Duration {
	e := i>>subBits + minShift
	sub := i & (BucketsPerOctave - 1)
	return time.Duration(uint64(BucketsPerOctave+sub+1) << (e - subBits))
}

// Lower returns the inclusive lower bound of bucket i: 0 for bucket 0.
func Lower(i int) time.Duration {
	if i <= 0 {
		return 0
	}
	return Upper(i - 1)
}

// Histogram counts durations into Buckets buckets. The zero value is empty
// and ready to use; Observe, Snapshot and Merge are safe for concurrent use
// and allocate nothing.
type Histogram struct {
	counts [Buckets]atomic.Uint64
}

// Observe records n samples that each took d.
func (h *Histogram) Observe(d time.Duration, n int) {
	h.counts[Bucket(d)].Add(uint64(n))
}

// Snapshot copies the bucket counts into dst (which must hold Buckets
// entries) and returns it.
func (h *Histogram) Snapshot(dst []uint64) []uint64 {
	dst = dst[:Buckets]
	for i := range h.counts {
		dst[i] = h.counts[i].Load()
	}
	return dst
}

// Merge adds o's counts into h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
}

// Total returns the number of samples in counts.
func Total(counts []uint64) uint64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	return total
}

// RankBucket returns the bucket holding the sample of 0-based rank r in
// counts (a Snapshot, or a difference of two), and -1 if counts holds r or
// fewer samples.
func RankBucket(counts []uint64, r uint64) int {
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen > r {
			return i
		}
	}
	return -1
}

// Quantile returns the upper bound of the bucket holding quantile q (0..1)
// of counts (a Snapshot, or a difference of two), and 0 if counts is empty.
func Quantile(counts []uint64, q float64) time.Duration {
	total := Total(counts)
	if total == 0 {
		return 0
	}
	return Upper(RankBucket(counts, min(uint64(q*float64(total)), total-1)))
}
