package main

import (
	"time"

	"github.com/urbit-relay/relay/internal/hist"
)

// latHist is a latency histogram: internal/hist's buckets (quantiles to
// 1/hist.BucketsPerOctave, 1.6%) with the exact count, extremes and sum
// beside them. Not safe for concurrent use.
type latHist struct {
	counts   hist.Histogram
	n        uint64
	min, max time.Duration
	sum      time.Duration
}

func (h *latHist) record(d time.Duration) {
	d = max(d, 0)
	h.counts.Observe(d, 1)
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += d
}

// quantile returns the value at quantile q (0-1): the middle of the bucket
// holding it, clamped to the recorded min and max (exact at either end).
func (h *latHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	switch rank {
	case 1:
		return h.min
	case h.n:
		return h.max
	}
	var snap [hist.Buckets]uint64
	i := hist.RankBucket(h.counts.Snapshot(snap[:]), rank-1)
	lo, hi := hist.Lower(i), hist.Upper(i)
	return min(max(lo+(hi-lo)/2, h.min), h.max)
}

func (h *latHist) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

func (h *latHist) merge(o *latHist) {
	if o.n == 0 {
		return
	}
	h.counts.Merge(&o.counts)
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}
