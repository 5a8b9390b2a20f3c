package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/scry"
)

// Fixture conventions (testdata/README.md): every generated fixture is a
// capture taken at one relay, fronting the star ~marzod at 10.0.0.1:13337.
// Publishers are planets under ~marzod at 10.2.0.0/16, requesters are
// ships elsewhere at 10.1.0.0/16 (a few at 2001:db8:1::/48), attackers at
// 10.9.0.0/16.
const (
	genRelayShip = "~marzod"
	genRelayLane = "10.0.0.1:13337"
	// genShipLane is the fronted ship's own process (relay.Config.ShipLane),
	// silent in the simulation.
	genShipLane = "10.0.0.2:13337"

	// notifyPrefix is the path prefix the subscription storm uses for
	// values that grow later: a stand-in for the scry notification
	// protocol still being designed, modelled as ordinary peeks (a
	// subscriber's heartbeat is a re-sent peek) and pages (the grown value).
	notifyPrefix = "notify/"

	// heartbeat is how often a subscriber re-sends its peek for a value
	// not yet grown: the endpoint's retry interval.
	heartbeat = endpoint.DefaultRetryInterval

	// startDelay is when requests begin: after every publisher's first
	// ping, sent in the first pingSpread.
	startDelay = 300 * time.Millisecond
	pingSpread = 200 * time.Millisecond

	// mesaMaxTries is how many times a requester sends a request before
	// giving up (endpoint.Config.MaxTries); amesMaxTries, a legacy
	// message or wail.
	mesaMaxTries = 6
	amesMaxTries = 5

	// simDrain is how long the simulation runs past the last flow's
	// start: the flow's retries (one a second, mesaMaxTries of them) and
	// a slow publisher's answer fit in it.
	simDrain = 20 * time.Second

	// lossToRelay is the chance a request or answer is lost before the
	// relay (so it is not in the capture); lossFromRelay, that a datagram
	// the relay sent is lost after it (in the capture, never heard). They
	// make requesters retransmit, as on the Internet.
	lossToRelay   = 0.005
	lossFromRelay = 0.01

	// One-way delays between the relay and its neighbours, drawn
	// log-uniformly: requesters anywhere on the Internet, publishers
	// (the relay's sponsees) nearer, attackers in between.
	requesterDelayMin = 5 * time.Millisecond
	requesterDelayMax = 150 * time.Millisecond
	publisherDelayMin = 2 * time.Millisecond
	publisherDelayMax = 40 * time.Millisecond
	attackerDelayMin  = 5 * time.Millisecond
	attackerDelayMax  = 80 * time.Millisecond
)

// genEpoch is the time of the first record of every generated fixture, so
// that a seed gives the same bytes on every machine.
func genEpoch() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// genConfig says what to generate. Zero sizes take the mix's defaults.
type genConfig struct {
	Mix        string
	Seed       uint64
	Vectors    string // directory holding mesa/ and ames/ vector files (hostile mix)
	Requesters int
	Publishers int
	Flows      int
	Window     time.Duration
}

// mixDefaults are the sizes of the checked-in fixtures, chosen to keep
// each under about a megabyte.
var mixDefaults = map[string]genConfig{
	"steady":  {Requesters: 2000, Publishers: 120, Flows: 2000, Window: 8 * time.Second},
	"storm":   {Requesters: 300, Publishers: 12, Window: 6 * time.Second},
	"ames":    {Requesters: 1000, Publishers: 80, Flows: 900, Window: 8 * time.Second},
	"hostile": {Requesters: 250, Publishers: 30, Flows: 250, Window: 6 * time.Second},
}

