package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/transport"
	"github.com/urbit-relay/relay/scry"
)

func TestMain(m *testing.M) {
	if childMain() {
		return
	}
	os.Exit(m.Run())
}

// TestBenchSmoke runs the baseline and the relay briefly and checks that
// both carry traffic, the relay allocates nothing per datagram, and the
// report is written. It asserts no timing.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cfg := benchConfig{pairs: 1, base: 43000, duration: 300 * time.Millisecond, window: 32, page: 512}
	res, err := measureSet(cfg, 1, []scenario{
		{name: "bare forwarder", role: "forward", sockets: 1, procs: 1},
		{name: "relay", role: "relay", pending: 1000, sockets: 1, procs: 1},
	}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	base, rel := res[0], res[1]
	if len(rel.Rounds) != 2 || base.RTPerSec <= 0 || rel.RTPerSec <= 0 {
		t.Fatalf("no traffic: baseline %.0f, relay %.0f round trips/s over %d rounds", base.RTPerSec, rel.RTPerSec, len(rel.Rounds))
	}
	if rel.Allocs > 0.01 {
		t.Errorf("relay allocates %.3f times per datagram", rel.Allocs)
	}
	if rel.Answered < 0.99 || len(rel.Lat) == 0 {
		t.Errorf("open loop answered %.2f%% with %d samples", 100*rel.Answered, len(rel.Lat))
	}
	for _, r := range res {
		if r.service(1) == 0 {
			t.Errorf("%s: no service times recorded", r.Name)
		}
	}
	// With GSO off everywhere, the relay still carries the load.
	off := cfg
	off.noGSO = true
	res2, err := measureSet(off, 1, []scenario{{name: "relay", role: "relay", sockets: 1, procs: 1}}, 1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if res2[0].RTPerSec <= 0 || res2[0].GSO {
		t.Errorf("relay without GSO: %.0f round trips/s, GSO %v", res2[0].RTPerSec, res2[0].GSO)
	}
	if !rel.GSO && runtime.GOOS == "linux" {
		t.Errorf("relay child does not send with GSO")
	}
	dir := t.TempDir()
	rep := &report{cfg: cfg, rounds: 2, results: res, halfRate: rel.Rate, when: time.Now()}
	if err := rep.write(filepath.Join(dir, "B.md"), filepath.Join(dir, "plots")); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "B.md"))
	if !strings.Contains(string(md), "| relay |") {
		t.Errorf("report lacks the relay row:\n%s", md)
	}
	for _, f := range []string{"throughput.svg", "latency.svg", "service.svg"} {
		if b, err := os.ReadFile(filepath.Join(dir, "plots", f)); err != nil || !strings.HasPrefix(string(b), "<svg") {
			t.Errorf("plot %s: %v", f, err)
		}
	}
}

// TestCodecEdit checks the codec forwarder's work on a page: its next-hop
// becomes the lane it came from, its hop count goes up, its mug is valid
// again; a datagram whose mug is wrong is not kept.
func TestCodecEdit(t *testing.T) {
	name := scry.Name{Ship: lane.ShipFromUint64(0x1234_5678), Rift: 1, Bloq: scry.DefaultBloq, Path: []byte("c/x/4/~zod/desk/1")}
	page := scry.NewPage(name, scry.Data{Total: 1, AuthKind: scry.AuthPair, Auth: make([]byte, 64), Frag: []byte("fragment")})
	buf := make([]byte, 0, relay.MaxPacket)
	buf = page.Append(buf)
	from := netip.MustParseAddrPort("127.0.0.1:43001")
	m := transport.Message{Buf: buf[:cap(buf)], N: len(buf), Addr: from}
	var pkt scry.Packet
	if !codecEdit(&m, &pkt, scry.MugPrefix{}) {
		t.Fatal("a valid page was not kept")
	}
	var got scry.Packet
	if err := got.Parse(m.Buf[:m.N]); err != nil {
		t.Fatalf("the edited page does not parse (its mug?): %v", err)
	}
	if hop, ok := got.NextHopAddr(); !ok || hop != from {
		t.Errorf("next-hop %v %v, want %v", hop, ok, from)
	}
	if got.Header.Hops != page.Header.Hops+1 {
		t.Errorf("hops %d, want %d", got.Header.Hops, page.Header.Hops+1)
	}
	m.Buf[m.N-1] ^= 1 // the body changes, the mug does not
	if codecEdit(&m, &pkt, scry.MugPrefix{}) {
		t.Error("a page with a wrong mug was kept")
	}
}

