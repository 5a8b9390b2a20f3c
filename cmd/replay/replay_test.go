package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/internal/hist"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

const fixtureDir = "../../testdata/replay"

// testRunLength bounds a fixture replay in tests: the whole fixture,
// played fast enough to take about this long. The storm is played at most
// stormMaxSpeedup times faster than recorded.
const testRunLength = 500 * time.Millisecond

// startRelay runs our relay, fronting the fixtures' relay ship, on a real
// UDP socket on 127.0.0.1. Its pending entries take up to
// pit.MaxRequestersLimit requesters rather than the default 512: played
// faster than recorded (and slowed by the race detector or a busy
// machine), requests for a popular name arrive closer together than in
// the fixture, more of them join one pending entry, and at the default cap
// some the fixture shows answered would be refused (requesters_full) with
// no retransmission left in the fixture to recover them.
//
// Its legacy duplicate filter is off: a replay compresses time, so which
// retransmissions fall within the filter's window differs from the
// fixture's run (the filter is tested in relay's hostile_legacy_test.go),
// and every packet the fixture shows delivered must be delivered.
func startRelay(t *testing.T) (*relay.Relay, netip.AddrPort) {
	t.Helper()
	ship, err := lane.ParseShip(genRelayShip)
	if err != nil {
		t.Fatal(err)
	}
	c, err := transport.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The relay's ship: a socket nobody reads. A relay learns a sponsee's
	// lane only from a ping it hands to its ship, as relay run
	// --ship-lane does for a load test.
	sink, err := transport.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	r, err := relay.New(relay.Config{HintNets: loopbackNets,
		Ship: ship, ShipLane: sink.LocalAddr(), Self: []netip.AddrPort{c.LocalAddr()},
		// Every lane of the fixture is on 127.0.0.1 here: no per-source
		// share of an entry's requesters.
		Pending: pit.Config{MaxRequestersPerEntry: pit.MaxRequestersLimit, MaxRequestersPerSource: -1},
		Dup:     relay.DupConfig{Window: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := relay.NewServer(r, []transport.Conn{c}, relay.ServerConfig{})
	srv.Start()
	t.Cleanup(func() { srv.Close() })
	return r, c.LocalAddr()
}

// fixtureDrops returns the drops the fixture's scheduled datagrams must
// cause at any relay fronting the fixtures' relay ship, decided from
// their bytes alone: malformed and oversize datagrams, STUN, requests at
// the hop limit. Requests for the relay's own ship (pings) are handed to
// its ship (startRelay's sink), not dropped. Unsolicited pages are a lower
// bound (a publisher's duplicate answer may add to them).
func fixtureDrops(t *testing.T, fx *fixture) (exact map[relay.Drop]uint64, unsolicited uint64) {
	t.Helper()
	ship, _ := lane.ParseShip(genRelayShip)
	exact = map[relay.Drop]uint64{}
	for _, ai := range fx.schedule {
		b := fx.actions[ai].data
		var p scry.Packet
		var a scry.AmesPacket
		switch {
		case scry.IsMesa(b):
			switch err := p.Parse(b); {
			case err == scry.ErrMesaTooLarge:
				exact[relay.DropTooLarge]++
			case err != nil:
				exact[relay.DropMalformedMesa]++
			case p.Header.Type == scry.TypePage:
				if _, ok := fx.answers[fx.actions[ai].lane][string(p.NameBytes())]; !ok {
					unsolicited++
				}
			case p.Name.Ship == ship:
			case p.Header.Hops >= relay.MaxHops:
				exact[relay.DropHopLimit]++
			}
		case scry.IsSTUN(b):
			// A well-formed binding request is answered, not dropped.
			var q scry.STUNRequest
			if q.Parse(b) != nil {
				exact[relay.DropSTUNMalformed]++
			}
		case a.Parse(b) != nil:
			exact[relay.DropMalformedAmes]++
		}
	}
	return exact, unsolicited
}

func TestReplayFixtures(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 4 {
		t.Fatalf("found %d fixtures in %s, want one per mix", len(paths), fixtureDir)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".pcap")
		t.Run(name, func(t *testing.T) {
			fx, err := loadFixture(path, netip.AddrPort{}, DefaultHoldThreshold)
			if err != nil {
				t.Fatal(err)
			}
			if fx.relay.String() != genRelayLane {
				t.Fatalf("fixture relay %v, the convention is %s", fx.relay, genRelayLane)
			}
			r, addr := startRelay(t)
			speedup := max(1, float64(fx.span)/float64(testRunLength))
			s, err := replay(context.Background(), fx, runConfig{Relay: addr, Speedup: speedup, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			s.writeText(&out)
			t.Logf("\n%s", out.String())
			st := fx.stats()
			for k := range numKinds {
				ts := s.Types[k]
				if ts.Sent != uint64(st.Scheduled[k]+st.Reactive[k]) {
					t.Errorf("%s: sent %d, the fixture has %d", ts.Type, ts.Sent, st.Scheduled[k]+st.Reactive[k])
				}
				// Every request the fixture shows answered is
				// answered (every legacy packet it shows passed on
				// is delivered).
				if ts.Expected != uint64(st.Expected[k]) || ts.Missing != 0 {
					t.Errorf("%s: %d of %d expected answers missing (fixture expects %d)",
						ts.Type, ts.Missing, ts.Expected, st.Expected[k])
				}
			}
			snap := r.Counters().Snapshot()
			var drops []string
			for _, d := range relay.Drops() {
				if snap.Drops[d] != 0 {
					drops = append(drops, fmt.Sprintf("%s %d", d, snap.Drops[d]))
				}
			}
			t.Logf("relay drops: %s", strings.Join(drops, ", "))
			exact, unsolicited := fixtureDrops(t, fx)
			for d, n := range exact {
				if snap.Drops[d] != n {
					t.Errorf("relay dropped %d datagrams as %s, the fixture has %d", snap.Drops[d], d, n)
				}
			}
			if snap.Drops[relay.DropUnsolicited] < unsolicited {
				t.Errorf("relay dropped %d unsolicited pages, the fixture sends %d", snap.Drops[relay.DropUnsolicited], unsolicited)
			}
			if s.Publisher.Unknown != 0 || s.Foreign != 0 || s.Unrecognized != 0 || s.WriteErrors != 0 {
				t.Errorf("publisher unknown %d, foreign %d, unrecognized %d, write errors %d",
					s.Publisher.Unknown, s.Foreign, s.Unrecognized, s.WriteErrors)
			}
		})
	}
}

// genSmall is a small configuration of each mix, for fast tests.
func genSmall(mix string, seed uint64) genConfig {
	return genConfig{Mix: mix, Seed: seed, Vectors: "../../testdata", Requesters: 60, Publishers: 6, Flows: 60, Window: 2 * time.Second}
}

func encodeRecords(t *testing.T, recs []capture.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := capture.NewEncoder(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestGenDeterministic(t *testing.T) {
	for _, mix := range mixNames() {
		t.Run(mix, func(t *testing.T) {
			var files [3][]byte
			for i, seed := range []uint64{7, 7, 8} {
				recs, _, err := generate(genSmall(mix, seed))
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) == 0 {
					t.Fatal("no records")
				}
				files[i] = encodeRecords(t, recs)
			}
			if !bytes.Equal(files[0], files[1]) {
				t.Fatal("the same seed gave different files")
			}
			if bytes.Equal(files[0], files[2]) {
				t.Fatal("different seeds gave the same file")
			}
		})
	}
}

// TestGenMatchesReference checks that the generator's fixture describes
// what the reference relay in it did: every datagram it sent answers or
// forwards one it received, and every requester's page is its request's.
func TestGenFixtureConventions(t *testing.T) {
	recs, snap, err := generate(genSmall("steady", 3))
	if err != nil {
		t.Fatal(err)
	}
	relayLane := netip.MustParseAddrPort(genRelayLane)
	var in, out uint64
	for _, r := range recs {
		switch {
		case r.Dst == relayLane:
			in++
			if r.Src.Addr().Is4() && r.Src.Addr().As4()[1] == 0 {
				t.Fatalf("a datagram from %v, in the relay's block", r.Src)
			}
		case r.Src == relayLane:
			out++
		default:
			t.Fatalf("record %v → %v has no end at the relay", r.Src, r.Dst)
		}
	}
	if in != snap.TotalIn() {
		t.Fatalf("%d records to the relay, it counted %d", in, snap.TotalIn())
	}
	var sent uint64
	for _, n := range snap.Out {
		sent += n
	}
	if out != sent {
		t.Fatalf("%d records from the relay, it counted %d sent", out, sent)
	}
}

func TestGenRejects(t *testing.T) {
	if _, _, err := generate(genConfig{Mix: "nope"}); err == nil {
		t.Error("accepted an unknown mix")
	}
	cfg := genSmall("hostile", 1)
	cfg.Vectors = t.TempDir()
	if _, _, err := generate(cfg); err == nil {
		t.Error("hostile mix without vectors")
	}
}

// TestReplayModes replays a small steady mix with a fixed rate and closed
// loop, and checks the metrics scrape.
func TestReplayModes(t *testing.T) {
	recs, _, err := generate(genSmall("steady", 5))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "small.pcap")
	if err := writeFixtureFile(path, recs); err != nil {
		t.Fatal(err)
	}
	fx, err := loadFixture(path, netip.AddrPort{}, DefaultHoldThreshold)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []runConfig{
		{Rate: 2000},
		{Concurrency: 4},
		{Concurrency: 8, Rate: 3000},
		{Speedup: 20, Limit: 50},
	} {
		t.Run(cfg.mode(), func(t *testing.T) {
			r, addr := startRelay(t)
			metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				snap := r.Counters().Snapshot()
				fmt.Fprintf(w, "# TYPE %s counter\n", dropsMetric)
				for _, d := range relay.Drops() {
					fmt.Fprintf(w, "%s{reason=%q} %d\n", dropsMetric, d.String(), snap.Drops[d])
				}
			}))
			defer metrics.Close()
			cfg.Relay, cfg.Timeout, cfg.MetricsURL = addr, time.Second, metrics.URL
			s, err := replay(context.Background(), fx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			st := fx.stats()
			want := 0
			for k := range numKinds {
				want += st.Scheduled[k]
			}
			if cfg.Limit > 0 {
				want = cfg.Limit
			}
			var sched uint64
			for _, ty := range s.Types {
				sched += ty.Sent
			}
			if s.Missing != 0 || s.Expected == 0 || (cfg.Limit == 0 && sched < uint64(want)) {
				var out bytes.Buffer
				s.writeText(&out)
				snap := r.Counters().Snapshot()
				t.Logf("\n%s\nrelay: %+v", out.String(), snap)
				t.Fatalf("sent %d (want at least %d scheduled), expected %d, missing %d", sched, want, s.Expected, s.Missing)
			}
			snap := r.Counters().Snapshot()
			if s.MetricsError != "" || s.RelayDrops["own_ship_no_lane"] != float64(snap.Drops[relay.DropOwnShipNoLane]) {
				t.Fatalf("metrics: %v %v, relay counted %d", s.MetricsError, s.RelayDrops, snap.Drops[relay.DropOwnShipNoLane])
			}
		})
	}
}

func TestParseDrops(t *testing.T) {
	page := `# HELP relay_drops_total Datagrams dropped, by reason.
# TYPE relay_drops_total counter
relay_drops_total{reason="loop"} 3
relay_drops_total{instance="a, \"b\"",reason="hop_limit"} 2.5e1 1700000000
relay_drops_totally{reason="loop"} 99
relay_drops_total 4
relay_in_total{kind="peek"} 7
`
	got, err := parseDrops(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"loop": 3, "hop_limit": 25, "": 4}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestHistogram(t *testing.T) {
	var h latHist
	for i := 1; i <= 100000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.9, 90 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {0.999, 99900 * time.Microsecond}} {
		got := h.quantile(c.q)
		if d := got - c.want; d < -c.want/50 || d > c.want/50 {
			t.Errorf("p%g = %v, want %v ± 2%%", c.q*100, got, c.want)
		}
	}
	if h.quantile(1) != 100*time.Millisecond || h.quantile(0) != time.Microsecond {
		t.Errorf("extremes %v %v", h.quantile(0), h.quantile(1))
	}
	for v := time.Duration(0); v < 1<<20; v += 7 {
		if i := hist.Bucket(v); hist.Lower(i) > v || hist.Upper(i) <= v {
			t.Fatalf("value %d in bucket %d [%d, %d)", v, i, hist.Lower(i), hist.Upper(i))
		}
	}
	if hist.Bucket(1<<62) >= hist.Buckets {
		t.Fatal("the largest value has no bucket")
	}
}

func TestAnalyseRules(t *testing.T) {
	relayLane := netip.MustParseAddrPort("10.0.0.1:13337")
	req := netip.MustParseAddrPort("10.1.0.1:1000")
	pub := netip.MustParseAddrPort("10.2.0.1:2000")
	pubShip := lane.ShipFromUint64(0x10100)
	name := func(path string) scry.Name {
		return scry.Name{Ship: pubShip, Bloq: scry.DefaultBloq, Path: []byte(path)}
	}
	peek := func(path string) []byte { return peekWire(name(path)) }
	page := func(path string) []byte {
		p := scry.NewPage(name(path), scry.Data{AuthKind: scry.AuthNone, Frag: []byte("v")})
		return p.Append(nil)
	}
	t0 := genEpoch()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	recs := []capture.Record{
		{Time: at(0), Src: req, Dst: relayLane, Payload: peek("a")},      // answered
		{Time: at(1), Src: relayLane, Dst: pub, Payload: peek("a")},      // relay asks pub
		{Time: at(5), Src: pub, Dst: relayLane, Payload: page("a")},      // pub answers: reactive
		{Time: at(6), Src: relayLane, Dst: req, Payload: page("a")},      // relay answers req
		{Time: at(10), Src: req, Dst: relayLane, Payload: peek("b")},     // asked, answered late: held
		{Time: at(11), Src: relayLane, Dst: pub, Payload: peek("b")},     //
		{Time: at(20), Src: req, Dst: relayLane, Payload: peek("c")},     // never answered
		{Time: at(3000), Src: pub, Dst: relayLane, Payload: page("b")},   // held answer
		{Time: at(3001), Src: relayLane, Dst: req, Payload: page("b")},   //
		{Time: at(3002), Src: pub, Dst: relayLane, Payload: page("zzz")}, // unsolicited
		{Time: at(3003), Src: req, Dst: pub, Payload: peek("x")},         // not at the relay
	}
	fx := analyse(recs, relayLane, DefaultHoldThreshold)
	if fx.ignored != 1 || len(fx.lanes) != 2 {
		t.Fatalf("ignored %d, lanes %v", fx.ignored, fx.lanes)
	}
	var got []string
	for _, i := range fx.schedule {
		a := fx.actions[i]
		got = append(got, fmt.Sprintf("%s@%d:%d", a.kind, a.at/time.Millisecond, a.expect))
	}
	if want := "[peek@0:1 peek@10:1 peek@20:0 page@3002:0]"; fmt.Sprint(got) != want {
		t.Fatalf("schedule %v, want %s", got, want)
	}
	pl := int32(1)
	if fx.lanes[pl] != pub {
		t.Fatalf("lane 1 is %v", fx.lanes[pl])
	}
	na, nb := name("a"), name("b")
	an := fx.answers[pl][string(na.Append(nil))]
	bn := fx.answers[pl][string(nb.Append(nil))]
	if an == nil || an.hold != -1 || bn == nil || bn.hold != 3 {
		t.Fatalf("answers a %+v b %+v", an, bn)
	}
}

// FuzzAnalyse feeds arbitrary datagrams, both ways through a relay, to the
// fixture analysis, which must classify them without panicking.
func FuzzAnalyse(f *testing.F) {
	malformed, err := loadMalformed("../../testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range malformed[:20] {
		f.Add(b, b[:len(b)/2])
	}
	recs, _, err := generate(genSmall("ames", 1))
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range recs[:20] {
		f.Add(r.Payload, []byte{})
	}
	relayLane := netip.MustParseAddrPort(genRelayLane)
	other := netip.MustParseAddrPort("10.1.0.1:1")
	f.Fuzz(func(t *testing.T, a, b []byte) {
		t0 := genEpoch()
		recs := []capture.Record{
			{Time: t0, Src: other, Dst: relayLane, Payload: a},
			{Time: t0.Add(time.Millisecond), Src: relayLane, Dst: other, Payload: a},
			{Time: t0.Add(2 * time.Millisecond), Src: relayLane, Dst: other, Payload: b},
			{Time: t0.Add(3 * time.Millisecond), Src: other, Dst: relayLane, Payload: b},
		}
		fx := analyse(recs, relayLane, DefaultHoldThreshold)
		if len(fx.lanes) != 1 || len(fx.actions) > 2 {
			t.Fatalf("lanes %v, %d actions", fx.lanes, len(fx.actions))
		}
	})
}

// TestExitCodes: -h, on its own or after a command, is asked-for usage and
// exits 0; no command, an unknown one or a bad flag exits 2.
func TestExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"help"}, 0},
		{[]string{"gen", "-h"}, 0},
		{[]string{"run", "-h"}, 0},
		{[]string{"info", "--help"}, 0},
		{nil, 2},
		{[]string{"bogus"}, 2},
		{[]string{"gen", "--nope"}, 2},
		{[]string{"info", filepath.Join(t.TempDir(), "missing.pcap")}, 2},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if got := exitCode(run(tt.args, &stdout, &stderr), &stderr); got != tt.want {
			t.Errorf("replay %v: exit %d, want %d (stderr %q)", tt.args, got, tt.want, stderr.String())
		}
		if stdout.Len()+stderr.Len() == 0 {
			t.Errorf("replay %v: printed nothing", tt.args)
		}
	}
}

