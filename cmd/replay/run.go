package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urbit-relay/relay/internal/eventq"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

const (
	// DefaultTimeout is how long a request waits for its answer (a legacy
	// packet for its delivery) before it counts as missing, and so the
	// longest a run drains after its last send. Two seconds is the relay's
	// own probe timeout: an answer later than that would have been
	// retransmitted by a real requester.
	DefaultTimeout = 2 * time.Second

	// loopGap separates iterations of a looped fixture, in fixture time.
	loopGap = 100 * time.Millisecond

	// progressInterval is how often the live progress line is redrawn.
	progressInterval = 250 * time.Millisecond

	// drainPoll is how often the end of a run checks for outstanding
	// answers.
	drainPoll = 5 * time.Millisecond

	// minSweep and maxSweep bound how often timed-out requests are swept.
	minSweep = 5 * time.Millisecond
	maxSweep = 50 * time.Millisecond

	// recvBufLen is a lane socket's receive buffer: one datagram larger
	// than any the relay sends.
	recvBufLen = 2048

	// laneSocketBuffer is the kernel buffer requested for each lane
	// socket. Thousands of lanes each carry little traffic; 256 KiB holds
	// a burst of ~180 full pages.
	laneSocketBuffer = 256 << 10
)

// runConfig is what replay run was asked to do.
type runConfig struct {
	Relay       netip.AddrPort // the relay under test
	Speedup     float64        // pace mode: fixture time / Speedup
	Rate        float64        // > 0: scheduled actions per second instead of the recorded pace
	Concurrency int            // > 0: closed loop, at most this many expected answers outstanding
	Duration    time.Duration  // > 0: stop sending after this long
	Timeout     time.Duration
	Loop        bool // repeat the fixture until Duration
	Limit       int  // > 0: send at most this many scheduled actions
	MetricsURL  string
	Bind        netip.Addr // lane sockets' address
	Ports       string     // lanes' ports: lanePortBase's spec ("" is "auto")
	Progress    io.Writer  // live progress line; nil for none
}

func (c *runConfig) mode() string {
	switch {
	case c.Concurrency > 0 && c.Rate > 0:
		return fmt.Sprintf("closed loop, concurrency %d, at most %g/s", c.Concurrency, c.Rate)
	case c.Concurrency > 0:
		return fmt.Sprintf("closed loop, concurrency %d", c.Concurrency)
	case c.Rate > 0:
		return fmt.Sprintf("fixed rate %g/s", c.Rate)
	}
	return fmt.Sprintf("recorded pace ×%g", c.Speedup)
}

// request is one sent datagram that may be answered (a mesa request) or
// delivered (a legacy packet).
type request struct {
	action int32
	sent   time.Duration
	slot   bool // holds a concurrency slot
}

// held is an answer waiting for the schedule to reach its hold.
type held struct {
	hold   int
	lane   int32
	name   string // a page's request name
	action int32  // a reactive legacy reply; -1 for a page
}

// heldKey names a held page: the lane that sends it and the request name.
type heldKey struct {
	lane int32
	name string
}

type kindCounts struct {
	sent, expected, answered, missing, extra uint64
	lat                                      latHist
}

// runner plays one fixture against one relay.
type runner struct {
	// Static after construction.
	cfg   runConfig
	fx    *fixture
	conns []transport.Conn
	start time.Time
	slots chan struct{} // concurrency tokens; nil when open loop

	sentActions atomic.Int64 // scheduled actions sent so far
	heldCount   atomic.Int64 // len(held), read without the lock

	mu          sync.Mutex
	reqs        map[int64]*request   // guarded by mu; outstanding requests by id
	nextID      int64                // guarded by mu
	deadlines   eventq.Queue[int64]  // guarded by mu; when each request times out
	openReq     []map[string][]int64 // guarded by mu; per lane: name → outstanding requests
	openAmes    map[string][]int64   // guarded by mu; ames key → outstanding deliveries
	replyNext   []map[string]int     // guarded by mu; per lane: next reactive reply per trigger
	held        []held               // guarded by mu
	heldWaiting map[heldKey]bool     // guarded by mu; held pages already queued
	pending     int                  // guarded by mu; outstanding requests the fixture shows answered
	kinds       [numKinds]kindCounts // guarded by mu
	lastSend    time.Duration        // guarded by mu

	pubRequests, pubAnswers, pubHeld, pubUnknown, pubSilent atomic.Uint64
	unmatched, foreign, unrecognized, writeErrs             atomic.Uint64
	probes                                                  atomic.Uint64 // the relay's STUN probes, answered
}

