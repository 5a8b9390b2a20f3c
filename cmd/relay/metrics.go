package main

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/urbit-relay/relay/internal/hist"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/relay/front"
	"github.com/urbit-relay/relay/relay/pki"
	"github.com/urbit-relay/relay/relay/transport"
)

// socketBufferRequest is the receive and send buffer size `relay run` and
// the demo ask of each socket: they leave transport.Options' sizes zero.
const socketBufferRequest = transport.DefaultSocketBufferBytes

// opsStats are the daemon's own counts and state, beside the relay's:
// config reloads, configured lanes, readiness. The demo has none.
type opsStats struct {
	reloadsOK, reloadsFailed atomic.Uint64
	// lastLoadOK is whether the last config load (at start, or on SIGHUP)
	// was applied; lastLoadAt the Unix time in nanoseconds of the last
	// one that was (0: none yet).
	lastLoadOK               atomic.Bool
	lastLoadAt               atomic.Int64
	galaxyLanes, pinnedLanes atomic.Int64
	// capture is the --capture writer, nil without one.
	capture *capture.Writer
	// ready is set once the relay is serving and, with --galaxy-domain,
	// the first DNS round is done; stopping once shutdown has begun.
	ready, stopping atomic.Bool
	// http are the metrics listener's counts.
	http httpStats
	// front is the fronted ship's device, nil outside fronting mode.
	front frontDevice
	// pki is the --pki verifier (empty without a file), nil in the demo.
	pki *pki.Verifier
}

// frontDevice is what the metrics read of the fronted ship's device
// (*front.Conn).
type frontDevice interface {
	Stats() front.Stats
	Drops() uint64
}

// frontSkipReasons labels relay_front_device_skipped_total, one per
// front.Stats skip field (frontSkipped gives them in this order).
var frontSkipReasons = []string{"not_ipv4", "not_udp", "fragment", "malformed", "not_ship", "bad_dest", "to_host", "read_error"}

// frontSkipped returns s's skip counts in frontSkipReasons' order.
func frontSkipped(s front.Stats) []uint64 {
	return []uint64{s.SkippedNotIPv4, s.SkippedNotUDP, s.SkippedFragment, s.SkippedMalformed,
		s.SkippedNotShip, s.SkippedBadDest, s.SkippedToHost, s.SkippedReadErrors}
}

// configLoaded records a configuration applied at now: the first, at
// start, or a reload (then also counted in reloadsOK).
func (o *opsStats) configLoaded(now time.Time, reload bool) {
	if reload {
		o.reloadsOK.Add(1)
	}
	o.lastLoadOK.Store(true)
	o.lastLoadAt.Store(now.UnixNano())
}

// reloadFailed records a reload whose config was not applied.
func (o *opsStats) reloadFailed() {
	o.reloadsFailed.Add(1)
	o.lastLoadOK.Store(false)
}

// relayCollector exports a relay server's counters. It sums the relay's
// per-reader atomic counter blocks at scrape time (Counters.Snapshot), so
// metrics cost nothing per datagram; every relay.Event is a counter named
// by the event (eventHelp), and the deprecated names (deprecatedEvents)
// repeat their renamed events' counts.
type relayCollector struct {
	srv      *relay.Server
	ops      *opsStats // nil: no daemon metrics
	version  string
	revision string

	packetsIn, packetsOut, drops, fromShipDropped            *prometheus.Desc
	events                                                   []eventDesc // one per relay.Event, then the deprecated names
	pendingEntries, pendingOps, routes, routeChanges         *prometheus.Desc
	routesSourceRefused, pendingShareRefusals                *prometheus.Desc
	readBatches, readDatagrams, readErrors, writeErrors      *prometheus.Desc
	kernelDrops, reloads, galaxyLanes, pinnedLanes, buildInf *prometheus.Desc
	bytesIn, bytesOut, fromShipBytes                         *prometheus.Desc
	pendingCapacity, routesCapacity                          *prometheus.Desc
	sockRecv, sockSend, sockRecvAsked, sockSendAsked         *prometheus.Desc
	lastReloadOK, lastReloadAt                               *prometheus.Desc
	captureRecords, captureDropped, captureBytes             *prometheus.Desc
	captureRotations, captureErrors                          *prometheus.Desc
	serviceTime                                              *prometheus.Desc
	frontDatagrams, frontSkipped, frontQueueDrops            *prometheus.Desc
	pkiShips, pkiVerdicts                                    *prometheus.Desc
	httpConns, httpRefused, httpGathers                      *prometheus.Desc
}

