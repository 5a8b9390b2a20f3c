package sim

import (
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/endpoint"
	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/scry"
)

// Stock ships: the requester and keepalive of a ship running stock vere and
// arvo, as the network has them, beside the project's endpoint.Core. Every
// rule below cites the arm (urbit/urbit pkg/arvo/sys/vane/ames.hoon at
// 000ecc3f8426, the commit docs/protocol.md cites; app/ping.hoon) or the C
// function (urbit/vere 859fd5c65c pkg/vere/io/mesa.c, io/ames.c, as in
// ../shared/vere/src) it models. A stock ship still answers peeks, pokes
// and STUN with its endpoint.Core (publisher side: a hop-0 page to the lane
// the request came from, as vere's _mesa_hear_peek does); only what it
// sends as a requester and to stay reachable, and what it learns from
// pages, follow the rules here.

// RequesterModel is what the ships that make requests run.
type RequesterModel uint8

const (
	// RequesterEndpoint is the project's endpoint.Core: tightest known-good
	// lane and the next tighter (dual send), pings to its own sponsor.
	RequesterEndpoint RequesterModel = iota
	// RequesterStock is stock arvo and vere (stockShip).
	RequesterStock
	// RequesterProposed is stock vere with arvo changed as
	// docs/simulation.md's proposal says (stockShip.proposed): %push to
	// the peer's sponsor rather than its galaxy, a direct lane kept over
	// a relayed next-hop while the peer lives, and pings to our own
	// sponsor every 25 s whether or not STUN works.
	RequesterProposed
)

const (
	// VereResendInterval and VereResends: vere sends a %push's request
	// to its lanes, then again every second, 9 times, while the request
	// is pending; then it forgets it (mesa.c _mesa_ef_send: ret_y = 9,
	// uv_timer_start(..., 1000); _mesa_resend_timer_cb: ret_y--, resend,
	// _mesa_del_request when 0).
	VereResendInterval = time.Second
	VereResends        = 9

	// ArvoRetryInterval is arvo's /mesa/retry timer: every 2 min it
	// re-pushes every pending request with fresh lanes (ames.hoon
	// +sy-wake on /mesa/retry, +sy-prod: push-pact with make-lanes).
	ArvoRetryInterval = 2 * time.Minute

	// ArvoDeadAfter is when a peer with a direct lane counts as dead and
	// make-lanes adds its galaxy back (+make-lanes: is-peer-dead: not a
	// galaxy, and %dead or now ≥ last-contact + ~s30, as
	// docs/arvo-lanes.md L8 reads it; +is-route-dead makes the same
	// test). Last contact is any page or poke heard from the peer
	// (+ev-update-qos %live last-contact=now in hear-page and
	// hear-poke). %dead is set by +sy-prod only when the test holds, and
	// cleared by the next page, so the time alone decides.
	ArvoDeadAfter = 30 * time.Second

	// STUNInterval is how often vere STUNs its galaxy once STUN works
	// (io/ames.c _stun_timer_cb, STUN_KEEPALIVE: 25*1000). With STUN
	// working ames stops the %ping app (+sy-stun: %stop), so a stock ship
	// pings its sponsorship chain only at boot and when STUN shows its
	// lane changed (%once: app/ping.hoon ++one pokes every ship of
	// saxo:title once).
	STUNInterval = 25 * time.Second

	// VerePitExpiry is how long a forwarding vere keeps a pending entry
	// (mesa.c PIT_EXPIRE_MICROS 20000000).
	VerePitExpiry = 20 * time.Second
)

// stockPeer is arvo's lane.per for one peer: (unit [hop lane]) and the
// last contact (fren-state's lane and qos).
type stockPeer struct {
	has         bool
	hop         int
	lane        netip.AddrPort
	lastContact time.Duration
}

type stockReq struct {
	rcvr  lane.Ship
	key   string
	wire  []byte
	lanes []netip.AddrPort // the lanes vere was handed with the %push
	left  int              // vere's remaining resends; 0: vere forgot it
	next  time.Duration    // vere's next resend
	tries int
	done  func(endpoint.Response)
	// ping is set for a keepalive poke: its re-push keeps its lane (the
	// sponsor's, as the simulation's ships know it).
	ping bool
}

