package relay_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/relay"
	"github.com/urbit-relay/relay/relay/amp"
	"github.com/urbit-relay/relay/scry"
)

// Return-routability probes that the mutation run left without a killing
// test (docs/mutation.md, "relay/: the budget's probes"): a lane is probed
// when the budget refuses it, whatever ProbeAfter says, and a lane the
// relay forwards legacy ames to is probed like a mesa requester. Each test
// sets ProbeAfter so that only the behaviour it is about can send a probe.

// noThresholdProbe is a ProbeAfter no test here spends: a lane is then
// probed only when refused.
const noThresholdProbe = 1 << 30

// probeTo returns the binding request among sends that went to lane to,
// and how many datagrams went there that are not one.
func probeTo(t *testing.T, sends []send, to netip.AddrPort) (probe *scry.STUNRequest, others int) {
	t.Helper()
	for _, s := range sends {
		if s.To != to {
			continue
		}
		var q scry.STUNRequest
		if !scry.IsSTUN(s.Buf) || q.Parse(s.Buf) != nil {
			others++
			continue
		}
		if probe != nil {
			t.Fatalf("two probes of %v in one decision", to)
		}
		probe = &q
	}
	return probe, others
}

// proveLane answers probe from its lane, as vere's driver answers any
// binding request, and checks the relay took the answer.
func proveLane(t *testing.T, f *fixture, probe *scry.STUNRequest, from netip.AddrPort) {
	t.Helper()
	before := f.snap().Events[relay.EventLanesProven]
	r := scry.STUNResponse{TxID: probe.TxID, Mapped: from}
	if s := f.handle(r.Append(nil), from); len(s) != 0 {
		t.Fatalf("the probe's answer was sent on: %v", sendsTo(s))
	}
	if got := f.snap().Events[relay.EventLanesProven]; got != before+1 {
		t.Fatalf("lanes_proven %d after the probe's answer, want %d", got, before+1)
	}
}

// TestProbeWhenPageRefused: a page the budget refuses to a lane (its
// address's bucket or its network's, with no light allowance left) is not
// sent, but the lane is sent a probe in its stead, though it was never sent
// ProbeAfter bytes: a vere ship that outran the budget proves its lane and
// gets its next pages. Killed mutants: either of spend's refusals
// returning no probe (`a.proofs != nil` negated or dropped).
func TestProbeWhenPageRefused(t *testing.T) {
	for _, c := range []struct {
		what string
		amp  amp.Config
	}{
		{"address budget", amp.Config{Rate: 1, Burst: 4000, ProbeAfter: noThresholdProbe}},
		{"network budget", amp.Config{Rate: 1 << 20, Burst: 1 << 20, NetRate: 1, NetBurst: 4000,
			LightRate: 1, LightBurst: 1, ProbeAfter: noThresholdProbe}},
	} {
		t.Run(c.what, func(t *testing.T) {
			f := newFixture(t, func(cfg *relay.Config) { cfg.Amp = c.amp })
			fetch := func(i int) []send {
				path := fmt.Sprintf("refused/%d", i)
				f.handle(peek(t, "~nec", path, 0), alice)
				return f.handle(bigPage(t, path), necLane)
			}
			// Two full pages fit the 4,000 bytes; neither asks for a probe.
			for i := 0; i < 2; i++ {
				probe, pages := probeTo(t, fetch(i), alice)
				if probe != nil || pages != 1 {
					t.Fatalf("page %d within the budget: probe %v, %d pages to alice; want no probe, one page", i, probe != nil, pages)
				}
			}
			probe, pages := probeTo(t, fetch(2), alice)
			sn := f.snap()
			if pages != 0 || sn.Events[relay.EventAmpThrottled] != 1 {
				t.Fatalf("page past the budget: %d pages to alice, amp_throttled %d; want it refused", pages, sn.Events[relay.EventAmpThrottled])
			}
			if probe == nil || sn.Events[relay.EventProbesSent] != 1 {
				t.Fatalf("refused lane not probed (probes_sent %d)", sn.Events[relay.EventProbesSent])
			}
			proveLane(t, f, probe, alice)
			for i := 3; i < 13; i++ {
				if _, pages := probeTo(t, fetch(i), alice); pages != 1 {
					t.Fatalf("page %d to the lane proven after its refusal not sent", i)
				}
			}
		})
	}
}

