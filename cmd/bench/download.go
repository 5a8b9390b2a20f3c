package main

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

// The download mode's requester, as a vere ship fetching a large value:
// at most downloadWindow fragments asked for at once, each asked again
// when unanswered for downloadRetry.
const (
	downloadWindow = 32
	downloadRetry  = time.Second
	downloadPage   = 1400 // bytes of a fragment when -page is left at its default
	downloadGiveUp = 60 * time.Second
)

// dlResult is one download.
type dlResult struct {
	took     time.Duration
	frags    int
	firstTry int // fragments answered with only their first request sent
	resent   int // requests sent again after downloadRetry
}

func (d dlResult) pagesPerSec() float64 { return float64(d.frags) / d.took.Seconds() }

// downloadMain downloads frags fragments rounds times through a relay in
// its default configuration (the amplification budget on) and as many
// times directly from the publisher, alternating, and prints what each
// took.
func downloadMain(cfg benchConfig, frags, rounds int) error {
	if cfg.page == 1024 {
		cfg.page = downloadPage
	}
	cfg.pairs, cfg.publishers = 1, 1
	c, err := startChild(scenario{name: "relay", role: "relay", sockets: 1, procs: 1, variant: "default"}, cfg)
	if err != nil {
		return err
	}
	defer c.stop()
	g, err := newLoadGen(c.addr, 1, 1, cfg.base, cfg.page, transport.Options{DisableGSO: cfg.noGSO})
	if err != nil {
		return err
	}
	var pubs sync.WaitGroup
	g.runPublishers(&pubs)
	pages := make(chan [2]int, 1024) // run, fragment
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		readDownload(g.pairs[0], pages)
	}()
	defer func() {
		g.close()
		pubs.Wait()
		reader.Wait()
	}()
	targets := []struct {
		name string
		to   netip.AddrPort
	}{{"through the relay (default config)", c.addr}, {"direct to the publisher", g.pubs[0].conn.LocalAddr()}}
	res := make([][]dlResult, len(targets))
	for k := 0; k < rounds; k++ {
		for i, t := range targets {
			run := k*len(targets) + i
			d, err := download(g.pairs[0], t.to, run, frags, pages)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			res[i] = append(res[i], d)
			fmt.Fprintf(os.Stderr, "round %d  %-36s %v  %.0f pages/s  first try %d/%d  resent %d\n",
				k+1, t.name, d.took.Round(time.Millisecond), d.pagesPerSec(), d.firstTry, d.frags, d.resent)
		}
	}
	fmt.Printf("%d fragments of %d bytes, window %d, retry %v, %d rounds alternated, %s\n\n",
		frags, cfg.page, downloadWindow, downloadRetry, rounds, time.Now().UTC().Format(time.RFC3339))
	fmt.Print(downloadTable(targets[0].name, targets[1].name, res))
	return nil
}

// downloadTable writes each target's median and range over its rounds.
func downloadTable(relayName, directName string, res [][]dlResult) string {
	var b strings.Builder
	b.WriteString("| download | pages/s | min-max | completion | min-max | first try | retransmissions |\n|---|---|---|---|---|---|---|\n")
	for i, name := range []string{relayName, directName} {
		var rate, took, first []float64
		resent := 0
		for _, d := range res[i] {
			rate = append(rate, d.pagesPerSec())
			took = append(took, d.took.Seconds())
			first = append(first, float64(d.firstTry)/float64(d.frags))
			resent += d.resent
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f-%.0f | %v | %v-%v | %.1f%% (least %.1f%%) | %d in %d rounds |\n", name,
			median(rate), slices.Min(rate), slices.Max(rate),
			secs(median(took)), secs(slices.Min(took)), secs(slices.Max(took)),
			100*median(first), 100*slices.Min(first), resent, len(res[i]))
	}
	return b.String()
}

func secs(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

// readDownload reads pages on p's requester socket and reports each as
// its run and fragment, answering the relay's STUN probes as vere does.
func readDownload(p *pair, pages chan<- [2]int) {
	in := newMessages(transport.DefaultBatchSize, relay.MaxPacket, relay.MaxPacket)
	var pkt scry.Packet
	readLoop(p.req, in, func(n int) {
		for i := 0; i < n; i++ {
			b := in[i].Buf[:in[i].N]
			if scry.IsSTUN(b) {
				answerProbe(p.req, b, in[i].Addr)
				continue
			}
			if pkt.Parse(b) != nil || pkt.Header.Type != scry.TypePage {
				continue
			}
			run, frag, ok := parseDownloadPath(pkt.Name.Path)
			if !ok {
				continue
			}
			select {
			case pages <- [2]int{run, frag}:
			default: // the downloader has stopped listening: the page is lost, as to a full socket
			}
		}
	})
}

// downloadPath is fragment frag of run's value: "b/dRUN.FRAG", then the
// requester tag.
func downloadPath(dst []byte, run, frag int) []byte {
	dst = strconv.AppendInt(append(dst[:0], "b/d"...), int64(run), 10)
	return strconv.AppendInt(append(dst, '.'), int64(frag), 10)
}

func parseDownloadPath(path []byte) (run, frag int, ok bool) {
	if len(path) < 3+requesterTag || string(path[:3]) != "b/d" {
		return 0, 0, false
	}
	r, f, found := strings.Cut(string(path[3:len(path)-requesterTag]), ".")
	if !found {
		return 0, 0, false
	}
	run, err1 := strconv.Atoi(r)
	frag, err2 := strconv.Atoi(f)
	return run, frag, err1 == nil && err2 == nil
}

// download fetches frags fragments of run's value from to, with at most
// downloadWindow asked for at once, each asked again after downloadRetry.
func download(p *pair, to netip.AddrPort, run, frags int, pages <-chan [2]int) (dlResult, error) {
	sent := make([]time.Time, frags) // last ask; zero: not asked yet
	asks := make([]int, frags)
	done := make([]bool, frags)
	d := dlResult{frags: frags}
	msg := []transport.Message{{Buf: make([]byte, 0, 128), Addr: to}}
	path := make([]byte, 0, 32)
	ask := func(f int) {
		msg[0].Buf = p.peek(msg[0].Buf[:0], downloadPath(path, run, f))
		msg[0].N = len(msg[0].Buf)
		writeAll(p.req, msg)
		sent[f] = time.Now()
		asks[f]++
		if asks[f] > 1 {
			d.resent++
		}
	}
	next, inFlight, answered := 0, 0, 0
	t0 := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for answered < frags {
		for inFlight < downloadWindow && next < frags {
			ask(next)
			next++
			inFlight++
		}
		select {
		case pg := <-pages:
			if pg[0] != run || pg[1] < 0 || pg[1] >= frags || done[pg[1]] {
				continue // a late or repeated page
			}
			done[pg[1]] = true
			answered++
			inFlight--
			if asks[pg[1]] == 1 {
				d.firstTry++
			}
		case now := <-tick.C:
			if now.Sub(t0) > downloadGiveUp {
				return d, fmt.Errorf("%d of %d fragments after %v", answered, frags, downloadGiveUp)
			}
			for f := 0; f < next; f++ {
				if !done[f] && now.Sub(sent[f]) >= downloadRetry {
					ask(f)
				}
			}
		}
	}
	d.took = time.Since(t0)
	return d, nil
}
