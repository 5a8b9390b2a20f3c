package relay_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/scry"
)

// stunRequest returns the 28-byte binding request vere's client sends.
func stunRequest(txid byte) []byte {
	q := scry.STUNRequest{TxID: [12]byte{txid, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, txid}}
	return q.Append(nil)
}

// stunVector is a request and vere galaxy's response (testdata/stun).
type stunVector struct {
	From              string
	Request, Response string
}

func stunVectors(t testing.TB) []stunVector {
	t.Helper()
	fh, err := os.Open("../testdata/stun/stun-vectors.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var vs []stunVector
	for sc := bufio.NewScanner(fh); sc.Scan(); {
		var v stunVector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stunAnswer checks that sends are one binding response to from for req,
// and returns it.
func stunAnswer(t *testing.T, sends []send, req []byte, from netip.AddrPort) []byte {
	t.Helper()
	b := oneSend(t, sends, from)
	var p scry.STUNResponse
	if err := p.Parse(b); err != nil {
		t.Fatalf("response %x: %v", b, err)
	}
	if !bytes.Equal(p.TxID[:], req[8:20]) {
		t.Errorf("response txid %x, request's %x", p.TxID, req[8:20])
	}
	if p.Mapped != from {
		t.Errorf("XOR-MAPPED-ADDRESS %v, want the source %v", p.Mapped, from)
	}
	if len(b) > scry.STUNResponseMaxLen || len(b) >= 2*len(req) {
		t.Errorf("response %d bytes for a %d-byte request", len(b), len(req))
	}
	return b
}

func TestSTUNRequestIsAnswered(t *testing.T) {
	v6 := netip.MustParseAddrPort("[2001:db8::7]:4242")
	f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane })
	for i, from := range []netip.AddrPort{alice, v6, shipLane} {
		req := stunRequest(byte(i))
		b := stunAnswer(t, f.handle(req, from), req, from)
		if want := map[bool]int{true: 40, false: 52}[from.Addr().Is4()]; len(b) != want {
			t.Errorf("%v: %d-byte response, want %d", from, len(b), want)
		}
	}
	sn := f.snap()
	if sn.In[relay.KindSTUN] != 3 || sn.Out[relay.KindSTUN] != 3 || sn.Events[relay.EventSTUNAnswered] != 3 ||
		sn.Events[relay.EventToShip] != 0 || sn.TotalDrops() != 0 || sn.Accounted() != sn.TotalIn() {
		t.Errorf("counters %+v", sn)
	}
	// A request with other attributes (RFC 5769's) is answered too.
	rfc := unhex(t, "000100582112a442b7e7a701bc34d686fa87dfae802200105354554e207465737420636c69656e74"+
		"002400046e0001ff80290008932ff9b151263b36000600096576746a3a68367659202020000800149aeaa70c"+
		"bfd8cb56781ef2b5b2d3f249c1b571a280280004e57a3bcf")
	stunAnswer(t, f.handle(rfc, bob), rfc, bob)
}

// TestSTUNAnswerIsVeres: for each request in testdata/stun, the relay sends
// what vere's galaxy sent, byte for byte.
func TestSTUNAnswerIsVeres(t *testing.T) {
	f := newFixture(t, nil)
	vs := stunVectors(t)
	if len(vs) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range vs {
		req, from := unhex(t, v.Request), netip.MustParseAddrPort(v.From)
		if got := stunAnswer(t, f.handle(req, from), req, from); !bytes.Equal(got, unhex(t, v.Response)) {
			t.Errorf("from %v:\n got %x\nwant %s (vere)", from, got, v.Response)
		}
	}
}

// stunRefix sets b's length field and FINGERPRINT to match its bytes, so
// that it stays a request scry.IsSTUN takes.
func stunRefix(b []byte, length int) []byte {
	binary.BigEndian.PutUint16(b[2:], uint16(length))
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-8])^0x5354554e)
	return b
}