// StockStats counts what stock requesters learned from pages.
type StockStats struct {
	// Untightened counts pages that replaced a direct (hop 0) lane with
	// an indirect one: a relayed page whose next-hop differs from the
	// lane held (+ev-update-lane).
	Untightened uint64
	// Retightened counts direct lanes learned (a hop-0 page while the
	// lane held was indirect or none).
	Retightened uint64
	// ArvoRetries counts requests re-pushed by the /mesa/retry timer.
	ArvoRetries uint64
	// LateRelayed counts relayed copies (hop > 0) of pages vere dropped
	// because an earlier copy had answered the request, and
	// LateWouldUntighten those of them that would have replaced the
	// direct lane arvo then held had they come first (a next-hop that
	// differs from it): how often the race alone keeps a wrong next-hop
	// from un-tightening a requester.
	LateRelayed, LateWouldUntighten uint64
	// LateCopies counts every copy of a page vere dropped because an
	// earlier copy had answered the request, relayed or not: the second
	// answer a request sent to two lanes (+make-lanes) brings back.
	LateCopies uint64
}

// stockShip is the requester and keepalive of one stock ship.
type stockShip struct {
	self    lane.Ship
	galaxy  lane.Ship
	chain   []lane.Ship // saxo:title without ourselves: sponsor .. galaxy
	laneOf  func(lane.Ship) netip.AddrPort
	galOf   func(lane.Ship) lane.Ship
	peers   map[lane.Ship]*stockPeer
	reqs    map[string]*stockReq
	pingSeq map[lane.Ship]uint64 // the last ping's message number, per sponsor
	booted  bool
	stunOK  bool          // a STUN response came: the %ping app is stopped
	nextPng time.Duration // next %nat round of pings, while !stunOK
	nextSTN time.Duration
	nextRet time.Duration
	mapped  netip.AddrPort
	txid    uint64
	stats   StockStats
	// proposed runs the arvo changes of RequesterProposed.
	proposed bool
}

func newStockShip(self lane.Ship, laneOf func(lane.Ship) netip.AddrPort, galOf func(lane.Ship) lane.Ship, retryPhase time.Duration) *stockShip {
	s := &stockShip{self: self, laneOf: laneOf, galOf: galOf,
		peers: map[lane.Ship]*stockPeer{}, reqs: map[string]*stockReq{}, pingSeq: map[lane.Ship]uint64{}, nextRet: retryPhase}
	for sp := self.Sponsor(); ; sp = sp.Sponsor() {
		s.chain = append(s.chain, sp)
		if sp.Class() == lane.Galaxy {
			s.galaxy = sp
			break
		}
	}
	return s
}

func (s *stockShip) peer(her lane.Ship) *stockPeer {
	p := s.peers[her]
	if p == nil {
		p = &stockPeer{}
		s.peers[her] = p
	}
	return p
}

// updateLane is +ev-update-lane (ames.hoon, |ev, called from hear-page
// with the page's hop and next-hop, and from hear-poke with next=~):
//   - a galaxy's lane never changes;
//   - hop 0: the lane the packet came from, direct;
//   - hop > 0 without a next-hop: keep what is held;
//   - hop > 0 with a next-hop: take [hop next] if nothing or an indirect
//     lane is held; if a direct lane is held, keep it only if it equals
//     the next-hop, otherwise take [hop next] ("otherwise accept and
//     update indirect route").
func (s *stockShip) updateLane(her lane.Ship, from netip.AddrPort, hop int, next netip.AddrPort, hasNext, fromPage bool, now time.Duration) {
	if her.Class() == lane.Galaxy {
		return
	}
	p := s.peer(her)
	wasDirect := p.has && p.hop == 0
	switch {
	case hop == 0:
		if !wasDirect && fromPage {
			s.stats.Retightened++
		}
		p.has, p.hop, p.lane = true, 0, from
	case !hasNext:
	case wasDirect && p.lane == next:
	case wasDirect && s.proposed && !s.dead(p, now):
		// Proposal: a live direct lane is kept; a relay's next-hop
		// replaces it only once the peer is judged dead.
	default:
		if wasDirect {
			s.stats.Untightened++
		}
		p.has, p.hop, p.lane = true, hop, next
	}
}

