package relay

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// serviceSubBits is the number of sub-buckets per power of two, as bits:
// 4 sub-buckets, so a bucket's upper bound is at most 19% above its lower.
const serviceSubBits = 2

// ServiceBucketsPerOctave is how many ServiceHistogram buckets span one
// power of two.
const ServiceBucketsPerOctave = 1 << serviceSubBits

// serviceMinShift: durations below 1<<serviceMinShift ns (256 ns) share
// bucket 0.
const serviceMinShift = 8

// ServiceBuckets is the number of buckets of a ServiceHistogram: 256 ns up
// to about 70 s, 4 per power of two; longer durations fall in the last.
const ServiceBuckets = (36 - serviceMinShift) << serviceSubBits

// ServiceHistogram counts how long datagrams spend inside the server: from
// the return of the read that brought a datagram to the return of the
// writes that sent everything decided in its batch. It is the latency the
// relay adds to a datagram beyond the kernel and the wire, weighted per
// datagram. Buckets are log-linear (4 per power of two). Observe and
// Snapshot are safe for concurrent use and allocate nothing.
type ServiceHistogram struct {
	counts [ServiceBuckets]atomic.Uint64
}

// serviceBucket returns the bucket holding d.
func serviceBucket(d time.Duration) int {
	ns := uint64(max(d, 0))
	if ns < 1<<serviceMinShift {
		return 0
	}
	e := bits.Len64(ns) - 1 // ns is in [2^e, 2^(e+1))
	sub := int(ns>>(e-serviceSubBits)) & (1<<serviceSubBits - 1)
	i := (e-serviceMinShift)<<serviceSubBits + sub
	return min(i, ServiceBuckets-1)
}

// ServiceBucketUpper returns the exclusive upper bound of bucket i.
func ServiceBucketUpper(i int) time.Duration {
	e := i>>serviceSubBits + serviceMinShift
	sub := i & (1<<serviceSubBits - 1)
	return time.Duration(uint64(1<<serviceSubBits+sub+1) << (e - serviceSubBits))
}

// Observe records n datagrams that each spent d in the server.
func (h *ServiceHistogram) Observe(d time.Duration, n int) {
	h.counts[serviceBucket(d)].Add(uint64(n))
}

// Snapshot copies the bucket counts into dst (which must hold
// ServiceBuckets entries) and returns it.
func (h *ServiceHistogram) Snapshot(dst []uint64) []uint64 {
	dst = dst[:ServiceBuckets]
	for i := range h.counts {
		dst[i] = h.counts[i].Load()
	}
	return dst
}

// ServiceQuantile returns the upper bound of the bucket holding quantile q
// (0..1) of the counts in snap (from Snapshot, or a difference of two), and
// 0 if snap is empty.
func ServiceQuantile(snap []uint64, q float64) time.Duration {
	var total uint64
	for _, c := range snap {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := min(uint64(q*float64(total)), total-1)
	var seen uint64
	for i, c := range snap {
		seen += c
		if seen > rank {
			return ServiceBucketUpper(i)
		}
	}
	return ServiceBucketUpper(len(snap) - 1)
}