func (r *runner) now() time.Duration { return time.Since(r.start) }

// openLanes binds one socket per fixture lane: lane i on port base+i, or
// on an ephemeral port if base is 0 or that port is taken. moved counts the
// lanes that wanted a port of their own and did not get it.
func openLanes(fx *fixture, bind netip.Addr, base int) (conns []transport.Conn, moved int, err error) {
	conns = make([]transport.Conn, 0, len(fx.lanes))
	for i := range fx.lanes {
		c, err := listenLane(bind, base, i)
		if err != nil && base > 0 {
			moved++
			c, err = listenLane(bind, 0, i)
		}
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, 0, fmt.Errorf("lane socket %d of %d: %w", len(conns)+1, len(fx.lanes), err)
		}
		conns = append(conns, c)
	}
	return conns, moved, nil
}

// listenLane opens lane i's socket on port base+i (any port if base is 0).
func listenLane(bind netip.Addr, base, i int) (transport.Conn, error) {
	port := 0
	if base > 0 {
		port = base + i
	}
	return transport.ListenUDP(netip.AddrPortFrom(bind, uint16(port)), transport.Options{
		BatchSize: 8, ReadBufferBytes: laneSocketBuffer, WriteBufferBytes: laneSocketBuffer,
		// A lane is a ship: vere's socket does not set UDP_GRO
		// (pkg/vere/io/mesa.c), and GRO's 64 KiB read slots
		// would cost each of thousands of lanes 512 KiB.
		DisableGRO: true,
	})
}

// Lane ports (--ports).
const (
	// stablePortLo and stablePortHi bound the ports "auto" gives lanes:
	// below Linux's default ephemeral range (32768-60999,
	// net.ipv4.ip_local_port_range), so that other programs' ephemeral
	// sockets do not hold them, and above the low ports services
	// register.
	stablePortLo = 20000
	stablePortHi = 32768
)

// lanePortBase returns the first of the consecutive ports fx's lanes bind
// to under spec, or 0 for ephemeral ports: "auto" (a base drawn from the
// fixture's lanes, the same for every run of one fixture, so that a second
// run's ships are where the first run's were, as the same ships would be;
// ephemeral if the fixture has more lanes than the range holds),
// "ephemeral" (every run's ships on new ports, as if every ship had moved
// since the last run), or a number (that base).
func lanePortBase(fx *fixture, spec string) (int, error) {
	n := len(fx.lanes)
	switch spec {
	case "ephemeral":
		return 0, nil
	case "auto", "":
		span := stablePortHi - stablePortLo - n
		if span <= 0 {
			return 0, nil
		}
		h := fnv.New32a()
		for _, l := range fx.lanes {
			b, _ := l.MarshalBinary()
			h.Write(b)
		}
		return stablePortLo + int(h.Sum32()%uint32(span)), nil
	}
	base, err := strconv.Atoi(spec)
	if err != nil || base < 1 || base+n > 1<<16 {
		return 0, fmt.Errorf("--ports %q: want auto, ephemeral or a first port with room for %d lanes", spec, n)
	}
	return base, nil
}

// replay plays fx against the relay in cfg and returns the summary.
func replay(ctx context.Context, fx *fixture, cfg runConfig) (*summary, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Speedup <= 0 {
		cfg.Speedup = 1
	}
	if !cfg.Bind.IsValid() {
		cfg.Bind = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if cfg.Loop && cfg.Duration <= 0 && cfg.Limit <= 0 {
		return nil, errors.New("--loop needs --duration or --limit")
	}
	var before map[string]float64
	var metricsErr error
	if cfg.MetricsURL != "" {
		before, metricsErr = scrapeDrops(ctx, cfg.MetricsURL)
	}
	base, err := lanePortBase(fx, cfg.Ports)
	if err != nil {
		return nil, err
	}
	conns, moved, err := openLanes(fx, cfg.Bind, base)
	if err != nil {
		return nil, err
	}
	r := &runner{
		cfg: cfg, fx: fx, conns: conns, reqs: map[int64]*request{},
		openReq:     make([]map[string][]int64, len(fx.lanes)),
		replyNext:   make([]map[string]int, len(fx.lanes)),
		openAmes:    map[string][]int64{},
		heldWaiting: map[heldKey]bool{},
	}
	for i := range fx.lanes {
		r.openReq[i] = map[string][]int64{}
		r.replyNext[i] = map[string]int{}
	}
	if cfg.Concurrency > 0 {
		r.slots = make(chan struct{}, cfg.Concurrency)
	}
	r.start = time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.routineRead(int32(i), c)
		}()
	}
	sweepCtx, stopSweep := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.routineSweep(sweepCtx)
	}()
	if cfg.Progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.routineProgress(sweepCtx)
		}()
	}

	r.routineSchedule(ctx)
	// The schedule may have stopped short (--limit, --duration): answers
	// held for later parts of it go now.
	r.releaseHeld(1<<31 - 1)
	sendPhase := r.now()
	r.drain(ctx)
	elapsed := r.now()
	stopSweep()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	r.finish()
	if cfg.Progress != nil {
		fmt.Fprint(cfg.Progress, "\r\033[K")
	}

	s := r.summarize(sendPhase, elapsed)
	s.PortBase, s.LanesMoved = base, moved
	if cfg.MetricsURL != "" {
		if metricsErr == nil {
			var after map[string]float64
			after, metricsErr = scrapeDrops(context.WithoutCancel(ctx), cfg.MetricsURL)
			if metricsErr == nil {
				s.RelayDrops = map[string]float64{}
				for k, v := range after {
					if d := v - before[k]; d != 0 {
						s.RelayDrops[k] = d
					}
				}
			}
		}
		if metricsErr != nil {
			s.MetricsError = metricsErr.Error()
		}
	}
	return s, nil
}