// makeLanes is +make-lanes with +get-sponsor ("XX only galaxy"): the
// lanes a %push names for her.
//   - no lane: the galaxy alone;
//   - an indirect lane: [lane, galaxy];
//   - a direct lane: [lane], and the galaxy too if the peer is dead
//     (is-peer-dead: ArvoDeadAfter).
//
// get-sponsor gives no galaxy when we are it.
func (s *stockShip) makeLanes(her lane.Ship, now time.Duration) []netip.AddrPort {
	gal := s.galOf(her)
	if s.proposed {
		gal = her.Sponsor() // proposal: the peer's own sponsor
	}
	var spon []netip.AddrPort
	if gal != s.self {
		spon = []netip.AddrPort{s.laneOf(gal)}
	}
	if her.Class() == lane.Galaxy {
		return []netip.AddrPort{s.laneOf(her)}
	}
	p := s.peers[her]
	if p == nil || !p.has {
		return spon
	}
	out := []netip.AddrPort{p.lane}
	if p.hop != 0 || s.dead(p, now) {
		out = append(out, spon...)
	}
	return out
}

// dead is is-peer-dead as modelled: ArvoDeadAfter since the last contact.
func (s *stockShip) dead(p *stockPeer, now time.Duration) bool {
	return now-p.lastContact >= ArvoDeadAfter
}

// Direct reports whether arvo holds a direct lane to her.
func (s *stockShip) direct(her lane.Ship) bool {
	p := s.peers[her]
	return p != nil && p.has && p.hop == 0
}

// peek starts a request (+ev-req-peek → co-make-peek → co-make-mess:
// push-pact with make-lanes) and vere's sends (push).
func (s *stockShip) peek(rcvr lane.Ship, path string, now time.Duration, done func(endpoint.Response), out []endpoint.Datagram) []endpoint.Datagram {
	pkt := scry.NewPeek(scry.Name{Ship: rcvr, Bloq: scry.DefaultBloq, Path: []byte(path)})
	wire := pkt.Append(nil)
	var parsed scry.Packet
	if parsed.Parse(wire) != nil {
		return out
	}
	key := string(parsed.NameBytes())
	if _, ok := s.reqs[key]; ok {
		return out // co-make-mess: joins the pending request
	}
	r := &stockReq{rcvr: rcvr, key: key, wire: wire, done: done}
	s.reqs[key] = r
	return s.push(r, now, out)
}

// push hands r to vere with make-lanes' lanes. vere drops a %push for a
// name it still has pending (_mesa_ef_send: old_u).
func (s *stockShip) push(r *stockReq, now time.Duration, out []endpoint.Datagram) []endpoint.Datagram {
	if r.left > 0 {
		return out
	}
	if !r.ping {
		r.lanes = s.makeLanes(r.rcvr, now)
	}
	r.left = VereResends
	r.next = now + VereResendInterval
	return s.send(r, out)
}

func (s *stockShip) send(r *stockReq, out []endpoint.Datagram) []endpoint.Datagram {
	r.tries++
	for _, l := range r.lanes {
		out = append(out, endpoint.Datagram{Buf: r.wire, To: l})
	}
	return out
}

// cancel forgets the request for path on rcvr (arvo's %yawn; vere's
// resends stop with it).
func (s *stockShip) cancel(rcvr lane.Ship, path string) {
	for k, r := range s.reqs {
		if r.rcvr == rcvr {
			var p scry.Packet
			if p.Parse(r.wire) == nil && string(p.Name.Path) == path {
				delete(s.reqs, k)
			}
		}
	}
}

