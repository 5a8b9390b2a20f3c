package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/urbit-relay/relay/internal/hist"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

// profileEnv, if set, makes each server child write a CPU profile to
// $RELAY_BENCH_CPUPROFILE.ROLE.PID: where the time goes, per configuration.
const profileEnv = "RELAY_BENCH_CPUPROFILE"

// serverStats is what a server child reports on its stdout when its stdin
// closes: the figures only the process itself can read.
type serverStats struct {
	Mallocs      uint64 `json:"mallocs"`       // heap allocations since the report before
	HeapInuse    uint64 `json:"heap_inuse"`    // bytes
	Pending      int    `json:"pending"`       // pending entries (relay only)
	KernelDrops  uint64 `json:"kernel_drops"`  // datagrams the socket buffers dropped
	Datagrams    uint64 `json:"datagrams"`     // datagrams read
	BatchesRead  uint64 `json:"batches_read"`  // read system calls that returned data
	GoMaxProcs   int    `json:"gomaxprocs"`    // as the child ran
	SocketsBound int    `json:"sockets_bound"` // reader sockets
	GSO          bool   `json:"gso"`           // the first socket sends with UDP GSO
	// Service is the server's relay.ServiceHistogram: time from a
	// datagram's read to its batch's last write, cumulative.
	Service []uint64 `json:"service"`
}

