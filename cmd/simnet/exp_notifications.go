package main

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"github.com/urbit-relay/relay/relay/route"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/urbit-relay/relay/cmd/simnet/internal/sim"
	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/internal/svgchart"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/session"
)

const (
	// NotifySubscribers is the experiment's subscriber count; NotifyShips
	// is the smallest network that has that many planets and moons
	// running no relay.
	NotifySubscribers = 10_000
	NotifyShips       = 12_000
	// NotifyFirstGrow is when the publisher grows its first value, three
	// minutes after the subscribers start asking. Idle traffic before it
	// is measured from NotifyFirstIdle on, a window as long as the longest
	// back-off of a polling subscription (endpoint.PollInterval), so that
	// every way of following is seen over whole periods.
	// NotifyGrowEvery is the time between grows, NotifyGrows how many
	// there are.
	NotifyFirstIdle  = WarmUp + time.Minute
	NotifyFirstGrow  = NotifyFirstIdle + endpoint.PollInterval
	NotifyGrowEvery  = time.Minute
	NotifyGrows      = 4
	NotifyGrowsShort = 3
	// NotifyIdleWindow is the stretch before each later grow over which
	// idle traffic is measured: every subscriber is then waiting for the
	// next value.
	NotifyIdleWindow = 20 * time.Second

	streamNotify = 0x6e6f7466
)

// followMode is how subscribers follow the publisher's path.
type followMode struct {
	name string
	// interval is the endpoints' retry interval: the polling period when
	// subscribers peek.
	interval time.Duration
	// subscribe makes subscribers use Core.Subscribe (scry notifications)
	// rather than Core.Peek; signed makes the publisher run the protocol
	// (it has a key every subscriber knows). Subscribing to a publisher
	// that does not run it is the protocol's fallback: polling, backing
	// off from the retry interval to endpoint.PollInterval.
	subscribe, signed bool
}

// followModes are the ways compared: the notification protocol, its
// fallback, and polling at the endpoint's retry interval (1 s, how a remote
// scry for a value not grown yet is retried today) and at slower periods
// that trade latency for traffic.
func followModes() []followMode {
	modes := []followMode{
		{name: "notifications (subscribe, publisher runs the protocol)", interval: endpoint.DefaultRetryInterval, subscribe: true, signed: true},
		{name: "subscribe, publisher without the protocol (backoff polling)", interval: endpoint.DefaultRetryInterval, subscribe: true},
	}
	for _, iv := range []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second} {
		modes = append(modes, followMode{name: fmt.Sprintf("polling every %v", prose(iv)), interval: iv})
	}
	return modes
}

// pollRun is one way of following's outcome.
type pollRun struct {
	mode        followMode
	notified    int // values that came in acks or heartbeat answers
	subscribers int
	// firstDelay and laterDelay are grow-to-delivery latencies (ms) of the
	// first grow, before any route tightened, and of the later ones.
	firstDelay, laterDelay []float64
	undelivered            int // (subscriber, grow) pairs not delivered by the end
	// Idle traffic per subscriber per minute: before the first grow, and
	// before the later ones.
	idleFirst, idleLater float64
	// Datagrams per second the publisher's host and all galaxies received
	// while idle, before later grows.
	publisherPPS, galaxiesPPS float64
	// Relays' totals over the run: requests refused for a full pending
	// entry, requests past the cap forwarded to refresh the entry upstream
	// (relay.EventCappedForwards), and requests dropped because the
	// receiver was a sponsee whose lane the relay did not know.
	requestersFull, cappedForwards, sponseeUnknown uint64
	evicted, throttled                             uint64 // relays' pending evictions and amplification refusals
}

type notificationsResult struct {
	ships int
	runs  []pollRun
}