func TestMalformedSTUNIsDropped(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) { c.ShipLane = shipLane })
	good := stunRequest(1)
	cases := map[string][]byte{
		// vere would answer these; they are not binding requests a
		// client could have meant.
		"length too long":  stunRefix(bytes.Clone(good), 12),
		"length too short": stunRefix(bytes.Clone(good), 4),
		"attribute overruns": stunRefix(append(append(bytes.Clone(good[:20]), 0x80, 0x22, 0x00, 0x08, 'u', 'r', 'b', 'i'),
			good[20:]...), 12+4),
	}
	for name, b := range cases {
		if !scry.IsSTUN(b) {
			t.Fatalf("%s: test input not STUN-shaped", name)
		}
		if s := f.handle(b, alice); len(s) != 0 {
			t.Errorf("%s: sent %v", name, sendsTo(s))
		}
	}
	f.wantDrop(relay.DropSTUNMalformed, uint64(len(cases)))
	// What scry.IsSTUN does not take (a response, a request without
	// FINGERPRINT) is not STUN to vere either: legacy ames, malformed.
	resp := bytes.Clone(good)
	resp[0] = 1
	f.handle(resp, alice)
	f.handle(good[:20], alice)
	f.wantDrop(relay.DropMalformedAmes, 2)
	sn := f.snap()
	if sn.In[relay.KindOther] != 5 || sn.In[relay.KindSTUN] != 0 || sn.Events[relay.EventToShip] != 0 || sn.Accounted() != sn.TotalIn() {
		t.Errorf("counters %+v", sn)
	}
}

func TestSTUNFromSelfOrNowhereIsDropped(t *testing.T) {
	f := newFixture(t, nil)
	froms := []string{selfLane.String(), "0.0.0.0:5000", "203.0.113.9:0", "224.0.0.1:5000", "255.255.255.255:5000", "[::]:5000", "[ff02::1]:5000"}
	for _, s := range froms {
		if sends := f.handle(stunRequest(2), netip.MustParseAddrPort(s)); len(sends) != 0 {
			t.Errorf("%s: sent %v", s, sendsTo(sends))
		}
	}
	f.wantDrop(relay.DropSelf, uint64(len(froms)))
	if sn := f.snap(); sn.In[relay.KindSTUN] != uint64(len(froms)) || sn.Events[relay.EventSTUNAnswered] != 0 {
		t.Errorf("counters %+v", sn)
	}
}

func TestSTUNWithinAmplificationBudget(t *testing.T) {
	// A 50-byte burst: the first 40-byte answer fits and the second does
	// not.
	f := newFixture(t, func(c *relay.Config) {
		c.Amp = amp.Config{Rate: 1, Burst: 50} // 64Ki slots: alice and bob share one with odds of 1 in 65,536
	})
	req := stunRequest(3)
	stunAnswer(t, f.handle(req, alice), req, alice)
	if s := f.handle(req, alice); len(s) != 0 {
		t.Errorf("over budget, sent %v", sendsTo(s))
	}
	f.wantDrop(relay.DropSTUNThrottled, 1)
	if sn := f.snap(); sn.Events[relay.EventAmpThrottled] != 1 || sn.Events[relay.EventSTUNAnswered] != 1 || sn.Accounted() != sn.TotalIn() {
		t.Errorf("counters %+v", sn)
	}
	// Another address has its own budget.
	stunAnswer(t, f.handle(req, bob), req, bob)

	// Under the default budget a requester is never throttled: a ship
	// STUNs every 25 s; here 10,000 requests in 10 s, and never a probe
	// (answering one request with two datagrams).
	f = newFixture(t, nil)
	for range 10000 {
		f.now += time.Millisecond
		if len(f.handle(req, alice)) != 1 {
			t.Fatalf("throttled under the default budget: %+v", f.snap())
		}
	}
}

func TestSTUNAllocatesNothing(t *testing.T) {
	f := newFixture(t, nil)
	req := stunRequest(4)
	buf := make([]byte, len(req), len(req)+relay.GrowRoom)
	for _, from := range []netip.AddrPort{alice, netip.MustParseAddrPort("[2001:db8::7]:4242")} {
		run := func() {
			copy(buf, req)
			f.out.Reset()
			f.r.Handle(buf, from, f.now, f.out)
		}
		run()
		if n := testing.AllocsPerRun(1000, run); n != 0 {
			t.Errorf("%v: a STUN request allocates %v times", from, n)
		}
	}
	if sn := f.snap(); sn.Events[relay.EventSTUNAnswered] < 2000 {
		t.Fatalf("answered %d", sn.Events[relay.EventSTUNAnswered])
	}
}

