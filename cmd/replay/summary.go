package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// summary is the result of a run, printed as text or (--json) as JSON.
type summary struct {
	Fixture      string `json:"fixture"`
	Relay        string `json:"relay"`
	FixtureRelay string `json:"fixture_relay"`
	Mode         string `json:"mode"`
	Lanes        int    `json:"lanes"`
	// PortBase is lane i's port base+i (--ports), 0 for ephemeral ports;
	// LanesMoved counts lanes whose port was taken, which ran on an
	// ephemeral one instead (to a relay that knew them, they moved).
	PortBase   int     `json:"port_base"`
	LanesMoved int     `json:"lanes_moved"`
	ElapsedS   float64 `json:"elapsed_s"`
	SendPhaseS float64 `json:"send_phase_s"`

	Sent     uint64  `json:"sent"`
	SentRate float64 `json:"sent_per_s"`
	// Requests are the datagrams that can be answered (mesa peeks and
	// pokes) or delivered (legacy ames): Expected of them were answered
	// in the fixture; Answered were answered within the timeout, Missing
	// were expected and not, Extra were answered though the fixture shows
	// no answer.
	Requests     uint64         `json:"requests"`
	Expected     uint64         `json:"expected"`
	Answered     uint64         `json:"answered"`
	Missing      uint64         `json:"missing"`
	Extra        uint64         `json:"extra"`
	AnsweredRate float64        `json:"answered_per_s"`
	Latency      latencySummary `json:"latency"`
	Types        []typeSummary  `json:"types"`

	Publisher publisherSummary `json:"publisher"`
	// Unmatched counts answers and deliveries no outstanding request was
	// waiting for (late after the timeout, or duplicates); Foreign,
	// datagrams from an address other than the relay; Unrecognized,
	// datagrams from the relay that are not mesa or ames; Probes, the
	// relay's STUN binding requests (amplification budget probes), each
	// answered as vere answers one.
	Unmatched    uint64 `json:"unmatched"`
	Probes       uint64 `json:"probes_answered"`
	Foreign      uint64 `json:"foreign"`
	Unrecognized uint64 `json:"unrecognized"`
	WriteErrors  uint64 `json:"write_errors"`

	// RelayDrops is the change of relay_drops_total by reason over the
	// run, when --metrics was given.
	RelayDrops   map[string]float64 `json:"relay_drops,omitempty"`
	MetricsError string             `json:"metrics_error,omitempty"`
}

type typeSummary struct {
	Type     string         `json:"type"`
	Sent     uint64         `json:"sent"`
	Expected uint64         `json:"expected"`
	Answered uint64         `json:"answered"`
	Missing  uint64         `json:"missing"`
	Extra    uint64         `json:"extra"`
	Latency  latencySummary `json:"latency"`
}

// latencySummary is in milliseconds.
type latencySummary struct {
	N    uint64  `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

type publisherSummary struct {
	// Requests the relay handed the replay's lanes; Answers sent for them
	// (held ones included, once released); Held, answers that waited for
	// the schedule; Unknown, requests a publishing lane has no answer
	// for in the fixture; Silent, requests to lanes that answer nothing
	// in the fixture (an attacker that hijacked a publisher's lane, a
	// requester the relay took for a publisher).
	Requests uint64 `json:"requests"`
	Answers  uint64 `json:"answers"`
	Held     uint64 `json:"held"`
	Unknown  uint64 `json:"unknown"`
	Silent   uint64 `json:"silent"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func latencyOf(h *latHist) latencySummary {
	return latencySummary{
		N: h.n, Mean: ms(h.mean()), P50: ms(h.quantile(0.5)), P90: ms(h.quantile(0.9)),
		P99: ms(h.quantile(0.99)), P999: ms(h.quantile(0.999)), Max: ms(h.max),
	}
}

func (r *runner) summarize(sendPhase, elapsed time.Duration) *summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &summary{
		Fixture: r.fx.path, Relay: r.cfg.Relay.String(), FixtureRelay: r.fx.relay.String(),
		Mode: r.cfg.mode(), Lanes: len(r.fx.lanes),
		ElapsedS: elapsed.Seconds(), SendPhaseS: sendPhase.Seconds(),
		Publisher: publisherSummary{
			Requests: r.pubRequests.Load(), Answers: r.pubAnswers.Load(),
			Held: r.pubHeld.Load(), Unknown: r.pubUnknown.Load(), Silent: r.pubSilent.Load(),
		},
		Unmatched: r.unmatched.Load(), Foreign: r.foreign.Load(),
		Unrecognized: r.unrecognized.Load(), WriteErrors: r.writeErrs.Load(), Probes: r.probes.Load(),
	}
	var all latHist
	for k := range numKinds {
		kc := &r.kinds[k]
		s.Types = append(s.Types, typeSummary{
			Type: kind(k).String(), Sent: kc.sent, Expected: kc.expected, Answered: kc.answered,
			Missing: kc.missing, Extra: kc.extra, Latency: latencyOf(&kc.lat),
		})
		s.Sent += kc.sent
		if k == kindPeek || k == kindPoke || k == kindAmes {
			s.Requests += kc.sent
		}
		s.Expected += kc.expected
		s.Answered += kc.answered
		s.Missing += kc.missing
		s.Extra += kc.extra
		all.merge(&kc.lat)
	}
	s.Latency = latencyOf(&all)
	if sendPhase > 0 {
		s.SentRate = float64(s.Sent) / sendPhase.Seconds()
	}
	if elapsed > 0 {
		s.AnsweredRate = float64(s.Answered) / elapsed.Seconds()
	}
	return s
}

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.3gms", ms(d))
	}
	return fmt.Sprintf("%.3gs", d.Seconds())
}