func mixNames() []string {
	var out []string
	for k := range mixDefaults {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func cmdGen(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg genConfig
	fs.StringVar(&cfg.Mix, "mix", "steady", "traffic mix: "+strings.Join(mixNames(), ", "))
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed: the same seed gives the same bytes")
	fs.StringVar(&cfg.Vectors, "vectors", "testdata", "directory with mesa/mesa-malformed.jsonl and ames/ames-malformed.jsonl (hostile mix)")
	fs.IntVar(&cfg.Requesters, "requesters", 0, "requesting ships (0: the mix's default)")
	fs.IntVar(&cfg.Publishers, "publishers", 0, "publishing ships under the relay (0: the mix's default)")
	fs.IntVar(&cfg.Flows, "flows", 0, "requests started (a value fetch, a poke, a message; 0: the mix's default)")
	fs.DurationVar(&cfg.Window, "window", 0, "time over which flows start (0: the mix's default)")
	out := fs.String("o", "", "output pcap file (required; - for stdout)")
	quiet := fs.Bool("q", false, "do not print the reference relay's counts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() != 0 {
		return errors.New("gen needs -o FILE and no arguments")
	}
	recs, snap, err := generate(cfg)
	if err != nil {
		return err
	}
	if *out == "-" {
		err = writeFixture(stdout, recs)
	} else {
		err = writeFixtureFile(*out, recs)
	}
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "%s: %d records; the reference relay counted:\n", *out, len(recs))
		writeSnapshot(stderr, &snap)
	}
	return nil
}

