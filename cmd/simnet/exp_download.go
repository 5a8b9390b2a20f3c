package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/internal/svgchart"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/scry"
)

const (
	// DownloadFragments is the size of the downloaded message in
	// fragments (-fragments); DownloadFragmentsShort that of a -short run.
	DownloadFragments      = 2000
	DownloadFragmentsShort = 100
	// DownloadPageBytes is the size a fragment's page leaves its publisher
	// at: a near-full datagram (scry.MesaMaxPacket is 1,472 bytes, and a
	// relay adds a 6-byte next-hop).
	DownloadPageBytes = 1400
	// DownloadPairs and DownloadPairsShort are the downloads of a run,
	// each a requester fetching a message of its own from a publisher of
	// its own, all at once.
	DownloadPairs      = 4
	DownloadPairsShort = 2
	// DownloadDeadline is how long a run waits for its downloads (virtual
	// time): fragments not in by then count as missing.
	DownloadDeadline      = 4 * time.Hour
	DownloadDeadlineShort = 30 * time.Minute
	// downloadStep is how often a run checks whether every download is
	// done, so that it stops soon after.
	downloadStep = 10 * time.Second
	// downloadPlotPoints is how many points a download's curve is drawn
	// with.
	downloadPlotPoints = 200

	streamDownload = 0x646c6f64
)

// downloadWindows are the request windows compared: how many fragments a
// requester asks for before the first is answered. A mesa flow keeps a
// window of fragments in flight; 1 is a stop-and-wait transfer.
func downloadWindows() []int { return []int{32, 1} }

// dlVariant is one way of running a download.
type dlVariant struct {
	name string
	// nat: the publisher is behind a NAT, so every page comes through
	// its sponsor's relay; otherwise it is public (its twin: a planet
	// under the same star) and the route tightens to it.
	nat bool
	// budgetOff runs the relays without the amplification budget
	// (sim.Config.NoAmpBudget).
	budgetOff bool
}

func dlVariants() []dlVariant {
	return []dlVariant{
		{name: "behind a NAT, through relays", nat: true},
		{name: "behind a NAT, through relays, budget off", nat: true, budgetOff: true},
		{name: "public (direct)"},
		{name: "public (direct), budget off", budgetOff: true},
	}
}

// dlPair is one download: requester fetches a message from natPub (behind a
// NAT) or, in the direct variants, from pub, a public planet with the same
// sponsor.
type dlPair struct{ requester, natPub, pub int }

// dlRun is one (window, variant)'s outcome over its pairs.
type dlRun struct {
	fragments int // per download
	pairs     int
	// completion is, by pair, the time from the first request to the last
	// fragment's arrival, in seconds; NaN if the download did not finish.
	completion []float64
	got        int // fragments received, all pairs
	firstTry   int // of those, answered before any re-send
	tries      int // sends of the fragments' requests, all pairs
	viaRelay   int // pages that came through a relay (hops > 0)
	direct     int // pages straight from the publisher (hops 0)
	msgs       uint64
	// throttled are the pages the relays' amplification budget refused
	// over the run (relay.EventAmpThrottled; none before the downloads).
	throttled uint64
	// arrivals are every fragment's arrival, from the start of its
	// download, sorted.
	arrivals []time.Duration
	// peekBytes and pageLen are the sizes of a fragment's request and
	// page (the first pair's middle fragment).
	peekBytes, pageLen int
}

type downloadResult struct {
	peekBytes, pageLen int
	runs               []dlRun // by window, then variant
}