// BenchmarkDecideSTUN measures a binding request decided and answered.
func BenchmarkDecideSTUN(b *testing.B) {
	f := newFixture(b, nil)
	req := stunRequest(5)
	buf := make([]byte, len(req), len(req)+relay.GrowRoom)
	b.ReportAllocs()
	for b.Loop() {
		// A millisecond a request: one requester's rate, well inside its
		// address's amplification budget (answers past it are throttled,
		// which is not what this measures).
		f.now += time.Millisecond
		copy(buf, req)
		f.out.Reset()
		f.r.Handle(buf, alice, f.now, f.out)
		if len(f.out.Sends) != 1 {
			b.Fatal("not answered")
		}
	}
}

// TestProbeAnswerProvesTheLane: the relay's probe of a busy lane, answered
// from that lane with its transaction id (as vere's driver answers any
// binding request), proves the lane: the answer is accounted for
// (lanes_proven) and the lane's pages are no longer budgeted. An answer
// with another id, or from another lane, proves nothing and is dropped.
func TestProbeAnswerProvesTheLane(t *testing.T) {
	f := newFixture(t, func(c *relay.Config) {
		c.Amp = amp.Config{Rate: 1, Burst: 4000, ProbeAfter: 1000}
	})
	var probe []byte
	for i := 0; probe == nil; i++ {
		if i == 3 {
			t.Fatal("no probe after 3 pages")
		}
		path := fmt.Sprintf("probed/%d", i)
		f.handle(peek(t, "~nec", path, 0), alice)
		for _, s := range f.handle(bigPage(t, path), necLane) {
			if scry.IsSTUN(s.Buf) && s.To == alice {
				probe = s.Buf
			}
		}
	}
	var q scry.STUNRequest
	if err := q.Parse(probe); err != nil {
		t.Fatalf("the probe is not a binding request vere takes: %v", err)
	}
	answer := func(tx [12]byte, from netip.AddrPort) []byte {
		r := scry.STUNResponse{TxID: tx, Mapped: from}
		return r.Append(nil)
	}
	wrong := q.TxID
	wrong[0] ^= 1
	for _, c := range []struct {
		b    []byte
		from netip.AddrPort
	}{{answer(wrong, alice), alice}, {answer(q.TxID, bob), bob}} {
		if s := f.handle(c.b, c.from); len(s) != 0 {
			t.Fatalf("a wrong answer was sent on: %v", sendsTo(s))
		}
	}
	if n := f.snap().Events[relay.EventLanesProven]; n != 0 {
		t.Fatalf("%d lanes proven by wrong answers", n)
	}
	f.handle(answer(q.TxID, alice), alice)
	sn := f.snap()
	if sn.Events[relay.EventLanesProven] != 1 || sn.Accounted() != sn.TotalIn() {
		t.Fatalf("proven %d; accounted %d of %d", sn.Events[relay.EventLanesProven], sn.Accounted(), sn.TotalIn())
	}
	// Far past the 4,000-byte burst: every page sent.
	for i := 0; i < 50; i++ {
		path := fmt.Sprintf("after/%d", i)
		f.handle(peek(t, "~nec", path, 0), alice)
		if !containsLane(f.handle(bigPage(t, path), necLane), alice) {
			t.Fatalf("page %d to the proven lane throttled", i)
		}
	}
	// bob, unproven, is held to the burst.
	got := 0
	for i := 0; i < 10; i++ {
		path := fmt.Sprintf("bob/%d", i)
		f.handle(peek(t, "~nec", path, 0), bob)
		for _, s := range f.handle(bigPage(t, path), necLane) {
			if s.To == bob && scry.IsMesa(s.Buf) {
				got++
			}
		}
	}
	if got > 3 {
		t.Errorf("an unproven lane got %d full pages from a 4,000-byte burst", got)
	}
}