// TestReplayTwice: a load test run twice against one relay is as good the
// second time. Each fixture lane keeps its port from run to run (--ports
// auto), as the same ships keep their lanes, so the relay's lanes from the
// first run are still right: none missing either time. With new ports
// every run (--ports ephemeral) every ship would seem to have moved while
// the relay still held its old lane, and requests would go there.
func TestReplayTwice(t *testing.T) {
	recs, _, err := generate(genSmall("steady", 7))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "small.pcap")
	if err := writeFixtureFile(path, recs); err != nil {
		t.Fatal(err)
	}
	fx, err := loadFixture(path, netip.AddrPort{}, DefaultHoldThreshold)
	if err != nil {
		t.Fatal(err)
	}
	r, addr := startRelay(t)
	var runs []*summary
	for run := range 2 {
		s, err := replay(context.Background(), fx, runConfig{Relay: addr, Concurrency: 16, Loop: true,
			Duration: 400 * time.Millisecond, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if s.LanesMoved > 0 {
			t.Skipf("run %d: %d of the fixture's ports %d-%d are taken by another program", run+1, s.LanesMoved, s.PortBase, s.PortBase+s.Lanes-1)
		}
		if s.PortBase < stablePortLo || s.PortBase+s.Lanes > stablePortHi {
			t.Fatalf("run %d: ports %d-%d, want within [%d, %d)", run+1, s.PortBase, s.PortBase+s.Lanes-1, stablePortLo, stablePortHi)
		}
		if s.Missing != 0 || s.Expected < 50 {
			var out bytes.Buffer
			s.writeText(&out)
			t.Fatalf("run %d: expected %d, missing %d\n%s\nrelay: %+v", run+1, s.Expected, s.Missing, out.String(), r.Counters().Snapshot())
		}
		runs = append(runs, s)
	}
	if runs[0].PortBase != runs[1].PortBase {
		t.Fatalf("port base %d then %d: the ships moved", runs[0].PortBase, runs[1].PortBase)
	}
}

// TestLanePortBase: auto is the same for one fixture and within the
// stable range, ephemeral is 0, a number is taken as given if the lanes fit.
func TestLanePortBase(t *testing.T) {
	fx := &fixture{}
	for i := range 300 {
		fx.lanes = append(fx.lanes, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), uint16(1000+i)))
	}
	a, err := lanePortBase(fx, "auto")
	if b, _ := lanePortBase(fx, ""); err != nil || a != b || a < stablePortLo || a+len(fx.lanes) > stablePortHi {
		t.Fatalf("auto: %d %d %v", a, b, err)
	}
	other := &fixture{lanes: fx.lanes[1:]}
	if c, _ := lanePortBase(other, "auto"); c == a {
		t.Errorf("two fixtures share base %d", a)
	}
	if e, err := lanePortBase(fx, "ephemeral"); e != 0 || err != nil {
		t.Fatalf("ephemeral: %d %v", e, err)
	}
	if n, err := lanePortBase(fx, "40000"); n != 40000 || err != nil {
		t.Fatalf("40000: %d %v", n, err)
	}
	for _, bad := range []string{"65400", "0", "x", "-3"} {
		if _, err := lanePortBase(fx, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	big := &fixture{lanes: make([]netip.AddrPort, stablePortHi-stablePortLo)}
	if n, err := lanePortBase(big, "auto"); n != 0 || err != nil {
		t.Fatalf("too many lanes for the range: %d %v", n, err)
	}
}