// downloadPairs picks the downloads of p's network: publishers are planets
// behind a NAT whose star also sponsors a public planet (the direct
// variants' publisher), requesters public planets under another galaxy.
// They depend on the seed and the topology only, so every run has the same.
func downloadPairs(p params, ships []sim.Ship) ([]dlPair, error) {
	want := DownloadPairs
	if p.short {
		want = DownloadPairsShort
	}
	rng := rand.New(rand.NewPCG(p.seed, streamDownload))
	public := map[int][]int{} // sponsor → its public planets running no relay
	var nat, reqs []int
	for i := range ships {
		s := &ships[i]
		if s.Class != lane.Planet || s.Host {
			continue
		}
		if s.NAT {
			nat = append(nat, i)
		} else {
			public[s.Sponsor] = append(public[s.Sponsor], i)
			reqs = append(reqs, i)
		}
	}
	nat, reqs = shuffled(rng, nat), shuffled(rng, reqs)
	used := map[int]bool{}
	var out []dlPair
	for _, np := range nat {
		if len(out) == want {
			break
		}
		var twins []int
		for _, t := range public[ships[np].Sponsor] {
			if !used[t] {
				twins = append(twins, t)
			}
		}
		if len(twins) == 0 {
			continue
		}
		pub := twins[rng.IntN(len(twins))]
		rq := -1
		for _, r := range reqs {
			if !used[r] && r != pub && ships[r].Galaxy != ships[np].Galaxy {
				rq = r
				break
			}
		}
		if rq < 0 {
			break
		}
		used[np], used[pub], used[rq] = true, true, true
		out = append(out, dlPair{requester: rq, natPub: np, pub: pub})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("download: %d ships have no planet behind a NAT with a public sibling and a requester apart", len(ships))
	}
	return out, nil
}

// fragmentPath names fragment i of the message requester downloads: a
// path per fragment, since endpoint.Core peeks fragment 0 of a path. A mesa
// flow names fragment i by the message's path and i in the name's fragment
// field instead; the peek is the same size within a few bytes, and a relay
// keeps a pending entry per fragment either way.
func fragmentPath(requester lane.Ship, i int) string {
	return fmt.Sprintf("mess/%s/1/%d", requester, i)
}

// pageLen is the length of the page an endpoint answers name with when its
// value is payload bytes long (endpoint.Core's reply).
func pageLen(name scry.Name, payload int) int {
	pg := scry.Packet{
		Header: scry.Header{Version: scry.MesaVersion, Type: scry.TypePage},
		Name:   name,
		Data:   scry.Data{Total: uint64(payload), AuthKind: scry.AuthNone, Frag: make([]byte, payload)},
	}
	return len(pg.Append(nil))
}

// downloadPayload returns the fragment size that makes fragment i's page
// about DownloadPageBytes long, and the peek's length.
func downloadPayload(pub, requester lane.Ship, i int) (payload, peek int) {
	name := scry.Name{Ship: pub, Bloq: scry.DefaultBloq, Path: []byte(fragmentPath(requester, i))}
	pk := scry.NewPeek(name)
	over := pageLen(name, DownloadPageBytes) - DownloadPageBytes
	return DownloadPageBytes - over, len(pk.Append(nil))
}

func runDownload(p params) (*downloadResult, error) {
	frags := p.fragments
	if frags <= 0 {
		frags = DownloadFragments
		if p.short {
			frags = DownloadFragmentsShort
		}
	}
	res := &downloadResult{}
	var jobs []func() error
	for _, w := range downloadWindows() {
		for _, v := range dlVariants() {
			i := len(res.runs)
			res.runs = append(res.runs, dlRun{})
			jobs = append(jobs, func() error {
				r, err := downloadOnce(p, w, v, frags)
				res.runs[i] = r
				return err
			})
		}
	}
	if err := parallel(p.workers, jobs); err != nil {
		return nil, err
	}
	res.peekBytes, res.pageLen = res.runs[0].peekBytes, res.runs[0].pageLen
	return res, nil
}

