package route

import (
	"fmt"
	"math/bits"
	"net/netip"
	"time"
)

// Config holds the route table's caps and timings. Its zero value is the
// default table: zero fields take the defaults in constants.go. Validate
// (and New) rejects negative caps and timings with a *ConfigError.
type Config struct {
	MaxRoutes int
	// LaneClockSlots sizes the record of when each lane was last heard
	// (a power of two; rounded up). Zero: DefaultLaneClockSlots for a
	// relay, EndpointLaneClockSlots for an endpoint's table.
	LaneClockSlots    int
	DirectLaneExpiry  time.Duration
	ProbeTimeout      time.Duration
	CandidateFailures int
	ProvenFailures    int
	BadLaneHold       time.Duration
	// FailedHintHold is how long after a hint was dropped as dead no new
	// hint is taken for the same ship.
	FailedHintHold time.Duration
	// ChallengerHold is how long a challenger keeps its place against a
	// newer lane without being heard.
	ChallengerHold time.Duration
	// MoveSilence is how long a direct lane must have been silent before
	// a proven challenger replaces it.
	MoveSilence time.Duration
	// SourceDivisor caps the routes created on behalf of one source
	// address at MaxRoutes/SourceDivisor; zero takes
	// DefaultRouteSourceDivisor, negative means no cap.
	SourceDivisor int
	// SourceSlots is how many per-source counters are kept (a power of
	// two; rounded up); zero takes DefaultRouteSourceSlots.
	SourceSlots int
	// HintNets are networks besides the public internet that a next-hop
	// may name (an operator's LAN, loopback in tests); see HintAllowed.
	HintNets []netip.Prefix
	// ConfiguredWins makes configured lanes (SetStatic, SetRelays) final:
	// a ship with one is routed there alone and nothing learned about it
	// is kept. A relay sets it: its operator's word outranks the wire's.
	// Off (an endpoint), a configured lane is where a route starts, and
	// routes tighten past it.
	ConfiguredWins bool
	// Rubric chooses a plan's lanes (see Rubric); nil is Design, the
	// rubric as specified. Only the simulator sets another.
	Rubric Rubric
	// Seed seeds the table's hashes (the lane clock's slots, the
	// per-source counters); zero draws one from crypto/rand. The
	// simulator sets it so that runs repeat.
	Seed uint64
}

// ConfigError is a Config field that Validate (and New) rejects.
type ConfigError struct {
	Field string // the Config field, such as "MaxRoutes"
	Value any    // its value
	Want  string // what is wanted, such as "a positive whole number"
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("routes: Config.%s %v: want %s", e.Field, e.Value, e.Want)
}

// Validate reports the first field of c that New would reject, as a
// *ConfigError: a negative cap or timing (zero takes the default; a
// negative SourceDivisor is no per-source cap). Nil if New accepts c.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxRoutes", c.MaxRoutes}, {"LaneClockSlots", c.LaneClockSlots}, {"CandidateFailures", c.CandidateFailures},
		{"ProvenFailures", c.ProvenFailures}, {"SourceSlots", c.SourceSlots}} {
		if f.v < 0 {
			return &ConfigError{Field: f.name, Value: f.v, Want: "a positive whole number"}
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"DirectLaneExpiry", c.DirectLaneExpiry}, {"ProbeTimeout", c.ProbeTimeout},
		{"BadLaneHold", c.BadLaneHold}, {"FailedHintHold", c.FailedHintHold}, {"ChallengerHold", c.ChallengerHold},
		{"MoveSilence", c.MoveSilence}} {
		if f.v < 0 {
			return &ConfigError{Field: f.name, Value: f.v, Want: `a positive duration such as "2m"`}
		}
	}
	return nil
}

func (c *Config) fill() {
	if c.MaxRoutes <= 0 {
		c.MaxRoutes = DefaultMaxRoutes
	}
	if c.LaneClockSlots <= 0 {
		c.LaneClockSlots = EndpointLaneClockSlots
	}
	c.LaneClockSlots = 1 << bits.Len(uint(c.LaneClockSlots-1))
	if c.DirectLaneExpiry <= 0 {
		c.DirectLaneExpiry = DefaultDirectLaneExpiry
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.CandidateFailures <= 0 {
		c.CandidateFailures = DefaultCandidateFailures
	}
	if c.ProvenFailures <= 0 {
		c.ProvenFailures = DefaultProvenFailures
	}
	if c.BadLaneHold <= 0 {
		c.BadLaneHold = DefaultBadLaneHold
	}
	if c.FailedHintHold <= 0 {
		c.FailedHintHold = DefaultFailedHintHold
	}
	if c.ChallengerHold <= 0 {
		c.ChallengerHold = DefaultChallengerHold
	}
	if c.MoveSilence <= 0 {
		c.MoveSilence = DefaultMoveSilence
	}
	if c.SourceDivisor == 0 {
		c.SourceDivisor = DefaultRouteSourceDivisor
	}
	if c.SourceSlots <= 0 {
		c.SourceSlots = DefaultRouteSourceSlots
	}
	c.SourceSlots = 1 << bits.Len(uint(c.SourceSlots-1))
	if c.Rubric == nil {
		c.Rubric = Design{}
	}
}
