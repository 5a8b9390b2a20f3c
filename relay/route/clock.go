package route

import "time"

// Clock gives monotonic time as a duration since an arbitrary epoch. Neither
// the route table nor the decision cores built on it read time themselves:
// their loops ask a Clock once per batch or tick and pass the time in.
type Clock interface{ Now() time.Duration }

// SystemClock is the real monotonic clock, measured from its creation. Under
// testing/synctest it follows the bubble's fake time.
type SystemClock struct{ start time.Time }

// NewSystemClock returns a clock reading zero now.
func NewSystemClock() *SystemClock { return &SystemClock{start: time.Now()} }

// Now returns the time since the clock was created.
func (c *SystemClock) Now() time.Duration { return time.Since(c.start) }