// downloadOnce runs every pair's download of frags fragments with window
// requests in flight, under variant v, on the design strategy, fast preset.
func downloadOnce(p params, window int, v dlVariant, frags int) (dlRun, error) {
	cfg := p.config(strategyDesign(), sim.Fast())
	cfg.NoAmpBudget = v.budgetOff
	n, err := sim.New(cfg)
	if err != nil {
		return dlRun{}, err
	}
	ships := n.Ships()
	pairs, err := downloadPairs(p, ships)
	if err != nil {
		return dlRun{}, err
	}
	r := dlRun{fragments: frags, pairs: len(pairs), completion: make([]float64, len(pairs))}
	deadline := DownloadDeadline
	if p.short {
		deadline = DownloadDeadlineShort
	}
	// The publishers' stars and galaxies carry the downloads: they run
	// production's table sizes, so that what the budget holds for a
	// requester is never shared with another address in a slot.
	for _, pr := range pairs {
		if err := n.ProductionTablesOnChain(pr.pub); err != nil {
			return dlRun{}, err
		}
		if err := n.ProductionTablesOnChain(pr.natPub); err != nil {
			return dlRun{}, err
		}
	}
	start := WarmUp
	var failed error
	var paths []string
	remaining := len(pairs)
	for pi, pr := range pairs {
		pub := pr.pub
		if v.nat {
			pub = pr.natPub
		}
		rqID := ships[pr.requester].ID
		r.completion[pi] = math.NaN()
		for i := range frags {
			path := fragmentPath(rqID, i)
			payload, peek := downloadPayload(ships[pub].ID, rqID, i)
			n.Publish(pub, path, make([]byte, payload))
			paths = append(paths, path)
			if pi == 0 && i == frags/2 {
				r.peekBytes = peek
				r.pageLen = pageLen(scry.Name{Ship: ships[pub].ID, Bloq: scry.DefaultBloq, Path: []byte(path)}, payload)
			}
		}
		next, got := 0, 0
		var ask func()
		ask = func() {
			i := next
			next++
			err := n.Peek(pr.requester, pub, fragmentPath(rqID, i), 0, func(res sim.Result) {
				got++
				r.got++
				r.tries += res.Tries
				if res.Tries == 1 {
					r.firstTry++
				}
				if res.Hops == 0 {
					r.direct++
				} else {
					r.viaRelay++
				}
				r.arrivals = append(r.arrivals, res.End-start)
				if got == frags {
					r.completion[pi] = (res.End - start).Seconds()
					remaining--
				}
				if next < frags {
					ask()
				}
			})
			if err != nil && failed == nil {
				failed = err
			}
		}
		n.At(start, func() {
			for next < min(window, frags) {
				ask()
			}
		})
	}
	for t := start; t < start+deadline && remaining > 0; {
		t += downloadStep
		n.RunUntil(t)
	}
	if failed != nil {
		return dlRun{}, fmt.Errorf("download: %w", failed)
	}
	r.throttled = n.RelayTotals().Events[relay.EventAmpThrottled]
	for _, path := range paths {
		r.msgs += n.Track(path).Msgs
	}
	slices.Sort(r.arrivals)
	return r, nil
}

// run returns the run for window index wi (downloadWindows) and variant
// index vi (dlVariants): runDownload appends them in that order.
func (r *downloadResult) run(wi, vi int) *dlRun { return &r.runs[wi*len(dlVariants())+vi] }

// Variant indexes in dlVariants.
const (
	dlNAT = iota
	dlNATOff
	dlDirect
	dlDirectOff
)

// duration formats seconds for the document: "12.0 s", "1 min 35 s",
// "1 h 48 min".
func duration(s float64) string {
	switch {
	case math.IsNaN(s):
		return "unfinished"
	case s < 60:
		return fmt.Sprintf("%.1f s", s)
	case s < 3600:
		m := math.Floor(s / 60)
		return fmt.Sprintf("%.0f min %.0f s", m, s-60*m)
	}
	h := math.Floor(s / 3600)
	return fmt.Sprintf("%.0f h %.0f min", h, (s-3600*h)/60)
}

// unfinished returns how many of d's downloads did not finish.
func (d *dlRun) unfinished() int {
	k := 0
	for _, c := range d.completion {
		if math.IsNaN(c) {
			k++
		}
	}
	return k
}