// tick runs vere's resend timers, arvo's /mesa/retry timer, the boot
// pings and the STUN keepalive.
func (s *stockShip) tick(now time.Duration, out []endpoint.Datagram) []endpoint.Datagram {
	if !s.booted {
		s.booted = true
		s.nextSTN, s.nextPng = now, now
	}
	switch {
	case !s.stunOK && now >= s.nextPng:
		// The %ping app starts in %nat (on-init) and pings the chain
		// every 25 s (++nat, nat-timeout ~s25) until a STUN response
		// stops it (+sy-stun %stop → plan %off).
		s.nextPng = now + STUNInterval
		out = s.pingChain(now, out)
	case s.proposed && now >= s.nextPng:
		// Proposal: once STUN works, keep pinging our own sponsor (a
		// relay there learns and keeps our lane and pinhole).
		s.nextPng = now + STUNInterval
		out = s.ping(s.chain[0], now, out)
	}
	if now >= s.nextSTN {
		s.nextSTN = now + STUNInterval
		s.txid++
		var q scry.STUNRequest
		for i := range 8 {
			q.TxID[i] = byte(s.txid >> (8 * i))
		}
		out = append(out, endpoint.Datagram{Buf: q.Append(nil), To: s.laneOf(s.galaxy)})
	}
	for _, r := range s.sorted() {
		if r.left > 0 && now >= r.next {
			r.left--
			out = s.send(r, out)
			r.next = now + VereResendInterval
		}
	}
	if now >= s.nextRet {
		s.nextRet = now + ArvoRetryInterval
		for _, r := range s.sorted() {
			if r.left == 0 && !r.ping {
				s.stats.ArvoRetries++
			}
			out = s.push(r, now, out)
		}
	}
	return out
}

// sorted returns the pending requests in a fixed order (the simulation
// must not depend on map order).
func (s *stockShip) sorted() []*stockReq {
	rs := make([]*stockReq, 0, len(s.reqs))
	for _, r := range s.reqs {
		rs = append(rs, r)
	}
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].key < rs[j-1].key; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
	return rs
}

// pingChain pokes every ship of the sponsorship chain once (app/ping.hoon
// ++one, and ++nat's rounds before STUN succeeds), each on its own lane.
func (s *stockShip) pingChain(now time.Duration, out []endpoint.Datagram) []endpoint.Datagram {
	for _, sp := range s.chain {
		out = s.ping(sp, now, out)
	}
	return out
}

// ping pokes sp. A ping is a %plea like any other: vere re-sends it and
// arvo re-pushes it until its ack (a page) comes (the request rules
// above); a ping still unacked is not sent again (one message in flight
// on a flow: +fo-send's send-window, and ++nat waits for the ack).
//
// Each ping is a message of its own, named apart (its ack name carries the
// message number: docs/arvo-lanes.md A1); the one in flight keeps its name
// until acked.
func (s *stockShip) ping(sp lane.Ship, now time.Duration, out []endpoint.Datagram) []endpoint.Datagram {
	if seq := s.pingSeq[sp]; seq != 0 {
		if _, ok := s.reqs[s.pingKey(sp, seq)]; ok {
			return out
		}
	}
	s.pingSeq[sp]++
	wire := endpoint.PingWire(s.self, sp, s.pingSeq[sp])
	key := s.pingKey(sp, s.pingSeq[sp])
	if key == "" {
		return out
	}
	r := &stockReq{rcvr: sp, key: key, wire: wire, ping: true}
	s.reqs[key] = r
	r.lanes = []netip.AddrPort{s.laneOf(sp)}
	r.left = VereResends
	r.next = now + VereResendInterval
	return s.send(r, out)
}

// pingKey is the request key of s's ping of sp numbered seq.
func (s *stockShip) pingKey(sp lane.Ship, seq uint64) string {
	var p scry.Packet
	if p.Parse(endpoint.PingWire(s.self, sp, seq)) != nil {
		return ""
	}
	return string(p.NameBytes())
}

func (s *stockShip) nextDeadline() time.Duration {
	if !s.booted {
		return 0
	}
	d := min(s.nextSTN, s.nextRet)
	if !s.stunOK || s.proposed {
		d = min(d, s.nextPng)
	}
	for _, r := range s.reqs {
		if r.left > 0 {
			d = min(d, r.next)
		}
	}
	return d
}

