package relay

import (
	"net/netip"
	"slices"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/pit"
	"github.com/urbit-relay/relay/relay/route"
	"github.com/urbit-relay/relay/scry"
)

// request handles a peek or poke from lane from (*fromKey its Key):
// forwardPath, admitted by the pending table.
func (r *Relay) request(b []byte, p *scry.Packet, k Kind, from netip.AddrPort, fromKey *lane.Key, now time.Duration, out *Reader) {
	fromShip := r.link.sent(from)
	// f is zeroed and then written field by field, not made as a
	// literal: Go builds a literal in a temporary and copies it whole,
	// and the copy's 16-byte loads stall on the temporary's narrower
	// stores (so does a lane.Key copied whole: lane.Key.Set).
	var f fwd
	f.via, f.kind, f.b, f.from, f.fromShip = viaMesa, k, b, from, fromShip
	f.rcvr, f.sender = p.Name.Ship, p.PayloadName.Ship
	// A poke names its sender: at hop 0 it was sent by that ship itself.
	f.named = k == KindPoke && p.Header.Hops == 0 && !fromShip
	f.name, f.now, f.hops = r.nameKey(p.NameBytes(), out), now, int(p.Header.Hops)
	f.fromKey.IP, f.fromKey.Port = fromKey.IP, fromKey.Port
	r.forwardPath(&f, nil, out)
}

// remember records a request whose name hashes to key, from lane *from, in
// the pending table and reports whether it is to be forwarded.
func (r *Relay) remember(out *Reader, key uint64, from *lane.Key, now time.Duration) bool {
	c := &out.c
	lockTaken()
	v, evicted := r.pending.AddAt(key, from, now)
	fwd := v.Forward()
	if (v == pit.VerdictRequesterCapped || v == pit.VerdictCappedForward) && r.amp.Probing() {
		// Issue 28: a full entry refused it as a one-shot requester. A
		// lane that answered our STUN probe receives there: it asks
		// again as one, and takes a one-shot requester's place. Any
		// other is probed (at most once a ProbeInterval), so that a
		// real asker proves its lane by its next ask.
		if !r.amp.Proven(*from, now) {
			r.probe(*from, now, out)
		} else {
			lockTaken()
			if v2, ev2 := r.pending.AddProven(key, *from, now); v2 != pit.VerdictRequesterCapped && v2 != pit.VerdictCappedForward {
				v, evicted, fwd = v2, evicted || ev2, fwd || v2.Forward()
			}
		}
	}
	if evicted {
		c.add(EventEvicted, 1)
	}
	switch v {
	case pit.VerdictForwardRetransmit:
		c.add(EventRetransmits, 1)
	case pit.VerdictAggregated:
		c.add(EventAggregated, 1)
		out.act(ActionAggregated)
	case pit.VerdictRequesterCapped:
		out.drop(DropRequestersFull)
	case pit.VerdictCappedForward:
		// Forwarded to refresh the entry upstream; this requester is not
		// on it and will not get the answer.
		c.add(EventCappedForwards, 1)
	case pit.VerdictRefused:
		out.drop(DropPendingFull)
	case pit.VerdictSourceCapped:
		out.drop(DropPendingPerSource)
	}
	return fwd
}