// TestCodecEditBatchMug: the batchmug forwarder edits a batch of pages and
// peeks, each mug resumed from the batch's prefixes, to exactly the bytes
// the serial codec forwarder makes, and drops the same bad-mug datagram.
func TestCodecEditBatchMug(t *testing.T) {
	from := netip.MustParseAddrPort("127.0.0.1:43001")
	var serial, batch []transport.Message
	for i := range 11 {
		name := scry.Name{Ship: lane.ShipFromUint64(uint64(0x1234_5678 + i)), Rift: 1, Bloq: scry.DefaultBloq, Path: []byte(fmt.Sprintf("c/x/4/~zod/desk/%d", i))}
		p := scry.NewPeek(name)
		if i%3 != 2 {
			p = scry.NewPage(name, scry.Data{Total: 1, AuthKind: scry.AuthPair, Auth: make([]byte, 64), Frag: bytes.Repeat([]byte{byte(i)}, 100*i)})
		}
		b := p.Append(make([]byte, 0, relay.MaxPacket))
		if i == 7 {
			b[len(b)-1] ^= 1 // a bad mug
		}
		serial = append(serial, transport.Message{Buf: append([]byte(nil), b[:cap(b)]...), N: len(b), Addr: from})
		batch = append(batch, transport.Message{Buf: append([]byte(nil), b[:cap(b)]...), N: len(b), Addr: from})
	}
	bodies, ns, pre := make([][]byte, len(batch)), make([]int, len(batch)), make([]scry.MugPrefix, len(batch))
	mugBatch(batch, bodies, ns, pre)
	var pkt scry.Packet
	for i := range serial {
		ks, kb := codecEdit(&serial[i], &pkt, scry.MugPrefix{}), codecEdit(&batch[i], &pkt, pre[i])
		if ks != kb || ks == (i == 7) {
			t.Fatalf("datagram %d: kept %v serially, %v batched", i, ks, kb)
		}
		if !bytes.Equal(serial[i].Buf[:serial[i].N], batch[i].Buf[:batch[i].N]) {
			t.Fatalf("datagram %d: batched edit differs", i)
		}
	}
}

// TestRelayVsForwarders: each relay is set against each forwarder round by
// round (the forwarder's CPU over the relay's in the same round), and the
// median of those ratios is reported, not a ratio of medians.
func TestRelayVsForwarders(t *testing.T) {
	rounds := func(cpus ...time.Duration) []round {
		var rs []round
		for _, c := range cpus {
			rs = append(rs, round{user: c / 4, sys: c - c/4})
		}
		return rs
	}
	res := []*result{
		{Name: "bare forwarder", Role: "forward", Rounds: rounds(1000, 1000, 2000)},
		{Name: "forwarder + codec", Role: "forward", Rounds: rounds(1200, 1800, 1200)},
		{Name: "relay default", Role: "relay", Rounds: rounds(2000, 1000, 1600)},
	}
	got := relayVsForwarders(res)
	// vs bare: 0.50, 1.00, 1.25 -> 1.00; vs codec: 0.60, 1.80, 0.75 -> 0.75.
	want := "| CPU per datagram, forwarder's over relay's | vs bare forwarder | vs forwarder + codec |\n" +
		"|---|---|---|\n" +
		"| relay default | 1.00 (0.50-1.25) | 0.75 (0.60-1.80) |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if s := relayVsForwarders(res[:2]); s != "" {
		t.Errorf("no relay measured, yet a table:\n%s", s)
	}
}

// TestRelayVsOld: a relay measured from the old executable too is set
// against it round by round, user time alone and user plus system, and
// the rounds in which the new one's user time was the lower are counted;
// a relay with no old twin, and a forwarder, get no row.
func TestRelayVsOld(t *testing.T) {
	res := []*result{
		{Name: "bare forwarder", Role: "forward", Rounds: []round{{user: 1, sys: 1}, {user: 1, sys: 1}, {user: 1, sys: 1}}},
		{Name: "relay default", Role: "relay", Rounds: []round{{user: 300, sys: 700}, {user: 400, sys: 600}, {user: 600, sys: 1400}}},
		{Name: "relay default, old", Role: "relay", Rounds: []round{{user: 400, sys: 600}, {user: 400, sys: 800}, {user: 500, sys: 1500}}},
		{Name: "relay default+nodup", Role: "relay", Rounds: []round{{user: 1, sys: 1}, {user: 1, sys: 1}, {user: 1, sys: 1}}},
	}
	got := relayVsOld(res)
	// user: 0.75, 1.00, 1.20 -> 1.00, lower in round 1 only;
	// user+sys: 1.00, 0.83, 1.00 -> 1.00.
	want := "| new relay's CPU per datagram over the old's, same round | user | user+sys | user lower in |\n" +
		"|---|---|---|---|\n" +
		"| relay default | 1.00 (0.75-1.20) | 1.00 (0.83-1.00) | 1 of 3 rounds |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if s := relayVsOld(res[:2]); s != "" {
		t.Errorf("no old relay measured, yet a table:\n%s", s)
	}
}
