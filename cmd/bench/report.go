package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// result is one measured configuration.
type result struct {
	Name     string
	Role     string
	Pending  int
	Sockets  int
	Procs    int
	Pairs    int
	RTPerSec float64 // closed-loop round trips per second
	CPUPerDG time.Duration
	Allocs   float64 // heap allocations per datagram, server side
	RSS      int64
	Heap     uint64
	Drops    uint64 // kernel receive drops at the server
	Lost     uint64 // requests written off by the generator
	Batch    float64
	// Open loop at a fixed rate:
	Rate     float64
	Answered float64
	Lat      []time.Duration // sorted
}

func (r *result) pct(q float64) time.Duration {
	if len(r.Lat) == 0 {
		return 0
	}
	return r.Lat[min(len(r.Lat)-1, int(q*float64(len(r.Lat))))]
}

type report struct {
	cfg      benchConfig
	results  []*result
	scaling  []*result
	halfRate float64
	when     time.Time
}

func runAll(cfg benchConfig, quick bool) (*report, error) {
	rep := &report{cfg: cfg, when: time.Now()}
	type sc struct {
		name, role string
		pending    int
	}
	main := []sc{{"bare forwarder", "forward", 0}, {"relay, table empty", "relay", 0}, {"relay, 100k pending", "relay", 100_000}}
	if !quick {
		main = append(main, sc{"relay, 1M pending", "relay", 1_000_000})
	}
	// Latency is measured at half the empty relay's maximum for every
	// configuration, so the empty relay runs first.
	// Servers with one socket have one reader goroutine: they run with
	// GOMAXPROCS=1, leaving the other core to the load generator (the
	// scaling runs below vary it).
	empty, err := measure(cfg, main[1].name, "relay", 0, 1, 1, cfg.pairs, -1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", main[1].name, err)
	}
	rep.halfRate = empty.Rate
	for i, s := range main {
		r := empty
		if i != 1 {
			if r, err = measure(cfg, s.name, s.role, s.pending, 1, 1, cfg.pairs, rep.halfRate); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
		}
		rep.results = append(rep.results, r)
		fmt.Fprintf(os.Stderr, "%-24s %9.0f rt/s  cpu %v/datagram  %.1f/read  p50 %v p99 %v\n", r.Name, r.RTPerSec, r.CPUPerDG, r.Batch, r.pct(0.5), r.pct(0.99))
	}
	if !quick {
		for _, s := range []struct{ procs, sockets int }{{1, 1}, {2, 1}, {2, 2}} {
			for _, role := range []string{"forward", "relay"} {
				name := fmt.Sprintf("%s GOMAXPROCS=%d sockets=%d", role, s.procs, s.sockets)
				r, err := measure(cfg, name, role, 0, s.sockets, s.procs, 4, 0)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				rep.scaling = append(rep.scaling, r)
				fmt.Fprintf(os.Stderr, "%-36s %9.0f rt/s\n", name, r.RTPerSec)
			}
		}
	}
	return rep, nil
}