// page handles a response from lane from (*fromKey its Key).
func (r *Relay) page(b []byte, p *scry.Packet, from netip.AddrPort, fromKey *lane.Key, now time.Duration, out *Reader) {
	fromShip := r.link.sent(from)
	key := r.nameKey(p.NameBytes(), out)
	lockTaken()
	reqs, ok := r.pending.TakeHeld(key, out.reqs[:0], &out.held, now)
	out.reqs = reqs[:0]
	publisher := p.Name.Ship
	// sponsors are the lanes of our own sponsors: requesters there get the
	// page without a next-hop unless it names the publisher's own lane
	// (bareFor), so they are looked up only for a page whose next-hop
	// does not.
	var sponsorBuf [2 * 4]lane.Key
	var sponsors []lane.Key
	// obs is what the route table learns from the page; Signed only when
	// a verifier (--pki) checked the publisher's signature on it. Its
	// Keys are written field by field and read in place, here and by the
	// route table (PageArrivedHeld), as request's are.
	obs := route.PageObs{Publisher: publisher, Hop0: p.Header.Hops == 0, Relayed: p.Header.Hops > 0}
	obs.From.IP, obs.From.Port = fromKey.IP, fromKey.Port
	setNextHopKey(&obs.Next, p)
	contested := false
	// placed is where the route table places the publisher; disputed,
	// that its lane is in dispute there (PageArrivedHeld).
	var placed lane.Key
	var disputed bool
	switch {
	case !ok:
		// Route knowledge is taken from solicited pages only, so that
		// unsolicited traffic cannot steer the route table; a late copy
		// answers only a probe outstanding on the lane it came from.
		if !fromShip {
			obs.Signed, obs.Unverified = r.pageAuthority(b, p, fromKey, now, false, out)
			lockTaken()
			if r.routes.LateAnswer(obs, now) {
				out.c.add(EventLateAnswers, 1)
			}
		}
		out.drop(DropUnsolicited)
		return
	case !fromShip:
		obs.Signed, obs.Unverified = r.pageAuthority(b, p, fromKey, now, true, out)
		// A configured or pinned publisher's pages, with no route
		// for it, teach the table nothing and are placed alike: the
		// table's quiet answer to the first is held (Reader.quiet).
		var held bool
		contested, disputed, held = r.routes.PageArrivedHeld(&obs, now, &placed, &out.quiet)
		if !held {
			lockTaken()
		}
	}
	out.c.add(EventPagesMatched, 1)
	out.act(ActionAnswered)
	// Variant for requesters that are our sponsors: no next-hop. Made
	// first, from the bytes as they came.
	var bare []byte
	var hopShort [6]byte
	canShort := false
	// own: the next-hop names the publisher's own lane, which our sponsors
	// may be given too; a forwarder's lane is never given to them (the
	// seed's rule: no fraternizing).
	own := false
	if !fromShip {
		hopShort, canShort, own = r.nextHop(p, fromKey, &obs, &placed, disputed, out)
	}
	if !own && len(r.ourChain) > 0 {
		lockTaken()
		sponsors = r.routes.AppendLanesOf(sponsorBuf[:0], r.ourChain)
	}
	hops := int(p.Header.Hops)
	if !fromShip && hops < MaxHops {
		hops++
	}
	// Through a device the ship gets the page as it came, from where it came.
	var orig []byte
	// Requesters are read in place (&reqs[i]): a lane.Key copied is
	// stored with overlapping moves, which the loads after it stall on.
	for i := range reqs {
		q := &reqs[i]
		if bare == nil && r.bareFor(q, sponsors, own) {
			bare = out.scratchCopy(b)
			bare = r.editPage(bare, p, hops, [6]byte{}, false)
		}
		if orig == nil && r.link.takesPagesAsTheyCame(*q) {
			orig = b
			if len(reqs) > 1 {
				orig = out.scratchCopy(b)
			}
		}
	}
	var main []byte
	if orig == nil || len(reqs) > 1 {
		main = r.editPage(b, p, hops, hopShort, canShort)
	}
	sent, sentBytes := 0, 0
	for i := range reqs {
		q := &reqs[i]
		if contested && out.held.Delivered(i) {
			// A contested page reached it since it last asked: one copy
			// per ask, however many such pages come (issue 28).
			continue
		}
		if orig != nil && *q == r.link.key {
			r.toShip(orig, KindPage, from, out)
			continue
		}
		buf := main
		if bare != nil && r.bareFor(q, sponsors, own) {
			buf = bare
		}
		if *q != r.link.key && !r.spend(q, len(buf), now, out) {
			out.c.add(EventAmpThrottled, 1)
			continue
		}
		out.add(buf, lane.AddrPortOf(q))
		sent++
		sentBytes += len(buf)
		if fromShip && !r.link.device && len(reqs) == 1 {
			// At a lane the ship answers us and we pass its page on: an
			// ack of a sponsee's ping, sent to the lane the ping came
			// from, is its word for that lane (vouch.go); sent to more
			// than one lane (a ping name copied, aggregated), it says
			// nothing (vouchContested).
			r.vouchAck(&out.c, *q, key, lane.Ship{}, now)
		}
	}
	if fromShip && !r.link.device && len(reqs) > 1 {
		r.vouchContested(&out.c, reqs, key, now)
	}
	out.c.countOut(KindPage, sent, sentBytes)
	out.c.add(EventAnswered, uint64(sent))
	if contested {
		// The page came from the publisher's challenger, and its
		// known-good lane was sent the same request: the requesters stay
		// pending, so that lane's page reaches them too (route.PageArrived),
		// each marked as sent this name's contested page (pit.Restore).
		lockTaken()
		r.pending.Restore(key, reqs, &out.held, now)
	}
}

// spend asks the amplification budget whether n bytes may be sent to
// requester q at now, probing q when the budget says to, unless out holds
// q free at now (Reader.free: found free before, its renewal not yet due):
// then it is sent with no look.
func (r *Relay) spend(q *lane.Key, n int, now time.Duration, out *Reader) bool {
	if out.free.has(q, now) {
		return true
	}
	ok, probe, freeUntil := r.amp.SpendFree(*q, n, now)
	if probe {
		r.probe(*q, now, out)
	}
	if freeUntil > now {
		out.free.put(q, freeUntil)
	}
	return ok
}

