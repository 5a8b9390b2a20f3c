package main

import (
	"math/bits"
	"time"
)

// histSubBits sets the histogram's precision: each power of two is split
// into 2^(histSubBits-1) linear buckets, so a recorded value is known to
// within 1/64 (1.6%) of itself, as an HDR histogram with two significant
// digits, at every scale from nanoseconds to hours.
const histSubBits = 7

const (
	histHalf    = 1 << (histSubBits - 1)
	histBuckets = (64 - histSubBits + 2) * histHalf
)

// hist is a log-linear latency histogram (HDR-style): fixed memory
// (~30 KiB), O(1) record, quantiles to 1.6%. Not safe for concurrent use.
type hist struct {
	counts   [histBuckets]uint64
	n        uint64
	min, max time.Duration
	sum      time.Duration
}

func histBucket(v uint64) int {
	if v < 1<<histSubBits {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits
	return (shift+1)*histHalf + int(v>>shift) - histHalf
}

// histLow returns the smallest value in bucket i.
func histLow(i int) uint64 {
	if i < 1<<histSubBits {
		return uint64(i)
	}
	shift := i/histHalf - 1
	return uint64(i%histHalf+histHalf) << shift
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histBucket(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += d
}

// quantile returns the value at quantile q (0-1): the middle of the bucket
// holding it, clamped to the recorded min and max (exact at either end).
func (h *hist) quantile(q float64) time.Duration {
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
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo := histLow(i)
			hi := histLow(i + 1)
			v := time.Duration(lo + (hi-lo)/2)
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

func (h *hist) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}
