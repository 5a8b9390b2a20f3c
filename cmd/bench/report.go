package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/urbit-relay/relay/internal/hist"
	"github.com/urbit-relay/relay/internal/svgchart"
)

// result is one measured configuration.
type result struct {
	Name    string
	Role    string
	Pending int
	Sockets int
	Procs   int
	Pairs   int
	Rounds  []round // closed-loop measurements, in the order taken
	// Summaries of Rounds (medians unless said otherwise):
	RTPerSec     float64 // round trips per second
	RTMin, RTMax float64
	CPUPerDG     time.Duration // user+system per datagram
	User, Sys    time.Duration
	Batch        float64 // datagrams per read
	Allocs       float64 // heap allocations per datagram, worst round
	Drops        uint64  // kernel receive drops over all rounds
	Lost         uint64  // requests written off, over all rounds
	GSO          bool    // the server's socket sent with UDP GSO
	RSS          int64
	Heap         uint64
	// Open loop at a fixed rate:
	Rate     float64
	Answered float64
	Lat      []time.Duration // round trips, sorted
	Service  []uint64        // server service-time histogram (internal/hist buckets)
}

// summarize fills the summary fields from Rounds.
func (r *result) summarize() {
	var rates, user, sys, batch []float64
	var mallocs, datagrams uint64
	r.RTMin = math.Inf(1)
	for _, rd := range r.Rounds {
		rates = append(rates, rd.rate)
		user = append(user, float64(rd.user))
		sys = append(sys, float64(rd.sys))
		batch = append(batch, rd.batch)
		r.RTMin = math.Min(r.RTMin, rd.rate)
		r.RTMax = math.Max(r.RTMax, rd.rate)
		mallocs += rd.mallocs
		datagrams += rd.datagrams
		r.Drops += rd.drops
		r.Lost += rd.lost
	}
	// Allocations over all rounds' datagrams: a round starved by a busy
	// machine carries few datagrams, and the stats report's own few
	// allocations would dominate a ratio taken per round.
	if datagrams > 0 {
		r.Allocs = float64(mallocs) / float64(datagrams)
	}
	r.RTPerSec = median(rates)
	r.User, r.Sys = time.Duration(median(user)), time.Duration(median(sys))
	r.CPUPerDG = r.User + r.Sys
	r.Batch = median(batch)
}

// busy is the share of one core the server used in the closed loop: two
// datagrams per round trip at CPUPerDG each.
func (r *result) busy() float64 { return 2 * r.RTPerSec * r.CPUPerDG.Seconds() }

// ratio is r's throughput relative to base: the median over rounds of the
// ratio of the two rates measured in the same round, so that drift between
// rounds cancels.
func (r *result) ratio(base *result) float64 {
	var q []float64
	for k := range min(len(r.Rounds), len(base.Rounds)) {
		if base.Rounds[k].rate > 0 {
			q = append(q, r.Rounds[k].rate/base.Rounds[k].rate)
		}
	}
	return median(q)
}

func (r *result) pct(q float64) time.Duration {
	if len(r.Lat) == 0 {
		return 0
	}
	return r.Lat[min(len(r.Lat)-1, int(q*float64(len(r.Lat))))]
}

// service returns quantile q of the server's service time during the open
// loop.
func (r *result) service(q float64) time.Duration { return hist.Quantile(r.Service, q) }

type report struct {
	cfg      benchConfig
	rounds   int
	results  []*result
	noGSO    []*result // the bare forwarder and the empty relay with GSO off
	scaling  []*result
	halfRate float64
	when     time.Time
}