func fmtMs(v float64) string { return fmtDur(time.Duration(v * float64(time.Millisecond))) }

// writeText prints s for people.
func (s *summary) writeText(w io.Writer) {
	fmt.Fprintf(w, "replay %s -> %s (fixture relay %s, %d lanes)\n", s.Fixture, s.Relay, s.FixtureRelay, s.Lanes)
	switch {
	case s.PortBase == 0:
		fmt.Fprintf(w, "lanes on ephemeral ports\n")
	case s.LanesMoved > 0:
		fmt.Fprintf(w, "lanes on ports %d-%d; %d of them taken, those lanes on ephemeral ports (moved)\n", s.PortBase, s.PortBase+s.Lanes-1, s.LanesMoved)
	default:
		fmt.Fprintf(w, "lanes on ports %d-%d\n", s.PortBase, s.PortBase+s.Lanes-1)
	}
	fmt.Fprintf(w, "mode %s: %.2fs (sending %.2fs)\n", s.Mode, s.ElapsedS, s.SendPhaseS)
	fmt.Fprintf(w, "sent %d datagrams (%.0f/s); requests %d: answered %d (%.0f/s), expected %d, missing %d, extra %d\n",
		s.Sent, s.SentRate, s.Requests, s.Answered, s.AnsweredRate, s.Expected, s.Missing, s.Extra)
	fmt.Fprintf(w, "%-6s %8s %8s %8s %8s %8s %9s %9s %9s %9s %9s\n",
		"type", "sent", "expected", "answered", "missing", "extra", "p50", "p90", "p99", "p99.9", "max")
	row := func(t typeSummary) {
		fmt.Fprintf(w, "%-6s %8d %8d %8d %8d %8d %9s %9s %9s %9s %9s\n", t.Type, t.Sent, t.Expected, t.Answered,
			t.Missing, t.Extra, fmtMs(t.Latency.P50), fmtMs(t.Latency.P90), fmtMs(t.Latency.P99),
			fmtMs(t.Latency.P999), fmtMs(t.Latency.Max))
	}
	for _, t := range s.Types {
		row(t)
	}
	row(typeSummary{Type: "all", Sent: s.Sent, Expected: s.Expected, Answered: s.Answered, Missing: s.Missing,
		Extra: s.Extra, Latency: s.Latency})
	p := s.Publisher
	fmt.Fprintf(w, "publishers: %d requests heard, %d answers sent (%d held), %d without an answer in the fixture, %d to silent lanes\n",
		p.Requests, p.Answers, p.Held, p.Unknown, p.Silent)
	fmt.Fprintf(w, "unmatched %d (late or duplicate), foreign %d, unrecognized %d, write errors %d, probes answered %d\n",
		s.Unmatched, s.Foreign, s.Unrecognized, s.WriteErrors, s.Probes)
	switch {
	case s.MetricsError != "":
		fmt.Fprintf(w, "relay drops: metrics unavailable: %s\n", s.MetricsError)
	case s.RelayDrops != nil:
		keys := make([]string, 0, len(s.RelayDrops))
		for k := range s.RelayDrops {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		var total float64
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %g", k, s.RelayDrops[k]))
			total += s.RelayDrops[k]
		}
		fmt.Fprintf(w, "relay drops during the run: %g (%s)\n", total, strings.Join(parts, ", "))
	}
}
