package route

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/urbit-relay/relay/lane"
)

// The model test: random operations on one ship's route (contacts from a
// handful of lanes, answers, keepalives, requests, the passing of
// time) against a plain reference model of the rules as docs/reliability.md
// states them, written without the transition tables: after every
// operation the table's direct lane, its state, the challenger and its
// state, and every request's targets must be the model's.

// modelLanes are the lanes the operations use: the ship's own, a moved
// one, two an attacker sends from.
var modelLanes = [...]lane.Key{planetKey, movedKey, evilKey, otherKey}

// laneModel is the reference: one ship under ~marnec under ~nec (whose
// lane is configured), every lane contacting us (kept).
type laneModel struct {
	d                  lane.Key
	st                 LaneState
	dHeard, dWait      time.Duration
	c                  lane.Key
	cst                ChallengerState
	cHeard, cSince     time.Duration
	cWait, cAnswered   time.Duration
	cFails, unanswered int
	bad                lane.Key
	badUntil           time.Duration
	held, clock        map[lane.Key]time.Duration
	exists             bool
	// moves counts challengers that moved in, spooferMoves those that
	// displaced a fresh lane that was only heard.
	moves, spooferMoves int
}

func (m *laneModel) live() bool { return m.st != StateUnknown && m.st != StateExpired }

func (m *laneModel) fresh(now time.Duration) bool {
	if !m.live() {
		return false
	}
	t, ok := m.clock[m.d]
	return now-m.dHeard < DefaultDirectLaneExpiry || (ok && t > now-DefaultDirectLaneExpiry)
}

func (m *laneModel) clearChal() { m.c, m.cst, m.cWait, m.cFails = lane.Key{}, ChallengerNone, 0, 0 }

func (m *laneModel) settle(now time.Duration) {
	if m.cst == ChallengerNone {
		return
	}
	if now-m.cHeard >= DefaultDirectLaneExpiry {
		m.clearChal()
		return
	}
	answered := m.cst == ChallengerAnswered
	if m.fresh(now) {
		spoofer := answered && m.st == StateHeard && m.unanswered >= DefaultProvenFailures
		t, ok := m.clock[m.d]
		talking := (ok && t >= now-DefaultMoveSilence) || now-m.dHeard < DefaultMoveSilence
		if !spoofer && (!answered || now-m.cSince < DefaultMoveSilence || talking) {
			return
		}
	}
	m.moves++
	if m.fresh(now) {
		m.spooferMoves++
	}
	m.d, m.dHeard, m.dWait = m.c, m.cHeard, m.cWait
	m.st = StateHeard
	if answered {
		m.st = StateProven
	}
	m.clearChal()
}

func (m *laneModel) advance(now time.Duration) {
	if m.dWait != 0 && now-m.dWait >= DefaultProbeTimeout {
		if m.st == StateHeard && m.cst == ChallengerAnswered && m.cAnswered >= m.dWait {
			m.unanswered++
		}
		m.dWait = 0
	}
	if m.cst != ChallengerNone && m.cWait != 0 && now-m.cWait >= DefaultProbeTimeout {
		m.cWait = 0
		m.cFails++
		if (m.cst == ChallengerClaimed && m.cFails >= 1) || (m.cst == ChallengerAnswered && m.cFails >= DefaultProvenFailures) {
			m.bad, m.badUntil = m.c, now+DefaultBadLaneHold
			m.held[m.c] = now
			m.clearChal()
		}
	}
	if m.live() && !m.fresh(now) {
		m.st = StateExpired
	}
	m.settle(now)
}

func (m *laneModel) contact(k lane.Key, now time.Duration) {
	m.exists = true
	m.advance(now)
	switch {
	case m.st != StateUnknown && m.d == k:
		if m.st == StateExpired || m.st == StateDoubted {
			m.st = StateHeard
		}
	case m.fresh(now):
		held, isHeld := m.held[k]
		switch {
		case m.cst != ChallengerNone && m.c == k:
			m.cHeard = now
		case k == m.bad && now < m.badUntil:
		case isHeld && held >= now-DefaultBadLaneHold:
		case m.cst != ChallengerNone && now-m.cHeard < DefaultChallengerHold:
		default:
			m.c, m.cst, m.cHeard, m.cSince, m.cWait, m.cFails = k, ChallengerClaimed, now, now, 0, 0
			m.cAnswered, m.unanswered = 0, 0
		}
		return
	default:
		if m.c == k {
			m.clearChal()
		}
		m.d, m.st, m.dWait = k, StateHeard, 0
	}
	m.dHeard = now
	if m.cst == ChallengerNone {
		m.dWait = 0
	}
}

