package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/urbit-relay/relay/lane"
	"github.com/urbit-relay/relay/relay/capture"
	"github.com/urbit-relay/relay/scry"
)

// DefaultHoldThreshold is how long a publisher may take, in the fixture,
// between the relay handing it a request and its page reaching the relay,
// before replay treats the page as held: sent only once the replay has
// played every fixture record before it, rather than on receipt. One second
// is more than a round trip to a publisher plus its think time in the
// generated fixtures (under 150 ms), less than their deliberately slow
// answers (1.2-1.8 s, which are held, so replay reproduces their slowness),
// and far less than a subscription's wait for a value to grow (seconds).
const DefaultHoldThreshold = time.Second

// kind is the class of a datagram a replay lane sends.
type kind uint8

const (
	kindPeek kind = iota
	kindPoke
	kindPage
	kindAmes
	kindOther // not a well-formed mesa or ames packet
	numKinds
)

var kindNames = [numKinds]string{"peek", "poke", "page", "ames", "other"}

func (k kind) String() string { return kindNames[k] }

// expect is what the fixture shows becoming of a datagram sent to the relay.
type expect uint8

const (
	expectNone     expect = iota // no answer, no delivery: dropped, or never answered
	expectAnswer                 // a mesa request: a page with its name came back to its lane
	expectDelivery               // legacy ames: the relay passed it on
)

// action is one datagram a replay lane sends to the relay: a scheduled one
// (its fixture time or place decides when), or a reactive legacy ames reply
// (sent when its lane hears the packet it answers).
type action struct {
	at     time.Duration // fixture time, from the first record
	lane   int32
	kind   kind
	expect expect
	// answerAfter is how long after it the fixture's answer (or
	// delivery) came.
	answerAfter time.Duration
	reactive    bool
	hold        int    // reactive only: scheduled actions that must be sent first; -1 none
	key         string // mesa request: its name bytes; ames: amesKey; else ""
	data        []byte
}

// answer is what a publisher lane sends for a request name.
type answer struct {
	page []byte
	hold int // scheduled actions that must be sent before it goes; -1 none
}

// fixture is a capture analysed for replay.
type fixture struct {
	path     string
	relay    netip.AddrPort
	lanes    []netip.AddrPort
	actions  []action
	schedule []int32 // indices of scheduled actions, in fixture order
	// answers[lane][name] is the page the lane sends for a request name.
	answers []map[string]*answer
	// replies[lane][amesKey] are reactive ames actions, in order, sent
	// when the lane hears a legacy packet with that key.
	replies []map[string][]int32
	records int
	ignored int // records with neither end at the relay
	span    time.Duration
}

// amesKey identifies a legacy packet across relays, which rewrite its header
// and may insert an origin: sender, receiver and content.
func amesKey(p *scry.AmesPacket) string {
	b := make([]byte, 0, 32+len(p.Content))
	b = p.Sndr.AppendLE(b, 16)
	b = p.Rcvr.AppendLE(b, 16)
	return string(append(b, p.Content...))
}

// replyKey returns the key that pairs a legacy packet with its reply:
// the two ships (in the request's order) and, for fine packets, the path
// and fragment. A wail pairs with the purr for the same path and fragment;
// an ames-class message with the next ames-class packet the other way.
// asRequest says which side p is; false if p cannot be that side (a wail is
// never a reply, a purr never a request).
func replyKey(p *scry.AmesPacket, asRequest bool) (string, bool) {
	sndr, rcvr := p.Sndr, p.Rcvr
	if !asRequest {
		sndr, rcvr = rcvr, sndr
	}
	b := sndr.AppendLE(make([]byte, 0, 40), 16)
	b = rcvr.AppendLE(b, 16)
	switch p.Class() {
	case scry.AmesClassAmes:
		return string(append(b, 'a')), true
	case scry.AmesClassWail:
		var w scry.AmesWail
		if !asRequest || w.Parse(p.Content) != nil {
			return "", false
		}
		return string(append(append(b, 'f'), fineKey(string(w.Path), w.Frag)...)), true
	case scry.AmesClassPurr:
		var pr scry.AmesPurr
		if asRequest || pr.Parse(p.Content) != nil {
			return "", false
		}
		return string(append(append(b, 'f'), fineKey(string(pr.Path), pr.Frag)...)), true
	}
	return "", false
}