func runNotifications(p params) (*notificationsResult, error) {
	q := p
	subs := NotifySubscribers
	if p.short {
		subs = 0 // every eligible ship
	} else {
		q.ships = max(p.ships, NotifyShips)
	}
	res := &notificationsResult{ships: q.ships}
	modes := followModes()
	res.runs = make([]pollRun, len(modes))
	var jobs []func() error
	for i, m := range modes {
		jobs = append(jobs, func() error {
			r, err := pollOnce(q, m, subs)
			res.runs[i] = r
			return err
		})
	}
	return res, parallel(p.workers, jobs)
}

func pollOnce(p params, mode followMode, subs int) (pollRun, error) {
	cfg := p.config(strategyDesign(), sim.Fast())
	cfg.RetryInterval = mode.interval
	interval := mode.interval
	n, err := sim.New(cfg)
	if err != nil {
		return pollRun{}, err
	}
	ships := n.Ships()
	rng := rand.New(rand.NewPCG(p.seed, streamNotify))
	pool := shuffled(rng, requesters(ships))
	// The publisher is a public planet.
	pub := -1
	for i, s := range pool {
		if !ships[s].NAT && ships[s].Class == lane.Planet {
			pub = s
			pool = append(pool[:i:i], pool[i+1:]...)
			break
		}
	}
	if pub < 0 {
		return pollRun{}, fmt.Errorf("no public planet to publish")
	}
	// Every subscriber asks the publisher's star and galaxy: their relays
	// hear every subscriber, far more than their sponsees.
	if err := n.ProductionTablesOnChain(pub); err != nil {
		return pollRun{}, err
	}
	if mode.signed {
		var seed [ed25519.SeedSize]byte
		binary.LittleEndian.PutUint64(seed[:], p.seed)
		if err := n.SetKey(pub, ed25519.NewKeyFromSeed(seed[:])); err != nil {
			return pollRun{}, err
		}
	}
	if subs == 0 || subs > len(pool) {
		subs = len(pool)
	}
	pool = pool[:subs]
	grows := NotifyGrows
	if p.short {
		grows = NotifyGrowsShort
	}
	growAt := make([]time.Duration, grows+1) // growAt[k] for feed/k, k from 1
	for k := 1; k <= grows; k++ {
		growAt[k] = NotifyFirstGrow + time.Duration(k-1)*NotifyGrowEvery
		n.At(growAt[k], func() { n.Grow(pub, feedPath(k), []byte(feedPath(k))) })
	}
	r := pollRun{mode: mode, subscribers: subs}
	delivered := 0
	var failed error
	var ask func(s, k int)
	ask = func(s, k int) {
		if k > grows {
			return
		}
		follow := n.Peek
		if mode.subscribe {
			follow = n.Subscribe
		}
		err := follow(s, pub, feedPath(k), 0, func(res sim.Result) {
			if res.Notified {
				r.notified++
			}
			d := ms(res.End - growAt[k])
			if k == 1 {
				r.firstDelay = append(r.firstDelay, d)
			} else {
				r.laterDelay = append(r.laterDelay, d)
			}
			delivered++
			ask(s, k+1)
		})
		if err != nil && failed == nil {
			failed = err
		}
	}
	// Subscribers start over one poll interval, so their polls are spread
	// evenly rather than in step.
	for _, s := range pool {
		n.At(WarmUp+time.Duration(rng.Int64N(int64(interval))), func() { ask(s, 1) })
	}
	// Idle windows: the NotifyIdleWindow before each grow, when every
	// subscriber is asking for the value about to be grown.
	var idleMsgs [2]float64
	var idleTime [2]time.Duration
	var pubIn, galIn float64
	for k := 1; k <= grows; k++ {
		k := k
		var m0 uint64
		var l0 sim.Load
		from := growAt[k] - NotifyIdleWindow
		if k == 1 {
			from = NotifyFirstIdle
		}
		n.At(from, func() {
			m0 = subscriptionTraffic(n.Counters())
			l0 = n.Load()
		})
		n.At(growAt[k]-time.Nanosecond, func() {
			i := min(k-1, 1)
			idleMsgs[i] += float64(subscriptionTraffic(n.Counters()) - m0)
			idleTime[i] += growAt[k] - from
			if k > 1 {
				d := n.Load().Sub(l0)
				pubIn += float64(d[pub][sim.TrafficTracked] + d[pub][sim.TrafficNotify])
				for g := range ships {
					if ships[g].Class == lane.Galaxy {
						galIn += float64(d[g][sim.TrafficTracked] + d[g][sim.TrafficNotify])
					}
				}
			}
		})
	}
	end := growAt[grows] + NotifyGrowEvery
	n.RunUntil(end)
	if failed != nil {
		return pollRun{}, failed
	}
	r.undelivered = subs*grows - delivered
	perSubMin := func(m float64, d time.Duration) float64 { return m / float64(subs) / d.Minutes() }
	r.idleFirst = perSubMin(idleMsgs[0], idleTime[0])
	r.idleLater = perSubMin(idleMsgs[1], idleTime[1])
	r.publisherPPS = pubIn / idleTime[1].Seconds()
	r.galaxiesPPS = galIn / idleTime[1].Seconds()
	snap := n.RelayTotals()
	r.requestersFull = snap.Drops[relay.DropRequestersFull]
	r.cappedForwards = snap.Events[relay.EventCappedForwards]
	r.sponseeUnknown = snap.Drops[relay.DropSponseeUnknown]
	r.evicted, r.throttled = snap.Events[relay.EventEvicted], snap.Events[relay.EventAmpThrottled]
	return r, nil
}

