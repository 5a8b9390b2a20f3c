package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
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

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/endpoint"
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

// demoNode is one process of the demo network: a relay or a ship.
type demoNode struct {
	name string // the ship as @p
	ship lane.Ship
	role string // "relay", "requester" or "publisher"
	note string // what the node knows, for the introduction
	addr netip.AddrPort

	srv     *relay.Server      // relays
	ep      *endpoint.Endpoint // ships
	metrics *metricsServer     // relays under --keep
}

// demoNet is the network of shared/seeds/002's example: the requester
// ~rovnys, relays fronting ~syl, ~sipsyl and ~ritpub-sipsyl, and the
// publisher ~mister-ritpub-sipsyl, a moon. The seed's names are not a
// default sponsorship chain (@p scrambles planets: ~ritpub-sipsyl's default
// sponsor is ~rondev), so ~ritpub-sipsyl is escaped to ~sipsyl, as an
// operator would configure it.
type demoNet struct {
	out io.Writer

	syl, sipsyl, ritpub, moon, rovnys *demoNode
	// nodes lists every node in chain order: requester, then down the
	// sponsorship chain to the moon. The diagram's columns follow it.
	nodes    []*demoNode
	sponsors *lane.Sponsors
	sends    *sendLog
	// rounds records the tightening step, for the diagram.
	rounds []demoRound
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
func newDemoNet(out io.Writer) (n *demoNet, err error) {
	n = &demoNet{out: out, sends: &sendLog{}, sponsors: &lane.Sponsors{}}
	// conns[i] is nodes[i]'s socket until a relay or endpoint owns it.
	var conns [5]transport.Conn
	defer func() {
		if err != nil {
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
			n.close()
		}
	}()
	specs := []struct{ name, role, note string }{
		{"~rovnys", "requester", "knows only ~syl's lane"},
		{"~syl", "relay", "knows ~sipsyl's lane"},
		{"~sipsyl", "relay", "knows ~ritpub-sipsyl's lane"},
		{"~ritpub-sipsyl", "relay", "escaped to ~sipsyl; learns the moon's lane from its pings"},
		{"~mister-ritpub-sipsyl", "publisher", "pings its sponsor ~ritpub-sipsyl"},
	}
	for i, sp := range specs {
		s, err := lane.ParseShip(sp.name)
		if err != nil {
			return n, err
		}
		c, err := transport.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), transport.Options{})
		if err != nil {
			return n, err
		}
		conns[i] = c
		n.nodes = append(n.nodes, &demoNode{name: sp.name, ship: s, role: sp.role, note: sp.note, addr: c.LocalAddr()})
	}
	n.rovnys, n.syl, n.sipsyl, n.ritpub, n.moon = n.nodes[0], n.nodes[1], n.nodes[2], n.nodes[3], n.nodes[4]
	if err := n.sponsors.Set(n.ritpub.ship, n.sipsyl.ship); err != nil {
		return n, err
	}
	galaxies := map[lane.Ship]netip.AddrPort{n.syl.ship: n.syl.addr}
	// Each relay knows the relays one step below and above it, as pinned
	// lanes; the moon's lane is learned from its pings.
	pinned := map[*demoNode]map[lane.Ship]netip.AddrPort{
		n.syl:    {n.sipsyl.ship: n.sipsyl.addr},
		n.sipsyl: {n.ritpub.ship: n.ritpub.addr},
		n.ritpub: {n.sipsyl.ship: n.sipsyl.addr},
	}
	// The moon publishes with a key its subscribers know (on the live
	// network they would take it from Azimuth); fixed, so runs match.
	moonKey := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x6d}, ed25519.SeedSize))
	for i, node := range n.nodes {
		switch node.role {
		case "relay":
			r, err := relay.New(relay.Config{HintNets: loopbackNets,
				Ship: node.ship, Galaxies: galaxies, Pinned: pinned[node], Sponsors: n.sponsors,
				Self: []netip.AddrPort{node.addr},
			})
			if err != nil {
				return n, err
			}
			node.srv = relay.NewServer(r, []transport.Conn{conns[i]}, relay.ServerConfig{})
			node.srv.Start()
		default:
			cfg := endpoint.Config{
				Ship: node.ship, Sponsors: n.sponsors, RetryInterval: demoRetry,
				Lanes: map[lane.Ship]netip.AddrPort{n.syl.ship: n.syl.addr},
			}
			if node == n.moon {
				cfg.Lanes[n.ritpub.ship] = n.ritpub.addr
				cfg.Key = moonKey
			} else {
				cfg.Observe = n.sends.observe
				cfg.PeerKeys = map[lane.Ship]ed25519.PublicKey{n.moon.ship: moonKey.Public().(ed25519.PublicKey)}
			}
			node.ep, err = endpoint.New(cfg, conns[i])
			if err != nil {
				return n, err
			}
			node.ep.Start()
		}
		conns[i] = nil
	}
	return n, nil
}

