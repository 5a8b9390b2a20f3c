package relay_test

// Issue 28's row "an answered challenger sends many pages for a name the
// ship never answers": a page from the publisher's answered challenger,
// while its direct lane works, leaves the request pending for the direct
// lane's page (route.PageArrived's contested), and every requester was put
// back after each such page: each got a copy of every one (up to 21 each,
// 34 times the attacker's bytes, on loopback). The entry now remembers
// whom a contested page reached (pit.Restore, Held.Delivered): one copy
// per ask, however many such pages come. The honest twin is a ship that
// really moved: its new lane, the answered challenger, serves a
// multi-fragment download whose lost copies are asked again, and nothing
// is lost.

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

// fragName is fragment frag of path at s.
func fragName(s lane.Ship, path string, frag uint64) scry.Name {
	return scry.Name{Ship: s, Bloq: scry.DefaultBloq, Path: []byte(path), Frag: frag}
}

// fragPeek asks for fragment frag of path at s.
func fragPeek(s lane.Ship, path string, frag uint64) []byte {
	p := scry.NewPeek(fragName(s, path, frag))
	return p.Append(nil)
}

// ofFragment is fragment frag of a total-fragment value at path, published
// by s, carrying value.
func ofFragment(s lane.Ship, path string, frag, total uint64, value string) []byte {
	p := scry.NewPage(fragName(s, path, frag),
		scry.Data{Total: total, AuthKind: scry.AuthNone, Frag: []byte(value)})
	return p.Append(nil)
}

// contestedRequesters are the lanes waiting on the name the ship never
// answers, each its own address.
func contestedRequesters(n int) []netip.AddrPort {
	out := make([]netip.AddrPort, n)
	for i := range out {
		out[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(100 + i)}), 31337)
	}
	return out
}

// answeredChallenger makes lane at the sponsee's answered challenger while
// its lane sponseeLn stays fresh and proven: at pokes naming the sponsee,
// is sent the next peek beside sponseeLn, and answers it (with value),
// as does sponseeLn.
func answeredChallenger(t *testing.T, f *fixture, at netip.AddrPort, value string) {
	t.Helper()
	f.handle(pokeFrom(sponsee, ship(t, "~marzod"), "claim/0"), at)
	s := f.handle(peekOf(sponsee, "claim"), alice)
	if sentTo(s, at) != 1 || sentTo(s, sponseeLn) != 1 {
		t.Fatalf("the claim peek went to %v; want %v and %v", s, at, sponseeLn)
	}
	f.now += 2 * time.Millisecond
	f.handle(pageValue(sponsee, "claim", value), at)
	f.now += 5 * time.Millisecond
	f.handle(pageOf(t, sponsee, "claim"), sponseeLn)
	i, _ := f.r.Routes().Info(sponsee)
	if i.Challenger.AddrPort() != at || i.ChallengerState != route.ChallengerAnswered || i.Direct.AddrPort() != sponseeLn {
		t.Fatalf("route %+v; want %v the answered challenger beside %v", i, at, sponseeLn)
	}
}