// eventDesc exports one relay.Event as a counter.
type eventDesc struct {
	event relay.Event
	desc  *prometheus.Desc
}

// eventHelp is each relay.Event's metric help; the metric is named
// relay_<event>_total.
var eventHelp = map[relay.Event]string{
	relay.EventRequestsForwarded:      "Request and legacy ames datagrams forwarded, once each however many routes they went on.",
	relay.EventForwardSends:           "Datagrams sent for forwarded requests; a request sent on two routes counts twice.",
	relay.EventDualSends:              "Requests sent on two routes at once (a tighter route on probation).",
	relay.EventAggregated:             "Requests from a new requester aggregated into a pending entry, not forwarded.",
	relay.EventRetransmits:            "Repeats from a requester already pending, forwarded again.",
	relay.EventAnswered:               "Pages sent to requesters.",
	relay.EventPagesMatched:           "Pages read that matched a pending entry.",
	relay.EventAmpThrottled:           "Pages and STUN responses not sent to a requester whose address was over its amplification budget.",
	relay.EventSTUNAnswered:           "STUN binding requests answered by the relay with the requester's lane.",
	relay.EventCappedForwards:         "Requests past an entry's requester cap, forwarded (unrecorded) to refresh it upstream.",
	relay.EventEvicted:                "Pending entries shed to make room in a full table.",
	relay.EventToShip:                 "Datagrams handed to the fronted ship's own process (--ship-lane).",
	relay.EventOriginsInserted:        "Legacy ames packets forwarded with an origin lane inserted.",
	relay.EventFromShip:               "Datagrams the fronted ship sent through its device (fronting mode).",
	relay.EventFromShipSent:           "Datagrams the fronted ship sent that were sent on (fronting mode).",
	relay.EventVouched:                "Sponsee lanes the fronted ship vouched for by acking their pings there or forwarding to them (fronting mode).",
	relay.EventVouchContested:         "Acks of one ping name the fronted ship sent to two lanes, so vouching for neither (fronting mode).",
	relay.EventVouchRefused:           "Forwards of a sponsee's traffic by the fronted ship to a lane an unacked ping naming the sponsee came from, not taken as vouching (fronting mode).",
	relay.EventHintsScrubbed:          "Private next-hops and origins rewritten to the public lane or removed.",
	relay.EventNextHopUnencodable:     "Pages sent without a next-hop because the lane has no 6-byte form (IPv6).",
	relay.EventNextHopUnknown:         "Pages sent without a next-hop because the publisher's own lane is not known here (a next-hop never names a forwarder: a stock requester would store it as the publisher's lane).",
	relay.EventLateAnswers:            "Unsolicited pages (late copies) that answered a probe outstanding on the lane they came from; also counted as dropped unsolicited.",
	relay.EventProbesSent:             "STUN binding requests sent to busy lanes to prove they answer (every vere ship does); answered ones are exempt from the amplification budget.",
	relay.EventLanesProven:            "Lane probes answered from the lane probed, with the probe's transaction id: lanes exempt from the amplification budget.",
	relay.EventSignatureChecks:        "Page signatures checked (--pki): solicited first pages from a lane that could become the publisher's.",
	relay.EventSignatureChecksRefused: "Page signatures not checked because the check budget was spent (per lane and in all); such a page is forwarded but proves no lane.",
}