// handle takes what a stock ship's vere and arvo do with b; handled is
// false for what its endpoint.Core answers (peeks, pokes, STUN requests).
func (s *stockShip) handle(b []byte, from netip.AddrPort, now time.Duration, out []endpoint.Datagram) ([]endpoint.Datagram, bool) {
	if scry.IsSTUN(b) {
		return out, false // a binding request: the core answers it
	}
	var resp scry.STUNResponse
	if resp.Parse(b) == nil {
		// A changed lane: %once, one ping to each ship of the chain.
		if s.mapped.IsValid() && resp.Mapped != s.mapped {
			out = s.pingChain(now, out)
		}
		s.mapped, s.stunOK = resp.Mapped, true
		return out, true
	}
	var p scry.Packet
	if p.Parse(b) != nil {
		return out, false
	}
	from = lane.Canon(from)
	switch p.Header.Type {
	case scry.TypePoke:
		if p.Name.Ship == s.self {
			// hear-poke: ev-update-lane with next=~, and last contact.
			her := p.PayloadName.Ship
			s.updateLane(her, from, int(p.Header.Hops), netip.AddrPort{}, false, false, now)
			s.peer(her).lastContact = now
		}
		return out, false
	case scry.TypePage:
		r, ok := s.reqs[string(p.NameBytes())]
		if !ok || r.left == 0 {
			s.stats.LateCopies++
			if p.Header.Hops > 0 {
				s.stats.LateRelayed++
				next, hasNext := p.NextHopAddr()
				if h := s.peers[p.Name.Ship]; hasNext && h != nil && h.has && h.hop == 0 && h.lane != lane.Canon(next) {
					s.stats.LateWouldUntighten++
				}
			}
			// vere injects a page only for a request it has pending, and
			// deletes it with the first (_mesa_hear_page: "early
			// deletion"), so later copies never reach arvo.
			return out, true
		}
		delete(s.reqs, r.key)
		next, hasNext := p.NextHopAddr()
		her := p.Name.Ship
		s.updateLane(her, from, int(p.Header.Hops), lane.Canon(next), hasNext, true, now)
		s.peer(her).lastContact = now
		if r.done != nil {
			r.done(endpoint.Response{From: from, Next: next, Hops: int(p.Header.Hops), Tries: r.tries})
		}
		return out, true
	}
	return out, false
}

// vereGalaxy is a stock galaxy's forwarding (mesa.c), no relay: it
// forwards a peek for a ship under it to the lane arvo gave it
// (_mesa_forward_request: imp_y is us, _mesa_get_direct_lane; nothing
// if the lane is unknown), keeping the requester's lane in its pending
// table (_mesa_add_lane_to_pit, every copy forwarded), and a page for a
// pending name to every lane in the entry with the hop count raised and
// the lane the page came from as next-hop (_mesa_hear_page: "stick next
// hop in packet", _mesa_add_hop). Arvo's lane for a ship is learned from
// its hop-0 pokes (hear-poke, +ev-update-lane, %nail to vere): the pings
// of app/ping.hoon.
type vereGalaxy struct {
	self  lane.Ship
	galOf func(lane.Ship) lane.Ship
	lanes map[lane.Ship]netip.AddrPort
	pit   map[string]*verePit
}

type verePit struct {
	lanes []netip.AddrPort
	at    time.Duration
}

func newVereGalaxy(self lane.Ship, galOf func(lane.Ship) lane.Ship) *vereGalaxy {
	return &vereGalaxy{self: self, galOf: galOf, lanes: map[lane.Ship]netip.AddrPort{}, pit: map[string]*verePit{}}
}