func feedPath(k int) string { return fmt.Sprintf("feed/%d", k) }

// subscriptionTraffic is the datagrams sent so far that serve subscriptions:
// the feed's own peeks and pages, and the notification protocol's.
func subscriptionTraffic(c sim.Counters) uint64 {
	return c.SentBy[sim.TrafficTracked] + c.SentBy[sim.TrafficNotify]
}

func (r *notificationsResult) section() section {
	var b strings.Builder
	r0 := r.runs[0]
	grows := 0
	if r0.subscribers > 0 {
		grows = (len(r0.laterDelay) + len(r0.firstDelay) + r0.undelivered) / r0.subscribers
	}
	fmt.Fprintf(&b, "%d subscribers (planets and moons, %d ships in all) follow one publisher, a public planet: each asks for the next value (`feed/1`, `feed/2`, ...) and, once it has it, for the one after. "+
		"The publisher grows a value %v after they start and then every %v (%d in all). "+
		"With *notifications* each subscriber calls `Core.Subscribe`: the publisher acks the subscription and holds the subscriber's heartbeats (one exchange per %v while idle), answering one at once when the path grows. "+
		"*Polling* is `Core.Peek`: a value not grown yet is not answered, so the endpoint re-sends the request every poll interval (its retry interval), the only way to follow a path without the protocol. "+
		"*Grow-to-delivery* is from the grow to the subscriber's answer; *idle* traffic counts every datagram serving subscriptions (feed peeks and pages on every link, and the protocol's requests, acks and heartbeats) per subscriber per minute, over the %v before the first grow and the %v before each later one; the keepalive pings every ship sends anyway are not counted. "+
		"*Requesters full* counts requests the relays refused for a full pending entry (in brackets, those past the cap forwarded anyway to refresh the entry upstream), *sponsee unknown* those dropped because the receiver was a sponsee whose lane the relay did not know. Design strategy, fast preset.\n\n",
		r0.subscribers, r.ships, prose(NotifyFirstGrow-WarmUp), prose(NotifyGrowEvery), grows, prose(session.HoldTime), prose(NotifyFirstGrow-NotifyFirstIdle), prose(NotifyIdleWindow))
	t := table{head: []string{"how subscribers follow", "first grow: delivery mean / p99", "later grows: delivery mean / p50 / p99", "notified", "undelivered", "idle datagrams per subscriber per minute (before first grow / later)", "idle pkt/s at the publisher", "idle pkt/s at all galaxies", "requesters full (capped forwards)", "sponsee unknown"}}
	chart := svgchart.LineChart{Title: fmt.Sprintf("Following a path: latency against idle traffic (%d subscribers)", r0.subscribers),
		XLabel: "idle datagrams per subscriber per minute", YLabel: "grow-to-delivery, ms (later grows; log scale)", LogY: true, LegendBottom: true}
	var series []svgchart.Series
	for _, run := range r.runs {
		delivered := len(run.firstDelay) + len(run.laterDelay)
		t.add(run.mode.name,
			f(mean(run.firstDelay), 0)+" / "+f(percentile(run.firstDelay, 99), 0)+" ms",
			f(mean(run.laterDelay), 0)+" / "+f(percentile(run.laterDelay, 50), 0)+" / "+f(percentile(run.laterDelay, 99), 0)+" ms",
			pct(run.notified, delivered), fmt.Sprint(run.undelivered), f(run.idleFirst, 1)+" / "+f(run.idleLater, 1),
			f(run.publisherPPS, 0), f(run.galaxiesPPS, 0), fmt.Sprintf("%d (%d)", run.requestersFull, run.cappedForwards), fmt.Sprint(run.sponseeUnknown))
		name := run.mode.name
		if i := strings.Index(name, " ("); i > 0 {
			name = name[:i]
		}
		series = append(series, svgchart.Series{Name: name, X: []float64{run.idleLater, run.idleLater}, Y: []float64{mean(run.laterDelay), percentile(run.laterDelay, 99)},
			Labels: []string{"mean", "p99"}})
	}
	chart.Series = series
	b.WriteString(t.String())
	b.WriteString("\n![Following a path: latency against idle traffic](simulation/notifications.svg)\n")
	return section{title: "3. Notifications against polling", markdown: b.String(), plots: map[string][]byte{"notifications.svg": chart.Render()},
		findings: r.findings(), notes: r.notes(), evicted: r.sum(func(x *pollRun) uint64 { return x.evicted }),
		throttled: r.sum(func(x *pollRun) uint64 { return x.throttled })}
}