// TestProbeLegacyTargets: a lane the relay learned and forwards legacy
// ames to (budgeted, unlike a configured one) is probed once it has been
// sent ProbeAfter bytes, as a mesa requester is, and when a forward to it
// is refused; the probe's answer proves it, and forwards past its burst
// then go. Forwards to the configured galaxy are never budgeted, so never
// probed. Killed mutants: the ames path's probe loop (`i <
// plan.Targets.N` negated), the refusal's probe as in
// TestProbeWhenPageRefused.
func TestProbeLegacyTargets(t *testing.T) {
	const frag = 1000 // each forward is over 1,000 bytes
	for _, c := range []struct {
		what       string
		probeAfter int
		probeAt    int  // the forward that brings the probe
		refused    bool // and is refused
	}{
		{"past ProbeAfter", 2500, 2, false},
		{"refused", noThresholdProbe, 3, true},
	} {
		t.Run(c.what, func(t *testing.T) {
			f := newFixture(t, func(cfg *relay.Config) {
				cfg.Amp = amp.Config{Rate: 1, Burst: 4000, ProbeAfter: c.probeAfter}
			})
			// The planet speaks first: the relay learns its lane as alice.
			s := f.handle(legacy(t, "~dapnep-ronmyl", "~nec", 50, 0), alice)
			if q, n := probeTo(t, s, necLane); q != nil || n != 1 {
				t.Fatalf("the planet's first packet to ~nec: probe %v, %d forwards; want one forward, no probe", q != nil, n)
			}
			var probe *scry.STUNRequest
			for i := 0; i <= c.probeAt; i++ {
				s := f.handle(legacy(t, "~nec", "~dapnep-ronmyl", frag, i+1), necLane)
				q, fwd := probeTo(t, s, alice)
				if i < c.probeAt {
					if q != nil || fwd != 1 {
						t.Fatalf("forward %d: probe %v, %d forwards to alice; want no probe yet, one forward", i, q != nil, fwd)
					}
					continue
				}
				if q == nil {
					t.Fatalf("forward %d: the learned lane not probed (probes_sent %d)", i, f.snap().Events[relay.EventProbesSent])
				}
				if refused := fwd == 0; refused != c.refused || f.snap().Drops[relay.DropLegacyThrottled] != boolCount(c.refused) {
					t.Fatalf("forward %d: %d forwards with the probe, legacy_throttled %d; want refused %v", i, fwd, f.snap().Drops[relay.DropLegacyThrottled], c.refused)
				}
				probe = q
			}
			if n := f.snap().Events[relay.EventProbesSent]; n != 1 {
				t.Fatalf("probes_sent %d, want 1", n)
			}
			proveLane(t, f, probe, alice)
			// Proven: ten more forwards, 10 KB past the 4,000-byte burst.
			for i := 100; i < 110; i++ {
				if _, fwd := probeTo(t, f.handle(legacy(t, "~nec", "~dapnep-ronmyl", frag, i), necLane), alice); fwd != 1 {
					t.Fatalf("forward %d to the proven lane not sent (legacy_throttled %d)", i, f.snap().Drops[relay.DropLegacyThrottled])
				}
			}
		})
	}
}