// nextHop is the next-hop written on page p, which came from lane
// *fromKey, in its 6-byte form, set false for none (counted by why), and
// whether it names the publisher's own lane (own). It names the
// publisher's own lane, never a forwarder's where that is known
// (nextHopFor): a stock requester stores a relayed page's next-hop as the
// publisher's lane, replacing even a direct lane it holds that differs
// (ames.hoon +ev-update-lane, docs/arvo-lanes.md L3). None while the
// publisher's lane is disputed (route.Table.PageArrived). A carried lane
// that is private here gives way to the forwarder's, the tightest lane
// the requester can use; a private lane is never named (hintOK). Lanes
// are read in place, and a lane's form and standing are out's hopMemo's.
func (r *Relay) nextHop(p *scry.Packet, fromKey *lane.Key, obs *route.PageObs, placed *lane.Key, disputed bool, out *Reader) (short [6]byte, set, own bool) {
	c := &out.c
	var hop *lane.Key
	if !disputed {
		hop, own = nextHopFor(p, fromKey, &obs.Next, placed)
	}
	if hop == nil {
		c.add(EventNextHopUnknown, 1)
		return short, false, own
	}
	short, set, public := out.hop.look(r, hop)
	if !public && own && obs.Relayed && *hop != *fromKey {
		hop, own = fromKey, false
		c.add(EventHintsScrubbed, 1)
		short, set, public = out.hop.look(r, hop)
	}
	switch {
	case !set:
		c.add(EventNextHopUnencodable, 1)
	case !public:
		set = false
		c.add(EventHintsScrubbed, 1)
	}
	return short, set, own
}

// nextHopFor returns the next-hop a relay writes on page p, which came from
// lane *from (see page), nil for none, and whether it names the
// publisher's own lane (own): where the route table places the publisher
// (*placed); else, for a relayed page, the next-hop it carries (*carried),
// which every forwarder writes as the publisher's own lane when it knows
// one (this function; vere's _mesa_hear_page names the lane a page came
// from, and vere forwards only to a sponsee's direct lane, so a page
// reaches it at hop 0); else, for a relayed page that carries none (its
// forwarder knew no public lane of the publisher's, or withheld it from us
// as its sponsor), the forwarder's lane *from, the seed's step; else none.
// The lane returned is one of the three given.
func nextHopFor(p *scry.Packet, from, carried, placed *lane.Key) (hop *lane.Key, own bool) {
	switch {
	case *placed != lane.Key{}:
		return placed, true
	case p.Header.Hops == 0:
		return nil, false
	case *carried != lane.Key{}:
		return carried, true
	}
	return from, false
}

// setNextHopKey makes *k page p's next-hop, the zero Key when it has none,
// field by field (lane.Key.Set).
func setNextHopKey(k *lane.Key, p *scry.Packet) {
	if ap, has := p.NextHopAddr(); has {
		k.Set(lane.Canon(ap))
		return
	}
	k.IP, k.Port = [16]byte{}, 0
}

// hopMemo remembers, for one Reader, one lane's SHORT form (set false when
// it has none) and whether it may be named as a next-hop (public:
// Relay.hintOK). Both are functions of the lane and of the relay's
// configuration (its HintNets) alone, so a look stands until the Reader
// decides for another relay (bind clears it). A page's next-hop is most
// often the same publisher's lane as the page before it; a lane that is
// not displaces the one held, and costs one look more.
type hopMemo struct {
	lane                lane.Key
	short               [lane.ShortLen]byte
	set, public, filled bool
}

// look returns *k's SHORT form, whether it has one, and whether r may name
// it as a next-hop.
func (m *hopMemo) look(r *Relay, k *lane.Key) (short [lane.ShortLen]byte, set, public bool) {
	if m.filled && m.lane.IP == k.IP && m.lane.Port == k.Port {
		return m.short, m.set, m.public
	}
	m.short, m.set = k.Short()
	m.public = r.hintOK(k.AddrPort())
	m.lane.IP, m.lane.Port, m.filled = k.IP, k.Port, true
	return m.short, m.set, m.public
}

// bareFor reports whether requester q gets a page with no next-hop: one of
// our own sponsors when the next-hop names a forwarder (!own: the seed's
// rule against fraternizing; the publisher's own lane they are given, to
// pass on to a stock requester, docs/arvo-lanes.md L3), or the ship behind
// us in ship-lane mode, which must not learn lanes that bypass the relay it
// sits behind.
func (r *Relay) bareFor(q *lane.Key, sponsors []lane.Key, own bool) bool {
	return (!own && slices.Contains(sponsors, *q)) || r.link.mustNotLearnBypasses(q)
}

// editPage sets a page's hop count and next-hop (cleared when !set), with
// its mug, in place. b holds the bytes p was parsed from (or a copy made
// before any edit), so the mug is resumed from the state p saved instead of
// re-hashing the whole page. On error nothing changes, and the only error
// possible for a page Parse accepted is a page within 6 bytes of the size
// limit, which has no next-hop and goes on without one.
func (r *Relay) editPage(b []byte, p *scry.Packet, hops int, hop [6]byte, set bool) []byte {
	scry.SetHops(b, hops)
	b, _ = scry.EditPageNextHop(b, p, hop, set)
	return b
}