// compared returns the runs the findings compare: the notification
// protocol, polling at the retry interval, and the slowest polling; nil
// when a run is missing.
func (r *notificationsResult) compared() (note, poll, slowest *pollRun) {
	for i := range r.runs {
		m := r.runs[i].mode
		if m.subscribe && m.signed && note == nil {
			note = &r.runs[i]
		}
		if !m.subscribe && m.interval == endpoint.DefaultRetryInterval && poll == nil {
			poll = &r.runs[i]
		}
		if !m.subscribe && (slowest == nil || m.interval > slowest.mode.interval) {
			slowest = &r.runs[i]
		}
	}
	return note, poll, slowest
}

func (r *notificationsResult) findings() []string {
	note, poll, slowest := r.compared()
	if note == nil || poll == nil || slowest == nil {
		return nil
	}
	return []string{fmt.Sprintf("With %d subscribers, notifications deliver a grown value in %s on average (p99 %s) for %s idle datagrams per subscriber per minute; polling every %v takes %s (p99 %s) for %s, and polling every %v %s (p99 %s) for %s. "+
		"Polls undo the subscribers' tightened routes (a poll for a value not grown yet goes unanswered, and nothing else arrives from the publisher's lane between grows: a lane is judged alive by anything heard from it, and this one is silent, as vere would judge it too), so they go back to the publisher's galaxy (%s pkt/s at galaxies while idle, polling every %v; %s with notifications), where every subscriber's poll for the next value meets one pending entry of at most %d requesters: relays refused %d polls for a full entry.",
		note.subscribers, msProse(mean(note.laterDelay)), msProse(percentile(note.laterDelay, 99)), f(note.idleLater, 1),
		prose(poll.mode.interval), msProse(mean(poll.laterDelay)), msProse(percentile(poll.laterDelay, 99)), f(poll.idleLater, 1),
		prose(slowest.mode.interval), msProse(mean(slowest.laterDelay)), msProse(percentile(slowest.laterDelay, 99)), f(slowest.idleLater, 1),
		f(poll.galaxiesPPS, 0), prose(poll.mode.interval), f(note.galaxiesPPS, 0), pit.DefaultMaxRequestersPerEntry, poll.requestersFull)}
}