func boolCount(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestFreeLaneMemo: a Reader remembers a requester's lane as free (proven,
// no renewal due: amp.Budget.SpendFree) from the instant it found it so
// until its proof's renewal falls due (the proof's last quarter), and a
// further page to it then skips the budget. It remembers a lane the
// budget paid for as not free, still holds a free lane at later instants
// before the renewal, forgets it at the renewal's first nanosecond, never
// remembers a lane whose proof is due for renewal (which is probed, page
// after page, until it answers), and forgets all when used for another
// relay, whose budget it is not (nor its lane clock: Reader.heard is
// forgotten too). Killed mutants: free.put never or always called, the
// memo's end ignored or off by a nanosecond, a renewal remembered, bind's
// clearing of either memo dropped.
func TestFreeLaneMemo(t *testing.T) {
	cfg := amp.Config{Rate: 1, Burst: 4000, ProbeAfter: noThresholdProbe, ProofLifetime: 8 * time.Second}
	f := newFixture(t, func(c *relay.Config) { c.Amp = cfg })
	n := 0
	fetch := func(who netip.AddrPort) []send {
		n++
		path := fmt.Sprintf("free/%d", n)
		f.handle(peek(t, "~nec", path, 0), who)
		return f.handle(bigPage(t, path), necLane)
	}
	// alice outruns her budget, is probed, and proves her lane.
	var probe *scry.STUNRequest
	for i := 0; i < 3 && probe == nil; i++ {
		probe, _ = probeTo(t, fetch(alice), alice)
	}
	if probe == nil {
		t.Fatal("alice was never probed")
	}
	proveLane(t, f, probe, alice)
	if f.out.FreeLane(alice, f.now) {
		t.Fatal("alice free before any page was sent her after her proof")
	}
	if _, pages := probeTo(t, fetch(alice), alice); pages != 1 || !f.out.FreeLane(alice, f.now) {
		t.Fatalf("a page to proven alice: %d sent, free %v; want one sent and alice free", pages, f.out.FreeLane(alice, f.now))
	}
	// bob's page is paid from his budget: not free.
	if _, pages := probeTo(t, fetch(bob), bob); pages != 1 || f.out.FreeLane(bob, f.now) {
		t.Fatalf("a page to unproven bob: %d sent, free %v; want one sent, bob not free", pages, f.out.FreeLane(bob, f.now))
	}
	if !f.out.FreeLane(alice, f.now) {
		t.Fatal("bob's page made alice forget her freedom")
	}
	// Later instants before the renewal: still free, and her pages go
	// with no probe.
	proved := f.now // the proof was answered at this instant (proveLane)
	renewAt := proved + cfg.ProofLifetime*3/4 + 1
	f.now += time.Millisecond
	if !f.out.FreeLane(alice, f.now) {
		t.Fatal("alice forgotten at a later instant, her proof far from renewal")
	}
	if q, pages := probeTo(t, fetch(alice), alice); pages != 1 || q != nil {
		t.Fatalf("a page to free alice later: %d sent, probe %v; want one, no probe", pages, q != nil)
	}
	if !f.out.FreeLane(alice, renewAt-1) || f.out.FreeLane(alice, renewAt) {
		t.Fatalf("alice free at %v: %v, at %v: %v; want free to the nanosecond before her renewal, not at it",
			renewAt-1, f.out.FreeLane(alice, renewAt-1), renewAt, f.out.FreeLane(alice, renewAt))
	}
	// The proof's last quarter: the page goes, with a probe to renew it,
	// and alice is not remembered free (each page asks until renewed).
	f.now = proved + cfg.ProofLifetime*7/8
	q, pages := probeTo(t, fetch(alice), alice)
	if pages != 1 || q == nil || f.out.FreeLane(alice, f.now) {
		t.Fatalf("a page in the proof's last quarter: %d sent, probe %v, free %v; want one sent, a probe, not free",
			pages, q != nil, f.out.FreeLane(alice, f.now))
	}
	proveLane(t, f, q, alice)
	fetch(alice)
	if !f.out.FreeLane(alice, f.now) {
		t.Fatal("alice not free after her renewed proof")
	}
	// Used for another relay: forgotten at once, and so is the lane
	// clock's record of alice (Reader.heard), which is this relay's.
	if !f.out.HeardLane(alice, f.now) {
		t.Fatal("alice's peek at this instant not remembered as recorded by the lane clock")
	}
	other := newFixture(t, func(c *relay.Config) { c.Amp = cfg })
	other.r.Handle(make([]byte, 5, 5+relay.GrowRoom), alice, f.now, f.out)
	if f.out.FreeLane(alice, f.now) || f.out.HeardLane(alice, f.now) {
		t.Fatalf("a Reader now deciding for another relay remembers alice: free %v, heard %v",
			f.out.FreeLane(alice, f.now), f.out.HeardLane(alice, f.now))
	}
}