// serve runs a server child: the relay, or the bare forwarder that is the
// baseline. It prints its address, then a stats line for every line read on
// stdin (a snapshot request), and exits when stdin closes.
func serve(role string, sockets, pubs, basePort int, gso bool, variant string) error {
	if path := os.Getenv(profileEnv); path != "" {
		f, err := os.Create(fmt.Sprintf("%s.%s.%d", path, role, os.Getpid()))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	var conns []transport.Conn
	listen := netip.MustParseAddrPort("127.0.0.1:0")
	variant, noGRO := cutToken(variant, "nogro")
	opts := transport.Options{DisableGSO: !gso, DisableGRO: noGRO}
	if sockets > 1 {
		opts.ReusePort = true
	}
	for i := 0; i < sockets; i++ {
		c, err := transport.ListenUDP(listen, opts)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		listen = c.LocalAddr() // the other sockets share the first one's port
	}
	var report func() serverStats
	var stop func()
	switch role {
	case "relay":
		cfg, err := relayVariant(variant, listen, pubs, basePort)
		if err != nil {
			return err
		}
		r, err := relay.New(cfg)
		if err != nil {
			return err
		}
		srv := relay.NewServer(r, conns, relay.ServerConfig{})
		srv.Start()
		stop = func() { srv.Close() }
		report = func() serverStats {
			b, d := srv.BatchStats()
			return serverStats{Pending: r.Pending().Len(), KernelDrops: srv.KernelDrops(), Datagrams: d, BatchesRead: b,
				Service: srv.ServiceTimes().Snapshot(make([]uint64, hist.Buckets))}
		}
	case "forward":
		v, batchMug := cutToken(variant, "batchmug")
		v, codec := cutToken(v, "codec")
		if v != "" {
			return fmt.Errorf("unknown forwarder variant %q", variant)
		}
		f := &forwarder{conns: conns, base: basePort, pubs: pubs, codec: codec || batchMug, batchMug: batchMug}
		f.start()
		stop = f.close
		report = f.stats
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	fmt.Println(listen)
	var last uint64
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s := report()
		s.Mallocs, last = ms.Mallocs-last, ms.Mallocs
		s.HeapInuse = ms.HeapInuse
		s.GoMaxProcs = runtime.GOMAXPROCS(0)
		s.SocketsBound = len(conns)
		if g, ok := conns[0].(transport.GSOer); ok {
			s.GSO = g.GSO()
		}
		json.NewEncoder(os.Stdout).Encode(s)
	}
	stop()
	return nil
}

// cutToken removes every tok from the "+"-separated variant and reports
// whether there was one. "nogro" is the sockets' (any role: UDP GRO off),
// "codec" and "batchmug" the forwarder's.
func cutToken(variant, tok string) (string, bool) {
	var keep []string
	found := false
	for _, v := range strings.Split(variant, "+") {
		if v == tok {
			found = true
		} else if v != "" {
			keep = append(keep, v)
		}
	}
	return strings.Join(keep, "+"), found
}

// relayVariant returns the relay's configuration for a child: the bench's
// (the amplification budget off, since one requester address carries the
// whole load, and no per-source cap on entries, since one source fills
// the table), or with variant a "+"-separated list of changes to it:
// "amp" the default amplification budget (the generator's requesters
// answer its STUN probes, as vere does, and are exempted), "noamp" none,
// "nodup" no
// duplicate filter, "noshare" no per-source caps or shares in the pending
// and route tables, "default" the relay's default configuration (as "amp",
// with the per-source caps too).
func relayVariant(variant string, listen netip.AddrPort, pubs, basePort int) (relay.Config, error) {
	pinned := map[lane.Ship]netip.AddrPort{}
	for i := 0; i < pubs; i++ {
		pinned[publisherShip(i)] = netip.AddrPortFrom(loopback, uint16(basePort+pairOffset+i))
	}
	cfg := relay.Config{HintNets: loopbackNets,
		Ship:   lane.ShipFromUint64(0), // ~zod
		Self:   []netip.AddrPort{listen},
		Pinned: pinned,
		Pending: pit.Config{
			// Entries must outlive the whole run, and one source
			// fills the table: the per-source cap does not change
			// the per-packet cost, it only refuses.
			TTL:                 10 * time.Minute,
			MaxEntriesPerSource: -1,
			MaxEntries:          2_000_000,
		},
		// One requester address carries the whole load.
		Amp: amp.Config{Rate: -1},
	}
	if variant == "" {
		return cfg, nil
	}
	for _, v := range strings.Split(variant, "+") {
		switch v {
		case "default":
			cfg.Pending = pit.Config{}
			cfg.Amp = amp.Config{}
		case "amp":
			cfg.Amp = amp.Config{}
		case "noamp":
			cfg.Amp = amp.Config{Rate: -1}
		case "nodup":
			cfg.Dup = relay.DupConfig{Window: -1}
		case "noshare":
			cfg.Pending.MaxEntriesPerSource = -1
			cfg.Pending.MaxRequestersPerSource = -1
			cfg.Pending.MaxOverflowPerSource = -1
			cfg.Routes.SourceDivisor = -1
		default:
			return cfg, fmt.Errorf("unknown relay variant %q", v)
		}
	}
	return cfg, nil
}

// forwarder is the baseline: the same sockets and batching as the relay
// (each batch grouped by destination lane and sent with UDP GSO where
// the socket can), and no decision at all. A request from requester port
// base+i goes to publisher port base+pairOffset+i%pubs by arithmetic; a
// page goes back to the requester whose index ends its name
// (requesterOf), which is all it reads of a datagram.
//
// With codec set it also does what any forwarder of mesa pages must do to
// the bytes, and no more: it parses each datagram (checking its mug, as
// vere's _mesa_sift_pact does for every packet it reads), counts a hop,
// and writes the publisher's lane into each page's next-hop field (so the
// page's mug is computed again). That is the floor under the relay's cost:
// a page's mug is one pass over its 1 KiB whatever the relay decides.
//
// With batchMug too, the mugs of a batch are hashed four at a time
// (scry.MugPrefixes) before the datagrams are parsed (ParseWithPrefix),
// as a relay's reader could: the floor made cheaper.
type forwarder struct {
	conns    []transport.Conn
	base     int
	pubs     int
	codec    bool
	batchMug bool
	done     chan struct{}
	n        []atomic.Uint64 // datagrams read, per socket
	b        []atomic.Uint64 // read batches, per socket
	// service is timed as the relay's server times itself.
	service relay.ServiceHistogram
}

func (f *forwarder) start() {
	f.done = make(chan struct{}, len(f.conns))
	f.n = make([]atomic.Uint64, len(f.conns))
	f.b = make([]atomic.Uint64, len(f.conns))
	for i, c := range f.conns {
		go f.loop(i, c)
	}
}

func (f *forwarder) loop(idx int, c transport.Conn) {
	defer func() { f.done <- struct{}{} }()
	msgs := newMessages(transport.DefaultBatchSize, relay.MaxPacket, relay.MaxPacket)
	clock := relay.NewSystemClock()
	gso, _ := c.(transport.GSOer)
	var pkt scry.Packet
	bodies := make([][]byte, len(msgs))
	ns := make([]int, len(msgs))
	pre := make([]scry.MugPrefix, len(msgs))
	for {
		n, err := c.ReadBatch(msgs)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		t0 := clock.Now()
		if f.batchMug {
			mugBatch(msgs[:n], bodies, ns, pre)
		}
		k := 0
		for i := 0; i < n; i++ {
			if f.codec && !codecEdit(&msgs[i], &pkt, pre[i]) {
				continue
			}
			p := int(msgs[i].Addr.Port())
			if p >= f.base+pairOffset {
				_, name, ok := scry.NameWire(msgs[i].Buf[:msgs[i].N])
				if !ok {
					continue
				}
				if p = requesterOf(name); p < 0 {
					continue
				}
				p += f.base
			} else {
				p = f.base + pairOffset + (p-f.base)%f.pubs
			}
			msgs[i].Addr = netip.AddrPortFrom(msgs[i].Addr.Addr(), uint16(p))
			msgs[i], msgs[k] = msgs[k], msgs[i]
			k++
		}
		if gso != nil && gso.GSO() {
			transport.GroupByAddr(msgs[:k]) // as the relay's server does
		}
		f.n[idx].Add(uint64(n))
		f.b[idx].Add(1)
		for out := msgs[:k]; len(out) > 0; {
			k, err := c.WriteBatch(out)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				k++ // skip the one refused
			}
			out = out[min(k, len(out)):]
		}
		f.service.Observe(clock.Now()-t0, n)
	}
}

