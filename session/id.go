package session

import "fmt"

// ID is a session id: a publisher's name for one session with one
// subscriber. Zero means no session.
type ID uint64

// String returns the id as 16 lowercase hex digits, as reserved paths
// carry it.
func (id ID) String() string { return fmt.Sprintf("%016x", uint64(id)) }

// IDSource draws session ids. Seeded once per process from a random seed,
// it gives a restarted publisher ids unrelated to its previous ones, which
// is all subscribers need to notice the restart.
type IDSource struct {
	state uint64
}

// NewIDSource returns a source seeded with seed.
func NewIDSource(seed uint64) IDSource { return IDSource{state: seed} }

// Next returns a fresh nonzero id (splitmix64).
func (s *IDSource) Next() ID {
	for {
		s.state += 0x9e3779b97f4a7c15
		z := s.state
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		if z != 0 {
			return ID(z)
		}
	}
}
