package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/internal/harness/seednet"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
)

const (
	// demoRetry is the demo requester's retry interval: short, so that a
	// datagram lost on a busy machine costs half a second, not a second.
	demoRetry = 500 * time.Millisecond
	// demoRoundTimeout bounds one request of the demo.
	demoRoundTimeout = 10 * time.Second
	// demoSettle is the pause between rounds, so that the duplicate answers
	// of a round (a request sent on two routes is answered on both) land
	// before the next round starts from the routes they taught.
	demoSettle = 50 * time.Millisecond
	// demoPingWait bounds the wait for the moon's first ping to reach its
	// sponsor's relay.
	demoPingWait = 5 * time.Second
	// demoRounds is how many requests the tightening step makes: three to
	// walk down the relays, one to reach the moon, one to show the route
	// stays direct.
	demoRounds = 5
	// demoKeepPeekInterval is how often, under --keep, the requester peeks
	// a fresh path, so the relays' metrics keep moving.
	demoKeepPeekInterval = 2 * time.Second
)

// runDemo is `relay demo`.
func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts demoOptions
	fs.BoolVar(&opts.keep, "keep", false, "keep the network up (with a metrics listener per relay) until Ctrl-C")
	fs.StringVar(&opts.svg, "svg", "", "also write a diagram of the rounds to SVG `FILE` (docs/tightening.svg is made so)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: relay demo [--keep] [--svg FILE]

Starts, in this process on 127.0.0.1, relays fronting a galaxy, a star and a
planet, a requester ship and a moon, and shows the requester's route to the
moon tightening one hop per round trip.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "relay demo: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo(ctx, opts, stdout); err != nil {
		fmt.Fprintf(stderr, "relay demo: %v\n", err)
		return 1
	}
	return 0
}

// demoOptions are the demo's flags.
type demoOptions struct {
	keep bool
	svg  string
}

// demoNet is the network of shared/seeds/002's example (internal/harness/seednet)
// on 127.0.0.1, with what the demo records of it.
type demoNet struct {
	*seednet.Net
	out   io.Writer
	sends *sendLog
	// rounds records the tightening step, for the diagram.
	rounds []demoRound
	// metrics are the relays' metrics listeners under --keep.
	metrics []*metricsServer
}

// demoRound is one request of the tightening step, with lanes named.
type demoRound struct {
	path    string
	targets []string // the nodes the first send went to, tightest first
	via     string   // the node the answer came from
	next    string   // the next-hop it carried, "" for none
	tries   int
}

// demoStep is one part of the demo, run in order on the network.
type demoStep struct {
	name string
	run  func(ctx context.Context, n *demoNet) error
}

// demoSteps returns the demo's parts in order. Each prints its own section;
// a step added later (the scry subscription) goes at the end.
func demoSteps() []demoStep {
	return []demoStep{
		{"tightening", stepTightening},
		{"subscription", stepSubscription},
	}
}

// demo builds the network, runs the steps, writes the diagram, and under
// --keep waits for ctx to end.
func demo(ctx context.Context, opts demoOptions, out io.Writer) error {
	n, err := newDemoNet(out)
	if err != nil {
		return err
	}
	defer n.close()
	n.introduce()
	for _, st := range demoSteps() {
		if err := st.run(ctx, n); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	if opts.svg != "" {
		if err := os.WriteFile(opts.svg, tighteningSVG(n.columns(), n.rounds), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "\nWrote the diagram of the rounds to %s.\n", opts.svg)
	}
	if !opts.keep {
		return nil
	}
	return n.keep(ctx)
}

// sendLog records the requests an endpoint sends.
type sendLog struct {
	mu  sync.Mutex
	evs []endpoint.Event
	sub []endpoint.Event // the subscription step's events, in order
}

func (l *sendLog) observe(e endpoint.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e.Kind {
	case endpoint.EventSend:
		l.evs = append(l.evs, e)
	case endpoint.EventSubscribe, endpoint.EventAck, endpoint.EventBeat, endpoint.EventValue:
		l.sub = append(l.sub, e)
	}
}

// subEvents returns the subscription events so far.
func (l *sendLog) subEvents() []endpoint.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sub)
}