// meanCompletion is the mean completion time in seconds, NaN if a download
// did not finish.
func (d *dlRun) meanCompletion() float64 { return mean(d.completion) }

func (r *downloadResult) section() section {
	d0 := &r.runs[0]
	var b strings.Builder
	fmt.Fprintf(&b, "A requester (a public planet) downloads a %d-fragment message from a publisher (a planet behind a NAT) under another galaxy, with a request window: it asks for that many fragments at once and for the next each time one arrives; an unanswered request is re-sent every %v (`endpoint.DefaultRetryInterval`), as mesa does. "+
		"Each fragment is a peek of %d bytes answered by a page of %d bytes. %d downloads run at once in each run, each requester and publisher a host of its own (every host has a public address in a /16 of its own, so the relays' per-address and per-network amplification budgets apply as in production). "+
		"The publisher behind a NAT is reached through its star's relay (the requester's route tightens to it after a round trip through the galaxy); the same downloads direct go to a public planet under the same star, which the requester's route reaches after two round trips. "+
		"Relays run with the production defaults (`relay.Config` with the zero `amp.Config`; the publishers' stars and galaxies with production's table sizes too), or with the amplification budget off. "+
		"*Completion* is from the first request to the last fragment's arrival (mean, and the range over the downloads); *first try* the fragments answered before their request was re-sent; *pages through relays / direct* how the fragments arrived (hop count above 0, or 0); *datagrams per fragment* every copy of its request and page on every link; *refused* the pages the relays' budget withheld. Design strategy, fast preset, no link loss.\n\n",
		d0.fragments, prose(endpoint.DefaultRetryInterval), r.peekBytes, r.pageLen, d0.pairs)
	t := table{head: []string{"window", "publisher", "budget", "completion mean (min–max)", "first try", "sends per fragment", "pages through relays / direct", "datagrams per fragment", "refused"}}
	charts := map[string][]byte{}
	for wi, w := range downloadWindows() {
		chart := svgchart.LineChart{Title: fmt.Sprintf("Download of %d fragments, window %d (design, fast preset)", d0.fragments, w),
			XLabel: "minutes since the first request", YLabel: "share of fragments received", Steps: true, LegendBottom: true}
		for vi, v := range dlVariants() {
			d := r.run(wi, vi)
			budget := "defaults"
			if v.budgetOff {
				budget = "off"
			}
			pub := "behind a NAT"
			if !v.nat {
				pub = "public"
			}
			comp := fmt.Sprintf("%d of %d unfinished", d.unfinished(), d.pairs)
			if d.unfinished() == 0 {
				comp = duration(mean(d.completion)) + " (" + duration(slices.Min(d.completion)) + "–" + duration(slices.Max(d.completion)) + ")"
			}
			all := d.pairs * d.fragments
			t.add(fmt.Sprint(w), pub, budget, comp, pct(d.firstTry, d.got), f(float64(d.tries)/float64(max(d.got, 1)), 2),
				fmt.Sprintf("%d / %d", d.viaRelay, d.direct), f(float64(d.msgs)/float64(all), 2), fmt.Sprint(d.throttled))
			// The curve at up to downloadPlotPoints evenly spaced counts
			// of fragments received.
			s := svgchart.Series{Name: v.name, X: []float64{0}, Y: []float64{0}}
			for q := 1; q <= downloadPlotPoints; q++ {
				k := min(len(d.arrivals), (q*all+downloadPlotPoints-1)/downloadPlotPoints)
				if k == 0 || float64(k)/float64(all) == s.Y[len(s.Y)-1] {
					continue
				}
				s.X = append(s.X, d.arrivals[k-1].Minutes())
				s.Y = append(s.Y, float64(k)/float64(all))
			}
			chart.Series = append(chart.Series, s)
		}
		charts[fmt.Sprintf("download-w%d.svg", w)] = chart.Render()
	}
	b.WriteString(t.String())
	for _, w := range downloadWindows() {
		fmt.Fprintf(&b, "\n![Download progress, window %d](simulation/download-w%d.svg)\n", w, w)
	}
	return section{title: "5. Bulk download", markdown: b.String(), plots: charts, findings: r.findings(), notes: r.notes()}
}