// runAll measures the main configurations, then (unless quick) the
// scaling ones.
func runAll(cfg benchConfig, rounds int, quick bool) (*report, error) {
	rep := &report{cfg: cfg, rounds: rounds, when: time.Now()}
	// Servers with one socket have one reader goroutine: they run with
	// GOMAXPROCS=1, leaving the other core to the load generator (the
	// scaling runs below vary it).
	scs := []scenario{
		{name: "bare forwarder", role: "forward", sockets: 1, procs: 1},
		{name: "relay, table empty", role: "relay", sockets: 1, procs: 1},
		{name: "relay, 100k pending", role: "relay", pending: 100_000, sockets: 1, procs: 1},
	}
	if !quick {
		scs = append(scs, scenario{name: "relay, 1M pending", role: "relay", pending: 1_000_000, sockets: 1, procs: 1})
	}
	var err error
	// Latency is measured at half the empty relay's median rate.
	if rep.results, err = measureSet(cfg, cfg.pairs, scs, rounds, 1); err != nil {
		return nil, err
	}
	rep.halfRate = rep.results[1].Rate
	if quick {
		return rep, nil
	}
	off := cfg
	off.noGSO = true
	if rep.noGSO, err = measureSet(off, cfg.pairs, scs[:2], rounds, -1); err != nil {
		return nil, err
	}
	scs = nil
	for _, s := range []struct{ procs, sockets int }{{1, 1}, {2, 1}, {2, 2}} {
		for _, role := range []string{"forward", "relay"} {
			name := fmt.Sprintf("%s GOMAXPROCS=%d sockets=%d", role, s.procs, s.sockets)
			scs = append(scs, scenario{name: name, role: role, sockets: s.sockets, procs: s.procs})
		}
	}
	if rep.scaling, err = measureSet(cfg, 4, scs, rounds, -1); err != nil {
		return nil, err
	}
	return rep, nil
}

