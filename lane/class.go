package lane

import (
	"errors"
	"fmt"
)

// Class is a ship's rank, decided by its byte width (Hoon's +clan). Lower
// values rank higher: a ship's sponsor always has a lower Class than the
// ship, except that a galaxy sponsors itself.
type Class uint8

// The classes, highest rank first. Hoon calls them %czar, %king, %duke,
// %earl and %pawn.
const (
	Galaxy Class = iota // 0-1 bytes: 0 to 255
	Star                // 2 bytes
	Planet              // 3-4 bytes
	Moon                // 5-8 bytes
	Comet               // 9-16 bytes
)

// String returns the class's lower-case English name ("galaxy", "star",
// "planet", "moon", "comet").
func (c Class) String() string {
	switch c {
	case Galaxy:
		return "galaxy"
	case Star:
		return "star"
	case Planet:
		return "planet"
	case Moon:
		return "moon"
	case Comet:
		return "comet"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Class returns the class of s, from its byte width.
func (s Ship) Class() Class {
	switch n := s.ByteLen(); {
	case n <= 1:
		return Galaxy
	case n == 2:
		return Star
	case n <= 4:
		return Planet
	case n <= 8:
		return Moon
	}
	return Comet
}

// Sponsor returns the default sponsor of s (zuse.hoon +sein:title): a galaxy
// sponsors itself; a star's sponsor is its low 8 bits, a planet's its low 16,
// a moon's its low 32 and a comet's its low 16. The result always has a
// lower Class than s, unless s is a galaxy.
//
// This is the sponsor a ship is born with. After an escape the real sponsor
// differs; use Sponsors to override it.
func (s Ship) Sponsor() Ship {
	switch s.Class() {
	case Star:
		return Ship{Lo: s.Lo & 0xff}
	case Planet, Comet:
		return Ship{Lo: s.Lo & 0xffff}
	case Moon:
		return Ship{Lo: s.Lo & 0xffffffff}
	}
	return s
}

// MaxChainLen is the longest sponsorship chain: each step lowers the class,
// so from a comet it is at most comet, moon, planet, star, galaxy.
const MaxChainLen = 5

// AppendChain appends the default sponsorship chain of s (Hoon's +saxo) to
// dst: s itself, its sponsor, that ship's sponsor, and so on up to and
// including a galaxy. The chain has 1 to MaxChainLen ships; with
// cap(dst)-len(dst) >= MaxChainLen it allocates nothing.
func (s Ship) AppendChain(dst []Ship) []Ship {
	return (*Sponsors)(nil).AppendChain(dst, s)
}

// Sponsors is a table of sponsor overrides, for ships that have escaped to a
// sponsor other than their default. Ships without an override get the
// default (Ship.Sponsor).
//
// Every override names a sponsor of strictly higher rank (lower Class) than
// the ship, which Set enforces, so no set of overrides can form a cycle and
// every chain ends at a galaxy within MaxChainLen ships.
//
// The zero value is an empty table, ready to use, and a nil *Sponsors reads
// as an empty table. Concurrency: build the table with Set and Delete from
// one goroutine, then treat it as read-only; Sponsor, AppendChain and Len may
// then be called from any number of goroutines at once. Set and Delete must
// not run concurrently with any other method. To change a table in use,
// Clone it, change the clone and publish the clone (for example through an
// atomic.Pointer).
type Sponsors struct {
	override map[Ship]Ship
}

// ErrBadSponsor is wrapped by the errors Set returns.
var ErrBadSponsor = errors.New("lane: invalid sponsor override")

// Set records sponsor as the sponsor of ship. It fails, changing nothing, if
// ship is a galaxy (a galaxy has no sponsor but itself) or if sponsor does
// not rank strictly higher than ship (for example a planet sponsored by a
// planet, or a star by a planet).
func (sp *Sponsors) Set(ship, sponsor Ship) error {
	sc, pc := ship.Class(), sponsor.Class()
	if sc == Galaxy {
		return fmt.Errorf("%w: %s is a galaxy and sponsors itself", ErrBadSponsor, ship)
	}
	if pc >= sc {
		return fmt.Errorf("%w: %s (%s) cannot sponsor %s (%s)", ErrBadSponsor, sponsor, pc, ship, sc)
	}
	if sp.override == nil {
		sp.override = make(map[Ship]Ship)
	}
	sp.override[ship] = sponsor
	return nil
}

// Delete removes the override for ship, if any, restoring its default.
func (sp *Sponsors) Delete(ship Ship) {
	if sp != nil {
		delete(sp.override, ship)
	}
}

// Len returns the number of overrides.
func (sp *Sponsors) Len() int {
	if sp == nil {
		return 0
	}
	return len(sp.override)
}

// Clone returns an independent copy of sp.
func (sp *Sponsors) Clone() *Sponsors {
	c := &Sponsors{}
	if sp != nil && len(sp.override) > 0 {
		c.override = make(map[Ship]Ship, len(sp.override))
		for k, v := range sp.override {
			c.override[k] = v
		}
	}
	return c
}

// Sponsor returns the sponsor of ship: its override if one is set, else the
// default.
func (sp *Sponsors) Sponsor(ship Ship) Ship {
	if sp != nil {
		if p, ok := sp.override[ship]; ok {
			return p
		}
	}
	return ship.Sponsor()
}

// AppendChain appends the sponsorship chain of ship to dst, applying
// overrides: ship itself, then each sponsor in turn, up to and including a
// galaxy. The chain has 1 to MaxChainLen ships; with
// cap(dst)-len(dst) >= MaxChainLen it allocates nothing.
func (sp *Sponsors) AppendChain(dst []Ship, ship Ship) []Ship {
	dst = append(dst, ship)
	cur := ship
	for range MaxChainLen - 1 {
		if cur.Class() == Galaxy {
			break
		}
		next := sp.Sponsor(cur)
		if next.Class() >= cur.Class() {
			// Unreachable: Set and the default rule both lower the class.
			// Stopping here keeps the loop bounded whatever the table holds.
			break
		}
		dst = append(dst, next)
		cur = next
	}
	return dst
}
