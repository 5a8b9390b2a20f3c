package relay_test

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

// Fuzz world: a few lanes, a few ships, a few names, so that random
// sequences hit the same entries and routes again and again.
var (
	fuzzLanes = func() []netip.AddrPort {
		var ls []netip.AddrPort
		for i := 0; i < 8; i++ {
			ls = append(ls, netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i + 1)}), uint16(1000+i)))
		}
		return append(ls, zodLane, necLane, selfLane, shipLane)
	}()
	fuzzShips = []string{"~zod", "~nec", "~marzod", "~sampel-palnet", "~dapnep-ronmyl", "~talpur", "~mister-ritpub-sipsyl"}
)

// fuzzOp decodes one operation from data, returning the datagram, its lane,
// the time step and the rest of data. Structured ops build well-formed
// packets from small indices so that the fuzzer explores the relay's
// states, not the codec's; op 0 passes raw bytes through.
func fuzzOp(t testing.TB, data []byte) (pkt []byte, from netip.AddrPort, step time.Duration, rest []byte, ok bool) {
	if len(data) < 4 {
		return nil, netip.AddrPort{}, 0, nil, false
	}
	op, li, si, arg := data[0]%6, int(data[1])%len(fuzzLanes), int(data[2])%len(fuzzShips), data[3]
	from = fuzzLanes[li]
	step = time.Duration(arg%32) * 250 * time.Millisecond
	rest = data[4:]
	path := fmt.Sprintf("p/%d", arg%4)
	hops := int(arg>>5) % 8
	var next netip.AddrPort
	if arg&0x10 != 0 {
		next = fuzzLanes[int(arg)%len(fuzzLanes)]
	}
	switch op {
	case 0: // raw bytes, length-prefixed
		if len(rest) < 1 {
			return nil, from, step, nil, false
		}
		n := min(int(rest[0]), len(rest)-1)
		pkt, rest = append([]byte(nil), rest[1:1+n]...), rest[1+n:]
	case 1:
		pkt = peek(t, fuzzShips[si], path, hops)
	case 2:
		pkt = poke(t, fuzzShips[(si+1)%len(fuzzShips)], fuzzShips[si], path)
		scry.SetHops(pkt, hops)
	case 3, 4:
		pkt = page(t, fuzzShips[si], path, hops%7, next)
	case 5:
		a := scry.NewAmes(lane.ShipFromUint64(uint64(arg)*977), mustShip(fuzzShips[si]), 1, 1, []byte{arg, 1, 2})
		pkt = a.Append(nil)
	}
	return pkt, from, step, rest, true
}

func mustShip(s string) lane.Ship {
	v, err := lane.ParseShip(s)
	if err != nil {
		panic(err)
	}
	return v
}

// FuzzDecide runs sequences of arbitrary datagrams from arbitrary lanes
// through one relay and checks, after every step: no panic; no page sent to
// a lane that never asked for its name; tables within their caps; every
// datagram read accounted for exactly once.
func FuzzDecide(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A decision that never returns is a denial of service: make it
		// a crash the fuzzer reports with its input.
		orig := append([]byte(nil), data...)
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("decision hung on input %x", orig)) })
		defer watchdog.Stop()
		const maxPending, maxRoutes = 32, 16
		fx := newFixture(t, func(c *relay.Config) {
			c.ShipLane = shipLane
			c.Pending.MaxEntries = maxPending
			c.Pending.Shards = 2
			c.Pending.MaxRequestersPerEntry = 3
			c.Routes.MaxRoutes = maxRoutes
			c.Amp = amp.Config{Rate: 1000, Burst: 4000, Slots: 8, NetRate: 2000, NetBurst: 8000, NetSlots: 8,
				LightRate: 100, LightBurst: 1500, ProbeAfter: 1000, ProofSlots: 8}
			c.Dup = relay.DupConfig{Slots: 16} // small: sets fill and evict
		})
		asked := map[string]bool{} // name bytes + "@" + lane: a request was heard
		steps := 0
		for len(data) > 0 && steps < 200 {
			pkt, from, step, rest, ok := fuzzOp(t, data)
			if !ok {
				break
			}
			data = rest
			steps++
			fx.now += step
			var p scry.Packet
			if p.Parse(pkt) == nil && (p.Header.Type == scry.TypePeek || p.Header.Type == scry.TypePoke) {
				asked[string(p.NameBytes())+"@"+lane.Canon(from).String()] = true
			}
			// Prefetch is a hint: it must neither crash on any input nor
			// change what the relay counts or holds.
			before, pending := fx.r.Counters().Snapshot(), fx.r.Pending().Len()
			fx.r.Prefetch(pkt, fx.out)
			if fx.r.Counters().Snapshot() != before || fx.r.Pending().Len() != pending {
				t.Fatalf("step %d: Prefetch changed the relay", steps)
			}
			// A datagram the relay drops changes no route (nothing is
			// learned from it), but for an unsolicited page taken as the
			// late answer to a probe on its lane (EventLateAnswers).
			routes, counted := routeState(fx.r), fx.r.Counters().Snapshot()
			sent := fx.handle(pkt, from)
			checkDecision(t, steps, fx.last, &counted, fx.snap(), len(sent))
			if now := fx.r.Counters().Snapshot(); now.TotalDrops() > counted.TotalDrops() &&
				now.Events[relay.EventLateAnswers] == counted.Events[relay.EventLateAnswers] {
				if after := routeState(fx.r); !maps.Equal(routes, after) {
					t.Fatalf("step %d: a dropped datagram changed the routes:\n%v\n%v", steps, routes, after)
				}
			}
			for _, s := range sent {
				var sr scry.STUNResponse
				if sr.Parse(s.Buf) == nil && (s.To != lane.Canon(from) || sr.Mapped != lane.Canon(from)) {
					t.Fatalf("step %d: STUN response for %v sent to %v, heard from %v", steps, sr.Mapped, s.To, from)
				}
				var q scry.Packet
				if q.Parse(s.Buf) != nil {
					if scry.IsMesa(s.Buf) {
						t.Fatalf("step %d: sent a mesa packet that does not parse: %x", steps, s.Buf)
					}
					continue // legacy ames, forwarded as is
				}
				if q.Header.Type == scry.TypePage && s.To != shipLane && !asked[string(q.NameBytes())+"@"+s.To.String()] {
					t.Fatalf("step %d: page sent to %v, which never asked for it", steps, s.To)
				}
			}
			if n := fx.r.Pending().Len(); n > maxPending {
				t.Fatalf("step %d: %d pending entries, cap %d", steps, n, maxPending)
			}
			if n := fx.r.Routes().Len(); n > maxRoutes {
				t.Fatalf("step %d: %d routes, cap %d", steps, n, maxRoutes)
			}
			if sn := fx.snap(); sn.TotalIn() != sn.Accounted() || sn.TotalIn() != uint64(steps) {
				t.Fatalf("step %d: in %d, accounted %d (%+v)", steps, sn.TotalIn(), sn.Accounted(), sn)
			}
			if steps%16 == 0 {
				fx.r.Expire(fx.now)
			}
		}
	})
}