func (r *downloadResult) findings() []string {
	d0 := &r.runs[0]
	ws := downloadWindows()
	comp := func(wi, vi int) string { return duration(r.run(wi, vi).meanCompletion()) }
	first := func(wi, vi int) string { d := r.run(wi, vi); return pct(d.firstTry, d.got) }
	return []string{
		fmt.Sprintf("A %d-fragment download (%d-byte pages) from a publisher behind a NAT, through its star's relay under the default amplification budget, takes %s with a window of %d fragments (%s first try) and %s with a window of %d (%s); with the budget off, %s and %s. The same downloads direct take %s and %s (%s and %s first try).",
			d0.fragments, r.pageLen, comp(0, dlNAT), ws[0], first(0, dlNAT), comp(1, dlNAT), ws[1], first(1, dlNAT),
			comp(0, dlNATOff), comp(1, dlNATOff), comp(0, dlDirect), comp(1, dlDirect), first(0, dlDirect), first(1, dlDirect)),
	}
}

func (r *downloadResult) notes() []string {
	ws := downloadWindows()
	sends := func(wi, vi int) string { d := r.run(wi, vi); return f(float64(d.tries)/float64(max(d.got, 1)), 2) }
	rate := func(wi, vi int) string {
		d := r.run(wi, vi)
		return f(float64(d.fragments)/d.meanCompletion(), 1)
	}
	nat0, nat1, dir0, dir1 := r.run(0, dlNAT), r.run(1, dlNAT), r.run(0, dlDirect), r.run(1, dlDirect)
	refused := func(n uint64) string {
		if n == 0 {
			return "no page"
		}
		return fmt.Sprintf("%d pages", n)
	}
	refusedBoth := func(a, b uint64) string {
		if a == 0 && b == 0 {
			return "no page at either window"
		}
		return refused(a) + " and " + refused(b)
	}
	return []string{
		fmt.Sprintf("**The budget is absolute, so a bulk download fits it.** Through the publisher's star under the defaults a fragment took %s sends (window %d) and %s (window %d), against %s and %s with the budget off, and the relays refused %s: "+
			"the budget allows an address 1 MiB a second, banked up to 8 MiB, and its /24 2 MiB a second, banked up to 16 MiB (amp.Config), and a %d-fragment message of %d-byte pages is %s MB; a lane busier than that for long is probed with a STUN request, which every ship answers, and is then not budgeted. "+
			"A page the budget does refuse is lost at the relay (its pending entry is spent when the page arrives) and the requester learns of it only when its re-send is due, a second later. "+
			"A window of %d moves %s fragments a second (%s with the budget off); a window of %d, one round trip a fragment, %s a second (%s).",
			sends(0, dlNAT), ws[0], sends(1, dlNAT), ws[1], sends(0, dlNATOff), sends(1, dlNATOff), refusedBoth(nat0.throttled, nat1.throttled),
			nat0.fragments, r.pageLen, f(float64(nat0.fragments*r.pageLen)/1e6, 1),
			ws[0], rate(0, dlNAT), rate(0, dlNATOff), ws[1], rate(1, dlNAT), rate(1, dlNATOff)),
		fmt.Sprintf("**A direct download meets the relays only before its route tightens.** Its first requests climb to the publisher's galaxy and star (%d of %d pages came through relays with a window of %d), where the budget refused %s (%s first try); with a window of %d, %s.",
			dir0.viaRelay, dir0.got, ws[0], refused(dir0.throttled), pct(dir0.firstTry, dir0.got), ws[1], refused(dir1.throttled)),
	}
}