// writeFixture writes recs to w as a pcap file.
func writeFixture(w io.Writer, recs []capture.Record) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	enc, err := capture.NewEncoder(bw)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func writeFixtureFile(path string, recs []capture.Record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = writeFixture(f, recs)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeSnapshot prints a relay's counters.
func writeSnapshot(w io.Writer, s *relay.Snapshot) {
	var in, out, drops []string
	for _, k := range relay.Kinds() {
		if s.In[k] != 0 {
			in = append(in, fmt.Sprintf("%s %d", k, s.In[k]))
		}
		if s.Out[k] != 0 {
			out = append(out, fmt.Sprintf("%s %d", k, s.Out[k]))
		}
	}
	for _, d := range relay.Drops() {
		if s.Drops[d] != 0 {
			drops = append(drops, fmt.Sprintf("%s %d", d, s.Drops[d]))
		}
	}
	fmt.Fprintf(w, "  in: %s\n  out: %s\n  drops: %s\n  answered %d, aggregated %d, retransmits %d\n",
		strings.Join(in, ", "), strings.Join(out, ", "), strings.Join(drops, ", "), s.Events[relay.EventAnswered], s.Events[relay.EventAggregated], s.Events[relay.EventRetransmits])
}

// generate runs the mix's simulation and returns its records and the
// reference relay's counters.
func generate(cfg genConfig) ([]capture.Record, relay.Snapshot, error) {
	d, ok := mixDefaults[cfg.Mix]
	if !ok {
		return nil, relay.Snapshot{}, fmt.Errorf("unknown mix %q (have %s)", cfg.Mix, strings.Join(mixNames(), ", "))
	}
	if cfg.Requesters <= 0 {
		cfg.Requesters = d.Requesters
	}
	if cfg.Publishers <= 0 {
		cfg.Publishers = d.Publishers
	}
	if cfg.Flows <= 0 {
		cfg.Flows = d.Flows
	}
	if cfg.Window <= 0 {
		cfg.Window = d.Window
	}
	if cfg.Requesters > 60000 || cfg.Publishers > 60000 {
		return nil, relay.Snapshot{}, errors.New("at most 60000 requesters and publishers")
	}
	w, err := newWorld(cfg)
	if err != nil {
		return nil, relay.Snapshot{}, err
	}
	mixes := map[string]func() error{"steady": w.steady, "storm": w.storm, "ames": w.ames, "hostile": w.hostile}
	if err := mixes[cfg.Mix](); err != nil {
		return nil, relay.Snapshot{}, err
	}
	w.s.runAll()
	if w.s.offRelay != 0 {
		return nil, relay.Snapshot{}, fmt.Errorf("gen: ships addressed %d datagrams past the relay", w.s.offRelay)
	}
	return w.s.records, w.s.relay.Counters().Snapshot(), nil
}

// world is the cast of a mix: the relay, its publishers and the
// requesters elsewhere.
type world struct {
	cfg        genConfig
	s          *sim
	relayShip  lane.Ship
	end        time.Duration // when flows stop starting
	publishers []*publisher
	requesters []*ship
	taken      map[lane.Ship]bool
	catalog    []pubPath // every (publisher, path), in popularity order
	zipf       *rand.Zipf
}

// publisher is a ship under the relay with values to serve: it answers
// peeks and pokes (and, in the ames mix, legacy messages and wails) after
// a think time (publisherThink), holds peeks for values not grown yet,
// and pings the relay's ship, its sponsor, so the relay learns its lane.
type publisher struct {
	*ship
	id     lane.Ship
	life   uint8             // legacy ames life (the ames mix)
	values map[string][]byte // what it publishes, by path
	paths  []string          // its paths, in the order made
}

type pubPath struct {
	pub  int
	path string
}

func newWorld(cfg genConfig) (*world, error) {
	relayShip, err := lane.ParseShip(genRelayShip)
	if err != nil {
		return nil, err
	}
	s, err := newSim(cfg.Seed, relayShip, netip.MustParseAddrPort(genRelayLane), genEpoch())
	if err != nil {
		return nil, err
	}
	s.lossIn, s.lossOut = lossToRelay, lossFromRelay
	end := startDelay + cfg.Window
	s.pingEnd, s.horizon = end, end+simDrain
	return &world{cfg: cfg, s: s, relayShip: relayShip, end: end, taken: map[lane.Ship]bool{relayShip: true}}, nil
}

// laneAt returns the i-th lane of a /16 block: 10.<block>.x.y, random port.
func (w *world) laneAt(block byte, i int) netip.AddrPort {
	a := netip.AddrFrom4([4]byte{10, block, byte(i / 254), byte(i%254 + 1)})
	return netip.AddrPortFrom(a, uint16(w.s.between(1024, 65535)))
}

// publisherShip returns a new planet under the relay's star.
func (w *world) publisherShip() lane.Ship {
	star, _ := w.relayShip.Uint64()
	for {
		sh := lane.ShipFromUint64(uint64(w.s.between(1, 0xffff))<<16 | star)
		if !w.taken[sh] {
			w.taken[sh] = true
			return sh
		}
	}
}

// requesterShip returns a new ship not under the relay: mostly planets,
// some moons and comets.
func (w *world) requesterShip() lane.Ship {
	star, _ := w.relayShip.Uint64()
	for {
		var sh lane.Ship
		planet := uint64(w.s.rng.Uint32())
		switch x := w.s.rng.IntN(100); {
		case x < 90:
			sh = lane.ShipFromUint64(planet)
		case x < 97:
			sh = lane.ShipFromUint64(uint64(w.s.rng.Uint32()|1)<<32 | planet)
		default:
			sh = lane.Ship{Hi: w.s.rng.Uint64() | 1, Lo: w.s.rng.Uint64()}
		}
		if sh.Class() == lane.Galaxy || sh.Class() == lane.Star || planet&0xffff == star || w.taken[sh] {
			continue
		}
		w.taken[sh] = true
		return sh
	}
}

// publisherThink is a publisher's time to answer: mostly a millisecond or
// two, sometimes tens, and 1% of the time over the retransmission
// interval, which makes requesters retransmit while the request is
// pending at the relay.
func publisherThink(s *sim) time.Duration {
	switch x := s.rng.IntN(100); {
	case x < 90:
		return s.logUniform(200*time.Microsecond, 3*time.Millisecond)
	case x < 99:
		return s.logUniform(3*time.Millisecond, 30*time.Millisecond)
	default:
		return s.logUniform(1200*time.Millisecond, 1800*time.Millisecond)
	}
}

var (
	desks  = []string{"base", "garden", "landscape", "groups", "talk", "kids", "webterm"}
	agents = []string{"groups", "chat", "diary", "heap", "channels", "contacts", "activity"}
	words  = []string{"sys", "lib", "app", "sur", "mar", "ted", "gen", "desk", "hoon", "json", "bill", "kelvin", "docket", "posts", "newest", "older", "v1", "meta"}
)

// scryPath returns a realistic scry path (no leading '/').
func (w *world) scryPath(i int) string {
	s := w.s
	word := func() string { return words[s.rng.IntN(len(words))] }
	switch i % 3 {
	case 0:
		return fmt.Sprintf("c/x/%d/%s/%s/%s/%s", s.between(1, 400), desks[s.rng.IntN(len(desks))], word(), word(), word())
	case 1:
		return fmt.Sprintf("g/x/%d/%s//1/%s/%s/%d", s.between(0, 60), agents[s.rng.IntN(len(agents))], word(), word(), s.between(1, 1<<20))
	}
	return fmt.Sprintf("a/x/1/%s/%s/%d/%s", word(), word(), s.between(1, 5000), word())
}

// valueSize draws a value size: 80% small (one short fragment), 18% one to
// three 1 KiB fragments, 2% up to eight.
func (w *world) valueSize() int {
	switch x := w.s.rng.IntN(100); {
	case x < 80:
		return w.s.between(16, 400)
	case x < 98:
		return w.s.between(simFragment+1, 3*simFragment)
	}
	return w.s.between(3*simFragment+1, 8*simFragment)
}

// newPublisher makes publisher i, speaking legacy ames if legacy.
func (w *world) newPublisher(i int, legacy bool) (*publisher, error) {
	s := w.s
	id, ap := w.publisherShip(), w.laneAt(2, i)
	p := &publisher{id: id, values: map[string][]byte{}}
	if legacy {
		p.life = uint8(s.between(1, 15))
	}
	cfg := endpoint.Config{Ship: id, FragmentSize: simFragment, Legacy: legacy, Life: p.life,
		Think: func() time.Duration { return publisherThink(s) }}
	sh, err := s.newShip(cfg, ap, s.logUniform(publisherDelayMin, publisherDelayMax))
	if err != nil {
		return nil, err
	}
	p.ship = sh
	w.publishers = append(w.publishers, p)
	return p, nil
}

// publish makes value the answer at path on p, now.
func (p *publisher) publish(path string, value []byte) {
	p.values[path] = value
	p.paths = append(p.paths, path)
	p.core.Publish(path, value)
}

// addPublishers creates the mesa publishers with catalogs of paths.
func (w *world) addPublishers(n, minPaths, maxPaths int) error {
	for i := range n {
		p, err := w.newPublisher(i, false)
		if err != nil {
			return err
		}
		for j := range w.s.between(minPaths, maxPaths) {
			path := w.scryPath(j)
			if p.values[path] != nil {
				continue
			}
			p.publish(path, w.s.bytes(w.valueSize()))
			w.catalog = append(w.catalog, pubPath{pub: i, path: path})
		}
	}
	// Popularity: a shuffled catalog read through a Zipf distribution,
	// so a few values are asked for by many requesters (repeats,
	// aggregation) and most by few.
	w.s.rng.Shuffle(len(w.catalog), func(i, j int) { w.catalog[i], w.catalog[j] = w.catalog[j], w.catalog[i] })
	if len(w.catalog) > 1 {
		w.zipf = rand.NewZipf(w.s.rng, 1.2, 4, uint64(len(w.catalog)-1))
	}
	return nil
}

// requesterLane returns requester i's lane: 3% IPv6.
func (w *world) requesterLane(i int) netip.AddrPort {
	if w.s.rng.IntN(100) < 3 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 14: byte(i >> 8), 15: byte(i)})
		return netip.AddrPortFrom(a, uint16(w.s.between(1024, 65535)))
	}
	return w.laneAt(1, i)
}