func (g *vereGalaxy) handle(b []byte, from netip.AddrPort, now time.Duration, out []endpoint.Datagram) ([]endpoint.Datagram, bool) {
	var p scry.Packet
	if p.Parse(b) != nil {
		return out, false
	}
	from = lane.Canon(from)
	switch p.Header.Type {
	case scry.TypePoke:
		if p.Name.Ship == g.self && p.Header.Hops == 0 {
			g.lanes[p.PayloadName.Ship] = from
		}
		return out, false
	case scry.TypePeek:
		her := p.Name.Ship
		if her == g.self {
			return out, false
		}
		l, ok := g.lanes[her]
		if g.galOf(her) != g.self || !ok {
			return out, true
		}
		key := string(p.NameBytes())
		e := g.pit[key]
		if e == nil || now-e.at > VerePitExpiry {
			e = &verePit{}
			g.pit[key] = e
		}
		e.at = now
		if !containsLane(e.lanes, from) {
			e.lanes = append(e.lanes, from)
		}
		p.Header.Hops++
		return append(out, endpoint.Datagram{Buf: p.Append(nil), To: l}), true
	case scry.TypePage:
		key := string(p.NameBytes())
		e := g.pit[key]
		if e == nil {
			return out, false
		}
		delete(g.pit, key)
		if now-e.at > VerePitExpiry {
			return out, true
		}
		p.Header.Hops++
		p.SetNextHopAddr(from)
		buf := p.Append(nil)
		for _, l := range e.lanes {
			out = append(out, endpoint.Datagram{Buf: buf, To: l})
		}
		return out, true
	}
	return out, false
}

func containsLane(ls []netip.AddrPort, l netip.AddrPort) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

// galaxyOf returns ship s's galaxy in the network's tree (its own
// sponsorship, whatever the strategy's routing).
func (n *Network) galaxyOf(s lane.Ship) lane.Ship {
	i, ok := n.byShip[s]
	if !ok {
		return s.Sponsor().Sponsor().Sponsor()
	}
	return n.ships[n.ships[i].Galaxy].ID
}

// publicLane returns ship s's public lane (a galaxy's as DNS gives it, a
// sponsor's as the simulation's ships know it).
func (n *Network) publicLane(s lane.Ship) netip.AddrPort {
	return n.nodes[n.shipOf(s).front].lane
}

// stockRequest is request for a stock requester.
func (n *Network) stockRequest(requester, rcvr int, path string, timeout time.Duration, done func(Result)) error {
	id := n.ships[requester].core
	nd := &n.nodes[id]
	n.Track(path)
	began := n.now
	finished := false
	rid := n.ships[rcvr].ID
	cb := func(resp endpoint.Response) {
		if finished {
			return
		}
		finished = true
		r := Result{Start: began, End: n.now, Tries: resp.Tries, Hops: resp.Hops, From: resp.From, Next: resp.Next}
		n.At(n.now, func() { done(r) })
	}
	n.dg = nd.stock.peek(rid, path, n.now, cb, n.dg[:0])
	n.emit(id, n.dg)
	n.reschedule(id)
	if timeout > 0 {
		n.At(n.now+timeout, func() {
			if finished {
				return
			}
			finished = true
			n.nodes[id].stock.cancel(rid, path)
			n.reschedule(id)
			done(Result{Start: began, End: n.now, Lost: true})
		})
	}
	return nil
}

// Direct reports whether ship i's requester holds ship j's own lane as
// proven: a stock ship's arvo holds a direct (hop 0) lane, an endpoint's
// route table a direct lane (route.Table.DirectLane).
func (n *Network) Direct(i, j int) bool {
	nd := &n.nodes[n.ships[i].core]
	if nd.stock != nil {
		return nd.stock.direct(n.ships[j].ID)
	}
	if nd.core == nil {
		return false
	}
	_, ok := nd.core.Routes().DirectLane(n.ships[j].ID, n.now)
	return ok
}

// StockStats adds up what the network's stock requesters learned.
func (n *Network) StockStats() StockStats {
	var t StockStats
	for i := range n.nodes {
		if s := n.nodes[i].stock; s != nil {
			t.Untightened += s.stats.Untightened
			t.Retightened += s.stats.Retightened
			t.ArvoRetries += s.stats.ArvoRetries
			t.LateRelayed += s.stats.LateRelayed
			t.LateWouldUntighten += s.stats.LateWouldUntighten
			t.LateCopies += s.stats.LateCopies
		}
	}
	return t
}