// TestContestedPagesAreSentOncePerAsk: 20 requesters wait on a name the
// ship never answers; the answered challenger sends 200 pages for it, then
// every requester asks again, and it sends 200 more. Each requester gets
// one copy per ask (two in all); before, it got one per page, as far as
// the amplification budget let them through.
func TestContestedPagesAreSentOncePerAsk(t *testing.T) {
	f := laneFixture(t)
	answeredChallenger(t, f, attacker, "forge")
	reqs := contestedRequesters(20)
	const path, pages = "never", 200
	for _, q := range reqs {
		f.handle(fragPeek(sponsee, path, 0), q)
		f.now += time.Millisecond
	}
	got := map[netip.AddrPort]int{}
	attackBytes, reflected, biggest := 0, 0, 0
	flood := func() {
		pg := ofFragment(sponsee, path, 0, 1, "forged value")
		for range pages {
			attackBytes += len(pg)
			for _, s := range f.handle(pg, attacker) {
				got[s.To]++
				reflected += len(s.Buf)
				biggest = max(biggest, len(s.Buf))
			}
			f.now += time.Millisecond
		}
	}
	flood()
	first := 0
	for _, q := range reqs {
		first = max(first, got[q])
	}
	for _, q := range reqs { // each asks again, as ames does
		f.handle(fragPeek(sponsee, path, 0), q)
	}
	flood()
	most := 0
	for _, q := range reqs {
		most = max(most, got[q])
	}
	amp := float64(reflected) / float64(attackBytes)
	t.Logf("%d requesters, %d challenger pages, an ask, %d more: at most %d copies a requester (after the first %d pages: %d); %d bytes sent for the attacker's %d (%.2fx)",
		len(reqs), pages, pages, most, pages, first, reflected, attackBytes, amp)
	for _, q := range reqs {
		if got[q] != 2 {
			t.Errorf("requester %v got %d copies for its two asks; want 2", q, got[q])
		}
	}
	// One copy per ask, each the attacker's page with the relay's
	// next-hop added.
	if wantAmp := float64(2*len(reqs)*biggest) / float64(attackBytes); amp > wantAmp {
		t.Errorf("%.2fx the attacker's bytes; want at most %.2fx (one copy per ask)", amp, wantAmp)
	}
	// The request is still pending for the known-good lane's page, which
	// reaches every requester.
	real := f.handle(ofFragment(sponsee, path, 0, 1, "real value"), sponseeLn)
	for _, q := range reqs {
		if sentTo(real, q) != 1 {
			t.Errorf("the known-good lane's page reached %v %d times; want once", q, sentTo(real, q))
		}
	}
}

// TestContestedDownloadLosesNothing is the honest twin: the sponsee moved
// to movedLn, which it pings from and answers from (the answered
// challenger) while its old lane is still fresh, so every page from it is
// contested. Two requesters download a 24-fragment value; a third of
// alice's copies are lost on the way and she asks again, and the ship
// answers each ask. Every fragment reaches both, the asked-again ones
// included.
func TestContestedDownloadLosesNothing(t *testing.T) {
	f := laneFixture(t)
	answeredChallenger(t, f, movedLn, "value")
	bob := netip.MustParseAddrPort("203.0.113.90:31337")
	const path, frags = "big", 24
	have := map[netip.AddrPort]map[uint64]bool{alice: {}, bob: {}}
	asks, lost := 0, 0
	for fr := uint64(0); fr < frags; fr++ {
		peek := fragPeek(sponsee, path, fr)
		pg := ofFragment(sponsee, path, fr, frags, fmt.Sprintf("fragment %d", fr))
		s := f.handle(peek, alice)
		f.handle(peek, bob)
		asks++
		if sentTo(s, movedLn) != 1 {
			t.Fatalf("fragment %d: the peek went to %v, not the ship's new lane", fr, s)
		}
		for try := 0; ; try++ {
			f.now += 3 * time.Millisecond
			out := f.handle(pg, movedLn)
			if sentTo(out, bob) > 0 {
				have[bob][fr] = true
			}
			if sentTo(out, alice) > 0 {
				if fr%3 == 0 && try == 0 {
					lost++ // lost on the way: she asks again
				} else {
					have[alice][fr] = true
				}
			}
			if have[alice][fr] || try == 3 {
				break
			}
			f.now += 300 * time.Millisecond
			if v := sentTo(f.handle(peek, alice), movedLn); v != 1 {
				t.Fatalf("fragment %d: alice's ask again was not sent to the ship's new lane", fr)
			}
			asks++
		}
		f.now += 10 * time.Millisecond
	}
	t.Logf("%d fragments, %d asks, %d copies lost: alice has %d, bob %d", frags, asks, lost, len(have[alice]), len(have[bob]))
	if len(have[alice]) != frags || len(have[bob]) != frags {
		t.Errorf("alice has %d of %d fragments, bob %d", len(have[alice]), frags, len(have[bob]))
	}
	if lost == 0 {
		t.Error("no copy was lost; the twin does not exercise asking again")
	}
	if st := f.r.Pending().Stats(); st.Restored == 0 {
		t.Error("no page was contested; the twin does not exercise the challenger's pages")
	}
}