// deprecatedEvents are metric names kept for one release after their
// event's metric was renamed; each reports the same count as the new name.
var deprecatedEvents = []struct {
	name  string
	event relay.Event
}{
	{"forwarded_total", relay.EventRequestsForwarded}, // now relay_requests_forwarded_total
	{"forwards_total", relay.EventForwardSends},       // now relay_forward_sends_total
}

// deprecatedHelp is the help of a deprecated name kept for renamed.
func deprecatedHelp(renamed string) string {
	return "Deprecated: renamed " + renamed + ", which reports the same count; this name goes in the next release."
}

// metricPrefix begins every relay metric name.
const metricPrefix = "relay_"

// newRelayCollector returns a collector for srv; ops may be nil. version
// and revision label relay_build_info.
func newRelayCollector(srv *relay.Server, ops *opsStats, version, revision string) *relayCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(metricPrefix+name, help, labels, nil)
	}
	c := &relayCollector{
		srv: srv, ops: ops, version: version, revision: revision,
		packetsIn:       d("packets_in_total", "Datagrams read, by kind (peek, poke, page, ames, stun, other).", "kind"),
		packetsOut:      d("packets_out_total", "Datagrams sent, by kind.", "kind"),
		bytesIn:         d("bytes_received_total", "Bytes (UDP payload) of the datagrams read, by kind.", "kind"),
		bytesOut:        d("bytes_sent_total", "Bytes (UDP payload) of the datagrams sent, by kind, as sent (next-hops and origins included).", "kind"),
		fromShipBytes:   d("from_ship_sent_bytes_total", "Bytes of the datagrams the fronted ship sent that were sent on (fronting mode; not in bytes_sent_total)."),
		pendingCapacity: d("pending_capacity", "Most entries the pending-request table holds (pending.max-entries, whole per shard)."),
		routesCapacity:  d("routes_capacity", "Most ships the route table keeps state for; past it the least recently used is dropped."),
		sockRecv:        d("socket_receive_buffer_bytes", "Receive buffer the kernel granted the public sockets (the smallest), in the units of the request."),
		sockSend:        d("socket_send_buffer_bytes", "Send buffer the kernel granted the public sockets (the smallest), in the units of the request."),
		sockRecvAsked:   d("socket_receive_buffer_requested_bytes", "Receive buffer requested for each public socket."),
		sockSendAsked:   d("socket_send_buffer_requested_bytes", "Send buffer requested for each public socket."),
		lastReloadOK:    d("config_last_reload_successful", "1 if the last config load (at start or on SIGHUP) was applied, 0 if it failed."),
		lastReloadAt:    d("config_last_reload_success_timestamp_seconds", "Unix time of the last config load applied (at start or on SIGHUP)."),
		drops:           d("drops_total", "Datagrams dropped, by reason.", "reason"),
		fromShipDropped: d("from_ship_dropped_total", "Datagrams the fronted ship sent that were not sent on, by reason.", "reason"),
		pendingEntries:  d("pending_entries", "Live entries in the pending-request table."),
		pendingOps:      d("pending_operations_total", "Pending-table operations, by result.", "op"),
		pendingShareRefusals: d("pending_share_refusals_total",
			"Of the requester_capped (share=\"overflow\", share=\"entry\") and refused (share=\"full\") pending operations, those refused because the source held its share of the overflow pool, of one entry's requesters, or of a full refuse-when-full table.", "share"),
		routes:       d("routes", "Ships with learned routing state (direct lanes, next-hop hints)."),
		routeChanges: d("route_changes_total", "Times a ship's best route changed."),
		routesSourceRefused: d("routes_source_refused_total",
			"Routes not created because the source address asking for them held its share of the route table (max-routes/16)."),
		readBatches:      d("read_batches_total", "Socket reads (recvmmsg calls that returned datagrams)."),
		readDatagrams:    d("read_batch_datagrams_total", "Datagrams over all read batches; divided by read_batches_total, the mean batch size."),
		readErrors:       d("read_errors_total", "Failed socket reads, other than at shutdown."),
		writeErrors:      d("write_errors_total", "Datagrams the socket refused to send."),
		kernelDrops:      d("kernel_receive_drops_total", "Datagrams the kernel dropped because the socket's receive queue was full."),
		reloads:          d("config_reloads_total", "Config reloads on SIGHUP, by result (ok, error).", "result"),
		galaxyLanes:      d("galaxy_lanes", "Galaxies with a configured or DNS-resolved lane."),
		pinnedLanes:      d("pinned_lanes", "Ships with a pinned lane (--lane, \"lanes\")."),
		captureRecords:   d("capture_records_total", "Datagrams written to the --capture file."),
		captureBytes:     d("capture_bytes_total", "Bytes written to the --capture files, pcap headers included."),
		captureDropped:   d("capture_dropped_total", "Datagrams not captured (the disk fell behind, or a write failed)."),
		captureRotations: d("capture_rotations_total", "Capture files started after the first."),
		captureErrors:    d("capture_write_errors_total", "Failed capture file operations (create, write, rename)."),
		httpConns:        d("metrics_connections", "Connections open on the --metrics listener (at most metrics-http.max-connections; more wait to be accepted)."),
		httpRefused:      d("metrics_scrapes_refused_total", "Scrapes of /metrics answered 503 because metrics-http.max-scrapes were in progress."),
		httpGathers:      d("metrics_gathers_total", "Gathers run for /metrics; scrapes arriving together share one."),
		serviceTime:      d("service_seconds", "Time datagrams spend in the relay: from the read that brought one to the last write of its batch; the latency the relay adds."),
		frontDatagrams: d("front_device_datagrams_total",
			"Datagrams through the fronted ship's TUN device, by direction: from_ship (UDP from the ship's lane, handed to the relay) and to_ship (written into the device for the ship).", "direction"),
		frontSkipped: d("front_device_skipped_total",
			"Packets the ship's device carried that the relay dropped before deciding, by reason: not_ipv4, not_udp, fragment, malformed, not_ship (another socket of the ship), bad_dest (multicast, broadcast, port 0), to_host (to the relay host's own addresses, not declared with --front-host-lane), read_error.", "reason"),
		frontQueueDrops: d("front_device_queue_drops_total",
			"Packets the ship's kernel dropped because the device's queue was full (the relay read too slowly)."),
		pkiShips: d("pki_ships", "Ships with a networking key in the --pki snapshot (0 without one)."),
		pkiVerdicts: d("pki_verdicts_total",
			"Signature checks of pages that would change a route, by verdict: verified, bad_signature, unknown_ship, stale_key, not_signed, not_first_fragment, malformed.", "verdict"),
		buildInf: d("build_info", "Always 1; labels give the relay's version, VCS revision and Go version.", "version", "revision", "goversion"),
	}
	for _, e := range relay.Events() {
		help, ok := eventHelp[e]
		if !ok {
			panic("metrics: no help for relay event " + e.String())
		}
		c.events = append(c.events, eventDesc{e, d(e.String()+"_total", help)})
	}
	for _, old := range deprecatedEvents {
		c.events = append(c.events, eventDesc{old.event, d(old.name, deprecatedHelp(metricPrefix+old.event.String()+"_total"))})
	}
	return c
}

