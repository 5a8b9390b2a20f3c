package relay

import "github.com/urbit-relay/relay/internal/hist"

// ServiceHistogram counts how long datagrams spend inside the server: from
// the return of the read that brought a datagram to the return of the
// writes that sent everything decided in its batch. It is the latency the
// relay adds to a datagram beyond the kernel and the wire, weighted per
// datagram. It is the tree's one histogram (internal/hist: log-linear
// buckets, hist.BucketsPerOctave per power of two, bounds from hist.Upper,
// quantiles from hist.Quantile); Observe and Snapshot are safe for
// concurrent use and allocate nothing.
type ServiceHistogram = hist.Histogram