// addRequesters makes n requesters, giving up a request after maxTries
// sends (0: never); legacy ones (the ames mix) have a random life and no
// IPv6 lanes.
func (w *world) addRequesters(n, maxTries int, legacy bool) error {
	for i := range n {
		cfg := endpoint.Config{Ship: w.requesterShip(), PingInterval: -1, MaxTries: maxTries}
		ap := w.requesterLane(i)
		if legacy {
			cfg.Life, ap = uint8(w.s.between(1, 15)), w.laneAt(1, i)
		}
		q, err := w.s.newShip(cfg, ap, w.s.logUniform(requesterDelayMin, requesterDelayMax))
		if err != nil {
			return err
		}
		w.requesters = append(w.requesters, q)
	}
	return nil
}

// startPings starts the publishers' timers in the first pingSpread: each
// pings its sponsor then, and every endpoint.DefaultPingInterval until
// the flows stop.
func (w *world) startPings() {
	for _, p := range w.publishers {
		w.s.start(p.ship, time.Duration(w.s.rng.Int64N(int64(pingSpread))))
	}
}

// peekName returns the name of fragment frag of path on publisher p.
func (p *publisher) peekName(path string, frag uint64) scry.Name {
	return scry.Name{Ship: p.id, Bloq: scry.DefaultBloq, Frag: frag, Path: []byte(path)}
}