// first returns the targets of the first send for path.
func (l *sendLog) first(path string) []netip.AddrPort {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.evs {
		if e.Path == path {
			return e.Targets
		}
	}
	return nil
}

// newDemoNet starts the network on 127.0.0.1.
func newDemoNet(out io.Writer) (*demoNet, error) {
	n := &demoNet{out: out, sends: &sendLog{}}
	var err error
	n.Net, err = seednet.Start(seednet.Options{
		Listen: func() (transport.Conn, error) {
			return transport.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), transport.Options{})
		},
		Retry: demoRetry, HintNets: loopbackNets, Observe: n.sends.observe,
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// close stops every node and metrics listener.
func (n *demoNet) close() {
	for _, m := range n.metrics {
		m.Close()
	}
	n.Close()
}

// nameWidth is the width of the longest node name, for alignment.
func (n *demoNet) nameWidth() int {
	w := 0
	for _, node := range n.Nodes {
		w = max(w, len(node.Name))
	}
	return w
}

// targetsWidth is the width of the longest pair of targets a round can
// print ("~a + ~b", the two longest names).
func (n *demoNet) targetsWidth() int {
	a, b := 0, 0
	for _, node := range n.Nodes {
		switch l := len(node.Name); {
		case l > a:
			a, b = l, a
		case l > b:
			b = l
		}
	}
	return a + len(" + ") + b
}

// columns returns the diagram's column headings: each node's name and
// what it is.
func (n *demoNet) columns() []svgColumn {
	cols := make([]svgColumn, len(n.Nodes))
	for i, node := range n.Nodes {
		what := node.Role
		if node.Role == seednet.RoleRelay {
			what = node.Ship.Class().String() + " relay"
		} else {
			what = node.Ship.Class().String() + ", " + node.Role
		}
		cols[i] = svgColumn{name: node.Name, what: what}
	}
	return cols
}

// introduce prints the network.
func (n *demoNet) introduce() {
	w := n.nameWidth()
	fmt.Fprintf(n.out, "A relay network on 127.0.0.1 (shared/seeds/002's example):\n\n")
	for _, node := range n.Nodes {
		fmt.Fprintf(n.out, "  %-*s  %-6s  %-9s  %-15s  %s\n", w, node.Name, node.Ship.Class(), node.Role, node.Addr, node.Note)
	}
}

// stepTightening has ~rovnys peek the moon demoRounds times and prints,
// per round, where the request went and what next-hop came back.
func stepTightening(ctx context.Context, n *demoNet) error {
	if err := waitUntil(ctx, demoPingWait, func() bool {
		k, ok := n.Ritpub.Server.Relay().Routes().Placed(n.Moon.Ship)
		return ok && k.AddrPort() == n.Moon.Addr
	}); err != nil {
		return fmt.Errorf("the moon's ping did not reach %s: %w", n.Ritpub.Name, err)
	}
	fmt.Fprintf(n.out, "\n%s pinged its sponsor: %s's relay has learned the moon's lane.\n", n.Moon.Name, n.Ritpub.Name)
	fmt.Fprintf(n.out, "%s peeks a new path on %s each round. A relayed answer's next-hop names the\n", n.Rovnys.Name, n.Moon.Name)
	fmt.Fprintf(n.out, "moon's own lane, as the relay nearest the moon heard it (never a relay's: arvo stores a\n")
	fmt.Fprintf(n.out, "next-hop as the peer's lane); the next request tries it beside the known-good one:\n\n")
	w := n.targetsWidth()
	for i := 1; i <= demoRounds; i++ {
		path := fmt.Sprintf("demo/tighten/%d", i)
		n.Moon.Endpoint.Publish(path, []byte(path))
		rctx, cancel := context.WithTimeout(ctx, demoRoundTimeout)
		resp, err := n.Rovnys.Endpoint.Peek(rctx, n.Moon.Ship, path)
		cancel()
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if string(resp.Data) != path {
			return fmt.Errorf("round %d: answer %q, want %q", i, resp.Data, path)
		}
		rd := demoRound{path: "/" + path, via: n.Name(resp.From), tries: resp.Tries}
		for _, t := range n.sends.first(path) {
			rd.targets = append(rd.targets, n.Name(t))
		}
		if resp.Next.IsValid() {
			rd.next = n.Name(resp.Next)
		}
		n.rounds = append(n.rounds, rd)
		n.printRound(i, rd, w)
		if err := sleepCtx(ctx, demoSettle); err != nil {
			return err
		}
	}
	first, last := n.rounds[0], n.rounds[len(n.rounds)-1]
	retried := 0
	for _, rd := range n.rounds {
		if rd.tries > 1 {
			retried++
		}
	}
	lost := "losing no request"
	if retried > 0 {
		lost = fmt.Sprintf("%d requests needed a retry (lost datagrams)", retried)
	}
	fmt.Fprintf(n.out, "\nThe route went from %s to %s itself in %d round trips, %s.\n",
		strings.Join(first.targets, " + "), strings.Join(last.targets, " + "), tighteningTrips(n.rounds), lost)
	n.printCounters()
	return nil
}

// tighteningTrips is the number of rounds before the first one whose only
// target is the round's answerer (the route stopped changing).
func tighteningTrips(rounds []demoRound) int {
	for i, rd := range rounds {
		if len(rd.targets) == 1 && rd.targets[0] == rd.via && rd.next == "" {
			return i
		}
	}
	return len(rounds)
}

// printRound prints one round on one line, its targets padded to w.
func (n *demoNet) printRound(i int, rd demoRound, w int) {
	answer := "answered by " + rd.via + " directly"
	if rd.via != n.Moon.Name {
		answer = "answered via " + rd.via
	}
	next := "no next-hop"
	if rd.next != "" {
		next = "next-hop " + rd.next
	}
	tries := ""
	if rd.tries > 1 {
		tries = fmt.Sprintf("  (%d tries)", rd.tries)
	}
	fmt.Fprintf(n.out, "  round %d  sent to %-*s  %s, %s%s\n", i, w, strings.Join(rd.targets, " + "), answer, next, tries)
}

// printCounters prints each relay's main counters.
func (n *demoNet) printCounters() {
	fmt.Fprintf(n.out, "\nRelay counters:\n")
	w := n.nameWidth()
	for _, node := range n.Nodes {
		if node.Server == nil {
			continue
		}
		s := node.Server.Relay().Counters().Snapshot()
		fmt.Fprintf(n.out, "  %-*s  in %3d  forwards %3d  aggregated %3d  answered %3d  dropped %3d\n",
			w, node.Name, s.TotalIn(), s.Events[relay.EventForwardSends], s.Events[relay.EventAggregated], s.Events[relay.EventAnswered], s.TotalDrops())
	}
}

// keep serves a metrics listener per relay, has the requester peek a fresh
// path every demoKeepPeekInterval, and waits for ctx to end.
func (n *demoNet) keep(ctx context.Context) error {
	fmt.Fprintf(n.out, "\nThe network stays up until Ctrl-C:\n\n")
	w := n.nameWidth()
	for _, node := range n.Nodes {
		metrics := ""
		if node.Server != nil {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			m := serveMetrics(ln, newMetricsHandler(newMetricsRegistry(node.Server, nil, version), nil, metricsOptions{}))
			n.metrics = append(n.metrics, m)
			metrics = "  metrics " + m.URL() + "/metrics"
		}
		fmt.Fprintf(n.out, "  %-*s  udp %-15s%s\n", w, node.Name, node.Addr, metrics)
	}
	fmt.Fprintf(n.out, "\n%s peeks a new path on %s every %v. Press Ctrl-C to stop.\n", n.Rovnys.Name, n.Moon.Name, demoKeepPeekInterval)
	t := time.NewTicker(demoKeepPeekInterval)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			fmt.Fprintf(n.out, "Stopped.\n")
			return nil
		case <-t.C:
		}
		path := fmt.Sprintf("demo/keep/%d", i)
		n.Moon.Endpoint.Publish(path, []byte(path))
		rctx, cancel := context.WithTimeout(ctx, demoRoundTimeout)
		n.Rovnys.Endpoint.Peek(rctx, n.Moon.Ship, path) // failures show in the metrics
		cancel()
	}
}