// classify parses b as the relay would: mesa (with its name bytes), legacy
// ames, or neither.
func classify(b []byte, p *scry.Packet, a *scry.AmesPacket) kind {
	if scry.IsMesa(b) {
		if p.Parse(b) != nil {
			return kindOther
		}
		switch p.Header.Type {
		case scry.TypePeek:
			return kindPeek
		case scry.TypePoke:
			return kindPoke
		case scry.TypePage:
			return kindPage
		}
		return kindOther
	}
	if scry.IsSTUN(b) || a.Parse(b) != nil {
		return kindOther
	}
	return kindAmes
}

// inferRelay returns the lane that is an end of the most records: the
// relay a capture was taken at.
func inferRelay(recs []capture.Record) (netip.AddrPort, error) {
	count := map[netip.AddrPort]int{}
	for _, r := range recs {
		count[r.Src]++
		count[r.Dst]++
	}
	var best netip.AddrPort
	n := 0
	for ap, c := range count {
		if c > n || (c == n && ap.Compare(best) < 0) {
			best, n = ap, c
		}
	}
	if n == 0 {
		return best, errors.New("the capture holds no UDP datagrams")
	}
	return best, nil
}

// loadFixture reads and analyses the capture at path. relayLane is the
// relay's lane in the capture; the zero AddrPort infers it.
func loadFixture(path string, relayLane netip.AddrPort, holdThreshold time.Duration) (*fixture, error) {
	r, err := capture.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var recs []capture.Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	if !relayLane.IsValid() {
		if relayLane, err = inferRelay(recs); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	fx := analyse(recs, lane.Canon(relayLane), holdThreshold)
	fx.path = path
	return fx, nil
}

// analyse turns a capture taken at relayLane into a fixture; see
// docs/replay.md ("How a fixture is read") for the rules.
func analyse(recs []capture.Record, relayLane netip.AddrPort, holdThreshold time.Duration) *fixture {
	fx := &fixture{relay: relayLane, records: len(recs)}
	laneIdx := map[netip.AddrPort]int32{}
	laneOf := func(ap netip.AddrPort) int32 {
		if i, ok := laneIdx[ap]; ok {
			return i
		}
		i := int32(len(fx.lanes))
		laneIdx[ap] = i
		fx.lanes = append(fx.lanes, ap)
		fx.answers = append(fx.answers, map[string]*answer{})
		fx.replies = append(fx.replies, map[string][]int32{})
		return i
	}
	type trigger struct {
		key string // the delivered packet's amesKey
		at  time.Duration
	}
	var (
		asked    []map[string]time.Duration // per lane: request name → when the relay first sent it (since its last page)
		openReq  []map[string][]int32       // per lane: request name → its unanswered requests
		triggers []map[string][]trigger     // per lane: replyKey → legacy packets delivered to it, oldest first
		openAmes = map[string][]int32{}     // ames key → legacy packets sent to the relay, not yet passed on
		p        scry.Packet
		a        scry.AmesPacket
	)
	grow := func(l int32) {
		for int(l) >= len(asked) {
			asked = append(asked, map[string]time.Duration{})
			openReq = append(openReq, map[string][]int32{})
			triggers = append(triggers, map[string][]trigger{})
		}
	}
	shipLane := netip.MustParseAddrPort(genShipLane)
	var t0 time.Time
	if len(recs) > 0 {
		t0 = recs[0].Time
	}
	for _, rec := range recs {
		at := rec.Time.Sub(t0)
		fx.span = max(fx.span, at)
		src, dst := lane.Canon(rec.Src), lane.Canon(rec.Dst)
		switch {
		case dst == shipLane || src == shipLane:
			// The relay and its own ship (the fixture convention,
			// genShipLane): what the relay hands its ship is between
			// them, not traffic replay plays or checks.
			fx.ignored++
		case src == relayLane && dst != relayLane:
			l := laneOf(dst)
			grow(l)
			switch classify(rec.Payload, &p, &a) {
			case kindPeek, kindPoke:
				name := string(p.NameBytes())
				if _, ok := asked[l][name]; !ok {
					asked[l][name] = at
				}
			case kindPage:
				name := string(p.NameBytes())
				for _, i := range openReq[l][name] {
					fx.actions[i].expect = expectAnswer
					fx.actions[i].answerAfter = at - fx.actions[i].at
				}
				delete(openReq[l], name)
			case kindAmes:
				key := amesKey(&a)
				if q := openAmes[key]; len(q) > 0 {
					fx.actions[q[0]].expect = expectDelivery
					fx.actions[q[0]].answerAfter = at - fx.actions[q[0]].at
					openAmes[key] = q[1:]
				}
				if rk, ok := replyKey(&a, true); ok {
					triggers[l][rk] = append(triggers[l][rk], trigger{key: key, at: at})
				}
			}
		case dst == relayLane && src != relayLane:
			l := laneOf(src)
			grow(l)
			act := action{at: at, lane: l, kind: classify(rec.Payload, &p, &a), hold: -1, data: rec.Payload}
			switch act.kind {
			case kindPage:
				name := string(p.NameBytes())
				if first, ok := asked[l][name]; ok {
					// The page answers requests the relay handed
					// this lane: a publisher's answer.
					delete(asked[l], name)
					if fx.answers[l][name] == nil {
						hold := -1
						if at-first > holdThreshold {
							hold = len(fx.schedule)
						}
						fx.answers[l][name] = &answer{page: rec.Payload, hold: hold}
					}
					continue
				}
			case kindPeek, kindPoke:
				act.key = string(p.NameBytes())
			case kindAmes:
				act.key = amesKey(&a)
				// A reply to a legacy packet the relay delivered to
				// this lane is sent when the lane hears that packet.
				rk, ok := replyKey(&a, false)
				if !ok {
					break
				}
				q := triggers[l][rk]
				if a.Class() == scry.AmesClassAmes {
					for len(q) > 0 && at-q[0].at > holdThreshold {
						q = q[1:] // too old to be what this answers
					}
				}
				if len(q) > 0 {
					act.reactive = true
					if at-q[0].at > holdThreshold {
						act.hold = len(fx.schedule)
					}
					i := int32(len(fx.actions))
					fx.replies[l][q[0].key] = append(fx.replies[l][q[0].key], i)
					q = q[1:]
				}
				triggers[l][rk] = q
			}
			i := int32(len(fx.actions))
			fx.actions = append(fx.actions, act)
			switch act.kind {
			case kindPeek, kindPoke:
				openReq[l][act.key] = append(openReq[l][act.key], i)
			case kindAmes:
				openAmes[act.key] = append(openAmes[act.key], i)
			}
			if !act.reactive {
				fx.schedule = append(fx.schedule, i)
			}
		default:
			fx.ignored++
		}
	}
	return fx
}

// fixtureStats counts a fixture's actions by kind and expectation.
type fixtureStats struct {
	Scheduled, Reactive, Expected [numKinds]int
	Answers, HeldAnswers          int
}

func (fx *fixture) stats() fixtureStats {
	var s fixtureStats
	for _, a := range fx.actions {
		if a.reactive {
			s.Reactive[a.kind]++
		} else {
			s.Scheduled[a.kind]++
		}
		if a.expect != expectNone {
			s.Expected[a.kind]++
		}
	}
	for _, m := range fx.answers {
		for _, an := range m {
			s.Answers++
			if an.hold >= 0 {
				s.HeldAnswers++
			}
		}
	}
	return s
}

// describe writes a summary of the fixture (replay info).
func (fx *fixture) describe(w io.Writer) {
	s := fx.stats()
	fmt.Fprintf(w, "fixture  %s\n", fx.path)
	fmt.Fprintf(w, "relay    %s (%d records, %d not at the relay, span %.3fs)\n", fx.relay, fx.records, fx.ignored, fx.span.Seconds())
	senders, publishers := 0, 0
	for i := range fx.lanes {
		if len(fx.answers[i]) > 0 || len(fx.replies[i]) > 0 {
			publishers++
		}
	}
	seen := map[int32]bool{}
	for _, a := range fx.actions {
		if !seen[a.lane] {
			seen[a.lane] = true
			senders++
		}
	}
	fmt.Fprintf(w, "lanes    %d (%d send to the relay, %d answer requests)\n", len(fx.lanes), senders, publishers)
	fmt.Fprintf(w, "answers  %d pages (%d held)\n", s.Answers, s.HeldAnswers)
	fmt.Fprintf(w, "%-6s %10s %10s %10s\n", "type", "scheduled", "reactive", "expected")
	for k := range numKinds {
		fmt.Fprintf(w, "%-6s %10d %10d %10d\n", kind(k), s.Scheduled[k], s.Reactive[k], s.Expected[k])
	}
}

// fineKey joins a fine path and fragment number.
func fineKey(path string, frag uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], frag)
	return path + string(b[:])
}