func peekWire(name scry.Name) []byte {
	pk := scry.NewPeek(name)
	return pk.Append(nil)
}

// fetch makes q read a whole value (endpoint.Core.Peek: fragment 0, then
// the others in a window).
func (w *world) fetch(q *ship, p *publisher, path string) {
	w.s.do(q, func(now time.Duration, out []endpoint.Datagram) ([]endpoint.Datagram, error) {
		return q.core.Peek(p.id, path, now, func(endpoint.Response) {}, out)
	})
}

// poke makes q poke p with n bytes.
func (w *world) poke(q *ship, p *publisher, n int) {
	data := w.s.bytes(n)
	w.s.do(q, func(now time.Duration, out []endpoint.Datagram) ([]endpoint.Datagram, error) {
		return q.core.Poke(p.id, data, now, func(endpoint.Response) {}, out)
	})
}

// startFlows schedules n flows at Poisson arrivals over the window from
// startDelay: 70% value fetches, 30% pokes, each from the next requester
// of a shuffled list (so n flows involve min(n, requesters) ships).
func (w *world) startFlows(n int) {
	s := w.s
	rate := float64(n) / w.cfg.Window.Seconds()
	t := startDelay
	order := s.rng.Perm(len(w.requesters))
	for i := range n {
		t += time.Duration(s.rng.ExpFloat64() / rate * float64(time.Second))
		q := w.requesters[order[i%len(order)]]
		if s.rng.IntN(100) < 70 {
			pp := w.catalog[w.zipf.Uint64()]
			s.at(t, func() { w.fetch(q, w.publishers[pp.pub], pp.path) })
		} else {
			p := w.publishers[w.zipf.Uint64()%uint64(len(w.publishers))]
			size := s.between(16, 300)
			s.at(t, func() { w.poke(q, p, size) })
		}
	}
}

// steady: thousands of ships reading values from, and poking, the
// relay's publishers at a steady rate.
func (w *world) steady() error {
	if err := w.addPublishers(w.cfg.Publishers, 6, 20); err != nil {
		return err
	}
	if err := w.addRequesters(w.cfg.Requesters, mesaMaxTries, false); err != nil {
		return err
	}
	w.startPings()
	w.startFlows(w.cfg.Flows)
	return nil
}

// storm: subscribers heartbeat peeks for values their publishers have not
// grown yet; each value grows after a few seconds and is answered to all.
func (w *world) storm() error {
	s := w.s
	if err := w.addPublishers(w.cfg.Publishers, 0, 0); err != nil {
		return err
	}
	if err := w.addRequesters(w.cfg.Requesters, 0, false); err != nil {
		return err
	}
	end := w.end
	w.startPings()
	type channel struct {
		p      *publisher
		app    string
		growAt []time.Duration
	}
	chans := make([]*channel, len(w.publishers))
	for i, p := range w.publishers {
		c := &channel{p: p, app: agents[i%len(agents)] + "-" + fmt.Sprint(i)}
		interval := time.Duration(s.between(2000, 4000)) * time.Millisecond
		for k, g := 0, startDelay+interval/2; g < end; k, g = k+1, g+interval+time.Duration(s.between(0, 400))*time.Millisecond {
			path := fmt.Sprintf("%s%s/%d", notifyPrefix, c.app, k)
			v := s.bytes(s.between(40, 400))
			p.core.Hold(path)
			s.at(g, func() {
				s.do(p.ship, func(now time.Duration, out []endpoint.Datagram) ([]endpoint.Datagram, error) {
					return p.core.Grow(path, v, now, out), nil
				})
			})
			c.growAt = append(c.growAt, g)
		}
		chans[i] = c
	}
	zipf := rand.NewZipf(s.rng, 1.1, 2, uint64(len(chans)-1))
	// A subscriber peeks the next value, re-sending every second (its
	// heartbeat, the endpoint's retry) until answered, then the one after.
	var follow func(q *ship, c *channel, k int)
	follow = func(q *ship, c *channel, k int) {
		if k >= len(c.growAt) || s.now > end {
			return
		}
		path := fmt.Sprintf("%s%s/%d", notifyPrefix, c.app, k)
		s.do(q, func(now time.Duration, out []endpoint.Datagram) ([]endpoint.Datagram, error) {
			return q.core.Fetch(c.p.id, path, endpoint.Limit{Until: end + heartbeat}, now, func(r endpoint.Response) {
				if r.Err == nil {
					s.at(s.now, func() { follow(q, c, k+1) }) // not from inside the Core's call
				}
			}, out)
		})
	}
	for _, q := range w.requesters {
		subs := 1
		if s.rng.IntN(100) < 30 {
			subs = 2
		}
		for range subs {
			c := chans[zipf.Uint64()]
			join := startDelay + time.Duration(s.between(0, 2000))*time.Millisecond
			s.at(join, func() {
				k := 0
				for k < len(c.growAt) && c.growAt[k] <= s.now {
					k++
				}
				follow(q, c, k)
			})
		}
	}
	return nil
}