// pendingOpNames labels relay_pending_operations_total, in pit.Stats order.
var pendingOpNames = []string{"added", "retransmit", "aggregated", "joined", "requester_capped", "refused", "source_capped", "evicted", "expired", "taken", "displaced"}

// Describe sends every descriptor.
func (c *relayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.packetsIn, c.packetsOut, c.drops, c.fromShipDropped, c.bytesIn, c.bytesOut, c.fromShipBytes,
		c.pendingEntries, c.pendingOps, c.pendingCapacity, c.routes, c.routesCapacity, c.routeChanges, c.routesSourceRefused, c.pendingShareRefusals,
		c.readBatches, c.readDatagrams, c.readErrors, c.writeErrors, c.kernelDrops,
		c.sockRecv, c.sockSend, c.sockRecvAsked, c.sockSendAsked, c.serviceTime, c.buildInf,
	} {
		ch <- d
	}
	for _, e := range c.events {
		ch <- e.desc
	}
	if c.ops != nil {
		ch <- c.reloads
		ch <- c.lastReloadOK
		ch <- c.lastReloadAt
		ch <- c.galaxyLanes
		ch <- c.pinnedLanes
		ch <- c.httpConns
		ch <- c.httpRefused
		ch <- c.httpGathers
	}
	if c.ops != nil && c.ops.pki != nil {
		ch <- c.pkiShips
		ch <- c.pkiVerdicts
	}
	if c.ops != nil && c.ops.front != nil {
		ch <- c.frontDatagrams
		ch <- c.frontSkipped
		ch <- c.frontQueueDrops
	}
	if c.ops != nil && c.ops.capture != nil {
		ch <- c.captureRecords
		ch <- c.captureBytes
		ch <- c.captureDropped
		ch <- c.captureRotations
		ch <- c.captureErrors
	}
}