// notes are the notification runs' observations on the code under test.
func (r *notificationsResult) notes() []string {
	note, poll, slowest := r.compared()
	if note == nil || poll == nil || slowest == nil {
		return nil
	}
	var unknown uint64
	polls := 0
	for i := range r.runs {
		if !r.runs[i].mode.signed {
			unknown += r.runs[i].sponseeUnknown
			polls++
		}
	}
	delivery := fmt.Sprintf("Polling every %v delivers in %s on average, polling every %v in %s.",
		prose(poll.mode.interval), msProse(mean(poll.laterDelay)), prose(slowest.mode.interval), msProse(mean(slowest.laterDelay)))
	if pm := mean(poll.laterDelay); pm > 4*ms(poll.mode.interval) {
		delivery = fmt.Sprintf("When the value grows, each round trip from the galaxy serves one entry's requesters and the rest wait for later rounds: that, not the polling interval, is why polling every %v delivers in %s on average, where the interval alone would allow about %s (polling every %v: %s).",
			prose(poll.mode.interval), msProse(pm), msProse(ms(poll.mode.interval)/2), prose(slowest.mode.interval), msProse(mean(slowest.laterDelay)))
	}
	notes := []string{
		fmt.Sprintf("**A relay keeps a sponsee's lane while requests to it go unanswered** (fixed). A request unanswered for `DefaultProbeTimeout` counts against the lane it went to, and a poll for a value not grown yet looks the same, so a star relay forwarding polls to its planet used to drop the planet's lane and answer every request for it with `sponsee_unknown` until the planet's next ping. A lane learned from the ship's own pokes, its pings to its sponsor (`route.Table.Contacted`), is now exempt: it expires only after `DirectLaneExpiry` (%v) of silence. Over the %d runs of *Notifications against polling* without the protocol, relays dropped %d requests for an unknown sponsee.",
			prose(route.DefaultDirectLaneExpiry), polls, unknown),
		fmt.Sprintf("**Polling still undoes the subscriber's own tightened route.** The direct lane a subscriber learned from the publisher's answers (`route.Table.Heard`) is probed like any lane learned from answers, so unanswered polls demote it, then drop it, and polls go back up the chain to the publisher's galaxy. There every subscriber meets one pending entry per value, of at most %d requesters: polling every %v, relays refused %d polls for a full entry and forwarded %d more past the cap to refresh the entry upstream (`relay.EventCappedForwards`, once per suppression window, so a lost forward no longer leaves the entry waiting). %s The notification protocol avoids both: acks and heartbeat answers keep its lanes proven, and each subscriber's heartbeat has its own name.",
			pit.DefaultMaxRequestersPerEntry, prose(poll.mode.interval), poll.requestersFull, poll.cappedForwards, delivery),
	}
	if note.throttled > 0 {
		notes = append(notes, fmt.Sprintf("**The amplification budget withholds acks from the publisher's galaxy as the subscriptions start.** With the protocol the publisher's star refused %d pages for amplification (polling every %v: %d). "+
			"Every subscriber's first requests reach the star through the galaxy, so the star owes the galaxy a page for each of %d subscriptions, and past what the galaxy's budget there holds it withholds them; each subscriber also asked the star directly and had its ack from there, so every value was delivered (%s by notification). "+
			"A relay forwarding for many requesters at once is budgeted as one requester.",
			note.throttled, prose(poll.mode.interval), poll.throttled, note.subscribers, pct(note.notified, len(note.firstDelay)+len(note.laterDelay))))
	}
	return notes
}

// sum adds v over every run.
func (r *notificationsResult) sum(v func(*pollRun) uint64) uint64 {
	var t uint64
	for i := range r.runs {
		t += v(&r.runs[i])
	}
	return t
}

// msProse formats milliseconds for a sentence: "59 ms", "32.2 s".
func msProse(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return prose(time.Duration(x * float64(time.Millisecond)).Round(time.Millisecond)).String()
}