// fuzzSeeds returns structured op sequences and every vector as a raw op.
func fuzzSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{
		// peek from lane 0 for ~nec, page back from ~nec's lane, repeat.
		{1, 0, 1, 0, 3, 9, 1, 0, 1, 1, 1, 1, 3, 9, 1, 0x10},
		// ping from a sponsee, then requests and pages with next-hops.
		{2, 3, 3, 0, 1, 0, 4, 5, 1, 1, 4, 5, 4, 2, 4, 0x31},
		// legacy ames from several lanes.
		{5, 0, 1, 7, 5, 1, 2, 9, 5, 8, 6, 3},
	}
	for _, file := range []string{"../testdata/mesa/mesa-vectors.jsonl", "../testdata/mesa/mesa-malformed.jsonl", "../testdata/ames/ames-vectors.jsonl", "../testdata/stun/stun-vectors.jsonl"} {
		fh, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for i := 0; sc.Scan() && i < 40; i++ {
			var v struct{ Hex, Request string } // Request: testdata/stun
			if json.Unmarshal(sc.Bytes(), &v) != nil {
				continue
			}
			b, err := hex.DecodeString(v.Hex + v.Request)
			if err != nil || len(b) > 255 {
				continue
			}
			seed := append([]byte{0, byte(i), 0, byte(i)}, byte(len(b)))
			seeds = append(seeds, append(seed, b...))
		}
		fh.Close()
	}
	return seeds
}

// routeState is every route of r's table, by ship.
func routeState(r *relay.Relay) map[lane.Ship]route.Info {
	m := map[lane.Ship]route.Info{}
	r.Routes().Each(func(s lane.Ship, i route.Info) { m[s] = i })
	return m
}

// actionEvent is the event each action but a drop is counted under.
var actionEvent = map[relay.Action]relay.Event{
	relay.ActionForwarded: relay.EventRequestsForwarded, relay.ActionAggregated: relay.EventAggregated,
	relay.ActionAnswered: relay.EventPagesMatched, relay.ActionToShip: relay.EventToShip,
	relay.ActionSTUNAnswered: relay.EventSTUNAnswered, relay.ActionLaneProven: relay.EventLanesProven,
}

// checkDecision fails the fuzz run unless decision d, returned by Handle
// for one datagram, is what the counters moved by (from before to after):
// its kind counted in, its action's event (or its drop reason) counted,
// and its sends the datagrams decided.
func checkDecision(t *testing.T, step int, d *relay.Decision, before *relay.Snapshot, after relay.Snapshot, sent int) {
	t.Helper()
	if !d.Decided() {
		t.Fatalf("step %d: no action decided: %+v", step, d)
	}
	if after.In[d.Kind] != before.In[d.Kind]+1 {
		t.Fatalf("step %d: decision kind %v, not the kind counted in", step, d.Kind)
	}
	if len(d.Sends) != sent {
		t.Fatalf("step %d: decision has %d sends, %d decided", step, len(d.Sends), sent)
	}
	if d.Action == relay.ActionDropped {
		found := false
		for _, dr := range relay.Drops() {
			if after.Drops[dr] > before.Drops[dr] && dr.String() == d.Reason {
				found = true
			}
		}
		if !found {
			t.Fatalf("step %d: dropped for %q, which was not counted", step, d.Reason)
		}
	} else if e := actionEvent[d.Action]; after.Events[e] <= before.Events[e] {
		t.Fatalf("step %d: %v, but %v was not counted", step, d.Action, e)
	}
	if d.Action != relay.ActionDropped && after.TotalDrops() != before.TotalDrops() {
		t.Fatalf("step %d: %v, but a drop was counted", step, d.Action)
	}
}