// Collect reads the counters once and sends them.
func (c *relayCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.srv.Relay()
	snap := r.Counters().Snapshot()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, k := range relay.Kinds() {
		counter(c.packetsIn, snap.In[k], k.String())
		counter(c.packetsOut, snap.Out[k], k.String())
		counter(c.bytesIn, snap.InBytes[k], k.String())
		counter(c.bytesOut, snap.OutBytes[k], k.String())
	}
	counter(c.fromShipBytes, snap.FromShipSentBytes)
	for _, d := range relay.Drops() {
		counter(c.drops, snap.Drops[d], d.String())
	}
	for _, d := range relay.ShipDrops() {
		counter(c.fromShipDropped, snap.ShipDrops[d], d.String())
	}
	for _, e := range c.events {
		counter(e.desc, snap.Events[e.event])
	}

	ps := r.Pending().Stats()
	gauge(c.pendingEntries, float64(r.Pending().Len()))
	gauge(c.pendingCapacity, float64(r.Pending().Cap()))
	for i, v := range []uint64{ps.Added, ps.Retransmits, ps.Aggregated, ps.Joined, ps.RequesterCapped, ps.Refused, ps.SourceCapped, ps.Evicted, ps.Expired, ps.Taken, ps.Displaced} {
		counter(c.pendingOps, v, pendingOpNames[i])
	}
	counter(c.pendingShareRefusals, ps.OverflowShareCapped, "overflow")
	counter(c.pendingShareRefusals, ps.EntryShareCapped, "entry")
	counter(c.pendingShareRefusals, ps.RefusedShare, "full")
	gauge(c.routes, float64(r.Routes().Len()))
	gauge(c.routesCapacity, float64(r.Routes().Cap()))
	counter(c.routeChanges, r.Routes().Changes())
	counter(c.routesSourceRefused, r.Routes().SourceRefused())

	batches, datagrams := c.srv.BatchStats()
	counter(c.readBatches, batches)
	counter(c.readDatagrams, datagrams)
	counter(c.readErrors, c.srv.ReadErrors())
	counter(c.writeErrors, c.srv.WriteErrors())
	counter(c.kernelDrops, c.srv.KernelDrops())
	if recv, send, n := c.srv.SocketBuffers(); n > 0 {
		// Only sockets the kernel can be asked about (not the tests'
		// in-memory network).
		gauge(c.sockRecv, float64(recv))
		gauge(c.sockSend, float64(send))
		gauge(c.sockRecvAsked, socketBufferRequest)
		gauge(c.sockSendAsked, socketBufferRequest)
	}
	ch <- serviceHistogram(c.serviceTime, c.srv.ServiceTimes())
	gauge(c.buildInf, 1, c.version, c.revision, runtime.Version())

	if c.ops != nil {
		counter(c.reloads, c.ops.reloadsOK.Load(), "ok")
		counter(c.reloads, c.ops.reloadsFailed.Load(), "error")
		ok := 0.0
		if c.ops.lastLoadOK.Load() {
			ok = 1
		}
		gauge(c.lastReloadOK, ok)
		gauge(c.lastReloadAt, float64(c.ops.lastLoadAt.Load())/1e9)
		gauge(c.galaxyLanes, float64(c.ops.galaxyLanes.Load()))
		gauge(c.pinnedLanes, float64(c.ops.pinnedLanes.Load()))
		if v := c.ops.pki; v != nil {
			gauge(c.pkiShips, float64(v.Len()))
			for r, n := range v.Counts() {
				counter(c.pkiVerdicts, n, pki.Reason(r).String())
			}
		}
		if f := c.ops.front; f != nil {
			st := f.Stats()
			counter(c.frontDatagrams, st.Received, "from_ship")
			counter(c.frontDatagrams, st.Sent, "to_ship")
			for i, n := range frontSkipped(st) {
				counter(c.frontSkipped, n, frontSkipReasons[i])
			}
			counter(c.frontQueueDrops, f.Drops())
		}
		gauge(c.httpConns, float64(c.ops.http.conns.Load()))
		counter(c.httpRefused, c.ops.http.scrapesRefused.Load())
		counter(c.httpGathers, c.ops.http.gathers.Load())
	}
	if c.ops != nil && c.ops.capture != nil {
		cs := c.ops.capture.Stats()
		counter(c.captureRecords, cs.Records)
		counter(c.captureBytes, cs.Bytes)
		counter(c.captureDropped, cs.Dropped)
		counter(c.captureRotations, cs.Rotations)
		counter(c.captureErrors, cs.WriteErrors)
	}
}

