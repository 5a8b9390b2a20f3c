package pki

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/urbit-relay/relay/lane"
)

// Caps on a snapshot. Each is a named default; Load and ParseSnapshot take
// the entry cap as an argument so that a deployment can raise it.
const (
	// DefaultMaxEntries caps a snapshot's ships. Azimuth had some 10^5
	// ships with networking keys in 2025; 2^19 leaves room to grow, and at
	// about 100 bytes of map per ship (a 16-byte key, a 40-byte value and
	// the map's overhead) bounds a snapshot near 50 MiB.
	DefaultMaxEntries = 1 << 19
	// MaxLineLen caps a line: a comet's @p (57 bytes), two numbers and the
	// 130 hex digits of a pass fit in a quarter of it.
	MaxLineLen = 512
	// MaxFileBytes caps the file Load reads: DefaultMaxEntries lines of a
	// planet's 170-odd bytes is under 90 MiB.
	MaxFileBytes = 128 << 20
)

// ErrSnapshot is wrapped by every error ParseSnapshot and Load return.
var ErrSnapshot = errors.New("pki: bad snapshot")

// key is what the verifier keeps per ship: 40 bytes, no pointers.
type key struct {
	life, rift uint32
	sign       [ed25519.PublicKeySize]byte
}

// Entry is one ship of a snapshot.
type Entry struct {
	Ship lane.Ship
	Life uint32 // Azimuth's keyRevisionNumber: the key's life, at least 1
	Rift uint32 // Azimuth's continuityNumber: breaches so far
	Pass Pass
}

// Snapshot is a parsed Azimuth snapshot: each ship's current life, rift and
// signing key. It is immutable once built; a reload builds a new one.
type Snapshot struct {
	keys map[lane.Ship]key
}

// Len is the number of ships.
func (s *Snapshot) Len() int { return len(s.keys) }

// lookup returns ship's key.
func (s *Snapshot) lookup(ship lane.Ship) (key, bool) {
	k, ok := s.keys[ship]
	return k, ok
}

// AppendLine appends e as one snapshot line, newline included: the form
// ParseSnapshot reads.
func (e *Entry) AppendLine(dst []byte) []byte {
	dst = e.Ship.AppendPatp(dst)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(e.Life), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(e.Rift), 10)
	dst = append(dst, ' ')
	dst = hex.AppendEncode(dst, e.Pass[:])
	return append(dst, '\n')
}

// ParseSnapshot reads a snapshot (the format is in the package comment).
// It stops at the first bad line with an error naming it (line numbers
// count from 1), and refuses more than maxEntries ships (0 means
// DefaultMaxEntries). The result does not alias data.
func ParseSnapshot(data []byte, maxEntries int) (*Snapshot, error) {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	s := &Snapshot{keys: make(map[lane.Ship]key)}
	for n := 1; len(data) > 0; n++ {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		if len(line) > MaxLineLen {
			return nil, fmt.Errorf("%w: line %d: longer than %d bytes", ErrSnapshot, n, MaxLineLen)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var e Entry
		if err := parseEntry(line, &e); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrSnapshot, n, err)
		}
		if _, dup := s.keys[e.Ship]; dup {
			return nil, fmt.Errorf("%w: line %d: %s listed twice", ErrSnapshot, n, e.Ship)
		}
		if len(s.keys) == maxEntries {
			return nil, fmt.Errorf("%w: line %d: more than %d ships", ErrSnapshot, n, maxEntries)
		}
		k := key{life: e.Life, rift: e.Rift}
		copy(k.sign[:], e.Pass.SignKey())
		s.keys[e.Ship] = k
	}
	return s, nil
}

// parseEntry reads one non-empty, non-comment line.
func parseEntry(line []byte, e *Entry) error {
	f := bytes.Fields(line)
	if len(f) != 4 {
		return fmt.Errorf("want 4 fields (@p life rift pass), got %d", len(f))
	}
	ship, err := lane.ParseShip(string(f[0]))
	if err != nil {
		return err
	}
	life, err := strconv.ParseUint(string(f[1]), 10, 32)
	if err != nil || life == 0 {
		return fmt.Errorf("life %q: want a whole number from 1 to %d", f[1], uint32(1<<32-1))
	}
	rift, err := strconv.ParseUint(string(f[2]), 10, 32)
	if err != nil {
		return fmt.Errorf("rift %q: want a whole number from 0 to %d", f[2], uint32(1<<32-1))
	}
	if hex.DecodedLen(len(f[3])) != PassLen {
		return fmt.Errorf("pass: want %d hex digits, got %d", 2*PassLen, len(f[3]))
	}
	if _, err := hex.Decode(e.Pass[:], f[3]); err != nil {
		return fmt.Errorf("pass: %v", err)
	}
	if e.Pass[0] != passTag {
		return fmt.Errorf("pass: starts %02x, want %02x ('b')", e.Pass[0], passTag)
	}
	if ship.Class() == lane.Comet {
		if got := CometShip(&e.Pass); got != ship {
			return fmt.Errorf("comet %s: its pass is the key of %s", ship, got)
		}
		if life != 1 {
			return fmt.Errorf("comet %s: life %d, comets have life 1", ship, life)
		}
	}
	e.Ship, e.Life, e.Rift = ship, uint32(life), uint32(rift)
	return nil
}

// Load reads and parses the snapshot file at path (ParseSnapshot), refusing
// a file over MaxFileBytes. Errors name the file.
func Load(path string, maxEntries int) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s: %d bytes, more than %d", ErrSnapshot, path, st.Size(), MaxFileBytes)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("pki: %s: %w", path, err)
	}
	s, err := ParseSnapshot(data, maxEntries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