func (rep *report) write(out, plots string) error {
	if err := os.MkdirAll(plots, 0o755); err != nil {
		return err
	}
	base := rep.results[0]
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Benchmarks\n\nMade by `go run ./cmd/bench` on %s (%s, %d CPUs, %s, %s). Regenerate with that command;\n",
		rep.when.UTC().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), kernel(), runtime.Version())
	fmt.Fprintf(&b, "`-quick` skips the 1M-entry and scaling runs. Host %q. The load generator runs on the same machine.\n\n", host)
	fmt.Fprintf(&b, `Each configuration runs as its own child process, driven by the same generator over loopback:
%d requester sockets send peeks through the server to %d publisher sockets, which answer
with %d-byte pages. The **bare forwarder** uses the same sockets and batching
(recvmmsg/sendmmsg, 64 per call) and decides nothing: it maps a requester port to its publisher port by
arithmetic. It is the limit this machine allows, not a peer. All children of a table run at once and
are measured in turn, %d rounds of %v each (after %v of warm-up), so that the machine's drift falls on
all alike; a rate is the median of its rounds (min-max beside it), and "vs baseline" is the median of
the per-round ratios to the forwarder. Throughput is closed loop (%d requests in flight per pair);
latency is open loop at half the empty relay's median rate (%.0f requests/s) for every configuration.
The pending table is pre-filled with requests that are never answered. Each server runs with
GOMAXPROCS=1 (one socket, one reader goroutine), leaving the other core to the generator; the scaling
runs vary GOMAXPROCS and the number of sockets.

`, rep.cfg.pairs, rep.cfg.pairs, rep.cfg.page, rep.rounds, rep.cfg.duration, warmUp, rep.cfg.window, rep.halfRate)
	b.WriteString("Where the time goes, and what was changed to get here: [docs/performance.md](docs/performance.md).\n\n")
	b.WriteString("*Server core busy* is the share of one core the server used during the closed loop: a server near 100%\n")
	b.WriteString("is the bottleneck, one below it waits on the generator. *CPU vs baseline* is the forwarder's CPU per\n")
	b.WriteString("datagram over the configuration's: the throughput ratio a machine would show where the server alone\n")
	b.WriteString("limits both (the generator elsewhere).\n\n")
	b.WriteString("| configuration | round trips/s | min-max | vs baseline | CPU/datagram (user+sys) | server core busy | CPU vs baseline | datagrams/read | allocs/datagram | RSS | heap | B/pending entry | kernel drops |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var empty *result
	for _, r := range rep.results {
		if r.Role == "relay" && r.Pending == 0 {
			empty = r
		}
		perEntry := "-"
		if r.Pending > 0 && empty != nil {
			perEntry = fmt.Sprintf("%.0f", float64(int64(r.Heap)-int64(empty.Heap))/float64(r.Pending))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f-%.0f | %.0f%% | %v (%v+%v) | %.0f%% | %.0f%% | %.1f | %.3f | %.1f MiB | %.1f MiB | %s | %d |\n",
			r.Name, r.RTPerSec, r.RTMin, r.RTMax, 100*r.ratio(base), r.CPUPerDG, r.User, r.Sys, 100*r.busy(),
			100*float64(base.CPUPerDG)/float64(max(r.CPUPerDG, 1)), r.Batch, r.Allocs,
			float64(r.RSS)/(1<<20), float64(r.Heap)/(1<<20), perEntry, r.Drops)
	}
	fmt.Fprintf(&b, "\nLatency at %.0f requests/s, open loop. *Round trip* is requester to publisher and back through the\n", rep.halfRate)
	b.WriteString("server, as the generator sees it (its own scheduling included). *In server* is the time a datagram spends\n")
	b.WriteString("inside the server process, from the return of the read that brought it to the return of its batch's last\n")
	b.WriteString("write (`relay_service_seconds`; log-linear buckets, upper bounds shown).\n\n")
	b.WriteString("| configuration | round trip p50 | p99 | p99.9 | in server p50 | p99 | p99.9 | answered |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.results {
		fmt.Fprintf(&b, "| %s | %v | %v | %v | %v | %v | %v | %.2f%% |\n", r.Name,
			r.pct(0.5).Round(time.Microsecond), r.pct(0.99).Round(time.Microsecond), r.pct(0.999).Round(time.Microsecond),
			r.service(0.5), r.service(0.99), r.service(0.999), 100*r.Answered)
	}
	if empty != nil {
		fmt.Fprintf(&b, "\nAdded latency of the empty relay over the bare forwarder at the same rate: in server p50 %v, p99 %v, p99.9 %v;\n",
			empty.service(0.5)-base.service(0.5), empty.service(0.99)-base.service(0.99), empty.service(0.999)-base.service(0.999))
		fmt.Fprintf(&b, "round trip p50 %v, p99 %v, p99.9 %v (the round-trip figures carry the generator's own jitter).\n",
			(empty.pct(0.5) - base.pct(0.5)).Round(time.Microsecond), (empty.pct(0.99) - base.pct(0.99)).Round(time.Microsecond),
			(empty.pct(0.999) - base.pct(0.999)).Round(time.Microsecond))
	}
	b.WriteString("\n![round trips per second against pending entries](" + filepath.ToSlash(filepath.Join(plots, "throughput.svg")) + ")\n")
	b.WriteString("![latency CDF at half load](" + filepath.ToSlash(filepath.Join(plots, "latency.svg")) + ")\n")
	b.WriteString("![time in the server, CDF at half load](" + filepath.ToSlash(filepath.Join(plots, "service.svg")) + ")\n")
	if len(rep.noGSO) == 2 {
		b.WriteString("\n## UDP GSO\n\nThe same two configurations with GSO off on every socket (`\"io\": {\"gso\": false}` in the relay's config), generator included, measured side by side as above:\n\n")
		b.WriteString("| configuration | round trips/s | min-max | vs forwarder | CPU/datagram (user+sys) | GSO on, for comparison |\n|---|---|---|---|---|---|\n")
		for i, r := range rep.noGSO {
			fmt.Fprintf(&b, "| %s, GSO off | %.0f | %.0f-%.0f | %.0f%% | %v (%v+%v) | %.0f |\n", r.Name, r.RTPerSec, r.RTMin, r.RTMax,
				100*r.ratio(rep.noGSO[0]), r.CPUPerDG, r.User, r.Sys, rep.results[i].RTPerSec)
		}
	}
	if len(rep.scaling) > 0 {
		b.WriteString("\n## Scaling past one core\n\nFour pairs, table empty, measured side by side as above; `sockets=2` is two SO_REUSEPORT sockets (the relay's opt-in `io.sockets`), each with its own reader.\n\n")
		b.WriteString("| configuration | round trips/s | min-max | vs forwarder alike | CPU/datagram (user+sys) |\n|---|---|---|---|---|\n")
		for i, r := range rep.scaling {
			vs := "-"
			if r.Role == "relay" && i > 0 && rep.scaling[i-1].Role == "forward" {
				vs = fmt.Sprintf("%.0f%%", 100*r.ratio(rep.scaling[i-1]))
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.0f-%.0f | %s | %v (%v+%v) |\n", r.Name, r.RTPerSec, r.RTMin, r.RTMax, vs, r.CPUPerDG, r.User, r.Sys)
		}
	}
	// What other commands measured (compare, download mode) follows the
	// marker in the file, and is kept.
	if prev, err := os.ReadFile(out); err == nil {
		if i := strings.Index(string(prev), keepMarker); i >= 0 {
			b.WriteString("\n" + string(prev[i:]))
		}
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(plots, "throughput.svg"), rep.throughputSVG(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(plots, "service.svg"), rep.serviceSVG(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(plots, "latency.svg"), rep.latencySVG(), 0o644)
}

// keepMarker starts the part of the report file a full run keeps as it is:
// the figures of -variants and -download runs, written by hand.
const keepMarker = "<!-- kept by cmd/bench: measured by the commands given -->"

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "model name") {
			return strings.TrimSpace(l[strings.IndexByte(l, ':')+1:])
		}
	}
	return runtime.GOARCH
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return "Linux " + strings.TrimSpace(string(b))
}