// ames: legacy ames messages and fine requests between requesters and
// the relay's publishers.
func (w *world) ames() error {
	s := w.s
	var catalog []pubPath
	for i := range w.cfg.Publishers {
		p, err := w.newPublisher(i, true)
		if err != nil {
			return err
		}
		for j := range s.between(4, 12) {
			path := "/" + w.scryPath(j)
			if p.values[path] != nil || len(path) > scry.AmesWailPathMax {
				continue
			}
			p.publish(path, s.bytes(w.valueSize()))
			catalog = append(catalog, pubPath{pub: i, path: path})
		}
	}
	if err := w.addRequesters(w.cfg.Requesters, amesMaxTries, true); err != nil {
		return err
	}
	w.startPings()
	s.rng.Shuffle(len(catalog), func(i, j int) { catalog[i], catalog[j] = catalog[j], catalog[i] })
	zipf := rand.NewZipf(s.rng, 1.2, 4, uint64(len(catalog)-1))
	rate := float64(w.cfg.Flows) / w.cfg.Window.Seconds()
	t := startDelay
	for range w.cfg.Flows {
		t += time.Duration(s.rng.ExpFloat64() / rate * float64(time.Second))
		a := w.requesters[s.rng.IntN(len(w.requesters))]
		if s.rng.IntN(100) < 65 {
			p := w.publishers[zipf.Uint64()%uint64(len(w.publishers))]
			n := endpoint.AmesMsgIDLen + s.between(24, 500)
			s.at(t, func() {
				a.nextID++
				c := amesContent(s, a.nextID<<16|uint64(s.rng.Uint32()&0xffff), n)
				s.do(a, func(now time.Duration, out []endpoint.Datagram) ([]endpoint.Datagram, error) {
					return a.core.Message(p.id, p.life, c, now, func(endpoint.Response) {}, out)
				})
			})
			continue
		}
		pp := catalog[zipf.Uint64()]
		p := w.publishers[pp.pub]
		frags := (len(p.values[pp.path]) + simFragment - 1) / simFragment
		s.at(t, func() {
			for f := range max(frags, 1) {
				s.do(a, func(now time.Duration, out []endpoint.Datagram) ([]endpoint.Datagram, error) {
					return a.core.Wail(p.id, p.life, pp.path, uint32(f), now, func(endpoint.Response) {}, out)
				})
			}
		})
	}
	return nil
}

// amesContent returns opaque legacy message content of n bytes (n >
// endpoint.AmesMsgIDLen) starting with message number id. Its last byte
// is never zero: vere's forwarding drops trailing zeros, which no packet
// made by Arvo has.
func amesContent(s *sim, id uint64, n int) []byte {
	b := s.bytes(n)
	binary.LittleEndian.PutUint64(b, id)
	if b[n-1] == 0 {
		b[n-1] = 1
	}
	return b
}

// malformedVector is one line of the malformed-vector files.
type malformedVector struct {
	Hex       string `json:"hex"`
	Category  string `json:"category"`
	Forwarder *struct {
		Outcome string `json:"outcome"`
	} `json:"forwarder"`
}