// logSocketBuffers logs the socket buffers asked and granted: at info
// level when the kernel granted what was asked, else as a warning that
// says what to raise. Nothing is logged for sockets that cannot tell.
func logSocketBuffers(log *zap.Logger, srv *relay.Server) {
	recv, send, n := srv.SocketBuffers()
	if n == 0 {
		return
	}
	fields := []zap.Field{
		zap.Int("sockets", n),
		zap.Int("receive_requested", socketBufferRequest), zap.Int("receive_granted", recv),
		zap.Int("send_requested", socketBufferRequest), zap.Int("send_granted", send),
	}
	if recv < socketBufferRequest || send < socketBufferRequest {
		log.Warn("socket buffers smaller than requested; raise net.core.rmem_max / wmem_max or grant CAP_NET_ADMIN", fields...)
		return
	}
	log.Info("socket buffers", fields...)
}

// serviceHistogram exports h with one Prometheus bucket per power of two,
// 512 ns to 2^36 ns (the histogram's own buckets are hist.BucketsPerOctave
// times finer). The sum is estimated from bucket midpoints, since h keeps no
// sum.
func serviceHistogram(d *prometheus.Desc, h *relay.ServiceHistogram) prometheus.Metric {
	var snap [hist.Buckets]uint64
	h.Snapshot(snap[:])
	buckets := make(map[float64]uint64, hist.Buckets/hist.BucketsPerOctave)
	var count uint64
	var sum float64
	lower := time.Duration(0)
	for i, n := range snap {
		count += n
		upper := hist.Upper(i)
		sum += float64(n) * (lower + upper).Seconds() / 2
		lower = upper
		if i%hist.BucketsPerOctave == hist.BucketsPerOctave-1 || i == len(snap)-1 {
			buckets[upper.Seconds()] = count
		}
	}
	return prometheus.MustNewConstHistogram(d, count, sum, buckets)
}

// newMetricsRegistry returns a registry with the relay's metrics and the Go
// runtime and process collectors.
func newMetricsRegistry(srv *relay.Server, ops *opsStats, version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		newRelayCollector(srv, ops, version, buildRevision()),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}