// throughputSVG plots the relay's round trips per second against its
// pending entries (median, with the rounds' min-max as a bar), against the
// bare forwarder's median and 85% of it as reference lines.
func (rep *report) throughputSVG() []byte {
	chart := svgchart.LineChart{
		Title:  fmt.Sprintf("Round trips per second against pending entries (closed loop, median of %d rounds)", rep.rounds),
		XLabel: "pending entries", YLabel: "round trips per second",
	}
	s := svgchart.Series{Name: "relay"}
	for _, r := range rep.results {
		if r.Role == "forward" {
			chart.Refs = append(chart.Refs,
				svgchart.Ref{Y: r.RTPerSec, Name: "bare forwarder"},
				svgchart.Ref{Y: 0.85 * r.RTPerSec, Name: "85% of forwarder", Dashed: true})
			continue
		}
		i := float64(len(s.X))
		chart.XTicks = append(chart.XTicks, svgchart.Tick{At: i, Label: pendingLabel(r.Pending)})
		s.X, s.Y = append(s.X, i), append(s.Y, r.RTPerSec)
		s.Lo, s.Hi = append(s.Lo, r.RTMin), append(s.Hi, r.RTMax)
		s.Labels = append(s.Labels, fmt.Sprintf("%.0fk", r.RTPerSec/1000))
	}
	chart.Series = []svgchart.Series{s}
	chart.LegendBottom = true
	return chart.Render()
}

// pendingLabel writes n as 0, 100k or 1M.
func pendingLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// latencySVG plots each configuration's round-trip CDF.
func (rep *report) latencySVG() []byte {
	var series []svgchart.CDFSeries
	for _, r := range rep.results {
		var pts []svgchart.CDFPoint
		for j := 0; j < len(r.Lat); {
			pts = append(pts, svgchart.CDFPoint{D: r.Lat[j], Q: float64(j) / float64(len(r.Lat))})
			// Denser past the 99th percentile, where the tail is drawn.
			if j < len(r.Lat)*99/100 {
				j += max(1, len(r.Lat)/400)
			} else {
				j += max(1, len(r.Lat)/20000)
			}
		}
		if len(r.Lat) > 0 {
			pts = append(pts, svgchart.CDFPoint{D: r.Lat[len(r.Lat)-1], Q: 1})
		}
		series = append(series, svgchart.CDFSeries{Name: r.Name, Points: pts})
	}
	return svgchart.CDFChart{Title: fmt.Sprintf("Round-trip latency CDF at %.0f requests/s", rep.halfRate), Series: series}.Render()
}

// serviceSVG plots each configuration's in-server time CDF from its
// histogram: a step at each bucket's upper bound.
func (rep *report) serviceSVG() []byte {
	var series []svgchart.CDFSeries
	for _, r := range rep.results {
		total, seen := hist.Total(r.Service), uint64(0)
		var pts []svgchart.CDFPoint
		for i, c := range r.Service {
			if c == 0 || total == 0 {
				continue
			}
			pts = append(pts, svgchart.CDFPoint{D: hist.Lower(i), Q: float64(seen) / float64(total)})
			seen += c
			pts = append(pts, svgchart.CDFPoint{D: hist.Upper(i), Q: float64(seen) / float64(total)})
		}
		series = append(series, svgchart.CDFSeries{Name: r.Name, Points: pts})
	}
	return svgchart.CDFChart{Title: fmt.Sprintf("Time in the server (read to last write), CDF at %.0f requests/s", rep.halfRate), Series: series}.Render()
}