func (m *laneModel) answer(k lane.Key, now time.Duration) {
	if !m.exists {
		return
	}
	switch {
	case m.st != StateUnknown && k == m.d:
		if m.dWait != 0 || m.st.knownGood() {
			m.dWait, m.dHeard = 0, now
			m.st = StateProven
		}
	case m.cst != ChallengerNone && k == m.c:
		if m.cWait != 0 || m.cst == ChallengerAnswered {
			m.cWait, m.cFails, m.cHeard, m.cAnswered, m.cst = 0, 0, now, now, ChallengerAnswered
			m.settle(now)
		}
	}
}

// send is a request for the ship from alice: the model's targets, and
// the probes they start.
func (m *laneModel) send(now time.Duration) []lane.Key {
	if !m.exists {
		return []lane.Key{necKey}
	}
	m.advance(now)
	if !m.fresh(now) {
		return []lane.Key{necKey}
	}
	var out []lane.Key
	if m.cst == ChallengerAnswered || (m.cst == ChallengerClaimed && m.cWait == 0) {
		out = append(out, m.c)
		if m.cWait == 0 {
			m.cWait = now
		}
	}
	if m.dWait == 0 {
		m.dWait = now
	}
	return append(out, m.d)
}

func TestLaneModel(t *testing.T) {
	durations := [...]time.Duration{time.Millisecond, 500 * time.Millisecond, DefaultProbeTimeout, 10 * time.Second,
		DefaultMoveSilence + time.Second, DefaultDirectLaneExpiry, 30 * time.Minute}
	// The rules the runs must reach, or the comparison proves nothing.
	reached := map[string]int{}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 21))
		rt, err := New(self, nil, Config{Seed: 1, LaneClockSlots: 1 << 12})
		if err != nil {
			t.Fatal(err)
		}
		rt.SetStatic(map[lane.Ship]lane.Key{nec: necKey})
		m := &laneModel{held: map[lane.Key]time.Duration{}, clock: map[lane.Key]time.Duration{}}
		now := sec
		var log []string
		for op := range 300 {
			k := modelLanes[rng.IntN(len(modelLanes))]
			var what string
			switch n := rng.IntN(100); {
			case n < 25:
				what = "contact " + k.AddrPort().String()
				rt.Contacted(planet, k, now)
				m.contact(k, now)
			case n < 50:
				what = "answer " + k.AddrPort().String()
				rt.Answered(planet, k, lane.Key{}, false, now)
				m.answer(k, now)
			case n < 58:
				what = "keepalive " + k.AddrPort().String()
				rt.KeepAlive(k, now)
				m.clock[k] = now
			case n < 85:
				what = "send"
				got := lanes(rt.Select(planet, alice, now))
				if want := m.send(now); !slices.Equal(got, want) {
					t.Fatalf("seed %d op %d: send to %v, model %v; after %v", seed, op, got, want, log)
				}
			default:
				d := durations[rng.IntN(len(durations))]
				what = "wait " + d.String()
				now += d
			}
			log = append(log, what)
			if len(log) > 12 {
				log = log[1:]
			}
			i, _ := rt.Info(planet)
			if i.Direct != m.d || i.State != m.st || i.Challenger != m.c || i.ChallengerState != m.cst {
				t.Fatalf("seed %d op %d (%s): table %v %v, challenger %v %v; model %v %v, %v %v; after %v", seed, op, what,
					i.Direct.AddrPort(), i.State, i.Challenger.AddrPort(), i.ChallengerState,
					m.d.AddrPort(), m.st, m.c.AddrPort(), m.cst, log)
			}
			reached[i.State.String()]++
			reached["challenger "+i.ChallengerState.String()]++
		}
		if m.moves > 0 {
			reached["moved"]++
		}
		if m.spooferMoves > 0 {
			reached["fresh lane displaced"]++
		}
		if len(m.held) > 0 {
			reached["held"]++
		}
	}
	for _, r := range []string{"heard", "proven", "expired", "challenger claimed", "challenger answered", "held", "moved", "fresh lane displaced"} {
		if reached[r] == 0 {
			t.Errorf("the runs never reached %q: %v", r, reached)
		}
	}
	t.Logf("reached: %v", reached)
}