// mugBatch sets pre[i] to the mug prefix ParseWithPrefix wants for
// msgs[i] (the zero prefix for what is not mesa), hashing them four at a
// time; bodies and ns are scratch as long as msgs.
func mugBatch(msgs []transport.Message, bodies [][]byte, ns []int, pre []scry.MugPrefix) {
	for i := range msgs {
		b := msgs[i].Buf[:msgs[i].N]
		bodies[i], ns[i] = nil, 0
		if scry.IsMesa(b) {
			bodies[i], ns[i] = b[scry.MesaHeaderLen:], scry.MesaMugPrefixLen(b)
		}
	}
	scry.MugPrefixes(bodies[:len(msgs)], ns, pre)
}

// codecEdit parses m's datagram into pkt (its mug checked, resumed from
// pre, which is the zero prefix or mugBatch's for m), counts a hop and,
// for a page, sets its next-hop to the lane it came from: the codec
// forwarder's work on the bytes. It reports whether the datagram is kept.
func codecEdit(m *transport.Message, pkt *scry.Packet, pre scry.MugPrefix) bool {
	b := m.Buf[:m.N]
	if pkt.ParseWithPrefix(b, pre) != nil {
		return false
	}
	scry.BumpHops(b)
	if pkt.Header.Type == scry.TypePage {
		hop, ok := lane.EncodeShort(m.Addr)
		if !ok {
			return false
		}
		e, err := scry.EditPageNextHop(b, pkt, hop, true)
		if err != nil {
			return false
		}
		m.N = len(e)
	}
	return true
}

func (f *forwarder) close() {
	for _, c := range f.conns {
		c.Close()
	}
	for range f.conns {
		<-f.done
	}
}

func (f *forwarder) stats() serverStats {
	s := serverStats{Service: f.service.Snapshot(make([]uint64, hist.Buckets))}
	for i := range f.n {
		s.Datagrams += f.n[i].Load()
		s.BatchesRead += f.b[i].Load()
	}
	for _, c := range f.conns {
		if d, ok := c.(transport.DropCounter); ok {
			s.KernelDrops += d.Drops()
		}
	}
	return s
}

// loopbackNets declares loopback a network that next-hops may name: every
// lane here is on 127.0.0.1.
var loopbackNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