// close stops every node.
func (n *demoNet) close() {
	for i := len(n.nodes) - 1; i >= 0; i-- {
		node := n.nodes[i]
		if node.metrics != nil {
			node.metrics.Close()
		}
		if node.ep != nil {
			node.ep.Close()
		}
		if node.srv != nil {
			node.srv.Close()
		}
	}
}

// name returns the node at lane ap by its @p, or the lane itself.
func (n *demoNet) name(ap netip.AddrPort) string {
	for _, node := range n.nodes {
		if node.addr == ap {
			return node.name
		}
	}
	return ap.String()
}

// nameWidth is the width of the longest node name, for alignment.
func (n *demoNet) nameWidth() int {
	w := 0
	for _, node := range n.nodes {
		w = max(w, len(node.name))
	}
	return w
}

// targetsWidth is the width of the longest pair of targets a round can
// print ("~a + ~b", the two longest names).
func (n *demoNet) targetsWidth() int {
	a, b := 0, 0
	for _, node := range n.nodes {
		switch l := len(node.name); {
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
	cols := make([]svgColumn, len(n.nodes))
	for i, node := range n.nodes {
		what := node.role
		if node.role == "relay" {
			what = node.ship.Class().String() + " relay"
		} else {
			what = node.ship.Class().String() + ", " + node.role
		}
		cols[i] = svgColumn{name: node.name, what: what}
	}
	return cols
}

// introduce prints the network.
func (n *demoNet) introduce() {
	w := n.nameWidth()
	fmt.Fprintf(n.out, "A relay network on 127.0.0.1 (shared/seeds/002's example):\n\n")
	for _, node := range n.nodes {
		fmt.Fprintf(n.out, "  %-*s  %-6s  %-9s  %-15s  %s\n", w, node.name, node.ship.Class(), node.role, node.addr, node.note)
	}
}

// stepTightening has ~rovnys peek the moon demoRounds times and prints,
// per round, where the request went and what next-hop came back.
func stepTightening(ctx context.Context, n *demoNet) error {
	if err := waitUntil(ctx, demoPingWait, func() bool {
		info, ok := n.ritpub.srv.Relay().Routes().Info(n.moon.ship)
		return ok && info.Direct.AddrPort() == n.moon.addr
	}); err != nil {
		return fmt.Errorf("the moon's ping did not reach %s: %w", n.ritpub.name, err)
	}
	fmt.Fprintf(n.out, "\n%s pinged its sponsor: %s's relay has learned the moon's lane.\n", n.moon.name, n.ritpub.name)
	fmt.Fprintf(n.out, "%s peeks a new path on %s each round. Each answer's next-hop names the\n", n.rovnys.name, n.moon.name)
	fmt.Fprintf(n.out, "lane one step closer to the moon, which the next request tries beside the known-good one:\n\n")
	w := n.targetsWidth()
	for i := 1; i <= demoRounds; i++ {
		path := fmt.Sprintf("demo/tighten/%d", i)
		n.moon.ep.Publish(path, []byte(path))
		rctx, cancel := context.WithTimeout(ctx, demoRoundTimeout)
		resp, err := n.rovnys.ep.Peek(rctx, n.moon.ship, path)
		cancel()
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if string(resp.Data) != path {
			return fmt.Errorf("round %d: answer %q, want %q", i, resp.Data, path)
		}
		rd := demoRound{path: "/" + path, via: n.name(resp.From), tries: resp.Tries}
		for _, t := range n.sends.first(path) {
			rd.targets = append(rd.targets, n.name(t))
		}
		if resp.Next.IsValid() {
			rd.next = n.name(resp.Next)
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
	if rd.via != n.moon.name {
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
	for _, node := range n.nodes {
		if node.srv == nil {
			continue
		}
		s := node.srv.Relay().Counters().Snapshot()
		fmt.Fprintf(n.out, "  %-*s  in %3d  forwards %3d  aggregated %3d  answered %3d  dropped %3d\n",
			w, node.name, s.TotalIn(), s.Forwards, s.Aggregated, s.Answered, s.TotalDrops())
	}
}

// keep serves a metrics listener per relay, has the requester peek a fresh
// path every demoKeepPeekInterval, and waits for ctx to end.
func (n *demoNet) keep(ctx context.Context) error {
	fmt.Fprintf(n.out, "\nThe network stays up until Ctrl-C:\n\n")
	w := n.nameWidth()
	for _, node := range n.nodes {
		metrics := ""
		if node.srv != nil {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			node.metrics = serveMetrics(ln, newMetricsHandler(newMetricsRegistry(node.srv, nil, version), nil, false))
			metrics = "  metrics " + node.metrics.URL() + "/metrics"
		}
		fmt.Fprintf(n.out, "  %-*s  udp %-15s%s\n", w, node.name, node.addr, metrics)
	}
	fmt.Fprintf(n.out, "\n%s peeks a new path on %s every %v. Press Ctrl-C to stop.\n", n.rovnys.name, n.moon.name, demoKeepPeekInterval)
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
		n.moon.ep.Publish(path, []byte(path))
		rctx, cancel := context.WithTimeout(ctx, demoRoundTimeout)
		n.rovnys.ep.Peek(rctx, n.moon.ship, path) // failures show in the metrics
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
	fmt.Fprintf(n.out, "\n%s subscribes to /%s on %s, which has no value there yet:\n\n", n.rovnys.name, path, n.moon.name)
	type result struct {
		resp endpoint.Response
		err  error
	}
	done := make(chan result, 1)
	sctx, cancel := context.WithTimeout(ctx, demoRoundTimeout)
	defer cancel()
	go func() {
		resp, err := n.rovnys.ep.Subscribe(sctx, n.moon.ship, path)
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
		n.moon.name, ack.Status, ack.Session, n.rovnys.name)
	var via []string
	for _, t := range beat.Targets {
		via = append(via, n.name(t))
	}
	fmt.Fprintf(n.out, "  heartbeat  %s sends one heartbeat for all its subscriptions there (to %s);\n", n.rovnys.name, strings.Join(via, " + "))
	fmt.Fprintf(n.out, "             %s holds it, to answer the moment the value grows\n", n.moon.name)
	if err := sleepCtx(ctx, demoGrowAfter); err != nil {
		return err
	}
	grown := time.Now()
	n.moon.ep.Publish(path, []byte("the first value"))
	fmt.Fprintf(n.out, "  grow       %s grows /%s\n", n.moon.name, path)
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
		r.resp.Data, time.Since(grown).Round(time.Microsecond), how, n.name(r.resp.From))
	return nil
}

// loopbackNets declares loopback a network that next-hops may name: every
// lane here is on 127.0.0.1.
var loopbackNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
