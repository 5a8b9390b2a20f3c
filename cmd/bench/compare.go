package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// compareMain measures the bare forwarder and the relay in each variant
// (and, with old set, each variant again from the executable old) side by
// side, and prints a table of throughput and of CPU per datagram against
// the forwarder's. With slot 0 a round measures them one after another
// (measureSet); else at once, taking turns of slot on their core
// (measureTogether).
func compareMain(cfg benchConfig, variants []string, old string, rounds int, slot time.Duration) error {
	scs := []scenario{{name: "bare forwarder", role: "forward", sockets: 1, procs: 1},
		{name: "forwarder + codec", role: "forward", sockets: 1, procs: 1, variant: "codec"}}
	for _, v := range variants {
		if fv, ok := strings.CutPrefix(v, "fwd:"); ok {
			// A forwarder variant: "fwd:nogro", "fwd:codec+batchmug".
			scs = append(scs, scenario{name: "forwarder " + fv, role: "forward", sockets: 1, procs: 1, variant: fv})
			continue
		}
		name := "relay " + v
		if v == "" {
			name = "relay (bench config)"
		}
		scs = append(scs, scenario{name: name, role: "relay", sockets: 1, procs: 1, variant: v})
		if old != "" {
			scs = append(scs, scenario{name: name + ", old", role: "relay", sockets: 1, procs: 1, variant: v, bin: old})
		}
	}
	var res []*result
	var err error
	how := "one after another"
	if cfg.rate > 0 && slot <= 0 {
		return fmt.Errorf("-rate %v: a held rate is measured at once only (-slot)", cfg.rate)
	}
	if slot > 0 {
		res, err = measureTogether(cfg, cfg.pairs, scs, rounds, slot)
		how = fmt.Sprintf("at once in turns of %v (rates: round trips a second of a configuration's own turns)", slot)
		if cfg.rate > 0 {
			how += fmt.Sprintf(", each held to %.0f round trips a second", cfg.rate)
		}
	} else {
		res, err = measureSet(cfg, cfg.pairs, scs, rounds, -1)
	}
	if err != nil {
		return err
	}
	fmt.Printf("%d requesters on %d publishers, window %d each, %d-byte pages, %d rounds of %v, %s, %s\n\n",
		cfg.pairs, cfg.pubs(), cfg.window, cfg.page, rounds, cfg.duration, how, time.Now().UTC().Format(time.RFC3339))
	fmt.Print(compareTable(res))
	fmt.Print("\n", relayVsForwarders(res))
	if t := relayVsOld(res); t != "" {
		fmt.Print("\n", t)
	}
	return nil
}

// relayVsOld writes, for each relay configuration measured from the old
// executable too (its result named NAME", old"), the new relay's CPU per
// datagram over the old one's in the same round: user time alone (the
// relay's own work, which a change to the decision moves) and user plus
// system, each the median (min-max) over rounds, with the number of
// rounds in which the new relay's user time was the lower. Below 1.00 is
// the new relay cheaper. Round by round, because the machine's speed moves
// between rounds more than a change of a few per cent does.
func relayVsOld(res []*result) string {
	byName := map[string]*result{}
	for _, r := range res {
		byName[r.Name] = r
	}
	var b strings.Builder
	for _, r := range res {
		o := byName[r.Name+", old"]
		if r.Role != "relay" || o == nil {
			continue
		}
		var user, all []float64
		lower := 0
		for k := range min(len(r.Rounds), len(o.Rounds)) {
			n, od := r.Rounds[k], o.Rounds[k]
			if n.user <= 0 || od.user <= 0 {
				continue
			}
			user = append(user, float64(n.user)/float64(od.user))
			all = append(all, float64(n.user+n.sys)/float64(od.user+od.sys))
			if n.user < od.user {
				lower++
			}
		}
		if len(user) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("| new relay's CPU per datagram over the old's, same round | user | user+sys | user lower in |\n|---|---|---|---|\n")
		}
		ul, uh := slices.Min(user), slices.Max(user)
		al, ah := slices.Min(all), slices.Max(all)
		fmt.Fprintf(&b, "| %s | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %d of %d rounds |\n",
			r.Name, median(user), ul, uh, median(all), al, ah, lower, len(user))
	}
	return b.String()
}

// relayVsForwarders writes, for each relay configuration, its CPU per
// datagram against each forwarder's: the forwarder's over the relay's in
// the same round, median (min-max) over rounds; 1.00 or more is the relay
// as cheap as that forwarder or cheaper.
func relayVsForwarders(res []*result) string {
	var fwds, relays []*result
	for _, r := range res {
		if r.Role == "forward" {
			fwds = append(fwds, r)
		} else {
			relays = append(relays, r)
		}
	}
	if len(fwds) == 0 || len(relays) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| CPU per datagram, forwarder's over relay's |")
	for _, f := range fwds {
		b.WriteString(" vs " + f.Name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(fwds)) + "\n")
	for _, r := range relays {
		b.WriteString("| " + r.Name + " |")
		for _, f := range fwds {
			med, lo, hi := r.cpuRatio(f)
			fmt.Fprintf(&b, " %.2f (%.2f-%.2f) |", med, lo, hi)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// compareTable writes results as a table against results[0], the
// forwarder: *CPU vs forwarder* is the forwarder's CPU per datagram over
// the configuration's in the same round (median, min-max over rounds).
func compareTable(res []*result) string {
	var b strings.Builder
	base := res[0]
	b.WriteString("| configuration | round trips/s | min-max | vs forwarder | CPU/datagram (user+sys) | CPU vs forwarder | min-max |\n|---|---|---|---|---|---|---|\n")
	for _, r := range res {
		med, lo, hi := r.cpuRatio(base)
		fmt.Fprintf(&b, "| %s | %.0f | %.0f-%.0f | %.0f%% | %v (%v+%v) | %.2f | %.2f-%.2f |\n", r.Name, r.RTPerSec, r.RTMin, r.RTMax,
			100*r.ratio(base), r.CPUPerDG, r.User, r.Sys, med, lo, hi)
	}
	return b.String()
}

// cpuRatio returns base's CPU per datagram over r's, per round (both
// measured in the same round): the median, least and greatest.
func (r *result) cpuRatio(base *result) (med, lo, hi float64) {
	var q []float64
	lo, hi = math.Inf(1), math.Inf(-1)
	for k := range min(len(r.Rounds), len(base.Rounds)) {
		c := r.Rounds[k].user + r.Rounds[k].sys
		if c > 0 {
			x := float64(base.Rounds[k].user+base.Rounds[k].sys) / float64(c)
			q = append(q, x)
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
	}
	if len(q) == 0 {
		return 0, 0, 0
	}
	return median(q), lo, hi
}