// measure runs one configuration in a fresh child: throughput closed loop,
// then latency open loop at rate (half the measured throughput if rate < 0;
// skipped if 0).
func measure(cfg benchConfig, name, role string, pending, sockets, procs, pairs int, rate float64) (*result, error) {
	cfg.pairs = pairs
	c, err := startChild(role, sockets, procs, cfg)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	g, err := newLoadGen(c.addr, pairs, cfg.base, cfg.page)
	if err != nil {
		return nil, err
	}
	var pubs sync.WaitGroup
	g.runPublishers(&pubs)
	defer func() {
		g.close()
		pubs.Wait()
	}()
	r := &result{Name: name, Role: role, Pending: pending, Sockets: sockets, Procs: procs, Pairs: pairs}
	if pending > 0 {
		if err := g.prefill(pending, func() int {
			s, err := c.stats()
			if err != nil {
				return 0
			}
			return s.Pending
		}); err != nil {
			return nil, err
		}
	}
	g.closedLoop(cfg.window, time.Second) // warm up
	s0, err := c.stats()
	if err != nil {
		return nil, err
	}
	cpu0 := c.cpuTime()
	lost0 := g.lost.Load()
	r.RTPerSec = g.closedLoop(cfg.window, cfg.duration)
	cpu1 := c.cpuTime()
	s1, err := c.stats()
	if err != nil {
		return nil, err
	}
	dg := s1.Datagrams - s0.Datagrams
	if dg > 0 {
		r.CPUPerDG = (cpu1 - cpu0) / time.Duration(dg)
		r.Allocs = float64(s1.Mallocs) / float64(dg)
	}
	if b := s1.BatchesRead - s0.BatchesRead; b > 0 {
		r.Batch = float64(dg) / float64(b)
	}
	r.Drops = s1.KernelDrops
	r.Lost = g.lost.Load() - lost0
	r.RSS = c.rss()
	r.Heap = s1.HeapInuse
	if rate < 0 {
		rate = r.RTPerSec / 2
	}
	if rate > 0 {
		r.Rate = rate
		r.Lat, r.Answered = g.openLoop(rate, cfg.duration)
	}
	return r, nil
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
	b.WriteString(`Each configuration runs as its own child process, driven by the same generator over loopback:
` + fmt.Sprintf("%d", rep.cfg.pairs) + ` requester sockets send peeks through the server to ` + fmt.Sprintf("%d", rep.cfg.pairs) + ` publisher sockets, which answer
with ` + fmt.Sprintf("%d", rep.cfg.page) + `-byte pages. The **bare forwarder** uses the same sockets and batching
(recvmmsg/sendmmsg, 64 per call) and decides nothing: it maps a requester port to its publisher port by
arithmetic. It is the limit this machine allows, not a peer. Throughput is closed loop (` + fmt.Sprintf("%d", rep.cfg.window) + ` requests in
flight per pair, ` + rep.cfg.duration.String() + `); latency is open loop at half the empty relay's maximum (` + fmt.Sprintf("%.0f", rep.halfRate) + ` requests/s)
for every configuration. The pending table is pre-filled with requests that are never answered.
Each server runs with GOMAXPROCS=1 (one socket, one reader goroutine), leaving the other core to the
generator; the scaling runs vary GOMAXPROCS and the number of sockets.

`)
	b.WriteString("| configuration | round trips/s | vs baseline | CPU/datagram | datagrams/read | allocs/datagram | p50 | p99 | p99.9 | answered | RSS | heap | B/pending entry | kernel drops |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var empty *result
	for _, r := range rep.results {
		if r.Role == "relay" && r.Pending == 0 {
			empty = r
		}
		perEntry := "-"
		if r.Pending > 0 && empty != nil {
			perEntry = fmt.Sprintf("%.0f", float64(int64(r.Heap)-int64(empty.Heap))/float64(r.Pending))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f%% | %v | %.1f | %.3f | %v | %v | %v | %.2f%% | %.1f MiB | %.1f MiB | %s | %d |\n",
			r.Name, r.RTPerSec, 100*r.RTPerSec/base.RTPerSec, r.CPUPerDG, r.Batch, r.Allocs,
			r.pct(0.5).Round(time.Microsecond), r.pct(0.99).Round(time.Microsecond), r.pct(0.999).Round(time.Microsecond),
			100*r.Answered, float64(r.RSS)/(1<<20), float64(r.Heap)/(1<<20), perEntry, r.Drops)
	}
	if empty != nil {
		fmt.Fprintf(&b, "\nAdded latency of the empty relay over the bare forwarder at the same rate: p50 %v, p99 %v, p99.9 %v.\n",
			(empty.pct(0.5) - base.pct(0.5)).Round(time.Microsecond), (empty.pct(0.99) - base.pct(0.99)).Round(time.Microsecond),
			(empty.pct(0.999) - base.pct(0.999)).Round(time.Microsecond))
	}
	b.WriteString("\n![round trips per second against pending entries](" + filepath.ToSlash(filepath.Join(plots, "throughput.svg")) + ")\n")
	b.WriteString("![latency CDF at half load](" + filepath.ToSlash(filepath.Join(plots, "latency.svg")) + ")\n")
	if len(rep.scaling) > 0 {
		b.WriteString("\n## Scaling past one core\n\nFour pairs, table empty; `sockets=2` is two SO_REUSEPORT sockets (the relay's opt-in `--sockets`), each with its own reader.\n\n")
		b.WriteString("| configuration | round trips/s | CPU/datagram |\n|---|---|---|\n")
		for _, r := range rep.scaling {
			fmt.Fprintf(&b, "| %s | %.0f | %v |\n", r.Name, r.RTPerSec, r.CPUPerDG)
		}
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(plots, "throughput.svg"), rep.throughputSVG(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(plots, "latency.svg"), rep.latencySVG(), 0o644)
}

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

// throughputSVG is a bar chart of round trips per second per configuration.
func (rep *report) throughputSVG() []byte {
	const w, h, left, bottom = 720, 360, 70, 90
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`, w, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">Round trips per second (closed loop)</text>`, left)
	top := 0.0
	for _, r := range rep.results {
		top = math.Max(top, r.RTPerSec)
	}
	top *= 1.1
	plotH := float64(h - bottom - 40)
	bw := float64(w-left-20) / float64(len(rep.results))
	for i, r := range rep.results {
		bh := plotH * r.RTPerSec / top
		x := float64(left) + float64(i)*bw + bw*0.15
		y := float64(h-bottom) - bh
		color := "#4a7ab5"
		if r.Role == "forward" {
			color = "#999"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x, y, bw*0.7, bh, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%.0fk</text>`, x+bw*0.35, y-4, r.RTPerSec/1000)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x+bw*0.35, h-bottom+16, r.Name)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`, left, h-bottom, w-10, h-bottom)
	b.WriteString(`</svg>`)
	return b.Bytes()
}

// latencySVG plots the latency CDF of each configuration (log time axis).
func (rep *report) latencySVG() []byte {
	const w, h, left, bottom, right, top = 720, 400, 60, 50, 180, 30
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`, w, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">Round-trip latency CDF at %.0f requests/s</text>`, left, rep.halfRate)
	lo, hi := math.Inf(1), 0.0
	for _, r := range rep.results {
		if len(r.Lat) > 0 {
			lo = math.Min(lo, float64(r.Lat[0]))
			hi = math.Max(hi, float64(r.Lat[len(r.Lat)-1]))
		}
	}
	if hi <= lo {
		b.WriteString(`</svg>`)
		return b.Bytes()
	}
	lo, hi = math.Log10(math.Max(lo, 1000)), math.Log10(hi)
	px := func(d time.Duration) float64 {
		return left + (math.Log10(math.Max(float64(d), 1000))-lo)/(hi-lo)*float64(w-left-right)
	}
	py := func(q float64) float64 { return float64(h-bottom) - q*float64(h-bottom-top) }
	colors := []string{"#999", "#4a7ab5", "#d9822b", "#c23b22", "#3a9a5b"}
	for i, r := range rep.results {
		if len(r.Lat) == 0 {
			continue
		}
		b.WriteString(`<polyline fill="none" stroke-width="2" stroke="` + colors[i%len(colors)] + `" points="`)
		step := max(1, len(r.Lat)/400)
		for j := 0; j < len(r.Lat); j += step {
			fmt.Fprintf(&b, "%.1f,%.1f ", px(r.Lat[j]), py(float64(j)/float64(len(r.Lat))))
		}
		fmt.Fprintf(&b, "%.1f,%.1f", px(r.Lat[len(r.Lat)-1]), py(1))
		b.WriteString(`"/>`)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`, w-right+10, top+20+18*i, colors[i%len(colors)], r.Name)
	}
	for e := math.Ceil(lo); e <= hi; e++ {
		x := left + (e-lo)/(hi-lo)*float64(w-left-right)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%v</text>`,
			x, top, x, h-bottom, x, h-bottom+16, time.Duration(math.Pow(10, e)))
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`, left-6, py(q)+4, q)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`, left, h-bottom, w-right, h-bottom)
	b.WriteString(`</svg>`)
	return b.Bytes()
}