// routineSchedule sends the scheduled actions in fixture order, paced by
// the run's mode, until the fixture (or Limit, or Duration) ends.
func (r *runner) routineSchedule(ctx context.Context) {
	cfg := &r.cfg
	var n int64
	for iter := 0; ; iter++ {
		offset := time.Duration(iter) * (r.fx.span + loopGap)
		for _, ai := range r.fx.schedule {
			if ctx.Err() != nil || (cfg.Limit > 0 && n >= int64(cfg.Limit)) {
				return
			}
			act := &r.fx.actions[ai]
			var due time.Duration
			switch {
			case cfg.Rate > 0:
				due = time.Duration(float64(n) / cfg.Rate * float64(time.Second))
			case cfg.Concurrency > 0:
				due = 0
			default:
				due = time.Duration(float64(offset+act.at) / cfg.Speedup)
			}
			if cfg.Duration > 0 && due >= cfg.Duration {
				return
			}
			if !r.waitUntil(ctx, due) {
				return
			}
			slot := false
			if r.slots != nil && act.expect != expectNone {
				if !r.acquire(ctx) {
					return
				}
				slot = true
			}
			r.send(ai, slot)
			n++
			r.sentActions.Store(n)
			if r.heldCount.Load() > 0 {
				r.releaseHeld(int(n))
			}
		}
		if !cfg.Loop {
			return
		}
	}
}