// loadMalformed returns the rejected inputs of both vector files that a
// forwarding relay must drop (legacy ames inputs a forwarder would pass on,
// such as malformed wails, are left out: their addressee rejects them).
func loadMalformed(dir string) ([][]byte, error) {
	var out [][]byte
	for _, name := range []string{"mesa/mesa-malformed.jsonl", "ames/ames-malformed.jsonl"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("hostile mix needs the vectors (--vectors): %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var v malformedVector
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if v.Forwarder != nil && v.Forwarder.Outcome == "forward" {
				continue
			}
			b, err := hex.DecodeString(v.Hex)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out = append(out, b)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// hostile: a small steady mix plus malformed packets from the vectors,
// unsolicited pages, spoofed sources (lane hijacks), hop-7 loops, requests
// routed back where they came from, and requests for unknown ships.
func (w *world) hostile() error {
	malformed, err := loadMalformed(w.cfg.Vectors)
	if err != nil {
		return err
	}
	s := w.s
	if err := w.steady(); err != nil {
		return err
	}
	const attackers = 16
	var bad []netip.AddrPort
	for i := range attackers {
		ap := w.laneAt(9, i)
		s.add(ap, s.logUniform(attackerDelayMin, attackerDelayMax), silent{})
		bad = append(bad, ap)
	}
	when := func() time.Duration { return startDelay + time.Duration(s.rng.Int64N(int64(w.cfg.Window))) }
	from := func() netip.AddrPort { return bad[s.rng.IntN(len(bad))] }
	send := func(at time.Duration, ap netip.AddrPort, b []byte) {
		s.at(at, func() { s.sendToRelay(ap, b, false) })
	}
	// Malformed datagrams, each once.
	for _, b := range malformed {
		send(when(), from(), b)
	}
	// Unsolicited pages: values nobody asked for, for publishers and for
	// ships elsewhere.
	for i := range 150 {
		sh := w.requesterShip()
		if i%2 == 0 {
			sh = w.publishers[s.rng.IntN(len(w.publishers))].id
		}
		name := scry.Name{Ship: sh, Bloq: scry.DefaultBloq, Path: []byte(fmt.Sprintf("x/forged/%d", i))}
		v := s.bytes(s.between(20, 1000))
		page := scry.NewPage(name, scry.Data{Total: uint64(len(v)), AuthKind: scry.AuthSign, Auth: s.bytes(64), Frag: v})
		send(when(), from(), page.Append(nil))
	}
	// Loops: requests that arrive having crossed seven relays.
	for range 100 {
		pp := w.catalog[s.rng.IntN(len(w.catalog))]
		b := peekWire(w.publishers[pp.pub].peekName(pp.path, 0))
		scry.SetHops(b, relay.MaxHops)
		send(when(), from(), b)
	}
	// Requests whose only route leads back: a publisher asking for its
	// own values through its sponsor.
	for range 40 {
		p := w.publishers[s.rng.IntN(len(w.publishers))]
		send(when(), p.lane, peekWire(p.peekName(p.paths[0], 0)))
	}
	// Requests for ships the relay cannot reach: its sponsees that never
	// pinged, and ships under other stars.
	for i := range 120 {
		sh := w.requesterShip()
		if i%2 == 0 {
			sh = w.publisherShip()
		}
		send(when(), from(), peekWire(scry.Name{Ship: sh, Bloq: scry.DefaultBloq, Path: []byte("g/x/0/groups//1/v1/groups")}))
	}
	// Spoofed sources: an attacker pings as a publisher (a hop-0 poke
	// naming it), so the relay takes the attacker's lane for the
	// publisher's; requests for it go astray until the publisher's next
	// ping, 400 ms later, and their retransmissions get through.
	for i := range 6 {
		at := startDelay + w.cfg.Window*time.Duration(i+1)/8
		v := w.publishers[i%len(w.publishers)]
		wire := endpoint.PingWire(v.id, v.id.Sponsor(), uint64(i+1))
		send(at, from(), wire)
		for j := range 3 {
			q := w.requesters[s.rng.IntN(len(w.requesters))]
			path := v.paths[j%len(v.paths)]
			s.at(at+time.Duration(50*(j+1))*time.Millisecond, func() { w.fetch(q, v, path) })
		}
		send(at+400*time.Millisecond, v.lane, wire)
	}
	// Spoofed legacy senders: unrelayed ames packets claiming to come
	// from other ships, for receivers the relay cannot reach.
	for range 40 {
		c := amesContent(s, s.rng.Uint64(), s.between(24, 200))
		p := scry.NewAmes(w.requesterShip(), w.requesterShip(), 1, 1, c)
		send(when(), from(), p.Append(nil))
	}
	return nil
}