// waitUntil polls cond until it holds, ctx ends, or limit passes.
func waitUntil(ctx context.Context, limit time.Duration, cond func() bool) error {
	const poll = 5 * time.Millisecond
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", limit)
		}
		if err := sleepCtx(ctx, poll); err != nil {
			return err
		}
	}
	return nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// demoGrowAfter is how long the subscription step waits, once the
// subscription is acked and a heartbeat is held, before growing the value.
const demoGrowAfter = 300 * time.Millisecond

// stepSubscription subscribes ~rovnys to a path on the moon that has no
// value yet, shows the signed ack and the held heartbeat, grows the value,
// and shows it arriving with the heartbeat's answer.
func stepSubscription(ctx context.Context, n *demoNet) error {
	const path = "demo/feed/1"
	fmt.Fprintf(n.out, "\n%s subscribes to /%s on %s, which has no value there yet:\n\n", n.Rovnys.Name, path, n.Moon.Name)
	type result struct {
		resp endpoint.Response
		err  error
	}
	done := make(chan result, 1)
	sctx, cancel := context.WithTimeout(ctx, demoRoundTimeout)
	defer cancel()
	go func() {
		resp, err := n.Rovnys.Endpoint.Subscribe(sctx, n.Moon.Ship, path)
		done <- result{resp, err}
	}()
	// Wait for the ack and the first heartbeat.
	var ack, beat *endpoint.Event
	if err := waitUntil(ctx, demoRoundTimeout, func() bool {
		for _, e := range n.sends.subEvents() {
			switch {
			case e.Kind == endpoint.EventAck && ack == nil:
				ack = &e
			case e.Kind == endpoint.EventBeat && beat == nil:
				beat = &e
			}
		}
		return ack != nil && beat != nil
	}); err != nil {
		return fmt.Errorf("no ack and heartbeat: %w", err)
	}
	fmt.Fprintf(n.out, "  ack        %s signed the subscription: %s, session %x; %s stops re-sending it\n",
		n.Moon.Name, ack.Status, ack.Session, n.Rovnys.Name)
	var via []string
	for _, t := range beat.Targets {
		via = append(via, n.Name(t))
	}
	fmt.Fprintf(n.out, "  heartbeat  %s sends one heartbeat for all its subscriptions there (to %s);\n", n.Rovnys.Name, strings.Join(via, " + "))
	fmt.Fprintf(n.out, "             %s holds it, to answer the moment the value grows\n", n.Moon.Name)
	if err := sleepCtx(ctx, demoGrowAfter); err != nil {
		return err
	}
	grown := time.Now()
	n.Moon.Endpoint.Publish(path, []byte("the first value"))
	fmt.Fprintf(n.out, "  grow       %s grows /%s\n", n.Moon.Name, path)
	r := <-done
	if r.err != nil {
		return fmt.Errorf("subscription: %w", r.err)
	}
	if string(r.resp.Data) != "the first value" {
		return fmt.Errorf("subscription delivered %q", r.resp.Data)
	}
	how := "a plain answer"
	if r.resp.Notified {
		how = "the held heartbeat's answer"
	}
	fmt.Fprintf(n.out, "  delivered  %q arrived %v after the grow, in %s, via %s\n",
		r.resp.Data, time.Since(grown).Round(time.Microsecond), how, n.Name(r.resp.From))
	return nil
}

// loopbackNets declares loopback a network that next-hops may name: every
// lane here is on 127.0.0.1.
var loopbackNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