// waitUntil sleeps until due (run time); false if the run must stop first.
func (r *runner) waitUntil(ctx context.Context, due time.Duration) bool {
	for {
		now := r.now()
		if r.cfg.Duration > 0 && now >= r.cfg.Duration {
			return false
		}
		d := due - now
		if d <= 0 {
			return true
		}
		if r.cfg.Duration > 0 {
			d = min(d, r.cfg.Duration-now)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// acquire takes a concurrency slot; false if the run must stop first.
// When every slot is taken and answers are held, they are released first:
// the requests waiting on them may be what holds the slots, and the
// schedule cannot reach their holds while the loop waits (a closed loop
// keeps a fixture's order, not its pauses).
func (r *runner) acquire(ctx context.Context) bool {
	select {
	case r.slots <- struct{}{}:
		return true
	default:
	}
	if r.heldCount.Load() > 0 {
		r.releaseHeld(math.MaxInt)
	}
	var deadline <-chan time.Time
	if r.cfg.Duration > 0 {
		t := time.NewTimer(r.cfg.Duration - r.now())
		defer t.Stop()
		deadline = t.C
	}
	select {
	case r.slots <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-deadline:
	}
	return false
}

// send transmits action ai from its lane, first recording it as a request
// if it can be answered or delivered.
func (r *runner) send(ai int32, slot bool) {
	act := &r.fx.actions[ai]
	r.mu.Lock()
	now := r.now()
	kc := &r.kinds[act.kind]
	kc.sent++
	r.lastSend = now
	switch act.kind {
	case kindPeek, kindPoke, kindAmes:
		r.nextID++
		id := r.nextID
		r.reqs[id] = &request{action: ai, sent: now, slot: slot}
		r.deadlines.Push(now+r.timeoutOf(act), id)
		if act.expect != expectNone {
			kc.expected++
			r.pending++
		}
		if act.kind == kindAmes {
			r.openAmes[act.key] = append(r.openAmes[act.key], id)
		} else {
			r.openReq[act.lane][act.key] = append(r.openReq[act.lane][act.key], id)
		}
	}
	r.mu.Unlock()
	r.write(act.lane, act.data)
}

func (r *runner) write(l int32, b []byte) {
	msg := [1]transport.Message{{Buf: b, N: len(b), Addr: r.cfg.Relay}}
	if _, err := r.conns[l].WriteBatch(msg[:]); err != nil && !errors.Is(err, net.ErrClosed) {
		r.writeErrs.Add(1)
	}
}

// routineRead handles what the relay sends to lane l.
func (r *runner) routineRead(l int32, c transport.Conn) {
	msgs := []transport.Message{{Buf: make([]byte, recvBufLen)}}
	var p scry.Packet
	var a scry.AmesPacket
	for {
		n, err := c.ReadBatch(msgs)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		for i := range n {
			m := &msgs[i]
			if m.Addr != r.cfg.Relay {
				r.foreign.Add(1)
				continue
			}
			b := m.Buf[:m.N]
			switch classify(b, &p, &a) {
			case kindPage:
				r.answered(l, string(p.NameBytes()))
			case kindPeek, kindPoke:
				r.serve(l, string(p.NameBytes()))
			case kindAmes:
				key := amesKey(&a)
				r.delivered(key)
				r.reply(l, key)
			default:
				// The relay probes a busy lane with a STUN binding
				// request; every vere ship answers one, as this does.
				var q scry.STUNRequest
				if !scry.IsSTUN(b) || q.Parse(b) != nil {
					r.unrecognized.Add(1)
					continue
				}
				resp := scry.STUNResponse{TxID: q.TxID, Mapped: m.Addr} // the lane the request came from, as vere maps it
				rb := resp.Append(nil)
				if _, err := c.WriteBatch([]transport.Message{{Buf: rb, N: len(rb), Addr: m.Addr}}); err != nil {
					r.writeErrs.Add(1)
				}
				r.probes.Add(1)
			}
		}
	}
}

// answered completes lane l's outstanding requests for name.
func (r *runner) answered(l int32, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := r.openReq[l][name]
	if len(ids) == 0 {
		r.unmatched.Add(1)
		return
	}
	delete(r.openReq[l], name)
	now := r.now()
	for _, id := range ids {
		r.completeLocked(id, now)
	}
}

// delivered completes the oldest outstanding legacy packet with key.
func (r *runner) delivered(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := r.openAmes[key]
	if len(ids) == 0 {
		r.unmatched.Add(1)
		return
	}
	if len(ids) == 1 {
		delete(r.openAmes, key)
	} else {
		r.openAmes[key] = ids[1:]
	}
	r.completeLocked(ids[0], r.now())
}

func (r *runner) completeLocked(id int64, now time.Duration) {
	q := r.reqs[id]
	if q == nil {
		return
	}
	delete(r.reqs, id)
	act := &r.fx.actions[q.action]
	kc := &r.kinds[act.kind]
	kc.answered++
	kc.lat.record(now - q.sent)
	if act.expect != expectNone {
		r.pending--
	} else {
		kc.extra++
	}
	if q.slot {
		<-r.slots
	}
}

// timeoutOf is how long a request for act may wait: Timeout, plus, at the
// recorded pace, as long as the fixture's answer took (scaled), since the
// replay's publishers answer no sooner than the fixture's did when they
// held the request.
func (r *runner) timeoutOf(act *action) time.Duration {
	if r.cfg.Rate > 0 || r.cfg.Concurrency > 0 {
		return r.cfg.Timeout
	}
	return r.cfg.Timeout + time.Duration(float64(act.answerAfter)/r.cfg.Speedup)
}

// serve answers a request the relay handed lane l, as the fixture's
// publisher did.
func (r *runner) serve(l int32, name string) {
	r.pubRequests.Add(1)
	an := r.fx.answers[l][name]
	if an == nil {
		if len(r.fx.answers[l]) == 0 {
			r.pubSilent.Add(1)
		} else {
			r.pubUnknown.Add(1)
		}
		return
	}
	if an.hold >= 0 && r.sentActions.Load() < int64(an.hold) {
		r.mu.Lock()
		// Checked again under the lock, which releaseHeld takes.
		if r.sentActions.Load() < int64(an.hold) {
			if k := (heldKey{l, name}); !r.heldWaiting[k] {
				r.heldWaiting[k] = true
				r.held = append(r.held, held{hold: an.hold, lane: l, name: name, action: -1})
				r.heldCount.Store(int64(len(r.held)))
				r.pubHeld.Add(1)
			}
			r.mu.Unlock()
			r.releaseIfPassed(an.hold)
			return
		}
		r.mu.Unlock()
	}
	r.pubAnswers.Add(1)
	r.write(l, an.page)
}

// reply sends lane l's reactive legacy reply to the packet with key.
func (r *runner) reply(l int32, key string) {
	ids := r.fx.replies[l][key]
	if len(ids) == 0 {
		return
	}
	r.mu.Lock()
	k := r.replyNext[l][key]
	if k >= len(ids) {
		r.mu.Unlock()
		return
	}
	r.replyNext[l][key] = k + 1
	ai := ids[k]
	if h := r.fx.actions[ai].hold; h >= 0 && r.sentActions.Load() < int64(h) {
		r.held = append(r.held, held{hold: h, lane: l, action: ai})
		r.heldCount.Store(int64(len(r.held)))
		r.mu.Unlock()
		r.releaseIfPassed(h)
		return
	}
	r.mu.Unlock()
	r.send(ai, false)
}

// releaseIfPassed releases what is held if the schedule has reached hold
// since the caller, having held an answer for it, stored heldCount. The
// schedule stores sentActions and then loads heldCount; the holder stores
// heldCount and then loads sentActions: of the two, at least one sees the
// other's store, so an answer held just as the schedule passed its hold
// is released by one of them (releaseHeld takes each answer once), never
// left waiting for a schedule that has ended (a run with --limit stops at
// its last action).
func (r *runner) releaseIfPassed(hold int) {
	if n := r.sentActions.Load(); n >= int64(hold) {
		r.releaseHeld(int(n))
	}
}

// releaseHeld sends the held answers whose hold the schedule has reached.
func (r *runner) releaseHeld(sent int) {
	var due []held
	r.mu.Lock()
	keep := r.held[:0]
	for _, h := range r.held {
		if h.hold <= sent {
			due = append(due, h)
			if h.action < 0 {
				delete(r.heldWaiting, heldKey{h.lane, h.name})
			}
		} else {
			keep = append(keep, h)
		}
	}
	r.held = keep
	r.heldCount.Store(int64(len(r.held)))
	r.mu.Unlock()
	for _, h := range due {
		if h.action >= 0 {
			r.send(h.action, false)
			continue
		}
		r.pubAnswers.Add(1)
		r.write(h.lane, r.fx.answers[h.lane][h.name].page)
	}
}

// routineSweep times out requests unanswered for Timeout.
func (r *runner) routineSweep(ctx context.Context) {
	t := time.NewTicker(min(max(r.cfg.Timeout/10, minSweep), maxSweep))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.sweep(r.now())
		}
	}
}

// sweep times out the requests whose deadline is before now.
func (r *runner) sweep(now time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.deadlines.Due(now) {
		_, id := r.deadlines.Pop()
		if q := r.reqs[id]; q != nil {
			r.timeoutLocked(id, q)
		}
	}
}

// timeoutLocked ends request id unanswered and forgets it, so that a late
// answer counts as unmatched.
func (r *runner) timeoutLocked(id int64, q *request) {
	delete(r.reqs, id)
	act := &r.fx.actions[q.action]
	if act.expect != expectNone {
		r.kinds[act.kind].missing++
		r.pending--
	}
	if q.slot {
		<-r.slots
	}
	var m map[string][]int64
	if act.kind == kindAmes {
		m = r.openAmes
	} else {
		m = r.openReq[act.lane]
	}
	ids := m[act.key]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(m, act.key)
	} else {
		m[act.key] = ids
	}
}

// drain waits for the answers still due, until their deadlines.
func (r *runner) drain(ctx context.Context) {
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for {
		r.sweep(r.now())
		r.mu.Lock()
		pending := r.pending
		r.mu.Unlock()
		if pending <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// finish counts every request still outstanding as timed out.
func (r *runner) finish() {
	r.sweep(1<<63 - 1)
}

func (r *runner) routineProgress(ctx context.Context) {
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		var sent, answered, expected, missing uint64
		var lat latHist
		for k := range r.kinds {
			kc := &r.kinds[k]
			sent += kc.sent
			answered += kc.answered
			expected += kc.expected
			missing += kc.missing
			lat.merge(&kc.lat)
		}
		pending := r.pending
		r.mu.Unlock()
		el := r.now().Seconds()
		fmt.Fprintf(r.cfg.Progress, "\r\033[K%6.1fs  sent %d (%.0f/s)  answered %d/%d  in flight %d  missing %d  p99 %s",
			el, sent, float64(sent)/el, answered, expected, pending, missing, fmtDur(lat.quantile(0.99)))
	}
}
